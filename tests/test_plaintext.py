"""Untrusted text is plain on every output: escape sequences whole (OSC too) and bidirectional controls removed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from pipeline.cli import cli
from pipeline.plain_text import plain
from pipeline.records.upstream_table import plain_text

ROOT = Path(__file__).resolve().parents[1]
OSC_LINK = "\x1b]8;;https://evil.example/\x07click\x1b]8;;\x07"
HOSTILE = f"a {OSC_LINK} b \x1b[31mred\x1b[0m \u202egnp.exe\u202c \x9b2J \x1b]52;c;ZXZpbA==\x1b\\ end"


@pytest.mark.parametrize("text, expected", [
    (OSC_LINK, "click"),
    ("\x1b[1;31mbold red\x1b[0m", "bold red"),
    ("left \u202eright\u202c \u2066iso\u2069", "left right iso"),
    ("an OSC never ended \x1b]0;title", "an OSC never ended "),
    ("line one\nline\ttwo\u2028", "line onelinetwo"),
])
def test_plain_removes_whole_sequences_and_controls(text, expected):
    assert plain(text) == expected


def test_lines_keep_newlines_and_the_table_cell_reader_uses_the_same_rule():
    assert plain("a\nb\tc\x07", lines=True) == "a\nb\tc"
    assert plain_text(f"  [x]({OSC_LINK})  ") == "[x](click)"


def test_records_check_prints_untrusted_text_plain(tmp_path):
    reg = tmp_path / "registry"
    shutil.copytree(ROOT / "manifests" / "environments", reg / "environments")
    shutil.copytree(ROOT / "manifests" / "datasets", reg / "datasets")
    (reg / "records").mkdir()
    doc = yaml.safe_load((ROOT / "manifests/records/2024-10-10_Muon.yaml").read_text())
    doc["imported"]["flags"] = [HOSTILE]
    (reg / "records" / "2024-10-10_Muon.yaml").write_text(yaml.safe_dump(doc, allow_unicode=True))
    result = CliRunner().invoke(cli, ["--registry", str(reg), "records", "check", "2024-10-10_Muon", "--from",
                                      str(ROOT / "tests/fixtures/upstream-sample")])  # judged or not: printed plain
    assert "editor: a click b red gnp.exe   end" in result.output, result.output
    assert not any(ch in result.output for ch in "\x1b\x07\x9b\u202e\u202c")
