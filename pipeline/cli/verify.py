"""`repro verify RUN_OR_LOG... [--record NAME] [--json]`: the verdict on runs against a record."""

from __future__ import annotations

import sys

import click

from pipeline.records.model import load_record
from pipeline.verdict.judge import Verdict, verify_runs

from .output import emit_json

PASSING = ("reproduced", "reproduced-with-deviations")


def print_verdict(v: Verdict) -> None:
    color = {"reproduced": "green", "reproduced-with-deviations": "yellow"}.get(v.outcome, "red")
    click.echo(f"record {v.record} (rules v{v.rules_version}): {len(v.runs)} run(s)")
    for r in v.runs:
        loss = f"{r.final_val_loss:.4f}" if r.final_val_loss is not None else "—"
        time = f"{r.train_time_s:.3f} s" if r.train_time_s is not None else "—"
        steps = f"{r.last_step}/{r.scheduled_steps or '?'}"
        click.echo(f"  {r.source}\n      steps {steps}  val_loss {loss}  time {time}  "
                   f"program {r.program.status}  status {r.status}")
        for problem in r.problems:
            click.echo(f"      problem: {problem}")
    seen = {(tuple(r.hardware.items()), tuple(r.software.items())) for r in v.runs if r.hardware}
    for hw, sw in sorted(seen, key=str):
        hw, sw = dict(hw), dict(sw)
        click.echo(f"  hardware: {hw['gpu_count']} x {hw['gpu_model']}, driver {hw['driver']}, CUDA {hw['cuda_driver']}"
                   f"; software: Python {sw['python']}, PyTorch {sw['torch']} (CUDA {sw['torch_cuda']}), "
                   f"Triton {sw['triton']}")
    if v.loss is not None:
        sd = f"{v.loss.sd:.4f}" if v.loss.sd is not None else "—"
        p = f"{v.loss.p_value:.4f}" if v.loss.p_value is not None else "—"
        click.echo(f"  losses: mean {v.loss.mean:.4f}  sd {sd}  p {p} (target {v.loss.target}, "
                   f"p < {v.loss.p_value_max})  runs needed {v.loss.runs_needed or '—'}")
    click.secho(f"verdict: {v.outcome}", fg=color, bold=True)
    for reason in v.reasons:
        click.echo(f"  - {reason}")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--record", "record_name", default="2025-09-23_MuonCustomSizing", show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
def verify(runs, record_name, as_json):
    """Judge run directories or log files against a record.

    Exit code 0 for reproduced / reproduced-with-deviations, 1 for not-reproduced / invalid.
    """
    verdict = verify_runs(load_record(record_name), list(runs))
    if as_json:
        emit_json(verdict.to_dict())
    else:
        print_verdict(verdict)
    sys.exit(0 if verdict.outcome in PASSING else 1)
