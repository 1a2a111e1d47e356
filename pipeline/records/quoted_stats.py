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
- `"p_value": 5.07368129288152e-07,` (`'p_value': ...`): a dict of t-test results printed as JSON or Python;
- `(P(<2.92) > 99.9%)`: the probability that the mean is under the target, so p < 1 - 0.999;
- the losses the test was computed from: `accs = [...]`, `losses = [...]`, or a bare list printed by the script.
A README often shows the statistics of the code it started from beside its own, under a heading or a label line
that says so ("Previous record (timed on same machine):", "**Current WR:**", "## Baselines", "The baseline comes
from PR#137. I re-ran the code for 5 runs and got the following results:"): those are not its claim. Of the rest,
the smallest p stated is the README's claim, with the list of losses written last before it (the list its
script tested), else the first one after it.
Every pattern is a single pass without nested repetition: a README is untrusted text.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from statistics import mean, stdev

_NUM = r"(\d*\.?\d+(?:[eE]-?\d+)?)(?![\w.])"  # not a format spec such as `pvalue:.4f`
# (form name, pattern, how the number becomes a p-value bound or value)
P_FORMS: tuple[tuple[str, re.Pattern, str], ...] = (
    ("p=", re.compile(r"\bp ?([=<]) ?" + _NUM), "p"),
    ("p-value:", re.compile(r"\bp[- ]?values?: ?" + _NUM, re.I), "p"),
    ("pvalue=np.float64(...)", re.compile(r"\.pvalue=(?:np\.float64\()?" + _NUM), "p"),
    ("\"p_value\": ...", re.compile(r"[\"']p_value[\"']: ?" + _NUM), "p"),
    ("P(<target) > x%", re.compile(r"P\(<\d*\.?\d+\) ?> ?(\d*\.?\d+)%"), "percent"),
)
_LIST = re.compile(r"\[([0-9.,\s]+)\]")
_ELSEWHERE = re.compile(r"statistical significance[^.\n]{0,400}\]\((https?://[^)\s]{1,400})\)", re.I)
LOSS_RANGE = (2.5, 4.0)  # a final validation loss of these tracks; other lists (steps, times) are not losses


# A p-value in a line like these is not the loss claim: a statistic over many p-values (bootstrap summaries), or
# a test of the run time (`Welch one-sided t-test on wall-time`).
NOT_THE_CLAIM = ("mean p", "std p", "variance of p", "max p", "min p", "percentage of p", "fraction of p",
                 "wall-time", "wall time", "welch")


# How a heading or a label line names the code the record started from: statistics under it are not the claim.
EARLIER_CODE = ("previous record", "prior record", "previous pr", "current wr", "current record", "baseline",
                "unmodified code")
_CODE_SPAN = re.compile(r"`[^`\n]*`")
MAX_LABEL = 200  # a label line is short: "Previous PR timed on same machine:"
CODE_CHARS = frozenset("()[]{}=#'\",")  # a line inside a code block with these is code, not a label
CODE_WORDS = ("def ", "class ", "for ", "if ", "elif ", "else", "while ", "with ", "try", "except", "finally",
              "return", "lambda")


def _is_label(line: str, in_code: bool) -> bool:
    """"Previous record (timed on same machine):", "**This PR:**", "Baseline:" inside a code block."""
    text = line.strip().strip("*_").strip()
    if not text.endswith(":") or len(text) > MAX_LABEL:
        return False
    return not in_code or not (CODE_CHARS & set(text) or text.startswith(CODE_WORDS))


def _names_earlier(line: str) -> bool:
    """Does a heading or label speak of the earlier code? A `code span` is a name (`xsa-baseline-s1385`), not words."""
    words = _CODE_SPAN.sub("", line).lower()
    return any(p in words for p in EARLIER_CODE)


def _sections(text: str) -> tuple[list[int], list[bool]]:
    """(where each section starts, whether it is about the earlier code): a section starts at each heading and
    each label line; one under a heading about the earlier code is about it too."""
    starts, earlier, under_earlier, in_code, offset = [0], [False], False, False, 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("```"):
            in_code = not in_code
        elif not in_code and stripped.startswith("#"):
            under_earlier = _names_earlier(line)
            starts.append(offset)
            earlier.append(under_earlier)
        elif _is_label(line, in_code):
            starts.append(offset)
            earlier.append(under_earlier or _names_earlier(line))
        offset += len(line)
    return starts, earlier


def _p_values(text: str) -> list[tuple[int, float, str]]:
    """(offset, p-value, form) of every p-value stated, in the order written."""
    out, offset = [], 0
    for line in text.splitlines(keepends=True):
        lowered = line.lower()
        if not any(word in lowered for word in NOT_THE_CLAIM):
            found = []
            for form, pattern, kind in P_FORMS:
                for m in pattern.finditer(line):
                    number = float(m.groups()[-1])
                    value = round(1 - number / 100, 12) if kind == "percent" else number
                    if 0 <= value <= 1:
                        found.append((offset + m.start(), value, form))
            out += sorted(found)
        offset += len(line)
    return out


def _loss_lists_at(text: str) -> list[tuple[int, list[float]]]:
    out = []
    for m in _LIST.finditer(text):
        try:
            numbers = [float(x) for x in m.group(1).replace("\n", " ").split(",") if x.strip()]
        except ValueError:
            continue  # "1.2.3": not a list of numbers
        if len(numbers) > 1 and all(LOSS_RANGE[0] <= x <= LOSS_RANGE[1] for x in numbers):
            out.append((m.start(), numbers))
    return out


def _loss_lists(text: str) -> list[list[float]]:
    return [numbers for _, numbers in _loss_lists_at(text)]


def quoted_statistics(readme: str) -> dict:
    """What a README states about its own significance: a p-value (with the losses it was computed from, when the
    README lists them), or a link to where it was obtained. {} when it states neither."""
    starts, earlier = _sections(readme)

    def own(offset: int) -> bool:
        return not earlier[bisect_right(starts, offset) - 1]

    values = [v for v in _p_values(readme) if own(v[0])]
    if values:
        at, p, _ = min(values, key=lambda v: v[1])
        forms = list(dict.fromkeys(form for _, _, form in values))
        out: dict = {"source": "README.md", "p_value": p, "forms": forms}
        lists = [(offset, numbers) for offset, numbers in _loss_lists_at(readme) if own(offset)]
        before = [numbers for offset, numbers in lists if offset < at]
        losses = before[-1] if before else (lists[0][1] if lists else None)
        if losses:
            out.update(n=len(losses), losses=losses, mean=round(mean(losses), 6),
                       sd=round(stdev(losses), 6))
        return out
    if (m := _ELSEWHERE.search(readme)):
        return {"source": m.group(1), "statement": "statistical significance was obtained elsewhere (linked "
                                                   "from the record's README)"}
    return {}
