"""`repro records list|show|fingerprint`: the record registry."""

from __future__ import annotations

import click

from pipeline.records.identity import fingerprint
from pipeline.records.logparse import parse_log
from pipeline.records.model import load_record, record_names

from .output import emit_json


@click.group()
def records():
    """The records this tool knows (manifests/records/*.yaml)."""


@records.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_(as_json):
    """List known records."""
    rows = [load_record(name) for name in record_names()]
    if as_json:
        emit_json([{"name": r.name, "title": r.title, "date": r.date, "parent": r.parent or None,
                    "target_val_loss": r.rules.target_val_loss, "mean_time_s": r.published.mean_time_s,
                    "runs": len(r.published.losses)} for r in rows])
        return
    for r in rows:
        click.echo(f"{r.name:32} {r.published.mean_time_s:8.2f} s  {len(r.published.losses):2} runs  {r.title}")


@records.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def show(name, as_json):
    """Show everything a record pins."""
    r = load_record(name)
    if as_json:
        emit_json(r.to_dict())
        return
    p, hw, sw = r.published, r.hardware, r.software
    click.echo(f"{r.name}: {r.title}\n  {r.description}")
    click.echo(f"  upstream   {r.upstream.repository} @ {r.upstream.commit or '(not pinned)'}")
    click.echo(f"  parent     {r.parent or '-'}")
    click.echo(f"  published  {len(p.losses)} runs, {p.steps} steps, mean time {p.mean_time_s} s, "
               f"losses {list(p.losses)}")
    click.echo(f"  target     val loss <= {r.rules.target_val_loss} with p < {r.rules.p_value_max} "
               f"(evidence: {r.rules.loss_evidence})")
    click.echo(f"  hardware   {hw.gpu_count} x {hw.gpu_model} ({hw.gpu_form_factor}, {hw.interconnect}), "
               f"driver {hw.driver or '?'}, CUDA {hw.cuda_driver or '?'}")
    click.echo(f"  software   Python {sw.python or '?'}, PyTorch {sw.torch or '?'}, Triton {sw.triton or '?'}")
    click.echo(f"  env/data   {r.environment}; {r.dataset.name}: {r.dataset.train_shards} train + "
               f"{r.dataset.val_shards} val shards")
    for log in r.logs:
        click.echo(f"  log        {log.file}  {log.sha256[:12]}…  loss {log.val_loss}  {log.train_time_ms} ms")


@records.command("fingerprint")
@click.argument("log", type=click.Path(dir_okay=False))
def fingerprint_(log):
    """Print the code fingerprint of the program embedded in LOG (to pin it in a manifest)."""
    parsed = parse_log(log)
    if parsed.program is None:
        raise click.ClickException(f"{log} carries no program text; use a full run log")
    click.echo(fingerprint(parsed.program))
