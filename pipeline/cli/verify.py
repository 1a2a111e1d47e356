"""`repro verify RUN_OR_LOG... [--record NAME] [--json]`: the verdict on runs against a record.

Without --record the record is the one the run directories' run.yaml name (they must agree); bare logs
carry no record name, so for them it is the default record.
"""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.errors import InputError
from pipeline.outcome import Outcome
from pipeline.registry import Registry
from pipeline.runs.rundir import RunMeta
from pipeline.verdict.judge import Verdict, verify_runs
from pipeline.verdict.outcomes import VerdictOutcome, passed
from pipeline.verdict.render import hardware_line

from .output import echo, emit_json, pass_registry, secho


def _inside(folder: Path) -> list[Path]:
    """What a folder that is no run (no log.txt, no run.yaml) stands for: the run folders in it (`runs/<record>/`)
    or one level down (`runs/`), else the logs in it (the record's published logs); none: an InputError."""
    from pipeline.records.logfacts import logs_in

    for pattern in ("*/run.yaml", "*/*/run.yaml"):
        found = sorted(p.parent for p in folder.glob(pattern))
        if found:
            return found
    logs, _ = logs_in(folder)
    if logs:
        return logs
    raise InputError(f"{folder} is not a run folder (no log.txt, no run.yaml) and holds no run folder or log",
                     "give run folders, log files (*.txt, *.log) or the folder holding them, or a work folder of "
                     "`repro reproduce`")


def runs_given(paths: list[Path]) -> list[Path]:
    """The run folders and logs to judge: a work folder of `repro reproduce` stands for its runs, a folder of run
    folders or of logs for them; a bundle is not a run (read as a log it was judged `invalid`)."""
    from pipeline.pages.write import is_bundle, runs_of_work_folder
    from pipeline.regular_file import kind_of, not_regular

    out: list[Path] = []
    for path in map(Path, paths):
        kind = kind_of(path)
        if kind not in ("regular file", "folder"):  # a FIFO would block the read, a device never end it
            raise not_regular(path, "log", kind or "missing path", "give run folders or log files")
        if is_bundle(path):
            raise InputError(f"{path} is a bundle, not a run folder or a log",
                             f"check it with `repro bundle verify {path}`: it recomputes the verdict from the logs "
                             "inside")
        if path.is_dir() and not (path / "log.txt").exists() and (path / "runs").is_dir():
            found = runs_of_work_folder(path)
            if not found:
                raise InputError(f"{path}: a work folder with no run folder (runs/<record>/<id>/run.yaml)",
                                 "give run folders or logs; `repro reproduce` makes the runs")
            out += found
        elif path.is_dir() and not (path / "log.txt").exists() and not (path / "run.yaml").exists():
            out += _inside(path)  # judged as one run, it was `invalid` for want of a log
        else:
            out.append(path)
    return out


def record_of(paths: list[Path]) -> str | None:
    """The record the run directories' run.yaml name; None when only bare logs were given."""
    names = {}
    for path in paths:
        meta = RunMeta.load_if_present(path) if path.is_dir() else None
        if meta is not None:
            names.setdefault(meta.record, path)
    if len(names) > 1:
        listed = ", ".join(f"{name} ({path})" for name, path in sorted(names.items()))
        raise InputError(f"the runs name different records in their run.yaml: {listed}",
                         "judge each record's runs separately, or pass --record NAME")
    return next(iter(names), None)


def print_verdict(v: Verdict) -> None:
    color = ("yellow" if v.outcome == VerdictOutcome.WITH_DEVIATIONS else "green") if passed(v.outcome) else "red"
    echo(f"record {v.record} (rules v{v.rules_version}): {len(v.runs)} run(s)")
    for r in v.runs:
        loss = f"{r.final_val_loss:.4f}" if r.final_val_loss is not None else "—"
        time = f"{r.train_time_s:.3f} s" if r.train_time_s is not None else "—"
        steps = f"{r.last_step}/{r.scheduled_steps or '?'}"
        echo(f"  {r.source}\n      steps {steps}  val_loss {loss}  time {time}  "
             f"program {r.program.status}  status {r.status}")
        for problem in r.problems:
            echo(f"      problem: {problem}")
    for line in sorted({hardware_line(r.hardware, r.software) for r in v.runs if r.hardware}):
        echo(f"  {line}")
    if v.loss is not None:
        sd = f"{v.loss.sd:.4f}" if v.loss.sd is not None else "—"
        p = f"{v.loss.p_value:.4f}" if v.loss.p_value is not None else "—"
        echo(f"  losses: mean {v.loss.mean:.4f}  sd {sd}  p {p} (target {v.loss.target}, "
             f"p < {v.loss.p_value_max})  runs needed {v.loss.runs_needed or '—'}")
    secho(f"verdict: {v.outcome}", fg=color, bold=True)
    for reason in v.reasons:
        echo(f"  - {reason}")


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--record", "record_name", default=None,
              help="Record to judge against [the one the runs' run.yaml name; for bare logs "
                   f"{Registry.DEFAULT_RECORD}].")
@click.option("--json", "as_json", is_flag=True, help="Print the verdict as JSON.")
@click.option("--submission", is_flag=True,
              help="RUNS are a new record's logs (files or folders), judged against --record as their parent; "
                   "prints the reviewer's markdown report (pipeline/verdict/submission.py).")
@click.option("--markdown", is_flag=True, help="With --submission: print markdown (the default for submissions).")
@pass_registry
def verify(registry, runs, record_name, as_json, submission, markdown):
    """Judge run directories or log files against a record.

    Exit code 0 for reproduced / reproduced-with-deviations / smoke-passed, 1 for not-reproduced /
    invalid / smoke-failed.
    """
    if submission or markdown:
        from pipeline.verdict.submission import judge_submission, render_markdown

        if not record_name:
            raise InputError("--submission needs --record PARENT", "name the record the submission improves on")
        report = judge_submission(registry.record(record_name), list(runs))
        emit_json(report.to_dict()) if as_json else echo(render_markdown(report))
        return Outcome.check(report.passed)
    runs = runs_given(list(runs))
    record = registry.record_or_default(record_name or record_of(runs))
    verdict = verify_runs(record, runs)
    if as_json:
        emit_json(verdict.to_dict())
    else:
        print_verdict(verdict)
    return Outcome.check(passed(verdict.outcome))
