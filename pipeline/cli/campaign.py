"""`repro campaign`: many runs of one record on a cluster (Slurm) or on this machine, into one bundle.

    repro campaign submit --record 2025-09-23_MuonCustomSizing --runs 11 --engine slurm --partition gpu
    repro campaign submit --demo --preset tiny --runs 4 --engine slurm --campaign campaigns/demo
    repro campaign status campaigns/demo          # per task: Slurm's state, the node, the run's status
    repro campaign wait campaigns/demo            # until nothing is queued or running
    repro campaign collect campaigns/demo         # verdict, bundle (+ attempts), report, per-node table
    repro campaign submit --campaign campaigns/demo   # again: only the runs still missing

Exit codes: 0 ok (wait: every run succeeded; collect: the bundle verifies and the verdict passes); 1 a
check said no (runs missing after wait, a verdict that does not pass, a bundle that does not verify);
3 bad input; 4 no Slurm client or controller; 5 a run or a job submission failed; 130 interrupted.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from pipeline.clock import folder_stamp
from pipeline.errors import CheckFailed, Interrupted, RunFailed
from pipeline.outcome import Outcome
from pipeline.registry import Registry
from pipeline.verdict.outcomes import passed

from .output import echo, emit_json, pass_registry, pass_workspace, secho

if TYPE_CHECKING:
    from pipeline.campaign.model import Campaign
    from pipeline.campaign.submit import SubmitOptions
    from pipeline.workspace import Workspace

FOLDER = click.Path(file_okay=False, path_type=Path)


def _slurm_time(value: str | None) -> str | None:
    if value is None or re.fullmatch(r"([0-9]+-)?[0-9]+(:[0-9]{1,2}){0,2}", value):  # ASCII digits only
        return value
    raise click.BadParameter(f"{value!r} is not a Slurm time limit; write e.g. 30, 00:30:00 or 1-00:00:00")


@click.group()
def campaign():
    """Many runs of a record on Slurm (a job array) or locally, gathered into one verified bundle."""


@campaign.command()
@click.option("--record", "record_name", default=None,
              help=f"Record to run [{Registry.DEFAULT_RECORD}; --demo: demo-cpu-synth].")
@click.option("--runs", type=click.IntRange(min=1), default=None, help="Runs wanted [4; a resubmission: as before].")
@click.option("--engine", type=click.Choice(["slurm", "local"]), default=None,
              help="slurm: a job array through sbatch; local: one run after another here [slurm].")
@click.option("--campaign", "folder", type=FOLDER, default=None,
              help="Campaign folder, on a filesystem every node shares [campaigns/<record>-<time>]; an existing "
                   "one is completed.")
@click.option("--demo", is_flag=True, help="The CPU demo: record demo-cpu-synth, native trainer preset demo, host "
              "runtime, one process, generated data; no GPUs asked of Slurm.")
@click.option("--trainer", type=click.Choice(["record", "native"]), default=None, help="[record; demo: native]")
@click.option("--runtime", type=click.Choice(["docker", "host"]), default=None, help="[docker; demo: host]")
@click.option("--preset", type=click.Choice(["record", "tiny", "demo"]), default=None, help="Native trainer preset.")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Native trainer config override.")
@click.option("--nproc", type=click.IntRange(min=1), default=None, help="Processes per run [every GPU; demo: 1].")
@click.option("--python-env", type=click.Choice(["venv", "system"]), default=None,
              help="Host runtime: venv (built once from the environment's lock, hashes enforced) or system (the "
                   "Python found, recorded as unpinned). [venv; demo: system]")
@click.option("--data-dir", type=FOLDER, default=None,
              help="Shard folder [CAMPAIGN/data/<dataset>]; on a node-local path each node verifies (or fetches) "
                   "its own copy.")
@click.option("--data-source", default=None, help="Where shards come from (see `repro data fetch`) [hub].")
@click.option("--image", "image_tarball", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Load this `repro env save` tarball in the prepare job instead of building the image.")
@click.option("--partition", default=None, help="Slurm partition [the cluster's default].")
@click.option("--nodes-per-run", type=click.IntRange(min=1), default=None, help="Nodes per run [1].")
@click.option("--gpus-per-node", type=click.IntRange(min=0), default=None,
              help="GPUs per run's node [the record's GPU count: 8 for the H100 record, 0 for CPU records].")
@click.option("--time", "time_limit", default=None, callback=lambda ctx, param, value: _slurm_time(value),
              help="Each task's time limit, in Slurm's format (MM, HH:MM:SS, D-HH:MM) [00:30:00].")
@click.option("--json", "as_json", is_flag=True, help="Print the submission as JSON.")
@pass_registry
def submit(registry, record_name, runs, engine, folder, demo, trainer, runtime, preset, overrides, nproc, python_env,
           data_dir, data_source, image_tarball, partition, nodes_per_run, gpus_per_node, time_limit, as_json):
    """Submit a campaign, or the runs an existing campaign is still missing."""
    from pipeline.campaign.names import check_folder, check_partition
    from pipeline.campaign.submit import SubmitOptions, existing_or_new
    from pipeline.reproduce.flow import DEMO_RECORD

    options = SubmitOptions(
        record=record_name or (DEMO_RECORD if demo else None), runs=runs, engine=engine, demo=demo,
        trainer=trainer, runtime=runtime, preset=preset, overrides=tuple(overrides), nproc=nproc,
        python_env=python_env, data_dir=data_dir, data_source=data_source, image_tarball=image_tarball,
        partition=partition, nodes_per_run=nodes_per_run, gpus_per_node=gpus_per_node, time=time_limit)
    if folder is None:
        stamp = folder_stamp()
        folder = registry.workspace.root / "campaigns" / f"{options.record or Registry.DEFAULT_RECORD}-{stamp}"
    folder = check_folder(folder)  # the name, the path and the partition go into job scripts: checked first
    check_partition(partition)
    current, created = existing_or_new(
        folder, lambda: options.new_campaign(folder, registry.record_or_default(options.record)))
    if not created:
        current = _resubmission(folder, current, options)
    _submit_and_show(registry.workspace, current, folder, as_json)


def _resubmission(folder: Path, current: Campaign, options: SubmitOptions) -> Campaign:
    """The existing campaign with the options given again; the record and the data are fixed at creation."""
    if options.record and options.record != current.record:
        raise click.UsageError(f"{folder} is a campaign of {current.record}, not {options.record}; "
                               "give another --campaign folder")
    if options.data_dir is not None or options.data_source is not None:
        raise click.UsageError("--data-dir and --data-source are fixed when a campaign is created; "
                               "start another --campaign folder to change them")
    return options.applied_to(current)


def _submit_and_show(ws: Workspace, current: Campaign, folder: Path, as_json: bool) -> None:
    from pipeline.campaign.submit import submit as submit_campaign

    say = (lambda line: echo(line, err=True)) if as_json else echo  # JSON alone on stdout
    submission = submit_campaign(ws, current, say)
    if as_json:
        emit_json({"campaign": str(folder), "submission": submission.to_dict() if submission else None})
    else:
        echo(f"campaign: {folder}")
        if submission is not None and submission.engine == "slurm":
            echo(f"next:     repro campaign wait {folder} && repro campaign collect {folder}")
        elif submission is not None:
            echo(f"next:     repro campaign collect {folder}")


def _load(folder: Path):
    from pipeline.campaign.model import load_campaign

    return load_campaign(folder)


@campaign.command()
@click.argument("folder", type=FOLDER)
@click.option("--json", "as_json", is_flag=True)
@pass_workspace
def status(ws, folder, as_json):
    """Per task: the scheduler's state, the node, the run directories and their status."""
    from pipeline.campaign.status import campaign_view, render

    view = campaign_view(ws, _load(folder))
    if as_json:
        emit_json(view.to_dict())
    else:
        echo(render(view))


