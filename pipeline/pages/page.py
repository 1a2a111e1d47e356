"""The pieces every HTML page of the tool is made of: escaping, tables, the stylesheet, the chart library.

Pages are plain strings built from escaped parts: every value that came from a log, a manifest or a bundle
goes through `esc`, and chart data goes into the page as JSON inside a `<script type="application/json">`
block whose `<` are escaped, so no value can close the block or start markup.

The charts use Plotly (plotly.js, MIT), read from the `plotly` Python package's own copy of plotly.min.js,
so the file is pinned by sha256 in requirements.lock like every other dependency and no page ever reaches
a CDN: a report embeds the script once; a site writes it once and its pages load it by relative path.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass
from importlib import resources

from pipeline.errors import MissingDependency
from pipeline.hashing import sha256_bytes
from pipeline.plain_text import without_controls
from pipeline.verdict.outcomes import VerdictOutcome

CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#1b1f24;background:#fafafa}
main{max-width:1264px;margin:0 auto;padding:18px 8px 60px}
h1{font-size:1.6em;margin:.3em 0}h2{font-size:1.2em;margin:1.6em 0 .5em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.4em 0;background:#fff;font-size:.88em}
th,td{border:1px solid #d8dbe0;padding:3px 5px;text-align:left;vertical-align:top;overflow-wrap:normal}
th{background:#f0f2f5}td.num{text-align:right;font-variant-numeric:tabular-nums}
code,.mono{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:.88em}
td code.hash{overflow-wrap:anywhere}td .badge{white-space:normal}.nowrap{white-space:nowrap}
.badge{display:inline-block;white-space:nowrap;padding:2px 10px;border-radius:12px;font-weight:600;color:#fff}
.ok{background:#2e7d32}.warn{background:#b26a00}.bad{background:#c62828}.none{background:#757575}
tr.deviation td,td.deviation{background:#fff3cd}tr.problem td{background:#fde0e0}
.chart{height:440px;background:#fff;border:1px solid #d8dbe0;margin:.5em 0}
.note{color:#555;font-size:.92em}nav a{margin-right:1em}
blockquote.upstream{margin:.2em 0;padding:2px 10px;border-left:3px solid #8a94a6;font-style:italic}
"""

BADGE = {VerdictOutcome.REPRODUCED: "ok", VerdictOutcome.SMOKE_PASSED: "ok", VerdictOutcome.WITH_DEVIATIONS: "warn",
         VerdictOutcome.NOT_REPRODUCED: "bad", VerdictOutcome.INVALID: "bad", VerdictOutcome.SMOKE_FAILED: "bad"}


def esc(value) -> str:
    """A value as page text: escaped, and without control or format characters (a U+202E reverses what
    follows it on the page)."""
    return html.escape(without_controls("—" if value is None else str(value)), quote=True)


def _clean(data):
    """Chart data with every string's control and format characters removed (Plotly draws them as text)."""
    if isinstance(data, str):
        return without_controls(data)
    if isinstance(data, dict):
        return {_clean(k): _clean(v) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [_clean(v) for v in data]
    return data


def name_html(name: str) -> str:
    """A record's name, escaped, with a break opportunity after each `_` (and a `-` before a word) and between the
    words of a CamelCase part (`Mixed<wbr>Precision`): a long name wraps between its words, never inside one nor
    inside its date."""
    return re.sub(r"(_|-(?=[A-Za-z])|[a-z](?=[A-Z]))", r"\1<wbr>", esc(name))


def words(text) -> str:
    """Escaped text that wraps only at its spaces: a browser also breaks after a hyphen, inside a date
    (2025-09-23), a version (pypi-torch-2.8) or a verdict; each hyphenated word is kept on one line."""
    return re.sub(r"\S*-\S*", lambda m: f'<span class="nowrap">{m.group(0)}</span>', esc(text))


def badge(outcome: str | None) -> str:
    return f'<span class="badge {BADGE.get(outcome or "", "none")}">{words(outcome or "not checked")}</span>'


def table(header: list[str], rows: list[list[str]], row_classes: list[str] | None = None) -> str:
    """`rows` hold markup already escaped by the caller (cells may carry links or badges)."""
    head = "".join(f"<th>{esc(h)}</th>" for h in header)
    body = []
    for i, row in enumerate(rows):
        cls = row_classes[i] if row_classes and row_classes[i] else ""
        opening = f'<tr class="{cls}">' if cls else "<tr>"
        body.append(opening + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def fmt(value, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def data_block(element_id: str, data) -> str:
    """Chart data as inert JSON: `<` escaped so nothing inside can end the block."""
    text = json.dumps(_clean(data), sort_keys=True, allow_nan=False).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


# Draws every `.chart` element from its JSON block (data-figure names it): traces and layout are plain data.
DRAW_CHARTS = """
document.querySelectorAll('.chart').forEach(function (el) {
  var fig = JSON.parse(document.getElementById(el.dataset.figure).textContent);
  Plotly.newPlot(el, fig.data, fig.layout, {displaylogo: false, responsive: true});
});
"""


@dataclass(frozen=True)
class ChartLibrary:
    name: str
    version: str
    script: str  # plotly.min.js's text
    sha256: str


def plotly_library() -> ChartLibrary:
    """plotly.min.js from the installed `plotly` package (requirements.lock pins its wheel by sha256)."""
    try:
        import plotly

        data = resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    except (ImportError, FileNotFoundError) as exc:
        raise MissingDependency(f"the chart library plotly.min.js cannot be read ({exc})",
                                "install the locked dependencies: `make setup` (or pip install "
                                "--require-hashes -r requirements.lock)") from None
    return ChartLibrary("plotly.js", plotly.__version__, data.decode("utf-8"), sha256_bytes(data))


def page(title: str, body: str, head_script: str) -> str:
    """A whole page; `head_script` is the library's `<script>` (inline in a report, by path in a site)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{esc(title)}</title><style>{CSS}</style>{head_script}</head>"
            f"<body><main>{body}</main><script>{DRAW_CHARTS}</script></body></html>\n")


def inline_script(library: ChartLibrary) -> str:
    # the library's own text never holds "</script" (checked), so it can sit inline
    if "</script" in library.script.lower():
        raise MissingDependency(f"{library.name} {library.version} cannot be inlined", "use another plotly version")
    return f"<script>/* {library.name} {library.version} sha256 {library.sha256} */\n{library.script}</script>"
