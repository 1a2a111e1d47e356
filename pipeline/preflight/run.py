"""Preflight: what this node is, checked against the record's node, before anyone pays for runs.

    repro preflight [--record NAME] [--runtime docker|host] [--strict] [--json] [--output PATH]
    repro preflight --from-dir tests/fixtures/hosts/h200-1gpu     # saved outputs of another node
    repro preflight --from-log runs/.../log.txt                       # the nvidia-smi table in a run log

Collection (pipeline/preflight/collect.py) reads the node, parsing (pipeline/preflight/parse.py)
turns text into facts, checking (pipeline/preflight/checks.py) judges them; this module ties them
together into a PreflightReport, written as a schema-versioned preflight.json that later goes into
every run directory and bundle.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from pipeline import __version__
from pipeline.errors import InputError, os_error
from pipeline.preflight.checks import outcome, run_checks
from pipeline.preflight.collect import HostSources, collect
from pipeline.preflight.facts import (
    Check,
    FactsError,
    HostFacts,
    MissingSource,
    RuntimeFacts,
    check_from_dict,
    host_facts_from_dict,
)
from pipeline.preflight.parse import gpus_from_table
from pipeline.records.logparse import parse_log
from pipeline.records.model import Record
from pipeline.regular_file import read_bounded

SCHEMA_VERSION = 1
MAX_REPORT_BYTES = 16 << 20  # a 512-GPU node's report is well under 1 MiB
RUNTIMES = ("docker", "host")
NOT_IN_LOG = "a run log's header does not show it"
LOG_SOURCES = ("nvidia-smi topo -m", "lscpu", "/proc/meminfo", "/etc/os-release", "docker", "disk:data",
               "disk:runs", "disk:shm")


@dataclass(frozen=True, kw_only=True)
class PreflightReport:
    schema_version: int
    created_utc: str
    tool_version: str
    record: str
    record_hardware: dict
    runtime: str
    strict: bool
    facts_from: str  # "this machine", "saved outputs in DIR", "run log LOG"
    outcome: str  # "pass", "warn", "fail"
    checks: tuple[Check, ...]
    facts: HostFacts

    @property
    def no_gpu(self) -> bool:
        """No GPU where the record needs one (a CPU record needs none)."""
        return not self.facts.gpus and any(c.name == "gpus_visible" and c.status == "fail" for c in self.checks)

    @property
    def no_docker(self) -> Check | None:
        """The docker runtime's failed check when no Docker daemon answers: something missing on the machine
        (exit 4, as every other command that needs the engine says it), not a check that said no."""
        if self.facts_from != "this machine" or self.runtime != "docker" or self.facts.docker is not None:
            return None  # saved outputs without docker-info.json say nothing about a daemon
        return next((c for c in self.checks if c.name == "docker" and c.status == "fail"), None)

    def by_status(self, status: str) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    def failures(self) -> list[Check]:
        """The checks that make this report fail (warnings too under --strict)."""
        return [c for c in self.checks if c.status == "fail" or (self.strict and c.status == "warn")]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data, path: Path) -> PreflightReport:
        """Validate a parsed preflight.json into the report type; errors name the file and the field."""
        fix = "regenerate it with this version's `repro preflight`"
        if not isinstance(data, dict):
            raise InputError(f"{path}: a preflight report must be a JSON object, got {type(data).__name__}", fix)
        if data.get("schema_version") != SCHEMA_VERSION:
            raise InputError(f"{path}: schema_version {data.get('schema_version')!r}, this tool reads "
                             f"{SCHEMA_VERSION}", fix)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"{path}: field '{unknown[0]}' is not a known field", fix)
        missing = sorted(known - set(data))
        if missing:
            raise InputError(f"{path}: field '{missing[0]}' is missing", fix)
        try:
            for key, kind in (("created_utc", str), ("tool_version", str), ("record", str), ("runtime", str),
                              ("facts_from", str), ("outcome", str), ("strict", bool), ("record_hardware", dict),
                              ("checks", list)):
                if not isinstance(data[key], kind):
                    raise FactsError(key, f"must be {kind.__name__}, got {data[key]!r}")
            if data["outcome"] not in ("pass", "warn", "fail"):
                raise FactsError("outcome", f"is {data['outcome']!r}, not pass, warn or fail")
            checks = tuple(check_from_dict(c, f"checks[{i}]") for i, c in enumerate(data["checks"]))
            facts = host_facts_from_dict(data["facts"])
        except FactsError as exc:
            raise InputError(f"{path}: {exc}", fix) from None
        return cls(schema_version=SCHEMA_VERSION, created_utc=data["created_utc"], tool_version=data["tool_version"],
                   record=data["record"], record_hardware=data["record_hardware"], runtime=data["runtime"],
                   strict=data["strict"], facts_from=data["facts_from"], outcome=data["outcome"], checks=checks,
                   facts=facts)


def default_locations(record: Record, data_dir: Path, runs_dir: Path) -> dict:
    """Disk label -> (folder to measure, folder whose bytes are already ours). The image location is
    the Docker root, known only once the daemon answers (collect adds it). The CLI passes the
    workspace's data/ and runs/ unless told otherwise."""
    data = Path(data_dir)
    return {"data": (data, data / record.dataset.name), "runs": (Path(runs_dir), None),
            "shm": (Path("/dev/shm"), None)}


