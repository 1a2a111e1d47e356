"""QK-norm, rotary and the value mix as one Triton pass each way that Inductor can see (issue 41, levers 2 and 9).

    from train.qk_rope import attention_inputs
    q, k, v, rstd = attention_inputs(qkv, ve, sa, cos, sin)   # the QKV projection (T, 3H, hd) bf16 -> q, k, v

The record's attention takes q, k and v as chunks of one QKV projection, normalises q and k (F.rms_norm over each
head's channels), rotates them (RoPE on channel pairs i, i + hd/2; cos, sin (>= T, hd/2)) and mixes the values,
v = λ₀·v + λ₁·ve. An earlier form (issue 28, in git history before it) wrapped hand kernels for QK-norm and rotary
in an opaque custom op: the kernels alone were faster than the compiled record (0.394 against 0.556 ms per layer
forward + backward) but the op measured 0.607 and 4 ms per step slower end to end. Here both directions are
`torch.library.triton_op`s, whose kernels Inductor traces into its own graph (wrap_triton) instead of calling
around an opaque boundary. Measured end to end at world size 1 on an H200 (train/BENCHMARKS.md): QK-norm and
rotary alone, 4.0 ms per step faster (lever 2, 2026-12-03); with the value mix and the projection's gradient
written whole by the backward kernel, 7.8 ms per step faster again (lever 9, 2026-12-04). The arithmetic is the
compiled record's: float32 statistics, the normalised row rounded to bf16 (F.rms_norm's output dtype), the
rotation and the mix in float32 rounded once; the backward in float32, rounded once. CPU tensors, and anything but
bf16, take the `reference*` functions (torch), which the kernels are checked against (tests/test_train_qk_rope.py,
on the CPU in Triton's interpreter); the model calls the op only where the kernels run (train/xent_triton.py's
`runs_triton`).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torch.library import triton_op, wrap_triton

from train.xent_triton import runs_triton

EPS = torch.finfo(torch.float32).eps  # F.rms_norm's default eps for bf16 input (its float32 opmath)
# rows (token, head) per program, and warps: issue 28's two-plane kernels chose 4, which spill registers since the
# value mix gave each program a third plane (sm_90a: 288 local stores in the backward, 28 in the forward; none at 8).
# At 8 one layer's input side took 1.234 ms against 1.260 and a step 595.5 ms against 596.4, one pair (issue 41's
# lever 13, docs/device-runs/2026-12-04-h200-levers-13-14/)
BLOCK_R, WARPS = 64, 8


def rotary(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """The record's RoPE (train/model.py's attention): x (T, H, hd); cos, sin (>= T, hd/2) -> x rotated on channel
    pairs (i, i + hd/2), in x's dtype."""
    cos, sin = cos[: x.size(0), None, :], sin[: x.size(0), None, :]  # (T, 1, hd/2)
    x1, x2 = x.chunk(2, dim=-1)
    y1 = x1 * cos + x2 * sin
    y2 = x1 * (-sin) + x2 * cos
    return torch.cat((y1, y2), dim=-1)


