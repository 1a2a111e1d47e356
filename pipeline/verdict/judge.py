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
from pipeline.findings import Finding, differences, finite_or_none, of_severity
from pipeline.records.identity import ProgramIdentity, identify
from pipeline.records.logparse import ParsedLog, parse_log
from pipeline.records.model import Record, load_parent
from pipeline.runs.failure import shared_gpu
from pipeline.runs.rundir import RunMeta, read_status
from pipeline.stats import Consistency, TimeRatio, consistency, p_value_below, runs_needed, time_ratio
from pipeline.verdict.ancestry import inherited_evidence
from pipeline.verdict.outcomes import VerdictOutcome
from pipeline.verdict.render import render, render_reason
from pipeline.verdict.smoke import check_program as check_smoke_program
from pipeline.verdict.smoke import learning as smoke_learning
from pipeline.verdict.smoke import outcome as smoke_outcome
from pipeline.verdict.smoke import smoke_patch_of


@dataclass(frozen=True, kw_only=True)
class RunAssessment:
    source: str
    trainer: str  # record | native | unknown
    status: str  # from the run directory's status file, or "log" for a bare log
    completed: bool
    last_step: int
    scheduled_steps: int | None
    final_val_loss: float | None  # None unless the run completed with a finite loss
    train_time_s: float | None
    peak_allocated_mib: int | None  # None on a CPU run (no GPU memory to report)
    program: ProgramIdentity
    hardware: dict
    software: dict
    findings: tuple[Finding, ...]  # this run's problems and deviations

    @property
    def problems(self) -> tuple[str, ...]:
        """Anything that makes the run unusable, as sentences."""
        return tuple(render(f) for f in of_severity(self.findings, "problem"))

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(render(f) for f in of_severity(self.findings, "deviation"))

    @property
    def valid(self) -> bool:
        return not of_severity(self.findings, "problem")


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class Verdict:
    record: str
    outcome: VerdictOutcome
    findings: tuple[Finding, ...]  # what the verdict rests on; reasons are rendered from these
    runs: tuple[RunAssessment, ...]
    loss: LossSummary | None
    time: TimeRatio | None
    time_comparable: bool
    rules_version: int

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(render_reason(f) for f in self.findings)

    @property
    def deviations(self) -> tuple[str, ...]:
        return tuple(render(f) for f in of_severity(self.findings, "deviation"))

    def to_dict(self) -> dict:
        """Plain JSON data: findings as data, their sentences beside them, no NaN or infinity anywhere."""
        out = _json_safe(dataclasses.asdict(self))
        out["findings"] = [f.to_dict() for f in self.findings]
        out["reasons"] = list(self.reasons)
        out["deviations"] = list(self.deviations)
        for run, assessed in zip(out["runs"], self.runs):
            run["findings"] = [f.to_dict() for f in assessed.findings]
            run["problems"] = list(assessed.problems)
        return out


def _json_safe(value):
    """NaN and infinities become None (they are not JSON); the findings already say why a value is missing."""
    if isinstance(value, float):
        return finite_or_none(value)
    if isinstance(value, dict):
        return {k: _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, bytes):
        return None  # program bytes never go into a verdict
    return value


def _read_run_dir(path: Path) -> tuple[Path, RunMeta | None, str, str | None]:
    """A run directory: its log, its run.yaml (may be absent after a hard crash), its status, and the CPU
    model its preflight.json recorded (CPU runs have no nvidia-smi table to tell the machine)."""
    from pipeline.preflight.run import read_report

    meta = RunMeta.load_if_present(path)
    cpu_model = None
    if (path / "preflight.json").is_file():
        try:
            facts = read_report(path / "preflight.json").facts
            cpu_model = facts.cpu.model if facts.cpu else None
        except InputError:
            cpu_model = None  # a run whose preflight could not be made records why instead; it is not the verdict's
    return path / "log.txt", meta, read_status(path), cpu_model


