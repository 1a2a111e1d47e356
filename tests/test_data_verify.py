"""Shard format, dataset manifests, the local lock and `repro data verify` (every bad file reported)."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import yaml

from pipeline.data.manifest import load_dataset, parse_dataset, record_lock
from pipeline.data.shards import BOS, HEADER_BYTES, header_problems, read_header, read_tokens, shard_bytes, write_shard
from pipeline.data.verify import (
    LOCK_NAME,
    LockEntry,
    data_lock_digest,
    read_local_lock,
    verify_dir,
    write_local_lock,
)
from pipeline.errors import InputError, ManifestError
from pipeline.hashing import sha256_file, sha256_files
from tests.conftest import shared_path
from tests.paths import REPO_ROOT


def test_shard_roundtrip_and_header(tmp_path):
    tokens = np.array([BOS, 1, 2, 65535, 0], dtype=np.int64)
    size = write_shard(tmp_path / "a.bin", tokens)
    assert size == shard_bytes(5) == HEADER_BYTES + 10 == (tmp_path / "a.bin").stat().st_size
    header = np.fromfile(tmp_path / "a.bin", dtype="<i4", count=256)
    assert list(header[:3]) == [20240520, 1, 5] and not header[3:].any()
    assert read_tokens(tmp_path / "a.bin").tolist() == tokens.tolist()
    assert read_tokens(tmp_path / "a.bin", mmap=False).dtype == np.uint16
    assert header_problems(tmp_path / "a.bin") == [] and read_header(tmp_path / "a.bin").num_tokens == 5
    with pytest.raises(ValueError, match="uint16"):
        write_shard(tmp_path / "b.bin", np.array([70000]))


def test_header_problems_catch_truncation_padding_and_foreign_files(tmp_path):
    write_shard(tmp_path / "ok.bin", np.arange(100))
    data = (tmp_path / "ok.bin").read_bytes()
    (tmp_path / "short.bin").write_bytes(data[:-2])
    (tmp_path / "long.bin").write_bytes(data + b"\0\0")
    (tmp_path / "tiny.bin").write_bytes(data[:100])
    (tmp_path / "magic.bin").write_bytes(b"\1\0\0\0" + data[4:])
    assert "truncated or padded" in header_problems(tmp_path / "short.bin")[0]
    assert "truncated or padded" in header_problems(tmp_path / "long.bin")[0]
    assert "shorter than the 1024-byte header" in header_problems(tmp_path / "tiny.bin")[0]
    assert "magic" in header_problems(tmp_path / "magic.bin")[0]
    assert "shards hold 99" in header_problems(tmp_path / "ok.bin", tokens_expected=99)[0]


def test_the_fineweb_manifest_pins_revision_and_locks_all_104_files():
    ds = load_dataset("fineweb10B-gpt2", REPO_ROOT / "manifests")
    assert ds.hub.repo_id == "kjj0/fineweb10B-gpt2" and ds.hub.repo_type == "dataset"
    assert len(ds.hub.revision) == 40
    names = ds.file_names(train_shards=103, val_shards=1)
    assert len(names) == 104 == len(ds.lock) and set(names) == set(ds.lock)
    assert all(e.sha256 and len(e.sha256) == 64 for e in ds.lock.values())
    assert ds.lock["fineweb_val_000000.bin"].size == shard_bytes(100_000_000)
    assert ds.lock["fineweb_train_000103.bin"].size == shard_bytes(55_324_043)  # the short last shard
    assert ds.tokens_expected("fineweb_train_000001.bin") == 100_000_000
    assert ds.tokens_expected("fineweb_train_000103.bin") is None
    with pytest.raises(ManifestError, match="at most 103"):
        ds.file_names(train_shards=104, val_shards=1)


def _manifest_text(**overrides) -> str:
    fields = {"pattern": '"shard_{index:03d}.bin"', "extra": "", "name": "toy"}
    fields.update(overrides)
    return f"""schema_version: 1
name: {fields['name']}
source: {{hub: {{repo_id: a/b, revision: main}}}}
format: {{magic: 20240520, version: 1, header_ints: 256, token_dtype: uint16, bos: 50256}}
splits:
  val: {{pattern: "v_{{index}}.bin", first: 0, count: 1}}
  train: {{pattern: {fields['pattern']}, first: 1, count: 2}}
{fields['extra']}
lock:
  v_0.bin: {{size: , sha256: }}   # keep me
