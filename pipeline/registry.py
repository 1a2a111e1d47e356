"""The registry one command reads: its records and environments, and which record is the default.

    registry = Registry(Workspace.resolve(root, registry_dir))   # once, by the `repro` group (pipeline/cli)
    registry.record("2025-09-23_MuonCustomSizing"), registry.default_record(), registry.record_or_default(None)
    registry.environment("record-2025-09"), registry.default_environment()

Commands take the Registry from the group and hand the loaded `Record` (never its name) to the stages, so
a `--registry DIR` reaches every read, and no stage loads a record a second time from somewhere else.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from pipeline.env.manifest import Environment, environment_names, load_environment
from pipeline.records.model import Record, load_record, record_names
from pipeline.workspace import Workspace


@dataclass(frozen=True)
class Registry:
    workspace: Workspace
    # The record a command works on when none is named: the first target (README), in every command.
    DEFAULT_RECORD: ClassVar[str] = "2025-09-23_MuonCustomSizing"

    @property
    def records_dir(self) -> Path:
        return self.workspace.records_dir

    def record_names(self) -> list[str]:
        return record_names(self.records_dir)

    def record(self, name: str) -> Record:
        return load_record(name, self.records_dir)

    def records(self) -> list[Record]:
        return [self.record(name) for name in self.record_names()]

    def default_record(self) -> Record:
        """The first target (README), in every command that is given no --record."""
        return self.record(self.DEFAULT_RECORD)

    def record_or_default(self, name: str | None) -> Record:
        return self.record(name) if name else self.default_record()

    def environment_names(self) -> list[str]:
        return environment_names(self.workspace)

    def environment(self, name: str) -> Environment:
        return load_environment(self.workspace, name)

    def default_environment(self, record: Record | None = None) -> Environment:
        """The environment a record names; the default record's when none is given."""
        return self.environment((record or self.default_record()).environment)
