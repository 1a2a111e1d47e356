"""reproduce-state.json: what each stage of one `reproduce` produced (a record, never a source of truth:
every stage re-checks its outputs before it skips). One typed section per stage; the file holds each as
a mapping under `stages`, keyed by the section's STAGE.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import ClassVar

from pipeline.atomic import write_json
from pipeline.errors import InputError

STATE_FILE = "reproduce-state.json"
STATE_SCHEMA = 1
MAX_STATE_BYTES = 1 << 20


@dataclass(frozen=True)
class PreflightState:
    STAGE: ClassVar[str] = "preflight"
    path: str
    outcome: str


@dataclass(frozen=True)
class EnvironmentState:
    """The environment chosen (pipeline/env/choose.py's EnvironmentChoice, as recorded)."""

    STAGE: ClassVar[str] = "environment"
    environment: str
    lock: str
    lock_sha256: str
    source: str  # record | fallback
    resolved_on_node: bool
    deviations: tuple[dict, ...]  # Finding.to_dict() each
    tried: tuple[str, ...]

    @classmethod
    def of(cls, choice) -> EnvironmentState:
        recorded = choice.to_dict()
        return cls(**{**recorded, "deviations": tuple(recorded["deviations"]), "tried": tuple(recorded["tried"])})


@dataclass(frozen=True)
class ImageUsed:
    STAGE: ClassVar[str] = "image"
    image_id: str
    lock_sha256: str
    source: str | None = None  # the tarball it was loaded from; None when reused or built


@dataclass(frozen=True)
class DataState:
    STAGE: ClassVar[str] = "data"
    dir: str
    lock_sha256: str


@dataclass(frozen=True)
class RunsState:
    STAGE: ClassVar[str] = "runs"
    ids: tuple[str, ...]
    good: tuple[str, ...]


@dataclass(frozen=True)
class ArchiveState:
    STAGE: ClassVar[str] = "archive"
    path: str
    sha256: str


@dataclass(frozen=True)
class ReportState:
    STAGE: ClassVar[str] = "report"
    path: str


@dataclass(frozen=True)
class BundleCheckState:
    STAGE: ClassVar[str] = "bundle_verify"
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
        try:
            data = json.loads(path.read_text()) if path.stat().st_size < MAX_STATE_BYTES else {}
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) and data.get("schema_version") == STATE_SCHEMA else {}

    def set(self, section: Section) -> None:
        self.data["stages"][section.STAGE] = asdict(section)
        write_json(self.path, self.data)
