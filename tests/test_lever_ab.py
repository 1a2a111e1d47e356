"""benchmarks/lever_ab.sh on the CPU: the levers it refuses, and the runs it plans (DRY_RUN=1, sidebyside --dry-run).

    .venv/bin/python -m pytest -q tests/test_lever_ab.py
"""

import os
import subprocess
import sys
from pathlib import Path

from tests.test_sidebyside import small_shards

REPO_ROOT = Path(__file__).resolve().parent.parent


def lever_ab(tmp_path: Path, *levers: str, data: Path | None = None, check: str = "") -> subprocess.CompletedProcess:
    bin_dir = tmp_path / "bin"  # `python3` in the script is this interpreter, as on the device machine
    bin_dir.mkdir(exist_ok=True)
    wrapper = bin_dir / "python3"  # a script, not a link: a link out of the venv's folder leaves the venv
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", DRY_RUN="1", DEST=str(tmp_path / "ab"),
               DATA=str(data or tmp_path / "none"), REPEAT="2", SEED="11", PYTHONPATH=str(REPO_ROOT),
               CHECK_TESTS=check)
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
