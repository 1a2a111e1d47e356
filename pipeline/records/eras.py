"""Which rule judges a record's loss claim, era by era, as upstream's README states it.

    proposal = propose_rule(RuleInput(date="2025-09-23", repeats_previous=False, losses=[...], readme=text))
    proposal.evidence, proposal.why, proposal.quoted

The evidence kinds (rules.loss_evidence, rules version 3; pipeline/verdict/judge.py judges them; each is stated
in upstream's words in UPSTREAM_WORDS):
- single-run: before 2024-12-04 a record was one run, and its own final loss at or under the target made it;
- one-run: a later record that published one run and states no statistics, and whose change touches the ML:
  upstream accepted it on that run, so its final loss at or under the target is its claim;
- own: the runs' own one-sided t-test against the target reaches p < 0.01 (README rule 2);
- quoted: the record's README states its statistics (pipeline/records/quoted_stats.py reads every form used);
  they are the evidence, and the published runs are re-runs compared with them (one above the target is a
  deviation, not a failure). Statistics that do not reach p < 0.01 in a README that calls the change
  systems-only ("This is a pure-engineering record so I did not run it enough times to achieve significance")
  are not its evidence: rule 2's waiver is, as for `parent` below;
- parent: a systems-only record, as its description or README says. Rule 2 waives the t-test "for submissions
  which improve speed by optimizing the systems performance, without touching the ML": it inherits its
  ancestors' evidence (back through systems-only and re-timing rows to the last record with statistics) and
  is never failed by a pooled test; runs that disagree with that evidence are a deviation;
- retiming: the same record re-timed on new hardware or software (the table repeats the record's number);
  its runs are judged against the re-timed record's evidence (its runs, or the statistics it quotes);
- baseline: row 1 of a track, named a baseline: the run the track's target was taken from ("the 3.28
  target was selected to match" llm.c's GPT-2 reproduction; track 2's 2.92 "as per" its 350M baseline). Its
  loss is the reference, reported, not a claim to judge.
When the text does not say whether a change is systems-only, the proposal carries a flag for the editor.
The importer writes the proposal and its reason into the manifest (`imported.rule`); an editor's own
`rules:` block is kept as written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.records.quoted_stats import quoted_statistics
from pipeline.stats import p_value_shown

SINGLE_RUN_UNTIL = "2024-12-04"  # the first record whose folder published many runs and a t-test
EVIDENCE = ("own", "parent", "single-run", "one-run", "retiming", "quoted", "baseline")
RULES_VERSION = 3
TARGET_DEFAULT = 3.28
P_VALUE_MAX = 0.01

# Each rule in upstream's words: the sentence of its README (or the records table) the rule is taken from.
RULE_RULE2 = ("Due to inter-run variance, submissions must provide enough run logs to attain a statistical "
              "significance level of p<0.01 that their mean val loss is ≤3.28.")
UPSTREAM_WORDS = {
    "own": (RULE_RULE2, "README.md, Rules, 2"),
    "quoted": (RULE_RULE2 + " Example code to compute p-value can be found [in the SoftCap record].",
               "README.md, Rules, 2"),
    "parent": ("For submissions which improve speed by optimizing the systems performance, without touching the "
               "ML, this requirement is waived.", "README.md, Rules, 2"),
    "retiming": ("not a new record, just re-timing #21", "README.md, records table, Contributors column"),
    "baseline": ("Note: The 3.28 target was selected to match Andrej Karpathy's GPT-2 (small) reproduction.",
                 "README.md, World record history"),
    "single-run": ("Train a neural network to ≤3.28 validation loss on FineWeb using 8x NVIDIA H100s.",
                   "README.md, World record history (before rule 2 asked for many runs)"),
    "one-run": ("Train a neural network to ≤3.28 validation loss on FineWeb using 8x NVIDIA H100s.",
                "README.md, World record history (the record published one run and no statistics)"),
}

# What a record's table description or README says about its change (lowercased text, plain substrings).
SYSTEMS_STATEMENTS = ("without touching the ml", "no ml change", "does not change the ml", "systems-only",
                      "systems only", "purely systems", "not a new record, just re-timing", "pure-engineering",
                      "pure engineering", "ml is identical", "same math")
SYSTEMS_WORDS = ("kernel", "all-reduce", "all_reduce", "allreduce", "reduce_scatter", "reduce scatter",
                 "communication", "upgrade", "pytorch", "torch 2", "torch==", "redundant", "triton", "fp8",
                 "overlap", "to gpu", "h2d", "compile", "fuse")
ML_WORDS = ("weight decay", " wd", "learning rate", " lr", "cooldown", "coefficient", "embed", "norm",
            "skip", "batch size", "window", "initial record", "init", "schedule", "optimizer",
            "smear", "mtp", "backout", "gate", "logit")


def change_kind(description: str, readme: str) -> str:
    """"systems", "ml" or "unknown": whether a record's change touches the ML, as its own text says. An explicit
    statement of the README first; else the table's description (a change that names any ML part touches the
    ML, whatever systems work comes with it); else the README's words the same way."""
    text = readme.lower()
    if any(s in text for s in SYSTEMS_STATEMENTS):
        return "systems"
    for words in (" " + description.lower(), text):
        ml = any(w in words for w in ML_WORDS)
        if ml:
            return "ml"
        if any(w in words for w in SYSTEMS_WORDS):
            return "systems"
    return "unknown"


