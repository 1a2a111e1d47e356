"""repro report: the markdown summary and the plots, on generated run directories and the record's logs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pipeline.records.model import load_record
from pipeline.report.render import REPORT_FILES, report_runs
from tests.conftest import shared_path
from tests.test_bundle import RECORD, make_run, repro


@pytest.fixture
def runs(tmp_path):
    return [make_run(tmp_path, "20261129T105700Z-aaaa", loss=3.2790, step_ms=89.1),
            make_run(tmp_path, "20261129T110500Z-bbbb", loss=3.2798, step_ms=89.15),
            make_run(tmp_path, "20261129T111300Z-cccc", status="failed", exit_code=1, cut_after_step=600)]


def png_pixels(path):
    from matplotlib import image

    return image.imread(path)  # (height, width, channels)


def test_report_in_the_speedruns_terms(runs, tmp_path, monkeypatch):
    # published logs come only from --record-logs or the verified cache (none here)
    verdict, _ = report_runs(load_record(RECORD), runs, tmp_path / "out")
    text = (tmp_path / "out" / "report.md").read_text()
    assert verdict.outcome == "invalid" and "## Verdict: **invalid**" in text
    assert "| 20261129T105700Z-aaaa | succeeded | record | 1680/1680 | 3.2790 | 149.688 | 89.10 | 30760 |" in text
    assert "| 20261129T111300Z-cccc | failed | record | 600/1680 | — | — |" in text
    assert "run status is failed (exit code 1)" in text and "last step reached is 600 of 1680" in text
    assert "| mean val loss | 3.2794 | 3.2796 |" in text  # ours over the two complete runs; the record's four
    assert "| sd | 0.0006 | 0.0005 |" in text
    assert f"| p-value vs 3.28 | {verdict.loss.p_value:.4g} | 0.09331 |" in text
    assert "| mean train time (s) | 149.730 | 149.690 |" in text
    assert "the record manifest's published final losses" in text
    for rel in ("plots/val_loss.png", "plots/step_time.png"):
        assert f"]({rel})" in text
        pixels = png_pixels(tmp_path / "out" / rel)
        assert pixels.shape[0] >= 400 and pixels.shape[1] >= 800
        assert np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0).shape[0] > 20  # drawn, not blank
    again = tmp_path / "again"
    report_runs(load_record(RECORD), runs, again)
    for rel in REPORT_FILES:
        assert (again / rel).read_bytes() == (tmp_path / "out" / rel).read_bytes()


def test_report_over_the_records_published_logs(runs, tmp_path):
    logs = shared_path("fixtures", "record-logs", RECORD)
    assert len(list(logs.glob("*.txt"))) == 4
    _, published_source = report_runs(load_record(RECORD), runs[:2], tmp_path / "out", published_dir=logs)
    assert published_source == "the record's published logs (4 files)"
    text = (tmp_path / "out" / "report.md").read_text()
    # the runs' logs carry no program text: judged, but a deviation (issue 12), not a clean `reproduced`
    assert "from the record's published logs (4 files)" in text and "## Verdict: **reproduced-with-deviations**" in text
    assert "program text absent: code identity unverified" in text


def test_report_cli(runs, tmp_path):
    result = repro("report", *runs[:2], "--out", tmp_path / "cli", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["outcome"] == "reproduced-with-deviations" and data["files"] == ["report.md", "plots/val_loss.png",
                                                                  "plots/step_time.png"]
    assert (tmp_path / "cli" / "plots" / "val_loss.png").stat().st_size > 10_000
    bad = repro("report", runs[0], "--record", "no-such-record", "--out", tmp_path / "x")
    assert bad.returncode == 3 and "unknown record 'no-such-record'" in bad.stderr and "Traceback" not in bad.stderr


def test_a_plots_link_in_the_out_folder_is_replaced_not_followed(runs, tmp_path):
    """A `plots` symlink planted in --out took the PNGs to where it pointed; report.md quoted a log's escape."""
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.mkdir()
    (out / "plots").symlink_to(victim)
    log = runs[0] / "log.txt"
    log.write_text(log.read_text().replace("Running PyTorch", "Running \x1b]0;PWNED\x07PyTorch", 1))
    result = repro("report", *runs[:2], "--out", out)
    assert result.returncode == 0, result.stderr
    assert not any(victim.iterdir()) and not (out / "plots").is_symlink()
    assert (out / "plots" / "val_loss.png").stat().st_size > 10_000
    assert "\x1b" not in (out / "report.md").read_text()


