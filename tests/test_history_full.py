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
    assert len(names) == 105  # 88 of track 1, 17 of track 2 (its row 11 links no log)
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


def _asserts_eight(ws, name) -> bool:
    """Whether the record's program carries upstream's `assert world_size == 8` as code (a plain line scan,
    independent of the tool's reader: a commented-out one starts with `#`)."""
    from pipeline.records.program import resolve_program

    text = resolve_program(load_record(name, ws.records_dir), None, ws.cache).text
    return any(line.startswith(b"assert world_size == 8") for line in text.splitlines())


def test_every_record_smoke_plans_on_one_gpu_of_docs_v1_smoke(imported):
    """`--smoke 20 --nproc 1 --dataset docs-v1-smoke`, no --smoke-val-tokens: every record with a program plans,
    except those that assert eight processes, which say so (their programs' own line)."""
    ws = imported
    refused = {}
    for name in record_names(ws.records_dir):
        plan = plan_reproduce(ws, ReproduceRequest(record=name, runs=1, smoke_steps=20, nproc=1, runtime="host",
                                                   dataset="docs-v1-smoke", data_source="/shards"))
        if plan.refusals and not plan.refusals[0].startswith(NO_PROGRAM):
            refused[name] = plan.refusals
    eight = {name for name in refused if _asserts_eight(ws, name)}
    assert len(eight) == 18, sorted(eight)  # 4 of track 1 (2025-02 to 2025-05), 14 of track 2
    for name in eight:
        assert refused[name][0].startswith("world size: the program asserts world_size == 8 (train_gpt.py line "), \
            refused[name]
    others = {n: why for n, why in refused.items() if n not in eight}
    assert not others, "\n".join(f"  {n}: {'; '.join(why)}" for n, why in sorted(others.items()))


def test_a_validation_that_outruns_the_data_is_refused_unless_the_loader_wraps(imported):
    """docs-v1-x4's validation shard holds 541,192 tokens; the records validate on 10,485,760. From 2025 on the
    loader stops at its last shard (refused before any cost); 2024's wraps around its files (plans)."""
    ws = imported
    verdicts = {}
    for name in ("2024-10-14_ModernArch", "2024-12-17_SparsifyEmbeds", "2025-01-16_Sub3Min", "2025-10-24_NorMuon"):
        plan = plan_reproduce(ws, ReproduceRequest(record=name, runs=1, smoke_steps=20, nproc=1, runtime="host",
                                                   dataset="docs-v1-x4", data_source="/shards"))
        verdicts[name] = plan.refusals
    assert not verdicts["2024-10-14_ModernArch"] and not verdicts["2024-12-17_SparsifyEmbeds"], verdicts
    assert "validates on 10,485,760 tokens" in verdicts["2025-01-16_Sub3Min"][0], verdicts
    assert "hold 541,192" in verdicts["2025-01-16_Sub3Min"][0] and "--smoke-val-tokens" in verdicts[
        "2025-01-16_Sub3Min"][0]
    assert "reads 2,097,152 tokens at once" in verdicts["2025-10-24_NorMuon"][0], verdicts


def test_only_2026_07_17_may_hand_scaled_mm_a_one_element_scale(imported):
    """The FP8 preflight asks the node the one-element form (which torch 2.11 + CUDA 13 refuses) of the programs
    whose tree may pass it to _scaled_mm: of the whole history, the newest only; 2026-05-19's go to Triton."""
    from pipeline.preflight.fp8 import one_element_scales
    from pipeline.records.program import resolve_program

    ws, asked = imported, set()
    for name in record_names(ws.records_dir):
        record = load_record(name, ws.records_dir)
        if any(log.program_sha256 for log in record.logs):
            if one_element_scales(resolve_program(record, None, ws.cache).text):
                asked.add(name)
    assert asked == {"2026-07-17_FP8DownProjection"}
