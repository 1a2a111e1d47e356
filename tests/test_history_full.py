"""The whole history, as a new user meets it: a fresh `repro records import` of both tracks of upstream's
repository (tests/fixtures/history-full: every record's selected logs, trimmed, programs whole; see its
build.py), the logs put in the workspace cache as `repro records fetch-logs --from` does, then `--plan` of every
record with no data flag and no program source. Every record plans, except those whose logs carry no program
(llm.c's trainer printed none), which must say so. One process: the import and the plans call the functions the
CLI calls."""

from __future__ import annotations

import shutil
import tarfile

import pytest

from pipeline.cli.records import dataset_shard_tokens
from pipeline.env.manifest import load_environment
from pipeline.records.environment_choice import registry_environments
from pipeline.records.importer import import_records
from pipeline.records.model import load_record, record_names
from pipeline.records.published import fetch_published_logs
from pipeline.reproduce.flow import ReproduceRequest
from pipeline.reproduce.plan import plan_reproduce
from pipeline.workspace import Workspace
from tests.paths import FIXTURES, REPO_ROOT

TREE = FIXTURES / "history-full" / "tree.tar.xz"
COMMIT = "f411b3d346aa52d3504324ca93c230fd84c6c07f"
NO_PROGRAM = "program: the record's logs carry no program text"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """(workspace, upstream tree) after a fresh import of both tracks and the logs in the cache."""
    root = tmp_path_factory.mktemp("history")
    upstream, registry = root / "upstream", root / "registry"
    with tarfile.open(TREE) as tar:
        tar.extractall(upstream, filter="data")
    for part in ("datasets", "environments"):
        shutil.copytree(REPO_ROOT / "manifests" / part, registry / part)
    ws = Workspace.resolve(root=root / "home", registry=registry)
    for track in (1, 2):  # as `repro records import` does
        import_records(upstream, registry / "records", track=track, commit=COMMIT,
                       environments=registry_environments(registry / "environments"),
                       shard_tokens=dataset_shard_tokens(ws))
    for name in record_names(ws.records_dir):
        record = load_record(name, ws.records_dir)
        fetch_published_logs(record, ws.cache, source_dir=upstream / record.upstream.folder)
    return ws


def test_every_imported_record_plans_with_no_flags(imported):
    ws = imported
    names = record_names(ws.records_dir)
    assert len(names) == 103
    failed = {}
    for name in names:
        plan = plan_reproduce(ws, ReproduceRequest(record=name, runs=4))
        if plan.refusals:
            failed[name] = plan.refusals
    # a record whose logs carry no program (llm.c's trainer printed none) is refused, saying so first
    no_program = {n for n, why in failed.items() if why[0].startswith(NO_PROGRAM)
                  and all(not log.program_sha256 for log in load_record(n, ws.records_dir).logs)}
    others = {n: why for n, why in failed.items() if n not in no_program}
    assert not others, f"{len(others)} of {len(names)} records do not plan:\n" + "\n".join(
        f"  {n}: {'; '.join(why)}" for n, why in sorted(others.items()))
    assert len(no_program) == 3, sorted(no_program)  # llm.c's baselines: 2024-06-06, 2024-10-13, track 2's row 1


def test_every_environment_an_imported_record_names_loads(imported):
    ws = imported
    named = {load_record(n, ws.records_dir).environment for n in record_names(ws.records_dir)}
    assert named - {""} and all(load_environment(ws, name).name == name for name in named - {""})


def test_every_record_with_a_program_has_its_shard_count_derived_and_said(imported):
    ws = imported
    not_derived = {}
    for name in record_names(ws.records_dir):
        record = load_record(name, ws.records_dir)
        derived = record.dataset.derived
        assert derived is not None and derived.derivation, name
        if not any(log.program_sha256 for log in record.logs):
            assert derived.train_shards == 0 and "carries the program" in derived.derivation, (name, derived)
        elif derived.train_shards == 0:
            not_derived[name] = derived.derivation
        else:
            assert derived.steps == record.published.steps, (name, derived)  # the steps its log ran
            assert derived.train_shards * 100_000_000 >= derived.train_tokens * (1 + derived.margin), name
    assert not not_derived, "\n".join(f"  {n}: {why}" for n, why in sorted(not_derived.items()))
