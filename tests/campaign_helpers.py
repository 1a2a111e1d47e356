"""Shared by the campaign tests: run `repro` as a user would, and read what a bundle holds."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import yaml

from pipeline.workspace import CHECKOUT_ROOT

# The tiny preset cut to two steps, no warm-up: a run is then mostly process start-up (tens of seconds on a
# loaded 2-core machine), which is what a campaign test exercises.
QUICK = ("--demo", "--preset", "tiny", "--set", "scheduled_steps=2", "--set", "extension_steps=0",
         "--set", "warmup_steps=0")


def repro(root: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", "--root", str(root), *args], capture_output=True,
                          text=True, cwd=CHECKOUT_ROOT, timeout=timeout)


def explain(done: subprocess.CompletedProcess) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout[-4000:]}\n--- stderr\n{done.stderr[-4000:]}"


def bundle_of(campaign: Path) -> Path:
    bundles = sorted((campaign / "bundles").glob("*.tar.gz"), key=lambda p: p.stat().st_mtime)
    assert bundles, f"no bundle in {campaign / 'bundles'}"
    return bundles[-1]


def bundle_members(bundle: Path) -> dict[str, bytes]:
    """Members by their name inside the bundle's top folder."""
    out = {}
    with tarfile.open(bundle) as tar:
        for info in tar.getmembers():
            if info.isfile():
                out[info.name.split("/", 1)[1]] = tar.extractfile(info).read()
    return out


def bundle_manifest(bundle: Path) -> dict:
    return yaml.safe_load(bundle_members(bundle)["manifest.yaml"])


def task_record(folder: Path, index: int, timeout_s: float = 300, until=lambda task: True) -> dict:
    """Task `index`'s record once `until(task)` holds (its run planned, say)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for path in (folder / "tasks").glob(f"{index}-*.json"):
            try:
                task = json.loads(path.read_text())
            except ValueError:  # never: records are replaced atomically; kept so a failure names the file
                raise AssertionError(f"{path} is not JSON") from None
            if until(task):
                return task
        time.sleep(0.2)
    raise AssertionError(f"task {index} of {folder} did not get there within {timeout_s} s")


def run_started(folder: Path, task: dict) -> bool:
    """The task's run directory exists and is marked running (the run is under way)."""
    return task.get("run_dir") is not None and (folder / task["run_dir"] / "status").is_file()


def trainer_pid(run: Path, timeout_s: float = 300) -> int:
    """The trainer process of a run (torchrun's worker: `python -m train ... --log-file RUN/log.txt`)."""
    needle = f"{run}/log.txt".encode()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                argv = (proc / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if needle in argv and not any(b"torchrun" in a for a in argv):
                return int(proc.name)
        time.sleep(0.2)
    raise AssertionError(f"no trainer process for {run} within {timeout_s} s")
