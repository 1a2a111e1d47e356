"""A new record's submission judged against its parent: what a reviewer pastes into the pull request.

    report = judge_submission(parent_record, [Path("logs/")])    # log files or folders of logs
    print(render_markdown(report)); report.to_dict()

The speedrun's rules (upstream README), applied to the submitted logs alone:
- loss: the logs' own one-sided t-test against the target (3.28), p < 0.01, and how many runs at this
  mean and spread would reach it (systems-only submissions may waive this; the report says so);
- time: the mean train time against the parent's published runs, the difference with a Welch interval
  (and the ratio), so "faster than the prior record" is a number with its uncertainty;
- code: each log's program fingerprint against the parent's: changed, same code, or unknown.
A careful maintainer's checks come first: the same log given twice (same bytes, or the same run id in its
name) is refused; a log whose numbers cannot be trusted (non-finite, a validation printed twice) or whose
time is no real run's (under 1 ms a step) is left out, and the report fails; all runs must share one
schedule; times are compared only on the parent's hardware (GPU model and count), and said otherwise.
The submission is not in the registry: nothing here reads or writes one.
"""

from __future__ import annotations

import math
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from statistics import mean, stdev

from scipy import stats as sps

from pipeline.errors import InputError
from pipeline.records.logfacts import LogFacts, LogUnreadable, logs_in, read_log_facts
from pipeline.records.model import Record
from pipeline.stats import p_value_below, runs_needed


@dataclass(frozen=True, kw_only=True)
class TimeComparison:
    mean_s: float
    parent_mean_s: float
    difference_s: float  # submission - parent: negative is faster
    ci_low_s: float | None
    ci_high_s: float | None
    confidence: float
    ratio: float
    faster: bool | None  # None: the interval straddles zero (or there are too few runs to tell)


@dataclass(frozen=True, kw_only=True)
class SubmissionReport:
    parent: str
    logs: tuple[LogFacts, ...]
    unusable: tuple[str, ...]  # logs left out, with why
    skipped_folders: tuple[str, ...]
    n: int
    mean_loss: float | None
    sd_loss: float | None
    target: float
    p_value: float | None
    p_value_max: float
    reaches_p: bool
    runs_needed: int | None
    time: TimeComparison | None
    code: str  # changed | same-code | unknown
    fingerprints: tuple[str, ...]
    parent_fingerprints: tuple[str, ...]
    checks: tuple[tuple[str, bool | None, str], ...]  # (check, passed, detail)

    @property
    def passed(self) -> bool:
        return all(ok is not False for _, ok, _ in self.checks) and self.n > 0

    def to_dict(self) -> dict:
        out = asdict(self)
        out["checks"] = [{"check": c, "passed": ok, "detail": d} for c, ok, d in self.checks]
        out["passed"] = self.passed
        return out


def collect_logs(paths: list[Path]) -> tuple[list[Path], list[str]]:
    """Log files from the arguments: files as given, folders' *.txt/*.log (their subfolders are skipped)."""
    files, skipped = [], []
    for p in map(Path, paths):
        if p.is_dir():
            logs, subfolders = logs_in(p)
            files += logs
            skipped += [f"{p / s}/" for s in subfolders]
        elif p.is_file():
            files.append(p)
        else:
            raise InputError(f"{p} does not exist", "pass the submission's log files or the folder holding them")
    if not files:
        raise InputError("no log files (*.txt, *.log) among " + ", ".join(map(str, paths)),
                         "pass the submission's run logs or their folder")
    return files, skipped


RUN_ID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
MIN_STEP_MS = 1.0  # no GPU of the speedrun's history trains a step of GPT-2 in under a millisecond


def refuse_duplicates(files: list[Path]) -> None:
    """One run counted once: the same bytes, or the same run id (the UUID a run names its log by), twice."""
    from pipeline.hashing import sha256_file

    seen: dict[tuple[str, str], Path] = {}
    for path in files:
        keys = [("sha256", sha256_file(path))] + [("run id", m) for m in RUN_ID.findall(path.name)[:1]]
        for key in keys:
            if key in seen:
                raise InputError(f"{path} and {seen[key]} are the same run (the same {key[0]}, {key[1][:16]}): "
                                 "a run may be counted once", "give each run's log once")
            seen[key] = path


def _unusable(f: LogFacts) -> str | None:
    if f.problems:
        return f"{f.file}: its numbers cannot be trusted ({', '.join(f.problems)}): left out"
    if f.val_loss is None:
        return f"{f.file}: no final validation loss ({'; '.join(f.warnings) or 'incomplete run'})"
    if f.train_time_ms is not None and f.scheduled_steps and f.train_time_ms / f.scheduled_steps < MIN_STEP_MS:
        return (f"{f.file}: train time {f.train_time_ms} ms over {f.scheduled_steps} steps is no real run "
                f"(under {MIN_STEP_MS:g} ms a step): left out")
    return None


