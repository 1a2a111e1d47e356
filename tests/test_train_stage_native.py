"""`repro train --trainer native --runtime host`: train/ under the real torchrun (gloo, 2 CPU processes) on
generated shards, leaving a run directory that `repro verify` reads."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys

import pytest
import yaml

from pipeline.data.verify import data_lock_digest
from pipeline.records.program import cut_program
from pipeline.runs.train_plan import native_program_text
from tests.paths import REPO_ROOT

REPRO = [sys.executable, "-m", "pipeline"]
RECORD = "2025-09-23_MuonCustomSizing"
# the tiny preset cut to 4 steps: enough to see validation, steps and the end, quick on 2 shared cores
SHORT = ["--set", "scheduled_steps=3", "--set", "extension_steps=1", "--set", "val_every=2",
         "--set", "warmup_steps=1", "--set", "muon_momentum_warmup_steps=2"]

pytestmark = pytest.mark.skipif(not (REPO_ROOT / "train" / "__main__.py").is_file(),
                                reason="the native trainer (train/__main__.py) is not in this checkout")


def test_program_identity_is_the_text_the_trainer_logs():
    pytest.importorskip("torch")
    from train.log import program_text

    assert native_program_text() == program_text().encode()


def test_native_host_run_and_verify(tmp_path):
    data = tmp_path / "synth"
    made = subprocess.run(REPRO + ["data", "synth", "--out", str(data), "--train-tokens", "200000",
                                   "--val-tokens", "20000"], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    done = subprocess.run(REPRO + ["train", "--trainer", "native", "--runtime", "host", "--preset", "tiny",
                                   "--nproc", "2", *SHORT, "--data-dir", str(data),
                                   "--runs-dir", str(tmp_path / "runs"), "--json"],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "REPRO_HOME": str(tmp_path)})  # its cache/ (compile caches) is the test's
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    result = json.loads(done.stdout)
    assert result["status"] == "succeeded" and result["last_step"] == 4 and result["scheduled_steps"] == 4
    assert "step:4/4 val_loss:" in done.stderr  # the training output streamed (to stderr under --json)

    (run,) = (tmp_path / "runs" / RECORD).iterdir()
    assert str(run) == result["run_dir"]
    assert sorted(p.name for p in run.iterdir()) == sorted(
        ["run.yaml", "status", "log.txt", "stdout.txt", "metrics.jsonl", "preflight.json"])
    meta = yaml.safe_load((run / "run.yaml").read_text())
    assert meta["trainer"] == "native" and meta["preset"] == "tiny" and meta["world_size"] == 2
    assert meta["overrides"] == SHORT[1::2] and meta["status"] == "succeeded" and meta["exit_code"] == 0
    assert meta["command"][1:4] == ["--standalone", "--nproc_per_node=2", "-m"]
    assert meta["data_lock_sha256"] == data_lock_digest(data)
    log = (run / "log.txt").read_bytes()
    assert meta["program_sha256"] == hashlib.sha256(cut_program(log)).hexdigest()
    events = [json.loads(line)["event"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert events[0] == "config" and events.count("step") == 4  # written by the trainer itself, not derived

    verdict = subprocess.run(REPRO + ["verify", "--json", str(run)], capture_output=True, text=True, timeout=120)
    judged = json.loads(verdict.stdout)
    assessed = judged["runs"][0]
    assert assessed["trainer"] == "native" and assessed["status"] == "succeeded" and assessed["completed"]
    assert assessed["program"]["status"] == "native" and assessed["problems"] == []
    assert {"code": "trainer.native", "severity": "deviation", "data": {}} in assessed["findings"]
    assert "trainer: native (train/), not the record's program" in judged["deviations"]

