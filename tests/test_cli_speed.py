"""The CLI's fast paths (issue 39): `repro --help` imports no command, and the listing says what each command says."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest

from pipeline.cli import SUBCOMMANDS, SUMMARIES, cli
from tests.paths import REPO_ROOT

HEAVY = ("scipy", "numpy", "torch", "matplotlib", "plotly", "docker")


def test_each_listed_summary_is_the_commands_own():
    ctx = click.Context(cli)
    assert set(SUMMARIES) == set(SUBCOMMANDS)
    for name in SUBCOMMANDS:
        assert SUMMARIES[name] == cli.get_command(ctx, name).get_short_help_str(limit=10**6), name


def test_help_imports_no_command_and_no_heavy_module():
    probe = ("import sys\nfrom pipeline.cli import run\nrun(['--help'])\n"
             "print(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:])), "
             "sorted(m for m in sys.modules if m.startswith('pipeline.') and m.count('.') > 1))")
    out = subprocess.run([sys.executable, "-c", probe, *HEAVY], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert "Commands:" in out and "  verify     Judge run directories or log files against a record." in out
    assert out[-1] == "[] []", out[-1]


# -- libyaml where PyYAML has it: the same objects in, the same bytes out -------------------------------------
TRICKY = ["plain", "a: colon", "# hash", "- dash", "quote ' and \"", "naïve — “unicode” ✓ 𝔘", "multi\nline\n",
          " leading space", "trailing space ", "", "null", "yes", "1e3", "0o17", "x" * 300, "tab\there", "\x85",
          "back\\slash", "\u2028", "\ufeff", "emoji 🚀 in a title", "\x07bell", "é" * 130]


def _yaml_files() -> list[Path]:
    return sorted(p for folder in ("manifests", "tests/fixtures") for p in (REPO_ROOT / folder).rglob("*.yaml"))


def test_libyaml_loads_what_the_pure_loader_loads():
    from pipeline import yamlio

    files = _yaml_files()
    assert len(files) > 20 and yamlio._CLoader is not yamlio._StrictLoader  # PyYAML here is built with libyaml
    for path in files:
        text = path.read_text(encoding="utf-8")
        try:
            pure = yamlio._parse(yamlio._StrictLoader, text, str(path))
        except Exception as exc:  # noqa: BLE001  a fixture that is bad on purpose: refused either way
            with pytest.raises(type(exc)):
                yamlio.load_bytes(text, str(path), "lock")
            continue
        assert yamlio.load_bytes(text, str(path), "lock") == pure, path


@pytest.mark.parametrize("options", [dict(sort_keys=False, width=120, allow_unicode=True),
                                     dict(sort_keys=False, width=200), dict(sort_keys=False, width=200,
                                                                            allow_unicode=True),
                                     dict(sort_keys=False, width=1000, allow_unicode=True)])
def test_libyaml_dumps_the_bytes_the_pure_dumper_writes(options):
    import yaml

    from pipeline import yamlio

    docs = [{"tricky": TRICKY, "nested": {s: [s, {s: s}] for s in TRICKY if s}}]
    for path in _yaml_files():
        try:
            doc = yamlio._parse(yamlio._StrictLoader, path.read_text(encoding="utf-8"), str(path))
        except Exception:  # noqa: BLE001  bad on purpose
            continue
        docs += [doc] + ([{k: v} for k, v in doc.items()] if isinstance(doc, dict) else [])  # importer: per block
    for doc in docs:
        assert yamlio.dump(doc, **options) == yaml.safe_dump(doc, **options)


# -- several records planned in one process -------------------------------------------------------------------
def test_plans_of_several_records_are_each_records_own_plan():
    import json

    from click.testing import CliRunner

    def plan(*args: str):
        result = CliRunner().invoke(cli, ["reproduce", "--plan", "--json", *args])
        return result.exit_code, json.loads(result.output)

    names = ["2025-09-23_MuonCustomSizing", "2026-07-17_FP8DownProjection"]
    singles = [plan("--record", name)[1] for name in names]
    assert plan("--record", names[0], "--record", names[1])[1] == singles
    code, every = plan("--all")
    assert [p["record"] for p in every] == sorted(p.stem for p in (REPO_ROOT / "manifests" / "records").glob("*.yaml"))
    refused = CliRunner().invoke(cli, ["reproduce", "--record", names[0], "--record", names[1]])
    assert refused.exit_code == 2 and "add --plan" in refused.output
