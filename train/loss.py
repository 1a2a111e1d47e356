"""The training loss and its gradient in one forward pass (config `fused_loss`: on for the record, off on CPUs).

    from train.loss import head_loss
    loss = head_loss(rms_norm(x), model.head, targets)      # x: (T, D); scalar: cross entropy summed over T

The record's loss: logits = head(x) (bf16, FP8 matmul in training) -> float32 -> z = 30·sigmoid(logits / 7.5) ->
cross entropy, summed. Autograd keeps float32 tensors of the logits' shape for its backward pass (at the record's
micro-batch, 49,152 × 50,304 × 4 bytes = 9.9 GB each), which then writes dL/dlogits in bf16 for the head's backward
to cast to FP8: three passes over (T, V) tensors, 11.9 ms per micro-step on an H200 (train/BENCHMARKS.md, profile).
Here the forward pass computes the loss, dL/dlogits in the record's arithmetic order (below), and the head's two
backward products at once; nothing of shape (T, V) outlives it. On CUDA with the FP8 head the loss and the FP8
gradient come from two Triton passes over the logits (train/xent_triton.py, where the first pass softcaps by
tanh.approx: each row's log sum within 0.0073 of the record's); elsewhere from `loss_and_grad` below, which is also
what that module's self-check compares with. The backward pass scales the saved input and weight gradients by the
loss's gradient, which is 1 in training (the loop calls backward on the summed loss), so the result is what autograd
computes, up to the summation order of the loss.

Arithmetic order, as eager autograd and Inductor evaluate the record's expression:
  logp = (z - max z) - log(sum exp(z - max z))            log_softmax
  dL/dz = exp(logp) - onehot(target)                      log_softmax backward of the summed NLL
  dL/ds = dL/dz · 30;  dL/du = (dL/ds · (1 - s)) · s;  dL/dlogits = dL/du / 7.5    (mul, sigmoid, div backward)
"""

import torch
import torch.nn.functional as F
from torch import Tensor

from train import xent_triton
from train.fp8 import fp8_mm, fp8_mm_backward, fp8_products, fp8_products_t


def loss_and_grad(logits: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """(T, V) logits, (T,) targets -> (summed cross entropy of the softcapped logits, dL/dlogits in logits' dtype)."""
    s = torch.sigmoid(logits.float() / 7.5)  # (T, V)
    z = 30 * s
    shifted = z - z.amax(dim=-1, keepdim=True)
    logp = shifted - torch.log(torch.exp(shifted).sum(dim=-1, keepdim=True))
    loss = -logp.gather(1, targets[:, None]).sum()
    # softmax - onehot, written elementwise (a compare with the column index, no scatter) so that the compiler
    # fuses it into the pass that writes the gradient instead of materialising a float32 (T, V) tensor first
    onehot = torch.arange(logits.size(1), device=logits.device)[None, :] == targets[:, None]  # (T, V)
    grad_z = torch.exp(logp) - onehot.to(logp.dtype)
    grad = (grad_z * 30) * (1 - s) * s / 7.5
    return loss, grad.to(logits.dtype)


class _HeadLoss(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x: Tensor, weight: Tensor, targets: Tensor, fp8_scales: tuple | None, transposed: bool
                ) -> Tensor:
        if fp8_scales is not None:  # train/fp8.py's ops: the same FP8 products and casts as the unfused path
            logits, x8, w8 = fp8_mm(x, weight, *fp8_scales)
            if x.is_cuda and xent_triton.AVAILABLE:  # two Triton passes, the gradient already in FP8
                if transposed:  # pass 2 also writes dW's operand, g8 transposed
                    rows, g8, g8_t = xent_triton.softcap_xent_fp8_t(logits, targets, fp8_scales[2])
                    grad_x, grad_w = fp8_products_t(g8, g8_t, x8, w8, *fp8_scales)
                else:
                    rows, g8 = xent_triton.softcap_xent_fp8(logits, targets, fp8_scales[2])
                    grad_x, grad_w = fp8_products(g8, x8, w8, *fp8_scales)
                loss = rows.sum()
            else:
                loss, grad = loss_and_grad(logits, targets)
                grad_x, grad_w = fp8_mm_backward(grad, x8, w8, *fp8_scales)
        else:  # what autograd of F.linear(x, weight) computes
            w = weight.type_as(x)
            loss, grad = loss_and_grad(F.linear(x, w), targets)
            grad_x, grad_w = grad @ w, grad.T @ x
        ctx.save_for_backward(grad_x, grad_w)
        return loss

    @staticmethod
    def backward(ctx, grad_loss: Tensor):
        grad_x, grad_w = ctx.saved_tensors
        # autograd casts grad_w to the weight's dtype, as it does for the unfused head's float32 gradient
        return grad_x * grad_loss.to(grad_x.dtype), grad_w * grad_loss.to(grad_w.dtype), None, None, None


def head_loss(x: Tensor, head, targets: Tensor, transposed: bool = False) -> Tensor:
    """Training only: the summed loss of head(x) against targets, gradients computed in the forward pass.
    transposed (config `fused_loss_transpose`, CUDA and FP8 only): dW's transposed FP8 gradient comes from the
    loss's own second pass instead of a copy; the same values. With the Triton passes dW leaves the FP8 products
    in the weight's own layout (train/fp8.py's fp8_products): the same values."""
    scales = (head.scales["x_s"], head.scales["w_s"], head.scales["grad_s"]) if head.fp8 else None
    return _HeadLoss.apply(x, head.weight, targets, scales, transposed)
