"""benchmarks/lever_ab.sh's verdict from sidebyside's summary.json: each run's step time, each lever's parity with
the base seed by seed, and its ratio to the base by window phase.

    python3 benchmarks/lever_summary.py DEST/summary.json LEVER...    # exit 1: a lever changed the training

A lever is a faster way to the same training: every lever measured so far ended its runs within 0.0019 of the base's
final validation loss on the same seed (20 steps; docs/device-runs/2026-12-03..05). Lever 16 ended 3.5 above
(docs/device-runs/2026-12-05-h100-lever16/: its kernel's values were wrong at the model's shape, though its GPU tests
passed) while its step time read 0.988. So parity comes first: a lever whose final loss on any seed is more than
LOSS_TOL from the base's has no speed figure, and the script says so and exits 1.
"""

from __future__ import annotations

import json
import statistics
import sys

LOSS_TOL = 0.01  # five times the widest honest gap measured (0.0019)
PHASES = ("3", "7", "11", "all")


def final_losses(runs: list[dict]) -> dict[int, float]:
    return {r["seed"]: r["val_losses"][-1][1] for r in runs if r.get("val_losses")}


def parity(base: list[dict], lever: list[dict]) -> tuple[bool, str]:
    """(holds, the line that says so): the largest gap in final validation loss over the seeds both arms ran."""
    ours, theirs = final_losses(lever), final_losses(base)
    seeds = sorted(set(ours) & set(theirs))
    if not seeds:
        return False, "no seed that both the base and the lever finished"
    gap, seed = max((abs(ours[s] - theirs[s]), s) for s in seeds)
    line = (f"final val loss at most {gap:.4f} from the base's over seeds {', '.join(map(str, seeds))} "
            f"(worst at seed {seed}: {ours[seed]:.4f} against {theirs[seed]:.4f}; tolerance {LOSS_TOL})")
    return gap <= LOSS_TOL, line


def report(summary: dict, levers: list[str]) -> tuple[list[str], bool]:
    runs = summary["runs"].get("1", {})
    lines, all_hold = [], True
    for arm in ("base", *levers):
        for i, r in enumerate(runs.get(f"native-{arm}", [])):
            a = r.get("phases", {}).get("all", {})
            lines.append(f"{arm:>16} run {i + 1}: seed {r.get('seed')}, rc {r.get('rc')}, median {a.get('median_ms')} "
                         f"ms, mean {a.get('mean_ms')} ms per step, startup {r.get('startup_s')} s")
    base = runs.get("native-base", [])
    for lever in levers:
        holds, line = parity(base, runs.get(f"native-{lever}", []))
        all_hold &= holds
        lines.append(f"{lever} parity {'ok' if holds else 'FAILED'}: {line}")
        for phase in PHASES:
            med = {arm: [r["phases"][phase]["median_ms"] for r in runs.get(f"native-{arm}", [])
                         if phase in r.get("phases", {})] for arm in ("base", lever)}
            if med["base"] and med[lever]:
                off, on = statistics.median(med["base"]), statistics.median(med[lever])
                void = "" if holds else "; no figure: parity failed"
                lines.append(f"{lever} phase {phase:>3}: base {off:.1f} ms, with it {on:.1f} ms, ratio {on / off:.4f} "
                             f"(runs: {len(med[lever])} with, {len(med['base'])} base{void})")
    return lines, all_hold


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: lever_summary.py SUMMARY_JSON LEVER...", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        lines, all_hold = report(json.load(f), argv[1:])
    print("\n".join(lines))
    return 0 if all_hold else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
