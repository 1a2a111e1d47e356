"""Shards and loaders of train/data.py on hand-built shards (sequence boundaries, rank interleaving, the
max_seq_len split, header and size errors, running out, cycling, validation slices).

    .venv/bin/python -m pytest -q tests/test_train_data.py

`write_corpus` (learnable generated documents) is also used by the other tests/test_train_*.py files.
"""

from pathlib import Path

import pytest
import torch

from train.data import (
    BOS_ID,
    DataError,
    TrainLoader,
    ValLoader,
    max_docs,
    pick_sequences,
    read_shard,
    shard_token_count,
    write_shard,
)


def shard_from_docs(path: Path, docs: list[list[int]]) -> Path:
    return write_shard(path, [t for doc in docs for t in [BOS_ID, *doc]])


def corpus_tokens(n_tokens: int, seed: int, alphabet: int = 512) -> list[int]:
    """Documents of 50..400 tokens whose next token is a fixed function of the current one (learnable)."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randperm(50000, generator=torch.Generator().manual_seed(1234))[:alphabet].tolist()
    successor = torch.randperm(alphabet, generator=torch.Generator().manual_seed(99)).tolist()
    out: list[int] = []
    while len(out) < n_tokens:
        length = int(torch.randint(50, 400, (1,), generator=gen))
        state = int(torch.randint(0, alphabet, (1,), generator=gen))
        out.append(BOS_ID)
        for _ in range(length):
            out.append(ids[state])
            state = successor[state]
    return out[:n_tokens]


def write_corpus(folder: Path, train_tokens: int = 120_000, val_tokens: int = 20_000) -> tuple[str, str]:
    """Two train shards and one val shard of generated documents; returns the two globs."""
    folder.mkdir(parents=True, exist_ok=True)
    half = train_tokens // 2
    write_shard(folder / "fineweb_train_000001.bin", corpus_tokens(half, 1))
    write_shard(folder / "fineweb_train_000002.bin", corpus_tokens(train_tokens - half, 2))
    write_shard(folder / "fineweb_val_000000.bin", corpus_tokens(val_tokens, 3))
    return str(folder / "fineweb_train_*.bin"), str(folder / "fineweb_val_*.bin")


# ---- shard files ------------------------------------------------------------------------------------------
def test_shard_roundtrip_and_header(tmp_path):
    tokens = [BOS_ID, 1, 2, 65535, 0]
    path = write_shard(tmp_path / "a.bin", tokens)
    assert path.stat().st_size == 1024 + 2 * len(tokens)
    assert shard_token_count(path) == 5
    assert read_shard(path).to(torch.int32).tolist() == tokens


def _corrupt(path: Path, header_edit=None, extra: bytes = b"", cut: int = 0) -> Path:
    raw = bytearray(path.read_bytes())
    if header_edit:
        index, value = header_edit
        raw[4 * index:4 * index + 4] = int(value).to_bytes(4, "little", signed=True)
    raw = raw[:len(raw) - cut] + extra
    path.write_bytes(bytes(raw))
    return path


@pytest.mark.parametrize("edit, fragment", [
    (dict(header_edit=(0, 12345)), "magic number 12345, expected 20240520"),
    (dict(header_edit=(1, 2)), "version 2, expected 1"),
    (dict(header_edit=(2, 9)), "claims 9 tokens"),
    (dict(extra=b"\0\0"), "claims 5 tokens (1034 bytes) but the file has 1036 bytes"),
    (dict(cut=2), "but the file has 1032 bytes"),
])
def test_header_and_size_errors(tmp_path, edit, fragment):
    path = _corrupt(write_shard(tmp_path / "a.bin", [BOS_ID, 1, 2, 3, 4]), **edit)
    with pytest.raises(DataError) as err:
        read_shard(path)
    assert fragment in str(err.value) and str(path) in str(err.value)


def test_short_file_and_missing_glob(tmp_path):
    (tmp_path / "tiny.bin").write_bytes(b"\0" * 100)
    with pytest.raises(DataError, match="shorter than the 1024-byte shard header"):
        shard_token_count(tmp_path / "tiny.bin")
    with pytest.raises(DataError, match="no train files match"):
        TrainLoader(str(tmp_path / "nothing_*.bin"), 8, 5, 1, 1, 0)


# ---- BOS-aligned training batches ---------------------------------------------------------------------------
# documents (after their BOS): A=3 tokens, B=7, C=2, D=5, E=2, F=9, G=1, ... positions worked out by hand below
DOCS = [[1, 2, 3], [4, 5, 6, 7, 8, 9, 10], [11, 12], [13, 14, 15, 16, 17], [18, 19],
        [20, 21, 22, 23, 24, 25, 26, 27, 28], [29]]


def test_pick_sequences_by_hand():
    # BOS at 0, 4, 12, 15, 21, 24, 34; shard of 36 tokens; 8 tokens per slot (buffers of 9); max_seq_len 5
    bos, n = [0, 4, 12, 15, 21, 24, 34], 36
    spans, nxt = pick_sequences(bos, n, 0, tokens_per_slot=8, max_seq_len=5, ranks=2)
    # rank 0: A whole (0,4), then B cut by max_seq_len at 9 which also fills the buffer (4 + 5 = 9)
    assert spans[0] == [(0, 4), (4, 9)]
    # rank 1 starts at the next BOS (the rest of B is skipped): C whole, D split at 5 tokens, E cut to fill
    assert spans[1] == [(12, 15), (15, 20), (21, 22)]
    assert nxt == 5
    assert pick_sequences(bos, n, 5, 8, 5, ranks=2) is None  # F and G cannot fill two buffers


def test_train_loader_rank_interleaving_and_bounds(tmp_path):
    shard_from_docs(tmp_path / "t_1.bin", DOCS)
    tokens = read_shard(tmp_path / "t_1.bin").to(torch.int64)
    ranks = [TrainLoader(str(tmp_path / "t_*.bin"), 8, 5, slots=2, world_size=2, rank=r) for r in range(2)]
    b0, b1 = (loader.next_batch() for loader in ranks)
    buf1 = torch.cat([tokens[12:15], tokens[15:20], tokens[21:22]])
    assert b1.inputs.tolist() == buf1[:-1].tolist() and b1.targets.tolist() == buf1[1:].tolist()
    assert b1.inputs.dtype == torch.int32 and b1.targets.dtype == torch.int64
    # lengths 3, 5, 1 with the last shortened by one: bounds 0, 3, 8, 8, then padding with 8
    assert b1.doc_bounds.tolist() == [0, 3, 8, 8] + [8] * (max_docs(8) - 4)
    assert b0.doc_bounds[:3].tolist() == [0, 4, 8]
    # world size 1 with two micro-steps sees the same two buffers in the same order
    single = TrainLoader(str(tmp_path / "t_*.bin"), 8, 5, slots=2, world_size=1, rank=0)
    s0, s1 = single.next_batch(), single.next_batch()
    assert torch.equal(s0.inputs, b0.inputs) and torch.equal(s1.inputs, b1.inputs)
    assert torch.equal(s1.doc_bounds, b1.doc_bounds)


def test_max_seq_len_split_2048(tmp_path):
    """A 5000-token document yields one 2048-token sequence; the rest of it is skipped."""
    long_doc = [7] * 4999
    shard_from_docs(tmp_path / "t_1.bin", [long_doc, [1] * 3000, [2] * 3000])
    loader = TrainLoader(str(tmp_path / "t_*.bin"), 4096, 2048, slots=1, world_size=1, rank=0)
    batch = loader.next_batch()
    # sequences: [0, 2048) of the long doc, then [5000, 7048) of the second doc (cut at 2048, filling 4097)
    assert batch.doc_bounds[:3].tolist() == [0, 2048, 4096]
    assert batch.inputs[2048].item() == BOS_ID and (batch.inputs[1:2048] == 7).all()


def test_shard_switch_running_out_and_cycling(tmp_path):
    shard_from_docs(tmp_path / "t_1.bin", DOCS)
    shard_from_docs(tmp_path / "t_2.bin", [[100 + i] * 6 for i in range(4)])
    loader = TrainLoader(str(tmp_path / "t_*.bin"), 8, 5, slots=2, world_size=2, rank=0)
    loader.next_batch()  # shard 1, first step
    second = loader.next_batch()  # shard 1 too short for another: starts shard 2
    assert loader.path.name == "t_2.bin" and second.inputs[1].item() == 100
    with pytest.raises(DataError, match=r"ran out after 2 steps' batches .* --set data_cycle=true"):
        loader.next_batch()
    cycling = TrainLoader(str(tmp_path / "t_*.bin"), 8, 5, slots=2, world_size=2, rank=0, cycle=True)
    firsts = [cycling.next_batch().inputs[:3].tolist() for _ in range(3)]
    assert firsts[2] == firsts[0]  # back at the first shard


def test_shard_switch_is_the_same_at_every_world_size(tmp_path):
    """A step never mixes shards: with 4 slots, shard 1 holds one step and a bit; step 2 starts shard 2."""
    shard_from_docs(tmp_path / "t_1.bin", [[i] * 9 for i in range(1, 7)])  # 6 documents: 4 + 2 slots
    shard_from_docs(tmp_path / "t_2.bin", [[i] * 9 for i in range(101, 109)])
    pattern = str(tmp_path / "t_*.bin")
    per_world = {}
    for world in (1, 2, 4):
        loaders = [TrainLoader(pattern, 8, 9, slots=4, world_size=world, rank=r) for r in range(world)]
        steps = []
        for _ in range(2):
            micro = [[ld.next_batch() for ld in loaders] for _ in range(4 // world)]  # [m][r] -> slot m*world + r
            steps.append([micro[slot // world][slot % world].inputs[1].item() for slot in range(4)])
        per_world[world] = steps
    assert per_world[1] == per_world[2] == per_world[4] == [[1, 2, 3, 4], [101, 102, 103, 104]]


def test_too_few_documents_anywhere(tmp_path):
    shard_from_docs(tmp_path / "t_1.bin", [[1, 2]])
    loader = TrainLoader(str(tmp_path / "t_*.bin"), 8, 5, slots=1, world_size=1, rank=0, cycle=True)
    with pytest.raises(DataError, match="no training file holds enough documents"):
        loader.next_batch()


# ---- validation -------------------------------------------------------------------------------------------
def test_val_loader_contiguous_rank_slices(tmp_path):
    tokens = list(range(1000, 1100))
    tokens[0] = tokens[13] = tokens[30] = BOS_ID
    write_shard(tmp_path / "v_0.bin", tokens)
    world, per_slot = 2, 16
    loaders = [ValLoader(str(tmp_path / "v_*.bin"), per_slot, world, r, micro_steps=2) for r in range(world)]
    first = [ld.next_batch() for ld in loaders]
    second = [ld.next_batch() for ld in loaders]
    # micro-step m, rank r reads [32m + 16r, 32m + 16r + 17)
    assert first[1].inputs.tolist() == tokens[16:32] and first[1].targets.tolist() == tokens[17:33]
    assert second[0].inputs.tolist() == tokens[32:48]
    # boundaries: 0 plus BOS positions inside the slice (rank 0: 0 and 13; rank 1: 30 - 16 = 14)
    assert first[0].doc_bounds[:3].tolist() == [0, 13, 16]
    assert first[1].doc_bounds[:3].tolist() == [0, 14, 16]


def test_val_loader_too_short_fails_early(tmp_path):
    write_shard(tmp_path / "v_0.bin", [BOS_ID] + [5] * 99)
    with pytest.raises(DataError, match="lower val_tokens"):
        ValLoader(str(tmp_path / "v_*.bin"), 32, 2, 0, micro_steps=2)
