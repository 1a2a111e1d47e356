"""Running train/'s Triton code on the CPU for tests: the skip marker, and a run under Triton's interpreter."""

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

needs_triton = pytest.mark.skipif(
    importlib.util.find_spec("triton") is None,
    reason="Triton is not installed (make setup installs it from requirements-triton.lock)")


def run_interpreted(*args: str, **env: str):
    """`python ARGS` with the kernels in Triton's interpreter and no GPU; asserts it succeeded and returns the
    Python literal on its last line of output (what the self-checks and timings print)."""
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="", **env)
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])
