"""FP8 matmul for the head in training (trainer.md section 1, "FP8 head"), as opaque custom ops.

    from train.fp8 import fp8_linear
    logits = fp8_linear(x, weight, x_s=768**0.5 / 448, w_s=2**-9, grad_s=1 / 448)   # x: (T, D), weight: (V, D)

Forward: x/x_s and W/w_s to float8_e4m3fn, a scaled matmul with fast accumulation, bf16 out. Backward: g/g_s
to float8_e5m2; dx = scaled matmul(g8, W8) in bf16 and dW = scaled matmul(x8ᵀ, g8) in fp32, both without fast
accumulation. The ops are opaque to the model's torch.compile graph (custom ops with fake kernels); on CUDA
their bodies are compiled on their own so the casts and transposes fuse into few kernels.
"""

import torch
from torch import Tensor


def _forward_body(x: Tensor, w: Tensor, x_s: float, w_s: float) -> tuple[Tensor, Tensor, Tensor]:
    x8 = x.div(x_s).to(torch.float8_e4m3fn)  # (T, D)
    w8 = w.div(w_s).to(torch.float8_e4m3fn)  # (V, D)
    out = torch._scaled_mm(x8, w8.T, out_dtype=torch.bfloat16, scale_a=x.new_tensor(x_s, dtype=torch.float32),
                           scale_b=x.new_tensor(w_s, dtype=torch.float32), use_fast_accum=True)  # (T, V)
    return out, x8, w8


def _backward_body(g: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float
                   ) -> tuple[Tensor, Tensor]:
    g8 = g.div(grad_s).to(torch.float8_e5m2)  # (T, V)
    return _products_body(g8, x8, w8, x_s, w_s, grad_s)


def _products_body(g8: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float,
                   g8_t: Tensor | None = None, dw_rowmajor: bool = False) -> tuple[Tensor, Tensor]:
    """dX and dW from the FP8 gradient g8 = g / grad_s (T, V); g8_t: g8 already transposed, (V, T) row-major.
    dW comes out column-major, as the record's program computes it (x8ᵀ·g8, transposed), or with dw_rowmajor
    row-major as g8ᵀ·x8: the same products, in the weight's own layout, so that autograd accumulates it with a
    plain add instead of a strided one (about 289 against 54 µs a micro-step on an H200,
    docs/device-runs/2026-12-03-h200-ops-6layer). Issue 41's lever 6: 609.2 against 613.0 ms per step at world
    size 1, ratio 0.9939 (train/BENCHMARKS.md, 2026-12-04), so the loss's Triton path (fp8_products,
    fp8_products_t) always takes it; fp8_mm_backward, the unfused path, keeps the record's layout."""
    scale_x = x8.new_tensor(x_s, dtype=torch.float32)
    scale_w = x8.new_tensor(w_s, dtype=torch.float32)
    scale_g = x8.new_tensor(grad_s, dtype=torch.float32)
    # _scaled_mm wants its first operand row-major and its second column-major
    grad_x = torch._scaled_mm(g8, w8.T.contiguous().T, out_dtype=torch.bfloat16, scale_a=scale_g, scale_b=scale_w,
                              use_fast_accum=False)  # (T, D)
    g8_t = g8.T.contiguous() if g8_t is None else g8_t
    if dw_rowmajor:
        grad_w = torch._scaled_mm(g8_t, x8.T.contiguous().T, out_dtype=torch.float32, scale_a=scale_g,
                                  scale_b=scale_x, use_fast_accum=False)  # (V, D), row-major
    else:
        grad_w = torch._scaled_mm(x8.T.contiguous(), g8_t.T, out_dtype=torch.float32, scale_a=scale_x,
                                  scale_b=scale_g, use_fast_accum=False).T  # (V, D), column-major
    return grad_x, grad_w


_compiled: dict[str, object] = {}


def _body(name: str, fn, device: torch.device):
    if device.type != "cuda":
        return fn
    if name not in _compiled:
        _compiled[name] = torch.compile(fn, dynamic=False)
    return _compiled[name]


