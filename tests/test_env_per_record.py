"""An environment per record by a readable rule (pipeline/records/environment_choice.py), with committed locks.

A record whose log prints a stable PyTorch gets the environment that pins exactly that build, locked from PyPI
with every sha256 (manifests/environments/pypi-torch-*.lock.yaml); a nightly gets the nearest stable release,
declared. No two records that need the same build get two environments or two locks.
"""

from __future__ import annotations

import shutil
from collections import defaultdict
from datetime import date

import pytest

from pipeline.env.lock import load_lock_file
from pipeline.env.manifest import load_environment
from pipeline.errors import ManifestError
from pipeline.findings import Finding
from pipeline.records.environment_choice import environment_by_rule, parse_torch, registry_environments
from pipeline.records.model import load_record, record_names
from pipeline.records.program import cut_program
from pipeline.runs.train_plan import imports_hub_kernels
from pipeline.workspace import Workspace
from tests.paths import FIXTURES, REPO_ROOT

RECORDS = REPO_ROOT / "manifests" / "records"
ENVIRONMENTS = REPO_ROOT / "manifests" / "environments"
LATER = date(2026, 12, 1)  # every nightly in the registry has left PyTorch's index by then


def _torch(record) -> str:
    return record.software.torch or next((log.torch for log in record.logs if log.torch), "")


def _records():
    return [load_record(name, RECORDS) for name in record_names(RECORDS) if not name.startswith("demo-")]


def test_no_two_records_needing_one_environment_get_two_locks():
    envs = registry_environments(ENVIRONMENTS)
    chosen = defaultdict(set)  # the build a record needs -> the environments chosen for it
    for record in _records():
        choice = environment_by_rule(_torch(record), record.name, record.date, envs, today=LATER)
        if choice.kind == "exact":
            chosen[_torch(record)].add(choice.environment)
    assert chosen and all(len(names) == 1 for names in chosen.values()), dict(chosen)
    pinned = defaultdict(list)  # no two environments pin one build for one Python
    for env in envs:
        pinned[(env.torch, load_lock_file(ENVIRONMENTS / f"{env.name}.lock.yaml").python)].append(env.name)
    assert all(len(names) == 1 for names in pinned.values()), dict(pinned)


@pytest.mark.parametrize("name, environment", [("2026-07-17_FP8DownProjection", "pypi-torch-2.10"),
                                               ("2024-10-10_Muon", "pypi-torch-2.4"),
                                               ("2024-11-06_ShortcutsTweaks", "pypi-torch-2.5")])
def test_a_stable_release_in_the_log_gets_its_exact_lock_from_pypi(name, environment):
    record = load_record(name, RECORDS)
    choice = environment_by_rule(_torch(record), name, record.date, registry_environments(ENVIRONMENTS), today=LATER)
    assert (choice.environment, choice.kind, choice.deviation) == (environment, "exact", None)
    assert record.environment == environment  # what `repro reproduce` builds first
    lock = load_lock_file(ENVIRONMENTS / f"{environment}.lock.yaml")
    assert not lock.unknown_entries() and all(len(f.sha256) == 64 for f in lock.files)
    assert all(f.url.startswith("https://files.pythonhosted.org/") for f in lock.files)
    version = {f.name: f.version for f in lock.packages}
    wanted = parse_torch(_torch(record))
    assert version["torch"] == _torch(record).split("+")[0] and lock.expect["torch"] == wanted.text
    assert "triton" in version and "numpy" in version
    assert any(n.startswith("nvidia-cublas-cu12") for n in version)


def test_the_newest_records_hub_import_is_served_by_the_standin_never_the_hub_client(tmp_path):
    """The program imports `kernels`; no environment installs the real client, which downloads from the hub at
    run time (issue 38): the stand-in answers it, and a manifest that asks for the client is refused."""
    program = cut_program((FIXTURES / "record-logs/2026-07-17_FP8DownProjection/"
                           "11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt").read_bytes())
    assert imports_hub_kernels(program)
    for path in sorted(ENVIRONMENTS.glob("*.lock.yaml")):
        names = {f.name for f in load_lock_file(path).packages}
        assert not names & {"kernels", "huggingface-hub", "hf-xet"}, path.name
    lock = load_lock_file(ENVIRONMENTS / "pypi-torch-2.10.lock.yaml")
    assert lock.expect["triton"] == "3.6.0" and lock.python == "3.12.3"
    env = load_environment(Workspace.resolve(root=tmp_path, registry=REPO_ROOT / "manifests"), "pypi-torch-2.10")
    assert lock.manifest_sha256 == env.manifest_sha256  # the lock is the manifest's
    registry = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", registry)
    bad = registry / "environments" / "pypi-torch-2.10.yaml"
    bad.write_text(bad.read_text().replace("  - numpy==", "  - kernels==0.17.2\n  - numpy=="))
    with pytest.raises(ManifestError, match="kernels client"):
        load_environment(Workspace.resolve(root=tmp_path, registry=registry), "pypi-torch-2.10")


def test_a_nightly_gets_the_nearest_stable_release_declared():
    record = load_record("2026-02-10_ShortWindow", RECORDS)
    choice = environment_by_rule(_torch(record), record.name, record.date, registry_environments(ENVIRONMENTS),
                                today=LATER)
    assert (choice.environment, choice.kind) == ("pypi-torch-2.10", "stable-stand-in")
    assert choice.deviation == Finding("environment.stand_in", "deviation", {
        "environment": "pypi-torch-2.10", "torch": "2.10.0+cu128", "record_torch": "2.10.0.dev20251210+cu126"})
    assert record.environment == "pypi-torch-2.10"
    made_for = load_record("2025-09-23_MuonCustomSizing", RECORDS)  # a tie (2.8 / 2.10): its own fallback wins
    tie = environment_by_rule(_torch(made_for), made_for.name, made_for.date, registry_environments(ENVIRONMENTS),
                             today=LATER)
    assert tie.environment == "pypi-torch-2.8"
