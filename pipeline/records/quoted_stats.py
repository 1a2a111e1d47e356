"""The statistics a record's README states, in every form upstream's READMEs use.

    stats = quoted_statistics(readme_text)
    stats["p_value"], stats["forms"], stats.get("losses"), stats.get("n")

Upstream's rule 2 asks a submission for "enough run logs to attain a statistical significance level of
p<0.01"; most records publish those logs, but many state the test's outcome in their README instead of (or
besides) publishing every run. The forms seen in the records' READMEs (tests/fixtures/quoted-statistics/
holds the sentences, one corpus test reads them all):
- `p=0.0001`, `p = 0.0000`, `p<0.001`, `val_loss t-test p=0.000032`: a p-value or a bound on it;
- `p-value: 1.1266e-05`, `P-value: 0.0001256`, `T-test p-value: 0.0119`: the same, spelled out;
- `....pvalue=np.float64(0.0032)`: scipy's result printed by an f-string;
- `(P(<2.92) > 99.9%)`: the probability that the mean is under the target, so p < 1 - 0.999;
- the losses the test was computed from: `accs = [...]`, `losses = [...]`, or a bare list printed by the script.
The smallest p stated is the README's claim (a README often shows its baselines' p-values beside its own).
Every pattern is a single pass without nested repetition: a README is untrusted text.
"""

from __future__ import annotations

import re
from statistics import mean, stdev

_NUM = r"(\d*\.?\d+(?:[eE]-?\d+)?)(?![\w.])"  # not a format spec such as `pvalue:.4f`
# (form name, pattern, how the number becomes a p-value bound or value)
P_FORMS: tuple[tuple[str, re.Pattern, str], ...] = (
    ("p=", re.compile(r"\bp ?([=<]) ?" + _NUM), "p"),
    ("p-value:", re.compile(r"\bp[- ]?values?: ?" + _NUM, re.I), "p"),
    ("pvalue=np.float64(...)", re.compile(r"\.pvalue=(?:np\.float64\()?" + _NUM), "p"),
    ("P(<target) > x%", re.compile(r"P\(<\d*\.?\d+\) ?> ?(\d*\.?\d+)%"), "percent"),
)
_LIST = re.compile(r"\[([0-9.,\s]+)\]")
_ELSEWHERE = re.compile(r"statistical significance[^.\n]{0,400}\]\((https?://[^)\s]{1,400})\)", re.I)
LOSS_RANGE = (2.5, 4.0)  # a final validation loss of these tracks; other lists (steps, times) are not losses


# A p-value in a line like these is not the loss claim: a statistic over many p-values (bootstrap summaries), or
# a test of the run time (`Welch one-sided t-test on wall-time`).
NOT_THE_CLAIM = ("mean p", "std p", "variance of p", "max p", "min p", "percentage of p", "fraction of p",
                 "wall-time", "wall time", "welch")


def _p_values(text: str) -> tuple[list[float], list[str]]:
    values, forms = [], []
    for line in text.splitlines():
        lowered = line.lower()
        if any(word in lowered for word in NOT_THE_CLAIM):
            continue
        for form, pattern, kind in P_FORMS:
            for m in pattern.finditer(line):
                number = float(m.groups()[-1])
                value = round(1 - number / 100, 12) if kind == "percent" else number
                if 0 <= value <= 1:
                    values.append(value)
                    if form not in forms:
                        forms.append(form)
    return values, forms


def _loss_lists(text: str) -> list[list[float]]:
    out = []
    for m in _LIST.finditer(text):
        try:
            numbers = [float(x) for x in m.group(1).replace("\n", " ").split(",") if x.strip()]
        except ValueError:
            continue  # "1.2.3": not a list of numbers
        if len(numbers) > 1 and all(LOSS_RANGE[0] <= x <= LOSS_RANGE[1] for x in numbers):
            out.append(numbers)
    return out


def quoted_statistics(readme: str) -> dict:
    """What a README states about significance: a p-value (with the losses it was computed from, when the README
    lists them), or a link to where it was obtained. {} when it states neither."""
    values, forms = _p_values(readme)
    if values:
        out: dict = {"source": "README.md", "p_value": min(values), "forms": forms}
        lists = _loss_lists(readme)
        if lists:
            losses = max(lists, key=len)
            out.update(n=len(losses), losses=losses, mean=round(mean(losses), 6),
                       sd=round(stdev(losses), 6))
        return out
    if (m := _ELSEWHERE.search(readme)):
        return {"source": m.group(1), "statement": "statistical significance was obtained elsewhere (linked "
                                                   "from the record's README)"}
    return {}
