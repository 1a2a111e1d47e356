"""The time budget of benchmarks/device_session.sh's phase `one`: what one lease can hold, planned before anything
starts, and the check made before each (record, native) pair.

    python3 benchmarks/session_plan.py plan [--budget-s N] [--warm]    # the plan and its time budget; exit 3: the
                                                                        # required part does not fit
    python3 benchmarks/session_plan.py fits pair --left-s N            # exit 0: a pair started now can finish

One lease of `nvidia-h200`: 30 minutes of device time, of which the machine's start takes 1-2 minutes, and at most
28 minutes per call. The session's own clock therefore gets BUDGET_S = min(1800 - 120, 1680) - 30 s (the last 30 s
collect the results). Every item is gated the same way, in the plan and while it runs: it starts only when the
clock's time left covers its *need* (the slowest measured run of its kind, times MARGIN); it then takes about its
*expected* time (the median measured). A (record, native) pair is one item, so a cut never falls on one side. The
startup options are pairs too, timed after wave 2 on the idle GPU, where wave 2's warm startups are measured: the
same load for both programs and for the baseline they are compared with.

The measured seconds are sidebyside's `wall` per run in docs/device-runs/2026-12-01-h200-one (80 steps, 524,288
validation tokens, FlexAttention, world size 1), and its progress.txt for the start and the end. The record's two
startup options never ran there: their figures are estimates (ESTIMATED), the budget the script gave them then.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass

DEVICE_S, MACHINE_START_S, CALL_LIMIT_S, COLLECT_S = 1800, 120, 1680, 30
BUDGET_S = min(DEVICE_S - MACHINE_START_S, CALL_LIMIT_S) - COLLECT_S
MARGIN = 1.1

# seconds per run, as measured on 2026-12-01 (h200-one); one tuple per kind
MEASURED: dict[str, tuple[float, ...]] = {
    # the matmul rate (progress.txt 21:38:57 -> 21:39:05); the loss kernels' GPU check (23 s, to 21:39:28) now
    # runs in wave 1 before native's runs, beside the record's compile, which starts at once
    "start": (8.0,),
    "end": (10.0,),  # summaries and the closing matmul (22:04:05 -> 22:04:15)
    # wave 1, cold: the record's run 1 (802.7 s, 702.5 s to its first timed step) with run 2 started at that step
    # (149.5 s): 702.5 + 149.5; native's check and two runs (23 + 256.6 + 107.1 s) end well before
    "wave1-cold": (852.0,),
    # wave 1 on carried compile caches: record run 1 as a warm shared run (149.5 s), run 2 from its first timed
    # step (89.4 s in): 89.4 + 149.5
    "wave1-warm": (238.9,),
    "record": (155.1, 120.6, 132.2),  # warm, the GPU alone (wave 2)
    "native": (96.2, 104.2),
    "native-option": (65.8, 67.1),  # 6 steps: artifacts into empty caches, no AOTAutograd cache
}
ESTIMATED: dict[str, float] = {"record-artifacts": 200.0, "record-no-aot-cache": 160.0}


def expected_s(kind: str) -> float:
    return ESTIMATED.get(kind) or statistics.median(MEASURED[kind])


def need_s(kind: str) -> float:
    """What an item of this kind must find left on the clock to start."""
    return math.ceil((ESTIMATED.get(kind) or max(MEASURED[kind])) * MARGIN * 10) / 10  # rounded up, never down


@dataclass(frozen=True)
class Item:
    name: str
    parts: tuple[str, ...]  # the kinds of its runs, run one after the other
    required: bool

    @property
    def expected_s(self) -> float:
        return sum(expected_s(k) for k in self.parts)

    @property
    def need_s(self) -> float:
        return round(sum(need_s(k) for k in self.parts), 1)


PAIR = ("record", "native")
OPTIONS = ("artifacts", "no-aot-cache")


def items(warm: bool) -> list[Item]:
    """Phase one in order: the start, wave 1, wave 2's three pairs, the startup options' pairs, the end."""
    out = [Item("start", ("start",), True), Item("wave 1", ("wave1-warm" if warm else "wave1-cold",), True)]
    out += [Item(f"wave 2 pair {i}", PAIR, True) for i in (1, 2, 3)]
    out += [Item(f"startup {o}", (f"record-{o}", "native-option"), False) for o in OPTIONS]
    return out + [Item("end", ("end",), True)]


@dataclass(frozen=True)
class Planned:
    item: Item
    starts_s: float  # on the session's clock
    runs: bool


def plan(budget_s: float = BUDGET_S, warm: bool = False, took=lambda item: item.expected_s) -> list[Planned]:
    """Each item gated as the script gates it: run when its need fits the time left, then the clock moves on by
    what it took (its expected time unless `took` says otherwise); a cut item takes none."""
    clock, out = 0.0, []
    for item in items(warm):
        runs = budget_s - clock >= item.need_s
        out.append(Planned(item, clock, runs))
        clock += took(item) if runs else 0.0
    return out


def slowest_s(item: Item) -> float:
    """An item's time if every run of it takes the slowest measured time of its kind."""
    return sum(ESTIMATED.get(k) or max(MEASURED[k]) for k in item.parts)


