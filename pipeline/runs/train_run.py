"""`repro train`, running: one planned run (pipeline/runs/train_plan.py), leaving a complete run directory.

    result = run_train(plan_train(request), terminal=None)

Running creates runs/<record>/<run-id>/, marks it running, writes run.yaml and preflight.json, starts the
runtime and — whatever happens: success, a non-zero exit, Ctrl-C, SIGTERM, an error in repro itself —
collects the log, derives metrics and ends with the status.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.atomic import write_bytes, write_json, write_jsonl
from pipeline.errors import CheckFailed
from pipeline.records.logparse import parse_log
from pipeline.records.program_files import split_program
from pipeline.regular_file import read_bounded
from pipeline.runs.failure import failure_reason
from pipeline.runs.launch import Outcome, Tee, interrupts_deferred, sigterm_as_interrupt
from pipeline.runs.rundir import RunDir
from pipeline.runs.train_plan import RECORD_DATA, WORK, TrainPlan

MAX_RUN_LOG_BYTES = 256 << 20  # what a bundle takes of one file; a program's log is kilobytes to megabytes


@dataclass(frozen=True, kw_only=True)
class TrainResult:
    run_dir: str
    run_id: str
    status: str
    exit_code: int | None
    last_step: int
    scheduled_steps: int | None
    final_val_loss: float | None
    train_time_ms: int | None
    log_problems: tuple[str, ...]
    failure: str | None = None  # a failed run: the last exception line of its output


def _prepare_workdir(plan: TrainPlan) -> None:
    """The record's program runs in a folder holding train_gpt.py and data/fineweb10B/, like upstream."""
    if plan.request.trainer != "record":
        return
    work = plan.run_dir / WORK
    (work / RECORD_DATA).parent.mkdir(parents=True)
    # upstream's checkout has logs/, and some programs (2024-12-17_SparsifyEmbeds) write logs/<id>.txt without
    # making it; _collect reads the log from there (both runtimes: docker mounts this folder)
    (work / "logs").mkdir()
    for file in split_program(plan.program.text):  # train_gpt.py and the files it reads beside it
        write_bytes(work / file.name, file.text)
    if plan.request.runtime == "host":
        (work / RECORD_DATA).symlink_to(plan.data_dir, target_is_directory=True)
    else:
        (work / RECORD_DATA).mkdir()  # the mount point of the read-only data, made here so it is ours


def _start(plan: TrainPlan, tee: Tee) -> Outcome:
    tee.note(f"run {plan.run_id}: {plan.request.trainer} trainer, {plan.request.runtime} runtime, "
             f"{plan.world_size} process(es): {' '.join(plan.launch.argv)}")
    if plan.container is None:
        from pipeline.runs.runtime_host import run_host

        Path(plan.compile_cache).mkdir(parents=True, exist_ok=True)
        return run_host(plan.launch, tee)
    from pipeline.runs.runtime_docker import docker_client, ensure_cache_volume, run_docker

    client = docker_client()
    reused = ensure_cache_volume(client, plan.compile_cache, {"io.repro.compile-cache": "1",
                                                              "io.repro.image": plan.image_id or "",
                                                              "io.repro.program-sha256": plan.program.sha256})
    tee.note(f"compile cache volume {plan.compile_cache}: {'reused' if reused else 'new'}")
    return run_docker(client, plan.container, tee)


def _write_preflight(plan: TrainPlan, run: RunDir) -> None:
    """The node's preflight report at run time; if it cannot be made, a file that says why."""
    try:
        from pipeline.preflight.collect import HostSources
        from pipeline.preflight.run import default_locations, preflight, write_report

        locations = default_locations(plan.record, plan.data_dir.parent, plan.run_dir.parent.parent)
        sources = HostSources(state_dir=plan.request.ws.state)
        write_report(preflight(plan.record, plan.request.runtime, sources=sources, locations=locations),
                     run.file("preflight.json"))
    except Exception as exc:  # a missing or broken preflight must not stop the run; it is recorded instead
        write_json(run.file("preflight.json"), {"schema_version": 1, "outcome": "unavailable",
                                                       "error": f"{type(exc).__name__}: {exc}"})


def _fp8_preflight(plan: TrainPlan, tee: Tee) -> None:
    """A record program that does FP8 matmuls asks the training Python for one of the same layout first
    (pipeline/preflight/fp8.py), so a torch/cuBLAS that cannot do them stops the run before its compile."""
    if plan.request.trainer == "record" and plan.host_environment is not None and plan.program.text:
        fp8_gate(plan.host_environment.probe.executable or "python3", plan.program.text, tee,
                 aligned_scales=plan.fp8_aligned_scales)