def test_a_work_folder_stands_for_its_runs_and_a_bundle_is_pointed_to_bundle_verify(runs, tmp_path):
    """`repro verify work/demo-cpu-synth` judged the folder as a run without a log, `repro verify BUNDLE` read the
    gzip as a log: both said `invalid`."""
    judged = repro("verify", tmp_path, "--json")  # make_run's runs live in tmp_path/runs/<record>/<id>, as in a work
    assert judged.returncode == 1, judged.stderr  # folder; the third run failed, as `runs` made it
    assert sorted(Path(r["source"]).name for r in json.loads(judged.stdout)["runs"]) == sorted(r.name for r in runs)
    reported = repro("report", tmp_path, "--out", tmp_path / "out")
    assert reported.returncode == 0 and (tmp_path / "out" / "report.md").is_file(), reported.stderr
    bundle = tmp_path / "x.tar.gz"
    bundle.write_bytes(b"\x1f\x8b not really")
    refused = repro("verify", bundle)
    assert refused.returncode == 3 and f"repro bundle verify {bundle}" in refused.stderr


def test_a_folder_of_runs_or_of_logs_stands_for_them_and_an_empty_one_is_bad_input(runs, tmp_path):
    """`repro verify runs/<record>` (the folder of run folders `repro reproduce` prints) and `repro verify
    LOGS_FOLDER` judged the folder itself as one run without a log: `verdict: invalid`, exit 1, for good runs."""
    from tests.paths import REPO_ROOT

    for folder in (tmp_path / "runs" / RECORD, tmp_path / "runs"):  # runs/<record>/<id>, and the runs/ root
        judged = repro("verify", folder, "--json")
        assert judged.returncode == 1, judged.stderr  # the third run failed, as `runs` made it
        assert sorted(Path(r["source"]).name for r in json.loads(judged.stdout)["runs"]) == \
            sorted(r.name for r in runs)
    logs = REPO_ROOT / "tests" / "fixtures" / "record-logs" / RECORD
    judged = repro("verify", "--record", RECORD, logs, "--json")
    assert judged.returncode == 0, judged.stdout[-2000:] + judged.stderr
    assert len(json.loads(judged.stdout)["runs"]) == 4
    (tmp_path / "empty").mkdir()
    refused = repro("verify", tmp_path / "empty")
    assert refused.returncode == 3 and "Traceback" not in refused.stderr, refused.stdout + refused.stderr
    assert f"error: {tmp_path / 'empty'} is not a run folder" in refused.stderr, refused.stderr


def test_a_fifo_or_a_device_given_to_verify_is_bad_input(tmp_path):
    """A FIFO or /dev/zero given as a log said 'no log at X' with exit 1, the code of a verdict that said no."""
    import os

    os.mkfifo(tmp_path / "pipe")
    for path in (tmp_path / "pipe", Path("/dev/zero")):
        done = repro("verify", path)
        assert done.returncode == 3 and "not a regular file" in done.stderr, done.stderr


def test_a_run_named_with_a_pipe_or_a_tag_stays_one_cell_of_report_md(tmp_path):
    """A run folder called 'a|<img src=x onerror=alert(1)>' cut report.md's table row and left a live tag in it."""
    from pipeline.report.render import _cell

    assert _cell("a|<img src=x onerror=alert(1)>") == "a\\|&lt;img src=x onerror=alert(1)&gt;"
