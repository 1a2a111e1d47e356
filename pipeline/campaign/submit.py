"""Creating a campaign and submitting what it is missing (`repro campaign submit`).

A new campaign folder gets campaign.yaml and one submission of every run. Submitting to an existing
folder completes it: only the run indices without a run that counts are submitted again (a failed,
cancelled or never-started task). Training options given again replace the campaign's configuration
(say, a corrected --set): runs of the old one no longer count, and collect keeps the failed ones as
attempts. A campaign with jobs still queued or running is not submitted twice.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.campaign.engine import Commands
from pipeline.campaign.engines import get_engine
from pipeline.campaign.model import (
    CAMPAIGN_FILE,
    Campaign,
    DataSettings,
    SlurmSettings,
    Submission,
    TrainSettings,
    load_campaign,
)
from pipeline.campaign.status import campaign_view
from pipeline.errors import InputError, UsageError
from pipeline.folderlock import FolderLock
from pipeline.records.model import Record
from pipeline.reproduce.flow import DEMO_SYNTH
from pipeline.workspace import Workspace


def new_campaign(folder: Path, record: Record, runs: int, engine: str, train: TrainSettings, data: DataSettings | None,
                 slurm: SlurmSettings, image_tarball: str | None) -> Campaign:
    if runs < 1:
        raise InputError(f"--runs {runs}: a campaign needs at least one run",
                         "give --runs 1 or more (4+ for a verdict)")
    if data is None:  # on the campaign's own (shared) folder, so every node reads the same shards
        data = DataSettings(str(folder / "data" / record.dataset.name))
    return Campaign(folder=folder, record=record.name, runs=runs, engine=engine, train=train, data=data, slurm=slurm,
                    image_tarball=image_tarball)


def demo_data(folder: Path, dataset: str) -> DataSettings:
    """The demo's generated shards (the same parameters as `repro reproduce --demo`)."""
    return DataSettings(str(folder / "data" / dataset), "hub", dict(DEMO_SYNTH))


@dataclass(frozen=True, kw_only=True)
class SubmitOptions:
    """`repro campaign submit`'s options as given: None (or empty) where one was left out, so that a new
    campaign takes the default and an existing one keeps its own value."""

    record: str | None = None  # the demo's record when --demo names none
    runs: int | None = None
    engine: str | None = None
    demo: bool = False
    # how each run trains (TrainSettings)
    trainer: str | None = None
    runtime: str | None = None
    preset: str | None = None
    overrides: tuple[str, ...] = ()
    nproc: int | None = None
    python_env: str | None = None
    # where the shards are: fixed when the campaign is created
    data_dir: Path | None = None
    data_source: str | None = None
    image_tarball: Path | None = None  # a `repro env save` tarball to load instead of building the image
    # what each Slurm task asks for (SlurmSettings)
    partition: str | None = None
    nodes_per_run: int | None = None
    gpus_per_node: int | None = None
    time: str | None = None

    def train_settings(self, base: TrainSettings | None) -> TrainSettings:
        """The given training options over `base` (an existing campaign's), or over the defaults."""
        base = base or (TrainSettings(trainer="native", runtime="host", preset="demo", overrides=(), nproc=1,
                                      python_env="system") if self.demo
                        else TrainSettings(trainer="record", runtime="docker"))
        given = {"trainer": self.trainer, "runtime": self.runtime, "preset": self.preset, "nproc": self.nproc,
                 "python_env": self.python_env}
        out = replace(base, **{k: v for k, v in given.items() if v is not None})
        return replace(out, overrides=tuple(self.overrides)) if self.overrides else out

    def new_campaign(self, folder: Path, record: Record) -> Campaign:
        """A campaign of `record` in `folder` with the defaults where an option was left out."""
        gpus = self.gpus_per_node if self.gpus_per_node is not None else 0 if self.demo else record.hardware.gpu_count
        slurm = SlurmSettings(partition=self.partition, nodes_per_run=self.nodes_per_run or 1, gpus_per_node=gpus,
                              time=self.time or "00:30:00")
        if self.data_dir is not None:
            data = DataSettings(str(self.data_dir.resolve()), self.data_source or "hub")
        elif self.demo:
            data = demo_data(folder, record.dataset.name)
        else:
            data = DataSettings(str(folder / "data" / record.dataset.name), self.data_source or "hub")
        return new_campaign(folder, record, self.runs or 4, self.engine or "slurm", self.train_settings(None), data,
                            slurm, str(self.image_tarball.resolve()) if self.image_tarball else None)

    def applied_to(self, current: Campaign) -> Campaign:
        """An existing campaign with the options given again replacing its own (the data's stay as created)."""
        changes = {"partition": self.partition, "nodes_per_run": self.nodes_per_run,
                   "gpus_per_node": self.gpus_per_node, "time": self.time}
        return replace(current, runs=self.runs or current.runs, engine=self.engine or current.engine,
                       train=self.train_settings(current.train),
                       slurm=replace(current.slurm, **{k: v for k, v in changes.items() if v is not None}))


