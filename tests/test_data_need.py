"""The train shards a record's program reads, from its own hyperparameters (pipeline/records/data_need.py), checked
against what upstream told its users to fetch in each era, and a run given fewer shards refused before it costs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from pipeline.records.data_need import data_need, shards_read
from pipeline.records.logparse import parse_text
from tests.paths import FIXTURES, REPO_ROOT

TREE = FIXTURES / "history-full" / "tree.tar.xz"
SHARD = 100_000_000
T1 = "records/track_1_short"
# `python data/cached_fineweb10B.py N` in upstream's README while the record was the current one (the commit that
# changed the line, its date): the shards the record's own runs were made with.
STATED = {
    "2024-10-10_Muon": 35,  # 835c99f3 2024-10-12: "downloads the first 3.5B tokens"
    "2024-10-14_ModernArch": 27,  # 99d53454 2024-10-14
    "2024-11-03_UntieEmbed": 24,  # 40dffbce 2024-11-03
    "2024-11-06_ShortcutsTweaks": 18,  # c6584f24 2024-11-06
    "2024-11-19_FlexAttention": 10,  # f6b280c9 2024-11-20
    "2025-01-04_SoftCap": 8,  # b1679524 2025-01-04: "only the first 0.8B training tokens"
    "2025-05-25_EvenFasterReduce": 8,  # 4984ea4d 2025-05-25
    "2025-09-05_SkipMLPBlocks": 9,  # 1d02940e 2025-09-05: "only the first 900M training tokens"
    "2026-07-17_FP8DownProjection": 9,  # README at f411b3d (HEAD), "Running the current record"
}


@pytest.fixture(scope="module")
def programs() -> dict[str, bytes]:
    """The first program-carrying log of each record in STATED, from the committed whole-history fixture."""
    out: dict[str, bytes] = {}
    with tarfile.open(TREE) as tar:
        for member in tar.getmembers():
            folder = member.name.split("/")[2] if member.name.startswith(T1 + "/") else ""
            if folder in STATED and folder not in out and member.name.endswith((".txt", ".log")):
                program = parse_text(tar.extractfile(member).read(), member.name).program
                if program is not None:
                    out[folder] = program
    assert set(out) == set(STATED)
    return out


@pytest.mark.parametrize("name", sorted(STATED))
def test_the_shards_a_program_reads_fit_what_upstream_told_its_users_to_fetch(programs, name):
    need = data_need(programs[name], world_size=8, tokens_per_shard=SHARD)
    # its own runs read no more than that, give or take upstream's rounding: 2024-11-03's 4578 steps read 2.4002B
    # tokens where its README says "2.4B" (the 2024 loader wraps around to the first shard for the last 190,464)
    assert shards_read(need, SHARD) <= STATED[name] + 1, need.derivation
    assert need.train_shards >= shards_read(need, SHARD)  # the margin only adds
    assert need.train_shards <= STATED[name] + 3, need.derivation  # and stays near upstream's count
    assert (need.val_shards, need.val_tokens) == (1, 10_485_760)


def test_each_era_is_read_where_it_writes_its_batch(programs):
    said = {name: data_need(programs[name], world_size=8, tokens_per_shard=SHARD) for name in STATED}
    assert said["2024-10-10_Muon"].train_tokens == 6200 * 512 * 1024  # batch_size sequences x sequence_length
    assert said["2025-01-04_SoftCap"].train_tokens == 1390 * 8 * 64 * 1024  # batch_size in tokens
    assert said["2025-05-25_EvenFasterReduce"].train_tokens == 1770 * 48 * 1024 * 8  # train_seq_len per GPU x 8
    newest = said["2026-07-17_FP8DownProjection"]  # three stages of 1380/3 steps, then 10 extension steps at 24
    assert newest.steps == 1390 and newest.train_tokens == 460 * (8 + 16 + 24) * 2048 * 8 + 10 * 24 * 2048 * 8
    assert "TrainingStage" in newest.derivation and "BOS-aligned" in newest.derivation
    smoke = data_need(programs["2026-07-17_FP8DownProjection"], world_size=8, tokens_per_shard=SHARD, steps=30)
    # 30 scheduled steps, and the 2 of the extension the smoke cut keeps, at the last stage's batch
    assert smoke.steps == 32 and smoke.train_tokens == 10 * (8 + 16 + 24) * 2048 * 8 + 2 * 24 * 2048 * 8


def _registry_with(tmp_path, train_shards: int):
    registry = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", registry)
    path = registry / "records" / "2026-07-17_FP8DownProjection.yaml"
    path.write_text(path.read_text().replace("  train_shards: 9\n", f"  train_shards: {train_shards}\n"))
    return registry


def test_a_record_given_fewer_shards_than_its_program_reads_is_refused_before_any_stage(tmp_path):
    log = FIXTURES / "record-logs/2026-07-17_FP8DownProjection/11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt"
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "REPRO_HOME": str(home), "REPRO_REGISTRY": str(_registry_with(tmp_path, 3))}
    base = [sys.executable, "-m", "pipeline", "reproduce", "--record", "2026-07-17_FP8DownProjection",
            "--program-source", str(log), "--runtime", "host", "--python-env", "system"]
    plan = subprocess.run(base + ["--plan"], capture_output=True, text=True, timeout=120, env=env, cwd=home)
    assert plan.returncode == 1 and "cannot: data: 3 train shard(s) of fineweb10B-gpt2" in plan.stdout
    assert "365,690,880 tokens its 1390 steps read" in plan.stdout
    run = subprocess.run(base, capture_output=True, text=True, timeout=120, env=env, cwd=home)
    assert run.returncode == 3 and "3 train shard(s)" in run.stderr and "Traceback" not in run.stderr
    assert list(home.iterdir()) == []  # refused before any stage: nothing fetched, built or written
