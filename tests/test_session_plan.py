"""benchmarks/session_plan.py, the time budget of device_session.sh's phase `one`, and the script's use of it (CPU).

    .venv/bin/python -m pytest -q tests/test_session_plan.py

On 2026-12-01 the session checked its budget per run with 60 s to spare: the cut fell on native's third run and
the record's startup options, and the options it did run were timed under the record's compile. The plan now gates
whole (record, native) pairs by the measured run times with a margin and the end's time after them, keeps what one
lease holds by priority (speed 3 + 3, then parity 5 + 5, then the startup options) and says what it drops.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from benchmarks import session_plan as sp
from benchmarks.sidebyside import main as sidebyside_main
from tests.paths import REPO_ROOT

RUNS = REPO_ROOT / "docs" / "device-runs"
DAYS = ("2026-12-01-h200-one", "2026-12-04-h200-one-table", "2026-12-06-h200-one-2x2")
GATED = DAYS[2]  # the first lease whose wave-2 pairs were gated (sidebyside --gate-native)
WALL = re.compile(r"^\[(record|native) ws1 run \d\] rc 0, wall ([\d.]+) s, startup ([\d.]+) s", re.M)
STAMP = re.compile(r"^(\d\d):(\d\d):(\d\d) (.*)$", re.M)


def walls(day: str, *names: str) -> list[tuple[str, float, float]]:
    return [(m[1], float(m[2]), float(m[3])) for name in names
            for m in WALL.finditer((RUNS / day / name).read_text())]


def stamps(day: str) -> list[tuple[int, str]]:
    """progress.txt's lines as (seconds of the day, text)."""
    return [(int(h) * 3600 + int(m) * 60 + int(s), text)
            for h, m, s, text in STAMP.findall((RUNS / day / "progress.txt").read_text())]


def pairs_took(day: str) -> list[int]:
    """Each wave-2 pair's seconds: from its progress line "pair: ... start" to the next progress line."""
    lines = stamps(day)
    return [lines[i + 1][0] - lines[i][0] for i, (_, text) in enumerate(lines)
            if text.startswith("one: pair:") and text.endswith(": start")]


def gate_waits(day: str, pair: int) -> float:
    """A gated pair's native: how long it waited at the gate (its wall holds the wait, its startup_s does not)."""
    summary = json.loads((RUNS / day / f"one-wave2-{pair}" / "summary.json").read_text())
    (native,) = summary["runs"]["1"]["native"]
    return native["gate_wait_s"]


def test_the_measured_times_are_the_committed_runs():
    pairs = {"2026-12-01-h200-one": ["one-wave2.txt"],
             "2026-12-04-h200-one-table": ["one-wave2-1.txt", "one-wave2-2.txt"],
             GATED: ["one-wave2-1.txt", "one-wave2-2.txt"]}
    wave2 = [w for day in DAYS for w in walls(day, *pairs[day])]
    assert sp.MEASURED["record"] == tuple(w for who, w, _ in wave2 if who == "record")
    whole = [w for day in DAYS[:2] for w in walls(day, *pairs[day])]  # a gated native's wall holds its wait
    assert sp.MEASURED["native"] == tuple(w for who, w, _ in whole if who == "native")
    # native's run after its startup (which a gated pair overlaps with the record's run), less its gate wait
    gated = [(w, s, gate_waits(GATED, n)) for n in (1, 2) for who, w, s in walls(GATED, f"one-wave2-{n}.txt")
             if who == "native"]
    assert sp.MEASURED["native-timed"] == (tuple(round(w - s, 1) for who, w, s in whole if who == "native")
                                           + tuple(round(w - s - g, 1) for w, s, g in gated))
    options = {"2026-12-01-h200-one": ("artifacts", "no-aot-cache"), "2026-12-04-h200-one-table": ("no-aot-cache",)}
    assert sp.MEASURED["native-option"] == tuple(walls(day, f"one-startup-{o}-native.txt")[0][1]
                                                 for day in DAYS[:2] for o in options[day])
    assert walls(GATED, "one-startup-no-aot-cache-native.txt") == []  # out of budget: not run
    assert sp.MEASURED["record-no-aot-cache"] == tuple(walls(day, "one-startup-no-aot-cache-record.txt")[0][1]
                                                       for day in DAYS[1:])
    cold, second, warm, warm_second = [], [], [], []
    for day in DAYS:
        (_, cold_wall, cold_startup), = walls(day, "one-w1-record-1.txt")
        (_, second_wall, second_startup), = walls(day, "one-w1-record-2.txt")
        # wave 1's first runs last as long as the record's cold run 1; its run 2 starts at run 1's first timed step
        cold.append(cold_wall)
        second.append(round(cold_startup + second_wall - cold_wall, 1))
        warm.append(second_wall)
        warm_second.append(second_startup)
    assert (sp.MEASURED["wave1-cold"], sp.MEASURED["wave1-cold-second"]) == (tuple(cold), tuple(second))
    assert (sp.MEASURED["wave1-warm"], sp.MEASURED["wave1-warm-second"]) == (tuple(warm), tuple(warm_second))


def test_a_gated_pairs_overhead_is_its_time_in_progress_less_its_lead_record_and_native_timed():
    """2026-12-06: each pair's line "pair: ... start" to the next progress line, less the gate's lead, the record's
    wall and native's run after its startup and its wait (native-timed)."""
    took = pairs_took(GATED)
    assert took == [238, 229]
    runs = []
    for n in (1, 2):
        (record,), (native,) = ([w for w in walls(GATED, f"one-wave2-{n}.txt") if w[0] == who]
                                for who in ("record", "native"))
        runs.append(sp.SETTINGS["gate-lead"] + record[1] + native[1] - native[2] - gate_waits(GATED, n))
    assert sp.MEASURED["pair-overhead"] == tuple(round(t - r, 1) for t, r in zip(took, runs))


def test_the_start_and_the_end_are_progress_times():
    for day, start, end in zip(DAYS, sp.MEASURED["start"], sp.MEASURED["end"]):
        lines = stamps(day)
        matmul = next(t for t, text in lines if text.startswith("matmul"))
        assert matmul - lines[0][0] == start
        last_run = max(t for t, text in lines if "startup" in text or "wave 2 done" in text)
        assert lines[-1][0] - last_run == end


H100_DAYS = ("2026-12-05-h100-one-short", "2026-12-06-h100-one-short-3x3", "2026-12-06-h100-one-warm",
             "2026-12-06-h100-nineteenth-2x2", "2026-12-06-h100-twentieth-warm-table")


