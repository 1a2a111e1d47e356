"""The report's charts as Plotly figures (plain data: traces and layout), one function per chart.

Our runs are coloured and each its own legend entry (click to hide, double-click to isolate); the
record's published runs are one grey legend group, so one click toggles them all.
"""

from __future__ import annotations

from pipeline.pages.phases import phase_times
from pipeline.records.model import Record
from pipeline.report.render import OUR_COLORS, LabelledLog

GREY = "#9e9e9e"
DASHES = ("solid", "dash", "dot", "dashdot")


def _layout(title: str, x: str, y: str) -> dict:
    return {"title": {"text": title}, "xaxis": {"title": {"text": x}}, "yaxis": {"title": {"text": y}},
            "hovermode": "closest", "margin": {"t": 50, "r": 20}, "legend": {"orientation": "v"}}


def _line(item: LabelledLog, i: int | None, x_of, hover: str) -> dict:
    """One run's validation curve; i None: a published run (grey, grouped)."""
    xs = [x_of(v) for v in item.log.vals]
    trace = {"type": "scatter", "mode": "lines+markers", "name": item.label, "x": xs,
             "y": [v.val_loss for v in item.log.vals], "hovertemplate": hover + "<extra>" + item.label + "</extra>"}
    if i is None:
        trace.update(line={"color": GREY, "width": 1.2}, marker={"size": 3}, legendgroup="published",
                     legendgrouptitle={"text": "record (published)"})
    else:
        trace.update(line={"color": OUR_COLORS[i % len(OUR_COLORS)], "width": 2, "dash": DASHES[i % len(DASHES)]},
                     marker={"size": 5})
    return trace


def smoke(record: Record, ours: list[LabelledLog]) -> bool:
    """A cut schedule: the record's full-length curves would squeeze ours into the first pixels."""
    return bool(ours) and all(o.log.scheduled_steps and o.log.scheduled_steps < record.published.steps
                              for o in ours)


def val_loss(record: Record, ours: list[LabelledLog], published: list[LabelledLog], by: str) -> dict:
    """Validation loss against `by`: "step" or "time" (seconds of training, the log's train_time)."""
    if by == "step":
        def x_of(v):
            return v.step
        hover, axis = "step %{x}<br>val loss %{y:.4f}", "step"
    else:
        def x_of(v):
            return round(v.train_time_ms / 1000, 3)
        hover, axis = "%{x:.1f} s<br>val loss %{y:.4f}", "training time (s)"
    others = [] if smoke(record, ours) else published
    data = [_line(p, None, x_of, hover) for p in others] + [_line(o, i, x_of, hover) for i, o in enumerate(ours)]
    if not others and record.published.losses and not smoke(record, ours):
        at = record.published.steps if by == "step" else record.published.mean_time_s
        data.append({"type": "scatter", "mode": "markers", "name": "record's published final losses",
                     "x": [at] * len(record.published.losses), "y": list(record.published.losses),
                     "marker": {"symbol": "line-ew-open", "size": 18, "color": "#555"}})
    target = record.rules.target_val_loss
    layout = _layout(f"validation loss against {axis}", axis, "validation loss")
    layout["shapes"] = [{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": target, "y1": target,
                         "line": {"dash": "dash", "color": "black", "width": 1}}]
    layout["annotations"] = [{"xref": "paper", "x": 1, "y": target, "text": f"target {target}", "showarrow": False,
                              "xanchor": "right", "yanchor": "bottom"}]
    return {"data": data, "layout": layout}


def phase_bars(ours: list[LabelledLog], published: list[LabelledLog]) -> dict:
    """Mean ms per step in each third of the schedule (the long window's phases), a bar per run."""
    data = []
    for i, item in enumerate(list(ours) + list(published)):
        phases = phase_times(item.log.steps, item.log.scheduled_steps)
        if not phases:
            continue
        mine = i < len(ours)
        data.append({"type": "bar", "name": item.label,
                     "x": [f"phase {p.phase}" for p in phases],
                     "y": [round(p.ms_per_step, 3) if p.ms_per_step is not None else None for p in phases],
                     "marker": {"color": OUR_COLORS[i % len(OUR_COLORS)] if mine else GREY},
                     "hovertemplate": "%{y:.2f} ms/step<extra>" + item.label + "</extra>",
                     **({} if mine else {"legendgroup": "published", "legendgrouptitle": {"text": "record"}})})
    layout = _layout("step time per window phase (mean ms per step; each phase's first step left out)",
                     "phase of the schedule (the long attention window grows at each)", "ms per step")
    layout["barmode"] = "group"
    return {"data": data, "layout": layout}
