"""`pip install .` (not editable) gives a working `repro`: the registry and Dockerfiles ship inside the wheel.

A fresh virtualenv gets the orchestrator's locked dependencies (requirements.lock, hashes enforced) and the
wheel built from this checkout, then runs from a folder outside the checkout, so nothing can be found by
walking up to the clone: `repro records list` and `repro verify` on the record's own log tails must work
from the package alone. Needs PyPI (or pip's cache) for the locked dependencies; about a minute.
"""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.slow


def run(*args, cwd=None, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, cwd=cwd, env=env, timeout=900)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("pkg")
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp / "dist",
                REPO)
    assert built.returncode == 0, built.stderr[-2000:]
    venv = tmp / "venv"
    assert run(sys.executable, "-m", "venv", venv).returncode == 0
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    deps = run(*pip, "--require-hashes", "-r", REPO / "requirements.lock")
    if deps.returncode != 0 and ("Could not find" in deps.stderr or "connection" in deps.stderr.lower()):
        pytest.skip(f"the locked dependencies cannot be downloaded here: {deps.stderr.strip()[-300:]}")
    assert deps.returncode == 0, deps.stderr[-2000:]
    (wheel,) = (tmp / "dist").glob("repro_speedrun-*.whl")
    assert run(*pip, "--no-deps", wheel).returncode == 0
    return venv


def test_wheel_ships_the_registry_and_dockerfiles(installed):
    site = next((installed / "lib").glob("python3*/site-packages"))
    assert (site / "pipeline" / "_resources" / "manifests" / "records" / "2025-09-23_MuonCustomSizing.yaml").is_file()
    assert (site / "pipeline" / "_resources" / "docker" / "Dockerfile").is_file()
    assert (site / "pipeline" / "runs" / "fa3_standin" / "flash_attn_interface.py").is_file()


def test_installed_repro_lists_records_and_verifies_a_packaged_fixture(installed, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    logs = sorted((REPO / "tests" / "fixtures" / "record-logs" / "2025-09-23_MuonCustomSizing").glob("*.txt"))
    for log in logs:
        shutil.copy(log, outside / log.name)
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    listed = run(installed / "bin" / "repro", "records", "list", cwd=outside, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "2025-09-23_MuonCustomSizing" in listed.stdout and "demo-cpu-synth" in listed.stdout
    verified = run(installed / "bin" / "repro", "verify", "--record", "2025-09-23_MuonCustomSizing",
                   *[p.name for p in logs], cwd=outside, env=env)
    assert "Traceback" not in verified.stderr, verified.stderr
    assert "mean val loss 3.2796" in verified.stdout, verified.stdout
    assert verified.returncode in (0, 1)


def test_installed_repro_without_torch_says_what_to_install_for_the_demo(installed, tmp_path):
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    assert run(installed / "bin" / "python", "-c", "import torch", env=env).returncode != 0  # `pip install .`: none
    demo = run(installed / "bin" / "repro", "reproduce", "--demo", "--runs", "1", cwd=tmp_path, env=env)
    assert demo.returncode == 4, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "PyTorch is missing" in demo.stderr and "pip install '.[train]'" in demo.stderr
    assert "Traceback" not in demo.stderr