def gated_pairs(day: str) -> tuple[list[float], list[float], list[float]]:
    """A lease's gated pairs: the record's wall, native's run after its startup and gate wait, and the pair's
    overhead (its time in progress.txt less the lead and those two)."""
    records, timed, overheads = [], [], []
    for n, took in enumerate(pairs_took(day), 1):
        pair = walls(day, f"one-wave2-{n}.txt")
        (rec,), (nat,) = ([w for w in pair if w[0] == who] for who in ("record", "native"))
        records.append(rec[1])
        timed.append(round(nat[1] - nat[2] - gate_waits(day, n), 1))
        overheads.append(round(took - sp.SETTINGS["gate-lead"] - rec[1] - timed[-1], 1))
    return records, timed, overheads


def cold_second(day: str) -> float:
    """What the record's second wave-1 run adds after run 1's end: it starts at run 1's first timed step."""
    (_, cold, cold_startup), = walls(day, "one-w1-record-1.txt")
    (_, second, _), = walls(day, "one-w1-record-2.txt")
    return round(cold_startup + second - cold, 1)


def test_the_h100s_times_are_its_five_leases():
    """2026-12-05 (ONE_SHORT): wave 1 with the record's second run, one ungated pair (record and native whole, so its
    overhead is no gated pair's). 2026-12-06 (ONE_SHORT): wave 1 without second runs, three gated pairs. 2026-12-06
    warm: the carried artifacts' load, the record's warm run 1 on the shared GPU, three gated pairs and the startup
    options. The nineteenth session's (ONE_SHORT, cold): wave 1 with the record's second run, two gated pairs and the
    artifacts option. The twentieth's (warm, the whole plan): the load, wave 1 with the record's second run after its
    first, three gated pairs and both options. Their times are read as the plan's H200 times are read from theirs."""
    t = sp.MEASURED_H100
    (first, gated, warm, nineteenth, twentieth) = H100_DAYS
    assert t["wave1-cold-second"] == (cold_second(first), cold_second(nineteenth))
    assert t["wave1-cold"] == tuple(walls(day, "one-w1-record-1.txt")[0][1] for day in (first, gated, nineteenth))
    assert not (RUNS / gated / "one-w1-record-2.txt").exists()  # parity's second runs dropped there
    assert t["wave1-warm"] == tuple(walls(day, "one-w1-record-1.txt")[0][1] for day in (warm, twentieth))
    # warm, the record's run 2 starts when its run 1 has ended (progress says so): its whole wall is what it adds
    assert "the record's run 2 starts once its run 1 has ended" in (RUNS / twentieth / "progress.txt").read_text()
    assert t["wave1-warm-second"] == (walls(twentieth, "one-w1-record-2.txt")[0][1],)
    (_, record, _), (_, native, native_startup) = walls(first, "one-wave2-1.txt")
    assert t["native"] == (native,)
    records, timed, overheads = [record], [round(native - native_startup, 1)], []
    for day in (gated, warm, nineteenth, twentieth):
        more = gated_pairs(day)
        assert len(more[0]) == (2 if day == nineteenth else 3)
        records, timed, overheads = records + more[0], timed + more[1], overheads + more[2]
    assert (t["record"], t["native-timed"], t["pair-overhead"]) == (tuple(records), tuple(timed), tuple(overheads))
    options = {(day, name): walls(day, f"one-startup-{name}.txt")[0][1] for day in (warm, nineteenth, twentieth)
               for name in ("artifacts-record", "no-aot-cache-record", "artifacts-native", "no-aot-cache-native")
               if (RUNS / day / f"one-startup-{name}.txt").exists()}
    assert t["record-artifacts"] == tuple(options[day, "artifacts-record"] for day in (warm, nineteenth, twentieth))
    assert t["record-no-aot-cache"] == tuple(options[day, "no-aot-cache-record"] for day in (warm, twentieth))
    assert (nineteenth, "no-aot-cache-record") not in options  # out of its clock
    assert t["native-option"] == (options[warm, "artifacts-native"], options[warm, "no-aot-cache-native"],
                                  options[nineteenth, "artifacts-native"], options[twentieth, "artifacts-native"],
                                  options[twentieth, "no-aot-cache-native"])
    loads = []  # the warm leases': from the matmul to the carried artifacts' load
    for day, start, end in zip(H100_DAYS, t["start"], t["end"], strict=True):
        lines = stamps(day)
        matmul = next(s for s, text in lines if text.startswith("matmul"))
        assert start == matmul - lines[0][0]
        last_run = max(s for s, text in lines if "startup" in text or "wave 2 done" in text or "option-" in text)
        assert end == lines[-1][0] - last_run
        loads += [s - matmul for s, text in lines if "carried compile artifacts loaded" in text]
    assert t["load-carried"] == tuple(loads) and len(loads) == 2  # warm and twentieth
    assert set(t) == {*sp.MEASURED, *sp.ESTIMATED}  # every kind the plan times has its H100 times


def test_warm_on_an_h100_the_records_second_wave_1_run_cannot_start_beside_the_first():
    """The out-of-memory report of 2026-12-06's warm H100 lease: three programs held 33.25 + 29.09 + 16.72 GiB of
    the card's 79.18 when the third failed. Their peaks with a process's own share do not fit an H100, and do fit an
    H200; two runs fit either."""
    report = (RUNS / H100_DAYS[2] / "one-w1-record-2" / "record-ws1" / "stdout.txt").read_text()
    assert "torch.OutOfMemoryError" in report and "Process 935 has 33.25 GiB memory in use" in report
    assert "31.45" in (RUNS / H100_DAYS[2] / "one-wave2-1.txt").read_text()  # the record's peak, as PEAK_GIB
    assert 33.25 - sp.PEAK_GIB["record"] <= sp.PROCESS_GIB and 29.09 - sp.PEAK_GIB["native"] <= sp.PROCESS_GIB
    h100, h200 = 81559, 143771  # nvidia-smi's memory.total, MiB
    assert not sp.room(["record", "record", "native"], h100) and sp.room(["record", "record", "native"], h200)
    assert sp.room(["record", "record"], h100) and sp.room(["record", "native"], h100)
    assert sp.main(["room", "--gpu-mib", str(h100), "record", "record", "native"]) == 1
    assert sp.main(["room", "--gpu-mib", str(h200), "record", "record", "native"]) == 0


def test_a_failed_wave_1_run_again_needs_its_programs_slowest_run_and_the_end():
    """A rerun is one run alone: it starts when the record's (or native's) slowest measured run and the end's need
    are left, and ranks with parity."""
    need = sp.need_s("record", "H100") + sp.end_item("H100").need_s
    assert sp.fits("run-record", need, "H100") and not sp.fits("run-record", need - 1, "H100")
    assert sp.item_of("run-native").parts == ("native",) and sp.item_of("run-native").group == "parity"
    with pytest.raises(ValueError, match="run-record"):
        sp.item_of("run-both")


