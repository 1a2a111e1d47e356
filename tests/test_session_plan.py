"""benchmarks/session_plan.py, the time budget of device_session.sh's phase `one`, and the script's use of it (CPU).

    .venv/bin/python -m pytest -q tests/test_session_plan.py

On 2026-12-01 the session checked its budget per run with 60 s to spare: the cut fell on native's third run and
the record's startup options, and the options it did run were timed under the record's compile. The plan now gates
whole (record, native) pairs by the measured run times with a margin, and must fit one lease.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest

from benchmarks import session_plan as sp
from benchmarks.sidebyside import main as sidebyside_main
from tests.paths import REPO_ROOT

RUNS = REPO_ROOT / "docs" / "device-runs" / "2026-12-01-h200-one"
WALL = re.compile(r"^\[(record|native) ws1 run \d\] rc 0, wall ([\d.]+) s, startup ([\d.]+) s", re.M)


def walls(name: str) -> list[tuple[str, float, float]]:
    return [(m[1], float(m[2]), float(m[3])) for m in WALL.finditer((RUNS / name).read_text())]


def test_the_measured_times_are_the_committed_runs():
    wave2 = walls("one-wave2.txt")
    assert sp.MEASURED["record"] == tuple(w for who, w, _ in wave2 if who == "record")
    assert sp.MEASURED["native"] == tuple(w for who, w, _ in wave2 if who == "native")
    assert sp.MEASURED["native-option"] == tuple(
        walls(f"one-startup-{o}-native.txt")[0][1] for o in ("artifacts", "no-aot-cache"))
    (_, _, cold_startup), = walls("one-w1-record-1.txt")
    (_, second_wall, second_startup), = walls("one-w1-record-2.txt")
    assert sp.MEASURED["wave1-cold"] == (round(cold_startup + second_wall, 1),)
    assert sp.MEASURED["wave1-warm"] == (round(second_startup + second_wall, 1),)


def test_the_budget_is_one_lease_less_the_machines_start_and_the_collection():
    assert sp.BUDGET_S == 1650
    assert sp.BUDGET_S + sp.MACHINE_START_S + sp.COLLECT_S <= sp.DEVICE_S
    assert sp.BUDGET_S + sp.COLLECT_S <= sp.CALL_LIMIT_S


@pytest.mark.parametrize("warm", [False, True])
def test_the_plan_fits_one_lease_and_no_started_item_can_overrun_it(warm):
    """Every required item runs (cold, the startup options do not fit beside the record's cold compile; with
    carried caches they do); and if every run took its slowest measured time, each item started still ends
    within the budget (the gate cuts later items instead)."""
    planned = sp.plan(warm=warm)
    assert all(p.runs for p in planned if p.item.required)
    assert all(p.runs == warm for p in planned if not p.item.required)
    for gated in (planned, sp.plan(warm=warm, took=sp.slowest_s)):
        assert all(p.starts_s + sp.slowest_s(p.item) <= sp.BUDGET_S for p in gated if p.runs)


def test_a_short_budget_cuts_a_whole_pair_and_the_plan_says_it_does_not_fit(capsys):
    """1,400 s: the third wave-2 pair does not fit. It is cut as a pair (the old check ran its record run and cut
    native's), and `plan` exits 3, which makes device_session.sh refuse to start."""
    planned = {p.item.name: p for p in sp.plan(1400)}
    assert planned["wave 2 pair 2"].runs and not planned["wave 2 pair 3"].runs
    assert sp.item_of("pair").parts == ("record", "native")
    assert sp.main(["plan", "--budget-s", "1400"]) == 3
    assert "wave 2 pair 3" in capsys.readouterr().out


def test_a_pair_starts_only_when_both_its_runs_can_finish():
    need = sp.need_s("record") + sp.need_s("native")
    assert sp.item_of("pair").need_s == pytest.approx(need) and need >= 1.1 * (155.1 + 104.2)
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
    assert "budget 1650 s" in done.stdout and "wave 2 pair 3" in done.stdout and "startup artifacts" in done.stdout
    assert not (tmp_path / "results").exists()
    warm = script(tmp_path, DRY_RUN="1", ONE_WARM="1")
    assert warm.returncode == 0 and re.search(r"startup artifacts .* runs", warm.stdout)


def test_the_script_refuses_a_plan_that_does_not_fit(tmp_path):
    done = script(tmp_path, ONE_BUDGET_S="1400")
    assert done.returncode == 3 and "does not fit" in done.stderr
    assert not (tmp_path / "results").exists()


def test_sidebyside_takes_a_need_per_program(tmp_path, capsys):
    with pytest.raises(SystemExit):
        sidebyside_main(["--need-s", "record", "--dry-run", "--data", str(tmp_path), "--out", str(tmp_path / "o")])
    assert "--need-s record: expected PROGRAM=SECONDS" in capsys.readouterr().err


@pytest.mark.parametrize("warm", [False, True])
def test_at_any_budget_no_item_starts_that_its_slowest_runs_would_overrun(warm):
    """Whatever the budget (a later start, a slower machine), an item starts only when all of its runs, at their
    slowest measured times, end before the budget does."""
    for budget in range(300, 1801, 5):
        for took in (lambda item: item.expected_s, sp.slowest_s):
            late = [p.item.name for p in sp.plan(budget, warm, took) if p.runs
                    and p.starts_s + sp.slowest_s(p.item) > budget]
            assert late == [], budget
