"""QK-norm and rotary of the attention's queries and keys in one Triton pass (CUDA; config `fused_qk_rope`).

    from train.qk_rope import qk_rope
    qk, rstd = qk_rope(qkv, cos, sin, num_heads)   # (T, 3D) bf16 -> (2, T, H, hd) bf16 [q, k], (T, 2H) float32
    TRITON_INTERPRET=1 python -m train.qk_rope                # the self-check, on the CPU
    python -m train.qk_rope --time                             # on a GPU: also ms per layer at the record's shape

The record's attention normalises q and k (F.rms_norm over each head's 128 channels) and rotates them (RoPE on
pairs of channels i, i + 64). Compiled, that is one reduction kernel per layer that reads q and k more than once
(train/BENCHMARKS.md, profile: 159 µs per layer on an H200 where one read and one write of them take ~70 µs).
Here one program normalises and rotates a block of rows, each read once, and writes q and k contiguous for the
attention kernel. The arithmetic is the compiled record's: float32 statistics, the normalised row rounded to
bf16 (F.rms_norm's output dtype), the rotation in float32 rounded once. The backward pass is torch code that the
compiler fuses with its neighbours (the gradients of q and k arrive as two tensors, and the gradient of qkv is
assembled with v's), from the saved input and 1/rms. Elsewhere (CPU) the forward is `reference` below, so
the op and its backward formula run in every CPU test that turns the option on.
Measured on an H200 (train/BENCHMARKS.md, 2026-12-01): the forward 0.215 against the compiled record's 0.264 ms
per layer, but forward and backward 1.139 against 0.736, and 17.7 ms per step slower end to end: the option is
off. What it lacks is a backward kernel that writes dL/dqkv in place.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.nn.functional as F
from torch import Tensor

from train.xent_triton import AVAILABLE

EPS = torch.finfo(torch.float32).eps  # F.rms_norm's eps for bf16 and float32 inputs (computed in float32)
BLOCK_R = 64  # rows (token, head) per program


def rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """x: (T, H, hd); cos, sin: (>= T, hd/2) -> x rotated on channel pairs (i, i + hd/2), in x's dtype."""
    cos, sin = cos[: x.size(0), None, :], sin[: x.size(0), None, :]  # (T, 1, hd/2)
    x1, x2 = x.chunk(2, dim=-1)
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat((y1, y2), dim=-1)


