"""Judge training runs against a record: `repro verify RUN_OR_LOG... [--record NAME] [--json]`.

Per run: schedule completed, final val loss, train time, program identity, hardware and software
deviations read from the log's header. Across runs: mean and sd of the losses, the speedrun's
one-sided t-test against the target, how many runs at this sd would reach the threshold,
consistency with the record's (and its parent's) published losses, and mean time against the
record's as a ratio with an interval. Thresholds come from the record manifest's `rules`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev

from pipeline.errors import InputError
from pipeline.records.identity import ProgramIdentity, identify
from pipeline.records.logparse import ParsedLog, parse_log
from pipeline.records.model import Record, load_parent
from pipeline.verdict.stats import Consistency, TimeRatio, consistency, p_value_below, runs_needed, time_ratio

OUTCOMES = ("reproduced", "reproduced-with-deviations", "not-reproduced", "invalid")


@dataclass(frozen=True)
class RunAssessment:
    source: str
    trainer: str  # record | native | unknown
    status: str  # from the run directory's status file, or "log" for a bare log
    completed: bool
    last_step: int
    scheduled_steps: int | None
    final_val_loss: float | None
    train_time_s: float | None
    peak_allocated_mib: int | None
    program: ProgramIdentity
    hardware: dict
    software: dict
    deviations: tuple[str, ...]
    problems: tuple[str, ...]  # anything that makes the run unusable

    @property
    def valid(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class LossSummary:
    n: int
    mean: float | None
    sd: float | None
    target: float
    p_value: float | None
    p_value_max: float
    reaches_p: bool
    runs_needed: int | None
    consistency: tuple[Consistency, ...]


@dataclass(frozen=True)
class Verdict:
    record: str
    outcome: str
    reasons: tuple[str, ...]
    runs: tuple[RunAssessment, ...]
    loss: LossSummary | None
    time: TimeRatio | None
    time_comparable: bool
    deviations: tuple[str, ...]
    rules_version: int

    def to_dict(self) -> dict:
        out = dataclasses.asdict(self)
        for run in out["runs"]:
            run.pop("program_bytes", None)
        return out


def _read_run_dir(path: Path) -> tuple[Path, dict, str]:
    """A run directory: its log, its run.yaml (may be absent after a hard crash) and its status."""
    log = path / "log.txt"
    meta: dict = {}
    if (path / "run.yaml").is_file():
        from pipeline.yamlio import load_mapping  # the one YAML reader: refuses aliases, duplicate keys, lists

        meta = load_mapping(path / "run.yaml", "run", "run.yaml")
    status_file = path / "status"
    status = status_file.read_text().strip() if status_file.is_file() else "unknown"
    return log, meta, status


def _compare(record: Record, log: ParsedLog) -> tuple[dict, dict, list[str]]:
    gpus = log.hardware.gpus if log.hardware else ()
    names = sorted({g.name for g in gpus})
    hardware = {"gpu_model": names[0] if len(names) == 1 else (", ".join(names) or None),
                "gpu_count": len(gpus) if log.hardware else None,
                "driver": log.hardware.driver if log.hardware else None,
                "cuda_driver": log.hardware.cuda if log.hardware else None}
    software = {"python": log.python, "torch": log.torch, "torch_cuda": log.torch_cuda, "triton": log.triton}
    deviations = []
    for key in record.rules.compare_hardware:
        want, got = getattr(record.hardware, key), hardware[key]
        if want not in ("", None) and got != want:
            deviations.append(f"hardware {key}: {got if got is not None else 'not in the log'} "
                              f"(record: {want})")
    for key in record.rules.compare_software:
        want, got = getattr(record.software, key), software[key]
        if want not in ("", None) and got != want:
            deviations.append(f"software {key}: {got if got is not None else 'not in the log'} (record: {want})")
    return hardware, software, deviations


def assess_run(record: Record, path: Path) -> RunAssessment:
    path = Path(path)
    meta, status = {}, "log"
    log_path = path
    if path.is_dir():
        log_path, meta, status = _read_run_dir(path)
    if not log_path.is_file():
        problems = [f"no log at {log_path}"] + ([f"run status: {status}"] if status != "log" else [])
        return RunAssessment(str(path), meta.get("trainer", "unknown"), status, False, 0, None, None, None, None,
                             ProgramIdentity("absent", None, None, "no log"), {}, {}, (), tuple(problems))
    log = parse_log(log_path)
    trainer = str(meta.get("trainer", "unknown"))
    problems: list[str] = []
    if status in ("failed", "aborted", "running"):
        code = meta.get("exit_code")
        problems.append(f"run status is {status}" + (f" (exit code {code})" if code is not None else ""))
    if not log.completed:
        problems.extend(log.problems or ["the schedule did not complete"])
    elif log.scheduled_steps != record.published.steps and trainer != "native":
        problems.append(f"scheduled {log.scheduled_steps} steps, the record runs {record.published.steps}")
    hardware, software, deviations = _compare(record, log)
    if trainer == "native":
        program = identify(None, frozenset(), "")
        program = dataclasses.replace(program, status="native", detail="the native trainer (train/), "
                                      "an independent implementation of the record's algorithm")
        deviations.append("trainer: native (train/), not the record's program")
        if log.scheduled_steps is not None and log.scheduled_steps != record.published.steps:
            deviations.append(f"schedule: {log.scheduled_steps} steps (record: {record.published.steps})")
    else:
        program = identify(log.program, record.accepted_program_sha256, record.program.fingerprint)
        if program.status in ("different", "unparsable"):
            problems.append(f"program: {program.detail}")
        elif program.status == "unpinned":
            deviations.append(f"program: {program.detail}")
    return RunAssessment(
        source=str(path), trainer=trainer, status=status, completed=log.completed, last_step=log.last_step,
        scheduled_steps=log.scheduled_steps, final_val_loss=log.final_val_loss,
        train_time_s=log.train_time_ms / 1000 if log.train_time_ms is not None else None,
        peak_allocated_mib=log.peak_allocated_mib, program=program, hardware=hardware, software=software,
        deviations=tuple(deviations), problems=tuple(problems))


def _loss_summary(record: Record, losses: list[float]) -> LossSummary:
    rules = record.rules
    p = p_value_below(losses, rules.target_val_loss)
    m = mean(losses)
    sd = stdev(losses) if len(losses) > 1 else None
    needed = runs_needed(m, sd, rules.target_val_loss, rules.p_value_max) if sd is not None else None
    checks = [consistency(losses, list(record.published.losses), record.name, "record", rules.consistency_alpha)]
    parent = load_parent(record)
    if parent is not None:
        checks.append(consistency(losses, list(parent.published.losses), parent.name, "parent",
                                  rules.consistency_alpha))
    return LossSummary(len(losses), m, sd, rules.target_val_loss, p, rules.p_value_max,
                       p is not None and p < rules.p_value_max, needed, tuple(checks))


def _loss_reasons(record: Record, loss: LossSummary) -> tuple[list[str], list[str]]:
    """(failures, notes) for the loss claim, following the record's `loss_evidence` rule."""
    fails, notes = [], []
    sd = f", sd {loss.sd:.4f}" if loss.sd is not None else ""
    head = f"mean val loss {loss.mean:.4f} over {loss.n} run(s){sd}"
    if loss.mean > loss.target:
        fails.append(f"{head} is above the target {loss.target}")
    if loss.p_value is None:
        alone = f"one run gives no p-value; at least 2 runs are needed for the t-test against {loss.target}"
    elif loss.reaches_p:
        alone = f"p = {loss.p_value:.4f} < {loss.p_value_max} against {loss.target}: these runs alone reach it"
    else:
        more = (f"{loss.runs_needed} runs at this mean and sd would" if loss.runs_needed
                else "no number of runs at this mean would")
        alone = (f"p = {loss.p_value:.3f} against {loss.target}: these runs alone do not reach "
                 f"p < {loss.p_value_max}; {more}")
    if record.rules.loss_evidence == "own" and not loss.reaches_p:
        fails.append(alone)
    else:
        notes.append(f"{head}; {alone}")
    for c in loss.consistency:
        text = (f"losses vs {c.against}'s published runs: p = {c.p_value:.3f} ({c.method})"
                if c.p_value is not None else f"losses vs {c.against}: {c.method}")
        if c.consistent:
            notes.append(text)
        elif c.role in record.rules.consistency_required:
            fails.append(text + ": inconsistent")
        else:
            notes.append(text + f": inconsistent, reported only (the rules require consistency with "
                         f"{', '.join(record.rules.consistency_required)})")
    if record.rules.loss_evidence == "parent" and not fails:
        notes.append(f"{record.name} is a systems-only record whose ML was established by "
                     f"{record.parent or 'its parent'}; consistent losses are what it requires")
    return fails, notes