def _compare(record: Record, log: ParsedLog, cpu_model: str | None) -> tuple[dict, dict, list[Finding]]:
    gpus = log.hardware.gpus if log.hardware else ()
    names = sorted({g.name for g in gpus})
    hardware = {"gpu_model": names[0] if len(names) == 1 else (", ".join(names) or None),
                "gpu_count": len(gpus) if log.hardware else None,
                "driver": log.hardware.driver if log.hardware else None,
                "cuda_driver": log.hardware.cuda if log.hardware else None,
                "cpu_model": cpu_model}
    software = {"python": log.python, "torch": log.torch, "torch_cuda": log.torch_cuda, "triton": log.triton}
    rules = record.rules
    findings = differences("hardware.differs", {k: getattr(record.hardware, k) for k in rules.compare_hardware},
                           hardware)
    findings += differences("software.differs", {k: getattr(record.software, k) for k in rules.compare_software},
                            software)
    return hardware, software, findings


def _log_findings(source: str, log: ParsedLog) -> list[Finding]:
    code = {"non_finite": "run.non_finite", "duplicate_val": "run.duplicate_val"}
    return [Finding(code.get(issue.code, "run.log"), "problem", {"run": source, "issue": issue.code,
                                                                 "detail": issue.detail})
            for issue in log.issues]


def _environment_findings(record: Record, meta: RunMeta | None) -> list[Finding]:
    """Which software trained, from run.yaml: a declared fallback, or an unpinned host Python."""
    if meta is None or record.environment in ("", "host"):
        return []
    if meta.runtime == "host" and meta.environment in ("", "host"):
        return [Finding("environment.unpinned", "deviation", {"record_environment": record.environment})]
    if meta.environment and meta.environment != record.environment:
        return [Finding("environment.fallback", "deviation", {
            "environment": meta.environment, "record_environment": record.environment,
            "why": "the record's own environment is not available here; this is its declared fallback"})]
    return []


def assess_run(record: Record, path: Path) -> RunAssessment:
    path = Path(path)
    meta, status, cpu_model = None, "log", None
    log_path = path
    if path.is_dir():
        log_path, meta, status, cpu_model = _read_run_dir(path)
    trainer = meta.trainer if meta else "unknown"
    source = str(path)
    if not log_path.is_file():
        return _unlogged(source, trainer, status, log_path)
    log = parse_log(log_path)
    # findings keep one order (status, log, schedule, comparison, stand-ins, program, learning): people
    # read them in it and bundles store them in it
    findings = _status_findings(source, status, meta) + _log_state_findings(source, log)
    smoke = smoke_patch_of(meta)  # a declared smoke cut: judged as smoke (pipeline/verdict/smoke.py)
    if log.completed and log.scheduled_steps != record.published.steps and trainer != "native" and smoke is None:
        findings.append(Finding("run.schedule", "problem", {"run": source, "scheduled": log.scheduled_steps,
                                                            "record_steps": record.published.steps}))
    hardware, software, compared = _compare(record, log, cpu_model)
    findings += compared + _environment_findings(record, meta) + _standin_findings(meta)
    program, program_findings = _program_of(record, source, log, trainer, smoke)
    findings += program_findings
    loss = finite_or_none(log.final_val_loss)
    if smoke is not None:
        first = log.vals[0].val_loss if log.vals else None
        findings.append(smoke_learning(source, finite_or_none(first), loss, log.scheduled_steps))
    seconds = log.train_time_ms / 1000 if log.train_time_ms is not None else None
    no_gpu = log.hardware is None
    return RunAssessment(
        source=source, trainer=trainer, status=status, completed=log.completed, last_step=log.last_step,
        scheduled_steps=log.scheduled_steps, final_val_loss=loss,
        train_time_s=seconds, peak_allocated_mib=None if no_gpu else log.peak_allocated_mib, program=program,
        hardware=hardware, software=software, findings=tuple(findings))


def _unlogged(source: str, trainer: str, status: str, log_path: Path) -> RunAssessment:
    """A run without a log: nothing to judge but its absence (and its status, when it has one)."""
    findings = [Finding("run.no_log", "problem", {"run": source, "log": str(log_path)})]
    if status != "log":
        findings.append(Finding("run.status", "problem", {"run": source, "status": status, "exit_code": None}))
    return RunAssessment(source=source, trainer=trainer, status=status, completed=False, last_step=0,
                         scheduled_steps=None, final_val_loss=None, train_time_s=None, peak_allocated_mib=None,
                         program=ProgramIdentity("absent", None, None, "no log"), hardware={}, software={},
                         findings=tuple(findings))


