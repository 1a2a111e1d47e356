"""The run report: a markdown summary in the speedrun's own terms and two PNG plots.

    repro report runs/2025-09-23_MuonCustomSizing/* --record 2025-09-23_MuonCustomSizing --out report/

Writes `report.md` (verdict, each run's loss and time, mean, sd, one-sided p-value, runs needed,
time against the record's) and `plots/val_loss.png` (validation loss against step, our runs over
the record's published logs, with a zoom on the end of training where the target is decided) and
`plots/step_time.png` (average step time against step). Nothing in the output depends on when it
was made, so the same runs always give the same bytes (the bundle relies on that).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from statistics import mean, stdev

from pipeline.records.logparse import ParsedLog, parse_log, parse_text
from pipeline.records.model import Record
from pipeline.regular_file import kind_of
from pipeline.stats import p_value_below
from pipeline.verdict.judge import Verdict

PLOTS = ("plots/val_loss.png", "plots/step_time.png")
REPORT_FILES = ("report.md", *PLOTS)  # what write_report writes, relative to its folder
OUR_COLORS = ("#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


@dataclass(frozen=True)
class LabelledLog:
    label: str
    log: ParsedLog


def load_published(record: Record, folder: Path | None) -> tuple[list[LabelledLog], str]:
    """The record's published logs from `folder` (pipeline/records/published.py finds it: the cache filled by
    `repro records fetch-logs`, or --record-logs DIR); None: the manifest's final losses only."""
    if folder is None:
        return [], "the record manifest's published final losses (no published logs on this machine)"
    logs = [LabelledLog(_label(p), parse_log(p)) for p in sorted(folder.glob("*.txt"))]
    return logs, f"the record's published logs ({len(logs)} files)"


def _label(path: Path) -> str:
    """A published log's legend name: upstream's UUID names by their first 8 characters; a short name (the demo's
    <time>-<id>, which share their first 8) whole."""
    stem = path.name.split(".")[0]
    return stem if len(stem) <= 21 else stem[:8]


def _fmt(value, spec: str, missing: str = "—") -> str:
    return missing if value is None else format(value, spec)


