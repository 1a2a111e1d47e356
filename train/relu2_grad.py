"""The MLP with ReLU²'s backward in the epilogue of the GEMM that makes its input (issue 41, lever 1).

    from train.relu2_grad import record_mlp, relu2_mlp
    y = relu2_mlp(x, fc, proj)   # x (T, D), fc and proj (D, 4D) in x's dtype -> (T, D): train/model.py's MLP
    y = record_mlp(x, fc, proj)  # the record's expression: the same forward; the model's choice off Triton

Forward: the model's expression, pre = x·fc, h = relu(pre)², y = h·projᵀ, with pre and h saved. Backward:
grad_pre = 2·relu(pre)·(grad_y·proj) from one persistent Triton GEMM whose epilogue does the elementwise work
(train/relu2_grad_kernel.py), where the record's graph writes grad_h, then reads it and pre back in a separate pass;
then grad_x, grad_fc and grad_proj by torch's matmuls. On one H200, one layer at the record's shape, the fused
backward gave the unfused bits and took 0.481 against 0.538 ms (benchmarks/relu2_gemm.py); end to end at world
size 1, 606.0 against 613.8 ms per step, ratio 0.987 (4 + 4 runs, benchmarks/lever_ab.sh, 2026-12-03; see
train/BENCHMARKS.md), so the model uses it wherever it runs Triton (CUDA, bf16), with no switch. The kernel runs
on CUDA with bf16 and Triton; elsewhere `relu2_grad` is `reference`, the same arithmetic in torch. So is it for a
shape whose kernel does not fit the GPU's shared memory: with a single K block (model_dim 64) the compiled kernel
needs 278,568 bytes where an H100 or H200 gives a program 232,448, at 128 or more it needs 213,016 (compiled for
sm_90a on any machine: tests/test_train_relu2_grad.py), and smaller GPUs give less.

Levers 15 and 16, the forward's y = h·projᵀ by a Triton GEMM that squares each pre tile as it loads it, were deleted:
lever 15 (h written by the backward kernel's epilogue) measured 1.0069 end to end (2026-12-04); lever 16 (h stored
from the forward's registers) computed wrong values at the record's shape and trained to a final loss of 7.80-7.89
where the base gave 4.34-4.36 (one H100, 2026-12-05, docs/device-runs/2026-12-05-h100-lever16/).

Lever 17, the backward kernel on 128 × 128 tiles, one program per tile and two an SM so that one's epilogue would
run beside the other's GEMM, measured 1.0011 end to end against this persistent kernel (3 + 3 runs on one H200,
2026-12-05, docs/device-runs/2026-12-05-h200-lever17/) and was deleted.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from train.xent_triton import runs_triton

# BLOCK_M, BLOCK_N, BLOCK_K: the fastest of four shapes (benchmarks/relu2_gemm.py). 128 × 128 tiles with 4 stages
# and the loops flattened were 4 % faster alone and no faster end to end (lever 12, 2026-12-04, train/BENCHMARKS.md)
TILE = (128, 256, 64)
STAGES, WARPS, GROUP_M = 3, 8, 8
# (op, M, N, K) for which Triton refused the kernel at its first launch (OutOfResources:
# before anything ran); each is asked once per process, then goes straight to the torch form
NO_FIT: set[tuple] = set()


def reference(grad_y: Tensor, proj: Tensor, pre: Tensor) -> Tensor:
    """2·relu(pre)·grad_h, grad_h = grad_y·proj rounded to pre's dtype, the product in float32 rounded once."""
    grad_h = (grad_y @ proj).float()
    return (2 * F.relu(pre.float()) * grad_h).to(pre.dtype)


def launch(grad_y: Tensor, proj: Tensor, pre: Tensor, programs: int, tile: tuple[int, int, int] = TILE,
           stages: int = STAGES, warps: int = WARPS) -> Tensor:
    """The backward kernel: programs > 0 persistent on that many programs, 0 one program per tile (the
    interpreter's)."""
    from triton.tools.tensor_descriptor import TensorDescriptor

    from train.relu2_grad_kernel import relu2_grad_kernel  # imports Triton: at the first launch only

    (M, K), N = grad_y.shape, proj.size(1)
    bm, bn, bk = tile
    grad_y, proj, pre = grad_y.contiguous(), proj.contiguous(), pre.contiguous()
    out = torch.empty_like(pre)
    grid, persistent = programs_for(M, N, bm, bn, programs)
    descs = (TensorDescriptor.from_tensor(grad_y, [bm, bk]), TensorDescriptor.from_tensor(proj, [bk, bn]),
             TensorDescriptor.from_tensor(pre, [bm, bn]), TensorDescriptor.from_tensor(out, [bm, bn]))
    relu2_grad_kernel[grid](*descs, M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                            NUM_PROGRAMS=persistent, num_stages=stages, num_warps=warps)
    return out


def programs_for(M: int, N: int, bm: int, bn: int, programs: int) -> tuple[tuple[int], int]:
    """(grid, NUM_PROGRAMS) for an (M, N) output in (bm, bn) tiles: persistent on min(programs, tiles) programs,
    or one program per tile for 0."""
    tiles = -(-M // bm) * -(-N // bn)
    persistent = min(programs, tiles)
    return (persistent or tiles,), persistent


def triton_or_reference(key: tuple, on: Tensor, kernel, reference_fn):
    """kernel(SMs) where Triton runs on `on` and the key (op, shape) has not been refused, else reference_fn()."""
    if runs_triton(on) and key not in NO_FIT:
        from triton.runtime.errors import OutOfResources

        try:
            return kernel(torch.cuda.get_device_properties(on.device).multi_processor_count)
        except OutOfResources:
            NO_FIT.add(key)
    return reference_fn()


@torch.library.custom_op("repro_train::relu2_grad", mutates_args=())
def relu2_grad(grad_y: Tensor, proj: Tensor, pre: Tensor) -> Tensor:
    """grad_y (T, D), proj (D, 4D), pre (T, 4D) -> dL/dpre (T, 4D) in pre's dtype (module docstring)."""
    return triton_or_reference(("relu2_grad", grad_y.size(0), proj.size(1), grad_y.size(1)), pre,
                               lambda sms: launch(grad_y, proj, pre, sms), lambda: reference(grad_y, proj, pre))


@relu2_grad.register_fake
def _(grad_y: Tensor, proj: Tensor, pre: Tensor) -> Tensor:
    return torch.empty_like(pre, memory_format=torch.contiguous_format)


def record_mlp(x: Tensor, fc: Tensor, proj: Tensor) -> Tensor:
    """The record's expression: x (T, D), fc and proj (D, 4D) in x's dtype -> (T, D), h = relu(x·fc)², y = h·projᵀ."""
    h = F.relu(F.linear(x, fc.T)).square()  # (T, 4D)
    return F.linear(h, proj)


class _Relu2MLP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, fc: Tensor, proj: Tensor) -> Tensor:
        pre = F.linear(x, fc.T)  # (T, 4D), the model's expression
        h = F.relu(pre).square()
        ctx.save_for_backward(x, fc, proj, pre, h)
        return F.linear(h, proj)  # (T, D)

    @staticmethod
    def backward(ctx, grad_y: Tensor):
        x, fc, proj, pre, h = ctx.saved_tensors
        grad_pre = relu2_grad(grad_y, proj, pre)  # (T, 4D)
        return grad_pre @ fc.T, x.T @ grad_pre, grad_y.T @ h


def relu2_mlp(x: Tensor, fc: Tensor, proj: Tensor) -> Tensor:
    return _Relu2MLP.apply(x, fc, proj)
