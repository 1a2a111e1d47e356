"""train/xent_triton.py's two Triton kernels (imported at their first launch; that module says what they compute).

    from train.xent_kernels import row_stats_kernel, grad_kernel      # needs Triton
"""

import triton
import triton.language as tl


@triton.jit
def row_stats_kernel(logits, targets, row_max, row_logsum, row_loss, stride,
                      V: tl.constexpr, BLOCK_V: tl.constexpr):  # V a constant: one vocabulary per run
    row = tl.program_id(0).to(tl.int64)
    base = logits + row * stride
    # 0 <= z <= 30 (a sigmoid scaled by 30): exp(z - 30) can neither overflow nor vanish in float32, so the
    # sum needs no running max (no rescaling, no reduction per block: this pass is bound by arithmetic, not
    # by its two bytes read per element); the max, for the record's form logp = (z - max) - log sum, is kept
    # per lane and reduced once.
    top_lanes = tl.zeros([BLOCK_V], dtype=tl.float32)
    d = tl.zeros([BLOCK_V], dtype=tl.float32)
    for start in range(0, V, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        valid = cols < V
        x = tl.load(base + cols, mask=valid, other=0.0).to(tl.float32)
        z = 30.0 * tl.sigmoid(x / 7.5)
        top_lanes = tl.maximum(top_lanes, tl.where(valid, z, 0.0))
        d += tl.where(valid, tl.exp(z - 30.0), 0.0)
    top = tl.max(top_lanes, axis=0)
    logsum = tl.log(tl.sum(d, axis=0)) + (30.0 - top)  # log sum exp(z - top)
    target = tl.load(targets + row)
    # masked so that a target outside the vocabulary cannot read another row's memory (the loader's tokens
    # are all below V; cross_entropy would raise on such a target, this kernel cannot)
    hit = (target >= 0) & (target < V)
    z_t = 30.0 * tl.sigmoid(tl.load(base + target, mask=hit, other=0.0).to(tl.float32) / 7.5)
    tl.store(row_max + row, top)
    tl.store(row_logsum + row, logsum)
    tl.store(row_loss + row, -((z_t - top) - logsum))

@triton.jit
def _round_to_bf16(x):
    """float32 -> the nearest bf16 (ties to even), still float32. Written out because the Triton interpreter,
    which runs the self-check on CPUs, truncates in its bf16 casts; finite inputs only."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)

@triton.jit
def grad_kernel(logits, targets, row_max, row_logsum, out, T, V, stride, grad_s,
                 BLOCK_T: tl.constexpr, BLOCK_V: tl.constexpr):
    """out: float8_e5m2 in training; float32 in the self-check, which sees the value before the cast."""
    rows = (tl.program_id(0) * BLOCK_T + tl.arange(0, BLOCK_T)).to(tl.int64)
    cols = (tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)).to(tl.int64)
    rvalid, cvalid = rows < T, cols < V
    valid = rvalid[:, None] & cvalid[None, :]
    x = tl.load(logits + rows[:, None] * stride + cols[None, :], mask=valid, other=0.0).to(tl.float32)
    s = tl.sigmoid(x / 7.5)
    z = 30.0 * s
    top = tl.load(row_max + rows, mask=rvalid, other=0.0)
    logsum = tl.load(row_logsum + rows, mask=rvalid, other=0.0)
    target = tl.load(targets + rows, mask=rvalid, other=-1)
    logp = (z - top[:, None]) - logsum[:, None]
    grad_z = tl.exp(logp) - tl.where(cols[None, :] == target[:, None], 1.0, 0.0)
    grad = (grad_z * 30.0) * (1.0 - s) * s / 7.5
    # the record's autograd hands dL/dlogits to its FP8 backward in bf16, which then divides by grad_s
    scaled = (_round_to_bf16(grad) / grad_s).to(out.dtype.element_ty)
    tl.store(out + rows[:, None] * V + cols[None, :], scaled, mask=valid)
