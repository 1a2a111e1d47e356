"""The shard format has two implementations (pipeline/data/shards.py, train/data.py: the trainer is its own
package); they must agree on header magic, version, token count and dtype. Write with one, read with the other."""

from __future__ import annotations

import numpy as np
import pytest

from pipeline.data import shards as pipeline_shards

torch = pytest.importorskip("torch")
train_data = pytest.importorskip("train.data")

# every value a uint16 token can take at the edges, plus BOS, in a pseudo-random order
TOKENS = np.concatenate([[0, 1, 255, 256, 50256, 65534, 65535], np.random.default_rng(0).integers(0, 65536, 5000)])


def test_the_constants_agree():
    assert (train_data.MAGIC, train_data.VERSION) == (pipeline_shards.MAGIC, pipeline_shards.VERSION)
    assert train_data.HEADER_BYTES == pipeline_shards.HEADER_BYTES == 1024
    assert train_data.BOS_ID == pipeline_shards.BOS


@pytest.mark.parametrize("tokens", [TOKENS, TOKENS[:0]], ids=["tokens", "empty"])
def test_pipeline_writes_what_the_trainer_reads(tmp_path, tokens):
    path = tmp_path / "p.bin"
    size = pipeline_shards.write_shard(path, tokens)
    assert size == path.stat().st_size == pipeline_shards.shard_bytes(tokens.size)
    assert train_data.shard_token_count(path) == tokens.size
    read = train_data.read_shard(path)
    assert read.dtype == torch.uint16 and read.numel() == tokens.size
    assert np.array_equal(read.to(torch.int32).numpy(), tokens)


@pytest.mark.parametrize("tokens", [TOKENS, TOKENS[:0]], ids=["tokens", "empty"])
def test_trainer_writes_what_the_pipeline_reads(tmp_path, tokens):
    path = tmp_path / "t.bin"
    train_data.write_shard(path, tokens.tolist())
    assert pipeline_shards.header_problems(path) == []
    header = pipeline_shards.read_header(path)
    assert (header.magic, header.version, header.num_tokens) == (20240520, 1, tokens.size)
    assert pipeline_shards.size_from_header(path.read_bytes()[:1024]) == path.stat().st_size
    read = pipeline_shards.read_tokens(path, mmap=False)
    assert read.dtype == np.dtype("<u2") and np.array_equal(read, tokens)


def test_the_bytes_are_identical_whoever_writes_them(tmp_path):
    pipeline_shards.write_shard(tmp_path / "p.bin", TOKENS)
    train_data.write_shard(tmp_path / "t.bin", TOKENS.tolist())
    assert (tmp_path / "p.bin").read_bytes() == (tmp_path / "t.bin").read_bytes()


def test_both_refuse_the_same_broken_shards(tmp_path):
    pipeline_shards.write_shard(tmp_path / "ok.bin", TOKENS)
    whole = (tmp_path / "ok.bin").read_bytes()
    broken = {
        "truncated": whole[:-2],
        "padded": whole + b"\0\0",
        "bad magic": (20240521).to_bytes(4, "little") + whole[4:],
        "bad version": whole[:4] + (2).to_bytes(4, "little") + whole[8:],
        "short header": whole[:100],
    }
    for label, data in broken.items():
        path = tmp_path / f"{label}.bin"
        path.write_bytes(data)
        assert pipeline_shards.header_problems(path), label
        with pytest.raises(train_data.DataError):
            train_data.shard_token_count(path)