@torch.library.custom_op("repro_train::fp8_mm", mutates_args=())
def fp8_mm(x: Tensor, w: Tensor, x_s: float, w_s: float, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    if not (x.is_contiguous() and w.is_contiguous()):
        raise ValueError("fp8_mm needs contiguous x and w")
    return _body("forward", _forward_body, x.device)(x, w, x_s, w_s)


@fp8_mm.register_fake
def _(x: Tensor, w: Tensor, x_s: float, w_s: float, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    out = x.new_empty(x.size(0), w.size(0), dtype=torch.bfloat16)
    return out, torch.empty_like(x, dtype=torch.float8_e4m3fn), torch.empty_like(w, dtype=torch.float8_e4m3fn)


@torch.library.custom_op("repro_train::fp8_mm_backward", mutates_args=())
def fp8_mm_backward(g: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float
                    ) -> tuple[Tensor, Tensor]:
    return _body("backward", _backward_body, g.device)(g.contiguous(), x8, w8, x_s, w_s, grad_s)


def _products_fake(g: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float,
                   dw_rowmajor: bool = False) -> tuple[Tensor, Tensor]:
    """Shapes and layouts of (dX, dW): fp8_mm_backward's (the record's, dW column-major), fp8_products' (row-major)."""
    grad_x = torch.empty_like(x8, dtype=torch.bfloat16)
    if dw_rowmajor:
        return grad_x, w8.new_empty(w8.shape, dtype=torch.float32)
    grad_w = w8.new_empty(w8.size(1), w8.size(0), dtype=torch.float32).T  # column-major, like the real op
    return grad_x, grad_w


fp8_mm_backward.register_fake(_products_fake)


@torch.library.custom_op("repro_train::fp8_products", mutates_args=())
def fp8_products(g8: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float
                 ) -> tuple[Tensor, Tensor]:
    """fp8_mm_backward from a gradient already divided by grad_s and cast to float8_e5m2 (T, V); dW row-major."""
    return _body("products", _products_body, g8.device)(g8, x8, w8, x_s, w_s, grad_s, None, True)


@fp8_products.register_fake
def _(g8: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float) -> tuple[Tensor, Tensor]:
    return _products_fake(g8, x8, w8, x_s, w_s, grad_s, dw_rowmajor=True)


@torch.library.custom_op("repro_train::fp8_products_t", mutates_args=())
def fp8_products_t(g8: Tensor, g8_t: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float
                   ) -> tuple[Tensor, Tensor]:
    """fp8_products with dW's operand g8_t = g8 transposed (V, T) row-major, written by the loss's own pass."""
    return _body("products_t", _products_body, g8.device)(g8, x8, w8, x_s, w_s, grad_s, g8_t, True)


@fp8_products_t.register_fake
def _(g8: Tensor, g8_t: Tensor, x8: Tensor, w8: Tensor, x_s: float, w_s: float, grad_s: float
      ) -> tuple[Tensor, Tensor]:
    return _products_fake(g8, x8, w8, x_s, w_s, grad_s, dw_rowmajor=True)


def _setup_context(ctx, inputs, output) -> None:
    *_, x_s, w_s, grad_s = inputs
    _, x8, w8 = output
    ctx.save_for_backward(x8, w8)
    ctx.scales = (x_s, w_s, grad_s)
    ctx.set_materialize_grads(False)


def _backward(ctx, grad_out: Tensor, *_):
    x8, w8 = ctx.saved_tensors
    grad_x, grad_w = fp8_mm_backward(grad_out, x8, w8, *ctx.scales)
    return grad_x, grad_w, None, None, None  # autograd casts grad_w (fp32) to the weight's bf16


fp8_mm.register_autograd(_backward, setup_context=_setup_context)


def fp8_linear(x: Tensor, weight: Tensor, x_s: float, w_s: float, grad_s: float) -> Tensor:
    """x: (T, D) bf16, weight: (V, D) bf16 -> (T, V) bf16, differentiable in both."""
    return fp8_mm(x, weight, x_s, w_s, grad_s)[0]
