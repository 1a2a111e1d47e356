"""Newton–Schulz orthogonalization for Muon (trainer.md section 3).

    from train.newton_schulz import orthogonalize
    O = orthogonalize(G)          # G: (..., rows, cols) -> O: (..., rows, cols) bf16

Five iterations of the quintic X <- aX + (bA + cA²)X with A = XXᵀ, in bf16, batched over the leading
dimensions. The coefficients (a, b, c) = (3.4445, -4.7750, 2.0315) favour speed over convergence: in exact
arithmetic each singular value s of G/‖G‖_F is mapped to f⁵(s) with f(s) = as + bs³ + cs⁵, which lands in
[0.68, 1.21] for every s >= 0.002 rather than at 1 (tests/test_train_optim.py measures this). The result is
therefore "U S' Vᵀ" with S' near one, not the exact polar factor U Vᵀ.

On CUDA, `train.ns_triton` (when Triton imports, under torch.compile) computes XXᵀ and bA + cA² with
kernels that compute one triangle of each symmetric product; `set_backend("torch")` forces the plain
torch path, which CPU tensors always take.
"""

from __future__ import annotations

import torch
from torch import Tensor

NS_COEFFS = (3.4445, -4.7750, 2.0315)
NORM_EPS = 1e-7


def orthogonalize_torch(G: Tensor, steps: int = 5) -> Tensor:
    """The reference path: bf16 matmuls. G: (..., rows, cols); returns bf16 (..., rows, cols).

    Each line rounds to bf16 once, as the record's kernels do (float32 accumulation, scaling and sum inside the
    matmul): B = bA + cA² and X <- aX + BX are single baddbmm calls (the record's own third line), not separate
    bf16 ops, whose extra roundings put the result ~3x farther from the record's (tests/test_train_vs_record.py).
    """
    if G.ndim < 2:
        raise ValueError(f"orthogonalize needs a matrix or a batch of matrices, got shape {tuple(G.shape)}")
    a, b, c = NS_COEFFS
    X = G.bfloat16()
    tall = G.size(-2) > G.size(-1)
    if tall:  # iterate on the wide orientation so A = XXᵀ is the smaller square
        X = X.mT
    # ‖X‖_F >= spectral norm, so every singular value starts in [0, 1]
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + NORM_EPS)  # (..., m, n), m <= n
    shape = X.shape
    X = X.reshape(-1, *shape[-2:])  # (B, m, n): baddbmm takes one batch dimension
    for _ in range(steps):
        A = X @ X.mT  # (B, m, m), symmetric
        B = torch.baddbmm(A, A, A.mT, beta=b, alpha=c)  # (B, m, m) = bA + cA² (A Aᵀ = A²)
        X = torch.baddbmm(X, B, X, beta=a)  # (B, m, n) = aX + BX
    X = X.reshape(shape)
    return X.mT if tall else X


BACKENDS = ("auto", "triton", "torch")
_backend = "auto"
_triton_impls: dict[str, object] = {}


def set_backend(name: str) -> None:
    """Pick the CUDA path: "auto" (compiled Triton when it imports, else torch), "triton" (eager Triton,
    required), or "torch". CPU tensors always take the torch path."""
    global _backend
    if name not in BACKENDS:
        raise ValueError(f"unknown Newton-Schulz backend {name!r}; choose one of {BACKENDS}")
    _backend = name


def _triton_impl(compiled: bool):
    """train.ns_triton's orthogonalize (optionally under torch.compile), or None without Triton."""
    key = "compiled" if compiled else "eager"
    if key not in _triton_impls:
        try:
            from train import ns_triton
        except ImportError:
            ns_triton = None
        if ns_triton is None or not ns_triton.AVAILABLE:
            _triton_impls[key] = None
        else:
            # compiling removes most launch overhead (train/BENCHMARKS.md)
            fn = ns_triton.orthogonalizer(NS_COEFFS, NORM_EPS)
            _triton_impls[key] = torch.compile(fn, dynamic=False) if compiled else fn
    return _triton_impls[key]


def orthogonalize(G: Tensor, steps: int = 5) -> Tensor:
    """G: (..., rows, cols), any float dtype -> bf16 (..., rows, cols), approximately U Vᵀ of G.

    CUDA tensors go through the symmetric Triton kernels (see set_backend); CPU tensors, and CUDA
    without Triton under "auto", use `orthogonalize_torch`.
    """
    if G.is_cuda and _backend != "torch":
        impl = _triton_impl(compiled=_backend == "auto")
        if impl is not None:
            return impl(G, steps)
        if _backend == "triton":
            raise RuntimeError("Newton-Schulz backend 'triton' was asked for but Triton does not import "
                               "here; install triton or call set_backend('auto')")
    return orthogonalize_torch(G, steps)
