"""benchmarks/lever_ab.sh on the CPU: the levers it refuses, and the runs it plans (DRY_RUN=1, sidebyside --dry-run);
benchmarks/lever_lease.sh around it: a detached session from a copy of the tree, collected into one archive.

    .venv/bin/python -m pytest -q tests/test_lever_ab.py
"""

import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from tests.test_sidebyside import small_shards

REPO_ROOT = Path(__file__).resolve().parent.parent


def dry_env(tmp_path: Path, **extra: str) -> dict:
    bin_dir = tmp_path / "bin"  # `python3` in the script is this interpreter, as on the device machine
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "python3"  # a script, not a link: a link out of the venv's folder leaves the venv
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DRY_RUN="1", REPEAT="2", SEED="11",
                PYTHONPATH=str(REPO_ROOT), **extra)


def lever_ab(tmp_path: Path, *levers: str, data: Path | None = None, check: str = "") -> subprocess.CompletedProcess:
    env = dry_env(tmp_path, DEST=str(tmp_path / "ab"), DATA=str(data or tmp_path / "none"), CHECK_TESTS=check)
    return subprocess.run(["bash", "benchmarks/lever_ab.sh", *levers], cwd=REPO_ROOT, env=env, capture_output=True,
                          text=True, timeout=300)


def test_a_lever_that_is_not_a_boolean_option_is_refused(tmp_path):
    small_shards(tmp_path / "d")
    for bad in ("no_such_lever", "seed", "fused_loss_transposes"):
        done = lever_ab(tmp_path, "fused_loss", bad, data=tmp_path / "d")
        assert done.returncode == 2 and f"{bad} is not a boolean option of train/config.py" in done.stderr
    assert lever_ab(tmp_path).returncode == 2  # no lever at all: its usage line


def test_missing_shards_are_named(tmp_path):
    done = lever_ab(tmp_path, "fused_loss")
    assert done.returncode == 2 and "no shards in" in done.stderr and "docs-v1" in done.stderr


def test_the_arms_alternate_base_then_each_lever_alone(tmp_path):
    small_shards(tmp_path / "d")
    done = lever_ab(tmp_path, "fused_loss", "fused_loss_transpose", data=tmp_path / "d",
                    check="tests/test_train_relu2_grad.py -k cuda")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "check: not run (dry run): tests/test_train_relu2_grad.py -k cuda" in done.stdout
    runs = [line for line in done.stdout.splitlines() if line.startswith("[native-") and "--set" in line]
    arms = ["native-base", "native-fused_loss", "native-fused_loss_transpose"]
    assert [line.split(" ")[0][1:] for line in runs] == arms * 2
    sets = {arm: line for arm, line in zip(arms, runs)}
    assert "fused_loss=false" in sets["native-base"] and "fused_loss_transpose=false" in sets["native-base"]
    assert "fused_loss=true" in sets["native-fused_loss"]
    assert "fused_loss_transpose=false" in sets["native-fused_loss"]
    assert "fused_loss_transpose=true" in sets["native-fused_loss_transpose"]
    assert "fused_loss=false" in sets["native-fused_loss_transpose"]
    assert all("seed=11" in line for line in runs[:3]) and all("seed=12" in line for line in runs[3:])


def test_no_check_named_runs_none(tmp_path):
    small_shards(tmp_path / "d")
    done = lever_ab(tmp_path, "fused_loss", data=tmp_path / "d")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [line for line in done.stdout.splitlines() if line.startswith("check")], done.stdout


