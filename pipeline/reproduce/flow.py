"""The whole flow: `repro reproduce --record NAME --runs N` (what `make reproduce` calls), or `--demo`.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4     # preflight, image, data, 4 runs, bundle
    repro reproduce --demo --runs 2                                  # CPU: host runtime, native trainer, synth data
    repro reproduce --smoke 40 --runs 2 --runtime host               # the record's program, step count cut

Stages run in a fixed order, cheap checks first so that a node that cannot work fails in seconds, before
any image build or download: preflight (the node against the record) -> environment (the image or the
Python that will train) -> data (fetch or generate, verify every shard) -> runs -> verdict + archive ->
bundle check -> report (its page made from that check). Every stage has one shape: look at its outputs,
skip it when they hold up (recomputing hashes, never trusting the state file), else run it. Everything lives
in the work folder (default `<root>/work/<record>/`): `reproduce-state.json` records what each stage
produced, and a lock file keeps a second `reproduce` out of the same folder.

The stages are pipeline/reproduce/stages.py, which runs count pipeline/reproduce/selection.py (one
RunSelection dataclass for both sides of the comparison), and the state file pipeline/reproduce/state.py.
Which runs count: run directories of the requested configuration (trainer, runtime, preset, --set, smoke
cut, and the native trainer's code) that succeeded with a complete log. A failed run stops the runs
(unless --keep-going); the runs so far are archived anyway so the bundle keeps the crash. When a later
invocation replaces a failed run, the failed one stays in the bundle under `attempts/`, outside the verdict. A run
stopped by Ctrl-C or SIGTERM stops the command there (exit 130) with nothing judged or archived; it is never judged,
and the next invocation keeps it aside as an attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from pipeline.errors import InputError, UsageError
from pipeline.folderlock import FolderLock
from pipeline.hashing import sha256_file
from pipeline.records.model import Record
from pipeline.registry import Registry
from pipeline.reproduce.request import DEMO_RECORD, DEMO_SYNTH, Flow, ReproduceRequest, demo_request
from pipeline.reproduce.stages import (
    AFTER_RUNS,
    STAGES,
    StageOutcome,
    data_dir_of,
    judged_and_attempts,
    no_gpu,
    stage_data,
    stage_environment,
    train_request,
)
from pipeline.reproduce.state import STATE_FILE, State
from pipeline.runs.rundir import RunEnd
from pipeline.workspace import Workspace

# The stage functions campaigns run on their own folder (pipeline/campaign), beside this module's own names.
__all__ = ["AFTER_RUNS", "DEMO_RECORD", "DEMO_SYNTH", "STATE_FILE", "Flow", "ReproduceRequest", "ReproduceResult",
           "StageOutcome", "demo_request", "judged_and_attempts", "reproduce", "stage_data", "stage_environment",
           "train_request"]

@dataclass(frozen=True, kw_only=True)
class ReproduceResult:
    record: str
    work_dir: str
    stages: tuple[StageOutcome, ...]
    runs: tuple[str, ...]  # judged
    attempts: tuple[str, ...]  # archived, not judged
    stopped_by: RunEnd | None  # the run whose failure or interruption ended the runs stage
    outcome: str | None
    reasons: tuple[str, ...]
    bundle: str | None
    bundle_sha256: str | None
    bundle_verified: bool
    report: str | None
    state_file: str
    report_html: str | None = None  # the bundle's self-contained HTML report (pipeline/report/html_report.py)


def reproduce(registry: Registry, req: ReproduceRequest, say: Callable[[str], None] = lambda line: None,
              terminal=None, screen=None) -> ReproduceResult:
    if req.runs < 1:
        raise InputError(f"--runs {req.runs}: at least one run is needed", "give --runs 1 or more (4+ for a verdict)")
    ws, record = registry.workspace, registry.record(req.record)
    check_training_options(req)
    refuse_before_cost(ws, record, req)
    work = req.work(ws)
    work.mkdir(parents=True, exist_ok=True)
    with FolderLock(work, "repro reproduce"):
        flow = Flow(ws=ws, req=req, record=record, state=State(work / STATE_FILE, req), say=say, terminal=terminal,
                    screen=screen)
        flow.data_dir = data_dir_of(flow)
        stages: list[StageOutcome] = []
        for stage in STAGES:
            started = time.monotonic()
            outcome = stage(flow)
            outcome = replace(outcome, seconds=time.monotonic() - started)
            stages.append(outcome)
            say(f"[{outcome.stage}] {outcome.action}: {outcome.detail} ({outcome.seconds:.0f} s)")
            if outcome.stage == "archive":
                say(f"[verify] {flow.outcome} over {len(flow.judged)} run(s)"
                    + (f" ({len(flow.attempts)} earlier attempt(s) kept aside)" if flow.attempts else ""))
        return ReproduceResult(record=record.name, work_dir=str(work), stages=tuple(stages),
                               runs=tuple(r.name for r in flow.judged),
                               attempts=tuple(a.name for a in flow.attempts), stopped_by=flow.stopped,
                               outcome=flow.outcome, reasons=flow.reasons,
                               bundle=str(flow.bundle), bundle_sha256=sha256_file(flow.bundle),
                               bundle_verified=flow.bundle_ok, report=str(flow.report),
                               state_file=str(flow.state.path),
                               report_html=str(flow.report_html) if flow.report_html else None)


def check_training_options(req: ReproduceRequest) -> None:
    """The training options against the trainer that will run them, before any stage is paid for: the native
    trainer's own configuration parses the preset and every --set (train/config.py: its message, verbatim)."""
    if req.trainer != "native":
        given = [f"--preset {req.preset}"] * bool(req.preset) + [f"--set {o}" for o in req.overrides]
        if given:
            raise UsageError(f"{', '.join(given)}: the native trainer's options; the record trainer runs the "
                             "record's program exactly as published",
                             "drop them, or add --trainer native (--smoke STEPS cuts the record program's steps)")
        return
    from pipeline.runs.train_plan import effective_native_settings
    from train.config import ConfigError, apply_overrides, preset

    overrides, _ = effective_native_settings(req.overrides, None, req.smoke_steps, req.smoke_val_tokens)
    try:
        apply_overrides(preset(req.preset or "record"), list(overrides))
    except ConfigError as exc:
        raise UsageError(f"the native trainer refuses the options: {exc}",
                         "correct the --set or --preset (`python -m train --help` lists the keys); nothing ran") \
            from None


