"""train/xent_triton.py's two Triton kernels (imported at their first launch; that module says what they compute).

    from train.xent_kernels import row_stats_kernel, grad_kernel      # needs Triton

Both passes are bound by instruction issue and the special-function unit, not by their bytes (an H200 reads
the bf16 logits in ~1 ms; tests/test_xent_triton.py counts the compiled instructions). So on a GPU (FAST) the
transcendentals go straight to the hardware's approximations without the denormal fix-ups the compiler wraps
around exp and division by default: same results for every normal number, and no value here is subnormal
(exp(z - 30) >= exp(-30); exp(logp) >= exp(-41); 1 / (1 + exp(-u)) only for a logit below -654, where both
forms give a sigmoid that the FP8 gradient rounds to 0). The arithmetic is the record's, operation for operation
(train/loss.py's order), so the results equal the default lowering's. FAST=False is the portable form for
Triton's CPU interpreter, which cannot run inline assembly. The one exception is pass 1's sum (issue 41's lever 5,
2.9 ms per step faster end to end on an H200, 2026-12-03): each z = 30·sigmoid(x / 7.5) is taken as
15 + 15·tanh(x / 15), on a GPU one tanh.approx per element in place of ex2 and rcp, which moves each row's log sum
by at most 15·2^-11 = 0.0073 (benchmarks/xent_check.py checks it against float64). The target's z and pass 2 stay
the record's arithmetic.
"""

import triton
import triton.language as tl

LOG2E = tl.constexpr(1.4426950408889634)  # exp(v) = 2^(v·log2 e), as the compiler lowers exp: equal results


@triton.jit
def round_to_bf16(x, FAST: tl.constexpr):
    """float32 -> the nearest bf16 (ties to even), still float32; finite inputs only. Written out for the
    interpreter (FAST=False), whose bf16 casts truncate; a GPU's cast rounds."""
    if FAST:
        return x.to(tl.bfloat16).to(tl.float32)
    else:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True)


@triton.jit
def _ex2(v, FAST: tl.constexpr):
    """2^v: the hardware's approximation on a GPU, the interpreter's exp2 elsewhere."""
    if FAST:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=r,r", [v], dtype=tl.float32, is_pure=True,
                                         pack=1)
    else:
        return tl.exp2(v)


@triton.jit
def _rcp(v, FAST: tl.constexpr):
    if FAST:
        return tl.inline_asm_elementwise("rcp.approx.ftz.f32 $0, $1;", "=r,r", [v], dtype=tl.float32, is_pure=True,
                                         pack=1)
    else:
        return 1.0 / v


@triton.jit
def _exp(v, FAST: tl.constexpr):
    if FAST:
        return _ex2(v * LOG2E, FAST)
    else:
        return tl.exp(v)


@triton.jit
def _sigmoid_of_scaled(x, FAST: tl.constexpr):
    """sigmoid(x / 7.5) as the record's compiled code evaluates it: 1 / (1 + exp(-(x / 7.5)))."""
    e = _exp(-(x / 7.5), FAST)  # the compiler folds / 7.5 into a product, as in the record's
    return _rcp(1.0 + e, FAST)


@triton.jit
def _softcap_by_tanh(x, FAST: tl.constexpr):
    """30·sigmoid(x / 7.5) as 15 + 15·tanh(x / 15): one special-function op where the sigmoid takes two. On a GPU
    tanh.approx, whose relative error (2^-11) puts z up to 0.0073 off; pass 1's sum only."""
    u = x * (1.0 / 15.0)
    if FAST:
        t = tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [u], dtype=tl.float32, is_pure=True, pack=1)
    else:
        t = 2.0 / (1.0 + tl.exp(-2.0 * u)) - 1.0
    return 15.0 + 15.0 * t


@triton.jit
def _row_block(base, cols, valid, top_lanes, d, MASKED: tl.constexpr, FAST: tl.constexpr):
    if MASKED:
        x = tl.load(base + cols, mask=valid, other=0.0).to(tl.float32)
    else:
        x = tl.load(base + cols).to(tl.float32)
    z = _softcap_by_tanh(x, FAST)
    p = _exp(z - 30.0, FAST)
    if MASKED:
        z = tl.where(valid, z, 0.0)
        p = tl.where(valid, p, 0.0)
    return tl.maximum(top_lanes, z), d + p


