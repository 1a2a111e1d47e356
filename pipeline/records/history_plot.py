"""`repro records plot`: record time against date, one PNG, the same bytes for the same registry.

With the whole history (~90 rows, a dozen in some months) names cannot fit beside their points, so each
point is labelled with its row number in the records table and the names go into a legend column on the
right, in table order. Re-timings (same code on new hardware or software) are drawn hollow. A record whose
logs' mean time is far from its claim (under 0.67 or over 1.5 times it) is not drawn at its logs' time: its
logs are not the record's timed runs (`repro records check` says why), and the figure lists it instead.
"""

from __future__ import annotations

import io
from datetime import date
from pathlib import Path

from pipeline.atomic import write_bytes

FILE = "records_time.png"
IMPLAUSIBLE = (0.67, 1.5)


def _outlier(row: dict) -> bool:
    claimed, logs = row.get("claimed_time_s"), row.get("mean_time_s")
    return bool(claimed and logs) and not IMPLAUSIBLE[0] <= logs / claimed <= IMPLAUSIBLE[1]


def _legend_lines(rows: list[dict], outliers: list[dict]) -> str:
    lines = [f"#{r.get('row') or '?'}{'r' if r.get('retiming') else ''} {r['name'][11:][:28] or r['name'][:28]}"
             for r in rows]
    if outliers:
        lines += ["", "not drawn at their logs' time:"]
        lines += [f"#{r.get('row') or '?'}: logs {r['mean_time_s'] / r['claimed_time_s']:.1f} x the claim" for r in
                  outliers]
    return "\n".join(lines)


def plot_history(rows: list[dict], out_dir: Path) -> Path:
    """rows: `repro records list --json` rows in table order (date, row, claimed_time_s, mean_time_s, name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in rows if r.get("date")]
    outliers = [r for r in rows if _outlier(r)]
    fig, (ax, side) = plt.subplots(1, 2, figsize=(12, 5.5), gridspec_kw={"width_ratios": [3.2, 1]})
    records = [r for r in rows if not r.get("retiming") and r.get("claimed_time_s")]
    claimed = [(date.fromisoformat(r["date"]), r["claimed_time_s"]) for r in records]
    if claimed:
        ax.step(*zip(*claimed), where="post", color="#1f77b4", label="claimed record time (README table)")
        ax.plot(*zip(*claimed), "o", color="#1f77b4", ms=4)
    retimed = [(date.fromisoformat(r["date"]), r["claimed_time_s"]) for r in rows
               if r.get("retiming") and r.get("claimed_time_s")]
    if retimed:
        ax.plot(*zip(*retimed), "o", mfc="none", color="#2ca02c", ms=7, label="re-timing (same code, new setup)")
    measured = [(date.fromisoformat(r["date"]), r["mean_time_s"]) for r in rows
                if r.get("mean_time_s") and r not in outliers]
    if measured:
        ax.plot(*zip(*measured), "x", color="#d62728", ms=6, label="mean train time of the record's runs")
    for i, r in enumerate(rows):
        y = r.get("claimed_time_s") or r.get("mean_time_s")
        if y:  # four offsets in turn keep neighbours' numbers apart
            ax.annotate(f"{r.get('row') or '?'}", (date.fromisoformat(r["date"]), y), fontsize=6,
                        xytext=(4, (6, -9, 12, -15)[i % 4]), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_ylabel("time to the target val loss (s, log scale)")
    ax.set_xlabel("record date")
    ax.set_title("NanoGPT speedrun records (track 1), numbered as in the records table")
    ax.grid(True, which="both", alpha=0.3)
    if claimed or measured:
        ax.legend(fontsize=7, loc="upper right")
    side.axis("off")
    side.text(0, 1, _legend_lines(rows, outliers), fontsize=5.5 if len(rows) > 40 else 7, va="top",
              family="monospace", transform=side.transAxes)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_bytes(out_dir / FILE, buf.getvalue())
