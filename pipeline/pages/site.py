"""The registry as a static site: a pure function from (records, check rows, plan rows) to files.

    files = build_site(records, checks, plans)      # {"index.html": ..., "records/<name>.html": ...,
    write_site(files, Path("site"))                 #  "assets/plotly.min.js": ...}

index.html lists every record in upstream's order (date, then the table's row) with its claimed time,
its verdict on its own logs and the rule used (`repro records check`), the environment it would run in
(exact, or the deviation) and whether it can be run (`--plan`), above a time-against-date chart with the
re-timings marked. Each record has a page (pipeline/site/record_page.py). Links are relative and the chart
library is one file beside the pages, so the site works from file:// and from any static host.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.atomic import write_text
from pipeline.errors import InputError
from pipeline.pages.page import ChartLibrary, badge, data_block, esc, fmt, page, plotly_library, table
from pipeline.pages.record_page import environment_cell, plan_cell, record_page
from pipeline.pages.site_inputs import CheckRow, PlanRow, SiteRecord
from pipeline.records.model import upstream_order as record_order

LIBRARY = "assets/plotly.min.js"


def upstream_order(records: list[SiteRecord]) -> list[SiteRecord]:
    return sorted(records, key=lambda s: record_order(s.record))


def page_of(name: str) -> str:
    return f"records/{name}.html"  # record names are one safe path component (records/model.py NAME_RE)


def _time_chart(records: list[SiteRecord], checks: dict[str, CheckRow]) -> dict:
    """Claimed time against date on a log scale, hover for the record; re-timings as their own marks."""
    speedrun = [s for s in records if s.record.track.startswith("track_1")]
    points = [(s, (s.record.imported.claimed_time_s if s.record.imported else None) or s.record.published.mean_time_s)
              for s in speedrun]
    points = [(s, t) for s, t in points if t]
    claimed = {"type": "scatter", "mode": "lines+markers", "name": "record time (claimed)", "line": {"shape": "hv"},
               "x": [s.record.date for s, _ in points], "y": [t for _, t in points],
               "text": [f"{s.record.name}<br>verdict on its logs: "
                        f"{checks[s.record.name].verdict if s.record.name in checks else 'not checked'}"
                        for s, _ in points],
               "hovertemplate": "%{text}<br>%{x}: %{y:.1f} s<extra></extra>", "marker": {"size": 7}}
    retimed = [s for s in speedrun if s.record.published.parent_retimed_s]
    marks = {"type": "scatter", "mode": "markers", "name": "parent re-timed on the record's setup",
             "x": [s.record.date for s in retimed], "y": [s.record.published.parent_retimed_s for s in retimed],
             "text": [f"{s.record.parent or 'parent'} re-timed for {s.record.name}" for s in retimed],
             "hovertemplate": "%{text}<br>%{y:.2f} s<extra></extra>",
             "marker": {"symbol": "diamond-open", "size": 12, "color": "#d62728", "line": {"width": 2}}}
    return {"data": [claimed, marks] if retimed else [claimed], "layout": {
        "title": {"text": "record time against date (track 1)"}, "hovermode": "closest",
        "xaxis": {"title": {"text": "record date"}, "type": "date"},
        "yaxis": {"title": {"text": "time to the target loss (s, log scale)"}, "type": "log"},
        "margin": {"t": 50, "r": 20}}}


def _parent_cell(parent: str, names: set[str]) -> str:
    if not parent:
        return "—"
    return f'<a href="{esc(page_of(parent))}">{esc(parent)}</a>' if parent in names else esc(parent)


def _index(records: list[SiteRecord], checks: dict[str, CheckRow], plans: dict[str, PlanRow],
           unknown: list[str]) -> str:
    rows, names = [], {s.record.name for s in records}
    for s in records:
        r, check = s.record, checks.get(s.record.name)
        claimed = r.imported.claimed_time_s if r.imported else None
        number = (r.imported.row if r.imported else "—") + ("r" if r.rules.loss_evidence == "retiming" else "")
        track = r.track.split("_")[1] if r.track.startswith("track_") else r.track
        link = f'<a href="{esc(page_of(r.name))}">{esc(r.name)}</a>'
        rows.append([esc(f"{track}·{number}"), esc(r.date), link, fmt(claimed, ".1f"),
                     fmt(r.published.mean_time_s, ".2f"), badge(check.verdict if check else None),
                     esc(check.rule if check and check.rule else "—"), environment_cell(s),
                     plan_cell(plans.get(r.name), short=True), _parent_cell(r.parent, names)])
    body = ("<h1>NanoGPT speedrun records: what reproduces</h1>"
            f'<p class="note">{len(records)} records of this registry, in upstream\'s order. The verdict is each '
            "record's own published logs judged by its own rules (<code>repro records check</code>); the "
            "environment is the one it would run in today.</p>"
            + '<div class="chart" id="chart-history" data-figure="chart-history-data"></div>'
            + data_block("chart-history-data", _time_chart(records, checks))
            + table(["#", "date", "record", "claimed (s)", "logs' mean (s)", "verdict on its logs", "rule",
                     "environment", "can be run", "parent"], rows))
    if unknown:
        body += ("<p class=\"note\">Rows for records not in this registry, left out: "
                 + ", ".join(esc(u) for u in unknown) + "</p>")
    return page("NanoGPT speedrun records", body, f'<script src="{LIBRARY}"></script>')


def build_site(records: list[SiteRecord], checks: list[CheckRow], plans: list[PlanRow],
               library: ChartLibrary | None = None) -> dict[str, str]:
    """Every file of the site, by its path relative to the site's folder."""
    library = library or plotly_library()
    ordered = upstream_order(records)
    by_check, by_plan = {c.name: c for c in checks}, {p.name: p for p in plans}
    known = {s.record.name for s in ordered}
    unknown = sorted({c.name for c in checks} - known) + sorted({p.name for p in plans} - known)
    files = {"index.html": _index(ordered, by_check, by_plan, unknown), LIBRARY: library.script}
    for s in ordered:
        parent_known = s.record.parent in known
        files[page_of(s.record.name)] = record_page(s, by_check.get(s.record.name), by_plan.get(s.record.name),
                                                    parent_known, "../" + LIBRARY)
    return files


def _no_link_below(out_dir: Path, rel: Path) -> None:
    """A link at any level below --out (records/ -> /elsewhere) would carry the write outside the site."""
    at = out_dir
    for part in rel.parts:
        at = at / part
        if at.is_symlink():
            raise InputError(f"{at} is a symbolic link inside --out {out_dir}: the site is not written through it",
                             "remove the link, or give --out a new or empty folder")


def write_site(files: dict[str, str], out_dir: Path) -> list[Path]:
    """Each file written whole (atomic), only under `out_dir`: never through a symbolic link inside it."""
    out_dir = Path(out_dir)
    written = []
    for rel, text in sorted(files.items()):
        path = out_dir / rel
        if ".." in Path(rel).parts or Path(rel).is_absolute():
            raise ValueError(f"site file {rel!r} is outside the site")
        _no_link_below(out_dir, Path(rel))
        path.parent.mkdir(parents=True, exist_ok=True)
        written.append(write_text(path, text))
    return written
