"""The time budget of benchmarks/device_session.sh's phase `one`: what one lease can hold, chosen before anything
starts, and the check made before each (record, native) pair.

    python3 benchmarks/session_plan.py plan [--budget-s N] [--warm]    # the plan, its times and what it drops;
                                                                        # exit 3: speed 3 + 3 does not fit
    python3 benchmarks/session_plan.py has parity [--budget-s N] [--warm]  # exit 0: the plan keeps that group
    python3 benchmarks/session_plan.py has parity --at-first-step --budget-s LEFT  # the same, asked again at a
                                                                        # cold wave 1's first timed step
    python3 benchmarks/session_plan.py fits pair --left-s N [--pair-took-s T ...]  # exit 0: a pair started now
                                                                        # can finish (T: this session's pairs)
    python3 benchmarks/session_plan.py need record [--pair-took-s T ...]  # sidebyside's --need-s record= in a pair
    python3 benchmarks/session_plan.py budget [--held-s N] [--device-s N]  # the session's clock, in seconds
    python3 benchmarks/session_plan.py gpu "NVIDIA H100 80GB HBM3"     # H100: the key of its measured times
    (plan, has, need and fits take --gpu H200|H100; default H200)

One lease of `nvidia-h200`: 1,800 s of device time, the machine held 29 minutes at most (LEASE_CAP_S: the
workplace hands it back at 30, and the minute's difference is the lease's margin). The machine's start, with the
tree and 23 MB of shards carried, took 29 to 87 s in six fresh starts on 2026-12-04 (a call's held time less its
command's wall time); the last call's transfer back, about 15 s. The session runs detached and is polled by calls
of at most 10 minutes each, so no one call's limit bounds it; the lease does. Its own clock therefore gets
min(1800, 1740) - HELD - 20 s, where HELD is what the lease had held when the session started: measured when the
caller says when its device call began (benchmarks/lease.sh's LEASE_T0 gives the session LEASE_HELD_S), else the
slowest start measured, 90 s (BUDGET_S = 1,630).

Every item is gated the same way, in the plan and while it runs: it starts only when the clock's time left covers
its *need* (the slowest measured run of each of its kinds, and a pair's own overhead) and the end's need after it;
it then takes about its *expected* time (the medians). A wave-2 pair after the first needs the slowest pair this
session has run after its first (`--pair-took-s`; the same machine, programs and caches; the first alone before
a second has run), never less than a pair's expected time. The first pair after wave 1 carries the record's
slowest warm start: 86.6-116.7 s in six cold leases against 60.8-96.0 s in the pairs after it, and the pair took
238-309 s against 206-237 s. No third pair has taken more than this asks (210 s after 253 and 235 on an H100; 200 s
after 198 and 197, under the 210 s expected). On 2026-12-06 (nineteenth session) the pairs took 244 and 206 s on
an H100, and the third, asked for the first's 244 s and the end's 25, found 255 s and did not start; it now needs
235. The H200's of 2026-12-06 (238 and 229 s) found 244 s of 251 and would not start either way. The need has no
factor on top (MARGIN 1.0): on 2026-12-04 the slowest times times 1.1 left the third pair unstarted with 284 s on
the clock, 12 s short, though the pair would have ended about 150 s inside the lease; the lease's own minute and the
collection's 20 s are the margin. A (record, native) pair is one item, so a cut never falls on one side. The
startup options are pairs too, timed after wave 2 on the idle GPU, where wave 2's warm startups are measured: the
same load for both programs and for the baseline they are compared with.

What the plan holds is chosen by priority, not by time order: the start, wave 1's first runs (they compile, and
count for parity) and the end always; then speed (wave 2's 3 pairs, required: without them the plan does not fit),
then parity (wave 1's second runs: 5 + 5 final losses instead of 4 + 4), then the startup options, each option
pair kept only if everything kept before it still fits. Wave 1 runs first, so a lower group that would push a
higher one out is dropped before the session starts; `plan` prints what it drops. Cold, the plan's wave 1 needs the
slowest compile measured, so a cold session decides the record's second run again at its first timed step with
the clock it has then (`has parity --at-first-step`: run 1's rest, the second runs, three pairs and the end; never
at speed's cost), and runs a second run that wave 1 did not run alone after wave 2 where its need is left.
(Startup options the plan drops still run when the clock, after wave 2, has their need left: they come last, so that
takes nothing from the rest.)
A wave-2 pair is gated (sidebyside --gate-native): native starts the gate lead (SETTINGS, 20 s) before the record,
waits after its warm-up, and runs its timed steps once the record has exited, so the pair takes the lead, the
record's run and native's run after its startup (native-timed), not both runs whole: 230 s on the H200 (the gated
pairs of 2026-12-06 measured an overhead of 18-19 s: 8.4 s of it native's validation compile, now in its warm-up,
and about 8 s sidebyside's start before native's launch, torch's import, now beside the runs).
Cold, the clock must give 1,524 s for speed 3 + 3, 1,575 s with parity 5 + 5, 2,095 s with the startup options
too: one cold lease holds speed and parity 5 + 5 with 55 s to spare at the slowest start measured (90 s), 24 s at
2026-12-06's 121 s; about 50 s of refused or bounced calls before it leave speed alone. Warm (the compile
artifacts of an earlier lease on this GPU's kind carried), 984 s with parity and 1,504 s with the startup options:
everything fits. The medians are not a promise: on 2026-12-04 wave 1 took 804 s and the first pair 293; on
2026-12-06 wave 1 took 877 s.

Times are per GPU: a call may be given an H100 (MEASURED_H100, five leases). Its record's cold compile took 847.9 s
on 2026-12-05, and 645.2 and 606.7 s on 2026-12-06 (626.5-709.0 s on the H200s). Cold, the table there needs a clock
of 1,401 s for speed 3 + 3 and 1,462 s with parity 5 + 5: a lease that had held at most 319 s at the start holds
speed, at most 258 s parity. Warm, from the compile artifacts a cold H100 lease packed (the plan's --warm: loaded in
18-21 s before wave 1), it needs 853 s for speed, 1,024 s with parity and 1,498 s with the startup options: the
whole table fits (the twentieth session's warm lease, whose clock was 1,465 s, ran all of it and ended with 119 s
left; the record's no-aot-cache startup took 194.2 s there against 90.1 s in the seventeenth's, which raised the
options' need). There the record's second wave-1 run follows its first (three runs' peaks do not fit 80 GB:
PEAK_GIB, `room`).

The measured seconds are sidebyside's `wall` per run in docs/device-runs/2026-12-01-h200-one,
2026-12-04-h200-one-table and 2026-12-06-h200-one-2x2, and on the H100 2026-12-05-h100-one-short,
2026-12-06-h100-one-short-3x3, 2026-12-06-h100-one-warm, 2026-12-06-h100-nineteenth-2x2 and
2026-12-06-h100-twentieth-warm-table (80 steps, 524,288 validation tokens, FlexAttention, world size 1), and
their progress.txt for the start, the end and a pair's overhead. The record's artifacts option has run on the H100
only: on the H200 its figure is an estimate (ESTIMATED), the budget the script gave it on 2026-12-01.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from dataclasses import dataclass

DEVICE_S, LEASE_CAP_S, MACHINE_START_S, COLLECT_S = 1800, 29 * 60, 90, 20
MARGIN = 1.0


def lease_budget_s(held_s: float = MACHINE_START_S, device_s: float = DEVICE_S) -> float:
    """The session's clock: the lease's tighter bound, less what it held before the session started and the
    collection after. device_s: the device time the session had left when the call began (`status`'s
    budget_left_s), which a refused call has already spent from."""
    return min(device_s, LEASE_CAP_S) - held_s - COLLECT_S


BUDGET_S = lease_budget_s()

# seconds per run as measured, one tuple per kind: 2026-12-01 (h200-one) first, then 2026-12-04 (h200-one-table),
# then 2026-12-06 (h200-one-2x2)
MEASURED: dict[str, tuple[float, ...]] = {
    # the matmul rate (21:38:57 -> 21:39:05; 12:28:30 -> 12:28:42; 01:59:55 -> 02:00:06); the loss kernels' GPU check
    # (23 s) runs in wave 1 before native's runs, beside the record's compile, which starts at once
    "start": (8.0, 12.0, 11.0),
    # the summaries and the closing matmul: 22:04:05 -> 22:04:15 (one summary then); 12:54:41 -> 12:55:02 (the
    # parity summary and the startup list, 11 s, then the matmul); 02:25:27 -> 02:25:45
    "end": (10.0, 21.0, 18.0),
    # wave 1, cold: the record's run 1 (802.7 s, 702.5 s of it to its first timed step; 733.6 s, 626.5 s; 807.1 s,
    # 709.0 s); native's check and runs end well before
    "wave1-cold": (802.7, 733.6, 807.1),
    # what the second runs add to it: the record's run 2 starts at run 1's first timed step and takes 149.5 s
    # (702.5 + 149.5 - 802.7), 158.6 s (626.5 + 158.6 - 733.6) and 151.7 s; native's run 2 still ends before
    "wave1-cold-second": (49.3, 51.5, 53.6),
    # the record's run 1 after its first timed step (wall less startup_s: 802.7 - 702.5, 733.6 - 626.5, 807.1 -
    # 709.0): what wave 1 still takes when that step comes, where a cold session decides on the record's run 2
    "wave1-cold-rest": (100.2, 107.1, 98.1),
    # wave 1 on carried compile caches: record run 1 as a warm shared run; run 2 from its first timed step adds
    # that step's time
    "wave1-warm": (149.5, 158.6, 151.7),
    "wave1-warm-second": (89.4, 96.8, 90.3),
    "record": (155.1, 120.6, 132.2, 174.4, 131.4, 148.8, 139.9),  # warm, the GPU alone (wave 2)
    "native": (96.2, 104.2, 109.4, 95.3),  # whole runs (ungated pairs); a gated native's wall holds its wait
    # what a native run takes after its startup (wall less startup_s: validation 0, the timed steps, the final
    # validation, exit; in a gated pair less its wait at the gate too): in a gated pair (sidebyside --gate-native)
    # its startup overlaps the record's run, and only this part follows the record's exit
    "native-timed": (52.0, 52.1, 51.2, 50.3, 51.0, 50.2),
    # a gated pair's time beyond the lead, the record's wall and native-timed (sidebyside's start, about 8 s there,
    # and summary, the gate's opening and native's step-0 validation, whose compile took 8.4 s there; the warm-up
    # now holds that compile, and sidebyside imports torch only after its first launch):
    # 02:14:43 -> 02:18:41 is 238 s for 20 + 148.8 + 51.0, 02:18:41 -> 02:22:30 229 s for 20 + 139.9 + 50.2
    "pair-overhead": (18.2, 18.9),
    # 6 steps, on warm caches without the AOTAutograd cache (125.1 s, 146.8 s), and artifacts into empty caches
    "record-no-aot-cache": (125.1, 146.8),
    "native-option": (65.8, 67.1, 68.3),
}
# the record's artifacts option (the budget the script gave it on 2026-12-01; on the H100 it took 101.8 s), and the
# carried artifacts' load before wave 1 (21 s on the H100, whose host is the slower: the H200's is taken to be no more)
ESTIMATED: dict[str, float] = {"record-artifacts": 200.0, "load-carried": 21.0}

# The same kinds on one H100, one tuple per kind, in lease order: 2026-12-05 (h100-one-short, an ungated pair),
# 2026-12-06 (h100-one-short-3x3, three gated pairs), both asked for an nvidia-h200 and given an H100, both ONE_SHORT;
# then 2026-12-06 (h100-one-warm, the seventeenth session: nvidia-h100-x1, warm from the artifacts the second packed),
# 2026-12-06 (h100-nineteenth-2x2: nvidia-h100-x1, cold, ONE_SHORT, two gated pairs) and 2026-12-06
# (h100-twentieth-warm-table: nvidia-h100-x1, warm from the nineteenth's artifacts, the whole plan).
# 2026-12-05: its host compiled the record 35 % slower than the H200 of 2026-12-04 (847.9 s to its first step
# against 626.5); start 16:56:36 -> 16:56:49; end 17:19:50 -> 17:20:15; wave 1: the record's run 1 (972.9 s), run 2
# adding 847.9 + 195.1 - 972.9; its pair ungated (record 184.2 s, native 111.9 s whole), so its overhead is not a
# gated pair's. 2026-12-06: the record's cold compile 645.2 s (wall 757.9 s), no second runs (parity dropped); start
# 05:31:57 -> 05:32:07; end 05:56:53 -> 05:57:04; gated pairs of 253, 235 and 210 s (05:45:14 -> 05:56:52) for the
# lead, the record (176.8, 159.0, 133.5 s) and native after its startup and wait (54.0, 53.7, 53.1 s). The warm
# lease: start 08:53:39 -> 08:53:50, the carried artifacts loaded by 08:54:11 (load-carried); the record's warm run 1
# on the shared GPU 194.5 s (wave1-warm); gated pairs of 198, 197 and 200 s (08:58:37 -> 09:08:32: record 121.1,
# 120.5, 120.8 s; native after its startup and wait 54.6, 54.4, 54.8 s); the startup options' runs; end 09:14:02 ->
# 09:14:12. The nineteenth session's: start 16:28:17 -> 16:28:33; the record's cold compile 606.7 s (wall 711.5 s),
# its run 2 from the first timed step on (wall 156.9 s); gated pairs of 244 and 206 s (16:41:22 -> 16:48:52: record
# 167.0 and 130.8 s; native after its startup and wait 54.1 and 52.8 s); the artifacts option's pair (record 101.9 s,
# native 100.0 s from artifacts into empty caches); end 16:52:19 -> 16:52:30. The twentieth's: start 19:37:48 ->
# 19:37:57, the carried artifacts loaded by 19:38:15; the record's run 1 on the shared GPU 186.1 s, its run 2 after
# it 170.9 s (wave1-warm-second); gated pairs of 187, 186 and 187 s (19:44:14 -> 19:53:34: record 111.8, 111.0,
# 110.0 s; native after its startup and wait 53.5, 53.5, 53.2 s); both options' pairs; end 20:00:12 -> 20:00:20.
# Every kind the plan times is measured there (a test holds it), so nothing on an H100 is scaled from the H200's.
MEASURED_H100: dict[str, tuple[float, ...]] = {
    "start": (13.0, 10.0, 11.0, 16.0, 9.0), "end": (25.0, 11.0, 10.0, 11.0, 8.0), "load-carried": (21.0, 18.0),
    "wave1-cold": (972.9, 757.9, 711.5), "wave1-cold-second": (70.1, 52.1), "wave1-cold-rest": (125.0, 112.7, 104.8),
    # warm, the record's second wave-1 run follows its first: three programs' peaks do not fit 80 GB (PEAK_GIB)
    "wave1-warm": (194.5, 186.1), "wave1-warm-second": (170.9,),
    "record": (184.2, 176.8, 159.0, 133.5, 121.1, 120.5, 120.8, 167.0, 130.8, 111.8, 111.0, 110.0), "native": (111.9,),
    "native-timed": (54.2, 54.0, 53.7, 53.1, 54.6, 54.4, 54.8, 54.1, 52.8, 53.5, 53.5, 53.2),
    "pair-overhead": (2.2, 2.3, 3.4, 2.3, 2.1, 4.4, 2.9, 2.4, 1.7, 1.5, 3.8),
    "record-artifacts": (101.8, 101.9, 87.5), "record-no-aot-cache": (107.8, 209.1),
    "native-option": (56.5, 59.1, 100.0, 47.8, 49.7),
}
# Not measured but set: how long native starts before the record in a gated pair. The record's warm startup was
# 60.8-117 s, native's 44-58 s alone: the lead keeps native's warm-up (under the record's startup load) clear of the
# record's first timed step with about 20 s to spare, and a pair where it is not is marked (sidebyside's "void").
SETTINGS: dict[str, float] = {"gate-lead": 20.0}
# GPU memory, GiB: each program's peak at world size 1 and 80 steps (sidebyside's "peak GiB", torch's maximum
# allocated: the same on the H200s and the H100s), and what a process holds beyond it (CUDA's context and the
# allocator's reserve: 33.25 - 31.45 and 29.09 - 27.65 GiB in the out-of-memory report of 2026-12-06, rounded up).
# Wave 1 shares the GPU; a run starts beside others only when their sum fits the card (`room`)
PEAK_GIB: dict[str, float] = {"record": 31.45, "native": 27.65}
PROCESS_GIB = 2.0
GPUS = ("H200", "H100")  # the GPUs with measured times: nvidia-smi's name holds one of them


def gpu_of(name: str) -> str:
    """nvidia-smi's name ("NVIDIA H100 80GB HBM3") -> the key of its measured times; ValueError for another GPU."""
    for gpu in GPUS:
        if gpu in name.upper():
            return gpu
    raise ValueError(f"{name!r}: no measured times for this GPU (measured: {', '.join(GPUS)})")