def _markdown(record: Record, verdict: Verdict, ours: list[LabelledLog], published_source: str,
              extra: dict[str, str]) -> str:
    rules = record.rules
    lines = [f"# {record.name}: reproduction report", "",
             f"{record.title}. Target: validation loss ≤ {rules.target_val_loss} "
             f"(one-sided t-test p < {rules.p_value_max}; evidence: {rules.loss_evidence}).", "",
             f"## Verdict: **{verdict.outcome}**", ""]
    lines += [f"- {reason}" for reason in verdict.reasons] + [""]
    lines += ["## Runs", "",
              "| run | status | trainer | steps | final val loss | train time (s) | step avg (ms) | peak MiB |",
              "|---|---|---|---|---:|---:|---:|---:|"]
    for item, run in zip(ours, verdict.runs):
        step_avg = item.log.steps[-1].step_avg_ms if item.log.steps else None
        lines.append(f"| {_cell(item.label)} | {run.status} | {run.trainer} | "
                     f"{run.last_step}/{run.scheduled_steps or '?'} | "
                     f"{_fmt(run.final_val_loss, '.4f')} | {_fmt(run.train_time_s, '.3f')} | "
                     f"{_fmt(step_avg, '.2f')} | {_fmt(run.peak_allocated_mib, 'd')} |")
    lines += [""]
    problems = [(item.label, run) for item, run in zip(ours, verdict.runs) if run.problems]
    for label, run in problems:
        lines.append(f"- {_cell(label)}: " + "; ".join(run.problems))
    if problems:
        lines.append("")
    if verdict.outcome.startswith("smoke"):
        return "\n".join(lines + _smoke_section(ours, verdict, extra))
    pub = record.published
    pub_sd = stdev(pub.losses) if len(pub.losses) > 1 else None
    pub_p = p_value_below(list(pub.losses), rules.target_val_loss)
    loss, time = verdict.loss, verdict.time
    lines += ["## Statistics", "", f"| | these runs | the record ({len(pub.losses)} published runs) |",
              "|---|---:|---:|",
              f"| valid runs | {loss.n if loss else 0} | {len(pub.losses)} |",
              f"| mean val loss | {_fmt(loss.mean if loss else None, '.4f')} | "
              f"{_fmt(mean(pub.losses) if pub.losses else None, '.4f')} |",
              f"| sd | {_fmt(loss.sd if loss else None, '.4f')} | {_fmt(pub_sd, '.4f')} |",
              f"| p-value vs {rules.target_val_loss} | {_fmt(loss.p_value if loss else None, '.4g')} | "
              f"{_fmt(pub_p, '.4g')} |",
              f"| runs needed for p < {rules.p_value_max} | {_fmt(loss.runs_needed if loss else None, 'd')} | |",
              f"| mean train time (s) | {_fmt(time.mean_s if time else None, '.3f')} | {pub.mean_time_s:.3f} |"]
    if time is not None:
        ci = (f" ({time.confidence:.0%} interval {time.ci_low:.4f}–{time.ci_high:.4f})"
              if time.ci_low is not None else "")
        note = "" if verdict.time_comparable else "; not comparable: other hardware"
        lines.append(f"| time / record's | {time.ratio:.4f}{ci}{note} | 1 |")
    if loss is not None:
        for c in loss.consistency:
            lines.append(f"| consistent with the {c.role} ({c.against}) | "
                         f"{'yes' if c.consistent else 'no'}, p = {_fmt(c.p_value, '.4g')} ({c.method}) | |")
    lines += ["", "## Plots", "", f"Our runs in colour; the record's curves in grey, from {published_source}.", "",
              "![validation loss against step](plots/val_loss.png)", "",
              "![average step time against step](plots/step_time.png)", ""]
    if verdict.deviations:
        lines += ["## Deviations from the record", ""] + [f"- {d}" for d in verdict.deviations] + [""]
    if extra:
        lines += ["## Environment", ""] + [f"- {k}: {v}" for k, v in extra.items()] + [""]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """A run's name (any folder's) in a markdown table: a '|' would cut the row, a tag would be rendered."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def _smoke_section(ours: list[LabelledLog], verdict: Verdict, extra: dict[str, str]) -> list[str]:
    """A smoke run checks that the record's program runs and learns here; the record's statistics do not apply."""
    lines = ["## Smoke", "", "The step count was cut (a declared patch), so the record's loss and time claims are not "
             "judged: each run must complete, carry the declared program, and learn.", "",
             "| run | first val loss | final val loss | steps |", "|---|---:|---:|---:|"]
    for item in ours:
        first = item.log.vals[0].val_loss if item.log.vals else None
        last = item.log.vals[-1].val_loss if item.log.vals else None
        lines.append(f"| {_cell(item.label)} | {_fmt(first, '.4f')} | {_fmt(last, '.4f')} | {item.log.last_step} |")
    lines += ["", "## Plots", "", "![validation loss against step](plots/val_loss.png)", "",
              "![average step time against step](plots/step_time.png)", ""]
    if verdict.deviations:
        lines += ["## Deviations from the record", ""] + [f"- {d}" for d in verdict.deviations] + [""]
    if extra:
        lines += ["## Environment", ""] + [f"- {k}: {v}" for k, v in extra.items()] + [""]
    return lines


# Runs drawn over each other stay visible: each its own colour, line style and marker.
LINE_STYLES = ("-", "--", ":", "-.")
MARKERS = ("o", "s", "^", "D", "v")


def _plot_val_loss(record: Record, ours: list[LabelledLog], published: list[LabelledLog], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    target = record.rules.target_val_loss
    fig, (full, tail) = plt.subplots(1, 2, figsize=(12, 4.6), gridspec_kw={"width_ratios": [3, 2]})
    smoke = bool(ours) and all(o.log.scheduled_steps and o.log.scheduled_steps < record.published.steps for o in ours)
    if smoke:  # a cut schedule: the record's full-length curves would squeeze ours into the first pixels
        published = []
    all_steps = [v.step for o in ours + published for v in o.log.vals] + ([] if smoke else [record.published.steps])
    last = max(all_steps)
    tail_from = int(last * 0.7)
    for i, item in enumerate(published):
        xs, ys = [v.step for v in item.log.vals], [v.val_loss for v in item.log.vals]
        for ax in (full, tail):
            ax.plot(xs, ys, color="0.6", lw=1.2, label="record (published)" if i == 0 else None, zorder=1)
    if not published and record.published.losses and not smoke:
        for ax in (full, tail):
            ax.scatter([record.published.steps] * len(record.published.losses), record.published.losses,
                       marker="_", s=300, color="0.4", label="record's published final losses", zorder=3)
    for i, item in enumerate(ours):
        xs, ys = [v.step for v in item.log.vals], [v.val_loss for v in item.log.vals]
        color = OUR_COLORS[i % len(OUR_COLORS)]
        for ax in (full, tail):
            ax.plot(xs, ys, color=color, lw=1.6, ls=LINE_STYLES[i % len(LINE_STYLES)],
                    marker=MARKERS[i % len(MARKERS)], ms=4, alpha=0.85, label=item.label, zorder=2)
    tail_losses = [v.val_loss for o in ours + published for v in o.log.vals if v.step >= tail_from]
    tail_losses += ([] if smoke else list(record.published.losses)) + [target]
    for ax in (full, tail):
        ax.axhline(target, color="black", ls="--", lw=1, label=f"target {target}")
        ax.set_xlabel("step")
        ax.grid(alpha=0.3)
    full.set_ylabel("validation loss")
    full.set_title("validation loss")
    tail.set_title(f"end of training (steps ≥ {tail_from})")
    tail.set_xlim(tail_from, last * 1.01)
    low, high = min(tail_losses), max(tail_losses)
    pad = max(0.02, (high - low) * 0.08)
    tail.set_ylim(low - pad, high + pad)
    full.legend(fontsize=8, loc="upper right")
    fig.suptitle(f"{record.name}: validation loss")
    fig.tight_layout()
    _save(fig, path)


def _plot_step_time(record: Record, ours: list[LabelledLog], published: list[LabelledLog], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 4.6))
    # the first steps carry compilation and warm-up: their averages swamp the scale
    warm = max([2] + [max(p.step for p in o.log.steps) // 50 for o in ours + published if o.log.steps])
    for i, item in enumerate(published):
        pts = [p for p in item.log.steps if p.step > warm]
        ax.plot([p.step for p in pts], [p.step_avg_ms for p in pts], color="0.6", lw=1.2,
                label="record (published)" if i == 0 else None)
    # without logs: the record's own step average, or its mean time over its steps
    pub = record.published
    step_avg = pub.step_avg_ms or (pub.mean_time_s * 1000 / pub.steps if pub.steps else None)
    if not published and step_avg:
        ax.axhline(step_avg, color="0.4", lw=1.2, ls=":", label=f"record's published step average {step_avg:.1f} ms")
    for i, item in enumerate(ours):
        pts = [p for p in item.log.steps if p.step > warm]
        ax.plot([p.step for p in pts], [p.step_avg_ms for p in pts], color=OUR_COLORS[i % len(OUR_COLORS)],
                lw=1.6, ls=LINE_STYLES[i % len(LINE_STYLES)], alpha=0.85, label=item.label)
    ax.set_xlabel("step")
    ax.set_ylabel("average step time (ms)")
    ax.set_title(f"{record.name}: average step time (train_time / step, from step {warm + 1})")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _save(fig, path: Path) -> None:
    """The figure as PNG bytes, written whole under a temporary name and renamed into place (a crash leaves no
    half a plot, and a symlink planted at the plot's name is replaced, not followed)."""
    import io

    import matplotlib.pyplot as plt

    from pipeline.atomic import write_bytes

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    write_bytes(path, buf.getvalue())


def write_report(record: Record, verdict: Verdict, run_logs: list[LabelledLog], out_dir: Path,
                 environment: dict[str, str] | None = None, published_dir: Path | None = None) -> str:
    """Write report.md and the plots (REPORT_FILES) for runs already judged by `verify_runs` (same order);
    returns where the record's curves came from.

    `published_dir`: the folder of the record's published logs (records/published.published_logs_dir)."""
    from pipeline.atomic import write_text
    from pipeline.plain_text import plain

    out_dir = Path(out_dir)
    plots = out_dir / "plots"
    if plots.is_symlink():  # a link planted there would take the plots out of the folder: it is replaced
        plots.unlink()
    plots.mkdir(parents=True, exist_ok=True)
    published, source = load_published(record, published_dir)
    # the runs' names and their logs' headers are quoted: no escape sequence reaches whoever cats the file
    write_text(out_dir / "report.md", plain(_markdown(record, verdict, run_logs, source, environment or {}),
                                            lines=True))
    _plot_val_loss(record, run_logs, published, out_dir / PLOTS[0])
    _plot_step_time(record, run_logs, published, out_dir / PLOTS[1])
    return source  # where the record's curves came from; the files written are REPORT_FILES


def read_run_logs(run_dirs: list[Path], labels: list[str] | None = None) -> list[LabelledLog]:
    """Parse each run's log.txt (an absent log parses as empty, so crashed runs still appear)."""
    out = []
    for i, run in enumerate(run_dirs):
        run = Path(run)
        log_path = run / "log.txt" if run.is_dir() else run
        # streamed (a 6 GiB log is judged, as `verify` judges it, in bounded memory); a FIFO is refused by name
        log = parse_log(log_path) if kind_of(log_path) else parse_text(b"", str(log_path))
        out.append(LabelledLog(labels[i] if labels else run.name, log))
    return out


def report_runs(record: Record, run_dirs: list[Path], out_dir: Path,
                published_dir: Path | None = None) -> tuple[Verdict, str]:
    """`repro report`: judge the runs, then write the report for them; (verdict, where the record's curves came
    from)."""
    from pipeline.verdict.judge import verify_runs

    run_dirs = [Path(p) for p in run_dirs]
    verdict = verify_runs(record, run_dirs)
    return verdict, write_report(record, verdict, read_run_logs(run_dirs), out_dir, published_dir=published_dir)
