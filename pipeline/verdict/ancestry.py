"""The ML evidence a record stands on when it has none of its own: a re-timing's and a systems-only record's.

    evidence = inherited_evidence(record)   # None when the registry holds no such ancestor
    evidence.record, evidence.losses, evidence.source, evidence.via

A re-timing (`retiming`) runs the same record again, so its evidence is the re-timed record's: the walk goes
back through re-timing rows (and on, when the re-timed record is systems-only). A systems-only record
(`parent`) inherits its ancestors' ML evidence (README rule 2 waives the t-test for it): the walk goes back
through systems-only and re-timing rows to the last record with evidence of its own. The evidence is that
record's quoted losses when its README lists them, else its published runs' losses.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.errors import InputError
from pipeline.records.model import Record, load_parent

# A re-timed record that is itself systems-only stands on its own ancestors' evidence: both walks pass both kinds.
PASS_THROUGH = {"retiming": ("parent", "retiming"), "parent": ("parent", "retiming")}
MAX_DEPTH = 200  # a registry's parent chain is at most its length; a loop is cut here


@dataclass(frozen=True, kw_only=True)
class Evidence:
    record: str
    losses: tuple[float, ...]
    source: str  # "quoted" (the README's statistics) or "runs" (the published runs)
    via: tuple[str, ...]  # the rows walked through, nearest first
    p_value: float | None  # the quoted p-value, when the README states one


def _parent(record: Record) -> Record | None:
    try:
        return load_parent(record)
    except InputError:
        return None  # a parent the registry does not hold: no evidence to inherit


def inherited_evidence(record: Record) -> Evidence | None:
    kinds = PASS_THROUGH.get(record.rules.loss_evidence, ())
    via: list[str] = []
    current = _parent(record)
    while current is not None and len(via) < MAX_DEPTH:
        if current.rules.loss_evidence not in kinds:
            quoted = current.published.quoted or {}
            losses = quoted.get("losses")
            if isinstance(losses, list) and len(losses) >= 2:
                return Evidence(record=current.name, losses=tuple(float(x) for x in losses), source="quoted",
                                via=tuple(via),
                                p_value=quoted.get("p_value"))
            return Evidence(record=current.name, losses=tuple(current.published.losses), source="runs", via=tuple(via),
                            p_value=quoted.get("p_value"))
        via.append(current.name)
        current = _parent(current)
    return None
