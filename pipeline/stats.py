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