@triton.jit
def row_stats_kernel(logits, targets, row_max, row_logsum, row_loss, stride,
                     V: tl.constexpr, BLOCK_V: tl.constexpr, FAST: tl.constexpr):
    # V: one vocabulary per run. The row's sum from _softcap_by_tanh; the target's z, one element per row, stays the
    # record's sigmoid, so the loss and pass 2's logp are off only by the sum's log, a weighted mean of the z errors
    # (at most 0.0073)
    row = tl.program_id(0).to(tl.int64)
    base = logits + row * stride
    # 0 <= z <= 30 (a sigmoid scaled by 30): exp(z - 30) can neither overflow nor vanish in float32, so the
    # sum needs no running max (no rescaling, no reduction per block); the max, for the record's form
    # logp = (z - max) - log sum, is kept per lane and reduced once.
    top_lanes = tl.zeros([BLOCK_V], dtype=tl.float32)
    d = tl.zeros([BLOCK_V], dtype=tl.float32)
    lanes = tl.arange(0, BLOCK_V)
    FULL: tl.constexpr = V - V % BLOCK_V
    for start in range(0, FULL, BLOCK_V):  # whole blocks: no masks
        top_lanes, d = _row_block(base, start + lanes, lanes < BLOCK_V, top_lanes, d, False, FAST)
    if FULL < V:
        top_lanes, d = _row_block(base, FULL + lanes, FULL + lanes < V, top_lanes, d, True, FAST)
    top = tl.max(top_lanes, axis=0)
    logsum = tl.log(tl.sum(d, axis=0)) + (30.0 - top)  # log sum exp(z - top)
    target = tl.load(targets + row)
    # masked so that a target outside the vocabulary cannot read another row's memory (the loader's tokens
    # are all below V; cross_entropy would raise on such a target, this kernel cannot)
    hit = (target >= 0) & (target < V)
    z_t = 30.0 * _sigmoid_of_scaled(tl.load(base + target, mask=hit, other=0.0).to(tl.float32), FAST)
    tl.store(row_max + row, top)
    tl.store(row_logsum + row, logsum)
    tl.store(row_loss + row, -((z_t - top) - logsum))


@triton.jit
def grad_kernel(logits, targets, row_max, row_logsum, out, out_t, T, V, stride, grad_s,
                BLOCK_T: tl.constexpr, BLOCK_V: tl.constexpr, EVEN: tl.constexpr, FAST: tl.constexpr,
                TRANSPOSED: tl.constexpr):
    """out (T, V): float8_e5m2 in training; float32 in the self-check, which sees the value before the cast.
    EVEN: T and V are multiples of the tile (the record's 49,152 x 50,304 are), so no element needs a mask.
    TRANSPOSED: also write out_t (V, T), the same values transposed, which dW's FP8 matmul takes (K = T
    contiguous): each tile leaves as BLOCK_V rows of BLOCK_T contiguous bytes, instead of a separate copy
    reading the whole gradient back."""
    row0 = tl.program_id(0) * BLOCK_T
    col0 = tl.program_id(1) * BLOCK_V
    rows = row0 + tl.arange(0, BLOCK_T)
    cols = col0 + tl.arange(0, BLOCK_V)  # int32: the one-hot compare below is one instruction per element
    # 64-bit addressing only for the tile's corner: T x V exceeds 2^31 at the record's size
    src = logits + row0.to(tl.int64) * stride + col0
    dst = out + row0.to(tl.int64) * V + col0
    tile = tl.arange(0, BLOCK_T)[:, None] * stride + tl.arange(0, BLOCK_V)[None, :]
    tile_out = tl.arange(0, BLOCK_T)[:, None] * V + tl.arange(0, BLOCK_V)[None, :]
    if EVEN:
        x = tl.load(src + tile).to(tl.float32)
        top = tl.load(row_max + rows)
        logsum = tl.load(row_logsum + rows)
        target = tl.load(targets + rows).to(tl.int32)
    else:
        rvalid = rows < T
        valid = rvalid[:, None] & (cols < V)[None, :]
        x = tl.load(src + tile, mask=valid, other=0.0).to(tl.float32)
        top = tl.load(row_max + rows, mask=rvalid, other=0.0)
        logsum = tl.load(row_logsum + rows, mask=rvalid, other=0.0)
        target = tl.load(targets + rows, mask=rvalid, other=-1).to(tl.int32)
    s = _sigmoid_of_scaled(x, FAST)
    z = 30.0 * s
    logp = (z - top[:, None]) - logsum[:, None]
    grad_z = _exp(logp, FAST) - tl.where(cols[None, :] == target[:, None], 1.0, 0.0)
    grad = (grad_z * 30.0) * (1.0 - s) * s / 7.5
    # the record's autograd hands dL/dlogits to its FP8 backward in bf16, which then divides by grad_s
    scaled = (round_to_bf16(grad, FAST) / grad_s).to(out.dtype.element_ty)
    if EVEN:
        tl.store(dst + tile_out, scaled)
    else:
        tl.store(dst + tile_out, scaled, mask=valid)
    if TRANSPOSED:
        dst_t = out_t + col0.to(tl.int64) * T + row0
        tile_t = tl.arange(0, BLOCK_V)[:, None] * T + tl.arange(0, BLOCK_T)[None, :]
        if EVEN:
            tl.store(dst_t + tile_t, tl.trans(scaled))
        else:
            tl.store(dst_t + tile_t, tl.trans(scaled), mask=tl.trans(valid))