def _welch_interval(a: list[float], b: list[float], confidence: float) -> tuple[float, float] | None:
    """Interval for mean(a) - mean(b) (Welch); None when either side has fewer than 2 values."""
    if len(a) < 2 or len(b) < 2:
        return None
    va, vb = stdev(a) ** 2 / len(a), stdev(b) ** 2 / len(b)
    diff = mean(a) - mean(b)
    se = math.sqrt(va + vb)
    if se == 0:
        return diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (len(a) - 1) + vb ** 2 / (len(b) - 1))
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=RuntimeWarning)
        t = float(sps.t.ppf(0.5 + confidence / 2, df))
    return diff - t * se, diff + t * se


def _time(times: list[float], parent: Record) -> TimeComparison | None:
    if not times:
        return None
    published = list(parent.published.times_s)
    parent_mean = mean(published) if published else parent.published.mean_time_s
    confidence = parent.rules.time_confidence
    interval = _welch_interval(times, published, confidence)
    diff = mean(times) - parent_mean
    faster = None if interval is None or interval[0] <= 0 <= interval[1] else interval[1] < 0
    return TimeComparison(mean_s=round(mean(times), 4), parent_mean_s=round(parent_mean, 4),
                          difference_s=round(diff, 4), ci_low_s=round(interval[0], 4) if interval else None,
                          ci_high_s=round(interval[1], 4) if interval else None, confidence=confidence,
                          ratio=round(mean(times) / parent_mean, 5), faster=faster)


def _hardware_caveat(good: list[LogFacts], parent: Record) -> str:
    """'' when the runs ran on the parent's GPU model and count; else what differs (times then do not compare)."""
    models = sorted({f.gpu_model for f in good if f.gpu_model})
    counts = sorted({f.gpu_count for f in good if f.gpu_count})
    want_model, want_count = parent.hardware.gpu_model, parent.hardware.gpu_count
    differs = []
    if want_model and models and models != [want_model]:
        differs.append(f"GPU {', '.join(models)} (parent: {want_model})")
    if want_count and counts and counts != [want_count]:
        differs.append(f"{', '.join(map(str, counts))} GPU(s) (parent: {want_count})")
    return "; ".join(differs)


def _read(files: list[Path]) -> tuple[list[LogFacts], list[str]]:
    """(every readable log's facts, why each unusable log cannot count as a run)."""
    facts, unusable = [], []
    for path in files:
        try:
            f = read_log_facts(path)
        except LogUnreadable as exc:
            unusable.append(str(exc))
            continue
        facts.append(f)
        if (why := _unusable(f)) is not None:
            unusable.append(why)
    return facts, unusable


def _set_checks(good: list[LogFacts], unusable: list[str]) -> list[tuple[str, bool | None, str]]:
    """What a maintainer checks before any statistics: every log usable, one schedule for all runs."""
    checks = []
    if any("cannot be trusted" in u or "no real run" in u for u in unusable):
        checks.append(("logs", False, "some logs cannot be used as runs: " + "; ".join(unusable)))
    schedules = sorted({f.scheduled_steps for f in good if f.scheduled_steps})
    if len(schedules) > 1:
        checks.append(("schedule", False, f"the runs follow different schedules ({', '.join(map(str, schedules))} "
                                          "steps): a submission's runs must all run one schedule"))
    return checks


def _time_check(time: TimeComparison | None, parent: Record, caveat: str) -> tuple[str, bool | None, str]:
    if time is None:
        return "time", None, "no log printed a train time"
    ci = (f"{time.confidence:.0%} interval {time.ci_low_s:+.3f} to {time.ci_high_s:+.3f} s"
          if time.ci_low_s is not None else "no interval: needs 2+ runs on each side")
    verdict = {True: "faster than", False: "slower than", None: "not shown faster than"}[time.faster]
    detail = (f"mean {time.mean_s:.3f} s vs the parent's {time.parent_mean_s:.3f} s: {time.difference_s:+.3f} s "
              f"({ci}), ratio {time.ratio:.4f}; {verdict} {parent.name}")
    if caveat:  # a faster or slower GPU says nothing about the code
        return "time", None, f"not comparable: the runs ran on other hardware ({caveat}); {detail}"
    return "time", time.faster, detail


