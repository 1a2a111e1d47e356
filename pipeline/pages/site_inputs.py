"""What the site is built from, as typed rows: the registry's records, `repro records check --json` rows and
`--plan` rows, each JSON file read in bounded memory and validated row by row.

    checks = load_check_rows(Path("check.json"))   # [{name, verdict, rule, runs_judged, left_out, mean_loss, p,
                                                   #   time_s, time_ratio, reasons}, ...]
    plans = load_plan_rows(Path("plan.json"))      # [{name, runnable, reason}, ...]

A wrong file is one InputError naming the file, the row and the field; a record with no row is shown as
"not checked" / "not planned", never guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError
from pipeline.records.model import Record
from pipeline.records.selection import LeftOut
from pipeline.regular_file import read_bounded
from pipeline.verdict.history import CheckRow

MAX_JSON_BYTES = 32 << 20  # a row per record: a few KB each


@dataclass(frozen=True)
class PlanRow:
    """Whether a record can be run here, and why (`--plan`)."""

    name: str
    runnable: bool
    reason: str

    @classmethod
    def of_plan(cls, record: str, refusals: list[str], environment: dict) -> PlanRow:
        """A `reproduce --plan` (its refusals, else its environment) as a row: `records site --plans` and a file
        `reproduce --plan --json` wrote give the same rows."""
        reason = "; ".join(refusals) if refusals else \
            f"environment {environment.get('name')} ({environment.get('kind')}): {environment.get('reason', '')}"
        return cls(record, not refusals, reason)


@dataclass(frozen=True)
class SiteRecord:
    """A registry record with the environment it would run in today (pipeline/records/environment_choice.py)."""

    record: Record
    environment: str  # the environment it will use, "" when none
    environment_kind: str  # exact | named | stable-stand-in | none
    environment_reason: str

    @property
    def environment_exact(self) -> bool:
        return self.environment_kind in ("exact", "named")


def _read_list(path: Path, what: str, one_object_is_a_row: bool = False) -> list:
    raw = read_bounded(path, MAX_JSON_BYTES, "JSON file", f"give the JSON file {what} wrote")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path} is not JSON ({str(exc)[:200]})", f"give the JSON file {what} wrote") from None
    if one_object_is_a_row and isinstance(data, dict):
        return [data]
    if not isinstance(data, list):
        raise InputError(f"{path} holds a JSON {type(data).__name__}, not a list of rows",
                         f"give the JSON file {what} wrote")
    return data


class _Row:
    """One row's fields, each checked for its type; errors name the file, the row and the field."""

    def __init__(self, path: Path, index: int, data, what: str):
        self.where, self.what = f"{path}: row {index}", what
        if not isinstance(data, dict):
            raise InputError(f"{self.where} is not an object", f"give the JSON file {what} wrote")
        self.data = data

    def get(self, key: str, kinds: tuple, required: bool = True):
        value = self.data.get(key)
        if value is None and not required:
            return None
        if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):  # True is an int
            names = "/".join(k.__name__ for k in kinds)
            raise InputError(f"{self.where}: {key} is {json.dumps(value)[:80]}, not {names}",
                             f"give the JSON file {self.what} wrote")
        return value

    def strings(self, key: str) -> tuple[str, ...]:
        values = self.get(key, (list,), required=False) or []
        if not all(isinstance(v, str) for v in values):
            raise InputError(f"{self.where}: {key} holds a non-string", f"give the JSON file {self.what} wrote")
        return tuple(values)


def load_check_rows(path: Path) -> list[CheckRow]:
    rows = []
    for i, data in enumerate(_read_list(path, "`repro records check --json`")):
        r = _Row(path, i, data, "`repro records check --json`")
        left = []
        for item in r.get("left_out", (list,), required=False) or []:
            if not isinstance(item, dict) or not isinstance(item.get("file"), str) \
                    or not isinstance(item.get("reason"), str):
                raise InputError(f"{r.where}: left_out holds {json.dumps(item)[:80]}, not {{file, reason}}",
                                 "give the JSON file `repro records check --json` wrote")
            left.append(LeftOut(item["file"], item["reason"], str(item.get("detail") or "")))
        number = (int, float)
        rows.append(CheckRow(name=r.get("name", (str,)), verdict=r.get("verdict", (str,)),
                             rule=r.get("rule", (str,), False) or "",
                             runs_judged=r.strings("runs_judged"), left_out=tuple(left),
                             mean_loss=r.get("mean_loss", number, False),
                             p=r.get("p", number, False), time_s=r.get("time_s", number, False),
                             time_ratio=r.get("time_ratio", number, False), reasons=r.strings("reasons"),
                             rule_why=r.get("rule_why", (str,), False) or "",
                             claimed_s=r.get("claimed_s", number, False),
                             flags=r.strings("flags"), retimings=r.strings("retimings")))
    return rows


def load_plan_rows(path: Path) -> list[PlanRow]:
    """Rows of {name, runnable, reason}, or what `repro reproduce --plan --json` wrote (one record's plan, or a list
    of them with --all): {record, refusals, environment, ...}."""
    rows = []
    for i, data in enumerate(_read_list(path, "the plan (--plan)", one_object_is_a_row=True)):
        r = _Row(path, i, data, "the plan (--plan)")
        if "record" in r.data and "name" not in r.data:  # reproduce --plan --json's own output
            environment = r.get("environment", (dict,), False) or {}
            rows.append(PlanRow.of_plan(r.get("record", (str,)), list(r.strings("refusals")), environment))
            continue
        rows.append(PlanRow(r.get("name", (str,)), r.get("runnable", (bool,)), r.get("reason", (str,), False) or ""))
    return rows
