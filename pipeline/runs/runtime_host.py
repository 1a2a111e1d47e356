"""The host runtime: `torchrun` as a subprocess of this machine's Python, for nodes that already are
containers (common on rented GPUs) and for development machines.

    repro train --trainer native --runtime host --preset tiny --data-dir data/synth
    repro train --runtime host --python ~/.cache/repro/venvs/<key>/bin/python    (a `repro env venv`)

The trainer runs in its own session, so Ctrl-C reaches only repro, which then stops the whole
process group (torchrun and its workers) itself and still writes the run's status. The Python that
trains is repro's own unless a virtualenv built by `repro env venv` is given; what the runtime probe
(pipeline/probe.py) finds in it is recorded in run.yaml (`host_environment`), with the venv's
identity (key, lock sha256, python, path) when there is one.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from pipeline.errors import MissingDependency
from pipeline.probe import RuntimeProbe
from pipeline.runs.launch import Launch, Outcome, Tee, interrupts_deferred

STOP_TIMEOUT_S = 30  # torchrun gives workers time to exit after SIGTERM before it kills them

def probe_environment(python: str = sys.executable) -> RuntimeProbe:
    """What the interpreter that will train has; torch must import."""
    from pipeline.probe import INSTALL_TORCH, probe_interpreter

    found = probe_interpreter(python)
    if found.torch is None:
        raise MissingDependency(f"PyTorch is not importable in {python}: {found.errors.get('torch')}",
                                f"{INSTALL_TORCH}; or build an environment with `repro env venv`, or use --runtime "
                                "docker")
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
    """Stop the launcher and its workers. torchrun answers a signal with a traceback of its own (SignalException)
    in the run's output; it is only the launcher, so it is stopped outright (SIGKILL), and its workers, each in a
    session of its own, get the SIGTERM it would have passed on, then SIGKILL after `timeout_s`."""
    tee.note(f"interrupted: stopping the training processes (SIGTERM, then SIGKILL after {timeout_s:.0f} s)")
    groups = [proc.pid] + _children(proc.pid)  # the launcher's group, then each worker's (start_new_session both)
    try:
        proc.kill()
    except ProcessLookupError:
        pass
    proc.wait()
    _signal_groups(groups[1:], signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and _alive_in(groups):
        time.sleep(0.2)
    _signal_groups(groups, signal.SIGKILL)  # whatever did not stop in time


def _signal_groups(groups: list[int], sig: int) -> None:
    for group in groups:
        try:
            os.killpg(group, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _proc_stat() -> list[tuple[int, str, int, int]]:
    """(pid, state, ppid, process group) of every process, from /proc/<pid>/stat."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                fields = Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()
                out.append((int(entry.name), fields[0], int(fields[1]), int(fields[2])))
            except (OSError, IndexError, ValueError):
                continue
    return out


def _children(pid: int) -> list[int]:
    return [p for p, _, ppid, _ in _proc_stat() if ppid == pid]


def _alive_in(groups: list[int]) -> bool:
    """Whether a process of these groups still runs; zombies (exited, not yet reaped) do not count."""
    wanted = set(groups)
    return any(group in wanted and state != "Z" for _, state, _, group in _proc_stat())


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
