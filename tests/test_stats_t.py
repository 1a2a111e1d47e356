"""The importer's p-value without scipy (pipeline/stats.py p_value_shown): shown and compared as scipy's is."""

import random
import subprocess
import sys

from scipy import special

from pipeline import stats
from pipeline.stats import _t_cdf, p_value_below, p_value_shown


def test_the_t_cdf_is_scipys_to_far_under_the_margin():
    rng = random.Random(1)
    worst = 0.0
    for _ in range(5000):
        df = rng.choice([1, 2, 3, 4, 5, 7, 9, 12, 20, 40, 100, 500])
        t = rng.choice([-1, 1]) * 10 ** rng.uniform(-3, 2.5)
        ref = float(special.stdtr(df, t))
        mine = _t_cdf(t, df)
        if ref > 1e-290 and mine is not None:
            worst = max(worst, abs(mine - ref) / ref)
    assert worst < stats.SHOWN_MARGIN / 20


def test_shown_p_values_are_scipys_to_two_digits_and_at_the_threshold():
    rng = random.Random(2)
    for _ in range(2000):
        n = rng.randint(2, 30)
        centre = 3.28 + rng.gauss(0, 0.003)
        losses = [round(rng.gauss(centre, 0.002), 4) for _ in range(n)]
        mine, ref = p_value_shown(losses, 3.28, below=0.01, digits=2), p_value_below(losses, 3.28)
        assert f"{mine:.2g}" == f"{ref:.2g}" and (mine < 0.01) == (ref < 0.01), losses
    assert p_value_shown([3.27, 3.27], 3.28, below=0.01, digits=2) == p_value_below([3.27, 3.27], 3.28) == 0.0
    assert p_value_shown([3.27], 3.28, below=0.01, digits=2) is None


def test_near_an_edge_scipy_says(monkeypatch):
    losses = [3.2784, 3.2771, 3.2777, 3.279, 3.2794, 3.2813]
    monkeypatch.setattr(stats, "SHOWN_MARGIN", 0.5)  # every value is near an edge now
    assert p_value_shown(losses, 3.28, below=0.01, digits=2) == p_value_below(losses, 3.28)


def test_proposing_a_rule_imports_no_scipy():
    """`records import` proposes a rule per record: the t-test it shows costs no scipy import (a second of CPU)."""
    code = ("import sys\nfrom pipeline.records.eras import RuleInput, propose_rule\n"
            "p = propose_rule(RuleInput(date='2025-11-10', repeats_previous=False, readme='',\n"
            "                           losses=[3.2774, 3.2771, 3.2777, 3.2779, 3.2774, 3.2773, 3.2772]))\n"
            "print(p.evidence, p.why)\nprint('scipy.stats' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.startswith("own its 7 published runs reach p = ") and out.splitlines()[-1] == "False", out