def _status_findings(source: str, status: str, meta: RunMeta | None) -> list[Finding]:
    if status not in ("failed", "aborted", "running", "unreadable"):
        return []
    failure = {"failure": meta.failure} if meta is not None and meta.failure else {}  # its output's reason
    shared = shared_gpu(meta.failure) if meta is not None else None  # out of memory beside other processes
    failure.update({"shared_gpu": shared} if shared else {})
    return [Finding("run.status", "problem", {"run": source, "status": status,
                                              "exit_code": meta.exit_code if meta else None, **failure})]


def _log_state_findings(source: str, log: ParsedLog) -> list[Finding]:
    """An incomplete log says why (or that the schedule did not complete); a completed one only its bad numbers."""
    if not log.completed:
        return _log_findings(source, log) or [Finding("run.log", "problem", {
            "run": source, "issue": "incomplete", "detail": "the schedule did not complete"})]
    # a completed log's own numbers may still be untrustworthy: not finite, or a validation printed twice
    findings = [f for f in _log_findings(source, log) if f.code in ("run.non_finite", "run.duplicate_val")]
    if log.train_time_ms is not None and log.train_time_ms <= 0:
        findings.append(Finding("run.time_not_positive", "problem", {"run": source,
                                                                     "train_time_ms": log.train_time_ms}))
    return findings


def _standin_findings(meta: RunMeta | None) -> list[Finding]:
    findings = []
    if meta is not None and meta.fa3_standin:  # FA3 absent: the record's program ran on repro's FlexAttention
        findings.append(Finding("attention.fa3_standin", "deviation"))
    if meta is not None and meta.hub_standin:  # the kernels hub answered by repro (pipeline/runs/hub_standin)
        findings.append(Finding("kernels.hub_standin", "deviation"))
    if meta is not None and meta.inductor_fp32_floats:  # the record's torch's float typing (pipeline/runs/float_args)
        findings.append(Finding("inductor.fp32_floats", "deviation"))
    if meta is not None and meta.fp8_aligned_scales:  # FP8 scales copied aligned for cuBLAS (pipeline/runs/fp8_scales)
        findings.append(Finding("fp8.aligned_scales", "deviation"))
    return findings


def _program_of(record: Record, source: str, log: ParsedLog, trainer: str,
                smoke: dict | None) -> tuple[ProgramIdentity, list[Finding]]:
    """Which program trained and what that means: the native trainer, a smoke cut, or the record's program."""
    if trainer == "native":
        return _native_program(record, source, log, smoke)
    if smoke is not None:
        return check_smoke_program(record, source, log.program, smoke, trainer)
    return _record_program(record, source, log, trainer)


def _native_program(record: Record, source: str, log: ParsedLog,
                    smoke: dict | None) -> tuple[ProgramIdentity, list[Finding]]:
    program = dataclasses.replace(identify(None, frozenset(), ""), status="native", detail="the native "
                                  "trainer (train/), an independent implementation of the record's algorithm")
    findings = []
    if record.program.trainer != "native":
        findings.append(Finding("trainer.native", "deviation"))
    if log.scheduled_steps is not None and log.scheduled_steps != record.published.steps and smoke is None:
        findings.append(Finding("schedule.differs", "deviation", {"scheduled": log.scheduled_steps,
                                                                  "record_steps": record.published.steps}))
    if smoke is not None:
        program, problems = check_smoke_program(record, source, log.program, smoke, "native")
        findings += problems
    return program, findings


