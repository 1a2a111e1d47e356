"""train/qk_rope.py's two Triton kernels (imported at their first launch; that module says what they compute).

    from train.qk_rope_kernel import forward_kernel, backward_kernel      # needs Triton

Grid (row blocks, planes): axis 1 picks queries (0), keys (1) and values (2). A program takes BLOCK_R
rows (token t = r // H, head h = r % H) of 2·HALF channels, read in two halves (the rotation pairs channel i with
i + HALF). Arithmetic in float32, rounded to bf16 where the compiled record rounds; FAST=False is the form for
Triton's interpreter. Inputs are read and outputs written through their strides (token, head; channels contiguous),
so the backward pass can write all three planes of the QKV projection's gradient in place (train/qk_rope.py).
"""

import triton
import triton.language as tl

from train.xent_kernels import round_to_bf16


@triton.jit
def _qk_plane(src, dst, rstd_out, cos, sin, rows, t, h, cols, m, stride_t, stride_h, out_stride_t, part, T,
              eps: tl.constexpr, H: tl.constexpr, HALF: tl.constexpr, FAST: tl.constexpr):
    at = t[:, None] * stride_t + h[:, None] * stride_h + cols
    x1 = tl.load(src + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + at + HALF, mask=m, other=0.0).to(tl.float32)
    # F.rms_norm: float32 mean of squares, rsqrt(mean + eps), the product rounded to bf16 (its output dtype)
    rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)  # (BLOCK_R,)
    n1 = round_to_bf16(x1 * rstd[:, None], FAST)
    n2 = round_to_bf16(x2 * rstd[:, None], FAST)
    # rotary in float32, rounded once when stored, as compiled code evaluates the bf16 expression
    tab = t[:, None] * HALF + cols
    c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
    out = dst + t[:, None] * out_stride_t + h[:, None] * (2 * HALF) + cols
    tl.store(out, round_to_bf16(n1 * c + n2 * s, FAST).to(tl.bfloat16), mask=m)
    tl.store(out + HALF, round_to_bf16(n1 * (-s) + n2 * c, FAST).to(tl.bfloat16), mask=m)
    tl.store(rstd_out + t * (2 * H) + part * H + h, rstd, mask=rows < T * H)


@triton.jit
def _v_plane(src, ve, sa, dst, t, h, cols, m, stride_t, stride_h, ve_stride_t, out_stride_t,
             HALF: tl.constexpr, HAS_VE: tl.constexpr, FAST: tl.constexpr):
    """λ₀·v (+ λ₁·ve): float32 products and sum, rounded once, as compiled code evaluates the bf16 expression."""
    lam0 = tl.load(sa).to(tl.float32)
    at = t[:, None] * stride_t + h[:, None] * stride_h + cols
    y1 = lam0 * tl.load(src + at, mask=m, other=0.0).to(tl.float32)
    y2 = lam0 * tl.load(src + at + HALF, mask=m, other=0.0).to(tl.float32)
    if HAS_VE:
        lam1 = tl.load(sa + 1).to(tl.float32)
        at_ve = t[:, None] * ve_stride_t + h[:, None] * (2 * HALF) + cols
        y1 = y1 + lam1 * tl.load(ve + at_ve, mask=m, other=0.0).to(tl.float32)
        y2 = y2 + lam1 * tl.load(ve + at_ve + HALF, mask=m, other=0.0).to(tl.float32)
    out = dst + t[:, None] * out_stride_t + h[:, None] * (2 * HALF) + cols
    tl.store(out, round_to_bf16(y1, FAST).to(tl.bfloat16), mask=m)
    tl.store(out + HALF, round_to_bf16(y2, FAST).to(tl.bfloat16), mask=m)


