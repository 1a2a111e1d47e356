"""The head's loss and its FP8 gradient in two Triton passes over the logits (CUDA; config `fused_loss`).

    from train.xent_triton import softcap_xent_fp8
    rows, g8 = softcap_xent_fp8(logits, targets, grad_s)   # (T, V) bf16 logits -> (T,) float32, (T, V) e5m2
    TRITON_INTERPRET=1 python benchmarks/xent_check.py          # the self-check, on the CPU
    python benchmarks/xent_check.py --time                       # on a GPU: also ms per micro-step, record's shape

The record's head, loss and gradient cost one bf16 (T, V) logits tensor written by the FP8 matmul, then
compiled passes that read it, keep float32 (T, V) tensors for the backward pass, write dL/dlogits in bf16, cast
that to float8_e5m2 and copy the FP8 gradient transposed for dW's matmul (train/BENCHMARKS.md, profile: about
12 ms of each 84 ms micro-step on an H200, where one read of the logits takes 1 ms). Here:
  pass 1, one program per row: z = 30·sigmoid(logit / 7.5) (as 15 + 15·tanh(logit / 15), within 0.0073 on a GPU:
          train/xent_kernels.py), the row's max and sum of exp(z - 30)
          -> the row's max, log sum exp(z - max), and its loss -logp[target];
  pass 2, one program per (rows, columns) tile: dL/dlogits in the record's arithmetic order (train/loss.py),
          rounded to bf16 as the record's autograd does, divided by grad_s and cast to float8_e5m2, row-major.
Two reads of the bf16 logits and one FP8 write; nothing of shape (T, V) in float32 exists. dW's transposed
copy of g8 (FP8 matmuls take K contiguous) is written by pass 2 from its tiles turned through shared memory
(softcap_xent_fp8_t, config `fused_loss_transpose`, on by default): 16-byte stores (benchmarks/xent_sass.py), the
path 5.14 against 6.71 ms per micro-step on an H200 where train/fp8.py's compiled products copy it
(softcap_xent_fp8, 1.98 ms of the 6.71; train/BENCHMARKS.md).
"""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

# Whether Triton is installed, found without importing it: the kernels (train/xent_kernels.py) are imported at
# their first launch, so a process that never launches them (CPU runs) does not pay Triton's import (~0.15 s).
AVAILABLE = importlib.util.find_spec("triton") is not None


def runs_triton(t: Tensor) -> bool:
    """Whether train/'s Triton kernels take t (CUDA, bf16, Triton installed); elsewhere their torch forms run, or the
    record's own expression (train/model.py, whose bits the CPU comparisons with the record's program hold)."""
    return t.is_cuda and AVAILABLE and t.dtype == torch.bfloat16
ROWS_BLOCK_V = 2048  # pass 1: columns per loop iteration
TILE_T, TILE_V = 128, 64  # pass 2: one tile per program (the fastest of six shapes tried on an H200)


def _row_stats(logits: Tensor, targets: Tensor, fast: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Pass 1: each row's max, log sum exp(z - max) and loss, float32 (T,). fast: the kernels' FAST (default:
    on CUDA); False on a GPU times the portable lowering for comparison."""
    from train.xent_kernels import row_stats_kernel  # imports Triton: at the first launch only

    T, V = logits.shape
    row_max, row_logsum, row_loss = (logits.new_empty(T, dtype=torch.float32) for _ in range(3))
    row_stats_kernel[(T,)](logits, targets, row_max, row_logsum, row_loss, logits.stride(0),
                           V=V, BLOCK_V=ROWS_BLOCK_V, FAST=logits.is_cuda if fast is None else fast, num_warps=8)
    return row_max, row_logsum, row_loss


def _grad(logits: Tensor, targets: Tensor, row_max: Tensor, row_logsum: Tensor, grad_s: float,
          out_dtype: torch.dtype, fast: bool | None = None, transposed: bool = False,
          tile: tuple[int, int, int] = (TILE_T, TILE_V, 4)) -> tuple[Tensor, Tensor | None]:
    """Pass 2: dL/dlogits / grad_s in out_dtype, (T, V) row-major, and with transposed the same (V, T) row-major.
    fast=False: portable, every element masked. tile: rows, columns and warps per program (--time tries others)."""
    from train.xent_kernels import grad_kernel

    T, V = logits.shape
    tile_t, tile_v, warps = tile
    out = logits.new_empty(T, V, dtype=out_dtype)
    out_t = logits.new_empty(V, T, dtype=out_dtype) if transposed else None
    grid = (-(-T // tile_t), -(-V // tile_v))
    grad_kernel[grid](logits, targets, row_max, row_logsum, out, out if out_t is None else out_t, T, V,
                      logits.stride(0), grad_s, BLOCK_T=tile_t, BLOCK_V=tile_v,
                      EVEN=fast is not False and T % tile_t == 0 and V % tile_v == 0,
                      FAST=logits.is_cuda if fast is None else fast, TRANSPOSED=transposed, num_warps=warps)
    return out, out_t


def _launch(logits: Tensor, targets: Tensor, grad_s: float, out_dtype: torch.dtype, transposed: bool = False
            ) -> tuple[Tensor, Tensor, Tensor | None]:
    if logits.stride(1) != 1 or not targets.is_contiguous():
        raise ValueError("softcap_xent_fp8 needs row-major logits and contiguous targets")
    row_max, row_logsum, row_loss = _row_stats(logits, targets)
    return row_loss, *_grad(logits, targets, row_max, row_logsum, grad_s, out_dtype, transposed=transposed)


@torch.library.custom_op("repro_train::softcap_xent_fp8", mutates_args=())
def softcap_xent_fp8(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor]:
    """(T, V) bf16 logits, (T,) int64 targets -> per-row loss (T,) float32, g8 = dL/dlogits / grad_s (T, V) e5m2."""
    if not AVAILABLE:
        raise RuntimeError("softcap_xent_fp8 needs Triton")
    return _launch(logits, targets, grad_s, torch.float8_e5m2)[:2]


@softcap_xent_fp8.register_fake
def _(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor]:
    T, V = logits.shape
    return logits.new_empty(T, dtype=torch.float32), logits.new_empty(T, V, dtype=torch.float8_e5m2)


@torch.library.custom_op("repro_train::softcap_xent_fp8_t", mutates_args=())
def softcap_xent_fp8_t(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    """softcap_xent_fp8, and g8 transposed (V, T) row-major from the same pass (config `fused_loss_transpose`)."""
    if not AVAILABLE:
        raise RuntimeError("softcap_xent_fp8_t needs Triton")
    return _launch(logits, targets, grad_s, torch.float8_e5m2, transposed=True)


@softcap_xent_fp8_t.register_fake
def _(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    T, V = logits.shape
    e5m2 = torch.float8_e5m2
    return (logits.new_empty(T, dtype=torch.float32), logits.new_empty(T, V, dtype=e5m2),
            logits.new_empty(V, T, dtype=e5m2))