def times_s(kind: str, gpu: str) -> tuple[float, ...]:
    """A kind's times on a GPU: a setting, or measured there, or (on the H200) estimated there."""
    if kind in SETTINGS:
        return (SETTINGS[kind],)
    if gpu == "H100":
        return MEASURED_H100[kind]
    return (ESTIMATED[kind],) if kind in ESTIMATED else MEASURED[kind]


def expected_s(kind: str, gpu: str = "H200") -> float:
    return statistics.median(times_s(kind, gpu))


def need_s(kind: str, gpu: str = "H200") -> float:
    """What an item of this kind must find left on the clock to start."""
    return math.ceil(max(times_s(kind, gpu)) * MARGIN * 10) / 10  # rounded up, never down


@dataclass(frozen=True)
class Item:
    name: str
    parts: tuple[str, ...]  # the kinds of its runs, run one after the other (or the time they add to wave 1)
    group: str  # "base", or one of GROUPS
    gpu: str = "H200"  # whose measured times it takes

    @property
    def expected_s(self) -> float:
        return sum(expected_s(k, self.gpu) for k in self.parts)

    @property
    def need_s(self) -> float:
        return round(sum(need_s(k, self.gpu) for k in self.parts), 1)


PAIR = ("gate-lead", "record", "native-timed", "pair-overhead")  # gated: native's startup inside the record's run
OPTIONS = ("artifacts", "no-aot-cache")
GROUPS = {  # after the base, in priority order: what each gives
    "speed": "speed 3 + 3 (wave 2's pairs)",
    "parity": "parity 5 + 5 (wave 1's second runs; without them 4 + 4)",
    "startups": "the startup options, timed as pairs on the idle GPU",
}
END = Item("end", ("end",), "base")