def _refuse_without_gpu(record: Record, req: ReproduceRequest) -> None:
    """No nvidia-smi on a machine where the record needs GPUs: exit 4 before anything is fetched (`make smoke` on
    a laptop waited on the network, then failed on it)."""
    import shutil

    if record.hardware.gpu_count and not req.keep_going and shutil.which("nvidia-smi") is None:
        raise no_gpu(record.name, why=" (no nvidia-smi)")


def refuse_before_cost(ws: Workspace, record: Record, req: ReproduceRequest) -> None:
    """What can be known wrong before any stage runs: no shard count to fetch, too few shards for the program's
    steps, a program that cannot be cut, a --nproc the program asserts against, a system Python whose Triton
    does not compile the program's kernels."""
    from pipeline.reproduce.plan import local_program, plan_data

    found = local_program(ws, record, req.program_source) if req.trainer == "record" else None
    text = found.text if found is not None else None
    if req.trainer == "record" and req.smoke_steps is not None:  # a program that cannot be cut: refused before cost
        from pipeline.records.program import resolve_program

        if found is None:  # it would be downloaded: a machine with no GPU is told so first, as preflight tells it
            _refuse_without_gpu(record, req)
        from pipeline.records.smoke_cut import planned_smoke_cut

        text = resolve_program(record, req.program_source, ws.cache).text
        planned_smoke_cut(text, req.smoke_steps, req.smoke_val_tokens)
    if text is not None and req.nproc is not None:  # without --nproc: the runs stage checks the node's GPU count
        from pipeline.records.world_size import world_size_refusal

        why = world_size_refusal(text, req.nproc)
        if why:
            raise InputError(f"{record.name}: {why[0]}", why[1])
    _, refusal = plan_data(ws, record, req, text)
    if refusal:
        raise InputError(refusal, f"give --dataset NAME with the shards the program reads, or write "
                                  f"dataset.train_shards in {record.path}")
    if req.trainer == "record" and req.runtime == "host" and req.python_env == "system":
        from pipeline.reproduce.program_needs import pinned_files, system_refusal

        why = system_refusal(pinned_files(record), record.software.torch)
        if why:
            raise InputError(why, "drop --python-env system: the record's own environment is built for it "
                                  "(`repro reproduce --record NAME --plan` names it)")
