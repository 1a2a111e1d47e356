"""repro records site: the static site as files from a pure function, its inputs' validation, and the CLI.

tests/test_html_browser.py loads the written site in a real Chromium."""

from __future__ import annotations

import html
import json
import posixpath
import re
from pathlib import Path

import pytest

from pipeline.errors import InputError
from pipeline.pages.page import ChartLibrary
from pipeline.pages.site import build_site, upstream_order
from pipeline.pages.site_inputs import CheckRow, LeftOut, PlanRow, SiteRecord, load_check_rows, load_plan_rows
from pipeline.records.model import load_record, record_names
from tests.test_bundle import RECORDS, repro

LIBRARY = ChartLibrary("plotly.js", "test", "/* a stand-in library: these tests read the pages as text */", "0" * 64)
MUON = "2025-09-23_MuonCustomSizing"


def site_records() -> list[SiteRecord]:
    return [SiteRecord(load_record(n, RECORDS), "pypi-torch-2.8", "stable-stand-in", "nearest stable")
            if n != "demo-cpu-synth" else SiteRecord(load_record(n, RECORDS), "host", "named", "the machine's Python")
            for n in record_names(RECORDS)]


CHECK = CheckRow(name=MUON, verdict="reproduced-with-deviations", rule="v1 parent",
                 runs_judged=("b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt",),
                 left_out=(LeftOut("f99932ed-4bd6-41dc-99e9-831ebe5cd0e9.txt", "printed no <final> loss"),),
                 mean_loss=3.2796, p=0.093, time_s=149.69, time_ratio=1.0, reasons=("consistent with the parent",))
PLAN = PlanRow("demo-cpu-synth", True, "CPU only")


LEAD = r"<tr><td>(?:(?!</td>).)*</td><td>(?:(?!</td>).)*</td><td>"  # a row's "#" and date cells


def cells(html: str, name: str) -> list[str]:
    row = re.search(rf'{LEAD}<a href="records/{re.escape(name)}\.html">.*?</tr>', html)
    return re.findall(r"<td>(.*?)</td>", row.group(0))


def test_index_in_upstream_order_with_verdict_rule_environment_and_plan():
    files = build_site(site_records(), [CHECK], [PLAN], LIBRARY)
    index = files["index.html"]
    names = re.findall(LEAD + r'<a href="records/([^"]+)\.html">', index)
    assert "2025-09-23_<wbr>Muon<wbr>Custom<wbr>Sizing" in index  # long names wrap between their words
    assert names == [s.record.name for s in upstream_order(site_records())]
    assert names[0] == "2024-06-06_AdamW" and names.index(MUON) == names.index("2025-09-21_DropAttn") + 1
    muon = cells(index, MUON)
    assert "149.7" in muon[3] and muon[4] == "149.69"  # measured by the check, not the claim
    assert ">reproduced-with-deviations<" in muon[5] and ">v1 parent<" in muon[6]
    assert "deviation: <span class=\"nowrap\">stable-stand-in</span>" in muon[7] and ">not planned<" in muon[8]
    assert muon[9] == '<a href="records/2025-09-21_DropAttn.html">2025-09-21_<wbr>Drop<wbr>Attn</a>'  # parent's page
    demo = cells(index, "demo-cpu-synth")
    assert ">not checked<" in demo[4] and ">not checked<" in demo[5] and ">exact<" in demo[7]
    assert ">yes<" in demo[8] and "CPU only" in demo[8]
    assert files["assets/plotly.min.js"] == LIBRARY.script and '<script src="assets/plotly.min.js">' in index


def test_every_link_of_the_site_names_a_file_of_the_site():
    files = build_site(site_records(), [CHECK], [PLAN], LIBRARY)
    for path, text in files.items():
        if not path.endswith(".html"):
            continue
        for href in re.findall(r'(?:href|src)="([^"]+)"', text):
            if href.startswith("https://"):
                continue  # the upstream folder at its pinned commit
            target = posixpath.normpath(posixpath.join(posixpath.dirname(path), href))
            assert not target.startswith("..") and target in files, (path, href)


