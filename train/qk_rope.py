"""The attention's inputs from its QKV projection in one Triton pass each way (CUDA; config `fused_qk_rope`).

    from train.qk_rope import qk_rope
    q, k, v, rstd = qk_rope(qkv, ve, sa, cos, sin, num_heads)   # (T, 3D) bf16 -> (T, H, hd) bf16 x 3, (T, 2H)
    TRITON_INTERPRET=1 python -m train.qk_rope                    # the self-check, on the CPU
    python -m train.qk_rope --time                                 # on a GPU: also ms per layer at the record's shape

The record's attention normalises q and k (F.rms_norm over each head's 128 channels), rotates them (RoPE on
pairs of channels i, i + 64) and mixes v with the layer's value embedding, v = sa[0]·v + sa[1]·ve (ve may be
absent: v = sa[0]·v). Compiled, the norms and rotation are a reduction kernel per layer that reads q and k more
than once (train/BENCHMARKS.md, profile: 159 µs forward and 197 µs backward per layer on an H200, where one read
and one write of q and k take ~70 µs). Here:
  forward:  one pass over qkv (and ve) writes q, k, v contiguous for the attention kernel, and 1/rms;
  backward: one pass writes dL/dqkv whole (q's, k's and v's parts: no zero-filled part for autograd to add
            v's gradient to), dL/dve, and per-block sums for dL/dsa.
The arithmetic is the compiled record's: float32 statistics, the normalised row rounded to bf16 (F.rms_norm's
output dtype), the rotation and the mix in float32 rounded once; gradients in float32, rounded once.

Measured (train/BENCHMARKS.md, 2026-12-01, one H200, one layer at the record's shape): a first form had only the
forward kernel, its backward in torch for Inductor to compile around the op: forward and backward 1.139 ms against
the compiled record's 0.736, 17.7 ms per step slower end to end. This form: 0.607 against 0.556 (the kernels
alone 0.140 forward and 0.254 backward; the rest goes around the op), 4 ms per step slower end to end. Off.

On the CPU both directions are `reference` and `reference_backward` below (torch), so the op and its autograd
wiring run in every CPU test that turns the option on; the kernels run there in Triton's interpreter.
"""

from __future__ import annotations

import os

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


def record_expression(qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor, num_heads: int
                     ) -> tuple[Tensor, Tensor, Tensor]:
    """The record's code (train/model.py without the option), in qkv's dtype: q, k, v (T, H, hd)."""
    T, H = qkv.size(0), num_heads
    q, k, v = qkv.view(T, 3 * H, -1).chunk(3, dim=1)
    norm = lambda t: F.rms_norm(t, (t.size(-1),))  # noqa: E731
    v = sa[0] * v + sa[1] * ve.view_as(v) if ve is not None else sa[0] * v
    return rotary(norm(q), cos, sin), rotary(norm(k), cos, sin), v


# ---- torch forms: the CPU implementation, and what the kernels are checked against ------------------------------

