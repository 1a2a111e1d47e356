"""`repro reproduce`: image, data, preflight, N runs, verdict, bundle and report in one command.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4        # make reproduce
    repro reproduce --demo --runs 2                                      # make demo (CPU, minutes)
    repro reproduce --smoke 40 --runs 2 --runtime host                   # the record's program, steps cut
    repro reproduce --record 2026-07-17_FP8DownProjection --plan         # what it would do and cost; runs nothing

Run it again after an interruption: finished stages are checked and skipped, missing runs are run.
Exit codes: 0 the bundle verifies and the verdict is reproduced(-with-deviations) (smoke-passed for
--smoke); 1 the verdict is not-reproduced, invalid or smoke-failed, or the bundle does not verify;
3 bad input; 4 something missing (Docker, torch); 5 a run failed and stopped the runs (its directory
and the bundle keep its logs); 130 interrupted (the run keeps its log and the status `aborted`; nothing is
judged or archived, and the next reproduce keeps that run aside as an attempt).
"""

from __future__ import annotations

import sys
import time
from dataclasses import replace
from pathlib import Path

import click

from pipeline.errors import InputError, RunFailed, UsageError
from pipeline.outcome import Outcome
from pipeline.registry import Registry
from pipeline.reproduce.flow import ReproduceRequest, check_training_options, demo_request
from pipeline.reproduce.flow import reproduce as run_reproduce

from .output import echo, emit_json, pass_registry, secho


@click.command()
@click.option("--record", "record_names", multiple=True,
              help=f"Record to reproduce [{Registry.DEFAULT_RECORD}; with --demo: demo-cpu-synth]. With --plan, "
                   "repeat it to plan several records in one process.")
@click.option("--all", "all_records", is_flag=True, help="With --plan: plan every record of the registry.")
@click.option("--runs", type=click.IntRange(min=1), default=None,
              help="Runs that must succeed (the speedrun's t-test wants several). [default: 4; demo: 2, as make demo]")
@click.option("--demo", is_flag=True, help="The CPU demo: host runtime, native trainer preset demo, generated "
              "data (`repro data synth`), record demo-cpu-synth unless --record names another CPU record.")
@click.option("--trainer", type=click.Choice(["record", "native"]), default=None,
              help="record: the upstream program (default); native: train/. [demo: native]")
@click.option("--runtime", type=click.Choice(["docker", "host"]), default=None,
              help="docker: the pinned image (default); host: this machine's Python. [demo: host only]")
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
@click.option("--dataset", default=None,
              help="Dataset manifest to train on instead of the record's (e.g. docs-v1-x4 for smoke runs).")
@click.option("--data-source", default="hub", show_default=True,
              help="Where shards come from: hub, an http(s) mirror URL or a folder (see `repro data fetch`).")