def end_item(gpu: str) -> Item:
    return Item(END.name, END.parts, END.group, gpu)


def option_parts(option: str) -> tuple[str, ...]:
    """A startup option's pair: the record's run with it, native's, and the pair's overhead."""
    return (f"record-{option}", "native-option", "pair-overhead")


def items(warm: bool, gpu: str = "H200", at_first_step: bool = False) -> list[Item]:
    """Phase one in time order: the start, wave 1 (its first runs, then what its second runs add), wave 2's three
    pairs, the startup options' pairs, the end. at_first_step: what is left of it at the record's first timed
    step in a cold wave 1 (its run 1's rest, then the rest as before), where a cold session decides on the
    record's run 2 with the clock it has then: the compile, the lease's largest unknown, is behind it."""
    wave1 = "wave1-warm" if warm else "wave1-cold"
    if at_first_step:
        out = [Item("wave 1 run 1's rest", ("wave1-cold-rest",), "base", gpu)]
    else:
        start = ("start", "load-carried") if warm else ("start",)  # warm: the carried artifacts loaded first
        out = [Item("start", start, "base", gpu), Item("wave 1 runs 1", (wave1,), "base", gpu)]
    out += [Item("wave 1 runs 2", (f"{wave1}-second",), "parity", gpu)]
    out += [Item(f"wave 2 pair {i}", PAIR, "speed", gpu) for i in (1, 2, 3)]
    out += [Item(f"startup {o}", option_parts(o), "startups", gpu) for o in OPTIONS]
    return out + [end_item(gpu)]