def test_time_chart_draws_both_tracks_and_marks_the_re_timing():
    index = build_site(site_records(), [], [], LIBRARY)["index.html"]
    figure = json.loads(re.search(r'id="chart-history-data">(.*?)</script>', index).group(1))
    track1, track2, retimed = figure["data"]
    assert track1["name"].startswith("track 1") and track2["name"].startswith("track 2")
    assert "2025-01-18" in " ".join(track2["text"]) and "2025-01-18" not in " ".join(track1["text"])
    assert "demo-cpu-synth" not in " ".join(track1["text"] + track2["text"])  # the tracks' records only
    assert retimed["x"] == ["2025-09-23"] and retimed["y"] == [150.3843]
    assert retimed["text"] == [f"2025-09-21_DropAttn re-timed for {MUON}"]


def test_record_page_runs_left_out_parent_and_upstream():
    page = build_site(site_records(), [CHECK], [PLAN], LIBRARY)[f"records/{MUON}.html"]
    assert '<a href="2025-09-21_DropAttn.html">2025-09-21_DropAttn</a>' in page
    assert ('href="https://github.com/KellerJordan/modded-nanogpt/tree/7d7952d2fb63307d54541e37dddd22d1a924b34a/'
            'records/092325_MuonCustomSizing"') in page
    assert "printed no &lt;final&gt; loss" in page  # left out, with its reason, escaped
    assert ('<tr class="deviation"><td><code class="hash">f99932ed-4bd6-41dc-99e9-831ebe5cd0e9.txt</code></td>'
            '<td>left out') in page
    assert '<td><code class="hash">b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt</code></td><td>judged</td>' in page
    unchecked = build_site(site_records(), [], [], LIBRARY)[f"records/{MUON}.html"]
    assert "were not checked" in unchecked and ">not planned<" in unchecked


def test_rows_for_records_not_in_the_registry_are_named_not_shown():
    stray = CheckRow(name="no-such-record", verdict="invalid", rule="", runs_judged=(), left_out=(), mean_loss=None,
                     p=None, time_s=None, time_ratio=None, reasons=())
    files = build_site(site_records(), [stray], [], LIBRARY)
    assert "records/no-such-record.html" not in files and "left out: no-such-record" in files["index.html"]


def write(tmp_path: Path, data) -> Path:
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(data))
    return path


def test_check_and_plan_rows_are_validated_field_by_field(tmp_path):
    good = {"name": MUON, "verdict": "reproduced", "rule": "v1 own", "runs_judged": ["a.txt"],
            "left_out": [{"file": "b.txt", "reason": "truncated"}], "mean_loss": 3.2796, "p": 0.001,
            "time_s": 149.7, "time_ratio": 1.0, "reasons": ["fine"]}
    (row,) = load_check_rows(write(tmp_path, [good]))
    assert row.left_out == (LeftOut("b.txt", "truncated"),) and row.mean_loss == 3.2796
    (row,) = load_check_rows(write(tmp_path, [{**good, "mean_loss": None, "p": None}]))
    assert row.mean_loss is None
    for bad, words in (({**good, "verdict": 3}, "row 0: verdict is 3, not str"),
                       ({**good, "left_out": [{"file": "b.txt"}]}, "row 0: left_out holds"),
                       ({**good, "runs_judged": [1]}, "row 0: runs_judged holds a non-string"),
                       ({**good, "p": True}, "row 0: p is true, not int/float")):
        with pytest.raises(InputError, match=re.escape(words)):
            load_check_rows(write(tmp_path, [bad]))
    with pytest.raises(InputError, match="not a list of rows"):
        load_check_rows(write(tmp_path, {"rows": []}))
    with pytest.raises(InputError, match="runnable is \"yes\", not bool"):
        load_plan_rows(write(tmp_path, [{"name": MUON, "runnable": "yes", "reason": ""}]))


