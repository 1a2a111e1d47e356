"""The float32 matrices as bf16 once per optimizer step, their gradients summed in float32 (issue 41, lever 14).

    from train.step_weights import StepWeights
    copies = StepWeights([mlp.fc, mlp.proj, ...], torch.bfloat16)
    copies.refresh()                   # before each step's micro-steps: one cast of every matrix
    copies.of(mlp.fc)                  # the bf16 leaf the forward pass multiplies by
    loss.backward()                    # each copy's gradient lands in its matrix's float32 .grad

The record keeps Muon's matrices in float32 and casts each to bf16 in every micro-step's forward pass
(`w.type_as(x)`); autograd casts each bf16 dW back to float32 and adds it to .grad. At world size 1 that is 8
casts forward, 8 back and 7 float32 adds per matrix and step: 2.8 ms of casts and 2.3 ms of adds per step in the
2026-12-04 profile (train/BENCHMARKS.md, lever 14). Here the forward cast happens once per step, and each
micro-step's bf16 dW is added to .grad by one kernel that reads it as bf16 (fp32 += bf16): the same float32 sums
in the same order, so .grad is bit for bit what autograd gives, and the forward multiplies by the same bf16
values. Measured on an H200 at world size 1, three pairs of 20-step runs in two device calls: 1.7 ms per step
faster (0.997 ×) over all steps, and faster in each pair's every phase but one pair's overall median
(docs/device-runs/2026-12-04-h200-levers-13-14/; the reason to keep it, not a speed claim of its own).

The copies are leaves that require grad, not parameters: optimizers and state_dict see only the float32 matrices.
A copy's gradient lives only inside its hook, which moves it into the matrix's .grad. Refresh after every change
to the matrices (an optimizer step, load_state_dict): train/loop.py does so before each step's micro-steps.
"""

import torch
from torch import Tensor, nn


def _accumulate_into(matrix: nn.Parameter):
    def hook(copy: Tensor) -> None:
        if matrix.grad is None:
            matrix.grad = copy.grad.float()
        else:
            matrix.grad.add_(copy.grad)  # float32 += bf16: what autograd's cast then add computes, in one pass
        copy.grad = None

    return hook


class StepWeights:
    def __init__(self, matrices: list[nn.Parameter], dtype: torch.dtype):
        self.matrices = list(matrices)
        self.copies = [torch.empty_like(m, dtype=dtype, requires_grad=True) for m in self.matrices]
        self._copy_of = {id(m): c for m, c in zip(self.matrices, self.copies)}
        for matrix, copy in zip(self.matrices, self.copies):
            copy.register_post_accumulate_grad_hook(_accumulate_into(matrix))

    def refresh(self) -> None:
        """Each copy := its matrix rounded to the copies' dtype (one multi-tensor kernel)."""
        with torch.no_grad():
            torch._foreach_copy_(self.copies, self.matrices)

    def of(self, matrix: nn.Parameter) -> Tensor:
        return self._copy_of[id(matrix)]
