"""The smaller hostile cases of issue 38: plain text out, valid JSON, no write through a link, clear errors.

Each test gives the tool what the hostile set gave it and checks what a careful user would expect."""

from __future__ import annotations

import json
import shutil

import pytest

from pipeline.errors import InputError
from tests.paths import REPO_ROOT
from tests.test_bundle import repro, three_runs

HOSTILE = "Fast\u202eevil\x1b]0;owned\x07 run\u2066x\u2069"
UNSAFE = ("\u202e", "\x1b", "\x07", "\u2066", "\u2069")
MUON = "2025-09-23_MuonCustomSizing"


def test_records_show_prints_plain_text_and_json_escapes_the_rest(tmp_path):
    registry = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", registry)
    manifest = registry / "records" / f"{MUON}.yaml"
    text = manifest.read_text(encoding="utf-8")
    title = next(line for line in text.splitlines() if line.startswith("title:"))
    manifest.write_text(text.replace(title, f"title: {json.dumps(HOSTILE)}"), encoding="utf-8")
    shown = repro("--registry", registry, "records", "show", MUON)
    assert shown.returncode == 0, shown.stderr
    assert "Fastevil" in shown.stdout and not any(ch in shown.stdout for ch in UNSAFE)
    as_json = repro("--registry", registry, "records", "show", MUON, "--json")
    assert as_json.returncode == 0 and not any(ch in as_json.stdout for ch in UNSAFE)
    assert json.loads(as_json.stdout)["title"] == HOSTILE  # the data is kept, written as \u escapes


def test_json_output_has_no_nan():
    from pipeline.cli.output import to_json
    from pipeline.records.logparse import StepPoint

    text = to_json({"loss": float("nan"), "runs": [float("inf"), 1.5], "step": StepPoint(1, 2, float("nan"))})
    data = json.loads(text, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))
    assert data["loss"] is None and data["runs"] == [None, 1.5] and data["step"]["step_avg_ms"] is None


def test_pages_carry_no_control_or_format_character():
    from pipeline.pages.page import data_block, esc

    assert esc(HOSTILE) == "Fastevil]0;owned runx"
    block = data_block("x", {"name": HOSTILE})
    assert not any(ch in block for ch in UNSAFE) and "\\u202e" not in block


def test_the_site_is_never_written_through_a_link_inside_its_folder(tmp_path):
    from pipeline.pages.site import write_site

    site, elsewhere = tmp_path / "site", tmp_path / "elsewhere"
    site.mkdir()
    elsewhere.mkdir()
    (site / "records").symlink_to(elsewhere)
    with pytest.raises(InputError, match="is a symbolic link inside --out"):
        write_site({"index.html": "i", "records/x.html": "x"}, site)
    assert list(elsewhere.iterdir()) == []


def test_report_out_an_existing_file_is_a_clear_error(tmp_path):
    runs = three_runs(tmp_path)
    existing = tmp_path / "report.txt"
    existing.write_text("mine\n")
    done = repro("report", "--html", *runs, "--out", existing)
    assert done.returncode == 3 and "is a file, not a folder" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and existing.read_text() == "mine\n"


@pytest.mark.parametrize("value", ["٣٠", "00:٣٠:00", "１0"])
def test_scheduler_values_take_ascii_digits_only(tmp_path, value):
    from pipeline.campaign.names import check_time

    with pytest.raises(InputError, match="is not a Slurm time limit"):
        check_time(value)
    done = repro("--root", tmp_path, "campaign", "submit", "--demo", "--time", value, "--campaign", tmp_path / "c")
    assert done.returncode == 2 and "not a Slurm time limit" in done.stderr, done.stderr
    assert not (tmp_path / "c").exists()


def test_a_log_named_with_an_escape_sequence_prints_plain(tmp_path):
    """Every human-readable line goes through pipeline/cli/output.py's echo: a log's file name that sets the
    window title (OSC) and clears the screen reached the terminal raw in `repro verify`'s output."""
    run = three_runs(tmp_path)[0]
    hostile = tmp_path / "a\x1b]0;PWNED\x07\x1b[2Jb.txt"
    shutil.copy(run / "log.txt", hostile)
    done = repro("verify", hostile)
    assert "Traceback" not in done.stderr and "ab.txt" in done.stdout
    assert not any(ch in done.stdout + done.stderr for ch in UNSAFE)
