"""The speedrun's statistics: one-sided t-test against the target, runs needed, consistency, time ratio."""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from statistics import mean, stdev

MAX_RUNS_SEARCHED = 100_000


def _sps():
    """scipy.stats, imported on first use: a second of CPU that only commands computing a test should pay."""
    from scipy import stats

    return stats


def p_value_below(losses: list[float], target: float) -> float | None:
    """scipy.stats.ttest_1samp(losses, target, alternative="less").pvalue; None with fewer than 2 runs."""
    if len(losses) < 2:
        return None
    if stdev(losses) == 0:
        return 0.0 if mean(losses) < target else 1.0
    with warnings.catch_warnings():
        # scipy warns on nearly equal losses (4-decimal logs often are); the zero-spread case is handled above
        warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
        return float(_sps().ttest_1samp(losses, target, alternative="less").pvalue)


def p_value_shown(losses: list[float], target: float, *, below: float, digits: int) -> float | None:
    """A p whose `p < below` and f"{p:.{digits}g}" are p_value_below's, without importing scipy (a second of CPU,
    most of what `records import` would otherwise spend on statistics): the Student t CDF from its incomplete beta
    function (_t_cdf), whose relative error is far under SHOWN_MARGIN; where a value within SHOWN_MARGIN of it
    would be shown or compared otherwise (a rounding edge, the threshold itself), scipy's value is used."""
    if len(losses) < 2 or stdev(losses) == 0 or not all(map(math.isfinite, losses)) or not math.isfinite(target):
        return p_value_below(losses, target)
    n = len(losses)
    t = (mean(losses) - target) / (stdev(losses) / math.sqrt(n))
    p = _t_cdf(t, n - 1)
    if p is None or not 0 < p < 1:  # not settled, or past what a double holds: scipy says what it says
        return p_value_below(losses, target)
    low, high = p * (1 - SHOWN_MARGIN), p * (1 + SHOWN_MARGIN)
    if f"{low:.{digits}g}" != f"{high:.{digits}g}" or (low < below) != (high < below):
        return p_value_below(losses, target)
    return p


SHOWN_MARGIN = 1e-9  # _t_cdf agrees with scipy's stdtr to 2e-11 or better (tests/test_stats_t.py): 50 times wider


def _t_cdf(t: float, df: int) -> float | None:
    """P(T <= t) for Student's t with `df` degrees of freedom: I_x(df/2, 1/2) / 2 at x = df / (df + t²) (the lower
    tail; 1 minus it above 0). None where the continued fraction does not settle."""
    x = df / (df + t * t)
    tail = _betainc(df / 2, 0.5, x)
    if tail is None:
        return None
    return tail / 2 if t < 0 else 1 - tail / 2


def _betainc(a: float, b: float, x: float) -> float | None:
    """The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz's method) on the side
    where it converges fast, the other side by symmetry; None where it does not settle in 300 terms."""
    if x <= 0 or x >= 1:
        return 0.0 if x <= 0 else 1.0
    if x > (a + 1) / (a + b + 2):
        rest = _betainc(b, a, 1 - x)
        return None if rest is None else 1 - rest
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 301):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1) < 1e-16:
            return front * f
    return None


def runs_needed(mean_loss: float, sd: float, target: float, p_max: float) -> int | None:
    """Fewest runs with this mean and sd whose one-sided t-test gives p < p_max; None if none can."""
    if mean_loss >= target:
        return None
    if sd == 0:
        return 2
    for n in range(2, MAX_RUNS_SEARCHED):
        t = (mean_loss - target) / (sd / math.sqrt(n))
        if _sps().t.cdf(t, n - 1) < p_max:
            return n
    return None


@dataclass(frozen=True, kw_only=True)
class Consistency:
    against: str
    role: str  # "record" or "parent"
    p_value: float | None
    consistent: bool
    method: str


def consistency(losses: list[float], published: list[float], against: str, role: str, alpha: float) -> Consistency:
    """Are these losses plausibly from the same distribution as the published ones?

    Two or more runs: two-sided Welch t-test. One run: inside the published runs' prediction interval.
    """
    if len(published) < 2 or not losses:
        return Consistency(against=against, role=role, p_value=None, consistent=True,
                           method="not tested: too few published runs")
    if len(losses) >= 2:
        if stdev(losses) == 0 and stdev(published) == 0:
            same = mean(losses) == mean(published)
            return Consistency(against=against, role=role, p_value=1.0 if same else 0.0, consistent=same,
                               method="exact comparison (no spread)")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "Precision loss occurred", RuntimeWarning)
            p = float(_sps().ttest_ind(losses, published, equal_var=False).pvalue)
        return Consistency(against=against, role=role, p_value=p, consistent=p >= alpha,
                           method="Welch two-sided t-test")
    m, s, k = mean(published), stdev(published), len(published)
    t = (losses[0] - m) / (s * math.sqrt(1 + 1 / k)) if s > 0 else (0.0 if losses[0] == m else math.inf)
    p = float(2 * _sps().t.sf(abs(t), k - 1))
    return Consistency(against=against, role=role, p_value=p, consistent=p >= alpha,
                       method="prediction interval of the published runs")


@dataclass(frozen=True, kw_only=True)
class TimeRatio:
    mean_s: float
    record_mean_s: float
    ratio: float
    ci_low: float | None
    ci_high: float | None
    confidence: float


def time_ratio(times_s: list[float], record_mean_s: float, confidence: float) -> TimeRatio:
    """Mean time over the record's mean, with a t-interval for the ratio (the record's mean taken as fixed).

    Times are positive and their spread multiplicative, so the interval is computed on the log scale and
    taken back: ratio × exp(±t·sd(log t)/√n). It can never reach zero or below, whatever the spread
    (a symmetric interval on the seconds gave -4.18–64.69 for two runs of very different length).
    """
    m = mean(times_s)
    ratio = m / record_mean_s
    low = high = None
    if len(times_s) >= 2:
        logs = [math.log(t) for t in times_s]
        half = _sps().t.ppf(0.5 + confidence / 2, len(logs) - 1) * stdev(logs) / math.sqrt(len(logs))
        low, high = float(ratio * math.exp(-half)), float(ratio * math.exp(half))
    return TimeRatio(mean_s=m, record_mean_s=record_mean_s, ratio=ratio, ci_low=low, ci_high=high,
                     confidence=confidence)
