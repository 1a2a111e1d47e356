"""`repro train --runtime host --venv DIR`: the venv's python trains, and run.yaml records the venv's identity
as a docker run records its image (environment, lock sha256, and the key, python and path)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.env.venv import build_venv
from pipeline.workspace import Workspace
from tests.test_env_venv import _lock, local_index, setup  # noqa: F401  (the fixture and the lock helper)

REPRO = [sys.executable, "-m", "pipeline"]
RECORD = "2025-09-23_MuonCustomSizing"
SHORT = ["--set", "scheduled_steps=2", "--set", "extension_steps=0", "--set", "val_every=2",
         "--set", "warmup_steps=1", "--set", "muon_momentum_warmup_steps=1"]


def _give_it_torch(venv: Path) -> None:
    """The test's venv is built from small generated wheels; torch (hundreds of MB) comes from this
    interpreter's site-packages through a .pth file, and torchrun is the venv's own script for it."""
    import torch

    site_packages = next(venv.glob("lib/python*/site-packages"))
    (site_packages / "repro-test-torch.pth").write_text(str(Path(torch.__file__).parent.parent) + "\n")
    torchrun = venv / "bin" / "torchrun"
    torchrun.write_text(f"#!{venv / 'bin' / 'python'}\nfrom torch.distributed.run import main\nmain()\n")
    torchrun.chmod(0o755)


def test_a_host_run_records_the_venv_it_trained_in(setup, tmp_path):  # noqa: F811
    pytest.importorskip("torch")
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        identity = build_venv(ws, env, lock, python=sys.executable)
    _give_it_torch(Path(identity.path))
    for folder in ("records", "datasets"):  # the test registry holds the record the run is judged against
        shutil.copytree(Workspace.resolve().registry / folder, ws.registry / folder)
    data = tmp_path / "synth"
    made = subprocess.run(REPRO + ["data", "synth", "--out", str(data), "--train-tokens", "100000",
                                   "--val-tokens", "20000"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    done = subprocess.run(REPRO + ["--root", str(ws.root), "--registry", str(ws.registry), "train",
                                   "--trainer", "native", "--runtime", "host", "--venv", identity.path,
                                   "--preset", "tiny", "--nproc", "1", *SHORT, "--data-dir", str(data),
                                   "--runs-dir", str(tmp_path / "runs"), "--json"],
                          capture_output=True, text=True, timeout=400, env={**os.environ})
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    run = Path(json.loads(done.stdout)["run_dir"])
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["environment"] == "tiny" and meta["environment_lock_sha256"] == lock.sha256
    host = meta["host_environment"]
    assert host["executable"] == identity.python  # the venv's python trained, found by the runtime probe
    assert host["venv"]["key"] == identity.key and host["venv"]["path"] == identity.path
    assert meta["command"][0] == str(Path(identity.path) / "bin" / "torchrun")
    # compile caches persist under the workspace's cache, keyed by the venv and the program
    assert meta["compile_cache"].startswith(str(ws.cache / "compile-cache" / "host-"))
