"""The registry as a static site: a pure function from (records, check rows, plan rows) to files.

    files = build_site(records, checks, plans)      # {"index.html": ..., "records/<name>.html": ...,
    write_site(files, Path("site"))                 #  "assets/plotly.min.js": ...}

index.html lists every record in upstream's order (date, then the table's row) with its claimed time,
its verdict on its own logs and the rule used (`repro records check`), the environment it would run in
(exact, or the deviation) and whether it can be run (`--plan`), above a time-against-date chart with the
re-timings marked, both tracks. The logs' mean time is shown only where the logs measured it (blank with the
reason otherwise). Each record has a page (pipeline/site/record_page.py). Links are relative and the chart
library is one file beside the pages, so the site works from file:// and from any static host.
"""

from __future__ import annotations

from pathlib import Path

from pipeline.atomic import write_text
from pipeline.errors import InputError
from pipeline.pages.page import ChartLibrary, badge, data_block, esc, fmt, name_html, page, plotly_library, table, words
from pipeline.pages.record_page import environment_cell, plan_cell, record_page
from pipeline.pages.site_inputs import CheckRow, PlanRow, SiteRecord
from pipeline.records.eras import UPSTREAM_WORDS
from pipeline.records.model import upstream_order as record_order

LIBRARY = "assets/plotly.min.js"


def upstream_order(records: list[SiteRecord]) -> list[SiteRecord]:
    return sorted(records, key=lambda s: record_order(s.record))


def page_of(name: str) -> str:
    return f"records/{name}.html"  # record names are one safe path component (records/model.py NAME_RE)


TRACK_NAMES = {"track_1": "track 1 (GPT-2 small, 3.28)", "track_2": "track 2 (GPT-2 medium, 2.92)"}


def _claimed_trace(points: list[tuple[SiteRecord, float]], checks: dict[str, CheckRow], name: str) -> dict:
    return {"type": "scatter", "mode": "lines+markers", "name": name, "line": {"shape": "hv"},
            "x": [s.record.date for s, _ in points], "y": [t for _, t in points],
            "text": [f"{s.record.name}<br>verdict on its logs: "
                     f"{checks[s.record.name].verdict if s.record.name in checks else 'not checked'}"
                     for s, _ in points],
            "hovertemplate": "%{text}<br>%{x}: %{y:.1f} s<extra></extra>", "marker": {"size": 7}}


def _time_chart(records: list[SiteRecord], checks: dict[str, CheckRow]) -> dict:
    """Claimed time against date on a log scale, one line per track, hover for the record; re-timings marked."""
    data = []
    for prefix, label in TRACK_NAMES.items():
        track = [s for s in records if s.record.track.startswith(prefix)]
        points = [(s, (s.record.imported.claimed_time_s if s.record.imported else None)
                   or s.record.published.mean_time_s) for s in track]
        points = [(s, t) for s, t in points if t]
        if points:
            data.append(_claimed_trace(points, checks, f"{label}: claimed time"))
    retimed = [s for s in records if s.record.published.parent_retimed_s]
    if retimed:
        data.append({"type": "scatter", "mode": "markers", "name": "parent re-timed on the record's setup",
                     "x": [s.record.date for s in retimed], "y": [s.record.published.parent_retimed_s for s in retimed],
                     "text": [f"{s.record.parent or 'parent'} re-timed for {s.record.name}" for s in retimed],
                     "hovertemplate": "%{text}<br>%{y:.2f} s<extra></extra>",
                     "marker": {"symbol": "diamond-open", "size": 12, "color": "#d62728", "line": {"width": 2}}})
    return {"data": data, "layout": {
        "title": {"text": "record time against date, both tracks"}, "hovermode": "closest",
        "xaxis": {"title": {"text": "record date"}, "type": "date"},
        "yaxis": {"title": {"text": "time to the target loss (s, log scale)"}, "type": "log"},
        "legend": {"orientation": "h", "y": -0.2}, "margin": {"t": 50, "r": 20}}}


def measured_time_cell(check: CheckRow | None) -> str:
    """The logs' mean train time, only as measured from the logs; blank with the reason otherwise (a claimed
    time is never shown as measured)."""
    if check is None:
        return '<span class="note" title="its logs were not checked">not checked</span>'
    if check.time_s is None:
        why = "no log" if check.verdict == "no-logs" else "the logs print no train time"
        return f'<span class="note" title="{esc(why)}">{words(why)}</span>'
    return fmt(check.time_s, ".2f")


def _parent_cell(parent: str, names: set[str]) -> str:
    if not parent:
        return "—"
    return f'<a href="{esc(page_of(parent))}">{name_html(parent)}</a>' if parent in names else name_html(parent)


def _index(records: list[SiteRecord], checks: dict[str, CheckRow], plans: dict[str, PlanRow],
           unknown: list[str]) -> str:
    rows, names = [], {s.record.name for s in records}
    for s in records:
        r, check = s.record, checks.get(s.record.name)
        claimed = r.imported.claimed_time_s if r.imported else None
        number = (r.imported.row if r.imported else "—") + ("r" if r.rules.loss_evidence == "retiming" else "")
        track = r.track.split("_")[1] if r.track.startswith("track_") else r.track
        link = f'<a href="{esc(page_of(r.name))}">{name_html(r.name)}</a>'
        rule = check.rule if check and check.rule else ""
        stated = UPSTREAM_WORDS.get(rule, ("", ""))[0]
        position = f'<span class="nowrap">{esc(f"{track}·{number}")}</span>'
        rows.append([position, words(r.date), link, fmt(claimed, ".1f"),
                     measured_time_cell(check), badge(check.verdict if check else None),
                     f'<span title="{esc(stated)}">{words(rule or "—")}</span>', environment_cell(s),
                     plan_cell(plans.get(r.name), short=True), _parent_cell(r.parent, names)])
    body = ("<h1>NanoGPT speedrun records: what reproduces</h1>"
            f'<p class="note">{len(records)} records of this registry, in upstream\'s order. The verdict is each '
            "record's own published logs judged by its own rules (<code>repro records check</code>); the "
            "environment is the one it would run in today.</p>"
            + '<div class="chart" id="chart-history" data-figure="chart-history-data"></div>'
            + data_block("chart-history-data", _time_chart(records, checks))
            + table(["#", "date", "record", "claimed (s)", "logs' mean (s), measured", "verdict on its logs", "rule",
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
