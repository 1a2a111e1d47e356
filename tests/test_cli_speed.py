"""The CLI's fast paths (issue 39): `repro --help` imports no command, and the listing says what each command says."""

from __future__ import annotations

import subprocess
import sys

import click

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