def _record_program(record: Record, source: str, log: ParsedLog,
                    trainer: str) -> tuple[ProgramIdentity, list[Finding]]:
    """The record's own program, identified by its hash and fingerprint against the record's pins."""
    native_record = record.program.trainer == "native"
    findings = []
    if native_record and trainer == "record":
        findings.append(Finding("trainer.record", "deviation"))
    program = identify(log.program, record.accepted_program_sha256, record.program.fingerprint)
    if program.status == "different":
        findings.append(Finding("program.different", "problem", {
            "run": source, "sha256": program.sha256, "fingerprint": program.fingerprint,
            "pinned": record.program.fingerprint}))
    elif program.status == "unparsable":
        findings.append(Finding("program.unparsable", "problem", {"run": source, "error": program.detail}))
    elif program.status == "unpinned":
        findings.append(Finding("program.unpinned", "deviation"))
    elif program.status == "absent" and not native_record:
        # a log with its program text stripped proves nothing about the code that ran
        findings.append(Finding("program.absent", "deviation", {"runs": 1}))
    return program, findings


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
    return LossSummary(n=len(losses), mean=m, sd=sd, target=rules.target_val_loss, p_value=p,
                       p_value_max=rules.p_value_max,
                       reaches_p=p is not None and p < rules.p_value_max, runs_needed=needed, consistency=tuple(checks))


def _loss_findings(record: Record, loss: LossSummary, losses: list[float]) -> list[Finding]:
    """The loss claim, following the record's `loss_evidence` rule: failures where it is not met, else notes."""
    rules = record.rules
    head = _finite({"mean": loss.mean, "n": loss.n, "sd": loss.sd, "target": loss.target})
    out = []
    if rules.loss_evidence == "baseline":  # the reference the target was taken from: nothing to claim
        return [Finding("loss.baseline", "deviation", {**head, "record": record.name})]
    if loss.mean > loss.target:
        # From rules version 3 the target binds the runs only where they are the evidence: a re-run of quoted,
        # re-timed or inherited evidence above it is a deviation, not a failure (eras.py).
        binding = rules.version < 3 or rules.loss_evidence in ("own", "single-run", "one-run")
        out.append(Finding("loss.above_target", "failure" if binding else "deviation", head))
    own = rules.loss_evidence == "own"
    out.append(Finding("loss.t_test", "failure" if own and not loss.reaches_p else "note", {
        **head, "p_value": finite_or_none(loss.p_value), "p_max": loss.p_value_max, "reaches": loss.reaches_p,
        "runs_needed": loss.runs_needed, "evidence": rules.loss_evidence}))
    for c in loss.consistency:
        required = c.role in rules.consistency_required
        out.append(Finding("loss.consistency", "failure" if required and not c.consistent else "note", {
            "against": c.against, "role": c.role, "p_value": finite_or_none(c.p_value), "method": c.method,
            "consistent": c.consistent, "required": required, "requires": list(rules.consistency_required)}))
    if rules.version >= 3:
        out += _evidence_v3(record, losses)
    elif rules.version >= 2:
        out += _evidence_v2(record, loss, losses)
    if rules.loss_evidence == "parent" and not of_severity(out, "failure"):
        out.append(Finding("loss.systems_only", "note", {"record": record.name, "parent": record.parent or None}))
    return out


def _evidence_v2(record: Record, loss: LossSummary, losses: list[float]) -> list[Finding]:
    """Rules version 2's evidence kinds (pipeline/records/eras.py says what upstream states for each)."""
    rules, evidence = record.rules, record.rules.loss_evidence
    if evidence == "quoted":
        quoted = dict(record.published.quoted)
        p = quoted.get("p_value")
        failed = isinstance(p, (int, float)) and not p < rules.p_value_max
        return [Finding("loss.quoted", "failure" if failed else "deviation", {**quoted, "p_max": rules.p_value_max})]
    if evidence != "parent":
        return []  # own, single-run and retiming are judged by the t-test, target and consistency above
    # A systems-only record: its ML is its parent's, so the parent's runs and its own together must reach the
    # threshold, and losses that differ from the parent's say the change touched the numerics after all.
    parent = load_parent(record)
    parent_losses = list(parent.published.losses) if parent else []
    if len(parent_losses) < 2:
        return [Finding("loss.parent_unknown", "deviation", {"parent": record.parent or None})]
    pooled = p_value_below(list(losses) + parent_losses, rules.target_val_loss)
    out = []
    if pooled is not None and not pooled < rules.p_value_max:
        out.append(Finding("loss.pooled", "failure", {"parent": parent.name, "p_value": finite_or_none(pooled),
                                                      "p_max": rules.p_value_max}))
    against = next((c for c in loss.consistency if c.role == "parent"), None)
    if against is not None and not against.consistent:
        out.append(Finding("loss.parent_differs", "deviation", {"parent": parent.name,
                                                               "p_value": finite_or_none(against.p_value)}))
    return out


