"""`repro records check [NAME...] --from UPSTREAM_DIR`: each record judged on its own published logs.

    rows = check_records(records, Path("modded-nanogpt"))
    rows[0].verdict, rows[0].rule, rows[0].runs_judged, rows[0].left_out, rows[0].time_ratio

This is how a user or a maintainer sees that the registry agrees with the history: every pinned log is
found in a folder laid out like the upstream repository, its sha256 checked against the pin, and the
record's runs judged by the record's own rules (pipeline/verdict/judge.py: the same judge as `repro
verify`). On top of the verdict, the records table's claimed time is compared with the logs' mean: a
claim a few percent off is a deviation (the table's time was measured on a timing these logs do not
hold); one off by half or more means the logs are not the record's timed runs, a failure.

A record whose README declares a re-timing of itself on another software or hardware version (its logs with
`role: retiming`, pipeline/records/selection.py rule 4) is judged as upstream states it: "This will be the
official time for the record ... the runs conducted in the older torch version still stand in terms of
acquiring p-value on loss < 3.28" (2025-07-12_BosAlign). Its runs are judged without the re-timing, and the
claimed time is compared with the re-timing's.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline.errors import InputError, ReproError
from pipeline.findings import Finding, of_severity
from pipeline.records.import_result import clone_head
from pipeline.records.logfacts import MAX_LOG_BYTES
from pipeline.records.logparse import parse_log
from pipeline.records.model import Record
from pipeline.records.selection import LeftOut
from pipeline.regular_file import sha256_regular
from pipeline.verdict.judge import verify_runs
from pipeline.verdict.outcomes import FULL, VerdictOutcome
from pipeline.verdict.render import render_reason

IMPLAUSIBLE = (0.67, 1.5)  # logs' mean time / claimed time outside this: not the record's timed runs


@dataclass(frozen=True, kw_only=True)
class CheckRow:
    """One record's verdict on its own logs: printed, written by `--json`, and read back by `records site`."""

    name: str
    verdict: str  # a full VerdictOutcome, or "no-logs" (nothing to judge)
    rule: str  # the loss evidence the record is judged by
    runs_judged: tuple[str, ...]
    left_out: tuple[LeftOut, ...]  # what the importer did not take, and why
    mean_loss: float | None
    p: float | None
    time_s: float | None
    time_ratio: float | None  # logs' mean time / claimed time
    reasons: tuple[str, ...]
    rule_why: str = ""
    claimed_s: float | None = None
    flags: tuple[str, ...] = field(default=())
    retimings: tuple[str, ...] = field(default=())  # the declared re-timing's logs: the official time, not runs

    def to_dict(self) -> dict:
        return asdict(self)


def upstream_head(folder: Path, commit: str | None) -> str | None:
    """The commit `folder` is at when it is a git clone (it must be `commit` when one is given)."""
    head = clone_head(folder)
    if not head:
        return commit  # not a clone of its own: a copy, taken at the commit the caller says
    if commit and head != commit:
        raise InputError(f"--commit {commit[:12]} is not the commit {folder} is at ({head[:12]})",
                         f"check out {commit[:12]} there, or leave --commit out")
    return head


def _record_folder(record: Record, upstream_dir: Path) -> Path:
    rel = record.upstream.folder_after_rename or record.upstream.folder
    return upstream_dir / rel


def _pinned_logs(record: Record, folder: Path) -> tuple[list[Path], list[str]]:
    """(the pinned logs found with their pinned bytes, what is wrong with each of the others: missing, not a
    regular file, too large to be a log, or other bytes than the pin)."""
    paths, bad = [], []
    for log in record.logs:
        path = folder / log.file
        if path.is_symlink():
            bad.append(f"{log.file}: a symbolic link in {folder}, not the published log")
            continue
        try:
            digest = sha256_regular(path, MAX_LOG_BYTES, "log", "restore the published log from upstream")
        except ReproError as exc:
            bad.append(f"{log.file}: cannot be read as the pinned log ({exc.what})")
            continue
        if digest != log.sha256:
            bad.append(f"{log.file}: its sha256 is not the pinned one: the log changed since the import")
        else:
            paths.append(path)
    return paths, bad


def _claim(record: Record, mean_s: float | None,
           retimed: dict | None = None) -> tuple[Finding, float | None, float | None]:
    """The table's claimed time against the logs' mean, or against the declared re-timing's time (`retimed`: what
    it ran and on what the loss stands, for the sentence)."""
    claimed = record.imported.claimed_time_s if record.imported else None
    claimed = claimed or record.published.mean_time_s
    if mean_s is None or record.imported is not None and record.imported.mean_time_source == "claimed":
        return Finding("claim.time_unlogged", "note", {"claimed_s": claimed}), claimed, None
    ratio = mean_s / claimed
    data = {"mean_s": round(mean_s, 3), "claimed_s": claimed, "ratio": round(ratio, 4),
            "tolerance": record.rules.time_tolerance, **(retimed or {})}
    if not IMPLAUSIBLE[0] <= ratio <= IMPLAUSIBLE[1]:
        return Finding("claim.time_implausible", "failure", data), claimed, ratio
    if abs(ratio - 1) > record.rules.time_tolerance:
        return Finding("claim.time_differs", "deviation", data), claimed, ratio
    return Finding("claim.retimed" if retimed else "claim.time", "note", data), claimed, ratio


