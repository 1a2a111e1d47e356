"""train/qk_rope.py's Triton kernels (imported at their first launch; that module says what they compute).

    from train.qk_rope_kernel import forward_kernel, backward_kernel      # needs Triton

Grid (row blocks, 3): axis 1 picks the part of the QKV projection, 0 queries, 1 keys, 2 values. A program takes
BLOCK_R rows of one part; row r is head h = r % H of token t = r // H, HALF·2 channels read in two halves (the
rotation pairs channel i with i + HALF). Queries and keys are normalised and rotated, values mixed with the
layer's value embedding. All arithmetic in float32, rounded to bf16 where the record's compiled code rounds.
"""

import triton
import triton.language as tl

from train.triton_math import round_to_bf16


@triton.jit
def _rows(T, H: tl.constexpr, BLOCK_R: tl.constexpr, HALF: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # (BLOCK_R,)
    valid = rows < T * H
    return rows, rows // H, rows % H, tl.arange(0, HALF)[None, :], valid[:, None]


@triton.jit
def forward_kernel(qkv, ve, sa, cos, sin, q_out, k_out, v_out, rstd_out, T, qkv_stride, eps,
                   H: tl.constexpr, HALF: tl.constexpr, HAS_VE: tl.constexpr, BLOCK_R: tl.constexpr,
                   FAST: tl.constexpr):
    """qkv (T, 3·H·2·HALF) bf16, ve (T, H·2·HALF) bf16, sa (2,) float32 -> q, k, v (T, H, 2·HALF) bf16,
    rstd_out (T, 2H) float32 (queries' heads, then keys')."""
    part = tl.program_id(1)
    rows, t, h, cols, m = _rows(T, H, BLOCK_R, HALF)
    D: tl.constexpr = H * 2 * HALF
    src = qkv + t[:, None] * qkv_stride + part * D + h[:, None] * (2 * HALF) + cols  # (BLOCK_R, HALF)
    dst = rows[:, None] * (2 * HALF) + cols  # q, k and v are (T, H, hd) contiguous
    x1 = tl.load(src, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=m, other=0.0).to(tl.float32)
    if part < 2:
        # F.rms_norm: float32 mean of squares, rsqrt(mean + eps), the product rounded to bf16 (its output dtype)
        rstd = tl.rsqrt((tl.sum(x1 * x1, axis=1) + tl.sum(x2 * x2, axis=1)) / (2 * HALF) + eps)  # (BLOCK_R,)
        n1 = round_to_bf16(x1 * rstd[:, None], FAST)
        n2 = round_to_bf16(x2 * rstd[:, None], FAST)
        # rotary in float32, rounded once when stored, as compiled code evaluates the bf16 expression
        tab = t[:, None] * HALF + cols
        c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
        s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
        y1 = round_to_bf16(n1 * c + n2 * s, FAST).to(tl.bfloat16)
        y2 = round_to_bf16(n1 * (-s) + n2 * c, FAST).to(tl.bfloat16)
        out = q_out if part == 0 else k_out
        tl.store(out + dst, y1, mask=m)
        tl.store(out + dst + HALF, y2, mask=m)
        tl.store(rstd_out + t * (2 * H) + part * H + h, rstd, mask=rows < T * H)
    else:
        # v = sa[0]·v + sa[1]·ve, in float32, rounded once (the record's bf16 expression, compiled)
        sa0 = tl.load(sa)
        v1 = sa0 * x1
        v2 = sa0 * x2
        if HAS_VE:
            sa1 = tl.load(sa + 1)
            e = ve + t[:, None] * D + h[:, None] * (2 * HALF) + cols
            v1 += sa1 * tl.load(e, mask=m, other=0.0).to(tl.float32)
            v2 += sa1 * tl.load(e + HALF, mask=m, other=0.0).to(tl.float32)
        tl.store(v_out + dst, round_to_bf16(v1, FAST).to(tl.bfloat16), mask=m)
        tl.store(v_out + dst + HALF, round_to_bf16(v2, FAST).to(tl.bfloat16), mask=m)


@triton.jit
def backward_kernel(dq, dk, dv, g_stride_t, g_stride_h, qkv, ve, sa, cos, sin, rstd, grad_qkv, grad_ve, sa_partial,
                    T, qkv_stride, H: tl.constexpr, HALF: tl.constexpr, HAS_VE: tl.constexpr,
                    BLOCK_R: tl.constexpr, FAST: tl.constexpr):
    """dq, dk, dv (T, H, 2·HALF) bf16 with strides (g_stride_t, g_stride_h, 1) -> grad_qkv (T, 3·D) bf16 whole,
    grad_ve (T, D) bf16 when HAS_VE, sa_partial (row blocks, 2) float32: this block's sums of dv·v and dv·ve."""
    part = tl.program_id(1)
    rows, t, h, cols, m = _rows(T, H, BLOCK_R, HALF)
    D: tl.constexpr = H * 2 * HALF
    col0 = h[:, None] * (2 * HALF) + cols
    src = qkv + t[:, None] * qkv_stride + part * D + col0
    dst = grad_qkv + t[:, None] * qkv_stride + part * D + col0
    g = (dq if part == 0 else (dk if part == 1 else dv)) + t[:, None] * g_stride_t + h[:, None] * g_stride_h + cols
    dy1 = tl.load(g, mask=m, other=0.0).to(tl.float32)
    dy2 = tl.load(g + HALF, mask=m, other=0.0).to(tl.float32)
    x1 = tl.load(src, mask=m, other=0.0).to(tl.float32)
    x2 = tl.load(src + HALF, mask=m, other=0.0).to(tl.float32)
    if part < 2:
        # the rotation's transpose, then RMS norm's backward: dx = r·(dn - x̂·mean(dn·x̂)), x̂ = x·r
        tab = t[:, None] * HALF + cols
        c = tl.load(cos + tab, mask=m, other=0.0).to(tl.float32)
        s = tl.load(sin + tab, mask=m, other=0.0).to(tl.float32)
        dn1 = dy1 * c - dy2 * s
        dn2 = dy1 * s + dy2 * c
        r = tl.load(rstd + t * (2 * H) + part * H + h, mask=rows < T * H, other=0.0)[:, None]
        xh1 = x1 * r
        xh2 = x2 * r
        dot = (tl.sum(dn1 * xh1, axis=1) + tl.sum(dn2 * xh2, axis=1))[:, None] / (2 * HALF)
        tl.store(dst, round_to_bf16(r * (dn1 - xh1 * dot), FAST).to(tl.bfloat16), mask=m)
        tl.store(dst + HALF, round_to_bf16(r * (dn2 - xh2 * dot), FAST).to(tl.bfloat16), mask=m)
    else:
        sa0 = tl.load(sa)
        tl.store(dst, round_to_bf16(sa0 * dy1, FAST).to(tl.bfloat16), mask=m)
        tl.store(dst + HALF, round_to_bf16(sa0 * dy2, FAST).to(tl.bfloat16), mask=m)
        tl.store(sa_partial + tl.program_id(0) * 2, tl.sum(tl.sum(dy1 * x1 + dy2 * x2, axis=1), axis=0))
        if HAS_VE:
            sa1 = tl.load(sa + 1)
            e = t[:, None] * D + col0
            e1 = tl.load(ve + e, mask=m, other=0.0).to(tl.float32)
            e2 = tl.load(ve + e + HALF, mask=m, other=0.0).to(tl.float32)
            tl.store(grad_ve + e, round_to_bf16(sa1 * dy1, FAST).to(tl.bfloat16), mask=m)
            tl.store(grad_ve + e + HALF, round_to_bf16(sa1 * dy2, FAST).to(tl.bfloat16), mask=m)
            tl.store(sa_partial + tl.program_id(0) * 2 + 1, tl.sum(tl.sum(dy1 * e1 + dy2 * e2, axis=1), axis=0))
        else:
            tl.store(sa_partial + tl.program_id(0) * 2 + 1, 0.0)