def test_on_an_h100_a_cold_table_fits_a_lease_that_started_soon_enough_and_the_script_says_so(tmp_path):
    """At the H100's times a cold table needs a clock of 1,401 s for speed 3 + 3 and 1,462 with parity 5 + 5: a
    lease that held 319 s at the start holds speed and one that held 258 s parity; the script refuses a clock below
    speed's before it copies anything. Warm, 853 s, 1,024 s, and 1,498 s with the startup options. A GPU with no
    measured times is refused. (ONE_WARM=0: this checkout may hold .devcarry/artifacts-H100/, which would make the
    plan warm.)"""
    held = [sp.holds(sp.plan(clock, gpu="H100"), "base", "speed", group)
            for clock, group in ((1400, "speed"), (1401, "speed"), (1461, "parity"), (1462, "parity"))]
    assert held == [False, True, False, True]
    assert sp.lease_budget_s(319) == 1401 and sp.lease_budget_s(258) == 1462
    warm = [sp.holds(sp.plan(clock, True, gpu="H100"), "base", "speed", *groups)
            for clock, groups in ((852, ()), (853, ()), (1023, ("parity",)), (1024, ("parity",)),
                                  (1497, ("parity", "startups")), (1498, ("parity", "startups")))]
    assert warm == [False, True] * 3
    assert sp.gpu_of("NVIDIA H100 80GB HBM3") == "H100" and sp.gpu_of("NVIDIA H200") == "H200"
    h100 = {"ONE_GPU": "NVIDIA H100 80GB HBM3", "ONE_WARM": "0"}
    refused = script(tmp_path, **h100, ONE_BUDGET_S="1400")
    assert refused.returncode == 3 and "on an H100" in refused.stderr
    dry = script(tmp_path, DRY_RUN="1", **h100, ONE_BUDGET_S="1400")
    assert "H100's measured times" in dry.stdout and re.search(r"wave 2 pair 3 .* CUT \(required\)", dry.stdout)
    warm_dry = script(tmp_path, DRY_RUN="1", ONE_GPU="NVIDIA H100 80GB HBM3", ONE_WARM="1")
    assert warm_dry.returncode == 0 and "drops nothing" in warm_dry.stdout
    other = script(tmp_path, ONE_GPU="Tesla T4")
    assert other.returncode == 3 and "no measured times for this GPU" in other.stderr
    assert not (tmp_path / "results").exists()


def test_the_budget_is_one_lease_less_what_it_held_at_the_start_and_the_collection():
    """1,800 s of device time, the machine held 29 minutes at most: the hold is the tighter bound. Unmeasured, the
    start is the slowest measured (87 s, 2026-12-04); measured by lease.sh (LEASE_T0), it is what the lease held."""
    assert (sp.DEVICE_S, sp.LEASE_CAP_S) == (1800, 1740) and sp.BUDGET_S == 1630 and sp.MACHINE_START_S >= 87
    assert sp.BUDGET_S + sp.MACHINE_START_S + sp.COLLECT_S <= min(sp.DEVICE_S, sp.LEASE_CAP_S)
    assert sp.lease_budget_s(47) == 1673
    assert sp.main(["budget", "--held-s", "47"]) == 0


def test_with_the_lease_held_as_measured_on_2026_12_04_the_third_pair_would_have_started():
    """That lease had held about 47 s when the session started. Its third pair found 284 s left on the 1,630 s
    clock (1,346 s in), and its need then (an ungated pair: 285 s plus the end's 11) kept it from starting, 12 s
    short; the lease ended with 161 s of device time unused. On the measured clock it starts, and ends inside the
    lease at its slowest measured times."""
    clock = 1346
    budget = sp.lease_budget_s(47)
    assert sp.fits("pair", budget - clock) and not sp.fits("pair", sp.BUDGET_S - clock)
    assert clock + sp.slowest_s(sp.item_of("pair")) + sp.slowest_s(sp.END) <= budget


def test_a_pair_after_the_first_needs_the_slowest_pair_of_its_session():
    """2026-12-06 (H200): the pairs took 238 and 229 s, and the third found 244 s left. The slowest runs of every
    lease (the record's 174.4 s is 2026-12-04's first pair) and the end's ask 286 s; the second pair of its own
    session, floored at a pair's expected 229.55 s, and the end's, 251 s. Either way it did not start there, but the
    need is the session's own: `fits` says so, and the script passes its pairs."""
    took = ["--pair-took-s", "238", "--pair-took-s", "229"]
    assert sp.item_of("pair").need_s + sp.END.need_s == pytest.approx(286.4)
    assert sp.fits("pair", 251, pairs_took_s=(238, 229)) and not sp.fits("pair", 250, pairs_took_s=(238, 229))
    assert not sp.fits("pair", 285) and sp.main(["fits", "pair", "--left-s", "251", *took]) == 0
    assert sp.main(["fits", "pair", "--left-s", "244", *took]) == 1
    # before a second pair has run, the first is the need: 238 s and the end's
    assert sp.fits("pair", 259, pairs_took_s=(238,)) and not sp.fits("pair", 258, pairs_took_s=(238,))
    # a pair that failed at its start took seconds: a pair's expected time is the least a later one needs
    expected = sp.item_of("pair").expected_s + sp.END.need_s
    assert sp.fits("pair", expected, pairs_took_s=(12,)) and not sp.fits("pair", expected - 1, pairs_took_s=(12,))
    # the plan gates its later pairs the same way, by the pairs it ran before them
    planned = {p.item.name: p for p in sp.plan()}
    assert planned["wave 2 pair 1"].need_s == sp.item_of("pair").need_s
    assert planned["wave 2 pair 3"].need_s == pytest.approx(sp.item_of("pair").expected_s)


# the leases that ran three gated pairs: 253, 235, 210 s (cold) and 198, 197, 200 s (warm)
THREE_PAIRS = [("H100", "2026-12-06-h100-one-short-3x3"), ("H100", "2026-12-06-h100-one-warm")]


@pytest.mark.parametrize("gpu, day", THREE_PAIRS)
def test_no_third_pair_measured_took_more_than_its_need(gpu, day):
    """The first pair after wave 1 carries the record's slowest warm start, so a third pair's need leaves it out;
    every third pair measured took no more than that need (the warm lease's 200 s after 197 only under the floor
    of a pair's expected time)."""
    took = tuple(pairs_took(day))
    assert len(took) == 3 and took[2] <= sp.item_need_s(sp.item_of("pair", gpu), took[:2])


