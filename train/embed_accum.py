"""The embeddings' gradients summed in place over a step's micro-steps (config `embed_grad_accum`; issue 41, lever 8).

    from train.embed_accum import lookup
    x = lookup(embed.weight, inputs, grad_sum)      # (T, D), as embed(inputs); the backward adds into grad_sum
    ...                                             # after the step's last micro-step (train/model.py):
    embed.weight.grad = grad_sum.to(embed.weight.dtype); grad_sum.zero_()

Why: an embedding's backward builds a dense gradient of the whole table on every micro-step, 50,304 × 768: zeros in
float32, the rows added in, a cast to bf16, and then autograd adds that into .grad (in bf16). At world size 1 the
record's batch is 8 micro-steps, and 4 tables (the token embedding and 3 value embeddings) do this each time: the
H200 profile of 2026-12-03 (docs/device-runs/2026-12-03-h200-ops-6layer) puts the adds alone at 4 × 7 × 54 µs per
step. Here the backward adds the micro-step's rows straight into one float32 sum per table, which the model hands
to .grad once per step. The sum is float32 over the whole step (the record rounds to bf16 after each micro-step):
the same gradient up to that rounding. Under torch.compile the lookup stays in the graph (an autograd.Function
Dynamo traces); only the add is an opaque custom op, which mutates the sum in the compiled backward graph.
"""

import torch
import torch.nn.functional as F
from torch import Tensor


@torch.library.custom_op("repro_train::embed_grad_add_", mutates_args=("grad_sum",))
def embed_grad_add_(grad_sum: Tensor, inputs: Tensor, grad: Tensor) -> None:
    """grad_sum[inputs[i]] += grad[i] for every i (repeated tokens add up): (V, D) float32, (T,), (T, D)."""
    grad_sum.index_add_(0, inputs, grad.to(grad_sum.dtype))


@embed_grad_add_.register_fake
def _(grad_sum: Tensor, inputs: Tensor, grad: Tensor) -> None:
    return None


class _Lookup(torch.autograd.Function):
    @staticmethod
    def forward(ctx, weight: Tensor, inputs: Tensor, grad_sum: Tensor) -> Tensor:
        ctx.save_for_backward(inputs, grad_sum)
        return F.embedding(inputs, weight)

    @staticmethod
    def backward(ctx, grad: Tensor):
        inputs, grad_sum = ctx.saved_tensors
        embed_grad_add_(grad_sum, inputs, grad)
        return None, None, None  # the weight's gradient is in grad_sum, handed over once per step


def lookup(weight: Tensor, inputs: Tensor, grad_sum: Tensor) -> Tensor:
    """weight (V, D), inputs (T,) int, grad_sum (V, D) float32 -> weight[inputs] (T, D); backward adds into grad_sum."""
    return _Lookup.apply(weight, inputs, grad_sum)
