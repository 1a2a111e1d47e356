"""`repro reproduce`: image, data, preflight, N runs, verdict, bundle and report in one command.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4        # make reproduce
    repro reproduce --demo --runs 2                                      # make demo (CPU, minutes)

Run it again after an interruption: finished stages are checked and skipped, missing runs are run.
Exit codes: 0 the bundle verifies and the verdict is reproduced(-with-deviations); 1 the verdict is
not-reproduced or invalid, or the bundle does not verify; 3 bad input; 4 something missing (Docker,
torch); 5 a run failed and stopped the runs (its directory and the bundle keep its logs); 130
interrupted (a bundle of the runs so far is still written).
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import click

from pipeline.errors import Interrupted, RunFailed
from pipeline.reproduce.flow import ReproduceRequest, demo_request
from pipeline.reproduce.flow import reproduce as run_reproduce

from .output import emit_json

DEFAULT_RECORD = "2025-09-23_MuonCustomSizing"
PASSING = ("reproduced", "reproduced-with-deviations")


@click.command()
@click.option("--record", "record_name", default=None,
              help="Record to reproduce [2025-09-23_MuonCustomSizing; with --demo: demo-cpu-synth].")
@click.option("--runs", type=click.IntRange(min=1), default=4, show_default=True,
              help="Runs that must succeed (the speedrun's t-test wants several).")
@click.option("--demo", is_flag=True, help="The CPU demo: host runtime, native trainer preset demo, generated "
              "data (`repro data synth`), record demo-cpu-synth unless --record names another CPU record.")
@click.option("--trainer", type=click.Choice(["record", "native"]), default=None,
              help="record: the upstream program (default); native: train/. [demo: native]")
@click.option("--runtime", type=click.Choice(["docker", "host"]), default=None,
              help="docker: the pinned image (default); host: this machine's Python. [demo: host]")
@click.option("--preset", type=click.Choice(["record", "tiny", "demo"]), default=None,
              help="Native trainer preset. [demo: demo]")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
              help="Native trainer config override, repeatable (e.g. --set scheduled_steps=20).")
@click.option("--nproc", type=click.IntRange(min=1), default=None, help="Processes per run (default: every GPU).")
@click.option("--keep-going", is_flag=True, help="Carry on after a failed run or failed preflight checks.")
@click.option("--work", "work_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Work folder: state, runs, preflight, report [work/<record>].")
@click.option("--out", "bundle_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Where the bundle goes [bundles/].")
@click.option("--data-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Shard folder [data/<dataset>; demo: <work>/data/synth].")
@click.option("--data-source", default="hub", show_default=True,
              help="Where shards come from: hub, an http(s) mirror URL or a folder (see `repro data fetch`).")
@click.option("--image", "image_tarball", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Load this `repro env save` tarball instead of building the image.")
@click.option("--sign-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="ed25519 private key (PEM) to sign the bundle with.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress goes to stderr).")
def reproduce(record_name, runs, demo, trainer, runtime, preset, overrides, nproc, keep_going, work_dir, bundle_dir,
              data_dir, data_source, image_tarball, sign_key, as_json):
    """Reproduce a record end to end and leave a verified record bundle."""
    if demo:
        request = demo_request(runs, **({"record": record_name} if record_name else {}))
    else:
        request = ReproduceRequest(record=record_name or DEFAULT_RECORD, runs=runs)
    changes = {"trainer": trainer, "runtime": runtime, "preset": preset, "nproc": nproc, "work_dir": work_dir,
               "bundle_dir": bundle_dir, "data_dir": data_dir, "image_tarball": image_tarball,
               "sign_key": sign_key}
    if overrides:
        changes["overrides"] = tuple(overrides)
    request = replace(request, keep_going=keep_going, data_source=data_source,
                      **{k: v for k, v in changes.items() if v is not None})
    stream = sys.stderr if as_json else sys.stdout
    result = run_reproduce(request, say=lambda line: click.echo(line, file=stream),
                           terminal=stream.buffer)
    if as_json:
        emit_json(result)
    else:
        color = "green" if result.outcome in PASSING and result.bundle_verified else "red"
        click.secho(f"verdict: {result.outcome} over {len(result.runs)} run(s)", fg=color, bold=True)
        for reason in result.reasons:
            click.echo(f"  - {reason}")
        click.echo(f"bundle:  {result.bundle} ({'verified' if result.bundle_verified else 'NOT verified'})")
        click.echo(f"report:  {result.report}")
        if any(s.stage == "runs" and s.action == "skipped" for s in result.stages):
            click.echo(f"(the runs were already in {result.work_dir}; remove that folder for fresh ones)")
    if result.stopped_by and result.stopped_by.split(": ", 1)[1].startswith("aborted"):
        raise Interrupted(f"run {result.stopped_by}; the runs so far are archived in {result.bundle}",
                          "run the same command again to resume")
    if result.stopped_by and result.outcome not in PASSING:
        raise RunFailed(f"run {result.stopped_by}; the runs so far are archived in {result.bundle}",
                        f"read its stdout.txt under {result.work_dir}/runs, then run the same command again "
                        "to resume (finished stages and runs are kept)")
    sys.exit(0 if result.outcome in PASSING and result.bundle_verified else 1)
