"""Triton helpers shared by train/'s kernels (train/xent_kernels.py, train/qk_rope_kernel.py)."""

import triton
import triton.language as tl


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
