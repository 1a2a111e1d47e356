"""The run directory: `runs/<record>/<run-id>/`, one per training run (notes/rundir-contract.md).

    run = RunDir.create(Path("runs/2025-09-23_MuonCustomSizing") / new_run_id())   # status: running
    run.write_meta(meta)                                                 # run.yaml, atomically
    run.finish("succeeded", exit_code=0)                                 # status + run.yaml end fields

`status`, `run.yaml`, `preflight.json` and the derived `metrics.jsonl` are replaced atomically
(a temporary file in the same folder, then os.replace), so a reader never sees half a file even
when the writer is killed mid-write. `stdout.txt` and the trainer's `log.txt` grow while the run
runs; they are streams, not snapshots.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

# The one atomic write (pipeline/atomic.py: temp, fsync, rename, fsync folder), under the names runs/ uses.
from pipeline.atomic import write_text as atomic_write_text
from pipeline.clock import folder_stamp, utc_now
from pipeline.env.venv import VenvIdentity
from pipeline.errors import InputError, ManifestError, os_error
from pipeline.findings import Finding, deviations_from_list
from pipeline.manifest_io import Fields, load_yaml
from pipeline.probe import RuntimeProbe, probe_from_mapping
from pipeline.regular_file import open_regular
from pipeline.yamlio import dump

SCHEMA_VERSION = 2  # 2: host_environment.deviations are findings (version 1's sentences are still read)
STATUSES = ("running", "succeeded", "failed", "aborted")
FINAL_STATUSES = STATUSES[1:]
FILES = ("run.yaml", "status", "log.txt", "stdout.txt", "metrics.jsonl", "preflight.json")


def new_run_id(now: datetime | None = None) -> str:
    """A UTC timestamp plus a short random suffix: sorts by time, unique across concurrent starts."""
    return f"{folder_stamp(now)}-{secrets.token_hex(2)}"


@dataclass(frozen=True)
class HostEnvironment:
    """run.yaml's `host_environment` (host runtime): what the runtime probe read in the Python that trained, the
    venv that Python belongs to (None: repro's own Python, or the node's), and how that software differs from the
    record's. On disk one mapping: the probe's keys (pipeline/probe.py), then `venv`, then `deviations`."""

    probe: RuntimeProbe
    venv: VenvIdentity | None = None
    deviations: tuple[Finding, ...] = ()

    def to_dict(self) -> dict:
        data = self.probe.to_dict()
        data.pop("packages")  # the probe of a run lists no distributions (`repro env verify` does)
        if self.venv is not None:
            data["venv"] = self.venv.to_dict()
        data["deviations"] = [d.to_dict() for d in self.deviations]
        return data

    @classmethod
    def from_dict(cls, data: dict, where: str) -> HostEnvironment:
        data = dict(data)
        venv, deviations = data.pop("venv", None), data.pop("deviations", None)
        probe = probe_from_mapping(data, where, data.get("gpu_access_error"))  # errors name the field
        if isinstance(data.get("where"), str):
            probe = dataclasses.replace(probe, where=data["where"])  # the interpreter it was read in
        return cls(probe=probe,
                   venv=VenvIdentity.from_dict(venv, f"{where}.venv") if venv is not None else None,
                   deviations=deviations_from_list(deviations, f"{where}.deviations"))


@dataclass(frozen=True, kw_only=True)
class RunMeta:
    """run.yaml: what ran, how, on what and with which outcome. Field order is the file's order."""

    run_id: str
    record: str
    trainer: str  # record | native
    runtime: str  # docker | host
    preset: str | None
    overrides: tuple[str, ...]
    steps: int | None  # native: the schedule scaled to this many steps (None: the preset's own)
    world_size: int
    command: tuple[str, ...]  # the exact launch command; never carries secrets (no environment values)
    image_id: str | None
    environment: str
    environment_lock_sha256: str | None
    program_sha256: str
    program_fingerprint: str | None
    program_source: str
    data_dir: str
    data_lock_sha256: str | None
    compile_cache: str | None
    started_at: str
    ended_at: str | None = None
    exit_code: int | None = None
    status: str = "running"
    host_environment: HostEnvironment | None = None  # host runtime only (a docker run records its image_id)
    # a declared patch to the record's program (smoke runs): name, sha256, changes, patched_sha256
    program_patch: dict | None = None
    fa3_standin: bool = False  # FA3 absent: the record's program ran on the FlexAttention stand-in
    hub_standin: bool = False  # the program's kernels-hub imports were answered by repro's stand-in
    inductor_fp32_floats: bool = False  # float kernel arguments typed fp32, as the record's torch did (float_args)
    fp8_aligned_scales: bool = False  # one-element FP8 scales handed to cuBLAS aligned (fp8_scales)
    failure: str | None = None  # a failed run: the last exception line of its output (pipeline/runs/failure.py)
    startup_s: float | None = None  # launch to the first timed step (compile, warm-up), seconds
    schema_version: int = SCHEMA_VERSION

    def to_yaml(self) -> str:
        data = dataclasses.asdict(self)
        data = {"schema_version": data.pop("schema_version"), **data}
        data["overrides"] = list(self.overrides)
        data["command"] = list(self.command)
        data["host_environment"] = self.host_environment.to_dict() if self.host_environment else None
        return dump(data, sort_keys=False, allow_unicode=True, width=1000)

    @classmethod
    def from_dict(cls, data, path: Path) -> RunMeta:
        """Validate a parsed run.yaml: every field typed, unknown fields refused, errors name the field."""
        if not isinstance(data, dict):
            raise ManifestError(path, "", f"run.yaml must be a mapping of fields, got {type(data).__name__}",
                                "restore the run's run.yaml (from its bundle) or delete the run and run it again")
        f = Fields(data, path)
        f.only(*(x.name for x in dataclasses.fields(cls)))
        version = f.req("schema_version", int)
        if version not in (1, SCHEMA_VERSION):
            raise f.fail("schema_version", f"is {version}, this tool reads run.yaml version {SCHEMA_VERSION}",
                         "re-run with the tool version that wrote it, or run again with this one")
        status = f.opt("status", str, "running")
        if status not in STATUSES:
            raise f.fail("status", f"is {status!r}", f"use one of: {', '.join(STATUSES)}")
        meta = cls(
            run_id=f.req("run_id", str), record=f.req("record", str), trainer=f.req("trainer", str),
            runtime=f.req("runtime", str), preset=f.opt("preset", str), overrides=f.list_of("overrides", str, False),
            steps=f.opt("steps", int), world_size=f.req("world_size", int), command=f.list_of("command", str, False),
            image_id=f.opt("image_id", str), environment=f.opt("environment", str, ""),
            environment_lock_sha256=f.opt("environment_lock_sha256", str),
            program_sha256=f.opt("program_sha256", str, ""), program_fingerprint=f.opt("program_fingerprint", str),
            program_source=f.opt("program_source", str, ""), data_dir=f.opt("data_dir", str, ""),
            data_lock_sha256=f.opt("data_lock_sha256", str), compile_cache=f.opt("compile_cache", str),
            started_at=f.req("started_at", str), ended_at=f.opt("ended_at", str), exit_code=f.opt("exit_code", int),
            status=status, host_environment=_host_environment(f.opt("host_environment", dict), path),
            program_patch=f.opt("program_patch", dict), fa3_standin=f.opt("fa3_standin", bool, False),
            hub_standin=f.opt("hub_standin", bool, False),
            inductor_fp32_floats=f.opt("inductor_fp32_floats", bool, False),
            fp8_aligned_scales=f.opt("fp8_aligned_scales", bool, False), failure=f.opt("failure", str),
            startup_s=f.opt("startup_s", float))
        if not 1 <= meta.world_size <= 1 << 20:  # -1, 0 or 1e30 were taken as they came
            raise f.fail("world_size", f"is {meta.world_size}, not a count of processes",
                         "restore the run's run.yaml (from its bundle) or delete the run and run it again")
        return meta

    @classmethod
    def load(cls, path: Path) -> RunMeta:
        """Read and validate a run.yaml (bad YAML, a list, a wrong field: an InputError naming it)."""
        path = Path(path)
        if path.is_dir():
            raise InputError(f"{path}: is a directory, not a file", "remove it; a run's run.yaml is a YAML file")
        if not path.is_file():
            raise ManifestError(path, "", "run.yaml not found",
                                "give a run directory written by `repro train` (it holds run.yaml)")
        try:
            data = load_yaml(path, "run", SCHEMA_VERSION)
        except OSError as exc:
            raise os_error(path, exc, "give a run directory written by `repro train`") from None
        return cls.from_dict(dict(data), path)

    @classmethod
    def load_if_present(cls, run_dir: Path) -> RunMeta | None:
        """A run directory's run.yaml, or None when there is none (a run killed before writing it)."""
        path = Path(run_dir) / "run.yaml"
        return cls.load(path) if path.exists() else None


