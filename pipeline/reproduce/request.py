"""What one `repro reproduce` is asked to do (ReproduceRequest, and `make demo`'s), and the Flow the stages
read and fill while it runs. Its own module, so that the flow, its stages and the planner all depend on it and
none of them on another (pipeline/reproduce/flow.py runs the stages; stages.py is each stage; plan.py plans).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.env.choose import EnvironmentChoice
from pipeline.env.venv import VenvIdentity
from pipeline.records.model import Record
from pipeline.reproduce.selection import RunSelection, counts, existing_runs
from pipeline.reproduce.state import State
from pipeline.runs.rundir import RunEnd
from pipeline.workspace import Workspace

if TYPE_CHECKING:
    from pipeline.bundle.verify import BundleCheck

DEMO_RECORD = "demo-cpu-synth"
# The demo's data: generated shards (pipeline/data/synth.py), enough for the demo preset's steps.
DEMO_SYNTH = {"train_tokens": 262_144, "val_tokens": 16_384, "seed": 0}


@dataclass(frozen=True, kw_only=True)
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


@dataclass(kw_only=True)
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
    check: BundleCheck | None = None  # the bundle check's result, which the report page shows

    @property
    def work(self) -> Path:
        return self.req.work(self.ws)

    @property
    def bundle_ok(self) -> bool:
        return self.check is not None and self.check.ok

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
