"""reproduce-state.json: what each stage of one `reproduce` produced (a record, never a source of truth:
every stage re-checks its outputs before it skips). One typed section per stage; the file holds each as
a mapping under `stages`, keyed by the section's STAGE.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.atomic import write_json
from pipeline.errors import InputError
from pipeline.findings import Finding
from pipeline.regular_file import kind_of, read_text_bounded

if TYPE_CHECKING:
    from pipeline.env.choose import EnvironmentChoice

STATE_FILE = "reproduce-state.json"
STATE_SCHEMA = 1
MAX_STATE_BYTES = 1 << 20


def section(stage: str):
    """A typed section of the state file, stored under `stage` (its STAGE)."""

    def make(cls):
        cls.STAGE = stage
        return dataclass(frozen=True)(cls)

    return make


@section("preflight")
class PreflightState:
    path: str
    outcome: str


@section("environment")
class EnvironmentState:
    """The environment chosen (pipeline/env/choose.py's EnvironmentChoice, as recorded)."""

    environment: str
    lock: str
    lock_sha256: str
    source: str  # record | fallback
    resolved_on_node: bool
    deviations: tuple[Finding, ...]  # stored as each one's (code, severity, data)
    tried: tuple[str, ...]

    @classmethod
    def of(cls, choice: EnvironmentChoice) -> EnvironmentState:
        return cls(environment=choice.environment.name, lock=str(choice.lock_path), lock_sha256=choice.lock.sha256,
                   source=choice.source, resolved_on_node=choice.resolved_on_node, deviations=choice.deviations,
                   tried=choice.tried)


@section("image")
class ImageUsed:
    image_id: str
    lock_sha256: str
    source: str | None = None  # the tarball it was loaded from; None when reused or built


@section("data")
class DataState:
    dir: str
    lock_sha256: str
    action: str  # verified (kept as it was) | generated | fetched: what the stage did to the folder


@section("runs")
class RunsState:
    ids: tuple[str, ...]
    good: tuple[str, ...]


@section("archive")
class ArchiveState:
    path: str
    sha256: str


@section("report")
class ReportState:
    path: str
    html: str = ""  # the bundle's report.html


@section("bundle_verify")
class BundleCheckState:
    ok: bool
    problems: tuple[str, ...]


Section = (PreflightState | EnvironmentState | ImageUsed | DataState | RunsState | ArchiveState | ReportState
           | BundleCheckState)


class State:
    def __init__(self, path: Path, req):
        self.path = path
        self.data = self._read(path)
        if self.data.get("record") not in (None, req.record):
            raise InputError(f"{path} belongs to record {self.data['record']!r}, not {req.record!r}",
                             "use another --work folder for each record")
        self.data.update(schema_version=STATE_SCHEMA, record=req.record, runs_wanted=req.runs,
                         trainer=req.trainer, runtime=req.runtime)
        self.data.setdefault("stages", {})

    @staticmethod
    def _read(path: Path) -> dict:
        if kind_of(path) is None:
            return {}
        # a FIFO, a device or a file over the limit is refused by name (InputError): not this tool's state file
        text = read_text_bounded(path, MAX_STATE_BYTES, "state file", "remove it, or use another --work folder")
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return {}
        return data if isinstance(data, dict) and data.get("schema_version") == STATE_SCHEMA else {}

    def set(self, section: Section) -> None:
        self.data["stages"][section.STAGE] = asdict(section)
        write_json(self.path, self.data)
