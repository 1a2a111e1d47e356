"""The whole flow: `repro reproduce --record NAME --runs N` (what `make reproduce` calls), or `--demo`.

    repro reproduce --record 2025-09-23_MuonCustomSizing --runs 4     # preflight, image, data, 4 runs, bundle
    repro reproduce --demo --runs 2                                  # CPU: host runtime, native trainer, synth data
    repro reproduce --smoke 40 --runs 2 --runtime host               # the record's program, step count cut

Stages run in a fixed order, cheap checks first so that a node that cannot work fails in seconds, before
any image build or download: preflight (the node against the record) -> environment (the image or the
Python that will train) -> data (fetch or generate, verify every shard) -> runs -> verdict + archive ->
report -> bundle check. Every stage has one shape: look at its outputs, skip it when they hold up
(recomputing hashes, never trusting the state file), else run it. Everything lives in the work folder
(default `<root>/work/<record>/`): `reproduce-state.json` records what each stage produced, and a lock
file keeps a second `reproduce` out of the same folder.

The stages are pipeline/reproduce/stages.py, which runs count pipeline/reproduce/selection.py (one
RunSelection dataclass for both sides of the comparison), and the state file pipeline/reproduce/state.py.
Which runs count: run directories of the requested configuration (trainer, runtime, preset, --set, smoke
cut, and the native trainer's code) that succeeded with a complete log. A failed run stops the runs
(unless --keep-going); the runs so far are archived anyway so the bundle keeps the crash. When a later
invocation replaces a failed run, the failed one stays in the bundle under `attempts/`, outside the verdict.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

from pipeline.env.choose import EnvironmentChoice
from pipeline.env.venv import VenvIdentity
from pipeline.errors import InputError, UsageError
from pipeline.folderlock import FolderLock
from pipeline.hashing import sha256_file
from pipeline.records.model import Record
from pipeline.registry import Registry
from pipeline.reproduce.selection import RunSelection, counts, existing_runs
from pipeline.reproduce.stages import (
    STAGES,
    StageOutcome,
    data_dir_of,
    judged_and_attempts,
    stage_archive,
    stage_bundle_check,
    stage_data,
    stage_environment,
    stage_report,
    train_request,
)
from pipeline.reproduce.state import STATE_FILE, State
from pipeline.runs.rundir import RunEnd
from pipeline.workspace import Workspace

# The stage functions campaigns run on their own folder (pipeline/campaign), beside this module's own names.
__all__ = ["DEMO_RECORD", "DEMO_SYNTH", "STATE_FILE", "Flow", "ReproduceRequest", "ReproduceResult", "StageOutcome",
           "demo_request", "judged_and_attempts", "reproduce", "stage_archive", "stage_bundle_check", "stage_data",
           "stage_environment", "stage_report", "train_request"]

DEMO_RECORD = "demo-cpu-synth"
# The demo's data: generated shards (pipeline/data/synth.py), enough for the demo preset's steps.
DEMO_SYNTH = {"train_tokens": 262_144, "val_tokens": 16_384, "seed": 0}


@dataclass(frozen=True)
class ReproduceRequest:
    record: str
    runs: int
    trainer: str = "record"
    runtime: str = "docker"
    preset: str | None = None  # native trainer only
    overrides: tuple[str, ...] = ()
    nproc: int | None = None
    keep_going: bool = False
    work_dir: Path | None = None  # default <root>/work/<record>
    bundle_dir: Path | None = None  # default <root>/bundles
    data_dir: Path | None = None  # default <root>/data/<dataset>, or <work>/data/synth for generated data
    dataset: str | None = None  # a dataset manifest other than the record's (smoke runs on small data)
    data_source: str = "hub"  # repro data fetch --source
    synth: dict | None = None  # generate the data with these parameters instead of fetching it
    image_tarball: Path | None = None  # load this `repro env save` tarball instead of building
    sign_key: Path | None = None
    program_source: str | None = None  # record trainer: URL, log/program file, or a clone
    smoke_steps: int | None = None  # a smoke run: the step count cut to this (a declared patch)
    smoke_val_tokens: int | None = None  # smoke only: validate on this many tokens
    python_env: str = "venv"  # host runtime: "venv" (built from the chosen lock) or "system" (the Python found)
    wheelhouse: Path | None = None  # locked files from this folder instead of their URLs

    def work(self, ws: Workspace) -> Path:
        return Path(self.work_dir or ws.work / self.record).resolve()


def demo_request(runs: int = 2, **changes) -> ReproduceRequest:
    """`make demo`: the demo record, on this machine's Python, with the native trainer on generated data."""
    base = ReproduceRequest(record=DEMO_RECORD, runs=runs, trainer="native", runtime="host", preset="demo", nproc=1,
                            synth=dict(DEMO_SYNTH), python_env="system")
    return replace(base, **changes)


