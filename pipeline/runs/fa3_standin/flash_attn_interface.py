"""Stand-in for FA3's `flash_attn_interface` where FA3 is not installed (smoke runs, benchmarks, differential tests).

    PYTHONPATH=pipeline/runs/fa3_standin:. torchrun --standalone --nproc_per_node=1 train_gpt.py  (the record)
    from flash_attn_interface import flash_attn_varlen_func                                     (as the record does)

It implements the one call the record's program makes,

    y = flash_attn_varlen_func(q, k, v, cu_seqlens_q=b, cu_seqlens_k=b, max_seqlen_q=n, max_seqlen_k=n,
                               causal=True, softmax_scale=s, window_size=(left, 0))     # (T, H, hd) -> (T, H, hd)

with FA3's meaning: query t sees key j when j <= t, t - j <= left (left < 0: no limit) and both lie in the
same sequence [b[i], b[i+1]) of the packed batch (b starts with 0 and is padded with T). It returns the output
only, as the record's FA3 build does (the program calls `.view` on the result). Anything else FA3 accepts is
refused with NotImplementedError, never silently ignored.

Backends:
- CUDA: the native trainer's FlexAttention path (`train.attention.attention(..., backend="flex")`), so that
  benchmarks/sidebyside.py runs the record and train/ on the same attention code and measures the trainers,
  not two attention implementations. T must be a multiple of 128 there.
- CPU: a dense float32 masked softmax written here from FA3's definition above, independent of train/, so
  that tests/test_train_vs_record.py checks train/'s attention against a second reading of the semantics.
`BACKEND` ("auto" | "flex" | "dense", default from $FA3_STANDIN_BACKEND) forces one (tests use "flex" on CPU).
"""

import os

# Set before train.attention is imported below: it imports `flash_attn_interface` itself and, seeing this
# mark, does not mistake the stand-in for FA3 (older versions of it fail that import here and also fall back).
REPRO_STANDIN = "flexattention"

import torch  # noqa: E402
from torch import Tensor  # noqa: E402

from train import attention as _train_attention  # noqa: E402

BACKEND = os.environ.get("FA3_STANDIN_BACKEND", "auto")


def _dense(q: Tensor, k: Tensor, v: Tensor, cu_seqlens: Tensor, left: int, scale: float) -> Tensor:
    """(T, H, hd) x3 -> (T, H, hd) in q's dtype, computed in float32 with the (T, T) mask materialised."""
    T = q.size(0)
    pos = torch.arange(T, device=q.device)
    # sequence index of each position: how many sequence ends b[1:] lie at or before it
    seq = (cu_seqlens[1:, None].to(pos.dtype) <= pos[None, :]).sum(dim=0)  # (T,)
    back = pos[:, None] - pos[None, :]  # (T, T) query minus key
    allowed = (back >= 0) & (seq[:, None] == seq[None, :])
    if left >= 0:
        allowed &= back <= left
    scores = torch.einsum("qhd,khd->hqk", q.float(), k.float()) * scale  # (H, T, T)
    probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
    return torch.einsum("hqk,khd->qhd", probs, v.float()).to(q.dtype)


def flash_attn_varlen_func(q: Tensor, k: Tensor, v: Tensor, cu_seqlens_q: Tensor, cu_seqlens_k: Tensor,
                           max_seqlen_q: int | None = None, max_seqlen_k: int | None = None,
                           softmax_scale: float | None = None, causal: bool = False,
                           window_size: tuple[int, int] = (-1, -1), **other) -> Tensor:
    if other:
        raise NotImplementedError(f"the FA3 stand-in does not implement {sorted(other)}")
    if not causal:
        raise NotImplementedError("the FA3 stand-in implements causal attention only (causal=True)")
    if cu_seqlens_k is not cu_seqlens_q and not torch.equal(cu_seqlens_q, cu_seqlens_k):
        raise NotImplementedError("the FA3 stand-in needs the same sequence bounds for queries and keys")
    if q.ndim != 3 or q.shape != k.shape or q.shape != v.shape:
        raise NotImplementedError(f"the FA3 stand-in takes packed (T, H, hd) q, k, v of one shape; got "
                                  f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}")
    left, right = window_size
    if right not in (0, -1):
        raise NotImplementedError(f"window_size right = {right}: causal attention has no right window")
    scale = q.size(-1) ** -0.5 if softmax_scale is None else softmax_scale
    backend = BACKEND if BACKEND != "auto" else ("flex" if q.is_cuda else "dense")
    if backend == "dense":
        return _dense(q, k, v, cu_seqlens_q, left, scale)
    if backend != "flex":
        raise ValueError(f"FA3_STANDIN_BACKEND={backend!r}: choose auto, flex or dense")
    window = q.size(0) if left < 0 else left
    return _train_attention.attention(q, k, v, cu_seqlens_q, window, scale, backend="flex",
                                      max_seqlen=max_seqlen_q or q.size(0))
