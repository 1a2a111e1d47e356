"""Rules as upstream states them (pipeline/records/eras.py, quoted_stats.py; pipeline/verdict/ancestry.py).

The corpus test reads tests/fixtures/quoted-statistics/sentences.json: every line of upstream's record READMEs
(both tracks, at f411b3d) that states a p-value or lists losses, with the p-value and the count of losses a
reader takes from it.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import yaml

from pipeline.records.eras import UPSTREAM_WORDS, RuleInput, change_kind, propose_rule
from pipeline.records.model import LOSS_EVIDENCE, load_record
from pipeline.records.quoted_stats import _loss_lists, quoted_statistics
from pipeline.verdict.judge import _loss_findings, _loss_summary

ROOT = Path(__file__).resolve().parents[1]
CORPUS = json.loads((ROOT / "tests/fixtures/quoted-statistics/sentences.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", CORPUS, ids=[f"{r['record'].split('/')[-1]}:{r['line']}" for r in CORPUS])
def test_every_statistics_sentence_of_upstream_is_read(row):
    stated = quoted_statistics(row["sentence"])
    assert stated.get("p_value") == row["p_value"]
    assert max((len(x) for x in _loss_lists(row["sentence"])), default=0) == row["losses"]


def _readme(record: str) -> str:
    return "\n".join(r["sentence"] for r in CORPUS if r["record"].endswith(record))


@pytest.mark.parametrize("record, p_value, n, form", [
    ("2025-01-16_Sub3Min", 0.0001, 32, "p="),  # a bare list printed by the script, then p=0.0001
    ("2025-03-06_LongerCooldown", 0.001, 36, "P(<target) > x%"),  # "(P(<2.92) > 99.9%)"
    ("2025-09-16_Snoo", 0.0032015979421488247, None, "pvalue=np.float64(...)"),
    ("2025-09-17_UpdateSmoothing", 0.0, None, "p="),  # "val_loss t-test p=0.000000"; bootstrap means ignored
    ("2025-10-04_GPT2MediumLayerReuse", 0.0001256, 22, "p-value:"),  # "P-value: 0.0001256" beside a baseline's
    ("2025-11-02-Smear-MTP", 1.1266e-05, 26, "p-value:"),
    ("2026-02-02_KernelTuning", 0.0004, 9, "p="),
    ("2025-08-28_Medium_NewValemb", 5.07368129288152e-07, 37, '"p_value": ...'),  # beside its baseline's 0.0434
    ("2025-09-11_GPT2MediumX01", 0.00035946114919240566, 19, '"p_value": ...'),  # 'p_value': printed by Python
])
def test_the_forms_upstream_uses_are_recognised(record, p_value, n, form):
    stated = quoted_statistics(_readme(record))
    assert stated["p_value"] == p_value and form in stated["forms"]
    assert stated.get("n") == n


READMES = ROOT / "tests/fixtures/quoted-statistics/readmes"  # upstream's README sections, trimmed


@pytest.mark.parametrize("record, p_value, losses", [
    # "Previous record (timed on same machine):" quotes the earlier code's p = 0.0064 after the record's 0.0423
    ("2026-02-06_SparseBigramGradient", 0.0423, [3.2789, 3.2772, 3.2804, 3.277, 3.2792]),
    # "**Current WR:**" (p = 0.0246) before "**This PR (fused softcapped cross entropy):**" (p = 0.0067)
    ("2026-01-16_FusedSoftcappedEntropy", 0.0067, [3.2790, 3.2798, 3.2776, 3.2798, 3.2792, 3.2768, 3.2785, 3.2807,
                                                   3.2793, 3.2774]),
    ("2025-09-17_UpdateSmoothing", 0.000032, None),  # "## Baselines:" then "PR124:" p=0.000000: not the record's
    ("2026-05-27-MuddGatedAndDC", 0.000453, None),  # "relative to `xsa-baseline-s1385`": a name, not the baseline
])
def test_the_statistics_of_the_code_a_record_started_from_are_not_its_claim(record, p_value, losses):
    stated = quoted_statistics((READMES / f"{record}.md").read_text(encoding="utf-8"))
    assert stated["p_value"] == p_value
    assert stated.get("losses") == losses


def test_statistics_of_p_values_and_timing_tests_are_not_the_claim():
    assert quoted_statistics("Mean p-value: 0.003\nVariance of p-values: 0.0004\n") == {}
    assert quoted_statistics("Welch one-sided t-test on wall-time: p = 1.36e-11") == {}
    assert quoted_statistics("print(f'p={x.pvalue:.4f}')") == {}


@pytest.mark.parametrize("description, readme, kind", [
    ("Upgrade PyTorch to 2.9.0.dev20250713+cu126", "", "systems"),
    ("Replace gradient all_reduce with reduce_scatter", "", "systems"),
    ("2x MLP wd, qkv norm, all_reduce/opt.step() overlap, optimized skip pattern", "", "ml"),
    ("Tuned Muon Newton-Schulz coefficients", "", "ml"),
    ("Something", "This change is purely systems: no ML changes.", "systems"),
    ("Something", "", "unknown"),
])
def test_systems_only_is_read_from_what_the_record_says(description, readme, kind):
    assert change_kind(description, readme) == kind


def test_one_log_records_are_accepted_on_one_run_and_unknown_changes_are_flagged():
    ml = propose_rule(RuleInput(date="2025-02-14", repeats_previous=False, losses=[2.9193], readme="", target=2.92,
                                description="Tuned Muon Newton-Schulz coefficients"))
    assert ml.evidence == "one-run" and not ml.flags
    systems = propose_rule(RuleInput(date="2025-07-13", repeats_previous=False, losses=[3.2794], readme="",
                                     description="Upgrade PyTorch to 2.9.0"))
    assert systems.evidence == "parent" and not systems.flags
    unknown = propose_rule(RuleInput(date="2025-07-13", repeats_previous=False, losses=[3.279, 3.2805], readme="",
                                     description="Tweaks"))
    assert unknown.evidence == "parent" and unknown.flags
    stated = propose_rule(RuleInput(date="2025-01-16", repeats_previous=False, losses=[3.2785],
                                    readme="[3.276, 3.2785, 3.2796]\np=0.0001",
                                    description="Merged QKV weights"))
    assert stated.evidence == "quoted" and stated.quoted["p_value"] == 0.0001


def test_a_pure_engineering_record_short_of_significance_stands_on_rule_2_s_waiver():
    readme = (READMES / "2026-02-06_SparseBigramGradient.md").read_text(encoding="utf-8")
    assert "This is a pure-engineering record" in readme
    inp = RuleInput(date="2026-02-06", repeats_previous=False, readme=readme,
                    losses=[3.2789, 3.2772, 3.2804, 3.277, 3.2792],
                    description="Sparse bigram gradient comms and optimized loading on CPU")
    proposal = propose_rule(inp)
    assert proposal.evidence == "parent" and proposal.quoted["p_value"] == 0.0423, proposal
    assert "p = 0.042" in proposal.why
    # the same statistics without the README's word for a systems change: they are its evidence, and fall short
    plain = dataclasses.replace(inp, readme=readme.replace("This is a pure-engineering record", "This record"))
    assert propose_rule(plain).evidence == "quoted"


def test_every_rule_is_stated_in_upstream_s_words():
    assert set(UPSTREAM_WORDS) == set(LOSS_EVIDENCE)
    assert all(sentence and source.startswith("README.md") for sentence, source in UPSTREAM_WORDS.values())


# -- the judge, rules version 3 ----------------------------------------------------------------------------------
def _chain(tmp_path: Path) -> Path:
    """ancestor (own, 10 runs near 3.2787) <- systems-only <- re-timing; a record quoting its statistics."""
    reg = tmp_path / "records"
    reg.mkdir()
    base = yaml.safe_load((ROOT / "manifests/records/2025-09-03_FA3.yaml").read_text())
    losses = [3.2787, 3.2770, 3.2805, 3.2790, 3.2779, 3.2801, 3.2768, 3.2795, 3.2783, 3.2792]

    def write(name, evidence, parent, quoted=None):
        doc = dict(base, name=name, parent=parent)
        doc["rules"] = dict(base["rules"], version=3, loss_evidence=evidence, consistency_required=["record"])
        doc["published"] = dict(base["published"], losses=losses if evidence == "own" else [3.2794],
                                times_s=[160.0] * (10 if evidence == "own" else 1), quoted=quoted or {})
        (reg / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))

    write("A_own", "own", "")
    write("B_systems", "parent", "A_own")
    write("C_retiming", "retiming", "B_systems")
    write("D_quoted", "quoted", "C_retiming", {"source": "README.md", "p_value": 0.0004, "n": 3,
                                               "losses": [3.2763, 3.2777, 3.2794]})
    return reg


def _judged(reg: Path, name: str, losses: list[float]) -> dict[str, str]:
    record = load_record(name, reg)
    findings = _loss_findings(record, _loss_summary(record, losses), losses)
    return {f.code: f.severity for f in findings}


def test_a_lone_re_run_above_the_target_is_a_deviation_where_others_are_the_evidence(tmp_path):
    reg = _chain(tmp_path)
    assert _judged(reg, "D_quoted", [3.2807])["loss.above_target"] == "deviation"  # quoted: p = 0.0004 stands
    assert _judged(reg, "C_retiming", [3.2830])["loss.above_target"] == "deviation"
    assert _judged(reg, "A_own", [3.2830])["loss.above_target"] == "failure"


def test_a_re_timing_is_judged_against_the_re_timed_record_s_evidence(tmp_path):
    reg = _chain(tmp_path)
    near = _judged(reg, "C_retiming", [3.2815])  # above the target, within the ancestor's spread
    assert near["loss.inherited"] == "note" and "failure" not in near.values()
    far = _judged(reg, "C_retiming", [3.2990])
    assert far["loss.inherited"] == "failure"


def test_a_systems_only_record_inherits_its_ancestors_evidence_and_is_never_pooled(tmp_path):
    reg = _chain(tmp_path)
    judged = _judged(reg, "B_systems", [3.2794])
    assert judged["loss.inherited"] == "note" and "loss.pooled" not in judged and "failure" not in judged.values()
    assert _judged(reg, "B_systems", [3.2990])["loss.inherited"] == "deviation"  # the numerics moved: said, not failed


def test_quoted_evidence_without_a_count_of_runs_says_none_missing():
    """Snoo, UpdateSmoothing and SmoothedSnooMedium state a p-value and no list of losses."""
    from pipeline.findings import Finding
    from pipeline.verdict.render import render

    said = render(Finding("loss.quoted", "deviation", {"source": "README.md", "p_value": 1e-06, "p_max": 0.01}))
    assert said == "loss evidence quoted from the record's README, not recomputed: p = 1e-06 (README.md)"
    counted = render(Finding("loss.quoted", "deviation", {"source": "README.md", "p_value": 0.0004, "n": 9,
                                                          "p_max": 0.01}))
    assert "p = 0.0004 over 9 runs (README.md)" in counted