@dataclass(frozen=True)
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



@dataclass
class Flow:
    """One `reproduce` in progress: the request, the record, and what the stages produced so far."""

    ws: Workspace
    req: ReproduceRequest
    record: Record
    state: State
    say: Callable[[str], None]
    terminal: object = None
    screen: object = None  # a text stream for the runs' progress lines (pipeline/runs/progress.py), or None
    data_dir: Path | None = None
    image_state: dict | None = None
    choice: EnvironmentChoice | None = None  # pipeline/env/choose.py, when one was made
    venv: VenvIdentity | None = None  # host runtime: the venv every run trains in and records
    extra_members: dict | None = None  # more bundle members (a campaign's per-node table, pipeline/campaign)
    stopped: RunEnd | None = None
    judged: list[Path] = field(default_factory=list)
    attempts: list[Path] = field(default_factory=list)
    bundle: Path | None = None
    outcome: str | None = None
    reasons: tuple[str, ...] = ()
    report: Path | None = None
    report_html: Path | None = None
    bundle_ok: bool = False

    @property
    def work(self) -> Path:
        return self.req.work(self.ws)

    @property
    def runs_folder(self) -> Path:
        return self.work / "runs" / self.record.name

    @functools.cached_property
    def wanted(self) -> RunSelection:
        return RunSelection.wanted(self.req)

    def existing_runs(self) -> list[Path]:
        return existing_runs(self.runs_folder)

    def counts(self, run: Path) -> bool:
        """A run that counts toward `req.runs`: complete, and of the configuration asked for."""
        return counts(run, self.wanted)



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
        flow = Flow(ws, req, record, State(work / STATE_FILE, req), say, terminal, screen)
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
        return ReproduceResult(record.name, str(work), tuple(stages), tuple(r.name for r in flow.judged),
                               tuple(a.name for a in flow.attempts), flow.stopped, flow.outcome, flow.reasons,
                               str(flow.bundle), sha256_file(flow.bundle), flow.bundle_ok, str(flow.report),
                               str(flow.state.path), str(flow.report_html) if flow.report_html else None)


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
    from pipeline.runs.stage import effective_native_settings
    from train.config import ConfigError, apply_overrides, preset

    overrides, _ = effective_native_settings(req.overrides, None, req.smoke_steps, req.smoke_val_tokens)
    try:
        apply_overrides(preset(req.preset or "record"), list(overrides))
    except ConfigError as exc:
        raise UsageError(f"the native trainer refuses the options: {exc}",
                         "correct the --set or --preset (`python -m train --help` lists the keys); nothing ran") \
            from None


def refuse_before_cost(ws: Workspace, record: Record, req: ReproduceRequest) -> None:
    """What can be known wrong before any stage runs: no shard count to fetch, too few shards for the program's
    steps, a program that cannot be cut."""
    from pipeline.reproduce.plan import local_program, plan_data

    found = local_program(ws, record, req.program_source) if req.trainer == "record" else None
    text = found.text if found is not None else None
    if req.trainer == "record" and req.smoke_steps is not None:  # a program that cannot be cut: refused before cost
        from pipeline.records.program import resolve_program
        from pipeline.records.smoke_cut import planned_smoke_cut

        text = resolve_program(record, req.program_source, ws.cache).text
        planned_smoke_cut(text, req.smoke_steps, req.smoke_val_tokens)
    _, refusal = plan_data(ws, record, req, text)
    if refusal:
        raise InputError(refusal, f"give --dataset NAME with the shards the program reads, or write "
                                  f"dataset.train_shards in {record.path}")
