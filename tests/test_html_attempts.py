"""The HTML report shows every attempt (issue 37): a run aborted by Ctrl-C and kept aside appears in the verdict
and in the runs table, the native trainer's sha256 is shown from run.yaml, and a record whose logs are committed
beside its manifest (the demo's four) has its published curves, with no fetch."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pipeline.pages.report_input import from_bundle
from pipeline.pages.write import write_html
from pipeline.records.model import load_record
from pipeline.records.published import published_logs_dir
from tests.paths import REPO_ROOT
from tests.test_bundle import RECORDS, make_bundle, make_run, three_runs

ABORTED = "20261129T105000Z-abrt"


def bundle_with_an_aborted_attempt(root: Path, trainer: str = "record") -> Path:
    runs = three_runs(root)
    aborted = make_run(root, ABORTED, status="aborted", exit_code=130, cut_after_step=300,
                       ended_at="2026-11-29T10:55:00Z", trainer=trainer)
    return make_bundle(runs, root / "bundles", attempts=[aborted])


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("attempts")
    bundle = bundle_with_an_aborted_attempt(root)
    assert bundle.name.endswith("-3runs-1aside.tar.gz")
    return write_html(from_bundle(bundle, RECORDS, lambda record: None), root / "out").read_text(encoding="utf-8")


def section(html: str, name: str) -> str:
    return html.split(f'id="{name}"', 1)[1].split("<h2", 1)[0]


def test_the_verdict_names_the_aborted_attempt(page):
    verdict = section(page, "verdict")
    assert ABORTED in verdict and "1 attempt(s) kept aside, outside the verdict" in verdict
    assert "aborted" in verdict


def test_the_runs_table_lists_the_attempt_beside_the_judged_runs(page):
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", section(page, "runs"), re.S)
    assert len([r for r in rows if "<td" in r]) == 4, rows  # three judged runs and the attempt
    (attempt,) = [r for r in rows if ABORTED in r]
    assert "aborted (exit 130)" in attempt and "attempt kept aside, not judged" in attempt


def test_a_native_runs_sha256_comes_from_its_run_yaml(tmp_path):
    runs = [make_run(tmp_path, f"20261129T1{i}0000Z-nat{i}", trainer="native", ended_at=f"2026-11-29T1{i}:10:00Z")
            for i in range(2)]
    bundle = make_bundle(runs, tmp_path / "bundles")
    html = write_html(from_bundle(bundle, RECORDS, lambda record: None), tmp_path / "out").read_text()
    assert "2" * 64 in section(html, "program")  # make_run's program_sha256


def test_the_demo_records_committed_logs_are_its_published_curves(tmp_path):
    record = load_record("demo-cpu-synth", REPO_ROOT / "manifests" / "records")
    folder = published_logs_dir(record, tmp_path / "empty-cache")
    assert folder == REPO_ROOT / "manifests" / "records" / "demo-cpu-synth"
    assert len(list(folder.glob("*.txt"))) == 4