def _quoted_finding(record: Record) -> Finding:
    rules = record.rules
    quoted = {k: v for k, v in dict(record.published.quoted).items() if k != "losses"}
    p = quoted.get("p_value")
    failed = isinstance(p, (int, float)) and not p < rules.p_value_max
    return Finding("loss.quoted", "failure" if failed else "deviation", {**quoted, "p_max": rules.p_value_max})


def _evidence_v3(record: Record, losses: list[float]) -> list[Finding]:
    """Rules version 3: quoted statistics are the evidence; a re-timing is judged against the re-timed record's
    evidence; a systems-only record inherits its ancestors' (pipeline/verdict/ancestry.py), never pooled."""
    rules, evidence = record.rules, record.rules.loss_evidence
    if evidence == "quoted":
        out = [_quoted_finding(record)]
        stated = record.published.quoted.get("losses")
        if isinstance(stated, list) and len(stated) >= 2:
            c = consistency(losses, [float(x) for x in stated], record.name, "quoted", rules.consistency_alpha)
            if not c.consistent:
                out.append(Finding("loss.quoted_differs", "deviation", {"p_value": finite_or_none(c.p_value),
                                                                        "n": len(stated)}))
        return out
    if evidence not in ("retiming", "parent"):
        return []
    inherited = inherited_evidence(record)
    if inherited is None or len(inherited.losses) < 2:
        return [Finding("loss.parent_unknown", "deviation", {"parent": record.parent or None})]
    c = consistency(losses, list(inherited.losses), inherited.record, "evidence", rules.consistency_alpha)
    data = {"evidence_of": inherited.record, "source": inherited.source, "n": len(inherited.losses),
            "via": list(inherited.via), "p_value": finite_or_none(c.p_value), "method": c.method,
            "consistent": c.consistent, "quoted_p": inherited.p_value, "evidence": evidence}
    if c.consistent:
        return [Finding("loss.inherited", "note", data)]
    # a re-timing must be the same record; a systems-only change that moves the losses touched the numerics
    return [Finding("loss.inherited", "failure" if evidence == "retiming" else "deviation", data)]


def _time_finding(record: Record, time: TimeRatio, hardware_differs: list[Finding]) -> Finding:
    upper = time.ci_high if time.ci_high is not None else time.ratio
    comparable = not hardware_differs
    why_not = None
    if not comparable:
        fields = sorted({str(f.data.get("field")) for f in hardware_differs})
        why_not = ("another CPU model than the record's" if fields == ["cpu_model"]
                   else "the hardware differs from the record's")
    slower = comparable and upper > 1 + record.rules.time_tolerance
    return Finding("time.ratio", "failure" if slower else "note", _finite({
        "mean_s": time.mean_s, "record_mean_s": time.record_mean_s, "ratio": time.ratio, "ci_low": time.ci_low,
        "ci_high": time.ci_high, "confidence": time.confidence, "tolerance": record.rules.time_tolerance,
        "comparable": comparable, "why_not": why_not, "slower": slower}))


def _finite(data: dict) -> dict:
    """Statistics of absurd (finite) inputs can overflow; a finding holds None where a number is not finite."""
    return {k: finite_or_none(v) if isinstance(v, float) else v for k, v in data.items()}


def _merge_deviations(runs: tuple[RunAssessment, ...]) -> list[Finding]:
    """The runs' deviations once each (four runs on the same H200 deviate once); absent programs counted."""
    seen: dict[tuple, Finding] = {}
    absent = 0
    for run in runs:
        for f in of_severity(run.findings, "deviation"):
            if f.code == "program.absent":
                absent += 1
                continue
            seen.setdefault((f.code, repr(sorted(f.data.items()))), f)
    merged = sorted(seen.values(), key=Finding.sort_key)
    if absent:
        merged.append(Finding("program.absent", "deviation", {"runs": absent}))
    return merged


