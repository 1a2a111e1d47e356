"""`repro env lock` against a real PEP 503 index served on 127.0.0.1, with real wheel files."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest

from pipeline.env.lock import load_lock, resolve_lock
from pipeline.env.manifest import load_environment
from pipeline.errors import InputError, RunFailed
from pipeline.workspace import Workspace
from tests.docker_base import local_index, make_wheel, write_simple_index
from tests.paths import REPO_ROOT

MANIFEST = """schema_version: 1
name: {name}
description: A tiny environment for lock tests.
dockerfile: docker/test.Dockerfile
bases:
  runtime: debian:bookworm@sha256:{digest}
python: 3.11.2
platform: {{glibc: "2.36", arch: x86_64}}
index_url: {index}
requirements: [alpha==1.0]
components: [python, packages]
"""


@pytest.fixture
def wheels(tmp_path):
    out = tmp_path / "built"
    return [make_wheel(out, "alpha", "1.0", requires=("beta>=2", "gamma; python_version < '3'")),
            make_wheel(out, "beta", "2.0"), make_wheel(out, "beta", "2.1"), make_wheel(out, "gamma", "1.0")]


@pytest.fixture
def manifests(tmp_path, monkeypatch):
    root = tmp_path / "manifests"
    (root / "environments").mkdir(parents=True)
    monkeypatch.setenv("REPRO_REGISTRY", str(root))
    return root


def _ws(manifests) -> Workspace:
    return Workspace.resolve(root=manifests.parent, registry=manifests)


def _write_env(manifests, index, name="tiny"):
    (manifests / "environments" / f"{name}.yaml").write_text(MANIFEST.format(name=name, index=index,
                                                                            digest="cd" * 32))
    return load_environment(_ws(manifests), name)


def test_lock_resolves_the_closure_and_hashes_the_bytes(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url)
        lines = []
        lock = resolve_lock(env, wheelhouse=tmp_path / "wheelhouse", log=lines.append)
    # pip chose the newest beta allowed and skipped gamma (its marker is false for Python 3)
    assert [(f.name, f.version) for f in lock.packages] == [("alpha", "1.0"), ("beta", "2.1")]
    for f in lock.packages:
        kept = tmp_path / "wheelhouse" / f.filename
        assert f.sha256 == hashlib.sha256(kept.read_bytes()).hexdigest()
        assert f.sha256 == hashlib.sha256((tmp_path / "built" / f.filename).read_bytes()).hexdigest()
        assert f.url.startswith("http://127.0.0.1:") and f.url.endswith(f.filename)
    assert lock.bases == {"runtime": f"debian:bookworm@sha256:{'cd' * 32}"}
    assert lock.expect == {"python": "3.11.2"} and lock.unknown_entries() == []
    assert any("matches the index" in line for line in lines)
    lock.require_complete(env)
    assert load_lock(env).packages == lock.packages


def test_relocking_the_same_inputs_gives_the_same_bytes(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url)
        first = resolve_lock(env).path.read_bytes()
        second = resolve_lock(env).path.read_bytes()
    assert first == second  # no timestamps: the lock's sha256 names its inputs


def test_a_wrong_announced_hash_names_the_file(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels, announce={"beta-2.1-py3-none-any.whl": "0" * 64})
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url)
        with pytest.raises(RunFailed) as err:
            resolve_lock(env, wheelhouse=tmp_path / "wheelhouse")
    # pip itself refuses a file whose bytes contradict the index; either way the file is named
    assert "beta" in str(err.value)
    assert not (tmp_path / "wheelhouse" / "beta-2.1-py3-none-any.whl").exists()


def test_credentials_in_the_index_url_never_reach_the_lock(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url.replace("http://", "http://reader:s3cret-token@"))
        lock = resolve_lock(env)
    text = lock.path.read_text()
    assert "s3cret-token" not in text and "reader" not in text


def test_unsatisfiable_pins_fail_with_pips_reason(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url)
        path = env.path
        path.write_text(path.read_text().replace("alpha==1.0", "alpha==9.9"))
        with pytest.raises(RunFailed) as err:
            resolve_lock(load_environment(_ws(manifests), "tiny"))
    assert "alpha==9.9" in err.value.what and "requirements" in err.value.fix


def test_an_edited_manifest_makes_the_lock_stale(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        env = _write_env(manifests, url)
        resolve_lock(env)
    env.path.write_text(env.path.read_text().replace("A tiny", "A small"))
    env = load_environment(_ws(manifests), "tiny")
    with pytest.raises(InputError) as err:
        load_lock(env).require_complete(env)
    assert "stale" in err.value.what and "repro env lock --env tiny" in err.value.fix


def test_cli_lock_json(tmp_path, wheels, manifests):
    write_simple_index(tmp_path / "index", wheels)
    with local_index(tmp_path / "index") as url:
        _write_env(manifests, url)
        proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "lock", "--env", "tiny", "--json"],
                              capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr
    import json

    out = json.loads(proc.stdout)
    assert [p["name"] for p in out["packages"]] == ["alpha", "beta"] and len(out["sha256"]) == 64


def test_download_check_refuses_bytes_that_contradict_the_index(tmp_path, wheels):
    # the second line of defence behind pip's own check: our download, hashed as it streams
    from pipeline.env.lock import fetch_and_hash

    write_simple_index(tmp_path / "index", wheels)
    good = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
    with local_index(tmp_path / "index") as url:
        file_url = url.replace("/simple", f"/files/{wheels[0].name}")
        assert fetch_and_hash(file_url, tmp_path / "kept" / wheels[0].name, good) == good
        with pytest.raises(RunFailed) as err:
            fetch_and_hash(file_url, tmp_path / "other" / wheels[0].name, "1" * 64)
    assert wheels[0].name in err.value.what and good in err.value.what
    assert not (tmp_path / "other" / wheels[0].name).exists()