@dataclass(frozen=True)
class Planned:
    item: Item
    starts_s: float  # on the session's clock
    runs: bool
    need_s: float  # what its gate asked for


def item_need_s(item: Item, pairs_took_s: tuple[float, ...] = ()) -> float:
    """A wave-2 pair after this session's first needs the slowest pair the session has run after its first (the
    first alone where it has run one: that pair carries the first warm start after wave 1), and never less than a
    pair's expected time (a pair that failed at its start took seconds); any other item, the slowest measured runs
    of its kinds."""
    if item.group == "speed" and pairs_took_s:
        return max(*(pairs_took_s[1:] or pairs_took_s), item.expected_s)
    return item.need_s


def record_in_pair_need_s(gpu: str, pairs_took_s: tuple[float, ...] = ()) -> float:
    """What sidebyside's own check asks for the record's run of a gated pair: the pair's need less its other parts'
    (the record's slowest measured run before this session's pairs; after them, what their pace leaves it), so that
    its check passes where the session's gate did."""
    others = sum(need_s(k, gpu) for k in PAIR if k != "record")
    return round(item_need_s(item_of("pair", gpu), pairs_took_s) - others, 1)


def gate(item: Item, left_s: float, pairs_took_s: tuple[float, ...] = ()) -> bool:
    """An item starts when the time left covers its need and, after it, the end's (summaries, closing matmul)."""
    return left_s >= item_need_s(item, pairs_took_s) + (0 if item.name == END.name else end_item(item.gpu).need_s)


