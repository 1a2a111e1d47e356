"""Newton–Schulz orthogonalization for Muon (trainer.md section 3).

    from train.newton_schulz import orthogonalize
    O = orthogonalize(G)          # G: (..., rows, cols) -> O: (..., rows, cols) bf16

Five iterations of the quintic X <- aX + (bA + cA²)X with A = XXᵀ, in bf16, batched over the leading
dimensions. The coefficients (a, b, c) = (3.4445, -4.7750, 2.0315) favour speed over convergence: in exact
arithmetic each singular value s of G/‖G‖_F is mapped to f⁵(s) with f(s) = as + bs³ + cs⁵, which lands in
[0.68, 1.21] for every s >= 0.002 rather than at 1 (tests/test_train_optim.py measures this). The result is
therefore "U S' Vᵀ" with S' near one, not the exact polar factor U Vᵀ.

On CUDA, `train.ns_triton` (when Triton imports) computes XXᵀ and bA + cA² with kernels that only
compute one triangle of the symmetric products; everywhere else the plain torch path below runs.
"""

from __future__ import annotations

import torch
from torch import Tensor

NS_COEFFS = (3.4445, -4.7750, 2.0315)
NORM_EPS = 1e-7


def orthogonalize_torch(G: Tensor, steps: int = 5) -> Tensor:
    """The reference path: plain bf16 matmuls. G: (..., rows, cols); returns bf16 (..., rows, cols)."""
    if G.ndim < 2:
        raise ValueError(f"orthogonalize needs a matrix or a batch of matrices, got shape {tuple(G.shape)}")
    a, b, c = NS_COEFFS
    X = G.bfloat16()
    tall = G.size(-2) > G.size(-1)
    if tall:  # iterate on the wide orientation so A = XXᵀ is the smaller square
        X = X.mT
    # ‖X‖_F >= spectral norm, so every singular value starts in [0, 1]
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + NORM_EPS)  # (..., m, n), m <= n
    for _ in range(steps):
        A = X @ X.mT  # (..., m, m), symmetric
        B = b * A + c * (A @ A)  # (..., m, m)
        X = a * X + B @ X  # (..., m, n)
    return X.mT if tall else X


def _triton_path():
    """train.ns_triton.orthogonalize when CUDA and Triton are usable, else None (checked once)."""
    global _TRITON_IMPL
    if _TRITON_IMPL is None:
        _TRITON_IMPL = False
        if torch.cuda.is_available():
            try:
                from train import ns_triton
            except ImportError:  # no Triton in this environment: the torch path is exact enough
                pass
            else:
                _TRITON_IMPL = ns_triton.orthogonalize if ns_triton.AVAILABLE else False
    return _TRITON_IMPL or None


_TRITON_IMPL = None


def orthogonalize(G: Tensor, steps: int = 5) -> Tensor:
    """G: (..., rows, cols), any float dtype -> bf16 (..., rows, cols), approximately U Vᵀ of G.

    CUDA tensors go through the symmetric Triton kernels when they are available; CPU tensors (and
    environments without Triton) use `orthogonalize_torch`.
    """
    if G.is_cuda:
        impl = _triton_path()
        if impl is not None:
            return impl(G, steps)
    return orthogonalize_torch(G, steps)