@campaign.command()
@click.argument("folder", type=FOLDER)
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=0), default=None, help="Give up after S seconds.")
@click.option("--poll", "poll_s", type=click.FloatRange(min=0.1), default=5.0, show_default=True)
@click.option("--json", "as_json", is_flag=True)
@pass_workspace
def wait(ws, folder, timeout_s, poll_s, as_json):
    """Wait until none of the campaign's jobs is queued or running; exit 1 if runs are still missing."""
    from pipeline.campaign.status import render
    from pipeline.campaign.status import wait as wait_for

    say = (lambda line: echo(line, err=True)) if as_json else echo
    view = wait_for(ws, _load(folder), poll_s, timeout_s, say)
    if as_json:
        emit_json(view.to_dict())
    else:
        echo(render(view))
    if view.prepare is not None and view.prepare.state.startswith(("FAILED", "CANCELLED", "TIMEOUT")):
        job, logs = view.prepare.job, view.campaign.logs_dir
        # the last attempt's own log; Slurm's file for scripts written before attempts had one
        log = max(logs.glob(f"prepare-{job}.attempt-*.out"), default=logs / f"prepare-{job}.out",
                  key=lambda p: p.stat().st_mtime)
        raise CheckFailed(f"the prepare job {view.prepare.job} ended {view.prepare.state}, so no task ran",
                          f"read {log}, fix the cause and submit again: `repro campaign submit --campaign {folder}`")
    if view.missing:
        raise CheckFailed(f"{len(view.missing)} run(s) did not succeed: task(s) {', '.join(map(str, view.missing))}",
                          f"collect what finished (`repro campaign collect {folder}`), or run the missing ones: "
                          f"`repro campaign submit --campaign {folder}`")