@pytest.mark.parametrize("gpu", sp.GPUS)
@pytest.mark.parametrize("took", [(), (244,), (244, 206), (238, 229), (293, 237), (12,)])
def test_sidebyside_passes_a_pair_wherever_the_sessions_gate_does(gpu, took):
    """sidebyside checks a gated pair again before it starts: with the budget it is handed (the session's time left)
    less a second of its own start and its 20 s, the gate lead and the --need-s of both runs must fit. At the least
    time left that passes the session's gate that check passes too, or the pair would be skipped there."""
    left = sp.item_need_s(sp.item_of("pair", gpu), took) + sp.end_item(gpu).need_s
    assert sp.fits("pair", left, gpu, took)
    asked = sp.need_s("gate-lead") + sp.record_in_pair_need_s(gpu, took) + sp.need_s("native-timed", gpu)
    assert left - 1 - 20 >= asked
    assert sp.main(["need", "record", "--gpu", gpu, *[f"--pair-took-s={t}" for t in took]]) == 0
    if not took:
        assert sp.record_in_pair_need_s(gpu) == sp.need_s("record", gpu)


def test_the_nineteenth_sessions_third_pair_starts_now():
    """2026-12-06 (nineteenth session, H100, cold): the pairs took 244 and 206 s and the third found 255 s on the
    clock. Asked for the first pair's 244 s and the end's 25 s it did not start; at the second's 206 s (above a
    pair's expected 202.1 s) it needs 231 and starts, and at the second's pace it ends with about 24 s for the end."""
    assert not sp.fits("pair", 255, "H100", pairs_took_s=(244,))
    assert sp.fits("pair", 255, "H100", pairs_took_s=(244, 206))
    need = sp.item_need_s(sp.item_of("pair", "H100"), (244, 206)) + sp.end_item("H100").need_s
    assert sp.item_of("pair", "H100").expected_s < 206 and need == 206 + 25
    took = ["--gpu", "H100", "--pair-took-s", "244", "--pair-took-s", "206"]
    assert sp.main(["fits", "pair", "--left-s", "230", *took]) == 1
    assert sp.main(["fits", "pair", "--left-s", "231", *took]) == 0


def ends_in_time(planned: list, budget: float) -> bool:
    """Every item that runs, and the end after it, ends within the budget at what its gate asked for: its slowest
    measured times (a pair after the first: the slowest pair before it in the plan, but the first once there are
    two)."""
    end = sp.end_item(planned[0].item.gpu)
    return all(p.starts_s + p.need_s + (0 if p.item == end else sp.slowest_s(end)) <= budget
               for p in planned if p.runs)


def test_what_a_gate_asks_for_is_the_slowest_measured_runs_or_the_sessions_slowest_pair():
    for took in (lambda item: item.expected_s, sp.slowest_s):
        pairs = []
        for p in sp.plan(took=took):
            if p.item.group == "speed" and pairs:
                assert p.need_s == max(*pairs, p.item.expected_s)
            else:
                assert p.need_s == pytest.approx(sp.slowest_s(p.item), abs=0.1)
            if p.runs and p.item.group == "speed":
                pairs.append(took(p.item))


@pytest.mark.parametrize("warm", [False, True])
def test_the_plan_fits_one_lease_and_no_started_item_can_overrun_it(warm):
    """Cold, one lease holds the start, wave 1's first and second runs, speed 3 + 3, parity 5 + 5 and the end; the
    startup options do not fit beside the record's cold compile, so they are dropped. With carried caches
    everything runs. If every run took its slowest measured time, each item started still ends, with the end after
    it, within the budget (the gate cuts later items instead)."""
    planned = sp.plan(warm=warm)
    assert sp.holds(planned, "base", "speed", "parity")
    assert all(p.runs == warm for p in planned if p.item.group == "startups")
    for gated in (planned, sp.plan(warm=warm, took=sp.slowest_s)):
        assert ends_in_time(gated, sp.BUDGET_S)


def test_parity_ranks_below_speed_though_it_runs_first(capsys):
    """Wave 1's second runs come before wave 2 in time, but rank after it: at 1,560 s they are dropped (4 + 4 final
    losses) so that the third pair fits, and `plan` says so; at the default budget (1,630 s) they are kept. With
    2026-12-06's times (gated pairs, a slower wave 1) the bounds are 1,524 s for speed 3 + 3 and 1,575 s with parity
    5 + 5 (1,484 and 1,534 before)."""
    planned = {p.item.name: p for p in sp.plan(1560)}
    assert planned["wave 2 pair 3"].runs and not planned["wave 1 runs 2"].runs
    assert sp.main(["plan", "--budget-s", "1560"]) == 0
    out = capsys.readouterr().out
    assert "drops parity: parity 5 + 5" in out and "drops startups" in out and "drops speed" not in out
    assert sp.main(["has", "parity", "--budget-s", "1560"]) == 1 and sp.main(["has", "speed"]) == 0
    assert sp.main(["has", "parity", "--budget-s", "1575"]) == 0
    assert sp.main(["has", "speed", "--budget-s", "1524"]) == 0 and sp.main(["has", "speed", "--budget-s", "1523"]) == 1
    # 2026-12-06's lease had held 121 s at the start (its clock 1,599 s): parity 5 + 5 is kept there
    assert sp.main(["has", "parity", "--budget-s", str(sp.lease_budget_s(121))]) == 0
    default = {p.item.name: p for p in sp.plan()}
    assert default["wave 1 runs 2"].runs and default["wave 2 pair 3"].runs
    assert sp.main(["has", "parity"]) == 0


def test_a_short_budget_cuts_a_whole_pair_and_the_plan_says_it_does_not_fit(capsys):
    """1,400 s: the third wave-2 pair does not fit even without parity. It is cut as a pair (the old check ran its
    record run and cut native's), and `plan` exits 3, which makes device_session.sh refuse to start."""
    planned = {p.item.name: p for p in sp.plan(1400)}
    assert planned["wave 2 pair 2"].runs and not planned["wave 2 pair 3"].runs
    assert sp.item_of("pair").parts == ("gate-lead", "record", "native-timed", "pair-overhead")
    assert sp.main(["plan", "--budget-s", "1400"]) == 3
    out = capsys.readouterr().out
    assert "wave 2 pair 3" in out and "drops speed: speed 3 + 3" in out


