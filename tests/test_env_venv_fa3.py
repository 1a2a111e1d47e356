"""FA3 in a `repro env venv`: built once from the lock's pinned source (git at the pinned commits, cutlass
checked), cached by key and reused; or taken from a wheelhouse. The "FA3" here is a git repository whose
hopper/ folder builds a small flash_attn_3 wheel through an in-tree PEP 517 backend: the build path is
the real one (pip wheel --no-build-isolation in the venv, the pin's build environment), only the
compiler work is absent."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.env.fa3 import CUTLASS_PATH
from pipeline.env.lock import load_lock_file, lock_to_yaml
from pipeline.env.venv import build_venv
from pipeline.errors import RunFailed
from tests.docker_base import git, make_cutlass_repo
from tests.test_env_venv import _lock, local_index, setup  # noqa: F401  (the fixture and the lock helper)

# A PEP 517 backend in the source tree: writes flash_attn_3-3.0.0 with flash_attn_interface.py, and records
# the build environment it saw (FA3's FLASH_ATTENTION_* switches reach the real setup.py the same way).
BACKEND = r'''
import base64, hashlib, os, zipfile
NAME, VERSION = "flash_attn_3", "3.0.0"
def _files():
    seen = os.environ.get("FLASH_ATTENTION_DISABLE_FP16", "unset")
    return {"flash_attn_interface.py": f"BUILT_WITH_DISABLE_FP16 = {seen!r}\n",
            f"{NAME}-{VERSION}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {VERSION}\n",
            f"{NAME}-{VERSION}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: t\nRoot-Is-Purelib: true\n"
                                                 "Tag: py3-none-any\n"}
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if os.environ.get("FA3_TEST_FAIL"):
        raise SystemExit("nvcc not found (the test asked this build to fail)")
    files = _files()
    def digest(t):
        return base64.urlsafe_b64encode(hashlib.sha256(t.encode()).digest()).rstrip(b"=").decode()
    rec = "".join(f"{p},sha256={digest(t)},{len(t)}\n" for p, t in files.items())
    files[f"{NAME}-{VERSION}.dist-info/RECORD"] = rec + f"{NAME}-{VERSION}.dist-info/RECORD,,\n"
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w") as zf:
        for p, t in files.items():
            zf.writestr(zipfile.ZipInfo(p, (2020, 1, 1, 0, 0, 0)), t)
    return name
'''
PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "fa3backend"\nbackend-path = ["."]\n'


@pytest.fixture
def fa3_pin(tmp_path):
    cutlass = make_cutlass_repo(tmp_path)
    fa = tmp_path / "flash-attention"
    (fa / "hopper").mkdir(parents=True)
    (fa / "hopper" / "pyproject.toml").write_text(PYPROJECT)
    (fa / "hopper" / "fa3backend.py").write_text(BACKEND)
    git(tmp_path, "init", "-q", str(fa))
    git(fa, "submodule", "add", "-q", str(cutlass), CUTLASS_PATH)
    git(fa, "add", ".")
    git(fa, "commit", "-q", "-m", "fa3")
    return {"repository": str(fa), "commit": git(fa, "rev-parse", "HEAD"),
            "cutlass_commit": git(cutlass, "rev-parse", "HEAD"), "subdirectory": "hopper",
            "build_env": {"FLASH_ATTENTION_DISABLE_FP16": "TRUE"}}


def _with_pin(lock, pin):
    """The test lock with an FA3 pin (a real environment takes it from its record manifest)."""
    pinned = dataclasses.replace(lock, flash_attention=pin)
    lock.path.write_text(lock_to_yaml(pinned))
    return load_lock_file(lock.path)


def _fa3_says(python: str) -> str:
    done = subprocess.run([python, "-c", "import flash_attn_interface as f; print(f.BUILT_WITH_DISABLE_FP16)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_fa3_is_built_once_then_reused(setup, fa3_pin):  # noqa: F811
    ws, tmp = setup
    lines = []
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        lock = _with_pin(lock, fa3_pin)
        first = build_venv(ws, env, lock, python=sys.executable, build_fa3_from_source=True,
                           log=lines.append)
        assert first.fa3_wheel.startswith("flash_attn_3-3.0.0-py3-none-any.whl sha256:")
        assert _fa3_says(first.python) == "TRUE"  # built with the pin's build environment
        assert not any(d.code == "venv.no_fa3" for d in first.deviations)
        (cached,) = (ws.cache / "fa3-wheels").iterdir()
        assert (cached / "built.json").is_file() and any("FA3: building" in line for line in lines)

        # the venv is rebuilt (its marker lost): FA3 comes from the cache, not a second compile
        (Path(first.path) / "repro-venv.json").unlink()
        lines.clear()
        again = build_venv(ws, env, lock, python=sys.executable, build_fa3_from_source=True,
                           log=lines.append)
    assert again.fa3_wheel == first.fa3_wheel and any("FA3: reusing the wheel" in line for line in lines)
    assert not any("FA3: building" in line for line in lines)


def test_a_failed_fa3_build_says_what_it_needs_and_caches_nothing(setup, fa3_pin, monkeypatch):  # noqa: F811
    ws, tmp = setup
    monkeypatch.setenv("FA3_TEST_FAIL", "1")
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        lock = _with_pin(lock, fa3_pin)
        with pytest.raises(RunFailed) as err:
            build_venv(ws, env, lock, python=sys.executable, build_fa3_from_source=True)
    assert "building FA3" in err.value.what and "nvcc not found" in err.value.what
    assert "nvcc" in err.value.fix and "--wheelhouse" in err.value.fix
    assert not list((ws.cache / "fa3-wheels").glob("*/built.json"))


def test_without_fa3_the_venv_says_the_stand_in_runs(setup, fa3_pin):  # noqa: F811
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        identity = build_venv(ws, env, _with_pin(lock, fa3_pin), python=sys.executable)
    assert identity.fa3_wheel is None and [d.code for d in identity.deviations] == ["venv.no_fa3"]