@campaign.command()
@click.argument("folder", type=FOLDER)
@click.option("--sign-key", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="ed25519 private key (PEM) to sign the bundle with.")
@click.option("--json", "as_json", is_flag=True)
@pass_workspace
def collect(ws, folder, sign_key, as_json):
    """Every finished run into one bundle (failed ones as attempts), its report and a per-node table."""
    from pipeline.campaign.collect import collect as collect_runs

    say = (lambda line: echo(line, err=True)) if as_json else echo
    result = collect_runs(ws, _load(folder), say, sign_key)
    if as_json:
        emit_json(result)
    else:
        echo(result.nodes_table)
        color = "green" if passed(result.outcome) and result.bundle_verified else "red"
        secho(f"verdict: {result.outcome} over {len(result.runs)} run(s)"
              + (f", {len(result.attempts)} attempt(s) kept aside" if result.attempts else ""), fg=color)
        for reason in result.reasons:
            echo(f"  - {reason}")
        echo(f"bundle:  {result.bundle} ({'bundle verified' if result.bundle_verified else 'NOT verified'})")
        echo(f"report:  {result.report}")
    if not result.bundle_verified:
        raise CheckFailed(f"the bundle {result.bundle} does not verify: {'; '.join(result.problems[:3])}",
                          f"see `repro bundle verify {result.bundle}`")
    return Outcome.check(passed(result.outcome))


@campaign.command()
@click.argument("folder", type=FOLDER)
def cancel(folder):
    """scancel every job of the campaign still queued or running (running runs end as aborted)."""
    from pipeline.campaign.engines import get_engine

    current = _load(folder)
    slurm_jobs = any(s.engine == "slurm" for s in current.submissions)
    ids = get_engine("slurm" if slurm_jobs else current.engine).cancel(current, echo)
    echo(f"cancelled job(s) {', '.join(ids)}" if ids else "nothing of the campaign is queued or running")


# ---- what the jobs run (the generated scripts call these) ---------------------------------------------

@campaign.command(hidden=True)
@click.argument("folder", type=FOLDER)
@click.option("--submission", type=int, required=True)
@pass_workspace
def prepare(ws, folder, submission):
    """The prepare job: image and data, once, before the tasks."""
    from pipeline.campaign.work import prepare as prepare_campaign

    prepared = prepare_campaign(ws, _load(folder), echo)
    echo(f"prepared on {prepared.node}: data {prepared.data_dir} ({prepared.data_action})")


@campaign.command(hidden=True)
@click.argument("folder", type=FOLDER)
@click.option("--submission", type=int, required=True)
@click.option("--index", type=int, required=True)
@pass_workspace
def task(ws, folder, submission, index):
    """One array task: one `repro train`, its node recorded in its run directory."""
    from pipeline.campaign.work import run_task

    done = run_task(ws, _load(folder), index, submission, echo, terminal=sys.stdout.buffer)
    echo(f"[task {index}] {done.outcome}" + (f": {done.run_dir}" if done.run_dir else "")
         + (f" ({done.detail})" if done.detail else ""))
    if done.outcome in ("aborted", "aborted-before-run"):
        raise Interrupted(f"task {index} was interrupted; the campaign records it as {done.outcome}",
                          "resubmit the campaign to run it again")
    if done.outcome != "succeeded":
        raise RunFailed(f"task {index} ended {done.outcome}", f"read {folder}/{done.run_dir or 'tasks'}")
