"""train/relu2_mlp.py's Triton kernel (imported at its first launch; that module says what it is for).

    from train.relu2_mlp_kernel import matmul_relu2_kernel      # needs Triton

One bf16 matmul C = A·B (A: M×K rows, B: K×N rows, float32 accumulation) whose epilogue does ReLU²'s
elementwise work while the tile is still in registers, so no separate pass reads C back:
  forward  (BACKWARD=False): out = bf16(C) = h, out2 = bf16(relu(h)²) = a;
  backward (BACKWARD=True):  C = dL/da, aux = h: out = bf16(bf16(C) · 2·relu(h)) = dL/dh.
The arithmetic is the compiled record's: the matmul's output rounded to bf16 (its dtype), the pointwise work in
float32 rounded once. A program computes one BLOCK_M × BLOCK_N tile; programs run GROUP_M row-tiles down a
column of tiles before moving right, so the B columns they share stay in L2. N and K are multiples of the
block sizes (the launcher checks); rows past M are read wrapped (valid addresses, never stored).
"""

import triton
import triton.language as tl

from train.triton_math import round_to_bf16


@triton.jit
def matmul_relu2_kernel(a, b, aux, out, out2, M, N, stride_a, stride_b, K: tl.constexpr, BACKWARD: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, FAST: tl.constexpr):
    """a (M, K) bf16 (row stride stride_a), b (K, N) bf16 (row stride stride_b); aux, out, out2 (M, N) bf16
    contiguous (aux read only when BACKWARD, out2 written only when not). K is the model's width or 4x it."""
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = N // BLOCK_N
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    tile_m = first_m + (pid % per_group) % group_m
    tile_n = (pid % per_group) // group_m

    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a + (rows % M)[:, None] * stride_a + ks[None, :]  # (BLOCK_M, BLOCK_K)
    b_tile = b + ks[:, None] * stride_b + cols[None, :]  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):  # K constexpr: the model's width, a trip count the pipeliner knows
        if FAST:
            acc = tl.dot(tl.load(a_tile), tl.load(b_tile), acc)
        else:  # the interpreter multiplies bf16 tiles as their integer bits: give it float32 (exact products)
            acc = tl.dot(tl.load(a_tile).to(tl.float32), tl.load(b_tile).to(tl.float32), acc)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * stride_b

    c = round_to_bf16(acc, FAST)  # the matmul's bf16 output, as float32
    at = rows[:, None] * N + cols[None, :]  # (BLOCK_M, BLOCK_N)
    keep = (rows < M)[:, None]
    if BACKWARD:
        r = tl.maximum(tl.load(aux + at, mask=keep, other=0.0).to(tl.float32), 0.0)
        tl.store(out + at, round_to_bf16(c * 2.0 * r, FAST).to(tl.bfloat16), mask=keep)
    else:
        r = tl.maximum(c, 0.0)
        tl.store(out + at, c.to(tl.bfloat16), mask=keep)
        tl.store(out2 + at, round_to_bf16(r * r, FAST).to(tl.bfloat16), mask=keep)
