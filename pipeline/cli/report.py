"""`repro report RUN_DIR... [--record NAME] [--out DIR]`: report.md and PNG plots for runs.

`repro report --html BUNDLE|WORK_FOLDER|RUN_DIR...`: one self-contained report.html instead."""

from __future__ import annotations

from pathlib import Path

import click

from pipeline.bundle.archive import record_of_runs
from pipeline.errors import CheckFailed, InputError
from pipeline.records.published import published_logs_dir
from pipeline.report.render import REPORT_FILES, report_runs

from .output import echo, emit_json, pass_registry


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--record", "record_name", default=None, help="Record to judge against [the one in the runs' run.yaml].")
@click.option("--out", "out_dir", default=Path("report"), show_default=True, type=click.Path(path_type=Path),
              help="Folder for report.md and plots/.")
@click.option("--record-logs", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="Folder with the record's published logs (offline) [default: the cache filled by "
                   "`repro records fetch-logs`].")
@click.option("--html", "as_html", is_flag=True,
              help="Write one self-contained, interactive report.html (works offline) for a bundle (.tar.gz), a "
                   "work folder of `repro reproduce`, or run folders.")
@click.option("--json", "as_json", is_flag=True, help="Print what was written as JSON.")
@pass_registry
def report(registry, runs, record_name, out_dir, record_logs, as_html, as_json):
    """Write a markdown summary (losses, mean, sd, p-value, times) and plots against the record's logs."""
    if as_html:
        _html(registry.workspace, list(runs), record_name, record_logs, out_dir, as_json)
        return
    from pipeline.pages.write import is_bundle

    from .verify import runs_given

    if any(is_bundle(p) for p in runs):
        raise InputError("a bundle holds its report.md already; this command writes one for run folders",
                         "for a bundle, pass --html (or read its report with `repro bundle show`)")
    runs = runs_given(list(runs))  # a work folder of `repro reproduce` stands for its runs
    record = registry.record(record_name or record_of_runs([p for p in runs if p.is_dir()]))
    published_dir = published_logs_dir(record, registry.workspace.cache, record_logs)
    verdict, published_source = report_runs(record, list(runs), out_dir, published_dir=published_dir)
    if as_json:
        emit_json({"outcome": verdict.outcome, "out_dir": str(out_dir), "files": list(REPORT_FILES),
                   "published_source": published_source})
        return
    echo(f"verdict {verdict.outcome}; record curves from {published_source}")
    for rel in REPORT_FILES:
        echo(f"  wrote {Path(out_dir) / rel}")


def _html(ws, paths, record_name, record_logs, out_dir, as_json):
    from pipeline.pages.report_input import ReportInput
    from pipeline.pages.write import gather, write_html

    report_input = gather(paths, records_dir=ws.records_dir, record_name=record_name,
                          published_dir_of=lambda record: published_logs_dir(record, ws.cache, record_logs))
    path = write_html(report_input, out_dir)
    if not isinstance(report_input, ReportInput):  # a failed bundle check: the page and the exit code say so
        problems = [str(p) for p in report_input.problems]
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise CheckFailed(f"{Path(report_input.path).name}: {report_input.proven}; the bundle does NOT verify, so "
                          f"its page shows no verdict, run or time ({path} says what failed): "
                          + "; ".join(problems[:5]) + more,
                          "see every problem with `repro bundle verify`; ask the bundle's author for an intact copy")
    if as_json:
        emit_json({"outcome": report_input.verdict.outcome, "html": str(path),
                   "integrity": report_input.proven, "published_source": report_input.published_source})
        return
    echo(f"verdict {report_input.verdict.outcome}; {report_input.proven}")
    echo(f"  wrote {path}")
