"""Findings: what the verdict found, as data (code, severity, data), never as sentences.

A finding is stable across releases: `bundle verify` compares the findings a bundle stores with the
ones it recomputes, so rewording a message (pipeline/verdict/render.py, the one place sentences are
made) breaks no bundle. Its `data` holds only JSON values (str, int, finite float, bool, None, lists
and string-keyed mappings of those), so a verdict always serialises to valid JSON.

Severities, strongest first:
  problem    the run (or the set) cannot be judged        -> outcome `invalid`
  failure    the record's claim is not met                 -> `not-reproduced`
  deviation  judged, but not under the record's conditions -> `reproduced-with-deviations`
  note       reported only
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipeline.errors import InputError

SEVERITIES = ("problem", "failure", "deviation", "note")
CODE_RE = re.compile(r"^[a-z][a-z0-9_.]*$")


def _check_json_value(value: Any, where: str) -> Any:
    """The value as plain JSON data (tuples become lists); ValueError on anything else."""
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value}: findings hold finite numbers only (use None)")
        return value
    if isinstance(value, (list, tuple)):
        return [_check_json_value(v, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, Mapping):
        out = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise ValueError(f"{where} has a non-string key {k!r}")
            out[k] = _check_json_value(v, f"{where}.{k}")
        return out
    raise ValueError(f"{where} is a {type(value).__name__}, not a JSON value")


@dataclass(frozen=True)
class Finding:
    code: str  # what was found, e.g. "run.program_absent", "time.slower"; see render.py for every code
    severity: str  # one of SEVERITIES
    data: Mapping[str, Any] = field(default_factory=dict)  # the facts behind it (JSON values only)

    def __post_init__(self) -> None:
        if not CODE_RE.match(self.code or ""):
            raise ValueError(f"finding code {self.code!r} must match {CODE_RE.pattern}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding severity {self.severity!r} must be one of {', '.join(SEVERITIES)}")
        object.__setattr__(self, "data", _check_json_value(dict(self.data), f"finding {self.code} data"))

    def to_dict(self) -> dict:
        return {"code": self.code, "severity": self.severity, "data": dict(self.data)}

    @classmethod
    def from_dict(cls, raw: Any, where: str) -> Finding:
        """A finding read from disk (a bundle's verdict); `where` names the file and field for errors."""
        fix = "the file was not written by this tool or was edited; re-run `repro verify` to recompute it"
        if not isinstance(raw, Mapping):
            raise InputError(f"{where}: a finding must be a mapping with code, severity and data, got {raw!r}", fix)
        unknown = sorted(set(raw) - {"code", "severity", "data"})
        if unknown:
            raise InputError(f"{where}: unknown field {unknown[0]!r} in a finding", fix)
        try:
            return cls(code=str(raw.get("code", "")), severity=str(raw.get("severity", "")),
                       data=raw.get("data") or {})
        except (ValueError, TypeError) as exc:
            raise InputError(f"{where}: {exc}", fix) from None

    def sort_key(self) -> tuple:
        return (SEVERITIES.index(self.severity), self.code, repr(sorted(self.data.items())))


def findings_from_list(raw: Any, where: str, sentences: bool = False) -> tuple[Finding, ...]:
    """Stored findings (a bundle's verdict). `sentences`: also the deviations that files written before they were
    findings hold as sentences (a lock's, an image label's, a venv marker's, run.yaml's), read as RECORDED_TEXT."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise InputError(f"{where}: must be a list of findings, got {type(raw).__name__}",
                         "the file was not written by this tool or was edited: write it again with this tool "
                         "(a bundle's verdict: re-run `repro verify` to recompute it)")
    return tuple(Finding(RECORDED_TEXT, "deviation", {"text": item}) if sentences and isinstance(item, str)
                 else Finding.from_dict(item, f"{where}[{i}]") for i, item in enumerate(raw))


# What an older version stored as a sentence where a deviation finding now stands: read as this finding, so no
# file written before is refused and nothing it said is lost.
RECORDED_TEXT = "deviation.text"


def deviations_from_list(raw: Any, where: str) -> tuple[Finding, ...]:
    return findings_from_list(raw, where, sentences=True)


def of_severity(findings: Iterable[Finding], *severities: str) -> list[Finding]:
    return [f for f in findings if f.severity in severities]


def finite_or_none(value: float | None) -> float | None:
    """A number fit for a finding or for JSON: NaN and infinities become None."""
    return value if value is None or math.isfinite(value) else None


def differences(code: str, want: Mapping[str, Any], got: Mapping[str, Any]) -> list[Finding]:
    """The one comparison of what a record pins with what was found: a deviation per field whose pinned value
    (`want`; "" or None pins nothing) the found one does not equal, in `want`'s order. The verdict, a run's
    probe and an environment's manifest all compare through it."""
    return [Finding(code, "deviation", {"field": key, "got": got.get(key), "want": pinned})
            for key, pinned in want.items() if pinned not in ("", None) and got.get(key) != pinned]
