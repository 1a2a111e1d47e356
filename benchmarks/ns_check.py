"""train/ns_triton.py's kernels checked against torch on a GPU, and timed.

    python benchmarks/ns_check.py          # prints the SelfCheck; AssertionError when the kernels disagree
    from benchmarks.ns_check import selfcheck; selfcheck(time_it=False)     (tests/test_train_optim.py, on CUDA)
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run as a file: the repo root for train/

from benchmarks.timing import time_ms  # noqa: E402
from train.newton_schulz import NORM_EPS, NS_COEFFS, orthogonalize_torch  # noqa: E402
from train.ns_triton import AVAILABLE, orthogonalizer, sym_product  # noqa: E402


@dataclass(frozen=True)
class SelfCheck:
    product_rel_err: float  # Triton X Xᵀ and cA² + bA vs fp32 torch
    ns_rel_diff: float  # Triton NS vs torch NS (both bf16; differ by rounding, amplified by NS)
    ns_ms: dict  # shape -> {"triton", "triton_compiled", "torch"}: ms per orthogonalize call


def selfcheck(time_it: bool = True) -> SelfCheck:
    """Check the kernels against torch on this GPU; raises AssertionError when they disagree."""
    if not (AVAILABLE and torch.cuda.is_available()):
        raise RuntimeError("ns_triton.selfcheck needs CUDA and Triton: run it on a GPU machine")
    gen = torch.Generator(device="cuda").manual_seed(0)
    worst = 0.0
    for shape in [(3, 768, 768), (2, 768, 3072), (1, 6, 12), (4, 100, 300)]:
        X = torch.randn(shape, device="cuda", generator=gen).bfloat16() / shape[-1] ** 0.5
        ref = X.float() @ X.float().mT
        got = sym_product(X, torch.empty_like(X[..., : X.shape[1]]))
        worst = max(worst, ((got.float() - ref).norm() / ref.norm()).item())
        A = ref.bfloat16()
        ref2 = 2.0 * A.float() @ A.float() - 4.0 * A.float()
        got2 = sym_product(A, torch.empty_like(A), alpha=2.0, beta=-4.0, add_x=True)
        worst = max(worst, ((got2.float() - ref2).norm() / ref2.norm()).item())
    assert worst < 1e-2, f"Triton symmetric products are {worst:.2e} away from fp32 torch"

    ns_diff, ms = 0.0, {}
    orthogonalize = orthogonalizer(NS_COEFFS, NORM_EPS)
    compiled = torch.compile(orthogonalize, dynamic=False)  # what newton_schulz uses on CUDA by default
    for shape in [(8, 768, 768), (2, 768, 3072), (40, 768, 768), (22, 768, 3072), (10, 6, 12), (1, 1, 12)]:
        G = torch.randn(shape, device="cuda", generator=gen)
        fast, slow = orthogonalize(G), orthogonalize_torch(G)
        ns_diff = max(ns_diff, ((fast.float() - slow.float()).norm() / slow.float().norm()).item())
        if time_it:
            ms[str(shape)] = dict(triton=time_ms(lambda G=G: orthogonalize(G)),
                                  triton_compiled=time_ms(lambda G=G: compiled(G)),
                                  torch=time_ms(lambda G=G: orthogonalize_torch(G)))
    # both paths are bf16 approximations of the same map; tests measure <= 0.077 from the exact map
    assert ns_diff < 0.1, f"Triton NS differs from torch NS by {ns_diff:.3f}"
    return SelfCheck(worst, ns_diff, ms)


if __name__ == "__main__":
    print(selfcheck())
