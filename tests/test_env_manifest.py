"""Environment manifests and locks as shipped: the record's pins, the fallback's deviations, refusals."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.env.lock import load_lock
from pipeline.env.manifest import environment_names, load_environment, load_environment_file
from pipeline.errors import InputError, ManifestError
from pipeline.findings import Finding
from pipeline.records.model import load_record
from pipeline.workspace import Workspace
from tests.paths import REPO_ROOT

WS = Workspace.resolve(root=REPO_ROOT, registry=REPO_ROOT / "manifests")

RECORD = "2025-09-23_MuonCustomSizing"


def test_record_environment_is_the_records():
    record = load_record(RECORD)
    env = load_environment(WS, record.environment)
    assert env.name == "record-2025-09" and env.record == RECORD
    # FA3's pin is the environment's own (it loads without any record manifest), the build the record names
    assert env.flash_attention == record.software.flash_attention
    assert env.flash_attention.commit == "92207199ac70fa2a20c43f319862c7a8a8d452dd"
    assert env.expected == {"python": "3.10.12", "torch": "2.9.0.dev20250726+cu126", "triton": "3.4.0",
                            "cuda": "12.6"}
    assert env.deviations() == ()
    assert all("@sha256:" in ref for ref in env.bases.values())
    assert env.platform_tags()[0] == "manylinux_2_35_x86_64" and "manylinux_2_17_x86_64" in env.platform_tags()


def test_fallback_is_declared_and_always_a_deviation():
    env = load_environment(WS, "record-2025-09")
    assert env.fallbacks == ("pypi-torch-2.8",)
    fallback = load_environment(WS, "pypi-torch-2.8")
    deviations = fallback.deviations()
    assert deviations[0].code == "environment.fallback" and deviations[0].data["record_environment"] == env.name
    assert "2.8.0" in deviations[0].data["why"] and "2.9.0.dev20250726" in deviations[0].data["why"]
    assert Finding("software.differs", "deviation", {"field": "torch", "got": "2.8.0+cu128",
                                                     "want": "2.9.0.dev20250726+cu126"}) in deviations
    assert all(d.severity == "deviation" for d in deviations)
    assert fallback.expected == {"python": "3.10.12", "torch": "2.8.0+cu128", "triton": "3.4.0", "cuda": "12.8"}
    assert fallback.index_urls == ("https://pypi.org/simple",)  # PyPI alone: verifiable ahead, never pruned


def test_record_lock_is_current_and_refused_while_incomplete():
    env = load_environment(WS, "record-2025-09")
    lock = load_lock(env)
    assert lock.manifest_sha256 == env.manifest_sha256, "manifest edited without re-writing its lock"
    assert lock.flash_attention["commit"] == env.flash_attention.commit
    assert lock.deviations == env.deviations()
    # nothing invented: unknown hashes stay empty and the build names them
    assert lock.unknown_entries()
    with pytest.raises(InputError) as err:
        lock.require_complete(env)
    assert "unresolved[" in err.value.what and "repro env lock --env record-2025-09" in err.value.fix
    # the hint names every index the lock needs, the nightly's included (not only PyPI)
    assert "download.pytorch.org/whl/nightly/cu126" in err.value.fix


def test_pypi_fallback_lock_is_complete_with_a_sha256_for_every_file():
    env = load_environment(WS, "pypi-torch-2.8")
    lock = load_lock(env)
    assert lock.manifest_sha256 == env.manifest_sha256, "manifest edited without `repro env lock --from-pypi`"
    lock.require_complete(env)  # no placeholder anywhere
    assert lock.unknown_entries() == [] and lock.deviations == env.deviations()
    for f in lock.files:
        assert len(f.sha256) == 64 and int(f.sha256, 16) >= 0, f.name
        assert f.url.startswith("https://files.pythonhosted.org/") and f.url.endswith(f.filename), f.name
    versions = {f.name: f.version for f in lock.packages}
    assert versions["torch"] == "2.8.0" and versions["triton"] == "3.4.0"
    nvidia = [n for n in versions if n.startswith("nvidia-") and n.endswith("-cu12")]
    assert len(nvidia) == 14 and versions["nvidia-cuda-runtime-cu12"].startswith("12.8.")
    assert len(lock.packages) == 27  # torch's closure of 25 files, numpy and pip
    assert {"ninja", "packaging", "setuptools", "wheel"} <= {f.name for f in lock.build_packages}
    assert all(f.filename.endswith(".whl") for f in lock.files)
    assert lock.flash_attention["commit"] == env.flash_attention.commit
    assert all(ref.startswith("nvidia/cuda:12.8.1-devel-ubuntu22.04@sha256:") for ref in lock.bases.values())


def test_build_refuses_incomplete_lock_from_the_cli():
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "build", "--env", "record-2025-09"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert proc.returncode == 3, proc.stderr
    assert "pytorch-triton" in proc.stderr and "repro env lock --env record-2025-09" in proc.stderr


def test_environment_names_exclude_locks():
    assert environment_names(WS) == sorted(environment_names(WS))
    assert not any(n.endswith(".lock") for n in environment_names(WS))
    with pytest.raises(InputError):
        load_environment(WS, "record-2025-09.lock")


def _copy_manifest(tmp_path: Path, edit) -> Path:
    src = REPO_ROOT / "manifests" / "environments" / "record-2025-09.yaml"
    text = edit(src.read_text())
    path = tmp_path / "record-2025-09.yaml"
    path.write_text(text)
    shutil.copy(src, tmp_path / "untouched.yaml")
    return path


@pytest.mark.parametrize("edit, field, words", [
    (lambda t: t.replace("-ubuntu22.04@sha256:4cf7f8137bdeeb099b1f2de126e505aa1f01b6e4471d13faf93727a9bf83d539",
                         "-ubuntu22.04"), "bases.runtime", "not pinned"),
    (lambda t: t.replace("components: [python,", "components: [pyton,"), "components[0]", "pyton"),
    (lambda t: re.sub(r"flash_attention:\n(  .*\n)+", "flash_attention: record\n", t), "flash_attention",
     "not a pin"),
    (lambda t: t.replace('glibc: "2.35"', "glibc: new"), "platform.glibc", "new"),
    (lambda t: t.replace("dockerfile: docker/Dockerfile", "dockerfile: docker/Nope"), "dockerfile", "is not a file of"),
    (lambda t: t + "torch_version: 2.9\n", "torch_version", "not a known field"),
])
def test_bad_manifest_names_file_field_and_fix(tmp_path, edit, field, words):
    path = _copy_manifest(tmp_path, edit)
    with pytest.raises(ManifestError) as err:
        load_environment_file(path, WS)
    assert err.value.field == field and words in err.value.what and err.value.fix
    assert str(path) in str(err.value)


def test_every_environment_loads_in_a_registry_without_record_manifests(tmp_path):
    """A fresh `repro records import` writes its own record manifests (or none yet): no environment may need one."""
    shutil.copytree(REPO_ROOT / "manifests" / "environments", tmp_path / "environments")
    (tmp_path / "records").mkdir()
    ws = Workspace.resolve(root=REPO_ROOT, registry=tmp_path)
    loaded = {name: load_environment(ws, name) for name in environment_names(ws)}
    assert {"record-2025-09", "pypi-torch-2.8", "pypi-torch-2.10"} <= set(loaded)
    assert loaded["pypi-torch-2.8"].flash_attention.commit == "92207199ac70fa2a20c43f319862c7a8a8d452dd"
    assert loaded["record-2025-09"].flash_attention == loaded["pypi-torch-2.8"].flash_attention
    for env in loaded.values():
        lock = load_lock(env)
        assert lock.manifest_sha256 == env.manifest_sha256, f"{env.name}: manifest edited without its lock"