def fp8_gate(python: str, program: bytes, tee: Tee, aligned_scales: bool = False) -> None:
    """The FP8 check's answer on the run's output; a refusal raised as CheckFailed, naming the cause.
    `aligned_scales`: the run hands _scaled_mm its one-element scales aligned (pipeline/runs/fp8_scales.py)."""
    from pipeline.preflight.fp8 import check_fp8_matmul

    check = check_fp8_matmul(python, program, aligned_scales=aligned_scales)
    if check.reason != "the program does no FP8 matmul":
        tee.note(f"preflight {check.name}: {check.status}: {check.reason}")
    if check.status == "fail":
        raise CheckFailed(f"preflight {check.name}: {check.reason}", check.timing_impact)


def metrics_from_log(log_path: Path) -> list[dict]:
    """metrics.jsonl rows (the native trainer's "step" and "val" events) from a record-format log."""
    log = parse_log(log_path)
    rows = [{"event": "step", "step": p.step, "train_time_ms": p.train_time_ms, "step_avg_ms": p.step_avg_ms}
            for p in log.steps]
    rows += [{"event": "val", "step": v.step, "val_loss": v.val_loss, "train_time_ms": v.train_time_ms}
             for v in log.vals]
    return sorted(rows, key=lambda row: (row["step"], row["event"] == "val"))  # as logged: step s, then its val


def _remove_quietly(path: Path) -> bool:
    """Remove a file, link or empty folder; False when it stays (not empty, or not ours to delete)."""
    try:
        if path.is_symlink() or path.is_file():
            path.unlink()
        else:
            path.rmdir()
        return True
    except OSError:
        return not path.exists()


def _collect(plan: TrainPlan, run: RunDir, tee: Tee) -> None:
    """The record program's logs/<uuid>.txt becomes log.txt; metrics.jsonl is derived when no trainer wrote it."""
    work = plan.run_dir / WORK
    if plan.request.trainer == "record" and work.is_dir():
        logs = sorted((work / "logs").glob("*.txt"), key=lambda p: p.stat().st_mtime)
        if len(logs) > 1:
            tee.note(f"{len(logs)} logs in {work / 'logs'}; log.txt is the newest, {logs[-1].name}")
        if logs:
            write_bytes(run.file("log.txt"), read_bounded(logs[-1], MAX_RUN_LOG_BYTES, "program's log",
                                                          "see the program's output in the run's stdout.txt"))
        # only what this stage put there (and the collected logs): anything else the program wrote stays
        written = [work / file.name for file in split_program(plan.program.text)]
        for path in (*logs, *written, work / RECORD_DATA, (work / RECORD_DATA).parent, work / "logs",
                     work):
            _remove_quietly(path)
        if work.exists():
            tee.note(f"the program left more files in {work}; kept")
    metrics = run.file("metrics.jsonl")
    if run.file("log.txt").is_file() and (not metrics.is_file() or metrics.stat().st_size == 0):
        write_jsonl(metrics, metrics_from_log(run.file("log.txt")))


def run_train(plan: TrainPlan, terminal=None) -> TrainResult:
    run = RunDir.create(plan.run_dir)
    status, exit_code = "failed", None
    with Tee(run.file("stdout.txt"), terminal) as tee, sigterm_as_interrupt():
        try:
            run.write_meta(plan.meta())
            _write_preflight(plan, run)
            _prepare_workdir(plan)
            _fp8_preflight(plan, tee)
            outcome = _start(plan, tee)
            exit_code = outcome.exit_code
            status = "aborted" if outcome.aborted else "succeeded" if exit_code == 0 else "failed"
        except KeyboardInterrupt:
            status = "aborted"  # before the trainer started, or while repro was between steps
        except BaseException as exc:
            tee.note(f"repro stopped the run: {exc}")
            raise
        finally:
            with interrupts_deferred():
                try:
                    _collect(plan, run, tee)
                finally:
                    run.finish(status, exit_code, tee.startup_s)
            tee.note(f"run {plan.run_id} {status}" + (f" (exit code {exit_code})" if exit_code is not None else "")
                     + f": {plan.run_dir}")
    log = parse_log(run.file("log.txt"))
    return TrainResult(run_dir=str(plan.run_dir), run_id=plan.run_id, status=status, exit_code=exit_code,
                       last_step=log.last_step, scheduled_steps=log.scheduled_steps,
                       final_val_loss=log.final_val_loss, train_time_ms=log.train_time_ms, log_problems=log.problems,
                       failure=failure_reason(run.file("stdout.txt")) if status == "failed" else None)