def _report(record: Record, runtime: str, strict: bool, facts_from: str, facts: HostFacts,
            from_log: bool = False) -> PreflightReport:
    checks = run_checks(facts, record, runtime, from_log=from_log)
    return PreflightReport(
        schema_version=SCHEMA_VERSION, created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__, record=record.name, record_hardware=dataclasses.asdict(record.hardware),
        runtime=runtime, strict=strict, facts_from=facts_from, outcome=outcome(checks, strict), checks=checks,
        facts=facts)


def preflight(record: Record, runtime: str = "docker", strict: bool = False, sources=None,
              locations: dict | None = None) -> PreflightReport:
    """Read the node through `sources` (this machine by default) and check it against the record.
    `locations` (from default_locations) are the folders whose disks are measured; none when omitted."""
    if runtime not in RUNTIMES:
        raise InputError(f"unknown runtime {runtime!r}", f"use one of: {', '.join(RUNTIMES)}")
    sources = sources if sources is not None else HostSources()
    facts = collect(sources, runtime=runtime, locations=locations or {})
    return _report(record, runtime, strict, sources.description, facts)


def facts_from_log(path: Path) -> HostFacts:
    """The facts a record-format log carries: its nvidia-smi table and its version lines."""
    log = parse_log(path)
    if log.hardware is None:
        raise InputError(f"{path}: no nvidia-smi table in the log's header",
                         "pass a record-format log (the environment block follows the first '=' line)")
    runtime = RuntimeFacts(where=f"log header of {Path(path).name}", python=log.python, torch=log.torch,
                           torch_cuda=log.torch_cuda, triton=log.triton)
    return HostFacts(gpus=gpus_from_table(log.hardware), driver=log.hardware.driver, cuda_driver=log.hardware.cuda,
                     runtime=runtime, missing=tuple(MissingSource(s, NOT_IN_LOG) for s in LOG_SOURCES))


def preflight_log(log_path: Path, record: Record, strict: bool = False) -> PreflightReport:
    """Check the node a log ran on, as far as its header shows it (the record's own logs, a past run)."""
    facts = facts_from_log(Path(log_path))
    return _report(record, "host", strict, f"run log {log_path}", facts, from_log=True)


def write_report(report: PreflightReport, path: Path) -> Path:
    from pipeline.atomic import write_json

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, report.to_dict())  # a reader never sees half a file
    except OSError as exc:
        raise os_error(path, exc, "give a writable --output") from None
    return path


def read_report(path: Path) -> PreflightReport:
    """A preflight.json as written above, validated into PreflightReport (run directories, bundles, reproduce)."""
    path = Path(path)
    raw = read_bounded(path, MAX_REPORT_BYTES, "preflight report", "run `repro preflight` again")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text ({exc})", "run `repro preflight` again") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError; an int of 5,000 digits; nested thousands deep
        raise InputError(f"{path}: not valid JSON ({type(exc).__name__}: {exc})",
                         "run `repro preflight` again") from None
    return PreflightReport.from_dict(data, path)