def simulate(every: list[Item], chosen: list[Item], budget_s: float, took) -> list[Planned]:
    """Time order: a chosen item runs when its gate passes, and the clock moves on by what it took."""
    clock, out, pairs = 0.0, [], ()
    for item in every:
        runs = item in chosen and gate(item, budget_s - clock, pairs)
        out.append(Planned(item, clock, runs, item_need_s(item, pairs)))
        if runs:
            clock += took(item)
            pairs += (took(item),) if item.group == "speed" else ()
    return out


def choose(every: list[Item], budget_s: float) -> list[Item]:
    """The base always; then, in priority order, each speed pair (all three, or the plan does not fit: only a short
    session, ONE_SHORT, runs fewer), parity's item and each startup pair, each kept only when, with it, every item
    kept so far still passes its gate at its expected start, and none after parity or startups not kept whole."""
    kept = [i for i in every if i.group == "base"]
    for group in GROUPS:
        for item in [i for i in every if i.group == group]:
            trial = kept + [item]
            if all(p.runs for p in simulate(every, trial, budget_s, lambda i: i.expected_s) if p.item in trial):
                kept = trial
        if group != "speed" and not all(i in kept for i in every if i.group == group):
            break  # a lower group never runs where a higher one did not (a startup option fits where a warm H100's
            # parity run does not); speed cut is a short session (ONE_SHORT), whose parity runs where it fits
    return kept