def item_of(kind: str) -> Item:
    """`pair` (a wave-2 pair) or `option-<name>` (a startup option's pair)."""
    if kind == "pair":
        return Item(kind, PAIR, True)
    option = kind.removeprefix("option-")
    if kind == option or option not in OPTIONS:
        raise ValueError(f"{kind}: choose pair, " + ", ".join(f"option-{o}" for o in OPTIONS))
    return Item(kind, (f"record-{option}", "native-option"), False)


def fits(kind: str, left_s: float) -> bool:
    """Before an item of `kind`, with left_s on the clock: can it finish?"""
    return left_s >= item_of(kind).need_s


def render(planned: list[Planned], budget_s: float) -> str:
    lines = [f"budget {budget_s:.0f} s on the session's clock (lease: {DEVICE_S} s device time less a "
             f"{MACHINE_START_S} s machine start, {CALL_LIMIT_S} s call limit, {COLLECT_S} s to collect); "
             f"need = slowest measured x {MARGIN}",
             f"{'item':<22} {'starts':>7} {'expected':>9} {'need':>7}  verdict"]
    for p in planned:
        verdict = "runs" if p.runs else ("CUT (required)" if p.item.required else "cut")
        lines.append(f"{p.item.name:<22} {p.starts_s:>6.0f}s {p.item.expected_s:>8.0f}s {p.item.need_s:>6.0f}s  "
                     f"{verdict}")
    end = max(p.starts_s + (p.item.expected_s if p.runs else 0) for p in planned)
    lines.append(f"expected end {end:.0f} s, {budget_s - end:.0f} s left")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="print the plan and its time budget")
    p.add_argument("--budget-s", type=float, default=BUDGET_S)
    p.add_argument("--warm", action="store_true", help="the compile caches are carried: no cold compile")
    sub.add_parser("budget", help="print the default budget (s)")
    n = sub.add_parser("need", help="print the seconds one run of a kind needs to start (record, native, ...)")
    n.add_argument("kind", choices=sorted({*MEASURED, *ESTIMATED}))
    f = sub.add_parser("fits", help="exit 0 when an item started now can finish")
    f.add_argument("kind", help="pair, option-artifacts or option-no-aot-cache")
    f.add_argument("--left-s", type=float, required=True)
    a = ap.parse_args(argv)
    if a.command == "budget":
        print(BUDGET_S)
        return 0
    if a.command == "need":
        print(need_s(a.kind))
        return 0
    if a.command == "plan":
        planned = plan(a.budget_s, a.warm)
        print(render(planned, a.budget_s))
        return 3 if any(p.item.required and not p.runs for p in planned) else 0
    try:
        item = item_of(a.kind)
    except ValueError as exc:
        ap.error(str(exc))
    ok = fits(a.kind, a.left_s)
    print(f"{a.kind}: needs {item.need_s:.0f} s, {a.left_s:.0f} s left: {'start' if ok else 'not started'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