@triton.jit
def forward_kernel(q, k, v, ve, sa, cos, sin, q_out, k_out, v_out, rstd_out, T, stride_t, stride_h, ve_stride_t,
                   eps: tl.constexpr, H: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr,
                   FAST: tl.constexpr, HAS_VE: tl.constexpr):
    """q, k, v (T, H, 2·HALF) bf16 with strides (stride_t, stride_h, 1) -> q_out, k_out, v_out = λ₀·v + λ₁·ve
    (sa = (λ₀, λ₁); ve (T, H, 2·HALF) with token stride ve_stride_t when HAS_VE, else λ₀·v) (T, H, 2·HALF) bf16
    contiguous, rstd_out (T, 2H) float32 (queries' heads, then keys'). eps is a constant: as a run-time float
    argument Inductor's launch typed it fp64, which promoted mean + eps to float64: one ulp off the eager launch's
    float32 in some rows (2026-12-03, docs/device-runs/2026-12-03-h200-levers/qk-diff.txt)."""
    part = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # (BLOCK_R,)
    t, h, cols, m = rows // H, rows % H, tl.arange(0, HALF)[None, :], (rows < T * H)[:, None]
    if part == 2:
        _v_plane(v, ve, sa, v_out, t, h, cols, m, stride_t, stride_h, ve_stride_t, H * 2 * HALF, HALF, HAS_VE, FAST)
    else:
        _qk_plane(q if part == 0 else k, q_out if part == 0 else k_out, rstd_out, cos, sin, rows, t, h, cols, m,
                  stride_t, stride_h, H * 2 * HALF, part, T, eps, H, HALF, FAST)


@triton.jit
def _qk_plane_backward(g, src, dst, cos, sin, rstd, rows, t, h, cols, m, g_stride_t, g_stride_h, stride_t, stride_h,
                       out_stride_t, part, T, H: tl.constexpr, HALF: tl.constexpr, FAST: tl.constexpr):
    at_g = t[:, None] * g_stride_t + h[:, None] * g_stride_h + cols
    at = t[:, None] * stride_t + h[:, None] * stride_h + cols
    dy1 = tl.load(g + at_g, mask=m, other=0.0).to(tl.float32)
    dy2 = tl.load(g + at_g + HALF, mask=m, other=0.0).to(tl.float32)
    x1 = tl.load(src + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + at + HALF, mask=m, other=0.0).to(tl.float32)
    tab = t[:, None] * HALF + cols
    c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
    s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
    dn1 = dy1 * c - dy2 * s
    dn2 = dy1 * s + dy2 * c
    r = tl.load(rstd + t * (2 * H) + part * H + h, mask=rows < T * H, other=0.0)[:, None]
    xh1 = x1 * r
    xh2 = x2 * r
    dot = (tl.sum(dn1 * xh1, axis=1) + tl.sum(dn2 * xh2, axis=1))[:, None] / (2 * HALF)
    out = dst + t[:, None] * out_stride_t + h[:, None] * (2 * HALF) + cols
    tl.store(out, round_to_bf16(r * (dn1 - xh1 * dot), FAST).to(tl.bfloat16), mask=m)
    tl.store(out + HALF, round_to_bf16(r * (dn2 - xh2 * dot), FAST).to(tl.bfloat16), mask=m)


