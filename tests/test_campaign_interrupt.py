"""Every interrupted run of a local-engine campaign ends marked (issue 30).

A real `repro campaign submit --engine local` is started in its own session, as a shell would, and stopped
the two ways a user's run is stopped: Ctrl-C (SIGINT to its process group, which is what a terminal sends)
and SIGKILL of everything (the engine, its task and the trainer: an out-of-memory kill, a closed laptop).
Afterwards `campaign status`, `wait` and `collect` must all see the run as aborted, never `running`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pipeline.workspace import CHECKOUT_ROOT
from tests.campaign_helpers import explain, repro, run_started, task_record, trainer_pid

pytestmark = pytest.mark.slow

# long enough that the run is still training when the test stops it
LONG = ("--demo", "--preset", "tiny", "--set", "scheduled_steps=2000", "--set", "extension_steps=0",
        "--set", "warmup_steps=0", "--set", "val_every=0", "--set", "data_cycle=true", "--runs", "1",
        "--engine", "local")


def _start(root: Path, folder: Path) -> tuple[subprocess.Popen, Path, int]:
    """The engine, the run directory its task made, and the trainer's pid once it trains."""
    engine = subprocess.Popen([sys.executable, "-m", "pipeline", "--root", str(root), "campaign", "submit", *LONG,
                               "--campaign", str(folder)], cwd=CHECKOUT_ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    task = task_record(folder, 0, until=lambda t: run_started(folder, t))
    run = folder / task["run_dir"]
    pid = trainer_pid(run)
    deadline = time.monotonic() + 300
    while not ((run / "log.txt").exists() and b"step:" in (run / "log.txt").read_bytes()):
        assert time.monotonic() < deadline and engine.poll() is None, "the trainer never logged a step"
        time.sleep(0.5)
    return engine, run, pid


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/status").read_text().find("State:\tZ") >= 0


def _status(root: Path, folder: Path) -> dict:
    done = repro(root, "campaign", "status", str(folder), "--json")
    assert done.returncode == 0, explain(done)
    return json.loads(done.stdout)


def _after_the_stop(root: Path, folder: Path, run: Path) -> dict:
    """What every reader says afterwards: aborted, and nothing waits on it."""
    status = _status(root, folder)
    (task,) = status["tasks"]
    assert task["outcome"] == "aborted" and status["active"] is False, status
    assert [r["status"] for r in task["runs"]] == ["aborted"]
    assert (run / "status").read_text().strip() == "aborted"
    assert yaml.safe_load((run / "run.yaml").read_text())["status"] == "aborted"  # run.yaml ends the same way
    started = time.monotonic()
    waited = repro(root, "campaign", "wait", str(folder), "--poll", "1", "--timeout", "60")
    assert waited.returncode == 1 and "did not succeed: task(s) 0" in waited.stderr, explain(waited)
    assert time.monotonic() - started < 50
    collected = repro(root, "campaign", "collect", str(folder))
    assert collected.returncode == 1, explain(collected)
    assert "was aborted (1 attempt(s), none ran to its end)" in collected.stderr, explain(collected)
    assert "| attempt |" in collected.stderr and "invalid" not in collected.stdout + collected.stderr
    assert "Traceback" not in collected.stderr
    return task


def test_ctrl_c_of_the_local_engine_ends_the_run_aborted(tmp_path):
    folder = tmp_path / "c"
    engine, run, trainer = _start(tmp_path, folder)
    os.killpg(engine.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends: the engine's whole process group
    out, err = engine.communicate(timeout=200)
    assert engine.returncode == 130, f"exit {engine.returncode}\n{out}\n{err}"
    assert "interrupted" in err and "Traceback" not in err, err
    assert _gone(trainer)
    stdout = (run / "stdout.txt").read_text()
    assert f"run {run.name} aborted" in stdout
    # the log of a cancelled run ends with repro's own line, with no signal traceback of torchrun's before it
    assert "Traceback" not in stdout and "SignalException" not in stdout, stdout[-3000:]
    task = _after_the_stop(tmp_path, folder, run)
    assert "ended without recording" not in (task["detail"] or ""), task  # the task wrote it itself


def test_sigkill_of_the_local_engine_task_and_trainer_is_marked_aborted_by_status(tmp_path):
    folder = tmp_path / "c"
    engine, run, trainer = _start(tmp_path, folder)
    task_pid = int((folder / "tasks" / "0-local-1.lock").read_text().split()[1])
    groups = {os.getpgid(pid) for pid in (engine.pid, task_pid, trainer)}  # each runs in a group of its own
    assert len(groups) == 3
    for group in groups:
        os.killpg(group, signal.SIGKILL)
    engine.communicate(timeout=60)
    deadline = time.monotonic() + 30
    while not (_gone(task_pid) and _gone(trainer)):
        assert time.monotonic() < deadline
        time.sleep(0.2)
    assert (run / "status").read_text().strip() == "running"  # nothing could write it
    task = _after_the_stop(tmp_path, folder, run)
    assert "ended without recording how its run ended" in task["detail"], task
    assert "marked aborted by `repro campaign status`" in (run / "stdout.txt").read_text()
