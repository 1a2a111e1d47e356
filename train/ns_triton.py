"""Newton–Schulz with Triton kernels for the two symmetric products (CUDA only).

    python benchmarks/ns_check.py        # on a GPU machine: the kernels against torch, and their times

Each iteration of train/newton_schulz.py computes A = XXᵀ and B = bA + cA², both symmetric. The kernel
below computes only the output tiles on or above the diagonal and writes each tile twice (itself and its
mirror), so about half the multiply work of a general matmul. The last line, aX + BX, is a plain
baddbmm. `newton_schulz.orthogonalize` picks this path for CUDA tensors when Triton imports.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only environments: newton_schulz uses its torch path
    triton = None

AVAILABLE = triton is not None

if AVAILABLE:

    @triton.autotune(
        configs=[triton.Config({"BLOCK": bm, "BLOCK_K": bk}, num_warps=w, num_stages=s)
                 for bm in (64, 128) for bk in (64, 128) for w, s in ((4, 3), (8, 3), (4, 4))],
        key=["M", "K"],
    )
    @triton.jit
    def _sym_product_kernel(X, C, M, K, sxb, sxr, sxc, scb, scr, scc, alpha, beta,
                            ADD_X: tl.constexpr, BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
        """C = alpha·X Xᵀ (+ beta·X when ADD_X, X square) for one batch entry; upper tiles only."""
        tiles = tl.cdiv(M, BLOCK)
        ti, tj = tl.program_id(0) // tiles, tl.program_id(0) % tiles
        if ti > tj:  # the mirror store of tile (tj, ti) writes this one
            return
        X += tl.program_id(1) * sxb
        C += tl.program_id(1) * scb
        rows = ti * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) rows of X for the left factor
        cols = tj * BLOCK + tl.arange(0, BLOCK)  # (BLOCK,) rows of X for the right factor Xᵀ
        ks = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            k_ok = (k0 + ks) < K
            left = tl.load(X + rows[:, None] * sxr + (k0 + ks)[None, :] * sxc,
                           mask=(rows[:, None] < M) & k_ok[None, :], other=0.0)  # (BLOCK, BLOCK_K)
            right = tl.load(X + cols[None, :] * sxr + (k0 + ks)[:, None] * sxc,
                            mask=k_ok[:, None] & (cols[None, :] < M), other=0.0)  # (BLOCK_K, BLOCK)
            acc = tl.dot(left, right, acc)
        acc = acc * alpha
        inside = (rows[:, None] < M) & (cols[None, :] < M)
        if ADD_X:
            acc += beta * tl.load(X + rows[:, None] * sxr + cols[None, :] * sxc, mask=inside, other=0.0)
        out = acc.to(C.dtype.element_ty)
        tl.store(C + rows[:, None] * scr + cols[None, :] * scc, out, mask=inside)
        if ti != tj:
            mirror_inside = (cols[:, None] < M) & (rows[None, :] < M)
            tl.store(C + cols[:, None] * scr + rows[None, :] * scc, tl.trans(out), mask=mirror_inside)


def sym_product(X: Tensor, out: Tensor, alpha: float = 1.0, beta: float = 0.0, add_x: bool = False) -> Tensor:
    """out = alpha·X Xᵀ (+ beta·X). X: (B, M, K) bf16 (square when add_x); out: (B, M, M) bf16."""
    nb, M, K = X.shape
    if add_x and M != K:
        raise ValueError(f"sym_product: adding X needs a square X, got {tuple(X.shape)}")

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK"]) ** 2, nb)

    _sym_product_kernel[grid](X, out, M, K, *X.stride(), *out.stride(), alpha, beta, ADD_X=add_x)
    return out


def orthogonalizer(coeffs: tuple[float, float, float], norm_eps: float) -> Callable[[Tensor, int], Tensor]:
    """newton_schulz.orthogonalize_torch's iteration with newton_schulz's coefficients (a, b, c) and norm_eps,
    passed in: this module imports nothing of train/. They are closure constants, as module globals would be, so
    torch.compile bakes them into the graph rather than taking them as inputs."""
    a, b, c = coeffs

    def orthogonalize(G: Tensor, steps: int = 5) -> Tensor:
        """G: (..., rows, cols) on CUDA -> bf16, same shape."""
        tall = G.size(-2) > G.size(-1)
        X = G.bfloat16().reshape(-1, *G.shape[-2:])  # (B, rows, cols)
        if tall:
            X = X.mT
        X = (X / (X.norm(dim=(-2, -1), keepdim=True) + norm_eps)).contiguous()  # (B, m, n), m <= n
        A = X.new_empty(X.shape[0], X.shape[1], X.shape[1])  # (B, m, m)
        B = torch.empty_like(A)  # (B, m, m)
        Y = torch.empty_like(X)  # (B, m, n)
        for _ in range(steps):
            sym_product(X, A)  # A = X Xᵀ
            sym_product(A, B, alpha=c, beta=b, add_x=True)  # B = cA² + bA (A is symmetric: A² = A Aᵀ)
            torch.baddbmm(X, B, X, beta=a, alpha=1.0, out=Y)  # Y = aX + BX
            X, Y = Y, X
        return (X.mT if tall else X).reshape(G.shape)

    return orthogonalize