def test_cli_writes_the_site_and_refuses_a_bad_check_file(tmp_path):
    check = write(tmp_path, [{"name": MUON, "verdict": "reproduced", "rule": "v1", "runs_judged": [], "left_out": [],
                              "mean_loss": None, "p": None, "time_s": None, "time_ratio": None, "reasons": []}])
    result = repro("records", "site", "--out", tmp_path / "site", "--check", check, "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["checked"] == 1 and (tmp_path / "site" / "index.html").is_file()
    assert (tmp_path / "site" / "assets" / "plotly.min.js").stat().st_size > 1_000_000
    assert len(list((tmp_path / "site" / "records").glob("*.html"))) == len(record_names(RECORDS))
    (tmp_path / "bad.json").write_text("[{")
    bad = repro("records", "site", "--out", tmp_path / "s2", "--check", tmp_path / "bad.json")
    assert bad.returncode == 3 and "bad.json is not JSON" in bad.stderr and "Traceback" not in bad.stderr
    missing = repro("records", "site", "--out", tmp_path / "s3", "--plan", tmp_path / "none.json")
    assert missing.returncode == 3 and "none.json" in missing.stderr and "Traceback" not in missing.stderr


def test_a_record_whose_logs_list_no_loss_draws_the_manifests_losses():
    page = build_site(site_records(), [], [], LIBRARY)["records/demo-cpu-synth.html"]
    figure = json.loads(re.search(r'id="chart-losses-data">(.*?)</script>', page).group(1))
    assert figure["data"][0]["x"] == ["run 1", "run 2", "run 3", "run 4"] and len(figure["data"][0]["y"]) == 4


def test_hostile_manifest_text_stays_text_and_only_web_links_are_links(tmp_path):
    import dataclasses

    (muon,) = [s for s in site_records() if s.record.name == MUON]
    record = dataclasses.replace(muon.record, title="<img src=x onerror=alert(1)>", upstream=dataclasses.replace(
        muon.record.upstream, repository="javascript:alert(1)//"))
    page = build_site([dataclasses.replace(muon, record=record)], [], [], LIBRARY)[f"records/{MUON}.html"]
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'href="javascript:' not in page and "(no pinned commit)" in page


def test_write_site_keeps_to_its_folder(tmp_path):
    from pipeline.pages.site import write_site

    with pytest.raises(ValueError, match="outside the site"):
        write_site({"../escape.html": "x"}, tmp_path / "site")
    assert not (tmp_path / "escape.html").exists()


@pytest.mark.slow
def test_site_of_the_shared_upstream_sample(tmp_path):
    from tests.conftest import shared_path

    clone = shared_path("upstream", "modded-nanogpt")
    import shutil

    from tests.paths import REPO_ROOT

    registry = tmp_path / "registry"
    for part in ("environments", "datasets"):  # the checkout's, so that environments are chosen as usual
        shutil.copytree(REPO_ROOT / "manifests" / part, registry / part)
    imported = repro("records", "import", clone, "--commit", "f411b3d346aa52d3504324ca93c230fd84c6c07f",
                     "--registry", registry)
    assert imported.returncode == 0, imported.stderr
    result = repro("--registry", registry, "records", "site", "--out", tmp_path / "site", "--json")
    assert result.returncode == 0, result.stderr
    pages = sorted(p.stem for p in (tmp_path / "site" / "records").glob("*.html"))
    assert pages == sorted(p.stem for p in (registry / "records").glob("*.yaml")) and len(pages) >= 12
    index = (tmp_path / "site" / "index.html").read_text()
    assert all(f'href="records/{name}.html"' in index for name in pages)


def test_each_record_page_states_its_rule_in_upstream_s_words_and_the_whole_plan_reason():
    long_reason = "no program in its logs: " + "the logs were stripped of their program text, " * 4
    files = build_site(site_records(), [CHECK], [PlanRow(MUON, False, long_reason)], LIBRARY)
    page = files[f"records/{MUON}.html"]
    assert "For submissions which improve speed by optimizing the systems performance, without touching the ML, " \
           "this requirement is waived." in page  # rule `parent`: README rule 2's waiver
    assert html.escape(long_reason.strip()) in page  # whole on the page; cut to a line in the index
    assert f">{html.escape(long_reason)}<" not in files["index.html"]  # the index shows a line (all on hover)


def test_the_plan_reproduce_writes_is_a_plan_the_site_reads(tmp_path):
    """`reproduce --plan --json` writes {record, refusals, environment, ...} (one object, or a list with --all);
    `records site --plan` asked for {name, runnable, reason} and refused the tool's own file."""
    for args, rows in ((["--all"], 22), (["--record", MUON], 1)):
        planned = repro("reproduce", *args, "--plan", "--json")
        (tmp_path / "plan.json").write_text(planned.stdout)
        result = repro("records", "site", "--out", tmp_path / "site", "--plan", tmp_path / "plan.json", "--json")
        assert result.returncode == 0, result.stderr
        assert json.loads(result.stdout)["planned"] == rows
    by_name = {r.name: r for r in load_plan_rows(tmp_path / "plan.json")}
    assert by_name[MUON].runnable and by_name[MUON].reason.startswith("environment pypi-torch-2.8 (deviation)")
