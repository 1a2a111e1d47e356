"""`repro env venv` against a real PEP 503 index on 127.0.0.1: real wheels, real pip, real virtualenvs."""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pipeline.env.lock import load_lock, resolve_lock
from pipeline.env.manifest import load_environment
from pipeline.env.venv import MARKER, build_venv, read_identity, requirements_text
from pipeline.errors import InputError, RunFailed
from tests.docker_base import alpha_beta_index, local_index, make_wheel, write_simple_index

PYTHON = platform.python_version()  # the venv is made from this interpreter; the lock pins its version
MANIFEST = f"""schema_version: 1
name: tiny
description: A tiny environment for venv tests.
dockerfile: docker/test.Dockerfile
bases:
  runtime: debian:bookworm@sha256:{'cd' * 32}
python: {PYTHON}
platform: {{glibc: "2.36", arch: x86_64}}
index_url: {{index}}
requirements: [alpha==1.0]
components: [python, packages]
"""


@pytest.fixture
def setup(tmp_path):
    """A workspace under tmp_path, wheels alpha (needs beta) and beta, an index serving them, and a lock."""
    return alpha_beta_index(tmp_path)


def _lock(ws, url, wheelhouse=None):
    (ws.environments_dir / "tiny.yaml").write_text(MANIFEST.replace("{index}", url))
    env = load_environment(ws, "tiny")
    resolve_lock(env, wheelhouse=wheelhouse)
    return env, load_lock(env)


def _imports(python: str) -> str:
    done = subprocess.run([python, "-c", "import alpha, beta; print(alpha.__version__, beta.__version__)"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_venv_from_the_lock_then_reused_without_installing(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        lines = []
        first = build_venv(ws, env, lock, python=sys.executable, log=lines.append)
    assert not first.reused and first.lock_sha256 == lock.sha256 and first.environment == "tiny"
    assert first.python_version == PYTHON and first.packages == 2 and first.fa3_wheel is None
    assert Path(first.path) == ws.cache / "venvs" / first.key and first.python == str(Path(first.path) / "bin/python")
    assert _imports(first.python) == "1.0 2.1"
    # the requirements pip installed from: the lock's own files (fetched first, by URL), each with its sha256
    requirements = (Path(first.path) / "repro-requirements.txt").read_text()
    assert requirements == requirements_text(lock.packages, "name")
    assert all(f"--hash=sha256:{f.sha256}" in requirements for f in lock.packages)
    assert any("hashes enforced" in line for line in lines)
    assert read_identity(Path(first.path)) == first

    # the index is gone now: a second call must not need it (nothing is installed again)
    site = next(Path(first.path).glob("lib/python*/site-packages"))
    before = sorted((p.name, p.stat().st_mtime_ns) for p in site.iterdir())
    marker_time = (Path(first.path) / MARKER).stat().st_mtime_ns
    second = build_venv(ws, env, load_lock(env), python=sys.executable)
    assert second.reused and second.key == first.key and second.path == first.path
    assert sorted((p.name, p.stat().st_mtime_ns) for p in site.iterdir()) == before
    assert (Path(first.path) / MARKER).stat().st_mtime_ns == marker_time


def test_a_lock_entry_no_requirement_leads_to_is_not_installed(setup):
    ws, tmp = setup
    gamma = make_wheel(tmp / "built", "gamma", "1.0")  # on the index, required by nothing
    write_simple_index(tmp / "index", sorted((tmp / "built").glob("*.whl")))
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        data = yaml.safe_load(lock.path.read_text())  # an entry added to the lock after it was resolved
        data["packages"].append({"name": "gamma", "version": "1.0", "url": f"{url.rsplit('/simple', 1)[0]}/files/"
                                 f"{gamma.name}", "filename": gamma.name,
                                 "sha256": hashlib.sha256(gamma.read_bytes()).hexdigest()})
        lock.path.write_text(yaml.safe_dump(data, sort_keys=False))
        lines = []
        identity = build_venv(ws, env, load_lock(env), python=sys.executable, log=lines.append)
    assert _imports(identity.python) == "1.0 2.1" and identity.packages == 2
    assert subprocess.run([identity.python, "-c", "import gamma"], capture_output=True).returncode != 0
    assert any("leaving out 1 lock entry that no requirement of tiny leads to: gamma 1.0" in line for line in lines)
    assert "gamma" not in (Path(identity.path) / "repro-requirements.txt").read_text()


def test_a_file_that_does_not_match_the_lock_is_refused_by_name(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
        # the index now serves other bytes under the locked file's name
        make_wheel(tmp / "index" / "files", "beta", "2.1", modules={"beta/__init__.py": "print('swapped')\n"})
        with pytest.raises(RunFailed) as err:
            build_venv(ws, env, lock, python=sys.executable)
    assert "beta-2.1-py3-none-any.whl" in err.value.what and "DO NOT MATCH THE HASHES" in err.value.what
    assert "never edit the lock" in err.value.fix
    key_dir = next((ws.cache / "venvs").iterdir())
    assert not (key_dir / MARKER).exists()  # not marked complete: the next call builds it again


def test_a_wheelhouse_installs_offline_and_an_interrupted_venv_is_rebuilt(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url, wheelhouse=tmp / "wheelhouse")
    partial = ws.cache / "venvs"
    identity = build_venv(ws, env, lock, wheelhouse=tmp / "wheelhouse", python=sys.executable)
    assert _imports(identity.python) == "1.0 2.1"
    # an interrupted build leaves a folder without the marker: it is removed and built again
    (Path(identity.path) / MARKER).unlink()
    lines = []
    again = build_venv(ws, env, lock, wheelhouse=tmp / "wheelhouse", python=sys.executable,
                       log=lines.append)
    assert not again.reused and any("incomplete venv" in line for line in lines)
    assert [p.name for p in partial.iterdir() if p.is_dir()] == [identity.key]


def test_another_index_serves_the_same_files_and_the_hashes_decide(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
    mirror = tmp / "mirror"
    write_simple_index(mirror, sorted((tmp / "built").glob("*.whl")))
    with local_index(mirror) as mirror_url:
        identity = build_venv(ws, env, lock, index_url=mirror_url, python=sys.executable)
    assert _imports(identity.python) == "1.0 2.1"


def test_refusals_name_the_problem(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        env, lock = _lock(ws, url)
    with pytest.raises(InputError, match="give one of them"):
        build_venv(ws, env, lock, wheelhouse=tmp, index_url="http://127.0.0.1:9/simple",
                                              python=sys.executable)
    other = env.path.read_text().replace(f"python: {PYTHON}", "python: 3.9.0")
    env.path.write_text(other)
    stale_env = load_environment(ws, "tiny")
    with pytest.raises(InputError, match="stale"):
        build_venv(ws, stale_env, lock, python=sys.executable)


def test_cli_venv_json(setup):
    ws, tmp = setup
    with local_index(tmp / "index") as url:
        _lock(ws, url)
        cmd = [sys.executable, "-m", "pipeline", "--root", str(ws.root), "--registry", str(ws.registry), "env",
               "venv", "--env", "tiny", "--python", sys.executable, "--json"]
        first = subprocess.run(cmd, capture_output=True, text=True)
        assert first.returncode == 0, first.stderr
        second = subprocess.run(cmd, capture_output=True, text=True)
    a, b = json.loads(first.stdout), json.loads(second.stdout)
    assert not a["reused"] and b["reused"] and a["key"] == b["key"] and a["lock_sha256"] == b["lock_sha256"]
    assert Path(a["python"]).is_file()
