"""train/relu2_grad.py's Triton kernel (imported at its first launch; that module says what it computes).

    from train.relu2_grad_kernel import relu2_grad_kernel      # needs Triton

relu2_grad_kernel is one GEMM on TMA descriptors, bf16 row-major, float32 accumulation, with ReLU²'s backward inside
it: A (M, K) · B (K, N), the sum rounded to bf16 as cuBLAS returns it, then the epilogue out = 2·relu(pre)·acc, in
float32, rounded once (as Inductor compiles the record's ReLU² backward).
NUM_PROGRAMS > 0: persistent, that many programs (the GPU's SMs) walk the output tiles, GROUP_M row tiles at a time
so that their programs share B's columns in L2; 0: one program per tile, the form Triton's interpreter runs (its
loops cannot start at a program id). benchmarks/relu2_gemm.py times it.
"""

import triton
import triton.language as tl


@triton.jit
def _offsets(tile, tiles_m: tl.constexpr, tiles_n: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             GROUP_M: tl.constexpr):
    """Output tile number -> its first row and column, GROUP_M row tiles sweeping each column group."""
    group_size = GROUP_M * tiles_n
    first_m = (tile // group_size) * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    off_m = (first_m + (tile % group_size) % rows_in_group) * BLOCK_M
    off_n = ((tile % group_size) // rows_in_group) * BLOCK_N
    return off_m, off_n


@triton.jit
def _grad_tile(a_desc, b_desc, pre_desc, out_desc, tile, tiles_m: tl.constexpr, tiles_n: tl.constexpr,
               K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr):
    off_m, off_n = _offsets(tile, tiles_m, tiles_n, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([k, off_n]), acc)
    grad_h = acc.to(pre_desc.dtype).to(tl.float32)  # (BLOCK_M, BLOCK_N): the bits torch.mm would hand over
    r = tl.maximum(pre_desc.load([off_m, off_n]).to(tl.float32), 0.0)
    out_desc.store([off_m, off_n], (2.0 * r * grad_h).to(pre_desc.dtype))


@triton.jit
def relu2_grad_kernel(a_desc, b_desc, pre_desc, out_desc, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                      NUM_PROGRAMS: tl.constexpr):
    tiles_m: tl.constexpr = (M + BLOCK_M - 1) // BLOCK_M
    tiles_n: tl.constexpr = (N + BLOCK_N - 1) // BLOCK_N
    if NUM_PROGRAMS > 0:
        for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS):
            _grad_tile(a_desc, b_desc, pre_desc, out_desc, tile, tiles_m, tiles_n, K, BLOCK_M, BLOCK_N, BLOCK_K,
                       GROUP_M)
    else:
        _grad_tile(a_desc, b_desc, pre_desc, out_desc, tl.program_id(0), tiles_m, tiles_n, K, BLOCK_M, BLOCK_N,
                   BLOCK_K, GROUP_M)