def test_the_lease_runs_its_session_detached_from_a_copy_and_collects_it(tmp_path):
    small_shards(tmp_path / "d")
    env = dry_env(tmp_path, DATA=str(tmp_path / "d"), PRE="echo pre-ok; pwd", OUT=str(tmp_path / "out"),
                  LEASE_TREE=str(tmp_path / "tree"), LEASE_DIR=str(tmp_path / "lease"))
    (tmp_path / "out").mkdir()
    done = subprocess.run(["bash", "benchmarks/lever_lease.sh", "start", "120", "fused_loss"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "all-done" in done.stdout  # the wait ended with the session, not at its 120 s
    with tarfile.open(tmp_path / "out" / "lever-lease.tgz") as archive:
        files = {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers() if m.isfile()}
    progress = files["lease/progress.txt"]
    assert "pre rc 0" in progress and "lever-ab rc 0" in progress and progress.rstrip().endswith("all-done")
    assert files["lease/pre.txt"].split() == ["pre-ok", str(tmp_path / "tree")]  # ran in the copy, not the checkout
    assert "native-fused_loss" in files["lease/lever-ab.txt"] and "--set fused_loss=true" in files["lease/lever-ab.txt"]
    assert (tmp_path / "tree" / "benchmarks" / "lever_ab.sh").is_file() and not (tmp_path / "tree" / ".venv").exists()


def lease_archive(tmp_path: Path, **extra: str) -> dict[str, str]:
    """lever_lease.sh start in a dry run; the collected archive's text files by name."""
    tmp_path.mkdir(exist_ok=True)
    small_shards(tmp_path / "d")
    env = dry_env(tmp_path, DATA=str(tmp_path / "d"), OUT=str(tmp_path / "out"), LEASE_TREE=str(tmp_path / "tree"),
                  LEASE_DIR=str(tmp_path / "lease"), **extra)
    (tmp_path / "out").mkdir()
    done = subprocess.run(["bash", "benchmarks/lever_lease.sh", "start", "120", "fused_loss"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "out" / "lever-lease.tgz") as archive:
        return {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers() if m.isfile()}


def test_refused_calls_shrink_the_lever_budget_to_the_device_time_left(tmp_path):
    # 2026-12-05: eleven refused calls took the session from 1,800 s to 894 s; BUDGET_S was cut by hand each time.
    # 900 s left, the lease held 30 s: 900 - 30 - 20 (the collection) = 850 s, under the asked 1,200
    t0 = str(int(time.time()) - 30)
    files = lease_archive(tmp_path, LEASE_DEVICE_S="900", LEASE_T0=t0, BUDGET_S="1200")
    budget = re.search(r"budget (\d+) s \(the lease's device time allows (\d+) s\)", files["lease/progress.txt"])
    assert budget and budget[1] == budget[2] and 845 <= int(budget[1]) <= 850, files["lease/progress.txt"]
    asked = re.search(r"runs: (\d+) s of the (\d+) s budget left", files["lease/lever-ab.txt"])
    # lever_ab.sh gets the budget less what the session spent before it (the copy, PRE)
    assert asked and int(budget[1]) - 10 <= int(asked[2]) <= int(budget[1]), files["lease/lever-ab.txt"]
    # with the whole session's time left, the asked budget stands
    files = lease_archive(tmp_path / "full", LEASE_DEVICE_S="1800", LEASE_T0=str(int(time.time())), BUDGET_S="1000")
    assert "budget 1000 s" in files["lease/progress.txt"], files["lease/progress.txt"]


def test_a_poll_on_a_fresh_machine_says_so_at_once(tmp_path):
    # 2026-12-04: the machine was handed back between start and poll; the poll waited its 540 s on a fresh machine
    env = dry_env(tmp_path, OUT=str(tmp_path), LEASE_TREE=str(tmp_path / "tree"), LEASE_DIR=str(tmp_path / "lease"))
    done = subprocess.run(["bash", "benchmarks/lever_lease.sh", "poll", "540"], cwd=REPO_ROOT, env=env,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and "no lease session on this machine" in done.stderr, done.stderr


def lever_summary(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "benchmarks/lever_summary.py", *args], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)


def test_a_lever_that_changes_the_training_has_no_speed_figure():
    """Lever 16's committed A/B (2026-12-05): its step times read 0.988 of the base's, but it trained to a final loss
    3.5 above the base's on every seed. The verdict says parity failed, voids the ratios and exits 1."""
    done = lever_summary("docs/device-runs/2026-12-05-h100-lever16/lever-ab/summary.json", "relu2_prologue")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "relu2_prologue parity FAILED: final val loss at most 3.5455 from the base's" in done.stdout
    ratios = [line for line in done.stdout.splitlines() if " phase " in line]
    assert len(ratios) == 4 and all(line.endswith("no figure: parity failed)") for line in ratios)
    assert "ratio 0.9880" in ratios[-1]


def test_a_lever_with_the_bases_training_gets_its_ratio():
    """Lever 17's committed A/B (2026-12-05): final losses within 0.0004 of the base's seed by seed, ratio 1.0011."""
    done = lever_summary("docs/device-runs/2026-12-05-h200-lever17/lever-ab/summary.json", "relu2_two_per_sm")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "relu2_two_per_sm parity ok: final val loss at most 0.0004 from the base's over seeds 201, 202, 203" \
        in done.stdout
    assert "relu2_two_per_sm phase all: base 590.7 ms, with it 591.4 ms, ratio 1.0011 (runs: 3 with, 3 base)" \
        in done.stdout
    assert len([line for line in done.stdout.splitlines() if " run " in line]) == 6
