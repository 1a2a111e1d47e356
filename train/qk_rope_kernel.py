"""train/qk_rope.py's Triton kernel (imported at its first launch; that module says what it computes).

    from train.qk_rope_kernel import qk_rope_kernel      # needs Triton

One program normalises and rotates BLOCK_R rows of 128 channels. Row r is head j = r % 2H of token t = r // 2H;
heads 0..H-1 are the queries and H..2H-1 the keys, read in place from the QKV projection (row stride 3D).
"""

import triton
import triton.language as tl

from train.triton_math import round_to_bf16


@triton.jit
def qk_rope_kernel(qkv, cos, sin, out, rstd_out, R, T, qkv_stride, eps,
                   H: tl.constexpr, HALF: tl.constexpr, BLOCK_R: tl.constexpr, FAST: tl.constexpr):
    """qkv (T, 3H·2·HALF) bf16 -> out (2, T, H, 2·HALF) bf16 [queries, keys], rstd_out (T, 2H) float32."""
    rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)  # (BLOCK_R,)
    valid = rows < R
    t = rows // (2 * H)
    j = rows % (2 * H)
    cols = tl.arange(0, HALF)[None, :]  # (1, HALF): the two halves of a head are loaded apart
    src = qkv + t[:, None] * qkv_stride + j[:, None] * (2 * HALF) + cols  # (BLOCK_R, HALF)
    m = valid[:, None]
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
    y1 = n1 * c + n2 * s
    y2 = n1 * (-s) + n2 * c
    dst = out + ((j // H) * T + t)[:, None] * (H * 2 * HALF) + (j % H)[:, None] * (2 * HALF) + cols
    tl.store(dst, round_to_bf16(y1, FAST).to(tl.bfloat16), mask=m)
    tl.store(dst + HALF, round_to_bf16(y2, FAST).to(tl.bfloat16), mask=m)
    tl.store(rstd_out + rows, rstd, mask=valid)
