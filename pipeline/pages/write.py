"""Which runs a `repro report --html` argument means, and writing the page.

    repro report --html bundles/x.tar.gz --out report/      # a bundle: verified, signature shown
    repro report --html work/demo-cpu-synth --out report/   # a work folder: its bundle if it has one, else its runs
    repro report --html runs/REC/ID1 runs/REC/ID2           # run folders (or bare logs), as `repro report` takes
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.atomic import write_text
from pipeline.errors import InputError
from pipeline.pages.page import plotly_library
from pipeline.pages.report import render_report, render_unverified
from pipeline.pages.report_input import ReportInput, from_bundle, from_runs
from pipeline.records.model import Record
from pipeline.regular_file import kind_of, read_text_bounded

if TYPE_CHECKING:
    from pipeline.bundle.verify import BundleCheck

HTML_NAME = "report.html"
STATE_FILE = "reproduce-state.json"  # pipeline/reproduce/flow.py's, read for the bundle it archived


def is_bundle(path: Path) -> bool:
    return path.is_file() and path.name.endswith((".tar.gz", ".tgz"))


def bundle_of_work_folder(folder: Path) -> Path | None:
    """The bundle `repro reproduce` last archived from this work folder, when it is still there."""
    state_file = folder / STATE_FILE
    if kind_of(state_file) is None:
        return None
    try:  # a FIFO, a device or a file over 1 MiB: InputError naming it, never a hang or a read without end
        state = json.loads(read_text_bounded(state_file, 1 << 20, "state file",
                                             "give a work folder of `repro reproduce`"))
        path = Path(state["stages"]["archive"]["path"])
    except (ValueError, KeyError, TypeError, RecursionError):
        return None
    return path if is_bundle(path) else None


def runs_of_work_folder(folder: Path) -> list[Path]:
    return sorted(p.parent for p in folder.glob("runs/*/*/run.yaml"))


def gather(paths: list[Path], *, records_dir: Path, record_name: str | None,
           published_dir_of: Callable[[Record], Path | None]) -> ReportInput | BundleCheck:
    """What the page of these paths shows. `record_name`: None for the one the runs' run.yaml name;
    `published_dir_of(record)`: where the record's published logs are, if anywhere."""
    from pipeline.bundle.archive import record_of_runs
    from pipeline.records.model import load_record

    paths = [Path(p) for p in paths]
    if len(paths) == 1 and (is_bundle(paths[0]) or bundle_of_work_folder(paths[0])):
        return from_bundle(paths[0] if is_bundle(paths[0]) else bundle_of_work_folder(paths[0]),
                           records_dir, published_dir_of)
    title = paths[0].name if len(paths) == 1 else f"{len(paths)} runs"
    if len(paths) == 1 and (paths[0] / "runs").is_dir():
        paths = runs_of_work_folder(paths[0])
        if not paths:
            raise InputError(f"{title}: no run folder (runs/<record>/<id>/run.yaml) in this work folder",
                             "give a bundle, a work folder of `repro reproduce`, or run folders")
    if any(is_bundle(p) for p in paths):
        raise InputError("a bundle was given with other paths", "give one bundle alone, or run folders")
    record = load_record(record_name or record_of_runs([p for p in paths if p.is_dir()]), records_dir)
    return from_runs(record, paths, published_dir_of(record), title)


def write_html(report: ReportInput | BundleCheck, out_dir: Path) -> Path:
    """The page of a report, or of a bundle check that failed (what failed, nothing from inside it)."""
    out = Path(out_dir) / HTML_NAME
    if Path(out_dir).exists() and not Path(out_dir).is_dir():
        raise InputError(f"--out {out_dir} is a file, not a folder (the page is written as {HTML_NAME} inside it)",
                         "give a folder for --out (it is created when missing)")
    out.parent.mkdir(parents=True, exist_ok=True)
    html = render_report(report, plotly_library()) if isinstance(report, ReportInput) else \
        render_unverified(report)
    write_text(out, html)
    return out