def judge_v1(record: Record, runs: tuple[RunAssessment, ...]) -> Verdict:
    """Rules version 1: every run valid; the loss claim by `loss_evidence`; time within `time_tolerance` on
    the record's hardware (elsewhere reported); deviations from the compared header fields."""
    findings: list[Finding] = [f for r in runs for f in of_severity(r.findings, "problem")]
    deviations = _merge_deviations(runs)
    good = [r for r in runs if r.valid]
    loss = time = None
    hardware_differs = [f for f in deviations if f.code == "hardware.differs"]
    time_comparable = bool(good) and not hardware_differs
    if good:
        loss = _loss_summary(record, [r.final_val_loss for r in good])
        claims = _loss_findings(record, loss, [r.final_val_loss for r in good])
        timed = [r.train_time_s for r in good if r.train_time_s is not None]
        if timed:
            time = time_ratio(timed, record.published.mean_time_s, record.rules.time_confidence)
            claims.append(_time_finding(record, time, hardware_differs))
        else:  # llm.c-style logs print no train time: nothing to compare
            claims.append(Finding("time.unlogged", "note", {"runs": len(good)}))
        findings += of_severity(claims, "failure") + of_severity(claims, "note")
        deviations += of_severity(claims, "deviation")  # evidence judged on weaker ground than the runs alone
    findings += deviations
    if of_severity(findings, "problem") or not good:
        outcome = VerdictOutcome.INVALID
    elif of_severity(findings, "failure"):
        outcome = VerdictOutcome.NOT_REPRODUCED
    elif deviations:
        outcome = VerdictOutcome.WITH_DEVIATIONS
    else:
        outcome = VerdictOutcome.REPRODUCED
    return Verdict(record=record.name, outcome=outcome, findings=tuple(findings), runs=runs, loss=loss, time=time,
                   time_comparable=time_comparable, rules_version=record.rules.version)


def is_smoke(run: RunAssessment) -> bool:
    return any(f.code == "smoke.learning" for f in run.findings)


def judge_smoke(record: Record, runs: tuple[RunAssessment, ...]) -> Verdict:
    """Smoke runs: every run valid, its declared cut verified, and learning; the record's claims are not judged."""
    findings = [f for r in runs for f in r.findings if f.severity in ("problem", "failure")]
    findings += [f for r in runs for f in of_severity(r.findings, "note") if f.code == "smoke.learning"]
    findings += _merge_deviations(runs)
    return Verdict(record=record.name, outcome=smoke_outcome(findings), findings=tuple(findings), runs=runs, loss=None,
                   time=None, time_comparable=False,
                   rules_version=record.rules.version)


# rules.version -> the judge that implements it; a record asking for another version is refused
# Version 2 adds the evidence kinds of the speedrun's eras (single-run, retiming, quoted) and judges a
# systems-only record on its parent's runs together with its own (pipeline/records/eras.py). Version 3 judges
# quoted statistics, re-timings and systems-only records on the evidence they stand on (_evidence_v3).
JUDGES = {1: judge_v1, 2: judge_v1, 3: judge_v1}


def verify_runs(record: Record, paths: list[Path]) -> Verdict:
    judge = JUDGES.get(record.rules.version)
    if judge is None:
        raise InputError(f"{record.path}: rules.version {record.rules.version} is not one this tool judges by "
                         f"(it knows {', '.join(map(str, sorted(JUDGES)))})",
                         "upgrade repro to a version that knows these rules, or judge with a record manifest "
                         f"whose rules.version is {max(JUDGES)}")
    if not paths:
        raise InputError("no runs given", "pass run directories or log files: repro verify runs/<record>/*")
    runs = tuple(assess_run(record, Path(p)) for p in paths)
    smoke = [r for r in runs if is_smoke(r)]
    if smoke and len(smoke) != len(runs):
        raise InputError(f"{len(smoke)} of the {len(runs)} runs are smoke runs (a cut schedule)",
                         "judge smoke runs and full runs separately")
    return judge_smoke(record, runs) if smoke else judge(record, runs)