"""


@pytest.mark.parametrize("overrides, field, fix", [
    ({"pattern": '"shard.bin"'}, "splits.train.pattern", "{index"),
    ({"extra": "colour: blue"}, "colour", "known here"),
    ({"name": "other"}, "name", "other.yaml"),
])
def test_bad_manifests_name_file_field_and_fix(tmp_path, overrides, field, fix):
    path = tmp_path / "toy.yaml"
    path.write_text(_manifest_text(**overrides))
    with pytest.raises(ManifestError) as err:
        parse_dataset(yaml.safe_load(path.read_text()), path)
    assert err.value.field == field and fix in str(err.value) and str(path) in str(err.value)


def test_record_lock_fills_empty_entries_and_keeps_comments(tmp_path):
    path = tmp_path / "toy.yaml"
    path.write_text(_manifest_text())
    ds = load_dataset(path)
    digits_only = "1" * 64  # YAML would read this as a number unless quoted
    assert record_lock(ds, {"v_0.bin": (1234, digits_only)}) == ["v_0.bin"]
    ds = load_dataset(path)
    assert ds.lock["v_0.bin"].sha256 == digits_only and ds.lock["v_0.bin"].size == 1234
    assert "# keep me" in path.read_text()
    assert record_lock(ds, {"v_0.bin": (1, "2" * 64)}) == []  # a recorded value is never overwritten
    with pytest.raises(ManifestError, match="no line"):
        record_lock(ds, {"shard_001.bin": (1, "3" * 64)})


def test_sha256_matches_hashlib_with_parallel_files(tmp_path):
    import hashlib

    paths = []
    for i, size in enumerate([0, 1, (8 << 20) + 3, 5_000_000]):
        paths.append(tmp_path / f"f{i}")
        paths[-1].write_bytes(np.random.default_rng(i).bytes(size))
    hashes = sha256_files(paths, workers=2)
    assert hashes == {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in paths}
    assert sha256_file(paths[2], buffer_bytes=4096) == hashes[paths[2]]


def _folder(tmp_path, n=4):
    folder = tmp_path / "data"
    folder.mkdir()
    entries = []
    for i in range(n):
        name = f"fineweb_train_{i + 1:06d}.bin"
        write_shard(folder / name, np.random.default_rng(i).integers(0, 50257, 2000 + i))
        entries.append(LockEntry(name=name, size=(folder / name).stat().st_size, sha256=sha256_file(folder / name),
                                 tokens=2000 + i, source="test"))
    write_local_lock(folder, "toy", entries)
    return folder, [e.name for e in entries]


def test_verify_reports_every_bad_file(tmp_path):
    folder, names = _folder(tmp_path)
    flipped = bytearray((folder / names[0]).read_bytes())
    flipped[2000] ^= 0xFF
    (folder / names[0]).write_bytes(bytes(flipped))
    (folder / names[1]).write_bytes((folder / names[1]).read_bytes()[:-6])
    (folder / names[2]).unlink()
    report = verify_dir(folder)
    bad = {f.name: " ".join(f.problems) for f in report.bad}
    assert set(bad) == set(names[:3]) and not report.ok
    assert "sha256" in bad[names[0]] and "truncated" in bad[names[1]] and "missing" in bad[names[2]]
    assert [f.name for f in report.files if f.ok] == [names[3]]


def test_a_file_no_shard_can_be_named_is_one_bad_file_among_the_others(tmp_path):
    """A staging name (`.partial.bin`) in the folder stopped the whole check with one error that blamed the lock;
    it is now reported, with where the name came from, beside every other file's result."""
    folder, names = _folder(tmp_path)
    (folder / ".partial.bin").write_bytes(b"")
    (folder / names[1]).unlink()
    report = verify_dir(folder)
    bad = {f.name: " ".join(f.problems) for f in report.bad}
    assert set(bad) == {".partial.bin", names[1]} and len(report.files) == 5
    assert "not a shard's name" in bad[".partial.bin"] and bad[".partial.bin"].endswith(f"in {folder}")


def test_cli_verify_json_and_exit_code(tmp_path):
    folder, names = _folder(tmp_path)
    run = [sys.executable, "-m", "pipeline", "data", "verify", str(folder), "--json"]
    ok = subprocess.run(run, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["lock_digest"] == data_lock_digest(folder)
    (folder / names[3]).write_bytes(b"junk")
    bad = subprocess.run(run, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and names[3] in bad.stderr and "fix:" in bad.stderr
    assert [f["name"] for f in json.loads(bad.stdout)["files"] if not f["ok"]] == [names[3]]


def test_lock_digest_depends_on_content_not_source(tmp_path):
    folder, names = _folder(tmp_path)
    before = data_lock_digest(folder)
    lock = read_local_lock(folder)
    moved = [LockEntry(name=e.name, size=e.size, sha256=e.sha256, tokens=e.tokens,
                       source="https://elsewhere/" + e.name) for e in lock.files.values()]
    write_local_lock(folder, "toy", moved)
    assert data_lock_digest(folder) == before
    write_local_lock(folder, "toy", [LockEntry(name="extra.bin", size=1024, sha256="0" * 64)])
    assert data_lock_digest(folder) != before
    with pytest.raises(InputError, match="belongs to dataset"):
        write_local_lock(folder, "other", [])
    with pytest.raises(InputError, match=LOCK_NAME):
        data_lock_digest(tmp_path)


def test_verify_real_docs_v1_shards():
    folder = shared_path("data", "docs-v1")
    with pytest.raises(InputError):
        verify_dir(folder / "nope")
    assert sha256_file(folder / "fineweb_val_000000.bin") == \
        "44d4c3d615152a0fe500a0d9bcd7e14b05d6711d1e55d843c0e90696030a5003"
    report = verify_dir(folder)
    assert report.ok and {f.tokens for f in report.files} == {11_463_612, 541_192}
    assert not any(f.hash_checked for f in report.files)  # no lock there: header and size only, and said so
