"""train/relu2_mlp.py's Triton kernels (imported at their first launch; that module says what they are for).

    from train.relu2_mlp_kernel import matmul_relu2_kernel, matmul_relu2_persistent_kernel      # needs Triton

One bf16 matmul C = A·B (A: M×K rows, B: K×N rows, float32 accumulation) whose epilogue does ReLU²'s
elementwise work while the tile is still in registers, so no separate pass reads C back:
  forward  (BACKWARD=False): out = bf16(C) = h, out2 = bf16(relu(h)²) = a;
  backward (BACKWARD=True):  C = dL/da, aux = h: out = bf16(bf16(C) · 2·relu(h)) = dL/dh.
The arithmetic is the compiled record's: the matmul's output rounded to bf16 (its dtype), the pointwise work in
float32 rounded once. Tiles are BLOCK_M × BLOCK_N, taken GROUP_M row-tiles down a column of tiles before moving
right, so the B columns they share stay in L2. N and K are multiples of the block sizes (the launcher checks).

Two forms of the same product:
  matmul_relu2_kernel: a program per tile, operands through pointer loads (rows past M read wrapped: valid
    addresses, never stored);
  matmul_relu2_persistent_kernel: one program per SM walks the tiles, operands through TMA descriptors (rows
    past M read as zeros), and the tile loop is flattened into the K loop so that the next tile's loads are in
    flight during this tile's epilogue. On an H200 the first form's best tile took 0.431 ms where cuBLAS's plain
    matmul took 0.342 (train/BENCHMARKS.md); this one is the candidate to close that gap.
"""

import triton
import triton.language as tl

from train.triton_math import round_to_bf16


@triton.jit
def _tile(t, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Tile number t -> its row-tile and column-tile, grouped GROUP_M row-tiles at a time."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    per_group = GROUP_M * (N // BLOCK_N)
    first_m = (t // per_group) * GROUP_M
    group_m = min(tiles_m - first_m, GROUP_M)
    return first_m + (t % per_group) % group_m, (t % per_group) // group_m


@triton.jit
def _product(a_tile, b_tile, acc, FAST: tl.constexpr):
    if FAST:
        return tl.dot(a_tile, b_tile, acc)
    else:  # the interpreter multiplies bf16 tiles as their integer bits: give it float32 (exact products)
        return tl.dot(a_tile.to(tl.float32), b_tile.to(tl.float32), acc)


@triton.jit
def _epilogue(acc, tile_m, tile_n, M, N, aux, out, out2, BACKWARD: tl.constexpr, BLOCK_M: tl.constexpr,
              BLOCK_N: tl.constexpr, FAST: tl.constexpr):
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)  # (BLOCK_M,)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)  # (BLOCK_N,)
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


@triton.jit
def matmul_relu2_kernel(a, b, aux, out, out2, M, N, stride_a, stride_b, K: tl.constexpr, BACKWARD: tl.constexpr,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, FAST: tl.constexpr):
    """a (M, K) bf16 (row stride stride_a), b (K, N) bf16 (row stride stride_b); aux, out, out2 (M, N) bf16
    contiguous (aux read only when BACKWARD, out2 written only when not). K is the model's width or 4x it."""
    tile_m, tile_n = _tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    a_tile = a + (rows % M)[:, None] * stride_a + ks[None, :]  # (BLOCK_M, BLOCK_K)
    b_tile = b + ks[:, None] * stride_b + cols[None, :]  # (BLOCK_K, BLOCK_N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for _ in range(0, K // BLOCK_K):  # K constexpr: the model's width, a trip count the pipeliner knows
        acc = _product(tl.load(a_tile), tl.load(b_tile), acc, FAST)
        a_tile += BLOCK_K
        b_tile += BLOCK_K * stride_b
    _epilogue(acc, tile_m, tile_n, M, N, aux, out, out2, BACKWARD, BLOCK_M, BLOCK_N, FAST)


@triton.jit
def matmul_relu2_persistent_kernel(a, b, aux, out, out2, stride_a, stride_b, M: tl.constexpr, N: tl.constexpr,
                                   K: tl.constexpr, PROGRAMS: tl.constexpr, BACKWARD: tl.constexpr,
                                   BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                                   GROUP_M: tl.constexpr, FAST: tl.constexpr):
    """As matmul_relu2_kernel, launched on PROGRAMS programs (the GPU's SMs). M and N constexpr: one compile per
    micro-batch length (training's and validation's), and loop bounds Triton's interpreter can run."""
    a_desc = tl.make_tensor_descriptor(a, shape=[M, K], strides=[stride_a, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b, shape=[K, N], strides=[stride_b, 1], block_shape=[BLOCK_K, BLOCK_N])
    TILES: tl.constexpr = (M + BLOCK_M - 1) // BLOCK_M * (N // BLOCK_N)
    if FAST:
        for t in tl.range(tl.program_id(0), TILES, PROGRAMS, flatten=True):
            _persistent_tile(t, a_desc, b_desc, aux, out, out2, M, N, K, BACKWARD, BLOCK_M, BLOCK_N, BLOCK_K,
                             GROUP_M, FAST)
    else:  # the interpreter cannot start a range at a program id: the same tiles, counted from 0
        for t0 in range(0, TILES, PROGRAMS):
            if t0 + tl.program_id(0) < TILES:
                _persistent_tile(t0 + tl.program_id(0), a_desc, b_desc, aux, out, out2, M, N, K, BACKWARD,
                                 BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, FAST)


@triton.jit
def _persistent_tile(t, a_desc, b_desc, aux, out, out2, M, N, K: tl.constexpr, BACKWARD: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                     FAST: tl.constexpr):
    tile_m, tile_n = _tile(t, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K // BLOCK_K):
        acc = _product(a_desc.load([tile_m * BLOCK_M, k * BLOCK_K]), b_desc.load([k * BLOCK_K, tile_n * BLOCK_N]),
                       acc, FAST)
    _epilogue(acc, tile_m, tile_n, M, N, aux, out, out2, BACKWARD, BLOCK_M, BLOCK_N, FAST)
