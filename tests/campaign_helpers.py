"""Shared by the campaign tests: run `repro` as a user would, and read what a bundle holds."""

from __future__ import annotations

import subprocess
import sys
import tarfile
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
