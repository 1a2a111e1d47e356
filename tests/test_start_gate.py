"""The start gate that lets two programs take turns on one GPU (benchmarks/sidebyside.py --gate-native): train/
waits after its warm-up until the gate opens, and a pair marks the record's run shared when native's warm-up
reached into the record's timed steps.

    .venv/bin/python -m pytest -q tests/test_start_gate.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchmarks import sidebyside
from tests.paths import REPO_ROOT as REPO
from tests.test_sidebyside import small_shards
from tests.test_train_data import write_corpus


def tiny_native(tmp_path: Path) -> tuple[list[str], dict, Path]:
    """`python -m train --preset tiny` as sidebyside's native command is built: (command, env, cwd)."""
    train_glob, val_glob = write_corpus(tmp_path / "data")
    cmd = [sys.executable, "-m", "train", "--preset", "tiny", "--train-files", train_glob, "--val-files", val_glob,
           "--log-file", str(tmp_path / "native" / "log.txt"), "--metrics-file", str(tmp_path / "native" / "m.jsonl")]
    return cmd, dict(PYTHONPATH=str(REPO)), REPO


def wait_for(path: Path, proc: subprocess.Popen, seconds: float = 240) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert proc.poll() is None, f"the trainer ended (rc {proc.returncode}) before writing {path.name}"
        assert time.monotonic() < deadline, f"no {path.name} after {seconds} s"
        time.sleep(0.05)


@pytest.mark.parametrize("ranks", [1, 2])
def test_the_trainer_waits_at_the_gate_after_its_warm_up(tmp_path, ranks):
    """At 2 ranks (torchrun, gloo) every rank waits: rank 0 says ready after a barrier, none validates or times
    before the gate opens."""
    cmd, env, cwd = tiny_native(tmp_path)
    if ranks > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", *cmd[1:]]
    gate = tmp_path / "gate"
    out = tmp_path / "stdout.txt"
    with out.open("wb") as sink:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=sink, stderr=subprocess.STDOUT,
                                env=dict(os.environ, **env, REPRO_START_GATE=str(gate)))
        wait_for(Path(str(gate) + ".ready"), proc)
        time.sleep(1.0)
        held = out.read_text()
        assert proc.poll() is None and "step:0/" not in held  # warmed up, not validating or timing
        gate.write_text("open\n")
        assert proc.wait(timeout=240) == 0, out.read_text()[-3000:]
    events = [json.loads(line) for line in (tmp_path / "native" / "m.jsonl").read_text().splitlines()]
    kinds = [e["event"] for e in events]
    assert kinds.index("warmup") < kinds.index("start_gate") < kinds.index("val") < kinds.index("step")
    assert next(e for e in events if e["event"] == "start_gate")["waited_s"] >= 1.0
    assert "step:1/" in out.read_text()


def fake_record(tmp_path: Path, delay_s: float) -> tuple[list[str], dict, Path]:
    """A stand-in for the record's program: delay_s of startup, then step 0's validation line and two timed
    steps in the record's format."""
    code = (f"import time; time.sleep({delay_s}); "
            "print('step:0/2 val_loss:10.8000 train_time:0ms step_avg:0.02ms', flush=True); time.sleep(0.5); "
            "print('step:1/2 train_time:500ms step_avg:500.00ms', flush=True); time.sleep(0.5); "
            "print('step:2/2 train_time:1000ms step_avg:500.00ms', flush=True)")
    return [sys.executable, "-c", code], {}, tmp_path


def test_a_gated_pair_times_native_only_after_the_record_has_ended(tmp_path):
    native = tiny_native(tmp_path)
    (tmp_path / "native").mkdir()
    # the record's startup outlasts native's (on the GPU: 72-117 s against 45-58 s); here native gets 240 s
    began = time.time()
    rec, nat = sidebyside.gated_pair(fake_record(tmp_path, 0), native, tmp_path / "record.txt",
                                     tmp_path / "native" / "stdout.txt", [], lead_s=0.0, timeout=600)
    assert rec["rc"] == 0 and nat["rc"] == 0
    # a record that started timing before native was ready: its step times are void, its loss still counts
    assert rec["shared_gpu"] is True and "into this run's timed steps" in rec["void"]
    assert rec["native_ready_before_timing_s"] < 0
    assert nat["gate_wait_s"] >= 0 and nat["startup_s"] < time.time() - began

    ready = tmp_path / "native" / "start-gate.ready"
    native_start = ready.stat().st_mtime - began  # when native was ready in the first pair: the record waits longer
    rec, nat = sidebyside.gated_pair(fake_record(tmp_path, native_start + 20), native, tmp_path / "record.txt",
                                     tmp_path / "native" / "stdout.txt", [], lead_s=0.0, timeout=600)
    assert rec["rc"] == 0 and nat["rc"] == 0
    assert "void" not in rec and not rec.get("shared_gpu") and rec["native_ready_before_timing_s"] > 0
    assert nat["gate_wait_s"] >= rec["native_ready_before_timing_s"]  # it waited through the record's timing
    stdout = (tmp_path / "native" / "stdout.txt").read_text()
    assert stdout.index("step:0/") > 0 and nat["wall_s"] > rec["wall_s"]


def test_a_gated_pair_starts_only_with_the_lead_and_both_needs_left(tmp_path):
    """sidebyside --gate-native: the pair is one item; with less than lead + the record's need + native's need
    left, neither run starts."""
    small_shards(tmp_path / "d")
    matmul = tmp_path / "matmul.json"
    matmul.write_text('{"tflops": 700.0, "gpu": "none", "torch": "-", "cuda": "-", "triton": "-"}')
    out = tmp_path / "sbs"
    assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--gate-native", "20",
                            "--need-s", "record=50", "--need-s", "native=30", "--budget-s", "115",
                            "--matmul-file", str(matmul), "--out", str(out)]) == 0
    runs = json.loads((out / "summary.json").read_text())["runs"]["1"]
    assert runs["record"] == [dict(rc="skipped: out of budget")] == runs["native"]


def test_a_native_run_is_gated_only_with_the_record_run_before_it(tmp_path, capsys):
    """--gate-native pairs run i of the record with run i of native when native follows it; in the order
    native, record each runs once, ungated."""
    small_shards(tmp_path / "d")
    for only, expected in (("record,native", ["record", "native"]), ("native,record", ["native", "record"])):
        assert sidebyside.main(["--data", str(tmp_path / "d"), "--world-sizes", "1", "--gate-native", "20",
                                "--only", only, "--dry-run", "--out", str(tmp_path / only)]) == 0
        printed = [line.split()[0][1:] for line in capsys.readouterr().out.splitlines() if line.startswith("[")]
        assert printed == expected
