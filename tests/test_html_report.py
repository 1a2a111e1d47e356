"""repro report --html: the page's content, taken apart as data (the charts' JSON, the tables), without a browser.

tests/test_html_browser.py loads the same pages in a real Chromium."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline.pages.page import data_block, esc, plotly_library
from pipeline.pages.phases import phase_bounds, phase_of, phase_times
from pipeline.pages.report_input import from_bundle
from pipeline.pages.write import gather, write_html
from pipeline.records.logparse import StepPoint
from tests.logfactory import make_log
from tests.paths import REPO_ROOT
from tests.test_bundle import RECORDS, make_bundle, repro, three_runs, write_keys

PUBLISHED = REPO_ROOT / "tests" / "fixtures" / "record-logs" / "2025-09-23_MuonCustomSizing"


def figures(html: str) -> dict[str, dict]:
    """Every chart's figure, by its element id, parsed back from the page's JSON blocks."""
    blocks = re.findall(r'<script type="application/json" id="([^"]+)-data">(.*?)</script>', html, re.S)
    return {name: json.loads(text) for name, text in blocks}


def report_of(bundle: Path, out: Path, published: Path | None = PUBLISHED) -> str:
    path = write_html(from_bundle(bundle, RECORDS, lambda record: published), out)
    return path.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def bundle_with_a_deviation(tmp_path_factory) -> Path:
    """Three runs, the last on another PyTorch: a deviation the page must mark in the software table."""
    root = tmp_path_factory.mktemp("html")
    runs = three_runs(root)
    (runs[2] / "log.txt").write_text(make_log(None, final_loss=3.2794, step_ms=89.0, torch="2.8.0+cu128"))
    return make_bundle(runs, root / "bundles")


def test_bundle_report_holds_every_section_and_the_library_once(bundle_with_a_deviation, tmp_path):
    html = report_of(bundle_with_a_deviation, tmp_path / "out")
    assert html.count("/* plotly.js ") == 1 and html.count("Plotly.newPlot") == 1  # the library inlined once
    page = html.replace(plotly_library().script, "")  # the library's own text mentions CDNs it never calls here
    assert "<script src=" not in page and "https://" not in page  # nothing fetched: it works offline
    for anchor in ("verdict", "runs", "loss", "phases", "machine", "environment", "program", "members"):
        assert f'id="{anchor}"' in html
    assert ">reproduced-with-deviations<" in html and ">bundle verified<" in html
    assert 'id="signature">signature: absent<' in html and "integrity only: unsigned" in html
    # the software table: the third run's PyTorch differs from the record's and is marked; the others are not
    row = re.search(r"<tr class=\"deviation\"><td>software</td><td>torch</td>(.*?)</tr>", html).group(1)
    assert row.count("⚠ deviation") == 1 and "2.8.0+cu128" in row
    assert "software torch: 2.8.0+cu128 (record: 2.9.0.dev20250726+cu126)" in html
    assert "manifest.yaml" in html and "SHA256SUMS" in html  # the member list with each sha256


def test_charts_carry_our_runs_and_the_records_published_runs(bundle_with_a_deviation, tmp_path):
    figs = figures(report_of(bundle_with_a_deviation, tmp_path / "out"))
    assert set(figs) == {"chart-loss-step", "chart-loss-time", "chart-phases"}
    step = figs["chart-loss-step"]["data"]
    ours = [t for t in step if t.get("legendgroup") != "published"]
    published = [t for t in step if t.get("legendgroup") == "published"]
    assert [t["name"] for t in ours] == ["20261129T105700Z-aaaa", "20261129T110500Z-bbbb", "20261129T111300Z-cccc"]
    assert len(published) == 4 and all(t["line"]["color"] == "#9e9e9e" for t in published)
    assert ours[0]["x"][-1] == 1680 and ours[0]["y"][-1] == 3.279
    time = figs["chart-loss-time"]["data"]
    assert time[-1]["x"][-1] == pytest.approx(1680 * 89.0 / 1000, abs=0.01)  # seconds of training at the end
    assert figs["chart-loss-step"]["layout"]["shapes"][0]["y0"] == 3.28  # the target line
    bars = figs["chart-phases"]["data"]
    assert len(bars) == 7 and bars[0]["x"] == ["phase 1", "phase 2", "phase 3"]
    assert bars[0]["y"] == [pytest.approx(89.1, abs=0.01)] * 3  # make_log's constant 89.1 ms per step


def test_without_published_logs_the_manifests_final_losses_stand_in(bundle_with_a_deviation, tmp_path):
    figs = figures(report_of(bundle_with_a_deviation, tmp_path / "out", published=None))
    names = [t["name"] for t in figs["chart-loss-step"]["data"]]
    assert "record's published final losses" in names and not any(t.get("legendgroup") for t in
                                                                  figs["chart-loss-step"]["data"])


def test_same_bundle_same_bytes(bundle_with_a_deviation, tmp_path):
    a = report_of(bundle_with_a_deviation, tmp_path / "a")
    assert report_of(bundle_with_a_deviation, tmp_path / "b") == a


def test_signed_bundle_shows_its_key(tmp_path):
    private, _ = write_keys(tmp_path, "signer")
    bundle = make_bundle(three_runs(tmp_path), tmp_path / "bundles", sign_key=private)
    html = report_of(bundle, tmp_path / "out")
    assert 'id="signature">signature: valid<' in html and "signed by ed25519:" in html


def _rewritten(bundle: Path, out: Path, edit) -> Path:
    """`bundle` with `edit(name, data) -> data` applied to each member (names inside the bundle folder)."""
    import io
    import tarfile

    with tarfile.open(bundle) as src, tarfile.open(out, "w:gz") as dst:
        for info in src.getmembers():
            data = src.extractfile(info).read() if info.isreg() else b""
            data = edit(info.name.split("/", 1)[1], data) if info.isreg() else data
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return out


def _forged(bundle: Path, out: Path) -> Path:
    """A signed bundle whose first log says 80.0 s of training, with SHA256SUMS recomputed: the signature
    no longer matches the sums it signs."""
    import hashlib
    import tarfile

    with tarfile.open(bundle) as src:
        files = {i.name.split("/", 1)[1]: src.extractfile(i).read() for i in src.getmembers() if i.isreg()}
    log = next(n for n in sorted(files) if n.endswith("/log.txt"))
    files[log] = re.sub(rb"train_time:\d+ms", b"train_time:80000ms", files[log])
    files["SHA256SUMS"] = "".join(f"{hashlib.sha256(files[n]).hexdigest()}  {n}\n" for n in sorted(files)
                                  if n not in ("SHA256SUMS", "SHA256SUMS.sig")).encode()
    return _rewritten(bundle, out, lambda name, data: files[name])


def _flipped(bundle: Path, out: Path) -> Path:
    """One byte of the first log changed (its final loss), nothing else."""
    def edit(name, data):
        return data.replace(b"val_loss:3.27", b"val_loss:3.17", 1) if name.endswith("/log.txt") else data
    return _rewritten(bundle, out, edit)


@pytest.mark.parametrize("tamper", [_forged, _flipped])
def test_a_page_never_vouches_for_a_bundle_that_fails_its_check(tamper, tmp_path):
    """Forged signature or one flipped byte: the page says what failed and shows no verdict, run, time or
    chart from inside; the command exits 1 (issue 38)."""
    private, _ = write_keys(tmp_path, "signer")
    good = make_bundle(three_runs(tmp_path), tmp_path / "bundles", sign_key=private)
    bad = tamper(good, tmp_path / "bad.tar.gz")
    result = repro("report", "--html", bad, "--out", tmp_path / "out")
    assert result.returncode == 1, result.stderr
    assert "does NOT verify" in result.stderr and "Traceback" not in result.stderr
    assert "changed after archiving" in result.stderr or "signature" in result.stderr
    html = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert ">bundle does NOT verify<" in html
    for evidence in (">reproduced", 'class="chart"', "train time (s)", "80.000", 'id="runs"'):
        assert evidence not in html, evidence
    assert bad.name in html


def test_run_folders_report_says_nothing_was_archived(tmp_path):
    runs = three_runs(tmp_path)
    report = gather(runs, records_dir=RECORDS, record_name=None, published_dir_of=lambda record: None)
    html = write_html(report, tmp_path / "out").read_text()
    assert report.check is None and "not archived: runs on disk" in html
    assert [t["name"] for t in figures(html)["chart-loss-step"]["data"]][:3] == [r.name for r in runs]


def test_cli_html_for_a_bundle_a_work_folder_and_bad_input(bundle_with_a_deviation, tmp_path):
    result = repro("report", "--html", bundle_with_a_deviation, "--out", tmp_path / "b", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["html"] == str(tmp_path / "b" / "report.html") and data["integrity"] == "integrity only: unsigned"
    work = bundle_with_a_deviation.parents[1]  # holds runs/<record>/<id>/: a work folder without a state file
    result = repro("report", "--html", work, "--out", tmp_path / "w")
    assert result.returncode == 0 and "not archived" in result.stdout, result.stderr
    markdown = repro("report", bundle_with_a_deviation, "--out", tmp_path / "md")  # without --html
    assert markdown.returncode == 3 and "pass --html" in markdown.stderr and "Traceback" not in markdown.stderr
    empty = tmp_path / "empty" / "runs"
    empty.mkdir(parents=True)
    bad = repro("report", "--html", empty.parent, "--out", tmp_path / "x")
    assert bad.returncode == 3 and "no run folder" in bad.stderr and "Traceback" not in bad.stderr


def test_values_cannot_leave_their_place_in_the_page():
    hostile = "</script><script>alert(1)</script>"
    block = data_block("x", {"name": hostile})
    assert block.count("</script>") == 1 and json.loads(block.split(">", 1)[1][:-len("</script>")]) == {"name": hostile}
    assert "<" not in esc(hostile) and '"' not in esc('a"b')


def test_phase_bounds_follow_the_trainers_window_rule():
    for steps in (7, 40, 1680, 10**12):
        bounds = [phase_bounds(p, steps) for p in range(3)]
        assert bounds[0][0] == 0 and bounds[-1][1] == steps
        assert all(bounds[i][1] + 1 == bounds[i + 1][0] for i in range(2))
        for p, (first, last) in enumerate(bounds):
            assert phase_of(first, steps) == p and phase_of(last, steps) == p


def test_phase_times_leave_out_each_phases_first_step():
    # 10 ms per step, except the step opening phase 2 (step 14 of 40), which holds a 500 ms switch
    clock, steps = 0, []
    for s in range(1, 41):
        clock += 510 if s == 14 else 10
        steps.append(StepPoint(s, clock, clock / s))
    times = phase_times(tuple(steps), 40)
    assert [(t.first_step, t.last_step) for t in times] == [(0, 13), (14, 27), (28, 40)]
    assert [t.ms_per_step for t in times] == [10, 10, 10]