def test_a_pair_starts_only_when_both_its_runs_and_the_end_can_finish():
    need = (sp.need_s("gate-lead") + sp.need_s("record") + sp.need_s("native-timed") + sp.need_s("pair-overhead")
            + sp.need_s("end"))
    assert sp.item_of("pair").need_s + sp.END.need_s == pytest.approx(need) and need >= 20 + 174.4 + 52.1 + 10.3 + 21
    assert sp.fits("pair", need) and not sp.fits("pair", need - 1)
    assert not sp.fits("pair", 60)  # what the per-run check once accepted
    assert sp.main(["fits", "option-artifacts", "--left-s", "100"]) == 1
    with pytest.raises(ValueError, match="choose pair"):
        sp.item_of("option-everything")


def script(tmp_path, **env) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "benchmarks/device_session.sh", str(tmp_path / "results"), "one"], cwd=REPO_ROOT,
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=60)


def test_the_scripts_dry_run_prints_the_plan_and_runs_nothing(tmp_path):
    done = script(tmp_path, DRY_RUN="1")
    assert done.returncode == 0, done.stderr
    assert "budget 1630 s" in done.stdout and "wave 2 pair 3" in done.stdout and "startup artifacts" in done.stdout
    assert re.search(r"wave 2 pair 3 +speed +\d+s +\d+s +\d+s +runs", done.stdout) and "drops parity" not in done.stdout
    assert "drops startups" in done.stdout
    assert not (tmp_path / "results").exists()
    warm = script(tmp_path, DRY_RUN="1", ONE_WARM="1")
    assert warm.returncode == 0 and re.search(r"startup artifacts .* runs", warm.stdout)
    assert "drops nothing" in warm.stdout


def test_a_refused_call_spends_from_the_lease_so_the_plan_shrinks_with_the_device_time_left(tmp_path):
    """2026-12-05: two refused calls took 163 s of the session's 1,800; the lease after them had 1,637 s. The
    script's clock is that, less the held start and the collection, and a plan that no longer fits is refused
    before anything runs."""
    assert sp.lease_budget_s(60, device_s=1709) == 1629 and sp.lease_budget_s(60, device_s=1800) == 1660
    held = script(tmp_path, DRY_RUN="1", LEASE_HELD_S="60", LEASE_DEVICE_S="1709")
    assert held.returncode == 0 and "budget 1629 s" in held.stdout, held.stdout + held.stderr
    short = script(tmp_path, LEASE_HELD_S="60", LEASE_DEVICE_S="1547")
    assert short.returncode == 3 and "does not fit" in short.stderr
    assert not (tmp_path / "results").exists()


def test_a_short_session_with_not_one_pair_is_refused_warm_or_where_a_cold_wave_1_does_not_fit(tmp_path):
    """ONE_SHORT=1 runs what fits; a clock that holds no pair times nothing: warm, it is refused at once, and cold
    too where wave 1 itself does not fit (H200: 12 + 807.1 + 21 s)."""
    warm = script(tmp_path / "w", ONE_SHORT="1", ONE_BUDGET_S="400", ONE_GPU="NVIDIA H200", ONE_WARM="1")
    assert warm.returncode == 3 and "not even one pair fits ONE_BUDGET_S=400 s on an H200" in warm.stderr
    cold = script(tmp_path / "c", ONE_SHORT="1", ONE_BUDGET_S="830", ONE_GPU="NVIDIA H200")
    assert cold.returncode == 3 and "on an H200 (nor a cold wave 1)" in cold.stderr
    assert not (tmp_path / "w" / "results").exists() and not (tmp_path / "c" / "results").exists()


@pytest.mark.slow
def test_a_cold_short_session_with_not_one_pair_runs_wave_1_for_its_artifacts(tmp_path):
    """Cold at 1,000 s (H200) no pair fits but wave 1 does: it runs, packs both programs' compile artifacts (what
    makes the next lease warm); its pairs are still each gated on the clock as it is (the stand-ins take no time,
    so here they run)."""
    progress, calls = run_phase_one(tmp_path, 1000, ONE_SHORT="1")
    assert "not one pair fits: wave 1 runs for the compile artifacts it packs" in progress
    assert "artifacts-record.bin packed" in progress and "artifacts-native.bin packed" in progress
    assert (tmp_path / "results" / "parts" / "PARTS.sha256").exists()
    assert progress.index("artifacts-record.bin packed") < progress.index("one: pair: needs")


def test_the_script_refuses_a_plan_that_does_not_fit(tmp_path):
    done = script(tmp_path, ONE_BUDGET_S="1400")
    assert done.returncode == 3 and "does not fit" in done.stderr
    assert not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_short_session_runs_the_pairs_that_fit_and_says_what_makes_it_a_table(tmp_path):
    """2026-12-05: a call taken back after 310 s left 1,490 s of device time, a clock of about 1,410 s: speed 3 + 3
    no longer fits. Refused by default; ONE_SHORT=1 runs wave 1 with its parity runs, as the plan keeps them, and
    each pair its gate passes on the clock (here every one: the stand-ins take no time)."""
    planned = sp.plan(1410)
    assert not sp.fits_whole(planned)
    assert [p.item.name for p in planned if p.runs and p.item.group in ("speed", "parity")] == [
        "wave 1 runs 2", "wave 2 pair 1", "wave 2 pair 2"]
    progress, calls = run_phase_one(tmp_path, 1410, ONE_SHORT="1")
    assert "SHORT (ONE_SHORT=1)" in progress and "a table only with 3 + 3 pairs and parity 5 + 5" in progress
    # its artifacts, what lets the next session on this GPU hold the table, are packed in wave 1 (as every cold
    # session's), before wave 2
    assert -1 < progress.index("artifacts-record.bin packed") < progress.index("one: wave 2 (GPU alone)")
    assert progress.count("one: pair: needs") == 3
    assert sorted(who(c) + re.search(r"--seed (\d+)", c)[1] for c in calls if "--shared-gpu" in c) == [
        "native101", "native102", "record101", "record102"]


