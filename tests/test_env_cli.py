"""`repro env` without an engine: the message when the Docker daemon is missing."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.paths import REPO_ROOT


@pytest.mark.parametrize("args", [["verify", "--image", "x"], ["save", "out.tar", "--image", "x"]])
def test_missing_daemon_says_how_to_start_one(tmp_path, args):
    env = {**os.environ, "DOCKER_HOST": f"unix://{tmp_path}/no-such-docker.sock"}
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", *args], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 4, proc.stderr
    assert "no Docker engine answers at unix://" in proc.stderr and "make docker-engine" in proc.stderr
    assert "DOCKER_HOST" in proc.stderr and "Traceback" not in proc.stderr


def test_help_lists_every_subcommand():
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "--help"], capture_output=True, text=True,
                          cwd=REPO_ROOT)
    assert proc.returncode == 0
    for name in ("lock", "build", "verify", "save", "load", "compare", "check-dockerfile", "list"):
        assert name in proc.stdout


def test_list_names_a_corrupt_lock_instead_of_calling_it_not_locked(tmp_path):
    """`repro env list` caught every InputError as "not locked": a lock file that is there but does not parse read
    as if `repro env lock` had never run. It is an error naming the file now (exit 3); a missing lock stays
    "not locked"."""
    import shutil

    registry = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", registry)
    (registry / "environments" / "pypi-torch-2.10.lock.yaml").write_text("- not a mapping\n")
    (registry / "environments" / "pypi-torch-2.5.lock.yaml").unlink()
    env = {**os.environ, "REPRO_HOME": str(tmp_path), "REPRO_REGISTRY": str(registry)}
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "list"], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, proc.stdout + proc.stderr
    assert f"error: {registry}/environments/pypi-torch-2.10.lock.yaml: the top level must be a mapping" \
        in proc.stderr, proc.stderr
    (registry / "environments" / "pypi-torch-2.10.lock.yaml").unlink()
    proc = subprocess.run([sys.executable, "-m", "pipeline", "env", "list"], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split()[0]: line for line in proc.stdout.splitlines()}
    assert rows["pypi-torch-2.10"].endswith("lock: not locked") and rows["pypi-torch-2.5"].endswith("not locked")


def test_a_lock_that_is_not_a_mapping_is_told_its_own_schema_version(tmp_path):
    """The fix for a YAML file whose top level is not a mapping said `schema_version: 1` for every kind of file,
    but a lock (and a run.yaml) is written at schema version 2."""
    from pipeline.env.lock import SCHEMA_VERSION, load_lock_file
    from pipeline.errors import ManifestError
    from pipeline.runs.rundir import SCHEMA_VERSION as RUN_SCHEMA_VERSION
    from pipeline.runs.rundir import RunMeta

    lock = tmp_path / "x.lock.yaml"
    lock.write_text("- not a mapping\n")
    with pytest.raises(ManifestError) as caught:
        load_lock_file(lock)
    assert caught.value.fix == f"start the file with `schema_version: {SCHEMA_VERSION}` and its fields"
    run = tmp_path / "run.yaml"
    run.write_text("- not a mapping\n")
    with pytest.raises(ManifestError) as caught:
        RunMeta.load(run)
    assert caught.value.fix == f"start the file with `schema_version: {RUN_SCHEMA_VERSION}` and its fields"
    assert (SCHEMA_VERSION, RUN_SCHEMA_VERSION) == (2, 2)