def plan(budget_s: float = BUDGET_S, warm: bool = False, took=lambda item: item.expected_s,
         gpu: str = "H200", at_first_step: bool = False) -> list[Planned]:
    """The chosen items gated as the script gates them, the clock moving by what each took (its expected time
    unless `took` says otherwise); an item not chosen, or cut by its gate, takes none."""
    every = items(warm, gpu, at_first_step)
    return simulate(every, choose(every, budget_s), budget_s, took)


def holds(planned: list[Planned], *groups: str) -> bool:
    """Every item of these groups runs."""
    return all(p.runs for p in planned if p.item.group in groups)


def dropped(planned: list[Planned]) -> list[str]:
    """The groups the plan does not hold whole, in priority order, with what each would have given."""
    return [f"{group}: {what}" for group, what in GROUPS.items() if not holds(planned, group)]


def fits_whole(planned: list[Planned]) -> bool:
    """The base and speed 3 + 3 run: the session may start."""
    return holds(planned, "base", "speed")


def slowest_s(item: Item) -> float:
    """An item's time if every run of it takes the slowest measured time of its kind."""
    return sum(max(times_s(k, item.gpu)) for k in item.parts)


def footprint_gib(programs: list[str]) -> float:
    """What these runs hold at once at their peaks, each with its process's own share."""
    return sum(PEAK_GIB[p] + PROCESS_GIB for p in programs)


