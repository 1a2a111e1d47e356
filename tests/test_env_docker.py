"""`repro env lock/build/verify/save/load/compare` on a real Docker engine, without a registry.

The test environment is docker/test.Dockerfile on a bookworm base made from Debian packages
(tests/docker_base.py), with a wheelhouse that `repro env lock` fills from a PEP 503 index served on
127.0.0.1. Every command runs as a user would run it: `python -m pipeline env …` in a subprocess.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import docker_client_or_skip
from tests.docker_base import BASE_PYTHON, ROOTFS_LABEL, ensure_test_base, local_index, make_wheel, write_simple_index
from tests.paths import REPO_ROOT

pytestmark = pytest.mark.docker

MANIFEST = """schema_version: 1
name: {name}
description: Test image on a Debian bookworm base made from Debian packages.
dockerfile: docker/test.Dockerfile
bases:
  runtime: local:{base}
python: {python}
platform: {{glibc: "2.36", arch: x86_64}}
index_url: {index}
requirements: [alpha==1.0]
components: {components}
{expect}"""
EPOCH = "1758585600"  # 2025-09-23: both builds of the reproducibility test share it, as CI runs would


class Workspace:
    """Manifests, state, wheelhouse and the subprocess environment shared by this module's tests."""

    def __init__(self, root: Path):
        self.root, self.wheelhouse, self.state = root, root / "wheelhouse", root / "state"
        self.env = {**os.environ, "SOURCE_DATE_EPOCH": EPOCH}

    def repro(self, *args: str, root: Path | None = None, registry: Path | None = None) -> subprocess.CompletedProcess:
        """`repro --root ROOT --registry ROOT/manifests env ARGS` (state/ and cache/ under ROOT)."""
        root = root or self.root
        head = ["--root", str(root), "--registry", str(registry or self.root / "manifests")]
        return subprocess.run([sys.executable, "-m", "pipeline", *head, "env", *args], capture_output=True,
                              text=True, cwd=REPO_ROOT, env=self.env, timeout=600)

    def add_environment(self, name: str, index: str, python: str = BASE_PYTHON,
                        components: str = "[python, packages]", expect: str = "") -> None:
        path = self.root / "manifests" / "environments" / f"{name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(MANIFEST.format(name=name, base=self.base, python=python, index=index,
                                        components=components, expect=expect))


@pytest.fixture(scope="module")
def client():
    return docker_client_or_skip().api


@pytest.fixture(scope="module")
def ws(client, tmp_path_factory):
    """Base image, wheels, an index on 127.0.0.1 and locks for three test environments."""
    started = time.monotonic()
    ws = Workspace(tmp_path_factory.mktemp("env-docker"))
    ws.base = ensure_test_base(client)
    ws.base_seconds = time.monotonic() - started
    built = ws.root / "built"
    wheels = [make_wheel(built, "alpha", "1.0", requires=("beta>=2",)), make_wheel(built, "beta", "2.1")]
    write_simple_index(ws.root / "index", wheels)
    with local_index(ws.root / "index") as url:
        ws.add_environment("test-bookworm", url)
        ws.add_environment("test-bookworm-torch", url, components="[python, torch, packages]",
                           expect="expect: {torch: 2.9.0.dev20250726+cu126}\n")
        ws.add_environment("test-bookworm-py399", url, python="3.99.0")
        for name in ("test-bookworm", "test-bookworm-torch", "test-bookworm-py399"):
            proc = ws.repro("lock", "--env", name, "--wheelhouse", str(ws.wheelhouse))
            assert proc.returncode == 0, proc.stderr
    ws.images = []
    before = _dangling(client)
    yield ws
    for image in ws.images:  # only what these tests built or loaded
        try:
            client.remove_image(image, force=True)
        except Exception:
            pass
    # the untagged images of non-final stages (python, install) these builds left; without force, so
    # anything another build on this engine is using right now stays
    for image in _dangling(client) - before:
        try:
            client.remove_image(image)
        except Exception:
            pass


def _dangling(client) -> set[str]:
    images = client.images(filters={"dangling": True, "label": ROOTFS_LABEL}, quiet=True)
    return set(images)


@pytest.fixture(scope="module")
def built(ws):
    proc = ws.repro("build", "--env", "test-bookworm", "--wheelhouse", str(ws.wheelhouse))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    state = json.loads((ws.state / "image.json").read_text())
    ws.images.append(state["image_id"])
    return proc, state


def test_build_streams_steps_and_records_the_image(ws, built, client):
    proc, state = built
    assert "[1/" in proc.stdout and "COPY --from=install /export/ /" in proc.stdout  # live log with progress
    assert "offline, wheelhouse" in proc.stdout
    lock_sha = (ws.root / "manifests" / "environments" / "test-bookworm.lock.yaml").read_bytes()
    labels = client.inspect_image(state["image_id"])["Config"]["Labels"]
    assert labels["io.repro.environment"] == "test-bookworm"
    assert labels["io.repro.environment-lock.sha256"] == hashlib.sha256(lock_sha).hexdigest()
    assert labels["org.opencontainers.image.created"] == "2025-09-23T00:00:00Z"  # from SOURCE_DATE_EPOCH
    assert labels["org.opencontainers.image.base.digest"] == client.inspect_image(ws.base)["Id"]
    assert labels["org.opencontainers.image.title"] == "repro test-bookworm"
    assert labels["org.opencontainers.image.revision"]
    assert state["labels"] == labels and state["source"] == "build" and len(state["content_sha256"]) == 64

    from pipeline.env.image import load_image_state

    assert load_image_state(ws.state).image_id == state["image_id"]