def reference(qkv: Tensor, cos: Tensor, sin: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """What the kernel computes, in torch: (2, T, H, hd) normalised and rotated q and k, (T, 2H) float32 1/rms."""
    T, H = qkv.size(0), num_heads
    x = qkv.view(T, 3 * H, -1)[:, : 2 * H].float()  # (T, 2H, hd)
    rstd = torch.rsqrt(x.square().mean(-1) + EPS)  # (T, 2H)
    n = (x * rstd[..., None]).to(qkv.dtype).float()
    y = rotary(n, cos.float(), sin.float()).to(qkv.dtype)  # (T, 2H, hd)
    return y.view(T, 2, H, -1).transpose(0, 1).contiguous(), rstd


def _launch(qkv: Tensor, cos: Tensor, sin: Tensor, num_heads: int, fast: bool) -> tuple[Tensor, Tensor]:
    from train.qk_rope_kernel import qk_rope_kernel  # imports Triton: at the first launch only

    T, H = qkv.size(0), num_heads
    hd = qkv.size(1) // (3 * H)
    if qkv.stride(1) != 1 or not (cos.is_contiguous() and sin.is_contiguous()) or hd % 2 or hd & (hd - 1):
        raise ValueError("qk_rope needs row-major qkv, contiguous tables and a power-of-two head size")
    out = qkv.new_empty(2, T, H, hd)
    rstd = qkv.new_empty(T, 2 * H, dtype=torch.float32)
    R = T * 2 * H
    qk_rope_kernel[(-(-R // BLOCK_R),)](qkv, cos, sin, out, rstd, R, T, qkv.stride(0), EPS, H=H, HALF=hd // 2,
                                        BLOCK_R=BLOCK_R, FAST=fast, num_warps=4)
    return out, rstd


@torch.library.custom_op("repro_train::qk_rope", mutates_args=())
def qk_rope(qkv: Tensor, cos: Tensor, sin: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """(T, 3D) bf16 QKV projection -> (2, T, H, hd) q and k, normalised and rotated; (T, 2H) float32 1/rms."""
    if qkv.is_cuda and AVAILABLE:
        return _launch(qkv, cos, sin, num_heads, fast=True)
    return reference(qkv, cos, sin, num_heads)


@qk_rope.register_fake
def _(qkv: Tensor, cos: Tensor, sin: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    T, H = qkv.size(0), num_heads
    return qkv.new_empty(2, T, H, qkv.size(1) // (3 * H)), qkv.new_empty(T, 2 * H, dtype=torch.float32)


def _setup_context(ctx, inputs, output) -> None:
    qkv, cos, sin, num_heads = inputs
    ctx.num_heads = num_heads
    ctx.save_for_backward(qkv, output[1], cos, sin)


def _backward(ctx, grad_qk: Tensor, _grad_rstd: Tensor):
    """dL/dqkv from dL/d(q, k): the rotation's transpose, then RMS norm's backward, in float32; v's part is 0
    here (its gradient is added by autograd, in the same compiled kernel)."""
    qkv, rstd, cos, sin = ctx.saved_tensors
    T, H = qkv.size(0), ctx.num_heads
    x = qkv.view(T, 3 * H, -1)[:, : 2 * H].float()  # (T, 2H, hd)
    dy = grad_qk.float().transpose(0, 1).reshape(T, 2 * H, -1)  # [q, k] -> (T, 2H, hd)
    c, s = cos[:T, None, :].float(), sin[:T, None, :].float()
    dy1, dy2 = dy.chunk(2, dim=-1)
    dn = torch.cat((dy1 * c - dy2 * s, dy1 * s + dy2 * c), dim=-1)  # rotated back
    r = rstd[..., None]
    xhat = x * r
    dx = r * (dn - xhat * (dn * xhat).mean(-1, keepdim=True))  # (T, 2H, hd)
    grad = torch.cat((dx.to(qkv.dtype), qkv.new_zeros(T, H, x.size(-1))), dim=1).view_as(qkv)
    return grad, None, None, None


qk_rope.register_autograd(_backward, setup_context=_setup_context)


def model_expression(qkv: Tensor, cos: Tensor, sin: Tensor, num_heads: int) -> tuple[Tensor, Tensor]:
    """The record's code (train/model.py without the option): F.rms_norm, then rotary, in qkv's dtype."""
    T, H = qkv.size(0), num_heads
    q, k, _ = qkv.view(T, 3 * H, -1).chunk(3, dim=1)
    norm = lambda t: F.rms_norm(t, (t.size(-1),))  # noqa: E731
    return rotary(norm(q), cos, sin), rotary(norm(k), cos, sin)


def selfcheck(device: str, shapes=((100, 2, 128), (64, 6, 128), (33, 3, 64)), seed: int = 0) -> dict:
    """The op against `reference` and against the record's expression's gradients on random input.

    Raises AssertionError where they disagree. Tolerances, and why they hold:
    - forward: q and k equal to `reference` but where 1/rms or a product differ by an ulp and a bf16 rounding
      flips, at most 1 % of elements, one bf16 step each (train/xent_triton.py's counter); 1/rms to 1e-6;
    - backward: the op's dL/dqkv against the record's expression differentiated in float64 (the truth),
      relative L2 error at most 2 % above what the record's own bf16 autograd makes, plus 1e-3 (float32
      intermediates, one bf16 rounding at the end: it is the more accurate of the two).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    return {f"{T}x{H}x{hd}": _check_shape(device, gen, T, H, hd) for T, H, hd in shapes}


def _grad_of(fn, qkv: Tensor, up: Tensor, dtype: torch.dtype) -> Tensor:
    """dL/dqkv in float64 for L = <fn(qkv in dtype), up>, fn returning (q, k)."""
    x = qkv.to(dtype, copy=True).requires_grad_()
    q, k = fn(x)
    torch.autograd.backward([q, k], [up[0].to(q.dtype), up[1].to(k.dtype)])
    return x.grad.double()


def _check_shape(device: str, gen: torch.Generator, T: int, H: int, hd: int) -> dict:
    from train.model import Yarn
    from train.xent_triton import _check_one_step

    yarn = Yarn(hd, max(T, 128), 128).to(device)
    cos, sin = yarn.cos, yarn.sin
    qkv = (torch.randn(T, 3 * H * hd, device=device, generator=gen) * 3).bfloat16()
    # the kernel itself: on the CPU in Triton's interpreter (TRITON_INTERPRET=1), else the op's CPU form
    kernel = AVAILABLE and (device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1")
    got, rstd = _launch(qkv, cos, sin, H, fast=device == "cuda") if kernel else qk_rope(qkv, cos, sin, H)
    want, rstd_want = reference(qkv, cos, sin, H)
    flips = _check_one_step(got.float(), want.float(), mantissa_bits=7, min_exponent=-126,
                            what=f"q, k ({T}x{H}x{hd})")
    rstd_err = ((rstd - rstd_want).abs() / rstd_want).max().item()
    assert rstd_err < 1e-6, f"1/rms {rstd_err:.2e} apart ({T}x{H}x{hd})"
    # backward: one upstream gradient for q and k, through the op, the record's bf16 code and float64
    up = torch.randn(2, T, H, hd, device=device, generator=gen).bfloat16()
    truth = _grad_of(lambda x: model_expression(x, cos.double(), sin.double(), H), qkv, up, torch.float64)
    record = _grad_of(lambda x: model_expression(x, cos, sin, H), qkv, up, torch.bfloat16)
    ours = _grad_of(lambda x: tuple(qk_rope(x, cos, sin, H)[0]), qkv, up, torch.bfloat16)
    err, record_err = (((g - truth).norm() / truth.norm()).item() for g in (ours, record))
    assert err <= 1.02 * record_err + 1e-3, \
        f"dL/dqkv error {err:.2e} against the record's {record_err:.2e} ({T}x{H}x{hd})"
    return dict(kernel=kernel, bf16_flips=flips, rstd_rel_err=rstd_err, grad_rel_err=err,
                record_grad_rel_err=record_err)


def time_record_shape(T: int = 49152, H: int = 6, hd: int = 128, reps: int = 20, device: str = "cuda") -> dict:
    """ms per layer at the record's micro-batch (49,152 tokens, 6 heads of 128): the record's expression compiled
    forward and forward + backward, against the op; and one copy of q and k (a read and a write: the floor of the
    forward). device="cpu" (small shape, TORCHDYNAMO_DISABLE=1) is the CI's smoke run of this code."""
    from train import timing
    from train.model import Yarn

    yarn = Yarn(hd, T, 128).to(device)
    qkv = (torch.randn(T, 3 * H * hd, device=device) * 3).bfloat16().requires_grad_()
    up = torch.randn(2, T, H, hd, device=device).bfloat16()
    record = torch.compile(lambda x: model_expression(x, yarn.cos, yarn.sin, H))
    fused = torch.compile(lambda x: tuple(qk_rope(x, yarn.cos, yarn.sin, H)[0]))

    def step(fn):
        def run():
            qkv.grad = None
            q, k = fn(qkv)
            torch.autograd.backward([q, k], [up[0], up[1]])
        return run

    qk = qkv.detach()[:, : 2 * H * hd]
    ms = lambda fn: timing.time_ms(fn, reps, warmup=3 if device == "cuda" else 0, cuda=device == "cuda")  # noqa: E731
    return dict(record_fwd_ms=ms(lambda: record(qkv.detach())), fused_fwd_ms=ms(lambda: fused(qkv.detach())),
                record_fwd_bwd_ms=ms(step(record)), fused_fwd_bwd_ms=ms(step(fused)),
                copy_qk_ms=ms(lambda: qk.clone()))


if __name__ == "__main__":
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    print(selfcheck(dev))
    if "--time" in sys.argv[1:]:
        print(time_record_shape())
