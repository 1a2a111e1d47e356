"""`repro verify --submission --record PARENT LOGS`: the reviewer's report, in markdown and JSON."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from statistics import mean

import pytest
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.records.model import load_record
from pipeline.verdict.submission import judge_submission, render_markdown
from tests.logfactory import make_log

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "fixtures" / "upstream-sample"
RECORDS = ROOT / "manifests" / "records"
MUON = SAMPLE / "records/track_1_short/2025-09-23_MuonCustomSizing"
IMPORTED = sorted(p.stem for p in RECORDS.glob("*.yaml") if "imported:" in p.read_text())


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("name", IMPORTED)
def test_each_record_reproduces_the_mean_of_its_own_final_losses(name, tmp_path):
    """Each committed record's logs, rebuilt from their pinned final losses and times, give back their mean."""
    record = load_record(name, RECORDS)
    pinned = [log for log in record.logs if log.val_loss is not None]
    assert pinned, f"{name}'s logs print no final loss"
    for i, log in enumerate(pinned):
        steps = record.published.steps
        step_ms = (log.train_time_ms or 100_000) / steps  # the 2024 llm.c log prints no time: any will do
        (tmp_path / f"{i}.txt").write_text(make_log(steps=steps, final_loss=log.val_loss, step_ms=step_ms))
    report = judge_submission(record, [tmp_path])
    assert report.n == len(pinned)
    assert report.mean_loss == pytest.approx(mean(log.val_loss for log in pinned), abs=1e-4)


def test_real_logs_against_their_parent_markdown_and_json():
    code_md = run("--registry", str(ROOT / "manifests"), "verify", "--submission", "--record",
                  "2025-09-21_DropAttn", str(MUON))
    assert code_md.exit_code == 1  # 4 runs do not reach p < 0.01 on their own (a systems-only change)
    md = code_md.output
    assert md.startswith("### Submission check against 2025-09-21_DropAttn")
    assert "| loss | ❌ |" in md and "| time | ✅ |" in md and "11 runs at this mean and sd" in md
    out = run("--registry", str(ROOT / "manifests"), "verify", "--submission", "--record", "2025-09-21_DropAttn",
              str(MUON), "--json")
    report = json.loads(out.output)
    own = load_record("2025-09-23_MuonCustomSizing", RECORDS)
    assert report["mean_loss"] == pytest.approx(mean(log.val_loss for log in own.logs), abs=1e-4)
    assert report["n"] == 4 and report["time"]["faster"] is True and report["time"]["difference_s"] < 0
    assert report["time"]["ci_high_s"] < 0 < report["time"]["parent_mean_s"]
    assert report["code"] == "changed" and report["passed"] is False


def test_same_code_and_unusable_logs(tmp_path):
    parent = load_record("2025-09-23_MuonCustomSizing", RECORDS)
    (tmp_path / "a.txt").write_bytes((MUON / sorted(p.name for p in MUON.iterdir())[0]).read_bytes())
    (tmp_path / "crashed.txt").write_text(make_log(cut_after_step=300))
    (tmp_path / "sub").mkdir()
    report = judge_submission(parent, [tmp_path])
    assert report.n == 1 and report.p_value is None
    assert any("crashed.txt" in u for u in report.unusable)
    assert report.skipped_folders == (f"{tmp_path / 'sub'}/",)
    md = render_markdown(report)
    assert "left out: crashed.txt" in md


def test_same_code_is_recognised(tmp_path):
    """A submission whose program only differs in comments from the parent's logs is 'same-code'."""
    reg = tmp_path / "reg"
    shutil.copytree(ROOT / "manifests" / "environments", reg / "environments")
    (reg / "records").mkdir()
    res = run("--registry", str(reg), "records", "import", str(SAMPLE), "--commit", "f" * 40)
    assert res.exit_code == 0, res.output
    parent = load_record("2025-09-23_MuonCustomSizing", reg / "records")
    report = judge_submission(parent, [MUON])
    assert report.code == "same-code"


def test_submission_needs_a_parent():
    res = run("verify", "--submission", str(MUON))
    assert res.exit_code != 0
