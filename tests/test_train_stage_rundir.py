"""The run directory contract: run ids, atomic writes, status transitions, run.yaml, derived metrics."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
import yaml

from pipeline.atomic import write_bytes as atomic_write_bytes
from pipeline.errors import InputError
from pipeline.findings import Finding
from pipeline.probe import RuntimeProbe
from pipeline.records.logparse import parse_log
from pipeline.runs.rundir import FILES, HostEnvironment, RunDir, RunMeta, new_run_id, read_status
from pipeline.runs.train_run import metrics_from_log
from tests.logfactory import make_log


def _meta(run_id: str) -> RunMeta:
    return RunMeta(run_id=run_id, record="r", trainer="record", runtime="host", preset=None, overrides=("a=1",),
                   steps=None, world_size=2, command=("torchrun", "--standalone", "train_gpt.py"), image_id=None,
                   environment="host", environment_lock_sha256=None, program_sha256="ab" * 32,
                   program_fingerprint="ast1-x", program_source="/x", data_dir="/d", data_lock_sha256=None,
                   compile_cache=None, started_at="2026-01-01T00:00:00Z",
                   host_environment=HostEnvironment(RuntimeProbe(where="host: /py", torch="2.13.0", devices=("cpu",)),
                                                    None, (Finding("software.differs", "deviation", {
                                                        "field": "torch", "got": "2.13.0", "want": "2.9.0"}),)))


def test_run_ids_sort_by_time_and_differ():
    ids = {new_run_id() for _ in range(200)}
    assert len(ids) > 190  # 16 random bits within one second
    for run_id in ids:
        assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{4}", run_id)


def test_atomic_write_replaces_and_leaves_no_temporaries(tmp_path):
    path = tmp_path / "status"
    atomic_write_bytes(path, b"running\n")
    atomic_write_bytes(path, b"failed\n")
    assert path.read_bytes() == b"failed\n"
    assert [p.name for p in tmp_path.iterdir()] == ["status"]


def test_atomic_write_is_all_or_nothing_when_killed(tmp_path):
    """A writer killed mid-write leaves the old file whole (the temporary is never visible under the name)."""
    path = tmp_path / "run.yaml"
    atomic_write_bytes(path, b"old: 1\n")
    script = textwrap.dedent(f"""
        import os, signal
        from pathlib import Path
        import pipeline.atomic as rd
        real_fsync = os.fsync
        def die(fd):  # the new bytes are written but not yet renamed into place
            os.kill(os.getpid(), signal.SIGKILL)
        os.fsync = die
        rd.write_bytes(Path({str(path)!r}), b"new: 2\\n" * 1000)
    """)
    done = subprocess.run([sys.executable, "-c", script], cwd=os.getcwd())
    assert done.returncode == -9
    assert path.read_bytes() == b"old: 1\n"


def test_status_transitions(tmp_path):
    run = RunDir.create(tmp_path / "rec" / "20260101T000000Z-abcd")
    assert read_status(run.path) == "running"
    run.write_meta(_meta(run.run_id))
    run.finish("failed", exit_code=3)
    assert read_status(run.path) == "failed"
    meta = yaml.safe_load((run.path / "run.yaml").read_text())
    assert meta["status"] == "failed" and meta["exit_code"] == 3 and meta["ended_at"]
    assert meta["schema_version"] == 2 and meta["command"] == ["torchrun", "--standalone", "train_gpt.py"]
    assert sorted(p.name for p in run.path.iterdir()) == sorted(set(FILES) - {"preflight.json"})
    with pytest.raises(ValueError, match="already ended as failed"):
        run.set_status("succeeded")
    with pytest.raises(ValueError, match="ends as one of"):
        RunDir.create(tmp_path / "rec" / "x").finish("running", None)


def test_a_run_directory_is_never_reused(tmp_path):
    RunDir.create(tmp_path / "rec" / "same")
    with pytest.raises(InputError, match="already exists"):
        RunDir.create(tmp_path / "rec" / "same")


def test_metrics_derived_from_a_record_log(tmp_path):
    log = tmp_path / "log.txt"
    log.write_text(make_log(steps=30, val_every=10))
    rows = [json.loads(json.dumps(row)) for row in metrics_from_log(log)]  # what metrics.jsonl holds
    parsed = parse_log(log)
    assert [r for r in rows if r["event"] == "step"] == [
        {"event": "step", "step": p.step, "train_time_ms": p.train_time_ms, "step_avg_ms": p.step_avg_ms}
        for p in parsed.steps]
    vals = [r for r in rows if r["event"] == "val"]
    assert [v["step"] for v in vals] == [0, 10, 20, 30] and vals[-1]["val_loss"] == pytest.approx(3.2795)
    assert [r["step"] for r in rows] == sorted(r["step"] for r in rows)
    assert rows[-1] == {"event": "val", "step": 30, "val_loss": 3.2795, "train_time_ms": 2673}  # val after the step


def test_run_yaml_is_one_typed_model_written_and_read_back(tmp_path):
    run = RunDir.create(tmp_path / "rec" / "20260101T000000Z-abcd")
    meta = _meta(run.run_id)
    run.write_meta(meta)
    assert RunMeta.load(run.file("run.yaml")) == meta
    run.finish("succeeded", exit_code=0)
    again = RunMeta.load_if_present(run.path)
    assert (again.status, again.exit_code, again.overrides) == ("succeeded", 0, ("a=1",)) and again.ended_at
    assert RunMeta.load_if_present(tmp_path) is None  # no run.yaml: a run killed before writing it


def test_a_version_1_run_yaml_keeps_its_deviation_sentences(tmp_path):
    """Bundles made before deviations were findings stay readable: their sentences become `deviation.text`."""
    path = tmp_path / "run.yaml"
    path.write_text("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 1\n"
                    "started_at: t\nhost_environment:\n  where: 'host: /py'\n  torch: 2.11.0+cu130\n"
                    "  deviations:\n  - 'torch: 2.11.0+cu130 (record: 2.10.0)'\n")
    host = RunMeta.load(path).host_environment
    assert host.probe.torch == "2.11.0+cu130" and host.probe.where == "host: /py"
    said = "torch: 2.11.0+cu130 (record: 2.10.0)"
    assert host.deviations == (Finding("deviation.text", "deviation", {"text": said}),)


@pytest.mark.parametrize("text, words", [
    ("[1, 2]\n", "must be a mapping"),
    ("schema_version: 3\n", "field 'schema_version': is 3"),
    ("schema_version: 2\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 1\n"
     "started_at: t\nhost_environment: {devices: 7}\n", "host_environment: not a runtime probe's fields"),
    ("schema_version: 2\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 1\n"
     "started_at: t\nhost_environment: {deviations: [{code: X}]}\n", "host_environment.deviations[0]"),
    ("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 1\n"
     "started_at: t\nstatus: exploded\n", "field 'status': is 'exploded'"),
    ("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 1\n"
     "started_at: t\ncolour: red\n", "field 'colour': is not a known field"),
    ("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: -1\n"
     "started_at: t\n", "field 'world_size': is -1, not a count of processes"),
    ("schema_version: 1\nrun_id: r\nrecord: r\ntrainer: record\nruntime: host\nworld_size: 0\n"
     "started_at: t\n", "field 'world_size': is 0, not a count of processes"),
])
def test_a_bad_run_yaml_names_the_file_and_field(tmp_path, text, words):
    path = tmp_path / "run.yaml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        RunMeta.load(path)
    assert str(path) in str(err.value) and words in str(err.value) and "fix:" in str(err.value)


def test_a_status_file_is_read_in_a_few_bytes_and_other_words_are_unreadable(tmp_path):
    (tmp_path / "status").write_bytes(b"succeeded\n")
    assert read_status(tmp_path) == "succeeded"
    (tmp_path / "status").write_bytes(b"x" * (1 << 20))
    assert read_status(tmp_path) == "unreadable"  # a problem in the verdict; "unknown" (no file) is not
    (tmp_path / "status").unlink()
    (tmp_path / "status").mkdir()
    assert read_status(tmp_path) == "unknown"
