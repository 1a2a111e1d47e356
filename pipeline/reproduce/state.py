"""reproduce-state.json: what each stage of one `reproduce` produced (a record, never a source of truth:
every stage re-checks its outputs before it skips)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline.atomic import write_json
from pipeline.errors import InputError

STATE_FILE = "reproduce-state.json"
STATE_SCHEMA = 1
MAX_STATE_BYTES = 1 << 20


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

    def set(self, stage: str, **values) -> None:
        self.data["stages"][stage] = values
        write_json(self.path, self.data)
