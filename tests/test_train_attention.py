"""The attention function's backends against a brute-force definition of the mask (CPU).

    .venv/bin/python -m pytest -q tests/test_train_attention.py

FlexAttention runs eagerly on CPU in torch 2.13 (forward only: it has no CPU backward); its compiled Triton
kernels and backward are checked on the GPU by `python benchmarks/bench.py --checks` (train/BENCHMARKS.md).
"""

import warnings

import pytest
import torch

from train.attention import FLEX_BLOCK, allowed_pairs, attention, block_mask_tables, document_ids, select_backend

T, H, HD = 512, 2, 32
BOUNDS = torch.tensor([0, 37, 200, 201, 390, 512, 512, 512], dtype=torch.int32)  # padded with T


def brute_force_mask(bounds: torch.Tensor, length: int, window: int) -> torch.Tensor:
    starts = [int(b) for b in bounds if b < length]
    doc = [max(i for i, s in enumerate(starts) if s <= t) for t in range(length)]
    mask = torch.zeros(length, length, dtype=torch.bool)
    for q in range(length):
        for k in range(max(0, q - window), q + 1):
            mask[q, k] = doc[q] == doc[k]
    return mask


def naive_attention(q, k, v, mask, scale):
    """float64, one head at a time, softmax over the allowed keys only."""
    out = torch.zeros(q.shape, dtype=torch.float64)
    for h in range(q.size(1)):
        scores = (q[:, h].double() @ k[:, h].double().T) * scale
        scores = scores.masked_fill(~mask, float("-inf"))
        out[:, h] = scores.softmax(-1) @ v[:, h].double()
    return out


def rel_err(a, b) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


@pytest.mark.parametrize("window", [0, 5, 130, 1000])
def test_mask_definition(window):
    assert torch.equal(allowed_pairs(BOUNDS, T, window), brute_force_mask(BOUNDS, T, window))


def test_document_ids_ignore_padding_and_empty_documents():
    docs = document_ids(torch.tensor([0, 3, 3, 5, 8, 8], dtype=torch.int32), 8)
    assert docs.tolist() == [1, 1, 1, 3, 3, 4, 4, 4]


@pytest.mark.parametrize("window", [0, 5, 130, 300])
def test_dense_backend_matches_float64_reference(window):
    gen = torch.Generator().manual_seed(window)
    q, k, v = (torch.randn(T, H, HD, generator=gen).bfloat16() for _ in range(3))
    got = attention(q, k, v, BOUNDS, window, 0.12, backend="dense", max_seqlen=T)
    ref = naive_attention(q, k, v, brute_force_mask(BOUNDS, T, window), 0.12)
    assert got.dtype == torch.bfloat16 and got.shape == (T, H, HD)
    assert rel_err(got, ref) < 4e-3  # one bf16 rounding of the output


def test_dense_backend_gradients_flow():
    q, k, v = (torch.randn(T, H, HD).bfloat16().requires_grad_() for _ in range(3))
    out = attention(q, k, v, BOUNDS, torch.tensor(64), torch.tensor(0.1), backend="dense", max_seqlen=T)
    out.float().square().sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in (q, k, v))


@pytest.mark.parametrize("window", [0, 5, 127, 128, 129, 300, 1000])
def test_block_tables_full_exact_partial_covering(window):
    mask = brute_force_mask(BOUNDS, T, window)
    tiles = mask.view(T // FLEX_BLOCK, FLEX_BLOCK, T // FLEX_BLOCK, FLEX_BLOCK).permute(0, 2, 1, 3)
    all_allowed, any_allowed = tiles.all(-1).all(-1), tiles.any(-1).any(-1)
    full, partial = block_mask_tables(document_ids(BOUNDS, T), torch.tensor(window))
    assert torch.equal(full, all_allowed)  # exact: these tiles skip the mask
    assert not (full & partial).any()
    assert ((full | partial) >= any_allowed).all()  # no allowed pair is in a skipped tile


@pytest.mark.parametrize("window", [0, 5, 130, 300])
def test_flex_backend_matches_dense_on_cpu(window):
    gen = torch.Generator().manual_seed(100 + window)
    q, k, v = (torch.randn(T, H, HD, generator=gen).bfloat16() for _ in range(3))
    dense = attention(q, k, v, BOUNDS, window, 0.12, backend="dense", max_seqlen=T)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        try:
            flex = attention(q, k, v, BOUNDS, torch.tensor(window), torch.tensor(0.12), backend="flex", max_seqlen=T)
        except (NotImplementedError, RuntimeError) as exc:
            pytest.skip(f"FlexAttention does not run eagerly on this CPU build: {exc}")
    assert rel_err(flex, dense) < 1e-2


def test_flex_rejects_lengths_off_the_tile():
    q = torch.randn(100, H, HD).bfloat16()
    with pytest.raises(ValueError, match="multiple of 128"):
        attention(q, q, q, torch.tensor([0, 100], dtype=torch.int32), 5, 0.1, backend="flex", max_seqlen=100)


def test_backend_selection_on_cpu():
    cpu = torch.device("cpu")
    assert select_backend("auto", cpu) == "dense"
    assert select_backend("flex", cpu) == "flex"
    with pytest.raises(ValueError, match="fa3 needs CUDA"):
        select_backend("fa3", cpu)