def verify_runs(record: Record, paths: list[Path]) -> Verdict:
    if not paths:
        raise InputError("no runs given", "pass run directories or log files: repro verify runs/<record>/*")
    runs = tuple(assess_run(record, Path(p)) for p in paths)
    reasons: list[str] = []
    invalid = [r for r in runs if not r.valid]
    for r in invalid:
        reasons.append(f"{r.source}: " + "; ".join(r.problems))
    deviations = tuple(sorted({d for r in runs for d in r.deviations}))
    good = [r for r in runs if r.valid]
    loss = time = None
    hardware_deviates = any(d.startswith("hardware") for d in deviations)
    time_comparable = bool(good) and not hardware_deviates
    failures: list[str] = []
    if good:
        loss = _loss_summary(record, [r.final_val_loss for r in good])
        fails, notes = _loss_reasons(record, loss)
        failures += fails
        time = time_ratio([r.train_time_s for r in good], record.published.mean_time_s,
                          record.rules.time_confidence)
        ci = (f" ({time.confidence:.0%} interval {time.ci_low:.4f}–{time.ci_high:.4f})"
              if time.ci_low is not None else "")
        text = (f"mean train time {time.mean_s:.2f} s = {time.ratio:.4f} × the record's "
                f"{time.record_mean_s:.2f} s{ci}")
        upper = time.ci_high if time.ci_high is not None else time.ratio
        if not time_comparable:
            notes.append(text + "; not comparable: the hardware differs from the record's")
        elif upper > 1 + record.rules.time_tolerance:
            failures.append(text + f"; slower than the record by more than {record.rules.time_tolerance:.0%}")
        else:
            notes.append(text)
        reasons += failures
    if invalid or not good:
        outcome = "invalid"
    elif failures:
        outcome = "not-reproduced"
    elif deviations:
        outcome = "reproduced-with-deviations"
    else:
        outcome = "reproduced"
    if good:
        reasons += notes
    reasons += [f"deviation: {d}" for d in deviations]
    return Verdict(record.name, outcome, tuple(reasons), runs, loss, time, time_comparable, deviations,
                   record.rules.version)
