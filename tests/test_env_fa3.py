"""FA3's source archive for offline builds: packed from real git repos (with a cutlass submodule)."""

from __future__ import annotations

import hashlib
import tarfile

import pytest

from pipeline.env.build import stage_context
from pipeline.env.fa3 import CUTLASS_PATH, archive_source
from pipeline.env.lock import Lock
from pipeline.env.manifest import load_environment
from pipeline.errors import InputError, RunFailed
from pipeline.workspace import Workspace
from tests.docker_base import git, make_cutlass_repo


@pytest.fixture
def fa3_repo(tmp_path):
    cutlass = make_cutlass_repo(tmp_path)
    fa = tmp_path / "flash-attention"
    (fa / "hopper").mkdir(parents=True)
    (fa / "hopper" / "setup.py").write_text("print('build FA3')\n")
    git(tmp_path, "init", "-q", str(fa))
    git(fa, "submodule", "add", "-q", str(cutlass), CUTLASS_PATH)
    git(fa, "add", ".")
    git(fa, "commit", "-q", "-m", "fa3")
    return {"repository": str(fa), "commit": git(fa, "rev-parse", "HEAD"),
            "cutlass_commit": git(cutlass, "rev-parse", "HEAD"), "subdirectory": "hopper", "build_env": {}}


def test_archive_is_the_pinned_tree_and_byte_stable(tmp_path, fa3_repo):
    first = archive_source(fa3_repo, tmp_path / "a")
    second = archive_source(fa3_repo, tmp_path / "b")
    assert first.name == f"flash-attention-{fa3_repo['commit']}.tar"
    assert first.read_bytes() == second.read_bytes()  # same commit, same bytes, one sha256 in the lock
    with tarfile.open(first) as tar:
        names = tar.getnames()
        assert {m.mtime for m in tar.getmembers()} == {0}
    assert "hopper/setup.py" in names and f"{CUTLASS_PATH}/include/cutlass.h" in names
    assert not any(".git" in n.split("/") for n in names)


def test_a_wrong_cutlass_pin_is_refused(tmp_path, fa3_repo):
    pin = dict(fa3_repo, cutlass_commit="0" * 40)
    with pytest.raises(RunFailed) as err:
        archive_source(pin, tmp_path / "out")
    assert "cutlass" in err.value.what and "cutlass_commit" in err.value.fix
    assert not list((tmp_path / "out").glob("*.tar"))


def test_offline_staging_checks_the_source_like_a_wheel(tmp_path, fa3_repo, monkeypatch):
    manifests = tmp_path / "manifests" / "environments"
    manifests.mkdir(parents=True)
    (manifests / "t.yaml").write_text(
        "schema_version: 1\nname: t\ndescription: t\ndockerfile: docker/Dockerfile\n"
        f"bases: {{runtime: 'x@sha256:{'a' * 64}'}}\npython: 3.10.12\nplatform: {{glibc: '2.35', arch: x86_64}}\n"
        "index_url: http://127.0.0.1:9/simple\nrequirements: []\ncomponents: [python]\n")
    env = load_environment(Workspace.resolve(root=tmp_path, registry=tmp_path / "manifests"), "t")
    wheelhouse = tmp_path / "wheelhouse"
    archive = archive_source(fa3_repo, wheelhouse)
    pin = dict(fa3_repo, source_file=archive.name, source_sha256=hashlib.sha256(archive.read_bytes()).hexdigest())
    lock_file = manifests / "t.lock.yaml"
    lock_file.write_text("placeholder")
    lock = Lock(environment="t", manifest_sha256="0" * 64, resolved_by="test", python="3.10.12", bases={},
                packages=(), build_packages=(), flash_attention=pin, expect={}, deviations=(), path=lock_file)
    context = tmp_path / "context"
    context.mkdir()
    stage_context(env, lock, context, wheelhouse)
    assert (context / "fa3" / "source.tar").read_bytes() == archive.read_bytes()

    archive.write_bytes(archive.read_bytes() + b"\0" * 512)
    other = tmp_path / "context2"
    other.mkdir()
    with pytest.raises(InputError) as err:
        stage_context(env, lock, other, wheelhouse)
    assert str(archive) in err.value.what and "sha256 is" in err.value.what
