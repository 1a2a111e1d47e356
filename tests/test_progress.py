"""Progress on screen (issue 37): one line per run, updated in place on a terminal, plain periodic lines
elsewhere; `make setup` names each step. The tmux test runs `repro reproduce` in a real terminal and reads the
screen while a run trains."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time

import pytest
import yaml

from pipeline.runs.progress import StepProgress
from tests.paths import REPO_ROOT

STEPS = b"".join(f"step:{i}/40 train_time:{i * 800}ms step_avg:800.00ms\n".encode() for i in range(1, 11))
VAL = b"step:10/40 val_loss:7.1234 train_time:8000ms step_avg:800.00ms\n"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_terminal_gets_one_line_rewritten_in_place():
    screen = io.StringIO()
    progress = StepProgress(screen, "run 1 of 2", tty=True)
    progress.write(STEPS[:30])  # half a line: nothing yet
    assert screen.getvalue() == ""
    progress.write(STEPS[30:] + VAL)
    drawn = screen.getvalue()
    assert "\n" not in drawn and drawn.count("\r\x1b[K") >= 1
    assert drawn.rsplit("\r\x1b[K", 1)[1] == "  run 1 of 2: step 10/40, val loss 7.1234, 800 ms/step, ETA 24 s"
    progress.close()
    assert screen.getvalue().endswith("\r\x1b[K")  # cleared for the run's result line


def test_a_pipe_gets_plain_lines_at_intervals():
    screen, clock = io.StringIO(), Clock()
    progress = StepProgress(screen, "run 1 of 2", tty=False, every_s=15, clock=clock)
    for i in range(1, 41):
        clock.now = i * 0.8
        progress.write(f"step:{i}/40 train_time:{i * 800}ms step_avg:800.00ms\n".encode())
    lines = screen.getvalue().splitlines()
    assert len(lines) == 3 and "\r" not in screen.getvalue()  # at 0.8 s, 16 s and 31.2 s, not 40 lines
    assert lines[0] == "  run 1 of 2: step 1/40, val loss -, 800 ms/step, ETA 31 s"


def test_setup_names_each_step_and_what_it_installs():
    script = (REPO_ROOT / "tools" / "setup_venv.sh").read_text()
    steps = re.findall(r'^step (\d) "([^"]+)"', script, flags=re.M)
    assert [n for n, _ in steps] == ["1", "2", "3", "4", "5"]
    assert "191.8 MB" in script and "188 MB" in script  # what it downloads, and how big


@pytest.mark.slow
def test_a_run_shows_its_steps_in_a_real_terminal(tmp_path):
    if shutil.which("tmux") is None:
        if os.environ.get("REPRO_REQUIRE_TMUX"):
            pytest.fail("REPRO_REQUIRE_TMUX is set and tmux is missing (.ci/run installs it: apt-get install tmux)")
        pytest.skip("tmux is not installed (apt-get install tmux)")
    root = tmp_path / "manifests"
    (root / "records").mkdir(parents=True)
    data = yaml.safe_load((REPO_ROOT / "manifests" / "records" / "demo-cpu-synth.yaml").read_text())
    data.update(name="test-cpu-tiny")
    (root / "records" / "test-cpu-tiny.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    command = (f"cd {REPO_ROOT} && REPRO_REGISTRY={root} {sys.executable} -m pipeline reproduce --demo --record "
               f"test-cpu-tiny --runs 1 --preset tiny --set scheduled_steps=400 --set extension_steps=0 "
               f"--set val_every=100 --work {tmp_path}/work --out {tmp_path}/bundles; sleep 600")
    session = f"repro-progress-{tmp_path.name}"
    subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "160", "-y", "50", command], check=True)
    try:
        seen, deadline = [], time.monotonic() + 600
        while time.monotonic() < deadline:
            screen = subprocess.run(["tmux", "capture-pane", "-p", "-t", session], capture_output=True,
                                    text=True).stdout
            found = re.findall(r"run 1 of 1: step (\d+)/400, val loss \S+, \d+ ms/step, ETA \d+ s", screen)
            if found:
                assert len(found) == 1, screen  # one line, rewritten in place
                seen.append(int(found[0]))
            if len(set(seen)) >= 2 or "verdict:" in screen:
                break
            time.sleep(0.5)
        assert len(set(seen)) >= 2 and seen == sorted(seen), (seen, screen)
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