def test_sidebyside_takes_a_need_per_program(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sidebyside_main(["--need-s", "record", "--dry-run", "--data", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "--need-s record: expected PROGRAM=SECONDS" in capsys.readouterr().err


@pytest.mark.parametrize("gpu", sp.GPUS)
@pytest.mark.parametrize("warm", [False, True])
def test_at_any_budget_no_item_starts_that_its_slowest_runs_would_overrun(warm, gpu):
    """Whatever the budget (a later start, a slower machine), an item starts only when all of its runs and the end
    after it, at their slowest measured times, end before the budget does; and in a plan the script starts (speed
    3 + 3 fits), what runs follows the priority: no item of a group runs unless every item of the groups above it
    does."""
    ranks = {g: i for i, g in enumerate(["base", *sp.GROUPS])}
    for budget in range(300, 1801, 5):
        for took in (lambda item: item.expected_s, sp.slowest_s):
            assert ends_in_time(sp.plan(budget, warm, took, gpu), budget), budget
        planned = sp.plan(budget, warm, gpu=gpu)
        if not sp.fits_whole(planned):
            continue  # refused: `plan` exits 3
        lowest_whole = min((ranks[p.item.group] for p in planned if not p.runs), default=len(ranks))
        assert all(ranks[p.item.group] <= lowest_whole for p in planned if p.runs), budget


# ---- the script's phase one, its programs replaced by stand-ins that log their arguments -------------------------

STANDIN_SBS = '''import json, os, pathlib, sys, time
a = sys.argv[1:]
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write(" ".join(a) + "\\n")
if "--matmul" in a:
    print('{"tflops": 0}')
    sys.exit(0)
if os.environ.get("REPRO_COMPILE_ARTIFACTS_SAVE"):  # what a first run's sitecustomize saves at exit
    pathlib.Path(os.environ["REPRO_COMPILE_ARTIFACTS_SAVE"]).write_bytes(os.urandom(17_000_000))
out = pathlib.Path(a[a.index("--out") + 1])
out.mkdir(parents=True, exist_ok=True)
who = a[a.index("--only") + 1] if "--only" in a else "record"
(out / f"{who}-ws1").mkdir(exist_ok=True)
(out / f"{who}-ws1" / "stdout.txt").write_text("step:0/80 val_loss:7\\n")
if "--shared-gpu" in a:  # wave 1's runs take STANDIN_SHARED_S after their step 0
    time.sleep(float(os.environ.get("STANDIN_SHARED_S", "0")))
failed = out.name == os.environ.get("STANDIN_FAIL") and not (out.parent / "standin-failed-once").exists()
if failed:  # this folder's first run fails (out of memory, say); the run again does not
    (out.parent / "standin-failed-once").touch()
(out / "summary.json").write_text(json.dumps({"runs": {"1": {who: [{"startup_s": 1.0, "rc": 1 if failed else 0}]}}}))
with open(os.environ["STANDIN_LOG"], "a") as f:
    f.write("ended " + str(out) + "\\n")
'''


def run_phase_one(tmp_path, budget: int, phase: str = "one", **env) -> tuple[str, list[str]]:
    """device_session.sh one (or PHASE) on a tree of its own files with sidebyside.py and xent_check.py as stand-ins
    and an nvidia-smi that names one H200: (progress.txt, the stand-in sidebyside's argument lines; sbs.log has
    them with an "ended OUT" line as each run exits)."""
    tree, bin_dir = tmp_path / "tree", tmp_path / "bin"
    (tree / "benchmarks").mkdir(parents=True, exist_ok=True)
    bin_dir.mkdir(exist_ok=True)
    for name in ("device_session.sh", "session_plan.py"):
        (tree / "benchmarks" / name).write_text((REPO_ROOT / "benchmarks" / name).read_text())
    (tree / "benchmarks" / "sidebyside.py").write_text(STANDIN_SBS)
    (tree / "benchmarks" / "xent_check.py").write_text("")
    (bin_dir / "nvidia-smi").write_text(  # one H200, or the GPU and memory STANDIN_GPU and STANDIN_MIB name
        '#!/bin/sh\ncase "$*" in *memory.total*nounits*) echo "${STANDIN_MIB:-143771}" ;;\n'
        '*) echo "GPU 0: NVIDIA ${STANDIN_GPU:-H200}" ;; esac\n')
    (bin_dir / "nvidia-smi").chmod(0o755)
    log = tmp_path / "sbs.log"
    done = subprocess.run(["bash", "benchmarks/device_session.sh", str(tmp_path / "results"), phase], cwd=tree,
                          env=dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", ONE_SNAP=str(tmp_path / "snap"),
                                   ONE_BUDGET_S=str(budget), STANDIN_LOG=str(log), **env),
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    calls = [line for line in log.read_text().splitlines() if not line.startswith("ended ")]
    return (tmp_path / "results" / "progress.txt").read_text(), calls


def who(call: str) -> str:
    return re.search(r"--only (\w+)", call)[1]


@pytest.mark.slow
@pytest.mark.parametrize("budget", [1560, sp.BUDGET_S])
def test_a_cold_session_asks_for_parity_again_at_the_records_first_timed_step(tmp_path, budget):
    """At 1,560 s the plan drops parity, at the default budget it keeps it. Cold, wave 1 runs each program twice
    (seeds 101, 102) either way: native's second run inside the record's compile, and the record's once the plan,
    asked again at its run 1's first timed step, found that it fits the clock left then (the stand-ins take no
    time). Wave 2 runs 3 pairs, each after its gate, and every startup option run is handed its own need."""
    keeps = sp.main(["has", "parity", "--budget-s", str(budget)]) == 0
    assert keeps == (budget == sp.BUDGET_S)
    progress, calls = run_phase_one(tmp_path, budget)
    wave1 = [c for c in calls if "--shared-gpu" in c]
    assert sorted(who(c) + re.search(r"--seed (\d+)", c)[1] for c in wave1) == [
        "native101", "native102", "record101", "record102"]
    assert ("drops: startups" if keeps else "drops: parity startups") in progress
    assert "parity fits, its run 2 starts" in progress  # asked at the first timed step either way
    wave2 = [c for c in calls if "one-wave2-" in c and "--summarize" not in c]
    assert progress.count("one: pair: needs") == 3 and len(wave2) == 3
    # the second pair's need is the first pair of this session, the third's the slowest after the first
    assert progress.count("(the slowest pair of this session)") == 1
    assert progress.count("(the slowest pair of this session after its first)") == 1
    # both programs' artifacts are packed in wave 1, after native's wave 1 and before wave 2
    assert (progress.index("wave 1 native runs done") < progress.index("artifacts-record.bin packed")
            < progress.index("wave 1 record runs done") < progress.index("one: wave 2 (GPU alone)"))
    # gated pairs: native's need is its run after the record's exit; the record's, its slowest run before this
    # session's pairs and its part of their pace after them (the stand-ins' pairs take no time: a pair's expected)
    assert all("--gate-native 20.0" in c and "--need-s native=52.1" in c for c in wave2)
    later = sp.record_in_pair_need_s("H200", (0,))
    assert later < 174.4 and "--need-s record=174.4" in wave2[0]
    assert all(f"--need-s record={later}" in c for c in wave2[1:])
    options = [c for c in calls if "one-startup-" in c]
    assert options and all(f"--need-s {who(c)}=" in c for c in options)
    (parity,) = [c for c in calls if "--out" in c and c.endswith("one-parity")]
    assert "one-w1-record-2" in parity and "one-w1-native-2" in parity and "one-w1-record-1" in parity


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_asked_again_at_the_first_timed_step_parity_fits_after_a_fast_compile_and_never_at_speeds_cost(gpu):
    """The plan's need for a cold wave 1 is its slowest compile (972.9 s on the H100s, 606.7 the fastest): once the
    record's first timed step has come, what is left is run 1's rest, the second runs, three pairs and the end. On
    an H100 whose lease had held 259 s (a clock of 1,461 s: the plan drops parity), the nineteenth session's compile
    leaves 843 s at that step, and parity fits; that of 2026-12-05, 602 s, where speed alone does not, so parity is
    not taken from it."""
    def has_parity(left: float) -> bool:
        return sp.main(["has", "parity", "--at-first-step", "--budget-s", str(left), "--gpu", gpu]) == 0

    def speed_fits(left: float) -> bool:
        return sp.fits_whole(sp.plan(left, gpu=gpu, at_first_step=True))

    if gpu == "H100":
        clock, start = sp.lease_budget_s(259), sp.expected_s("start", "H100")
        assert clock == 1461 and sp.main(["has", "parity", "--budget-s", "1461", "--gpu", "H100"]) == 1
        assert has_parity(clock - start - 606.7) and not has_parity(clock - start - 847.9)
        assert not speed_fits(clock - start - 847.9)
    for left in range(300, 1200, 3):  # what runs is gated at its need; parity only with speed whole
        planned = sp.plan(left, gpu=gpu, at_first_step=True)
        assert ends_in_time(planned, left), left
        assert has_parity(left) == (speed_fits(left) and sp.holds(planned, "parity")), left
    assert any(has_parity(left) for left in range(300, 1200)) and not has_parity(600)
    with pytest.raises(SystemExit):
        sp.main(["has", "parity", "--at-first-step", "--warm", "--budget-s", "900"])


def test_a_cold_wave_1s_rest_is_the_records_run_1_after_its_first_timed_step():
    """wave1-cold-rest: each cold lease's record run 1, wall less startup."""
    days = {"H200": DAYS, "H100": ("2026-12-05-h100-one-short", "2026-12-06-h100-one-short-3x3",
                                   "2026-12-06-h100-nineteenth-2x2")}
    for gpu, leases in days.items():
        rests = [round(wall - startup, 1) for day in leases
                 for _, wall, startup in walls(day, "one-w1-record-1.txt")[:1]]
        assert rests == list(sp.times_s("wave1-cold-rest", gpu)), gpu


def site_that_loads(tree) -> Path:
    """A stand-in benchmarks/compile_artifacts/ in TREE whose script mode says it loaded its file: its folder."""
    site = tree / "benchmarks" / "compile_artifacts"
    site.mkdir(parents=True, exist_ok=True)
    (site / "sitecustomize.py").write_text("import sys; print('[compile artifacts] loaded', sys.argv[1])\n")
    return site


@pytest.mark.slow
def test_a_sessions_artifacts_come_back_in_parts_and_make_the_next_sessions_plan_warm(tmp_path):
    """Wave 1 packs its compile artifacts (xz, 16 MB parts, SHA256SUMS) beside the record's second run; put in
    .devcarry/artifacts-H200/ they make the next session's plan warm, and are loaded into its caches before wave 1,
    each checked by its sha256. A part that does not match is not loaded, and the session says so."""
    def results_of(session: str, name: str) -> str:
        return (tmp_path / session / "results" / name).read_text()

    progress, _ = run_phase_one(tmp_path / "a", sp.BUDGET_S)
    parts = tmp_path / "a" / "results" / "parts"
    names = sorted(p.name for p in parts.iterdir())
    assert names[:2] == ["PARTS.sha256", "SHA256SUMS"] and "artifacts-record.bin.xz.part-00" in names
    assert "packed" in progress
    assert "artifacts-record.bin.xz.part-01" in names  # 17 MB of random bytes: two parts
    assert all(p.stat().st_size <= 16_000_000 for p in parts.iterdir())

    carried = tmp_path / "b" / "tree" / ".devcarry" / "artifacts-H200"
    shutil.copytree(parts, carried)
    site = site_that_loads(tmp_path / "b" / "tree")
    missing = carried / "artifacts-native.bin.xz.part-01"
    kept = missing.read_bytes()
    missing.unlink()  # one part not carried yet: cold
    progress, calls = run_phase_one(tmp_path / "b", sp.BUDGET_S)
    assert "carried compile artifacts" not in progress and "drops startups" in results_of("b", "plan.txt")
    missing.write_bytes(kept)
    shutil.rmtree(tmp_path / "b" / "results")
    progress, calls = run_phase_one(tmp_path / "b", sp.BUDGET_S)
    assert "carried compile artifacts loaded" in progress and "packed" not in progress
    plan = results_of("b", "plan.txt")
    assert re.search(r"wave 1 runs 1 +base +\d+s +152s", plan) and "drops nothing" in plan  # warm: everything fits
    loads = results_of("b", "artifacts-load.txt")
    assert "artifacts-record-carried.bin" in loads and "artifacts-native-carried.bin" in loads

    (tmp_path / "c" / "tree" / ".devcarry").mkdir(parents=True)
    (tmp_path / "c" / "tree" / "benchmarks").mkdir(parents=True)
    os.rename(carried, tmp_path / "c" / "tree" / ".devcarry" / "artifacts-H200")
    os.rename(site, tmp_path / "c" / "tree" / "benchmarks" / "compile_artifacts")
    sums = tmp_path / "c" / "tree" / ".devcarry" / "artifacts-H200" / "SHA256SUMS"
    lines = sums.read_text().splitlines()
    sums.write_text("".join(("0" * 64 + line[64:] if "native" in line else line) + "\n" for line in lines))
    progress, _ = run_phase_one(tmp_path / "c", sp.BUDGET_S)
    assert "artifacts-native.bin: sha256 differs" in progress and "artifacts NOT loaded" in progress


@pytest.mark.slow
def test_one_programs_parts_alone_plan_cold(tmp_path):
    """Native's parts without the record's pass their sha256 but would plan warm and then compile the record cold
    inside a warm plan's gates: a carried folder is whole only with both programs' parts."""
    run_phase_one(tmp_path / "a", sp.BUDGET_S, phase="carry")
    parts = tmp_path / "a" / "results" / "parts"
    carried = tmp_path / "b" / "tree" / ".devcarry" / "artifacts-H200"
    shutil.copytree(parts, carried)
    site_that_loads(tmp_path / "b" / "tree")
    progress, _ = run_phase_one(tmp_path / "b", sp.BUDGET_S)
    assert "carried compile artifacts" not in progress and "drops startups" in (
        tmp_path / "b" / "results" / "plan.txt").read_text()


@pytest.mark.slow
def test_the_carry_check_packs_native_loads_its_parts_into_empty_caches_and_runs_from_them(tmp_path):
    """Phase carry: a cold 6-step native run saves its artifacts, they are packed (parts published whole, a copy
    kept), loaded from that copy into empty caches, and a second run starts from those caches."""
    site_that_loads(tmp_path / "tree")
    progress, calls = run_phase_one(tmp_path, sp.BUDGET_S, phase="carry")
    assert [("--steps 6" in c, who(c), c.split("--out ")[1].split()[0].rsplit("/", 1)[1]) for c in calls
            if "--only" in c] == [(True, "native", "carry-cold"), (True, "native", "carry-warm")]
    assert "artifacts-native.bin packed" in progress and "carry: parts loaded into empty caches" in progress
    results = tmp_path / "results"
    assert not (results / "parts.tmp").exists()
    names = sorted(p.name for p in (results / "parts").iterdir())
    assert names == ["PARTS.sha256", "SHA256SUMS", "artifacts-native.bin.xz.part-00",
                     "artifacts-native.bin.xz.part-01"]
    kept = tmp_path / "snap" / ".devcarry" / "artifacts-check"
    assert sorted(p.name for p in kept.iterdir()) == names
    assert "artifacts-native-carried.bin" in (results / "artifacts-load.txt").read_text()


def wave1_order(tmp_path, gpu: str, mib: int) -> list[str]:
    """Phase one's wave 1 on a stand-in GPU whose shared runs take 8 s after their step 0 (the script looks for
    step 0 every 5 s): its runs' starts and
    ends in order, as "start record 102" and "end one-w1-record-1"."""
    run_phase_one(tmp_path, sp.BUDGET_S, STANDIN_GPU=gpu, STANDIN_MIB=str(mib), STANDIN_SHARED_S="8", ONE_WARM="1")
    order = []
    for line in (tmp_path / "sbs.log").read_text().splitlines():
        if line.startswith("ended ") and "/one-w1-" in line:
            order.append("end " + line.rsplit("/", 1)[1])
        elif "--shared-gpu" in line:
            seed = re.search(r"--seed (\d+)", line)[1]
            order.append(f"start {who(line)} {seed}")
    return order


@pytest.mark.slow
def test_the_records_second_wave_1_run_starts_beside_the_first_only_where_three_runs_fit(tmp_path):
    """On an H200 (141 GiB) the record's run 2 starts once run 1 has printed step 0, beside it and native; on an
    80 GB H100 three runs' peaks do not fit, and run 2 starts once run 1 (or native's two runs) has ended: on
    2026-12-06 it started beside them and ran out of memory."""
    h200 = wave1_order(tmp_path / "h200", "H200", 143771)
    assert h200.index("start record 102") < h200.index("end one-w1-record-1")
    h100 = wave1_order(tmp_path / "h100", "H100 80GB HBM3", 81559)
    assert h100.index("end one-w1-record-1") < h100.index("start record 102")
    assert "the record's run 2 starts once its run 1 has ended (record + record + native: 96.6 GiB" in (
        tmp_path / "h100" / "results" / "progress.txt").read_text()


@pytest.mark.slow
def test_a_failed_wave_1_run_runs_again_alone_before_the_startup_options(tmp_path):
    """The record's run 2 fails in wave 1; after wave 2 it runs again on its seed (102) with the GPU alone and its
    program's need, before the startup options; the failed run is kept as one-w1-record-2.failed, and parity takes
    the run again."""
    progress, calls = run_phase_one(tmp_path, sp.BUDGET_S, STANDIN_FAIL="one-w1-record-2")
    results = tmp_path / "results"
    assert (results / "one-w1-record-2.failed" / "summary.json").exists()
    assert (results / "one-w1-record-2.failed.txt").exists()
    again = [i for i, c in enumerate(calls) if "--summarize" not in c and "/one-w1-record-2 " in f"{c} "]
    assert len(again) == 2  # the failed run and the run again
    rerun = calls[again[1]]
    assert "--seed 102" in rerun and "--shared-gpu" not in rerun and "--need-s record=" in rerun
    first_option = next(i for i, c in enumerate(calls) if "one-startup-" in c)
    (pair3,) = [i for i, c in enumerate(calls) if "--summarize" not in c and c.endswith("one-wave2-3")]
    assert pair3 < again[1] < first_option
    assert "one: wave 1's record run 2 again, alone: record 1.0 s (rc 0)" in progress
    assert "run-record: needs" in progress
    (parity,) = [c for c in calls if c.endswith("one-parity")]
    assert "one-w1-record-2 " in parity and ".failed" not in parity


@pytest.mark.slow
def test_second_runs_a_warm_plan_dropped_run_alone_after_wave_2_where_their_need_is_left(tmp_path):
    """Warm at 950 s an H200's plan keeps speed but not parity: wave 1 runs each program once (no compile to hide
    a second run in), and after wave 2, before the startup options, the record's and native's seed-102 runs run
    alone, each gated by its program's need; parity takes them."""
    assert sp.main(["has", "parity", "--budget-s", "950", "--warm"]) == 1
    progress, calls = run_phase_one(tmp_path, 950, ONE_WARM="1")
    assert sorted(who(c) for c in calls if "--shared-gpu" in c) == ["native", "record"]
    alone = [i for i, c in enumerate(calls) if "--summarize" not in c and "--seed 102" in c]
    assert [who(calls[i]) for i in alone] == ["record", "native"]
    assert all("--shared-gpu" not in calls[i] and f"--need-s {who(calls[i])}=" in calls[i] for i in alone)
    (pair3,) = [i for i, c in enumerate(calls) if "--summarize" not in c and c.endswith("one-wave2-3")]
    first_option = next((i for i, c in enumerate(calls) if "one-startup-" in c), len(calls))
    assert pair3 < alone[0] < alone[1] < first_option
    assert "one: wave 1's record run 2 (not run in wave 1), alone: record 1.0 s (rc 0)" in progress
    assert not (tmp_path / "results" / "one-w1-record-2.failed").exists()
    (parity,) = [c for c in calls if c.endswith("one-parity")]
    assert "one-w1-record-2 " in parity and "one-w1-native-2 " in parity
