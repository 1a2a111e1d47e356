"""Preflight: what this node is, checked against the record's node, before anyone pays for runs.

    repro preflight [--record NAME] [--runtime docker|host] [--strict] [--json] [--output PATH]
    repro preflight --from-dir ../shared/fixtures/hosts/h200-1gpu     # saved outputs of another node
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

from pipeline import REPO_ROOT, __version__
from pipeline.errors import InputError
from pipeline.preflight.checks import outcome, run_checks
from pipeline.preflight.collect import HostSources, collect
from pipeline.preflight.facts import Check, HostFacts, MissingSource, RuntimeFacts
from pipeline.preflight.parse import gpus_from_table
from pipeline.records.logparse import parse_log
from pipeline.records.model import load_record

SCHEMA_VERSION = 1
DEFAULT_RECORD = "2025-09-23_MuonCustomSizing"
RUNTIMES = ("docker", "host")
NOT_IN_LOG = "a run log's header does not show it"
LOG_SOURCES = ("nvidia-smi topo -m", "lscpu", "/proc/meminfo", "/etc/os-release", "docker", "disk:data",
               "disk:runs", "disk:shm")


@dataclass(frozen=True)
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

    def by_status(self, status: str) -> list[Check]:
        return [c for c in self.checks if c.status == status]

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def default_locations(record_name: str, data_dir: Path | None = None, runs_dir: Path | None = None) -> dict:
    """Disk label -> (folder to measure, folder whose bytes are already ours). The image location is
    the Docker root, known only once the daemon answers (collect adds it)."""
    record = load_record(record_name)
    data = Path(data_dir) if data_dir else REPO_ROOT / "data"
    return {"data": (data, data / record.dataset.name), "runs": (Path(runs_dir) if runs_dir else REPO_ROOT / "runs",
                                                                None),
            "shm": (Path("/dev/shm"), None)}


def _report(record_name: str, runtime: str, strict: bool, facts_from: str, facts: HostFacts,
            from_log: bool = False) -> PreflightReport:
    record = load_record(record_name)
    checks = run_checks(facts, record, runtime, from_log=from_log)
    return PreflightReport(
        schema_version=SCHEMA_VERSION, created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        tool_version=__version__, record=record.name, record_hardware=dataclasses.asdict(record.hardware),
        runtime=runtime, strict=strict, facts_from=facts_from, outcome=outcome(checks, strict), checks=checks,
        facts=facts)


def preflight(record_name: str = DEFAULT_RECORD, runtime: str = "docker", strict: bool = False, sources=None,
              locations: dict | None = None) -> PreflightReport:
    """Read the node through `sources` (this machine by default) and check it against the record."""
    if runtime not in RUNTIMES:
        raise InputError(f"unknown runtime {runtime!r}", f"use one of: {', '.join(RUNTIMES)}")
    sources = sources if sources is not None else HostSources()
    locations = locations if locations is not None else default_locations(record_name)
    facts = collect(sources, runtime=runtime, locations=locations)
    return _report(record_name, runtime, strict, sources.description, facts)


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


def preflight_log(log_path: Path, record_name: str = DEFAULT_RECORD, strict: bool = False) -> PreflightReport:
    """Check the node a log ran on, as far as its header shows it (the record's own logs, a past run)."""
    facts = facts_from_log(Path(log_path))
    return _report(record_name, "host", strict, f"run log {log_path}", facts, from_log=True)


def write_report(report: PreflightReport, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report.to_dict(), indent=2) + "\n")
    tmp.replace(path)  # a reader never sees half a file
    return path


def read_report(path: Path) -> dict:
    """A preflight.json as written above; refuses other schema versions (for run directories and bundles)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"{path}: not a readable preflight.json ({exc})", "run `repro preflight` again") from None
    if not isinstance(data, dict) or data.get("schema_version") != SCHEMA_VERSION:
        found = data.get("schema_version") if isinstance(data, dict) else None
        raise InputError(f"{path}: schema_version {found!r}, this tool reads {SCHEMA_VERSION}",
                         "regenerate it with this version's `repro preflight`")
    return data