def check_training(campaign: Campaign) -> None:
    """The campaign's `--set` against the native trainer's own configuration (unknown keys, bad values), and
    no seed shared by every run: runs that start from the same weights on the same data are copies, and a
    verdict on copies would report a spread of zero."""
    train = campaign.train
    if train.trainer != "native":
        if train.overrides or train.preset:
            raise UsageError(f"--set / --preset apply to the native trainer; this campaign runs the record's program "
                             f"({' '.join('--set ' + o for o in train.overrides) or '--preset ' + str(train.preset)})",
                             "drop them, or add --trainer native")
        return
    from train.config import ConfigError, apply_overrides, preset

    try:
        config = apply_overrides(preset(train.preset or "record"), list(train.overrides))
    except ConfigError as exc:
        raise UsageError(f"the campaign's training options are refused by the native trainer: {exc}",
                         "correct the --set (`python -m train --help` lists the keys) and submit again") from None
    if config.seed is not None and campaign.runs > 1:
        raise UsageError(f"--set seed={config.seed} would give all {campaign.runs} runs the same seed: they would be "
                         "copies of one run (same weights, same data order), and their spread would say nothing",
                         "drop --set seed (each run then draws its own seed and logs it)")


def existing_or_new(folder: Path, make: Callable[[], Campaign]) -> tuple[Campaign, bool]:
    if (folder / CAMPAIGN_FILE).is_file():
        return load_campaign(folder), False
    return make(), True


def submit(ws: Workspace, campaign: Campaign, say: Callable[[str], None]) -> Submission | None:
    """Submit every run index still missing; None when nothing is (the campaign is complete)."""
    check_training(campaign)  # before anything is written or submitted: a bad --set fails here, not in every task
    campaign.folder.mkdir(parents=True, exist_ok=True)
    with FolderLock(campaign.folder, "repro campaign submit"):  # one submission at a time
        return _submit(ws, campaign, say)


def _submit(ws: Workspace, campaign: Campaign, say: Callable[[str], None]) -> Submission | None:
    engine = get_engine(campaign.engine)
    view = campaign_view(ws, campaign)
    if view.active:
        jobs = sorted({t.job for t in view.tasks if t.active and t.job})
        raise InputError(f"campaign {campaign.folder} still has jobs queued or running "
                         f"({', '.join(jobs) or 'the prepare job'})",
                         f"wait for them (`repro campaign wait {campaign.folder}`) or cancel them "
                         f"(`repro campaign cancel {campaign.folder}`), then submit again")
    missing = view.missing
    if not missing:
        say(f"[submit] all {campaign.runs} run(s) of {campaign.folder} are done; nothing to submit")
        return None
    campaign.save()  # the tasks read their configuration from campaign.yaml
    number = max((s.number for s in campaign.submissions), default=0) + 1
    say(f"[submit] submission {number}: run(s) {', '.join(map(str, missing))} of {campaign.runs} through "
        f"{campaign.engine}")

    def recorded(submission: Submission) -> None:
        current = load_campaign(campaign.folder)
        replace(current, submissions=current.submissions + (submission,)).save()

    return engine.submit(campaign, number, missing, Commands.for_workspace(ws, campaign), say, recorded)