def _code(facts: list[LogFacts], parent: Record) -> tuple[str, tuple[str, ...], tuple[str, ...], str]:
    """(changed | same-code | unknown, the logs' fingerprints, the parent's, the sentence)."""
    prints = tuple(sorted({f.fingerprint for f in facts if f.fingerprint}))
    parent_prints = tuple(sorted({log.fingerprint for log in parent.logs if log.fingerprint}
                                 | ({parent.program.fingerprint} if parent.program.fingerprint else set())))
    if not prints or not parent_prints:
        code = "unknown"
    else:
        code = "same-code" if set(prints) <= set(parent_prints) else "changed"
    detail = {"changed": f"the code differs from {parent.name}'s (fingerprint)",
              "same-code": f"the same code as {parent.name} (only comments or docstrings differ, if anything)",
              "unknown": "cannot tell: " + ("the logs carry no program" if not prints else
                                            f"{parent.name} pins no fingerprint")}[code]
    if len(prints) > 1:
        detail += f"; the submission's logs ran {len(prints)} different programs"
    return code, prints, parent_prints, detail


def judge_submission(parent: Record, paths: list[Path]) -> SubmissionReport:
    files, skipped = collect_logs(paths)
    refuse_duplicates(files)
    facts, unusable = _read(files)
    good = [f for f in facts if _unusable(f) is None]
    losses = [f.val_loss for f in good]
    times = [f.train_time_ms / 1000 for f in good if f.train_time_ms is not None]
    rules = parent.rules
    p = p_value_below(losses, rules.target_val_loss) if losses else None
    m = mean(losses) if losses else None
    sd = stdev(losses) if len(losses) > 1 else None
    needed = runs_needed(m, sd, rules.target_val_loss, rules.p_value_max) if sd is not None else None
    time = _time(times, parent)
    checks = _set_checks(good, unusable)
    reaches = p is not None and p < rules.p_value_max
    if m is None:
        checks.append(("loss", False, "no log printed a final validation loss"))
    else:
        spread = f", sd {sd:.4f}" if sd is not None else ""
        more = (f"; {needed} runs at this mean and sd would reach it" if needed and not reaches
                else "; no number of runs at this mean reaches it" if not reaches and m >= rules.target_val_loss
                else "")
        pv = f"p = {p:.4f}" if p is not None else "no p-value from one run"
        checks.append(("loss", reaches, f"mean {m:.4f} over {len(losses)} run(s){spread}; {pv} "
                       f"(one-sided t-test against {rules.target_val_loss}, needs p < {rules.p_value_max}){more}"))
    checks.append(_time_check(time, parent, _hardware_caveat(good, parent)))
    code, prints, parent_prints, code_detail = _code(facts, parent)
    checks.append(("code", None, code_detail))
    return SubmissionReport(
        parent=parent.name, logs=tuple(facts), unusable=tuple(unusable), skipped_folders=tuple(skipped),
        n=len(losses), mean_loss=m, sd_loss=sd, target=rules.target_val_loss, p_value=p,
        p_value_max=rules.p_value_max, reaches_p=reaches, runs_needed=needed, time=time, code=code,
        fingerprints=prints, parent_fingerprints=parent_prints, checks=tuple(checks))


def render_markdown(r: SubmissionReport) -> str:
    mark = {True: "✅", False: "❌", None: "➖"}
    lines = [f"### Submission check against {r.parent}", "",
             "| check | | detail |", "| - | - | - |"]
    lines += [f"| {name} | {mark[ok]} | {detail} |" for name, ok, detail in r.checks]
    failed = [name for name, ok, _ in r.checks if ok is False] or ["log"]  # no check failed: no log to judge
    verdict = "**passes** the loss and time checks" if r.passed else \
        f"**does not pass** the {' and '.join(failed)} check{'s' if len(failed) > 1 else ''}"
    lines += ["", f"{verdict} (a systems-only change may be exempt from the loss test by the speedrun's rules).", "",
              "| log | val loss | train time (s) | PyTorch | fingerprint |", "| - | - | - | - | - |"]
    for f in r.logs:
        loss = f"{f.val_loss:.4f}" if f.val_loss is not None else "—"
        time = f"{f.train_time_ms / 1000:.3f}" if f.train_time_ms is not None else "—"
        lines.append(f"| {f.file} | {loss} | {time} | {f.torch or '—'} | `{f.fingerprint[:17] or '—'}` |")
    for note in r.unusable:
        lines.append(f"\n- left out: {note}")
    for folder in r.skipped_folders:
        lines.append(f"\n- skipped subfolder: {folder}")
    lines.append("")
    return "\n".join(lines)
