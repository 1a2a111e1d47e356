"""The host runtime: `torchrun` as a subprocess of this machine's Python, for nodes that already are
containers (common on rented GPUs) and for development machines.

    repro train --trainer native --runtime host --preset tiny --data-dir data/synth

The trainer runs in its own session, so Ctrl-C reaches only repro, which then stops the whole
process group (torchrun and its workers) itself and still writes the run's status. The Python,
PyTorch and Triton found are recorded in run.yaml (`host_environment`).
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.errors import MissingDependency
from pipeline.runs.launch import Launch, Outcome, Tee, interrupts_deferred

STOP_TIMEOUT_S = 30  # torchrun gives workers time to exit after SIGTERM before it kills them

_PROBE = """
import json, platform
out = {"python": platform.python_version(), "executable": __import__("sys").executable}
try:
    import torch
    out.update(torch=torch.__version__, torch_cuda=torch.version.cuda,
               cuda_devices=torch.cuda.device_count() if torch.cuda.is_available() else 0)
except Exception as exc:
    out["torch_error"] = f"{type(exc).__name__}: {exc}"
try:
    import triton
    out["triton"] = triton.__version__
except Exception:
    out["triton"] = None
print(json.dumps(out))
"""


def probe_environment(python: str = sys.executable) -> dict:
    """Versions of the interpreter that will train: Python, torch (+ its CUDA), Triton, visible GPUs."""
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingDependency(f"cannot run {python} to read its torch version: {exc}",
                                "check the Python environment, or use --runtime docker") from None
    if done.returncode != 0:
        raise MissingDependency(f"{python} failed to report its versions: {done.stderr.strip()[-300:]}",
                                "check the Python environment, or use --runtime docker")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if "torch_error" in found:
        raise MissingDependency(f"PyTorch is not importable in {python}: {found['torch_error']}",
                                "install it (`pip install -e '.[train]'`), or use --runtime docker")
    return found


def find_torchrun(python: str = sys.executable) -> str:
    """torchrun of the same environment as `python`, so the probed versions are the ones that train."""
    beside = Path(python).with_name("torchrun")
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("torchrun")
    if found:
        return found
    raise MissingDependency("torchrun is not installed beside this Python nor on PATH",
                            "install PyTorch in this environment (`pip install -e '.[train]'`)")


def _pump(fd: int, tee: Tee) -> None:
    while chunk := os.read(fd, 1 << 16):
        tee.write(chunk)


def _drain(fd: int, tee: Tee, deadline: float) -> None:
    """What the stopped processes still printed; a grandchild that kept the pipe open is not waited for."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            return
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return
        tee.write(chunk)


def _stop_group(proc: subprocess.Popen, tee: Tee, timeout_s: float) -> None:
    tee.note(f"interrupted: stopping the training processes (SIGTERM, then SIGKILL after {timeout_s:.0f} s)")
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()
    try:  # workers that outlived torchrun in the same group
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run_host(launch: Launch, tee: Tee, stop_timeout_s: float = STOP_TIMEOUT_S) -> Outcome:
    env = {**os.environ, **launch.env}
    try:
        proc = subprocess.Popen(list(launch.argv), cwd=launch.workdir, env=env, stdin=subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as exc:
        tee.note(f"could not start {launch.argv[0]}: {exc}")
        return Outcome(None, aborted=False)
    fd = proc.stdout.fileno()
    try:
        _pump(fd, tee)
        return Outcome(proc.wait(), aborted=False)
    except KeyboardInterrupt:
        with interrupts_deferred():
            _stop_group(proc, tee, stop_timeout_s)
            _drain(fd, tee, time.monotonic() + 5)
        return Outcome(proc.returncode, aborted=True)
    finally:
        proc.stdout.close()
