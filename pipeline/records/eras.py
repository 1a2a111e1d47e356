"""Which rule judges a record's loss claim, era by era, as upstream's README states it.

    proposal = propose_rule(RuleInput(date="2025-09-23", repeats_previous=False, losses=[...], readme=text))
    proposal.evidence, proposal.why, proposal.quoted

The evidence kinds (rules.loss_evidence, rules version 2; pipeline/verdict/judge.py judges them):
- single-run: before 2024-12-04 a record was one run, and its own final loss at or under the target made it;
- own: the runs' own one-sided t-test against the target reaches p < 0.01 (README rule 2);
- parent: a systems-only record. Rule 2 waives the t-test "for submissions which improve speed by optimizing
  the systems performance, without touching the ML": the parent's evidence carries over, so the record's
  losses are judged together with its parent's;
- retiming: the same record re-timed on new hardware or software (the table repeats the record's number);
  its losses must agree with the re-timed record's;
- baseline: row 1 of a track, named a baseline: the run the track's target was taken from ("the 3.28
  target was selected to match" llm.c's GPT-2 reproduction; track 2's 2.92 "as per" its 350M baseline). Its
  loss is the reference, reported, not a claim to judge;
- quoted: the record's README states the statistics (or where they were obtained); they are quoted as the
  record's declared evidence, never recomputed, and the verdict says so.
The importer writes the proposal and its reason into the manifest (`imported.rule`); an editor's own
`rules:` block is kept as written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pipeline.stats import p_value_below

SINGLE_RUN_UNTIL = "2024-12-04"  # the first record whose folder published many runs and a t-test
EVIDENCE = ("own", "parent", "single-run", "retiming", "quoted", "baseline")
RULES_VERSION = 2
TARGET_DEFAULT = 3.28
P_VALUE_MAX = 0.01

_P_STATED = re.compile(r"\bp\s*[=<]\s*([0-9]*\.?[0-9]+(?:e-?\d+)?)", re.I)
_LOSS_LIST = re.compile(r"\b(?:accs|losses)\s*=\s*\[([0-9.,\s]+)\]", re.I)
_SIGNIFICANCE = re.compile(r"statistical significance", re.I)
_SENTENCE_END = re.compile(r"[.\n]")


def _significance_link(readme: str) -> str | None:
    """The link after "statistical significance" in its sentence (before the next "." or line end), found in
    linear time (pipeline/records/md_scan.py): what `statistical significance[^.\n]*?\\]\\((https?://[^)\\s]+)\\)`
    matched, without trying every later start again."""
    from pipeline.records.md_scan import link_target

    at = 0
    while m := _SIGNIFICANCE.search(readme, at):
        end = _SENTENCE_END.search(readme, m.end())
        limit = end.start() if end else len(readme)
        if found := link_target(readme, "](", ("http://", "https://"), m.end(), limit):
            return found
        at = limit + 1  # a later mention in the same sentence looks at a part of the same stretch
    return None


@dataclass(frozen=True)
class RuleInput:
    date: str  # ISO date of the row
    repeats_previous: bool  # the table gives this row the number of the row before it
    losses: list[float]  # the selected runs' final losses
    readme: str  # the record's README.md, "" when it has none
    first_baseline: bool = False  # row 1 of the track, and its description calls it a baseline
    target: float = TARGET_DEFAULT


@dataclass(frozen=True)
class Proposal:
    evidence: str
    why: str
    quoted: dict = field(default_factory=dict)  # for `quoted`: what the README states, and where


def quoted_statistics(readme: str) -> dict:
    """What a README states about significance: a p-value with the losses it was computed from, or a link to
    where it was obtained. {} when it states neither."""
    lists = [[float(x) for x in m.group(1).replace("\n", " ").split(",") if x.strip()]
             for m in _LOSS_LIST.finditer(readme)]
    ps = [float(m.group(1)) for m in _P_STATED.finditer(readme)]
    if lists and ps:
        losses = max(lists, key=len)
        return {"source": "README.md", "p_value": min(ps), "n": len(losses), "losses": losses}
    if (link := _significance_link(readme)):
        return {"source": link, "statement": "statistical significance was obtained elsewhere (linked "
                                                   "from the record's README)"}
    return {}


def propose_rule(inp: RuleInput) -> Proposal:
    if inp.first_baseline:
        return Proposal("baseline", "row 1 of its track, named a baseline: the run the track's target was taken "
                                    "from; its loss is the reference, reported, not judged")
    if inp.repeats_previous:
        return Proposal("retiming", "the table repeats the previous row's number: a re-timing of the same record "
                                    "on new hardware or software, not new ML; its losses must agree with it")
    if inp.date and inp.date < SINGLE_RUN_UNTIL:
        return Proposal("single-run", f"dated before {SINGLE_RUN_UNTIL}, when a record was one run: its own "
                                      f"final loss at or under {inp.target} made it")
    p = p_value_below(inp.losses, inp.target) if len(inp.losses) > 1 else None
    if p is not None and p < P_VALUE_MAX:
        return Proposal("own", f"its {len(inp.losses)} published runs reach p = {p:.2g} < {P_VALUE_MAX} on their own")
    alone = (f"its {len(inp.losses)} published runs give p = {p:.2g}" if p is not None
             else f"it publishes {len(inp.losses)} run(s), too few for a t-test")
    quoted = quoted_statistics(inp.readme)
    if quoted:
        return Proposal("quoted", f"{alone}; its README states its statistics, quoted as declared evidence",
                        quoted)
    return Proposal("parent", f"{alone}, and upstream accepted it: rule 2 waives the t-test only for systems-only "
                              "changes, so it is judged as one, on its parent's evidence")