def reference(q: Tensor, k: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """What the forward kernel computes: q, k (T, H, hd) contiguous in q's dtype, (T, 2H) float32 1/rms."""
    T, H = q.shape[:2]
    x = torch.cat((q, k), dim=1).float()  # (T, 2H, hd)
    rstd = torch.rsqrt(x.square().mean(-1) + EPS)  # (T, 2H)
    n = (x * rstd[..., None]).to(q.dtype).float()
    y = rotary(n, cos.float(), sin.float()).to(q.dtype)
    return y[:, :H].contiguous(), y[:, H:].contiguous(), rstd


def reference_backward(dq: Tensor, dk: Tensor, q: Tensor, k: Tensor, cos: Tensor, sin: Tensor, rstd: Tensor
                       ) -> tuple[Tensor, Tensor]:
    """What the backward kernel computes: dL/dq, dL/dk of the inputs, (T, H, hd) contiguous in q's dtype."""
    T, H = q.shape[:2]
    x = torch.cat((q, k), dim=1).float()
    dy1, dy2 = torch.cat((dq, dk), dim=1).float().chunk(2, dim=-1)
    c, s = cos[:T, None].float(), sin[:T, None].float()
    dn = torch.cat((dy1 * c - dy2 * s, dy1 * s + dy2 * c), dim=-1)  # the rotation's transpose
    r = rstd[..., None]
    xhat = x * r
    dx = (r * (dn - xhat * (dn * xhat).mean(-1, keepdim=True))).to(q.dtype)  # RMS norm's backward
    return dx[:, :H].contiguous(), dx[:, H:].contiguous()


def _same_layout(*xs: Tensor) -> tuple[Tensor, ...]:
    if all(x.stride() == xs[0].stride() for x in xs) and xs[0].stride(2) == 1:
        return xs
    return tuple(x.contiguous() for x in xs)


def _traced(kernel, fast: bool):
    """The kernel as Inductor traces it (wrap_triton); fast=False, Triton's interpreter, launches it plainly: torch
    2.11's wrap_triton refuses the interpreter's kernel objects (2.13's takes them)."""
    return wrap_triton(kernel) if fast else kernel


def launch(q: Tensor, k: Tensor, v: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor, fast: bool
           ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """The forward kernel (fast=False: the form for Triton's interpreter on CPU tensors): q, k, v (T, H, hd) views
    of the projection, ve (T, H·hd) or None -> q, k normalised and rotated, the mixed v, each (T, H, hd) contiguous,
    and (T, 2H) float32 1/rms."""
    from train.qk_rope_kernel import forward_kernel  # imports Triton: at the first launch only

    T, H, hd = q.shape
    q, k, v = _same_layout(q, k, v)
    ve = ve.reshape(T, H, hd) if ve is not None else None
    q_out, k_out, v_out = (q.new_empty(T, H, hd) for _ in range(3))
    rstd = q.new_empty(T, 2 * H, dtype=torch.float32)
    _traced(forward_kernel, fast)[(triton_cdiv(T * H, BLOCK_R), 3)](
        q, k, v, v if ve is None else ve, sa, cos, sin, q_out, k_out, v_out, rstd, T, q.stride(0), q.stride(1),
        0 if ve is None else ve.stride(0), EPS, H=H, HALF=hd // 2, BLOCK_R=BLOCK_R, FAST=fast, HAS_VE=ve is not None,
        num_warps=WARPS)
    return q_out, k_out, v_out, rstd


def launch_backward(dq: Tensor, dk: Tensor, dv: Tensor, q: Tensor, k: Tensor, v: Tensor, ve: Tensor | None,
                    cos: Tensor, sin: Tensor, rstd: Tensor, sa: Tensor, fast: bool) -> tuple[Tensor, Tensor, Tensor]:
    """The backward kernel, from dL/dq, dL/dk, dL/dv of launch's outputs: the gradient of the whole (T, 3H, hd) QKV
    projection in one tensor, QK-norm's and rotary's backward in its first two planes and λ₀·dv in its third;
    dL/dve = λ₁·dv (T, H, hd) (an empty tensor without ve); and dL/d(λ₀, λ₁) (2,) float32."""
    from train.qk_rope_kernel import backward_kernel

    T, H, hd = q.shape
    q, k, v = _same_layout(q, k, v)
    dq, dk = _same_layout(dq, dk)  # from the attention kernel's backward: read through its strides
    dv = dv if dv.stride(2) == 1 else dv.contiguous()
    ve = ve.reshape(T, H, hd).contiguous() if ve is not None else None
    blocks = triton_cdiv(T * H, BLOCK_R)
    dqkv = q.new_empty(T, 3 * H, hd)  # one tensor passed once (the kernel's docstring says why)
    dve = q.new_empty(T, H, hd) if ve is not None else dv  # without ve: dv, an input the kernel only reads
    lam_part = torch.empty(blocks, 2, dtype=torch.float32, device=q.device)
    e = v if ve is None else ve  # likewise read only
    _traced(backward_kernel, fast)[(blocks, 3)](
        dq, dk, dv, dq.stride(0), dq.stride(1), dv.stride(0), dv.stride(1), q, k, v, e, q.stride(0), q.stride(1),
        e.stride(0), cos, sin, rstd, sa, dqkv, dve, lam_part, H * hd, 3 * H * hd, T, H=H, HALF=hd // 2,
        BLOCK_R=BLOCK_R, FAST=fast, HAS_VE=ve is not None, num_warps=WARPS)
    return dqkv, dve if ve is not None else dv.new_empty(0), lam_part.sum(0)


def triton_cdiv(a: int, b: int) -> int:
    return -(-a // b)


# ---- the value mix, and the projection's gradient written whole (lever 9). Autograd would put the three gradients
# of q, k and v, chunks of one projection, together with a copy (cat) before the projection's backward: 450 MB read
# and written per layer and micro-step at the record's size, 108 µs on an H200
# (docs/device-runs/2026-12-04-h200-lever6-profile). Here the backward kernel writes dq and dk into their planes of
# that one tensor and λ₀·dv into the third; the same programs write dL/dve = λ₁·dv and sum dL/dλ, which Inductor
# otherwise does in two more passes over dv, v and ve (3.9 ms per step, 2026-12-04's second profile).

def reference_mix(v: Tensor, ve: Tensor | None, sa: Tensor) -> Tensor:
    """λ₀·v + λ₁·ve (λ₀·v without ve), (T, H, hd) contiguous in v's dtype: float32 products and sum rounded once,
    as compiled code evaluates the model's bf16 expression (eager rounds each product)."""
    y = sa[0].float() * v.float()
    if ve is not None:
        y = y + sa[1].float() * ve.reshape(v.shape).float()
    return y.to(v.dtype).contiguous()


@triton_op("repro_train::attention_inputs", mutates_args={})
def attention_inputs(qkv: Tensor, ve: Tensor | None, sa: Tensor, cos: Tensor, sin: Tensor
                     ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """qkv (T, 3H, hd) bf16 (the projection), ve (T, H·hd) or None, sa = (λ₀, λ₁) float32 -> q, k normalised and
    rotated, v = λ₀·v + λ₁·ve, each (T, H, hd) contiguous, and (T, 2H) float32 1/rms."""
    q, k, v = qkv.chunk(3, dim=1)
    if runs_triton(qkv):
        return launch(q, k, v, ve, sa, cos, sin, fast=True)
    q_out, k_out, rstd = reference(q, k, cos, sin)
    return q_out, k_out, reference_mix(v, ve, sa), rstd


def reference_mix_backward(dv: Tensor, v: Tensor, ve: Tensor | None, sa: Tensor) -> tuple[Tensor, Tensor]:
    """dL/dve = λ₁·dv rounded once, (T, H, hd) (an empty tensor without ve), and dL/d(λ₀, λ₁) = float32 sums of
    dv·v and dv·ve, (2,): what the backward kernel's third plane computes. The record's compiled graph rounds the
    sums to bf16 (autograd reduces each product in its dtype); these are within 2⁻⁸ of them."""
    g = dv.float()
    d0 = (g * v.float()).sum()
    if ve is None:
        return dv.new_empty(0), torch.stack((d0, torch.zeros_like(d0)))
    e = ve.reshape(v.shape).float()
    return (sa[1].float() * g).to(dv.dtype).contiguous(), torch.stack((d0, (g * e).sum()))


@triton_op("repro_train::attention_inputs_backward", mutates_args={})
def attention_inputs_backward(dq: Tensor, dk: Tensor, dv: Tensor, qkv: Tensor, ve: Tensor | None, cos: Tensor,
                              sin: Tensor, rstd: Tensor, sa: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """dL/dq, dL/dk, dL/dv of attention_inputs' outputs -> dL/dqkv (T, 3H, hd): QK-norm's and rotary's backward
    for the first two planes, λ₀·dv for the third; dL/dve (T, H, hd), empty without ve; dL/dsa (2,) float32."""
    q, k, v = qkv.chunk(3, dim=1)
    if runs_triton(qkv):
        return launch_backward(dq, dk, dv, q, k, v, ve, cos, sin, rstd, sa, fast=True)
    dq_in, dk_in = reference_backward(dq, dk, q, k, cos, sin, rstd)
    return (torch.cat((dq_in, dk_in, reference_mix(dv, None, sa)), dim=1), *reference_mix_backward(dv, v, ve, sa))


def _inputs_setup_context(ctx, inputs, output) -> None:
    qkv, ve, sa, cos, sin = inputs
    ctx.save_for_backward(qkv, ve, sa, cos, sin, output[3])


def _inputs_backward(ctx, dq: Tensor, dk: Tensor, dv: Tensor, _grad_rstd: Tensor):
    qkv, ve, sa, cos, sin, rstd = ctx.saved_tensors
    dqkv, dve, dsa = attention_inputs_backward(dq, dk, dv, qkv, ve, cos, sin, rstd, sa)
    return dqkv, None if ve is None else dve.view(ve.shape), dsa, None, None


attention_inputs.register_autograd(_inputs_backward, setup_context=_inputs_setup_context)
