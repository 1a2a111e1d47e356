"""The campaign's files, one typed model each, used both to write and to read them.

    campaign.yaml         Campaign (what to run, and every Submission made)
    prepare.json          PrepareRecord (the data folder and lock, the image: what the tasks use)
    tasks/<i>-<job>.json  TaskRecord (one task attempt: node, job ids, run directory, outcome; a requeued
                          job's later attempts: <i>-<job>.attempt-<n>.json);
                          the same record is copied into the run directory as node.json

Every reader goes through `load_*`, which validates field by field (pipeline/manifest_io.py) and names
the file and the field on any error. Writes are atomic (pipeline/atomic.py).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.atomic import write_json, write_yaml
from pipeline.campaign.names import check_partition, check_time
from pipeline.errors import InputError, ManifestError
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.regular_file import read_bounded

SCHEMA_VERSION = 1
CAMPAIGN_FILE = "campaign.yaml"
PREPARE_FILE = "prepare.json"
NODE_FILE = "node.json"  # in each run directory
ENGINES = ("slurm", "local")
TASK_OUTCOMES = ("running", "succeeded", "failed", "aborted", "failed-before-run", "aborted-before-run")


@dataclass(frozen=True, kw_only=True)
class TrainSettings:
    """What every run of the campaign is: the options of `repro train` that a task passes on."""

    trainer: str  # record | native
    runtime: str  # docker | host
    preset: str | None = None
    overrides: tuple[str, ...] = ()  # --set KEY=VALUE (the native trainer)
    nproc: int | None = None
    python_env: str = "venv"  # host runtime: venv (built from the environment's lock) or system (the Python found)

    @classmethod
    def read(cls, f: Fields) -> TrainSettings:
        f.only("trainer", "runtime", "preset", "overrides", "nproc", "python_env")
        python_env = f.opt("python_env", str, "venv")
        if python_env not in ("venv", "system"):
            raise f.fail("python_env", f"is {python_env!r}", "use venv or system")
        return cls(trainer=f.req("trainer", str), runtime=f.req("runtime", str), preset=f.opt("preset", str),
                   overrides=f.list_of("overrides", str, False), nproc=f.opt("nproc", int), python_env=python_env)

    def to_dict(self) -> dict:
        return {**dataclasses.asdict(self), "overrides": list(self.overrides)}


@dataclass(frozen=True)
class DataSettings:
    dir: str  # absolute: shared by every node, or node-local (each node then verifies or fetches its own copy)
    source: str = "hub"  # `repro data fetch --source`
    synth: dict | None = None  # generate instead of fetching (the demo)

    @classmethod
    def read(cls, f: Fields) -> DataSettings:
        f.only("dir", "source", "synth")
        synth = f.opt("synth", dict)
        if synth is not None:
            s = Fields(synth, f.path, f.name("synth") + ".")
            s.only("train_tokens", "val_tokens", "seed")
            synth = {k: s.req(k, int) for k in ("train_tokens", "val_tokens", "seed")}
        return cls(f.req("dir", str), f.opt("source", str, "hub"), synth)


@dataclass(frozen=True, kw_only=True)
class SlurmSettings:
    partition: str | None = None
    nodes_per_run: int = 1
    gpus_per_node: int = 8
    time: str = "00:30:00"  # each task's limit
    prepare_time: str = "02:00:00"  # the data fetch and image build

    @classmethod
    def read(cls, f: Fields) -> SlurmSettings:
        f.only("partition", "nodes_per_run", "gpus_per_node", "time", "prepare_time")
        values = {"partition": f.opt("partition", str), "time": f.req("time", str),
                  "prepare_time": f.req("prepare_time", str)}
        checks = {"partition": check_partition, "time": check_time, "prepare_time": check_time}
        for key, value in values.items():  # they are written into #SBATCH lines, which no shell quoting protects
            try:
                checks[key](value)
            except InputError as exc:
                raise f.fail(key, exc.what, exc.fix or "") from None
        return cls(partition=values["partition"], nodes_per_run=f.req("nodes_per_run", int),
                   gpus_per_node=f.req("gpus_per_node", int),
                   time=values["time"], prepare_time=values["prepare_time"])


@dataclass(frozen=True, kw_only=True)
class Submission:
    """One `repro campaign submit`: which task indices, through which engine, under which job ids."""

    number: int
    submitted_at: str
    engine: str
    indices: tuple[int, ...]
    train: TrainSettings  # the configuration these tasks ran (a resubmission may correct it)
    prepare_job: str | None = None  # Slurm job id of the prepare job
    array_job: str | None = None  # Slurm job id of the array
    scripts: tuple[str, ...] = ()  # relative to the campaign folder

    @classmethod
    def read(cls, f: Fields) -> Submission:
        f.only("number", "submitted_at", "engine", "indices", "train", "prepare_job", "array_job", "scripts")
        return cls(number=f.req("number", int), submitted_at=f.req("submitted_at", str), engine=f.req("engine", str),
                   indices=f.list_of("indices", int), train=TrainSettings.read(f.sub("train")),
                   prepare_job=f.opt("prepare_job", str),
                   array_job=f.opt("array_job", str), scripts=f.list_of("scripts", str, False))

    def to_dict(self) -> dict:
        return {"number": self.number, "submitted_at": self.submitted_at, "engine": self.engine,
                "indices": list(self.indices), "train": self.train.to_dict(), "prepare_job": self.prepare_job,
                "array_job": self.array_job, "scripts": list(self.scripts)}


@dataclass(frozen=True, kw_only=True)
class Campaign:
    folder: Path  # where campaign.yaml lives (not written: the file is wherever the folder is)
    record: str
    runs: int
    engine: str
    train: TrainSettings
    data: DataSettings
    slurm: SlurmSettings
    image_tarball: str | None = None  # load this `repro env save` tarball instead of building (docker runtime)
    submissions: tuple[Submission, ...] = field(default=())

    @property
    def runs_dir(self) -> Path:
        return self.folder / "runs"

    @property
    def tasks_dir(self) -> Path:
        return self.folder / "tasks"

    @property
    def logs_dir(self) -> Path:
        return self.folder / "logs"

    @property
    def data_dir(self) -> Path:
        return Path(self.data.dir)

    @property
    def image_dir(self) -> Path:
        return self.folder / "image"

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "record": self.record, "runs": self.runs, "engine": self.engine,
                "train": self.train.to_dict(), "data": dataclasses.asdict(self.data),
                "slurm": dataclasses.asdict(self.slurm), "image_tarball": self.image_tarball,
                "submissions": [s.to_dict() for s in self.submissions]}

    def save(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_yaml(self.folder / CAMPAIGN_FILE, self.to_dict(),
                   header="# A repro campaign (pipeline/campaign/model.py); `repro campaign status` reads it.\n")


def load_campaign(folder: Path) -> Campaign:
    folder = Path(folder).resolve()
    path = folder / CAMPAIGN_FILE
    if not path.is_file():
        raise InputError(f"{folder} is not a campaign folder (no {CAMPAIGN_FILE})",
                         "give the folder `repro campaign submit` printed (--campaign DIR)")
    f = Fields(load_yaml(path, "run"), path)
    f.only("schema_version", "record", "runs", "engine", "train", "data", "slurm", "image_tarball", "submissions")
    check_schema_version(f, SCHEMA_VERSION)
    engine = f.req("engine", str)
    if engine not in ENGINES:
        raise f.fail("engine", f"is {engine!r}", f"use one of: {', '.join(ENGINES)}")
    return Campaign(folder=folder, record=f.req("record", str), runs=f.req("runs", int), engine=engine,
                    train=TrainSettings.read(f.sub("train")),
                    data=DataSettings.read(f.sub("data")), slurm=SlurmSettings.read(f.sub("slurm")),
                    image_tarball=f.opt("image_tarball", str),
                    submissions=tuple(Submission.read(s) for s in f.items("submissions", False)))


# ---- prepare.json ---------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class PrepareRecord:
    finished_at: str
    node: str
    data_dir: str
    data_lock_sha256: str
    data_action: str  # generated | fetched | verified
    image_id: str | None = None
    image_tarball: str | None = None  # relative to the campaign folder: what nodes without the image load

    def save(self, campaign: Campaign) -> None:
        write_json(campaign.folder / PREPARE_FILE, {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(self)})


def load_prepare(campaign: Campaign) -> PrepareRecord | None:
    path = campaign.folder / PREPARE_FILE
    if not path.is_file():
        return None
    f = Fields(_json(path), path)
    f.only("schema_version", *(x.name for x in dataclasses.fields(PrepareRecord)))
    check_schema_version(f, SCHEMA_VERSION)
    return PrepareRecord(finished_at=f.req("finished_at", str), node=f.req("node", str),
                         data_dir=f.req("data_dir", str),
                         data_lock_sha256=f.sha256("data_lock_sha256"), data_action=f.req("data_action", str),
                         image_id=f.opt("image_id", str),
                         image_tarball=f.opt("image_tarball", str))


# ---- tasks/<i>-<job>.json and node.json ----------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class TaskRecord:
    """One task attempt, where it ran and how it ended. `node` is the scheduler's node name (SLURMD_NODENAME;
    the host name for the local engine): on a one-host test cluster several nodes share one host name."""

    index: int
    job: str  # Slurm: "<array job>_<task>" (SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID); local: "local-<n>"
    engine: str
    node: str
    hostname: str
    slurm_job_id: str | None  # SLURM_JOB_ID: the task's own job id
    slurm_array_job_id: str | None
    slurm_array_task_id: str | None
    started_at: str
    outcome: str = "running"
    run_dir: str | None = None  # relative to the campaign folder, once planned
    ended_at: str | None = None
    detail: str | None = None  # why it ended before a run started, or the run's exit code
    attempt: int = 1  # a requeued Slurm job runs again under the same job id: 1 + SLURM_RESTART_COUNT

    @property
    def stem(self) -> str:
        return f"{self.index}-{self.job}" + (f".attempt-{self.attempt}" if self.attempt > 1 else "")

    @property
    def file_name(self) -> str:
        return f"{self.stem}.json"

    @property
    def owner_lock(self) -> str:
        """The file the task's process holds locked while it runs (pipeline/campaign/owner.py)."""
        return f"{self.stem}.lock"

    def save(self, campaign: Campaign) -> None:
        campaign.tasks_dir.mkdir(parents=True, exist_ok=True)
        write_json(campaign.tasks_dir / self.file_name, self.to_dict())

    def save_in_run(self, run_dir: Path) -> None:
        write_json(Path(run_dir) / NODE_FILE, self.to_dict())

    def to_dict(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, **dataclasses.asdict(self)}