def _host_environment(data: dict | None, path: Path) -> HostEnvironment | None:
    if data is None:
        return None
    try:
        return HostEnvironment.from_dict(data, "host_environment")
    except InputError as exc:  # as every other field of run.yaml: the file named, then the field
        raise ManifestError(path, "", exc.what, exc.fix) from None


@dataclass(frozen=True)
class RunEnd:
    """How a run ended, for whoever stops on it (reproduce's `stopped_by`): no string to split."""

    run_id: str
    status: str  # one of FINAL_STATUSES
    exit_code: int | None
    failure: str | None = None  # the last exception line of a failed run's output

    def describe(self) -> str:
        if self.status == "aborted":  # its exit code is the signal that stopped it (-9), no failure of its own
            return f"{self.run_id}: aborted (stopped by Ctrl-C or SIGTERM)"
        return f"{self.run_id}: {self.status}" + (f" (exit code {self.exit_code})" if self.exit_code is not None
                                                   else "") + (f": {self.failure}" if self.failure else "")


@dataclass
class RunDir:
    """One run's folder and its status transitions: running -> succeeded | failed | aborted, once."""

    path: Path
    run_id: str
    status: str = "running"
    meta: RunMeta | None = field(default=None, repr=False)

    @classmethod
    def create(cls, path: Path) -> RunDir:
        """Make the run's folder (it must be new) and mark it running."""
        path = Path(path)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir()
        except FileExistsError:
            raise InputError(f"the run directory {path} already exists", "start the run again (a new run id)") from None
        except OSError as exc:
            raise InputError(f"cannot create the run directory {path}: {exc.strerror}",
                             "give a writable --runs-dir") from None
        run = cls(path, path.name)
        run.set_status("running")
        return run

    def file(self, name: str) -> Path:
        return self.path / name

    def set_status(self, status: str) -> None:
        if status not in STATUSES:
            raise ValueError(f"unknown run status {status!r}")
        if self.status in FINAL_STATUSES and status != self.status:
            raise ValueError(f"run {self.run_id} already ended as {self.status}; cannot become {status}")
        atomic_write_text(self.file("status"), status + "\n")
        self.status = status

    def write_meta(self, meta: RunMeta) -> None:
        atomic_write_text(self.file("run.yaml"), meta.to_yaml())
        self.meta = meta

    def finish(self, status: str, exit_code: int | None, startup_s: float | None = None) -> None:
        """End the run: run.yaml gets the end time, exit code, status (and a failed run's reason, from its
        output), then the status file flips."""
        if status not in FINAL_STATUSES:
            raise ValueError(f"a run ends as one of {FINAL_STATUSES}, not {status!r}")
        if self.meta is not None:
            from pipeline.runs.failure import failure_reason

            failure = failure_reason(self.file("stdout.txt")) if status == "failed" else None
            self.write_meta(dataclasses.replace(self.meta, ended_at=utc_now(), exit_code=exit_code, status=status,
                                                startup_s=startup_s, failure=failure))
        for name in ("log.txt", "stdout.txt", "metrics.jsonl"):
            self.file(name).touch()  # a run that died before writing still leaves the complete set
        self.set_status(status)


def read_status(run_dir: Path) -> str:
    """The run's status word; "unknown" when there is none, "unreadable" when the file holds no status word (the
    verdict's problem: a run whose end cannot be told is not judged a good run). Read in a few bytes: the file may
    be anyone's."""
    path = Path(run_dir) / "status"
    if not path.is_file():
        return "unknown"
    try:
        with open_regular(path, "status file", "give a run directory written by `repro train`") as f:
            word = f.read(64).decode("utf-8", errors="replace").strip()
    except OSError as exc:
        raise os_error(path, exc, "give a run directory written by `repro train`") from None
    return word if word in STATUSES else "unreadable"