@click.option("--image", "image_tarball", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Load this `repro env save` tarball instead of building the image.")
@click.option("--sign-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="ed25519 private key (PEM) to sign the bundle with.")
@click.option("--program-source", default=None,
              help="Record trainer: the record's log, program, or an upstream clone instead of the pinned URL.")
@click.option("--smoke", "smoke_steps", type=click.IntRange(min=2), default=None, metavar="STEPS",
              help="Smoke run: the record's exact program with only its step count cut (a declared patch). "
                   "Verdict smoke-passed/smoke-failed, never reproduced.")
@click.option("--smoke-val-tokens", type=click.IntRange(min=1024), default=None, metavar="N",
              help="Smoke only: validate on N tokens (small data; a multiple of 1024).")
@click.option("--python-env", type=click.Choice(["venv", "system"]), default=None,
              help="Host runtime: venv builds a virtualenv from the environment's lock (hashes enforced, cached); "
                   "system trains with the Python found here, recorded as unpinned. [venv; demo: system]")
@click.option("--wheelhouse", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="A folder holding the environment's locked files (offline nodes, pruned nightlies).")
@click.option("--stream", is_flag=True, help="Show the trainer's output live (it always goes to each run's "
              "stdout.txt).")
@click.option("--plan", "plan_only", is_flag=True, help="Print the environment (exact or deviation, and why), "
              "program files, stand-ins, patch, data and cost; run and fetch nothing (exit 1: it cannot run).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON (progress goes to stderr).")
@pass_registry
def reproduce(registry, record_names, all_records, runs, demo, trainer, runtime, preset, overrides, nproc, keep_going,
              work_dir, bundle_dir, data_dir, dataset, data_source, image_tarball, sign_key, program_source,
              smoke_steps, smoke_val_tokens, python_env, wheelhouse, plan_only, stream, as_json):
    """Reproduce a record end to end and leave a verified record bundle."""
    if (len(record_names) > 1 or all_records) and not plan_only:
        raise click.UsageError("several records (--record twice, or --all) can only be planned: add --plan")
    if all_records and record_names:
        raise click.UsageError("--all plans every record: leave out --record")
    record_name = record_names[0] if record_names else None
    if demo and trainer == "record":
        raise UsageError("--demo --trainer record: the demo trains with the native trainer (its record, "
                         "demo-cpu-synth, has no program of its own to run)",
                         "drop --trainer record, or drop --demo and give --record NAME for a record's program")
    if demo and runtime == "docker":  # its environment is `host`: no lock to build an image from
        raise UsageError("--demo --runtime docker: the demo trains on this machine's Python (its record's "
                         "environment is `host`, with no lock an image could be built from)",
                         "drop --runtime docker; a record's own image is `repro reproduce --record NAME`")
    if demo and all_records:
        raise click.UsageError("--demo --all: the demo is the CPU records' (demo-cpu-synth); leave out --all")
    for name in record_names if demo else ():  # the demo preset on generated data cannot reproduce a GPU record
        try:
            trainer_of_record = registry.record(name).program.trainer
        except InputError:  # an unknown or unreadable record is named where the flow or the plan loads it
            continue
        if trainer_of_record != "native":
            raise UsageError(f"--demo --record {name}: {name} is not a CPU record (its runs are its own program on "
                             "GPUs); the demo trains the native trainer's demo preset on generated data, which "
                             "cannot reproduce it",
                             f"drop --demo: `repro reproduce --record {name}` runs its own program (add --plan to "
                             "see how), or give --demo a CPU record such as demo-cpu-synth")
    runs = runs if runs is not None else 2 if demo else 4  # --demo --plan plans what `make demo` runs
    if demo:
        request = demo_request(runs, **({"record": record_name} if record_name else {}))
    else:
        request = ReproduceRequest(record=record_name or Registry.DEFAULT_RECORD, runs=runs)
    changes = {"trainer": trainer, "runtime": runtime, "preset": preset, "nproc": nproc, "work_dir": work_dir,
               "bundle_dir": bundle_dir, "data_dir": data_dir, "image_tarball": image_tarball,
               "sign_key": sign_key, "dataset": dataset, "program_source": program_source,
               "smoke_steps": smoke_steps, "smoke_val_tokens": smoke_val_tokens, "python_env": python_env,
               "wheelhouse": wheelhouse}
    if overrides:
        changes["overrides"] = tuple(overrides)
    request = replace(request, keep_going=keep_going, data_source=data_source,
                      **{k: v for k, v in changes.items() if v is not None})
    check_training_options(request)  # a --set the trainer refuses fails here, before the plan or any stage
    if plan_only and (len(record_names) > 1 or all_records):
        names = registry.record_names() if all_records else list(record_names)
        return _print_plans(registry.workspace, [replace(request, record=name) for name in names], as_json)
    if plan_only:
        return _print_plan(registry.workspace, request, as_json)
    out = sys.stderr if as_json else sys.stdout
    if request.runs < 2 and request.smoke_steps is None:
        echo(f"note: --runs {request.runs} alone cannot end `reproduced` (good runs already in the work folder "
             "count too): the verdict's t-test against the record's target needs at least 2 runs (the record's own "
             "rules ask for more; --plan says how many)", file=out)
    from pipeline.verdict.outcomes import passed

    started = time.monotonic()
    result = run_reproduce(registry, request, say=lambda line: echo(line, file=out),
                           terminal=out.buffer if stream else None, screen=out)
    seconds = time.monotonic() - started
    if as_json:
        emit_json(result)
    else:
        _print_result(result, seconds)
    stopped = result.stopped_by  # an interrupted run raised Interrupted in the runs stage: nothing is archived
    if stopped is not None and not passed(result.outcome):
        raise RunFailed(f"run {stopped.describe()}; the runs so far are archived in {result.bundle}",
                        f"read its stdout.txt under {result.work_dir}/runs, then run the same command again "
                        "to resume (finished stages and runs are kept)")
    return Outcome.check(passed(result.outcome) and result.bundle_verified)


def _print_result(result, seconds: float) -> None:
    """The screen's last lines: the verdict and its reasons, the bundle, the reports, the time."""
    from pipeline.verdict.outcomes import passed

    color = "green" if passed(result.outcome) and result.bundle_verified else "red"
    secho(f"verdict: {result.outcome} over {len(result.runs)} run(s)", fg=color, bold=True)
    for reason in result.reasons:
        echo(f"  - {reason}")
    echo(f"bundle:  {result.bundle} ({'verified' if result.bundle_verified else 'NOT verified'})")
    echo(f"report:  {result.report}")
    if result.report_html:
        echo(f"html:    {result.report_html}  (open it in a browser; it works offline)")
    echo(f"time:    {seconds:.0f} s")
    if any(s.stage == "runs" and s.action == "skipped" for s in result.stages):
        echo(f"(the runs were already in {result.work_dir}; remove that folder for fresh ones)")


def _print_plan(ws, request, as_json: bool) -> Outcome:
    from pipeline.reproduce.plan import plan_reproduce, render_plan

    plan = plan_reproduce(ws, request)
    if as_json:
        emit_json(plan.to_dict())
    else:
        echo("\n".join(render_plan(plan)))
    return Outcome.check(not plan.refusals)


def _print_plans(ws, requests, as_json: bool) -> Outcome:
    """Several records' plans in one process (one registry, one import of the tool): a list with --json."""
    from pipeline.reproduce.plan import plan_reproduce, render_plan

    plans = [plan_reproduce(ws, request) for request in requests]
    cannot = [plan.record for plan in plans if plan.refusals]
    if as_json:
        emit_json([plan.to_dict() for plan in plans])
    else:
        echo("\n\n".join("\n".join(render_plan(plan)) for plan in plans))
        # the exit status is 1 when any cannot run: the last line says which, so the reader need not scroll
        echo(f"\n{len(plans) - len(cannot)} of {len(plans)} record(s) plan"
             + (f"; {len(cannot)} cannot run: {', '.join(cannot)} (their `cannot:` lines say why)" if cannot else ""))
    return Outcome.check(not cannot)