def read_task(path: Path) -> TaskRecord:
    f = Fields(_json(path), path)
    f.only("schema_version", *(x.name for x in dataclasses.fields(TaskRecord)))
    check_schema_version(f, SCHEMA_VERSION)
    outcome = f.req("outcome", str)
    if outcome not in TASK_OUTCOMES:
        raise f.fail("outcome", f"is {outcome!r}", f"one of: {', '.join(TASK_OUTCOMES)}")
    return TaskRecord(index=f.req("index", int), job=f.req("job", str), engine=f.req("engine", str),
                      node=f.req("node", str),
                      hostname=f.req("hostname", str), slurm_job_id=f.opt("slurm_job_id", str),
                      slurm_array_job_id=f.opt("slurm_array_job_id", str),
                      slurm_array_task_id=f.opt("slurm_array_task_id", str), started_at=f.req("started_at", str),
                      outcome=outcome, run_dir=f.opt("run_dir", str),
                      ended_at=f.opt("ended_at", str), detail=f.opt("detail", str), attempt=f.opt("attempt", int, 1))


def load_tasks(campaign: Campaign) -> list[TaskRecord]:
    """Every task attempt, oldest first."""
    if not campaign.tasks_dir.is_dir():
        return []
    tasks = [read_task(p) for p in campaign.tasks_dir.glob("*.json")]
    return sorted(tasks, key=lambda t: (t.started_at, t.index, t.job, t.attempt))


def _json(path: Path) -> dict:
    raw = read_bounded(path, 1 << 20, "campaign record", "this file is small when the tool writes it; delete it")
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ManifestError(path, "", f"is not readable JSON ({exc})", "delete it; the tool writes it again") from None
    if not isinstance(data, dict):
        raise ManifestError(path, "", "the top level must be an object", "delete it; the tool writes it again")
    return data