@dataclass(frozen=True, kw_only=True)
class RuleInput:
    date: str  # ISO date of the row
    repeats_previous: bool  # the table gives this row the number of the row before it
    losses: list[float]  # the selected runs' final losses
    readme: str  # the record's README.md, "" when it has none
    first_baseline: bool = False  # row 1 of the track, and its description calls it a baseline
    target: float = TARGET_DEFAULT
    description: str = ""  # the records table's description of the row


@dataclass(frozen=True)
class Proposal:
    evidence: str
    why: str
    quoted: dict = field(default_factory=dict)  # the statistics the README states, whatever the rule
    flags: tuple[str, ...] = ()  # what the editor should decide


def propose_rule(inp: RuleInput) -> Proposal:
    quoted = quoted_statistics(inp.readme)
    if inp.first_baseline:
        return Proposal("baseline", "row 1 of its track, named a baseline: the run the track's target was taken "
                                    "from; its loss is the reference, reported, not judged", quoted)
    if inp.repeats_previous:
        return Proposal("retiming", "the table repeats the previous row's number: a re-timing of the same record "
                                    "on new hardware or software, not new ML; its runs are judged against the "
                                    "re-timed record's evidence", quoted)
    if inp.date and inp.date < SINGLE_RUN_UNTIL:
        return Proposal("single-run", f"dated before {SINGLE_RUN_UNTIL}, when a record was one run: its own "
                                      f"final loss at or under {inp.target} made it", quoted)
    p = p_value_shown(inp.losses, inp.target, below=P_VALUE_MAX, digits=2) if len(inp.losses) > 1 else None
    if p is not None and p < P_VALUE_MAX:
        return Proposal("own", f"its {len(inp.losses)} published runs reach p = {p:.2g} < {P_VALUE_MAX} on their "
                               "own", quoted)
    alone = (f"its {len(inp.losses)} published runs give p = {p:.2g}" if p is not None
             else f"it publishes {len(inp.losses)} run(s), too few for a t-test")
    stated_p = quoted.get("p_value")
    if quoted and not (stated_p is not None and stated_p >= P_VALUE_MAX and _systems(inp)):
        return Proposal("quoted", f"{alone}; its README states its statistics, the record's evidence (its "
                                  "published runs are re-runs, compared with them)", quoted)
    if quoted:  # "a pure-engineering record so I did not run it enough times to achieve significance"
        return Proposal("parent", f"{alone}; its README states p = {stated_p:.2g}, not under {P_VALUE_MAX}, and says "
                                  "the change is to the systems, not the ML: rule 2 waives the t-test, and it "
                                  "inherits its ancestors' evidence", quoted)
    return _without_statistics(inp, alone)


def _systems(inp: RuleInput) -> bool:
    return change_kind(inp.description, inp.readme) == "systems"


def _without_statistics(inp: RuleInput, alone: str) -> Proposal:
    """A record that neither reaches p on its runs nor states statistics: systems-only if its text says so."""
    kind = change_kind(inp.description, inp.readme)
    if kind == "systems":
        return Proposal("parent", f"{alone}; its description says the change is to the systems, not the ML: rule "
                                  "2 waives the t-test, and it inherits its ancestors' evidence")
    if len(inp.losses) == 1:
        flags = () if kind == "ml" else ("whether the change is systems-only: neither its description nor its "
                                         "README says; judged as accepted on its one run",)
        return Proposal("one-run", f"{alone} and states no statistics; upstream accepted it on that one run: its "
                                   f"final loss at or under {inp.target}", flags=flags)
    if kind == "ml":
        return Proposal("own", f"{alone}; its change touches the ML and it states no statistics: judged by rule 2 "
                               "on its own runs", flags=("its runs do not reach p < 0.01 and its README states no "
                                                         "statistics",))
    return Proposal("parent", f"{alone}; judged as systems-only until the editor says otherwise",
                    flags=("whether the change is systems-only: neither its description nor its README says",))