def test_verify_reads_versions_inside_the_image(ws, built):
    proc = ws.repro("verify", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    found = {c["component"]: c["found"] for c in report["checks"]}
    assert found == {"python": BASE_PYTHON, "environment-lock": report["lock_sha256"], "package alpha": "1.0",
                     "package beta": "2.1"}


def test_verify_reports_a_declared_component_that_is_missing(ws, built):
    proc = ws.repro("verify", "--env", "test-bookworm-torch")
    assert proc.returncode == 1
    assert "DIFF torch" in proc.stdout and "ModuleNotFoundError" in proc.stdout
    assert "does not match the lock of test-bookworm-torch: environment-lock, torch" in proc.stderr


def test_wrong_hash_in_the_wheelhouse_names_the_file(ws, built, tmp_path):
    bad = tmp_path / "wheelhouse"
    bad.mkdir()
    for wheel in ws.wheelhouse.iterdir():
        (bad / wheel.name).write_bytes(wheel.read_bytes())
    make_wheel(bad, "beta", "2.1", modules={"beta/__init__.py": "print('not what was locked')\n"})
    proc = ws.repro("build", "--env", "test-bookworm", "--wheelhouse", str(bad))
    assert proc.returncode == 3
    assert f"wheelhouse file {bad / 'beta-2.1-py3-none-any.whl'}: sha256 is" in proc.stderr
    assert "fix:" in proc.stderr


def test_a_failing_step_reports_its_own_output(ws, built):
    proc = ws.repro("build", "--env", "test-bookworm-py399", "--wheelhouse", str(ws.wheelhouse))
    assert proc.returncode == 5, proc.stderr
    assert "image build failed at step" in proc.stderr and "RUN python3 -c" in proc.stderr
    assert "python 3.11.2 is not the pinned 3.99.0" in proc.stderr  # the step's own output, not just "exit 1"


def test_save_and_load_move_the_image_as_a_checked_tarball(ws, built, client, tmp_path):
    _, state = built
    out = tmp_path / "image.tar.gz"
    proc = ws.repro("save", str(out), "--json")
    assert proc.returncode == 0, proc.stderr
    saved = json.loads(proc.stdout)
    assert saved["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert (tmp_path / "image.tar.gz.sha256").read_text().split() == [saved["sha256"], "image.tar.gz"]

    corrupt = tmp_path / "corrupt.tar.gz"
    data = bytearray(out.read_bytes())
    data[len(data) // 2] ^= 0xFF
    corrupt.write_bytes(bytes(data))
    refused = ws.repro("load", str(corrupt), "--sha256", saved["sha256"])
    assert refused.returncode == 1 and "sha256 is" in refused.stderr

    client.remove_image(state["image_id"], force=True)
    proc = ws.repro("load", str(out))
    assert proc.returncode == 0, proc.stderr
    assert f"loaded {state['image_id']}" in proc.stdout
    reloaded = json.loads((ws.state / "image.json").read_text())
    assert reloaded["source"] == "load" and reloaded["tarball_sha256"] == saved["sha256"]
    assert reloaded["content_sha256"] == state["content_sha256"]
    assert ws.repro("verify").returncode == 0


def test_two_builds_from_the_same_inputs(ws, built, client, monkeypatch):
    """Image ids differ (the classic builder stamps build time and container ids into the config);
    every layer and the content digest must not."""
    ids = []
    for i in range(2):
        proc = ws.repro("build", "--env", "test-bookworm", "--wheelhouse", str(ws.wheelhouse), "--no-cache",
                        "--tag", f"repro/test-twice:{i}", "--json")
        assert proc.returncode == 0, proc.stderr
        ids.append(json.loads(proc.stdout)["image_id"])
        ws.images.append(ids[-1])
    from pipeline.env.compare import compare_images, describe

    for key, value in ws.env.items():
        if key.startswith(("REPRO_", "SOURCE_DATE")):
            monkeypatch.setenv(key, value)
    diff = compare_images(*ids, client=client)
    print("\n".join(describe(diff)))
    assert diff.layers_identical and diff.content_a == diff.content_b
    assert {name for name, _, _ in diff.config_differences} <= {"Created", "Container", "ContainerConfig.Hostname"}
    assert diff.identical or diff.history_created_differs > 0


def test_compare_finds_file_level_differences(ws, built, client, tmp_path):
    """Change one wheel's bytes: compare must name the files whose bytes differ, in the venv layer."""
    other = tmp_path / "manifests"
    shutil.copytree(ws.root / "manifests", other)
    wheelhouse = tmp_path / "wheelhouse"
    shutil.copytree(ws.wheelhouse, wheelhouse)
    make_wheel(wheelhouse, "beta", "2.1", modules={"beta/__init__.py": "VARIANT = 2\n"})
    lock = other / "environments" / "test-bookworm.lock.yaml"
    original = hashlib_of(ws.wheelhouse / "beta-2.1-py3-none-any.whl")
    lock.write_text(lock.read_text().replace(original, hashlib_of(wheelhouse / "beta-2.1-py3-none-any.whl")))
    proc = ws.repro("build", "--env", "test-bookworm", "--wheelhouse", str(wheelhouse), "--json", root=tmp_path,
                    registry=other)
    assert proc.returncode == 0, proc.stderr
    variant = json.loads(proc.stdout)["image_id"]
    ws.images.append(variant)
    proc = ws.repro("compare", built[1]["image_id"], variant, "--json")
    assert proc.returncode == 0, proc.stderr
    diff = json.loads(proc.stdout)
    changed = [layer for layer in diff["layers"] if layer["diff_id_a"] != layer["diff_id_b"]]
    assert len(changed) == 1
    assert "opt/venv/lib/python3.11/site-packages/beta/__init__.py" in changed[0]["content_differs"]


def hashlib_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
