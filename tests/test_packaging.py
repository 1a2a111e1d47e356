"""`pip install .` (not editable) gives a working `repro`: the registry and Dockerfiles ship inside the wheel.

A fresh virtualenv gets the orchestrator's locked dependencies (requirements.lock, hashes enforced) and the
wheel built from a copy of this checkout's tracked files, then runs from a folder outside the checkout, so
nothing can be found by walking up to the clone: `repro records list`, `repro verify` on the record's own log
tails, `env list`, `env check-dockerfile` and `reproduce` as far as its environment stage must work from the
package alone. The Docker SDK installs a `docker/` folder into the same site-packages as ours: the resources
must never be looked up there. Needs PyPI (or pip's cache) for the locked dependencies; about a minute.
"""

import os
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
    source = tmp / "source"  # tracked files only: a stale build/ or an untracked file cannot leak into the wheel
    tracked = run("git", "ls-files", "-z", cwd=REPO).stdout.split("\0")
    for name in filter(None, tracked):
        if (REPO / name).is_file():
            (source / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, source / name)
    built = run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", tmp / "dist",
                source)
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
    assert (site / "pipeline" / "runs" / "hub_standin" / "kernels" / "__init__.py").is_file()
    assert (site / "pipeline" / "_resources" / "docker" / "pypi.Dockerfile").is_file()


def outside_the_clone(installed: Path, tmp_path: Path) -> tuple[Path, dict]:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    proxies = {k: v for k, v in os.environ.items() if k.lower().endswith("_proxy")}  # as the user's shell has
    return outside, {**proxies, "PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}


def test_installed_repro_lists_records_and_verifies_a_packaged_fixture(installed, tmp_path):
    outside, env = outside_the_clone(installed, tmp_path)
    logs = sorted((REPO / "tests" / "fixtures" / "record-logs" / "2025-09-23_MuonCustomSizing").glob("*.txt"))
    for log in logs:
        shutil.copy(log, outside / log.name)
    listed = run(installed / "bin" / "repro", "records", "list", cwd=outside, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "2025-09-23_MuonCustomSizing" in listed.stdout and "demo-cpu-synth" in listed.stdout
    verified = run(installed / "bin" / "repro", "verify", "--record", "2025-09-23_MuonCustomSizing",
                   *[p.name for p in logs], cwd=outside, env=env)
    assert "Traceback" not in verified.stderr, verified.stderr
    assert "mean val loss 3.2796" in verified.stdout, verified.stdout
    assert "verdict: reproduced-with-deviations" in verified.stdout and verified.returncode == 0


def test_installed_repro_finds_its_dockerfiles_not_the_docker_sdks_folder(installed, tmp_path):
    site = next((installed / "lib").glob("python3*/site-packages"))
    assert (site / "docker" / "__init__.py").is_file()  # the Docker SDK's folder beside ours: the trap
    outside, env = outside_the_clone(installed, tmp_path)
    repro = installed / "bin" / "repro"
    listed = run(repro, "env", "list", cwd=outside, env=env)
    assert listed.returncode == 0, listed.stderr
    assert "record-2025-09" in listed.stdout and "pypi-torch-2.8" in listed.stdout
    checked = run(repro, "env", "check-dockerfile", cwd=outside, env=env)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert str(site / "pipeline" / "_resources" / "docker" / "Dockerfile") in checked.stdout


def test_installed_reproduce_gets_through_its_environment_choice(installed, tmp_path):
    """The nearest dry run: preflight fails on a CPU machine (--keep-going passes it), the environment is
    chosen from the packaged manifests, then the stage stops at the image tarball that is not there (or, on a
    machine that cannot reach the package indexes, at no environment being usable: exit 4)."""
    outside, env = outside_the_clone(installed, tmp_path)
    done = run(installed / "bin" / "repro", "reproduce", "--record", "2025-09-23_MuonCustomSizing", "--runs", "1",
               "--keep-going", "--image", outside / "absent.tar", cwd=outside, env=env)
    assert "Traceback" not in done.stderr, done.stderr
    said = done.stdout + done.stderr
    assert "is not a file of" not in said and "environment record-2025-09" in said, said
    chosen = "no image tarball at" in done.stderr and done.returncode == 3
    offline = "no environment of record 2025-09-23_MuonCustomSizing is usable here" in said and done.returncode == 4
    assert chosen or offline, said


def test_installed_repro_writes_the_site_with_the_locked_chart_library(installed, tmp_path):
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    site = run(installed / "bin" / "repro", "records", "site", "--out", tmp_path / "site", cwd=tmp_path, env=env)
    assert site.returncode == 0, site.stderr
    library = (tmp_path / "site" / "assets" / "plotly.min.js").read_text()
    assert len(library) > 1_000_000 and "plotly" in library[:2000].lower()  # from the plotly wheel in the lock


def test_installed_repro_without_torch_says_what_to_install_for_the_demo(installed, tmp_path):
    env = {"PATH": f"{installed / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path)}
    assert run(installed / "bin" / "python", "-c", "import torch", env=env).returncode != 0  # `pip install .`: none
    demo = run(installed / "bin" / "repro", "reproduce", "--demo", "--runs", "1", cwd=tmp_path, env=env)
    assert demo.returncode == 4, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "PyTorch is missing" in demo.stderr and "pip install '.[train]'" in demo.stderr
    assert "Traceback" not in demo.stderr
