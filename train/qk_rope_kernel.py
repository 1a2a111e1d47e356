"""train/qk_rope.py's two Triton kernels (imported at their first launch; that module says what they compute).

    from train.qk_rope_kernel import forward_kernel, backward_kernel      # needs Triton

Grid (row blocks, 2): axis 1 picks queries (0) or keys (1). A program takes BLOCK_R rows (token t = r // H,
head h = r % H) of 2·HALF channels, read in two halves (the rotation pairs channel i with i + HALF). Arithmetic
in float32, rounded to bf16 where the compiled record rounds; FAST=False is the form for Triton's interpreter.
"""

import triton
import triton.language as tl

from train.xent_kernels import round_to_bf16


@triton.jit
def forward_kernel(q, k, cos, sin, q_out, k_out, rstd_out, T, stride_t, stride_h, eps: tl.constexpr,
                   H: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr, FAST: tl.constexpr):
    """q, k (T, H, 2·HALF) bf16 with strides (stride_t, stride_h, 1) -> q_out, k_out (T, H, 2·HALF) bf16
    contiguous, rstd_out (T, 2H) float32 (queries' heads, then keys'). eps is a constant: as a run-time float
    argument Inductor's launch typed it fp64, which promoted mean + eps to float64: one ulp off the eager launch's
    float32 in some rows (2026-12-03, docs/device-runs/2026-12-03-h200-levers/qk-diff.txt)."""
    part = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # (BLOCK_R,)
    t, h, cols, m = rows // H, rows % H, tl.arange(0, HALF)[None, :], (rows < T * H)[:, None]
    src = (q if part == 0 else k) + t[:, None] * stride_t + h[:, None] * stride_h + cols  # (BLOCK_R, HALF)
    x1 = tl.load(src, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=m, other=0.0).to(tl.float32)
    # F.rms_norm: float32 mean of squares, rsqrt(mean + eps), the product rounded to bf16 (its output dtype)
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)  # (BLOCK_R,)
    n1 = round_to_bf16(x1 * rstd[:, None], FAST)
    n2 = round_to_bf16(x2 * rstd[:, None], FAST)
    # rotary in float32, rounded once when stored, as compiled code evaluates the bf16 expression
    tab = t[:, None] * HALF + cols
    c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
    dst = (q_out if part == 0 else k_out) + rows[:, None] * (2 * HALF) + cols
    tl.store(dst, round_to_bf16(n1 * c + n2 * s, FAST).to(tl.bfloat16), mask=m)
    tl.store(dst + HALF, round_to_bf16(n1 * (-s) + n2 * c, FAST).to(tl.bfloat16), mask=m)
    tl.store(rstd_out + t * (2 * H) + part * H + h, rstd, mask=rows < T * H)


@triton.jit
def backward_kernel(dq, dk, g_stride_t, g_stride_h, q, k, stride_t, stride_h, cos, sin, rstd, dq_in, dk_in, T,
                    H: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr, FAST: tl.constexpr):
    """dq, dk (T, H, 2·HALF) bf16 with strides (g_stride_t, g_stride_h, 1) -> dq_in, dk_in (T, H, 2·HALF) bf16
    contiguous: the rotation's transpose, then RMS norm's backward dx = r·(dn - x̂·mean(dn·x̂)), x̂ = x·r."""
    part = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    t, h, cols, m = rows // H, rows % H, tl.arange(0, HALF)[None, :], (rows < T * H)[:, None]
    g = (dq if part == 0 else dk) + t[:, None] * g_stride_t + h[:, None] * g_stride_h + cols
    src = (q if part == 0 else k) + t[:, None] * stride_t + h[:, None] * stride_h + cols
    dy1 = tl.load(g, mask=m, other=0.0).to(tl.float32)
    dy2 = tl.load(g + HALF, mask=m, other=0.0).to(tl.float32)
    x1 = tl.load(src, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=m, other=0.0).to(tl.float32)
    tab = t[:, None] * HALF + cols
    c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
    dn1 = dy1 * c - dy2 * s
    dn2 = dy1 * s + dy2 * c
    r = tl.load(rstd + t * (2 * H) + part * H + h, mask=rows < T * H, other=0.0)[:, None]
    xh1 = x1 * r
    xh2 = x2 * r
    dot = (tl.sum(dn1 * xh1, axis=1) + tl.sum(dn2 * xh2, axis=1))[:, None] / (2 * HALF)
    dst = (dq_in if part == 0 else dk_in) + rows[:, None] * (2 * HALF) + cols
    tl.store(dst, round_to_bf16(r * (dn1 - xh1 * dot), FAST).to(tl.bfloat16), mask=m)
    tl.store(dst + HALF, round_to_bf16(r * (dn2 - xh2 * dot), FAST).to(tl.bfloat16), mask=m)
