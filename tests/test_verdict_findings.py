"""Findings as data, sentences in one place, rules dispatched by version, and the verdict fixes of issue 12:
the log-scale time interval, CPU runs (no "None x None", no "peak MiB 0"), and the demo record judging time
only on its own CPU model."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.errors import InputError
from pipeline.findings import Finding, findings_from_list
from pipeline.preflight.collect import SavedSources
from pipeline.preflight.run import preflight, write_report
from pipeline.records.model import load_record
from pipeline.stats import time_ratio
from pipeline.verdict import judge
from pipeline.verdict.judge import verify_runs
from pipeline.verdict.render import TEMPLATES, hardware_line, render
from pipeline.workspace import CHECKOUT_ROOT
from tests.logfactory import SEP, make_log

RECORD = "2025-09-23_MuonCustomSizing"
DEMO = "demo-cpu-synth"
HOSTS = Path(__file__).parent / "fixtures" / "hosts"


def repro(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipeline", *map(str, args)], capture_output=True, text=True,
                          cwd=CHECKOUT_ROOT, timeout=300)


# ---- the Finding type ---------------------------------------------------------------------------

def test_a_finding_holds_json_data_only_and_round_trips():
    f = Finding("time.ratio", "note", {"ratio": 1.0, "ci": (0.9, 1.1), "comparable": True, "why_not": None})
    assert f.data["ci"] == [0.9, 1.1]  # tuples become lists: what JSON gives back
    assert Finding.from_dict(json.loads(json.dumps(f.to_dict())), "verdict.findings[0]") == f
    for bad in ({"x": float("nan")}, {"x": float("inf")}, {"x": object()}, {1: "a"}):
        with pytest.raises(ValueError):
            Finding("run.log", "problem", bad)
    with pytest.raises(ValueError, match="severity"):
        Finding("run.log", "fatal")
    with pytest.raises(ValueError, match="code"):
        Finding("Run Log", "note")


@pytest.mark.parametrize("raw, words", [
    ("nope", "must be a mapping"),
    ({"code": "x", "severity": "note", "data": {}, "extra": 1}, "unknown field 'extra'"),
    ({"code": "x", "severity": "grave", "data": {}}, "severity"),
    ({"code": "x", "severity": "note", "data": {"v": float("nan")}}, "finite"),
])
def test_a_finding_read_from_a_file_is_validated_naming_where(raw, words):
    with pytest.raises(InputError, match=words) as err:
        findings_from_list([raw], "manifest.yaml: verdict.findings")
    assert "manifest.yaml: verdict.findings[0]" in str(err.value)


def test_an_unknown_code_is_shown_as_data_never_dropped():
    text = render(Finding("time.newfangled", "note", {"k": 1}))
    assert "time.newfangled" in text and '"k": 1' in text


# ---- the judge emits findings; every code has a sentence ----------------------------------------

def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_every_code_the_judge_emits_has_a_template(tmp_path):
    logs = [write(tmp_path, "a.txt", make_log(None, final_loss=3.2830)),
            write(tmp_path, "b.txt", make_log(None, final_loss=3.2841, step_ms=95.0)),
            write(tmp_path, "h200.txt", make_log(None, count=1, gpu_name="NVIDIA H200")),
            write(tmp_path, "crash.txt", make_log(None, cut_after_step=10))]
    codes = set()
    for subset in (logs[:2], logs[2:3], logs):
        v = verify_runs(load_record(RECORD), subset)
        codes |= {f.code for f in v.findings}
        assert all(not r.startswith(f.code) for f, r in zip(v.findings, v.reasons))  # sentences, not codes
    assert codes >= {"loss.above_target", "loss.t_test", "loss.consistency", "time.ratio", "hardware.differs",
                     "program.absent", "run.log"}
    assert codes <= set(TEMPLATES)


def test_outcome_follows_the_strongest_severity(tmp_path):
    record = load_record(RECORD)
    fine = [write(tmp_path, f"ok-{i}.txt", make_log(None, final_loss=v)) for i, v in enumerate([3.2790, 3.2798])]
    v = verify_runs(record, fine)
    assert {f.severity for f in v.findings} == {"note", "deviation"} and v.outcome == "reproduced-with-deviations"
    crash = write(tmp_path, "crash.txt", make_log(None, cut_after_step=5))
    v = verify_runs(record, fine + [crash])
    assert v.outcome == "invalid" and [f.code for f in v.findings if f.severity == "problem"] == ["run.log", "run.log"]


def test_rules_versions_are_dispatched_and_an_unknown_one_refused(tmp_path, monkeypatch):
    record = load_record(RECORD)
    log = write(tmp_path, "a.txt", make_log(None))
    later = dataclasses.replace(record, rules=dataclasses.replace(record.rules, version=99))
    with pytest.raises(InputError, match="rules.version 99 is not one this tool judges by") as err:
        verify_runs(later, [log])
    assert "upgrade repro" in err.value.fix
    seen = []
    monkeypatch.setitem(judge.JUDGES, 99, lambda rec, runs: seen.append(rec.rules.version) or "judged by v99")
    assert verify_runs(later, [log]) == "judged by v99" and seen == [99]


# ---- the time ratio's interval, on the log scale ------------------------------------------------

def test_the_time_ratio_interval_is_on_the_log_scale_and_never_negative():
    # two runs of very different length: the symmetric interval on seconds went below zero (-4.1755–64.6942)
    t = time_ratio([40.0, 400.0], 43.143, 0.95)
    assert 0 < t.ci_low < t.ratio < t.ci_high
    assert t.ratio == pytest.approx(220 / 43.143)
    assert t.ci_low * t.ci_high == pytest.approx(t.ratio ** 2)  # symmetric in log: ratio × exp(±h)
    close = time_ratio([149.775, 149.678, 149.686, 149.623], 149.6905, 0.95)
    assert 0.999 < close.ci_low < 1 < close.ci_high < 1.001
    assert time_ratio([10.0], 10.0, 0.95).ci_low is None


# ---- CPU runs and the demo record ---------------------------------------------------------------

def cpu_log(final_loss: float, step_ms: float = 1078.5) -> str:
    """A native-trainer log from a machine without nvidia-smi (what the demo writes)."""
    text = make_log(None, steps=40, final_loss=final_loss, step_ms=step_ms, val_every=10,
                    python="3.11.7", torch="2.13.0+cpu", torch_cuda="None", triton="None")
    head, rest = text.split(SEP + "\n", 1)
    env, steps = rest.split(SEP + "\n", 1)
    env = env[:env.index("Wed Sep 24")] + "nvidia-smi: not found on this machine (no NVIDIA driver tools)\n"
    return head + SEP + "\n" + env + SEP + "\n" + steps.replace("peak memory allocated: 30760 MiB reserved: 45914 MiB",
                                                                "peak memory allocated: 0 MiB reserved: 0 MiB")


def cpu_run(root: Path, name: str, loss: float, cpu_model: str, step_ms: float = 1078.5) -> Path:
    run = root / name
    run.mkdir(parents=True)
    (run / "log.txt").write_text(cpu_log(loss, step_ms))
    (run / "status").write_text("succeeded\n")
    (run / "run.yaml").write_text(yaml.safe_dump({
        "schema_version": 1, "run_id": name, "record": DEMO, "trainer": "native", "runtime": "host",
        "preset": "demo", "world_size": 1, "command": ["python", "-m", "train"], "started_at": "2026-11-29T10:00:00Z",
        "status": "succeeded", "exit_code": 0}))
    report = preflight(load_record(DEMO), "host", sources=SavedSources(HOSTS / "h100-8gpu-nvlink"), locations={})
    facts = dataclasses.replace(report.facts, cpu=dataclasses.replace(report.facts.cpu, model=cpu_model))
    write_report(dataclasses.replace(report, facts=facts), run / "preflight.json")
    return run


def test_a_cpu_run_shows_its_cpu_never_none_x_none_or_peak_mib_0(tmp_path):
    runs = [cpu_run(tmp_path, f"r{i}", loss, "Intel Xeon") for i, loss in enumerate([2.70, 2.69])]
    v = verify_runs(load_record(DEMO), runs)
    assert all(r.peak_allocated_mib is None for r in v.runs)
    assert hardware_line(v.runs[0].hardware, v.runs[0].software) == \
        "hardware: CPU Intel Xeon; software: Python 3.11.7, PyTorch 2.13.0+cpu"
    done = repro("verify", *runs)
    assert "None x None" not in done.stdout and "CUDA None" not in done.stdout
    assert "hardware: CPU Intel Xeon" in done.stdout and f"record {DEMO}" in done.stdout  # from run.yaml


def test_the_demo_record_judges_time_only_on_its_cpu_model(tmp_path):
    record = load_record(DEMO)
    assert record.hardware.cpu_model and "cpu_model" in record.rules.compare_hardware
    assert record.program.trainer == "native"
    slow = 15 * 1078.5  # 15x the record's time: beyond its 10x tolerance
    same = [cpu_run(tmp_path / "same", f"r{i}", loss, record.hardware.cpu_model, slow)
            for i, loss in enumerate([2.66, 2.65])]
    v = verify_runs(record, same)
    time = next(f for f in v.findings if f.code == "time.ratio")
    assert time.data["comparable"] and time.severity == "failure" and v.outcome == "not-reproduced"
    assert not any(f.code == "trainer.native" for f in v.findings)  # the demo record is the native trainer
    other = [cpu_run(tmp_path / "other", f"r{i}", loss, "Intel Xeon Platinum 8480+", slow)
             for i, loss in enumerate([2.66, 2.65])]
    v = verify_runs(record, other)
    time = next(f for f in v.findings if f.code == "time.ratio")
    assert not time.data["comparable"] and time.severity == "note"
    assert v.outcome == "reproduced-with-deviations"
    assert "hardware cpu_model: Intel Xeon Platinum 8480+ (record: AMD EPYC)" in v.deviations
    assert any("not comparable: another CPU model than the record's" in r for r in v.reasons)
