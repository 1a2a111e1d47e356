"""`repro records plot`: record time against date, one PNG, the same bytes for the same registry."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from pipeline.atomic import write_bytes

FILE = "records_time.png"


def plot_history(rows: list[dict], out_dir: Path) -> Path:
    """rows: `repro records list --json` rows (date, claimed_time_s, mean_time_s, name)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted((r for r in rows if r.get("date")), key=lambda r: r["date"])
    fig, ax = plt.subplots(figsize=(9, 4.5))
    claimed = [(date.fromisoformat(r["date"]), r["claimed_time_s"]) for r in rows if r.get("claimed_time_s")]
    measured = [(date.fromisoformat(r["date"]), r["mean_time_s"]) for r in rows if r.get("mean_time_s")]
    if claimed:
        ax.step(*zip(*claimed), where="post", color="#1f77b4", label="claimed record time (README table)")
        ax.plot(*zip(*claimed), "o", color="#1f77b4", ms=4)
    if measured:
        ax.plot(*zip(*measured), "x", color="#d62728", ms=7, label="mean train time of the published logs")
    for i, r in enumerate(rows):
        y = r.get("mean_time_s") or r.get("claimed_time_s")
        if y:  # alternate above/below so records days apart stay readable
            ax.annotate(r["name"].split("_", 1)[-1][:18], (date.fromisoformat(r["date"]), y), fontsize=6,
                        xytext=(3, 4 if i % 2 == 0 else -9), textcoords="offset points")
    ax.set_yscale("log")
    ax.set_ylabel("time to 3.28 val loss (s, log scale)")
    ax.set_xlabel("record date")
    ax.set_title("NanoGPT speedrun records (track 1)")
    ax.grid(True, which="both", alpha=0.3)
    if claimed or measured:
        ax.legend(fontsize=8)
    fig.autofmt_xdate()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return write_bytes(out_dir / FILE, buf.getvalue())