def _retimed(record: Record, logs: list[Path], runs: int) -> tuple[float | None, dict | None, list[Finding]]:
    """(the official time in s, what the re-timing ran for the claim's sentence, problems): the re-timing logs the
    README declares, read for their train time; the loss evidence is the `runs` other logs."""
    if not logs:
        return None, None, []
    times, ran, problems = [], set(), []
    for path in logs:
        log = parse_log(path)
        if not log.completed or log.train_time_ms is None or log.train_time_ms <= 0:
            problems.append(Finding("check.log_missing", "problem", {
                "detail": f"{path.name}: the re-timing its README declares prints no final train time, so the "
                          "record's official time cannot be read from it"}))
            continue
        times.append(log.train_time_ms / 1000)
        gpus = sorted({g.name for g in log.hardware.gpus}) if log.hardware else []
        ran |= {f"PyTorch {log.torch}" if log.torch and log.torch != record.software.torch else "",
                ", ".join(gpus) if gpus and ", ".join(gpus) != record.hardware.gpu_model else ""} - {""}
    if not times:
        return None, None, problems
    runs_on = record.software.torch and f"PyTorch {record.software.torch}"
    return sum(times) / len(times), {"retimed": [p.name for p in logs], "ran": sorted(ran), "runs": runs,
                                     "runs_ran": runs_on or ""}, problems


def _outcome(verdict_outcome: VerdictOutcome, extra: list[Finding]) -> VerdictOutcome:
    worst = FULL.index(verdict_outcome)  # the outcomes best to worst
    if of_severity(extra, "failure"):
        worst = max(worst, FULL.index(VerdictOutcome.NOT_REPRODUCED))
    elif of_severity(extra, "deviation"):
        worst = max(worst, FULL.index(VerdictOutcome.WITH_DEVIATIONS))
    return FULL[worst]


def check_record(record: Record, upstream_dir: Path) -> CheckRow:
    imported = record.imported
    rule = record.rules.loss_evidence
    rule_why = (imported.rule.get("why", "") if imported and imported.rule.get("evidence") == rule
                else "set by the manifest's editor")
    left_out = tuple(LeftOut(str(x.get("file")), str(x.get("reason")), str(x.get("detail", "")))
                     for x in (imported.left_out if imported else ()))
    flags = tuple(imported.flags) if imported else ()
    folder = _record_folder(record, upstream_dir)
    if not record.logs:
        return CheckRow(name=record.name, verdict="no-logs", rule=rule, runs_judged=(), left_out=left_out,
                        mean_loss=None, p=None, time_s=None, time_ratio=None,
                        reasons=("the manifest pins no log",), rule_why=rule_why, claimed_s=None, flags=flags)
    paths, bad = _pinned_logs(record, folder)
    retiming = {log.file for log in record.retiming_logs}
    timing = [p for p in paths if p.relative_to(folder).as_posix() in retiming]
    paths = [p for p in paths if p not in timing]
    if not paths:  # every pinned run is missing or tampered with: evidence that fails its pin is a failure
        return CheckRow(name=record.name, verdict=VerdictOutcome.INVALID, rule=rule, runs_judged=(), left_out=left_out,
                        mean_loss=None, p=None, time_s=None, time_ratio=None,
                        reasons=tuple(render_reason(Finding("check.log_missing", "problem",
                                                            {"detail": b})) for b in bad),
                        rule_why=rule_why, claimed_s=None, flags=flags)
    verdict = verify_runs(record, paths)
    official, retimed, unreadable = _retimed(record, timing, len(paths))
    mean_s = official if official is not None else verdict.time.mean_s if verdict.time else None
    claim, claimed, ratio = _claim(record, mean_s, retimed)
    extra = [claim] + [Finding("check.log_missing", "problem", {"detail": b}) for b in bad] + unreadable
    outcome = VerdictOutcome.INVALID if bad or unreadable else _outcome(verdict.outcome, extra)
    reasons = [render_reason(f) for f in (*verdict.findings, *extra) if f.severity != "note"
               or f.code.startswith("claim.")]
    loss = verdict.loss
    return CheckRow(name=record.name, verdict=outcome, rule=rule,
                    runs_judged=tuple(p.relative_to(folder).as_posix() for p in paths), left_out=left_out,
                    mean_loss=loss.mean if loss else None, p=loss.p_value if loss else None,
                    time_s=mean_s, time_ratio=ratio, reasons=tuple(reasons),
                    rule_why=rule_why, claimed_s=claimed, flags=flags,
                    retimings=tuple(p.relative_to(folder).as_posix() for p in timing))


def check_records(records: list[Record], upstream_dir: Path) -> list[CheckRow]:
    upstream_dir = Path(upstream_dir)
    if not upstream_dir.is_dir() or not (upstream_dir / "records").is_dir():
        raise InputError(f"{upstream_dir} is not laid out like the upstream repository (no records/ folder)",
                         "pass --from a clone of modded-nanogpt, or a copy with its records/ folders")
    return [check_record(r, upstream_dir) for r in records]
