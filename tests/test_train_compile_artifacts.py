"""benchmarks/compile_artifacts/sitecustomize.py: torch.compiler's cache artifacts saved by one process and loaded
by another with empty caches, which then compiles nothing (the startup measurement of benchmarks/device_session.sh
phase `one`), or loaded once by the module run as a script (a later lease's carried artifacts). Real subprocesses,
real Inductor on the CPU (about a minute each on two shared cores)."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.paths import REPO_ROOT

SITE = REPO_ROOT / "benchmarks" / "compile_artifacts"
PROGRAM = ("import torch\n"
           "from torch._dynamo.utils import counters\n"
           "f = torch.compile(lambda x: (x * 2 + 1).sin(), dynamic=False)\n"
           "print(float(f(torch.ones(8)).sum()))\n"
           "print('inductor', dict(counters['inductor']))\n")


def run(tmp_path, cache: str, local_rank: str = "0", program: str = PROGRAM, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=os.pathsep.join((str(SITE), str(REPO_ROOT))), LOCAL_RANK=local_rank,
                TORCHINDUCTOR_CACHE_DIR=str(tmp_path / cache), TRITON_CACHE_DIR=str(tmp_path / cache / "triton"),
                **env)
    done = subprocess.run([sys.executable, "-c", program], env=full, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_artifacts_saved_by_one_process_make_anothers_empty_cache_hit(tmp_path):
    artifacts = tmp_path / "artifacts.bin"
    first = run(tmp_path, "cache-1", REPRO_COMPILE_ARTIFACTS_SAVE=str(artifacts))
    assert "[compile artifacts] saved" in first.stderr and artifacts.stat().st_size > 0
    assert "'fxgraph_cache_miss': 1" in first.stdout
    second = run(tmp_path, "cache-2", REPRO_COMPILE_ARTIFACTS_LOAD=str(artifacts))
    assert "[compile artifacts] loaded" in second.stderr
    assert "'fxgraph_cache_hit': 1" in second.stdout and "fxgraph_cache_miss" not in second.stdout
    assert first.stdout.splitlines()[0] == second.stdout.splitlines()[0]  # the same result
    # run as a script it fills the caches once (device_session.sh's carried artifacts): a later plain run hits them
    loaded = load_once(tmp_path, "cache-3", artifacts)
    assert loaded.returncode == 0 and "[compile artifacts] loaded" in loaded.stderr, loaded.stderr[-3000:]
    third = run(tmp_path, "cache-3")
    assert "'fxgraph_cache_hit': 1" in third.stdout and "fxgraph_cache_miss" not in third.stdout


def load_once(tmp_path, cache: str, artifacts) -> subprocess.CompletedProcess:
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / cache), TRITON_CACHE_DIR=str(tmp_path / cache / "t"))
    return subprocess.run([sys.executable, str(SITE / "sitecustomize.py"), str(artifacts)], env=env,
                          capture_output=True, text=True, timeout=600)


def test_a_bad_file_is_reported_and_the_program_runs_and_other_ranks_are_left_alone(tmp_path):
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"not artifacts")
    done = run(tmp_path, "cache", program="print('ran')", REPRO_COMPILE_ARTIFACTS_LOAD=str(bad))
    assert "[compile artifacts] could not load" in done.stderr and done.stdout == "ran\n"
    assert load_once(tmp_path, "cache", bad).returncode == 1  # the script says it could not
    other = run(tmp_path, "cache", local_rank="1", program="print('ran')",
                REPRO_COMPILE_ARTIFACTS_SAVE=str(tmp_path / "x.bin"))
    assert "[compile artifacts]" not in other.stderr and not (tmp_path / "x.bin").exists()
