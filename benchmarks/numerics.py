"""How far apart two tensors are, as the GPU checks report it (benchmarks/device_diff.py, standin_check.py)."""

import torch


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 error of a against b, in float64 (0 when equal; b = 0 counts as a tiny norm, not a crash)."""
    a, b = a.detach().double(), b.detach().double()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()
