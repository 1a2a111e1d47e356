"""`repro train`: one run of the record's program or the native trainer, in the container or on the host.

    repro train --record 2025-09-23_MuonCustomSizing --trainer record --runtime docker
    repro train --trainer native --runtime host --preset tiny --data-dir data/synth --nproc 2
    repro train --trainer record --runtime host --program-source ~/src/modded-nanogpt --dry-run

Exit codes: 0 the run succeeded; 3 bad input (unknown record, no data, wrong option); 1 the program
failed its hash check; 4 something missing (Docker engine, torch, the pinned log); 5 the run
failed (its directory keeps the logs); 130 interrupted (the run directory says `aborted`).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import yaml

from pipeline.errors import InputError, Interrupted, RunFailed
from pipeline.registry import Registry
from pipeline.runs.runtime_docker import ALL_GPUS, UNLIMITED
from pipeline.runs.train_plan import RUNTIMES, TRAINERS, TrainRequest, plan_train
from pipeline.runs.train_run import run_train

from .output import echo, emit_json, pass_registry


def _memlock(value: str) -> int:
    if value == "unlimited":
        return UNLIMITED
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise click.BadParameter(f"{value!r}: use unlimited or a byte count")


def _gpus(value: str) -> int:
    if value == "all":
        return ALL_GPUS
    if value == "none":
        return 0
    if value.isdigit() and int(value) > 0:
        return int(value)
    raise click.BadParameter(f"{value!r}: use all, none or a GPU count")


@click.command()
@click.option("--record", "record_name", default=None, help=f"Record to train [{Registry.DEFAULT_RECORD}].")
@click.option("--trainer", type=click.Choice(TRAINERS), default="record", show_default=True,
              help="record: the upstream program, hash-verified; native: train/.")
@click.option("--runtime", type=click.Choice(RUNTIMES), default="docker", show_default=True,
              help="docker: the built image; host: torchrun of this Python.")
@click.option("--nproc", type=int, help="Processes (GPUs). Default: every GPU found (1 without GPUs).")
@click.option("--preset", type=click.Choice(["record", "tiny", "demo"]), help="Native trainer preset [record].")
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Native trainer config override.")
@click.option("--steps", type=int, help="Native trainer: scale the record's schedule to N steps (short runs).")
@click.option("--smoke", "smoke_steps", type=click.IntRange(min=2), metavar="STEPS",
              help="Smoke run: the step count cut to STEPS, as a declared patch (record program or native).")
@click.option("--smoke-val-tokens", type=click.IntRange(min=1024), metavar="N",
              help="Smoke only: validate on N tokens (small data; a multiple of 1024).")
@click.option("--data-dir", type=click.Path(file_okay=False), help="Shard folder [data/<dataset>].")
@click.option("--runs-dir", type=click.Path(file_okay=False), help="Where run directories go [runs].")
@click.option("--program-source", metavar="URL|FILE|DIR",
              help="The record's log or program (URL or file), or a clone of upstream. Default: the pinned commit.")
@click.option("--image", help="Docker image id or tag. Default: the one `repro env build` recorded.")
@click.option("--venv", "venv_dir", type=click.Path(exists=True, path_type=Path),
              help="Host: train with this `repro env venv` (its folder or bin/python); run.yaml records its identity.")
@click.option("--gpus", default="all", show_default=True, help="Docker: GPUs for the container: all, none or N.")
@click.option("--memlock", default="unlimited", show_default=True,
              help="Docker: the container's locked-memory limit in bytes; lower it only on engines that may not "
              "raise it.")
@click.option("--dry-run", is_flag=True, help="Print the container spec or command; run nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the plan / result as JSON (training output goes to "
              "stderr).")
@pass_registry
def train(registry, record_name, trainer, runtime, nproc, preset, overrides, steps, smoke_steps, smoke_val_tokens,
          data_dir, runs_dir, program_source, image, venv_dir, gpus, memlock, dry_run, as_json):
    """Run training once and leave a complete run directory (runs/<record>/<run-id>/)."""
    ws, venv = registry.workspace, None
    if venv_dir is not None:
        from pipeline.env.venv import load_identity

        if runtime != "host":
            raise InputError("--venv is for --runtime host", "add --runtime host, or drop --venv")
        venv = load_identity(venv_dir)
    request = TrainRequest(record=registry.record_or_default(record_name), trainer=trainer, runtime=runtime,
                           nproc=nproc, preset=preset, venv=venv, overrides=tuple(overrides), steps=steps,
                           data_dir=data_dir, runs_dir=runs_dir,
                           program_source=program_source, image=image, gpus=_gpus(gpus), memlock=_memlock(memlock),
                           cache_dir=ws.cache, ws=ws, smoke_steps=smoke_steps, smoke_val_tokens=smoke_val_tokens)
    plan = plan_train(request)
    if dry_run:
        if as_json:
            emit_json(plan.to_dict())
        else:
            echo(yaml.safe_dump(plan.to_dict(), sort_keys=False, width=1000), nl=False)
        return
    result = run_train(plan, terminal=sys.stderr.buffer if as_json else sys.stdout.buffer)
    if as_json:
        emit_json(result)
    else:
        loss = f"{result.final_val_loss:.4f}" if result.final_val_loss is not None else "—"
        echo(f"{result.status}: {result.run_dir}  steps {result.last_step}/{result.scheduled_steps or '?'}  "
             f"val_loss {loss}")
    if result.status == "aborted":
        raise Interrupted(f"the run was interrupted; {result.run_dir} is marked aborted",
                          "start it again; the compile cache keeps what was compiled")
    if result.status == "failed":
        code = f"exit code {result.exit_code}" if result.exit_code is not None else "no exit code (it never started)"
        raise RunFailed(f"the run failed with {code}", f"read {result.run_dir}/stdout.txt and log.txt")