@triton.jit
def _v_plane_backward(dv, v, ve, sa, dst, dve_out, lam_part, pid, t, h, cols, m, dv_stride_t, dv_stride_h, stride_t,
                      stride_h, ve_stride_t, out_stride_t, H: tl.constexpr, HALF: tl.constexpr, HAS_VE: tl.constexpr,
                      FAST: tl.constexpr):
    """The value mix's backward from dv (the mixed values' gradient): λ₀·dv into dst (the projection gradient's
    third plane) and λ₁·dv into dve_out (T, H, 2·HALF) contiguous, each a float32 product rounded once as compiled
    code rounds the bf16 expression; this program's float32 sums of dv·v and dv·ve into lam_part[pid, 0:2]."""
    at_g = t[:, None] * dv_stride_t + h[:, None] * dv_stride_h + cols
    g1 = tl.load(dv + at_g, mask=m, other=0.0).to(tl.float32)
    g2 = tl.load(dv + at_g + HALF, mask=m, other=0.0).to(tl.float32)
    at = t[:, None] * stride_t + h[:, None] * stride_h + cols
    x1 = tl.load(v + at, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(v + at + HALF, mask=m, other=0.0).to(tl.float32)
    lam0 = tl.load(sa).to(tl.float32)
    out = dst + t[:, None] * out_stride_t + h[:, None] * (2 * HALF) + cols
    tl.store(out, round_to_bf16(lam0 * g1, FAST).to(tl.bfloat16), mask=m)
    tl.store(out + HALF, round_to_bf16(lam0 * g2, FAST).to(tl.bfloat16), mask=m)
    tl.store(lam_part + 2 * pid, tl.sum(tl.sum(g1 * x1, axis=1) + tl.sum(g2 * x2, axis=1), axis=0))
    if HAS_VE:
        lam1 = tl.load(sa + 1).to(tl.float32)
        at_e = t[:, None] * ve_stride_t + h[:, None] * (2 * HALF) + cols
        e1 = tl.load(ve + at_e, mask=m, other=0.0).to(tl.float32)
        e2 = tl.load(ve + at_e + HALF, mask=m, other=0.0).to(tl.float32)
        out_e = dve_out + t[:, None] * (H * 2 * HALF) + h[:, None] * (2 * HALF) + cols
        tl.store(out_e, round_to_bf16(lam1 * g1, FAST).to(tl.bfloat16), mask=m)
        tl.store(out_e + HALF, round_to_bf16(lam1 * g2, FAST).to(tl.bfloat16), mask=m)
        tl.store(lam_part + 2 * pid + 1, tl.sum(tl.sum(g1 * e1, axis=1) + tl.sum(g2 * e2, axis=1), axis=0))
    else:
        tl.store(lam_part + 2 * pid + 1, 0.0)


@triton.jit
def backward_kernel(dq, dk, dv, g_stride_t, g_stride_h, dv_stride_t, dv_stride_h, q, k, v, ve, stride_t, stride_h,
                    ve_stride_t, cos, sin, rstd, sa, dqkv, dve_out, lam_part, plane_offset, out_stride_t, T,
                    H: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr, FAST: tl.constexpr,
                    HAS_VE: tl.constexpr):
    """dq, dk (T, H, 2·HALF) bf16 with strides (g_stride_t, g_stride_h, 1) and dv (strides dv_stride_t,
    dv_stride_h) -> dqkv, the whole (T, 3H, 2·HALF) gradient (token stride out_stride_t, plane p from
    dqkv + p·plane_offset: run-time arguments, since as constants the compiled code spilled more): in planes 0 and
    1 the rotation's transpose, then RMS norm's backward dx = r·(dn - x̂·mean(dn·x̂)), x̂ = x·r; in plane 2 λ₀·dv.
    One tensor passed once, since Inductor's functional form of a kernel's writes keeps one version per argument.
    The third plane's programs also write λ₁·dv into dve_out when HAS_VE, and their sums of dv·v and dv·ve (v: the
    projection's third plane, strides as q's; ve: token stride ve_stride_t) into lam_part (row blocks, 2) float32."""
    part = tl.program_id(1)
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
    t, h, cols, m = rows // H, rows % H, tl.arange(0, HALF)[None, :], (rows < T * H)[:, None]
    if part == 2:
        _v_plane_backward(dv, v, ve, sa, dqkv + 2 * plane_offset, dve_out, lam_part, tl.program_id(0), t, h, cols, m,
                          dv_stride_t, dv_stride_h, stride_t, stride_h, ve_stride_t, out_stride_t, H, HALF, HAS_VE,
                          FAST)
    else:
        _qk_plane_backward(dq if part == 0 else dk, q if part == 0 else k, dqkv + part * plane_offset, cos, sin, rstd,
                           rows, t, h, cols, m, g_stride_t, g_stride_h, stride_t, stride_h, out_stride_t, part, T, H,
                           HALF, FAST)
