"""The optional kernels: the one place where a part of the record's model is swapped for another implementation.

    from train.kernels import select_kernels
    kernels = select_kernels(cfg)                  # Kernels: each part the record's expression, or its swap
    loss = kernels.train_loss(rms_norm(x), head, targets)

Each part defaults to the record's own expression; OPTIONS lists every config flag that swaps one, with what it was
measured to buy (train/BENCHMARKS.md). A swap computes the same values (its tests compare it with the record's
expression) and may differ only in speed and memory; the one exception, fused_loss's first pass on a GPU
(tanh.approx, issue 41's lever 5), is checked against a float64 reference instead. An option starts off until
measured end to end (benchmarks/lever_ab.sh), then is kept without a switch or deleted; kept only where a GPU
measurement showed a gain: fused_qk_rope, fused_mlp and gemm_autotune were removed after measuring no faster or
never being measured (issue 28). Choices that depend on the machine, not the config, stay where they are made: the
attention backend (train/attention.py), Newton–Schulz's Triton kernels on CUDA (train/newton_schulz.py), and where
Triton runs, QK-norm with rotary (train/qk_rope.py) and ReLU²'s backward (train/relu2_grad.py), both levers of issue
41 that paid end to end and lost their switches (train/model.py picks them).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from train.loss import head_loss


def record_loss(x: Tensor, head, targets: Tensor, reduction: str = "sum") -> Tensor:
    """The record's head and loss: logits = head(x) in float32, soft-capped to 30·σ(logits / 7.5), cross entropy
    summed (training) or averaged (evaluation)."""
    logits = 30 * torch.sigmoid(head(x).float() / 7.5)  # (T, Vp)
    return F.cross_entropy(logits, targets, reduction=reduction)


def fused_loss(cfg) -> Callable[[Tensor, object, Tensor], Tensor]:
    """train/loss.py's head_loss with the config's choices for it (ignored off CUDA or without FP8)."""
    return functools.partial(head_loss, transposed=cfg.fused_loss_transpose)


@dataclass(frozen=True)
class Kernels:
    train_loss: Callable[[Tensor, object, Tensor], Tensor] = record_loss  # (normed x, head, targets) -> summed


# config flag -> the swap it makes. fused_loss: the loss and its gradient in the forward pass, on CUDA by
# train/xent_triton.py's two Triton passes; with it, fused_loss_transpose (config.py says what). Measurements:
# train/BENCHMARKS.md.
OPTIONS: dict[str, Callable[[Kernels, object], Kernels]] = {
    "fused_loss": lambda k, cfg: dataclasses.replace(k, train_loss=fused_loss(cfg)),
}


def select_kernels(cfg) -> Kernels:
    kernels = Kernels()
    for flag, swap in OPTIONS.items():
        if getattr(cfg, flag):
            kernels = swap(kernels, cfg)
    return kernels