def reference(qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor, num_heads: int
              ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """What the forward kernel computes: q, k, v (T, H, hd) in qkv's dtype, (T, 2H) float32 1/rms."""
    T, H = qkv.size(0), num_heads
    x = qkv.view(T, 3 * H, -1).float()  # (T, 3H, hd)
    rstd = torch.rsqrt(x[:, : 2 * H].square().mean(-1) + EPS)  # (T, 2H)
    n = (x[:, : 2 * H] * rstd[..., None]).to(qkv.dtype).float()
    qk = rotary(n, cos.float(), sin.float()).to(qkv.dtype)  # (T, 2H, hd)
    v = sa[0] * x[:, 2 * H:]
    if ve is not None:
        v = v + sa[1] * ve.float().view_as(v)
    return qk[:, :H].contiguous(), qk[:, H:].contiguous(), v.to(qkv.dtype), rstd


def reference_backward(dq: Tensor, dk: Tensor, dv: Tensor, qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor,
                       sin: Tensor, rstd: Tensor, num_heads: int) -> tuple[Tensor, Tensor | None, Tensor]:
    """What the backward kernel computes: dL/dqkv (T, 3D), dL/dve (T, D) or None, dL/dsa (2,) float32."""
    T, H = qkv.size(0), num_heads
    x = qkv.view(T, 3 * H, -1).float()
    dy = torch.cat((dq, dk), dim=1).float()  # (T, 2H, hd)
    c, s = cos[:T, None, :].float(), sin[:T, None, :].float()
    dy1, dy2 = dy.chunk(2, dim=-1)
    dn = torch.cat((dy1 * c - dy2 * s, dy1 * s + dy2 * c), dim=-1)  # rotated back
    r = rstd[..., None]
    xhat = x[:, : 2 * H] * r
    dx = r * (dn - xhat * (dn * xhat).mean(-1, keepdim=True))  # (T, 2H, hd)
    dvf = dv.float()
    grad_qkv = torch.cat((dx, sa[0] * dvf), dim=1).to(qkv.dtype).view_as(qkv)
    grad_sa = torch.stack([(dvf * x[:, 2 * H:]).sum(), (dvf * ve.float().view_as(dvf)).sum() if ve is not None
                           else dvf.new_zeros(())])
    grad_ve = (sa[1] * dvf).to(ve.dtype).reshape(ve.shape) if ve is not None else None
    return grad_qkv, grad_ve, grad_sa


# ---- kernels ----------------------------------------------------------------------------------------------------

def _check(qkv: Tensor, ve: Tensor | None, cos: Tensor, sin: Tensor, num_heads: int) -> int:
    hd = qkv.size(1) // (3 * num_heads)
    if qkv.stride(1) != 1 or not (cos.is_contiguous() and sin.is_contiguous()) or hd & (hd - 1) or hd < 2:
        raise ValueError("qk_rope needs row-major qkv, contiguous tables and a power-of-two head size")
    if ve is not None and not ve.is_contiguous():
        raise ValueError("qk_rope needs a contiguous value embedding")
    return hd


def _launch(qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor, num_heads: int, fast: bool,
            block: tuple[int, int] = (BLOCK_R, 4)) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """block: rows per program and warps (--time tries others)."""
    from train.qk_rope_kernel import forward_kernel  # imports Triton: at the first launch only

    T, H = qkv.size(0), num_heads
    hd = _check(qkv, ve, cos, sin, H)
    q, k, v = (qkv.new_empty(T, H, hd) for _ in range(3))
    rstd = qkv.new_empty(T, 2 * H, dtype=torch.float32)
    grid = (-(-T * H // block[0]), 3)
    forward_kernel[grid](qkv, qkv if ve is None else ve, sa, cos, sin, q, k, v, rstd, T, qkv.stride(0), EPS,
                         H=H, HALF=hd // 2, HAS_VE=ve is not None, BLOCK_R=block[0], FAST=fast, num_warps=block[1])
    return q, k, v, rstd


def _launch_backward(dq: Tensor, dk: Tensor, dv: Tensor, qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor,
                     sin: Tensor, rstd: Tensor, num_heads: int, fast: bool, block: tuple[int, int] = (BLOCK_R, 4)
                     ) -> tuple[Tensor, Tensor | None, Tensor]:
    from train.qk_rope_kernel import backward_kernel

    T, H = qkv.size(0), num_heads
    hd = _check(qkv, ve, cos, sin, H)
    # the three gradients come from the attention kernel's backward: one layout, read through its strides
    if not (dq.stride() == dk.stride() == dv.stride() and dq.stride(2) == 1):
        dq, dk, dv = dq.contiguous(), dk.contiguous(), dv.contiguous()
    grad_qkv = torch.empty_like(qkv)
    grad_ve = torch.empty_like(ve) if ve is not None else None
    blocks = -(-T * H // block[0])
    partial = qkv.new_empty(blocks, 2, dtype=torch.float32)
    backward_kernel[(blocks, 3)](dq, dk, dv, dq.stride(0), dq.stride(1), qkv, qkv if ve is None else ve, sa, cos,
                                 sin, rstd, grad_qkv, grad_qkv if grad_ve is None else grad_ve, partial, T,
                                 qkv.stride(0), H=H, HALF=hd // 2, HAS_VE=ve is not None, BLOCK_R=block[0],
                                 FAST=fast, num_warps=block[1])
    return grad_qkv, grad_ve, partial.sum(0)


def _kernels(qkv: Tensor) -> bool:
    """The kernels serve bf16 on CUDA (they round and store bf16); anything else takes the torch forms."""
    return qkv.is_cuda and AVAILABLE and qkv.dtype == torch.bfloat16


# ---- the ops ----------------------------------------------------------------------------------------------------

@torch.library.custom_op("repro_train::qk_rope", mutates_args=())
def qk_rope(qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor, num_heads: int
            ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(T, 3D) bf16 QKV projection, (T, D) value embedding or None, (2,) float32 mix -> q, k (normalised and
    rotated) and v (mixed), each (T, H, hd); (T, 2H) float32 1/rms of q's and k's heads."""
    if _kernels(qkv):
        return _launch(qkv, ve, sa, cos, sin, num_heads, fast=True)
    return reference(qkv, ve, sa, cos, sin, num_heads)


@qk_rope.register_fake
def _(qkv, ve, sa, cos, sin, num_heads):
    T, H = qkv.size(0), num_heads
    hd = qkv.size(1) // (3 * H)
    return (*(qkv.new_empty(T, H, hd) for _ in range(3)), qkv.new_empty(T, 2 * H, dtype=torch.float32))


@torch.library.custom_op("repro_train::qk_rope_backward", mutates_args=())
def qk_rope_backward(dq: Tensor, dk: Tensor, dv: Tensor, qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor,
                     sin: Tensor, rstd: Tensor, num_heads: int) -> tuple[Tensor, Tensor, Tensor]:
    """dL/dq, dL/dk, dL/dv -> dL/dqkv (T, 3D), dL/dve (T, D; empty without ve), dL/dsa (2,) float32."""
    if _kernels(qkv):
        grads = _launch_backward(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, num_heads, fast=True)
    else:
        grads = reference_backward(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, num_heads)
    return grads[0], qkv.new_empty(0) if grads[1] is None else grads[1], grads[2]


@qk_rope_backward.register_fake
def _(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, num_heads):
    return torch.empty_like(qkv), qkv.new_empty(0) if ve is None else torch.empty_like(ve), \
        sa.new_empty(2, dtype=torch.float32)


def _setup_context(ctx, inputs, output) -> None:
    qkv, ve, sa, cos, sin, num_heads = inputs
    ctx.num_heads = num_heads
    ctx.save_for_backward(qkv, ve, sa, cos, sin, output[3])


def _backward(ctx, dq: Tensor, dk: Tensor, dv: Tensor, _grad_rstd: Tensor):
    qkv, ve, sa, cos, sin, rstd = ctx.saved_tensors
    grad_qkv, grad_ve, grad_sa = qk_rope_backward(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, ctx.num_heads)
    return grad_qkv, None if ve is None else grad_ve, grad_sa.to(sa.dtype), None, None, None


qk_rope.register_autograd(_backward, setup_context=_setup_context)


# ---- checks and timing --------------------------------------------------------------------------------------------

def selfcheck(device: str, shapes=((100, 2, 128, True), (64, 6, 128, False), (33, 3, 64, True)), seed: int = 0
              ) -> dict:
    """Both kernels against `reference` / `reference_backward`, and the op's gradients against the record's
    expression differentiated in float64 (the truth), on random input.

    Raises AssertionError where they disagree. Tolerances, and why they hold:
    - kernels against their torch forms: equal but where 1/rms, a product or a sum differ by an ulp and a bf16
      rounding flips, at most 1 % of elements, one bf16 step each (train/kernel_checks.py); 1/rms and
      dL/dsa (float32 sums in another order) to 1e-5 relative;
    - the op's gradients (dL/dqkv, dL/dve, dL/dsa) against the truth: relative L2 error at most 2 % above what the
      record's own bf16 autograd makes, plus 1e-3 (float32 inside, one bf16 rounding at the end).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    return {f"{T}x{H}x{hd}{'_ve' if has_ve else ''}": _check_shape(device, gen, T, H, hd, has_ve)
            for T, H, hd, has_ve in shapes}


def _check_shape(device: str, gen: torch.Generator, T: int, H: int, hd: int, has_ve: bool) -> dict:
    from train.kernel_checks import against_truth, gradients, steps_apart
    from train.model import Yarn

    def one_step(got, want, what):
        return steps_apart(got, want, mantissa_bits=7, min_exponent=-126, what=f"{what} ({T}x{H}x{hd})")

    yarn = Yarn(hd, max(T, 128), 128).to(device)
    cos, sin = yarn.cos, yarn.sin
    qkv = (torch.randn(T, 3 * H * hd, device=device, generator=gen) * 3).bfloat16()
    ve = torch.randn(T, H * hd, device=device, generator=gen).bfloat16() if has_ve else None
    sa = torch.tensor([0.7, 0.4], device=device)
    ups = [torch.randn(T, H, hd, device=device, generator=gen).bfloat16() for _ in range(3)]
    entry = {}
    # the kernels themselves: on the CPU in Triton's interpreter (TRITON_INTERPRET=1)
    if AVAILABLE and (device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"):
        fast = device == "cuda"
        got, want = _launch(qkv, ve, sa, cos, sin, H, fast), reference(qkv, ve, sa, cos, sin, H)
        entry["fwd_flips"] = max(one_step(g, w, name) for g, w, name in zip(got[:3], want[:3], "qkv"))
        entry["rstd_rel_err"] = ((got[3] - want[3]).abs() / want[3]).max().item()
        assert entry["rstd_rel_err"] < 1e-5, f"1/rms {entry['rstd_rel_err']:.2e} apart ({T}x{H}x{hd})"
        got = _launch_backward(*ups, qkv, ve, sa, cos, sin, want[3], H, fast)
        want = reference_backward(*ups, qkv, ve, sa, cos, sin, want[3], H)
        entry["bwd_flips"] = max(one_step(g, w, name) for g, w, name in zip(got[:2], want[:2], ("dqkv", "dve"))
                                 if w is not None)
        entry["dsa_kernel_rel_err"] = ((got[2] - want[2]).norm() / want[2].norm()).item()
        assert entry["dsa_kernel_rel_err"] < 1e-5, f"dL/dsa {entry['dsa_kernel_rel_err']:.2e} apart ({T}x{H}x{hd})"
    # the op's gradients, whichever implementation it dispatches to, against float64 and the record's own
    inputs = [qkv, sa] + ([ve] if has_ve else [])

    def call(expr):
        return lambda x, s, *e: expr(x, e[0] if e else None, s, cos.to(x.dtype), sin.to(x.dtype), H)[:3]

    entry.update(against_truth(("dqkv", "dsa", "dve"), truth=gradients(call(record_expression), inputs, ups, True),
                               record=gradients(call(record_expression), inputs, ups, False),
                               ours=gradients(call(qk_rope), inputs, ups, False)))
    return entry


def time_record_shape(T: int = 49152, H: int = 6, hd: int = 128, reps: int = 20, device: str = "cuda") -> dict:
    """ms per layer at the record's micro-batch (49,152 tokens, 6 heads of 128, with a value embedding): the
    record's expression compiled, forward and forward + backward, against the op; one copy of qkv (a read and
    a write of 3D channels: the forward's floor); each kernel alone at four block shapes; both sides' forward +
    backward under the profiler (train/profile.py's per_call: kernels, busy against wall). device="cpu" (small
    shape, Triton's interpreter when TRITON_INTERPRET=1, TORCHDYNAMO_DISABLE=1) is the CI's smoke run of this
    code."""
    from train import timing
    from train.model import Yarn

    yarn = Yarn(hd, T, 128).to(device)
    qkv = (torch.randn(T, 3 * H * hd, device=device) * 3).bfloat16().requires_grad_()
    ve = torch.randn(T, H * hd, device=device).bfloat16().requires_grad_()
    sa = torch.tensor([0.7, 0.4], device=device, requires_grad=True)
    ups = [torch.randn(T, H, hd, device=device).bfloat16() for _ in range(3)]
    record = torch.compile(lambda x, e, s: record_expression(x, e, s, yarn.cos, yarn.sin, H))
    fused = torch.compile(lambda x, e, s: qk_rope(x, e, s, yarn.cos, yarn.sin, H)[:3])

    def step(fn):
        def run():
            qkv.grad = ve.grad = sa.grad = None
            torch.autograd.backward(list(fn(qkv, ve, sa)), ups)
        return run

    def forward(fn):
        return lambda: fn(qkv.detach(), ve.detach(), sa.detach())

    ms = lambda fn: timing.time_ms(fn, reps, device)  # noqa: E731
    # each kernel alone at rows per program x warps around the default, so that the next choice is measured
    x, e, s_ = qkv.detach(), ve.detach(), sa.detach()
    rstd = reference(x, e, s_, yarn.cos, yarn.sin, H)[3]
    fast = device == "cuda"
    blocks = {f"{r}w{w}": (ms(lambda b=(r, w): _launch(x, e, s_, yarn.cos, yarn.sin, H, fast, b)),
                           ms(lambda b=(r, w): _launch_backward(*ups, x, e, s_, yarn.cos, yarn.sin, rstd, H, fast, b)))
              for r, w in ((32, 4), (64, 4), (64, 8), (128, 8))}
    return dict(timing.record_and_fused((forward(record), forward(fused)), (step(record), step(fused)), reps, device),
                copy_qkv_ms=ms(lambda: x.clone()), kernels_fwd_bwd_ms_by_block=blocks)


if __name__ == "__main__":
    from train.kernel_checks import main

    main(selfcheck, time_record_shape)
