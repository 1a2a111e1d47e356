"""`repro env` without an engine: the message when the Docker daemon is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import REPO_ROOT


@pytest.mark.parametrize("args", [["verify", "--image", "x"], ["save", "out.tar", "--image", "x"]])
def test_missing_daemon_says_how_to_start_one(tmp_path, args):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    assert "no Docker engine answers at unix://" in proc.stderr and "make docker-engine" in proc.stderr
    assert "DOCKER_HOST" in proc.stderr and "Traceback" not in proc.stderr


def test_help_lists_every_subcommand():
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "--help"], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0
    for name in ("lock", "build", "verify", "save", "load", "compare", "check-dockerfile", "list"):
        assert name in proc.stdout