def room(programs: list[str], gpu_mib: float) -> bool:
    """Whether these runs, at once on one GPU of gpu_mib MiB (nvidia-smi's memory.total), fit at their peaks."""
    return footprint_gib(programs) * 1024 <= gpu_mib


RERUNS = {"run-record": "record", "run-native": "native"}  # a failed wave-1 run again, alone: its program's need


def item_of(kind: str, gpu: str = "H200") -> Item:
    """`pair` (a wave-2 pair), `option-<name>` (a startup option's pair) or `run-<program>` (one run, alone)."""
    if kind == "pair":
        return Item(kind, PAIR, "speed", gpu)
    if kind in RERUNS:
        return Item(kind, (RERUNS[kind],), "parity", gpu)
    option = kind.removeprefix("option-")
    if kind == option or option not in OPTIONS:
        raise ValueError(f"{kind}: choose pair, {', '.join(RERUNS)}, " + ", ".join(f"option-{o}" for o in OPTIONS))
    return Item(kind, option_parts(option), "startups", gpu)


def fits(kind: str, left_s: float, gpu: str = "H200", pairs_took_s: tuple[float, ...] = ()) -> bool:
    """Before an item of `kind`, with left_s on the clock (and, before a pair, the pairs this session has run): can
    it finish, and the end after it?"""
    return gate(item_of(kind, gpu), left_s, pairs_took_s)


def render(planned: list[Planned], budget_s: float) -> str:
    lines = [f"budget {budget_s:.0f} s on the session's clock, {planned[0].item.gpu}'s measured times (lease: "
             f"{DEVICE_S} s device time, held {LEASE_CAP_S} s at most, less what it held when the session started, "
             f"{MACHINE_START_S} s unless measured, and {COLLECT_S} s to collect); need = the slowest measured runs "
             f"and a pair's overhead (a pair after the first: the slowest pair before it, but the first once there "
             f"are two), and the end's need after it",
             f"{'item':<22} {'group':<9} {'starts':>7} {'expected':>9} {'need':>7}  verdict"]
    for p in planned:
        verdict = "runs" if p.runs else ("CUT (required)" if p.item.group in ("base", "speed") else "dropped")
        lines.append(f"{p.item.name:<22} {p.item.group:<9} {p.starts_s:>6.0f}s {p.item.expected_s:>8.0f}s "
                     f"{p.need_s:>6.0f}s  {verdict}")
    end = max(p.starts_s + (p.item.expected_s if p.runs else 0) for p in planned)
    lines.append(f"expected end {end:.0f} s, {budget_s - end:.0f} s left")
    lines += [f"drops {d}" for d in dropped(planned)] or ["drops nothing"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    p = sub.add_parser("plan", help="print the plan, its times and what it drops")
    h = sub.add_parser("has", help="exit 0 when the plan holds this group whole")
    h.add_argument("group", choices=list(GROUPS))
    for q in (p, h):
        q.add_argument("--budget-s", type=float, default=BUDGET_S)
        q.add_argument("--warm", action="store_true", help="the compile caches are carried: no cold compile")
        q.add_argument("--at-first-step", action="store_true",
                       help="plan what is left at a cold wave 1's first timed step of the record (budget: the "
                            "clock's time left then)")
    g = sub.add_parser("gpu", help="print the key of a GPU's measured times (exit 2: none measured)")
    g.add_argument("name", help="nvidia-smi's name of the GPU, e.g. 'NVIDIA H100 80GB HBM3'")
    b = sub.add_parser("budget", help="print the session's budget (s)")
    b.add_argument("--held-s", type=float, default=MACHINE_START_S,
                   help="what the lease had held when the session started (default: the slowest start measured)")
    b.add_argument("--device-s", type=float, default=DEVICE_S,
                   help="the device time left when the lease's call began (status's budget_left_s)")
    n = sub.add_parser("need", help="print the seconds one run of a kind needs to start (record, native, ...)")
    n.add_argument("kind", choices=sorted({*MEASURED, *MEASURED_H100, *ESTIMATED, *SETTINGS}))
    n.add_argument("--pair-took-s", type=float, action="append", default=[],
                   help="with record: its need in a pair after this session's pairs that took these seconds")
    f = sub.add_parser("fits", help="exit 0 when an item started now can finish")
    f.add_argument("kind", help="pair, run-record, run-native, option-artifacts or option-no-aot-cache")
    r = sub.add_parser("room", help="exit 0 when these programs' runs fit one GPU's memory at once")
    r.add_argument("--gpu-mib", type=float, required=True, help="nvidia-smi's memory.total, MiB")
    r.add_argument("programs", nargs="+", choices=sorted(PEAK_GIB))
    f.add_argument("--left-s", type=float, required=True)
    f.add_argument("--pair-took-s", type=float, action="append", default=[],
                   help="seconds a wave-2 pair of this session took (repeat): a pair then needs the slowest of them")
    for q in (p, h, n, f):
        q.add_argument("--gpu", choices=GPUS, default="H200", help="whose measured times (default H200)")
    a = ap.parse_args(argv)
    if a.command == "gpu":
        try:
            print(gpu_of(a.name))
        except ValueError as exc:
            ap.error(str(exc))
        return 0
    if a.command == "budget":
        print(f"{lease_budget_s(a.held_s, a.device_s):.0f}")
        return 0
    if a.command == "need":
        if a.pair_took_s and a.kind != "record":
            ap.error("need --pair-took-s: only the record's run in a pair has a need set by this session's pairs")
        print(record_in_pair_need_s(a.gpu, tuple(a.pair_took_s)) if a.pair_took_s else need_s(a.kind, a.gpu))
        return 0
    if a.command == "room":
        ok = room(a.programs, a.gpu_mib)
        print(f"{' + '.join(a.programs)}: {footprint_gib(a.programs):.1f} GiB at their peaks, "
              f"the GPU {a.gpu_mib / 1024:.1f} GiB: {'they fit' if ok else 'they do not fit'}")
        return 0 if ok else 1
    if a.command in ("plan", "has"):
        if a.at_first_step and a.warm:
            ap.error("--at-first-step is a cold wave 1's decision: not with --warm")
        planned = plan(a.budget_s, a.warm, gpu=a.gpu, at_first_step=a.at_first_step)
        if a.command == "has":  # asked again at the first step, parity must leave speed 3 + 3 whole
            return 0 if holds(planned, a.group) and (fits_whole(planned) or not a.at_first_step) else 1
        print(render(planned, a.budget_s))
        return 0 if fits_whole(planned) else 3
    try:
        item = item_of(a.kind, a.gpu)
    except ValueError as exc:
        ap.error(str(exc))
    took = tuple(a.pair_took_s) if a.kind == "pair" else ()
    ok = fits(a.kind, a.left_s, a.gpu, took)
    whose = (" (the slowest pair of this session after its first)" if len(took) > 1
             else " (the slowest pair of this session)" if took else "")
    print(f"{a.kind}: needs {item_need_s(item, took):.0f} s{whose} and "
          f"the end's {end_item(a.gpu).need_s:.0f} s, {a.left_s:.0f} s left: {'start' if ok else 'not started'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
