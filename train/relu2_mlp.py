"""The MLP, relu(x·fc)²·projᵀ, with ReLU²'s elementwise work in its matmuls' epilogues (CUDA; config `fused_mlp`).

    from train.relu2_mlp import relu2_mlp
    y = relu2_mlp(x, fc, proj)[0]              # (T, D) bf16, fc and proj (D, 4D) bf16 -> (T, D)
    TRITON_INTERPRET=1 python -m train.relu2_mlp   # the self-check, on the CPU
    python -m train.relu2_mlp --time               # on a GPU: also ms per layer at the record's shape

Compiled, the record's MLP runs cuBLAS for its matmuls and Inductor kernels between them: forward, one that
reads h = x·fc (T × 4D) and writes a = relu(h)²; backward, one that reads dL/da and h and writes dL/dh. At the
record's micro-batch each such pass moves 0.3 GB, and on an H200 the two kernels took 30 ms per step
(train/BENCHMARKS.md, profile of 2026-12-01) beside 322 ms of matmuls. Here the matmul that makes h also writes
a, and the matmul that makes dL/da (dy·proj) writes dL/dh instead: both kernels vanish, and what remains of
their traffic (a's write, h's read) overlaps the matmuls' arithmetic. The other three matmuls of the backward
pass (dL/dx, dL/dfc, dL/dproj) and the forward's a·projᵀ stay with cuBLAS.

The fused matmul is Triton's. Its tile shape is chosen on the first call per problem shape by timing the
candidates in CONFIGS (a few ms, once per process); `--time` prints every candidate's time beside cuBLAS's
plain matmul of the same shape, the floor the epilogue must stay near.

Measured (train/BENCHMARKS.md, 2026-12-01, one H200, one layer at the record's shape): the best tile, 128 × 256
× 64 with 8 warps and 4 stages, took 0.431 ms forward and 0.446 backward where cuBLAS's plain x·fc takes 0.342.
The ReLU² passes are gone, but the slower matmul pays for them: the MLP took 2.150 ms forward and backward
against the compiled record's 2.154. So the option is off. To gain, the matmul would have to come within
~0.05 ms of cuBLAS: CONFIGS has since gained the kernel's persistent form (TMA loads, the epilogue overlapping the
next tile's loads), not yet timed on a GPU.

On the CPU, and for any dtype but bf16, both directions are `reference_up`, `reference_dh` and `backward_from_dh`
below (torch), so the op and its autograd wiring run in every CPU test that turns the option on.
"""

from __future__ import annotations

import functools
import os

import torch
import torch.nn.functional as F
from torch import Tensor

from train.xent_triton import AVAILABLE

# candidates for the fused matmul, (BLOCK_M, BLOCK_N, BLOCK_K, warps, pipeline stages, persistent): tile shapes
# that keep Hopper's tensor cores fed at K = 768 with at most ~200 KB of shared memory, in either kernel form
# (train/relu2_mlp_kernel.py: persistent = one program per SM, TMA loads, the epilogue overlapping the next tile)
CONFIGS = ((128, 256, 64, 8, 3, False), (128, 256, 64, 8, 4, False), (256, 128, 64, 8, 3, False),
           (128, 128, 64, 4, 4, False), (128, 128, 64, 8, 4, False),
           (128, 256, 64, 8, 3, True), (128, 256, 64, 8, 4, True), (128, 128, 64, 8, 4, True),
           (128, 128, 64, 4, 4, True))
INTERPRETED = ((64, 128, 64, 4, 2, False), (64, 128, 64, 4, 2, True))  # what the CPU checks run, one per form
GROUP_M = 8
_chosen: dict[tuple, tuple] = {}  # (M, N, K, backward) -> the fastest config measured in this process


def record_expression(x: Tensor, fc: Tensor, proj: Tensor) -> Tensor:
    """The record's MLP (train/model.py without the option): x (T, D), fc and proj (D, 4D) -> (T, D)."""
    return F.linear(F.relu(F.linear(x, fc.T)).square(), proj)


# ---- torch forms: the CPU implementation, and what the kernel is checked against ---------------------------------

def reference_up(x: Tensor, fc: Tensor) -> tuple[Tensor, Tensor]:
    """h = x·fc and a = relu(h)² (T, 4D), each in x's dtype (the pointwise work in float32)."""
    h = (x.float() @ fc.float()).to(x.dtype)
    return h, F.relu(h.float()).square().to(x.dtype)


def reference_dh(dy: Tensor, proj: Tensor, h: Tensor) -> Tensor:
    """dL/dh = dL/da · 2·relu(h), dL/da = dy·proj rounded to h's dtype (the matmul's output), in float32 after."""
    da = (dy.float() @ proj.float()).to(h.dtype)
    return (da.float() * 2 * F.relu(h.float())).to(h.dtype)


def backward_from_dh(dy: Tensor, dh: Tensor, x: Tensor, fc: Tensor, a: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The three plain matmuls of the backward pass: dL/dx (T, D), dL/dfc (D, 4D), dL/dproj (D, 4D)."""
    return dh @ fc.T, x.T @ dh, dy.T @ a


# ---- the fused matmul --------------------------------------------------------------------------------------------

def _fits(a: Tensor, b: Tensor) -> bool:
    """The kernel serves bf16 on CUDA at shapes its tiles divide (the record's: K = 768, N = 3072)."""
    return (AVAILABLE and a.is_cuda and a.dtype == b.dtype == torch.bfloat16 and b.size(1) % 256 == 0
            and a.size(1) % 64 == 0 and a.stride(1) == 1 and b.stride(1) == 1)


@functools.cache
def _programs(device: torch.device) -> int:
    """The persistent kernel's program count on this device (its SMs; 4 in the interpreter), set up once: the
    kernel builds its TMA descriptors on the device, in global scratch memory that Triton asks this allocator for."""
    import triton

    triton.set_allocator(lambda size, _alignment, _stream: torch.empty(size, dtype=torch.int8, device=device))
    return torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else 4


def _launch(a: Tensor, b: Tensor, aux: Tensor | None, config: tuple, fast: bool) -> tuple[Tensor, Tensor | None]:
    """a (M, K) · b (K, N); aux (M, N) = h for the backward epilogue, None for the forward's."""
    from train import relu2_mlp_kernel as kernels  # imports Triton: at the first launch only

    (M, K), N = a.shape, b.size(1)
    block_m, block_n, block_k, warps, stages, persistent = config
    out = a.new_empty(M, N)
    out2 = a.new_empty(M, N) if aux is None else None
    tensors = (a, b, aux if aux is not None else out, out, out2 if out2 is not None else out)
    shared = dict(K=K, BACKWARD=aux is not None, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=GROUP_M,
                  FAST=fast, num_warps=warps, num_stages=stages)
    tiles = -(-M // block_m) * (N // block_n)
    if persistent:
        programs = min(tiles, _programs(a.device))
        kernels.matmul_relu2_persistent_kernel[(programs,)](*tensors, a.stride(0), b.stride(0), M=M, N=N,
                                                           PROGRAMS=programs, **shared)
    else:
        kernels.matmul_relu2_kernel[(tiles,)](*tensors, M, N, a.stride(0), b.stride(0), **shared)
    return out, out2


def _config(a: Tensor, b: Tensor, aux: Tensor | None) -> tuple:
    """The fastest of CONFIGS for this problem shape, timed on its first call (candidates that do not compile or
    do not fit the GPU's shared memory are skipped)."""
    key = (a.size(0), b.size(1), a.size(1), aux is not None)
    if key not in _chosen:
        from train import timing
        times = {}
        for config in CONFIGS:
            try:
                times[config] = timing.time_ms(lambda c=config: _launch(a, b, aux, c, True), reps=5)
            except Exception:  # noqa: BLE001  (Triton's OutOfResources, a compile error: not a candidate here)
                continue
        if not times:
            raise RuntimeError(f"relu2_mlp: no tile shape in CONFIGS runs at {key}; turn fused_mlp off")
        _chosen[key] = min(times, key=times.get)
    return _chosen[key]


def up(x: Tensor, fc: Tensor) -> tuple[Tensor, Tensor]:
    """h = x·fc and a = relu(h)² (T, 4D): the fused kernel where it fits, else torch."""
    if _fits(x, fc):
        return _launch(x, fc, None, _config(x, fc, None), fast=True)
    return reference_up(x, fc)


def down_backward(dy: Tensor, proj: Tensor, h: Tensor) -> Tensor:
    """dL/dh from dy (T, D): the fused kernel where it fits, else torch."""
    if _fits(dy, proj):
        return _launch(dy, proj, h, _config(dy, proj, h), fast=True)[0]
    return reference_dh(dy, proj, h)


# ---- the ops ------------------------------------------------------------------------------------------------------

@torch.library.custom_op("repro_train::relu2_mlp", mutates_args=())
def relu2_mlp(x: Tensor, fc: Tensor, proj: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """x (T, D), fc and proj (D, 4D), one dtype -> y = relu(x·fc)²·projᵀ (T, D); h and a (T, 4D), kept for the
    backward pass."""
    h, a = up(x.contiguous(), fc)
    return F.linear(a, proj), h, a


@relu2_mlp.register_fake
def _(x, fc, proj):
    T, F4 = x.size(0), fc.size(1)
    return x.new_empty(T, proj.size(0)), x.new_empty(T, F4), x.new_empty(T, F4)


@torch.library.custom_op("repro_train::relu2_mlp_backward", mutates_args=())
def relu2_mlp_backward(dy: Tensor, x: Tensor, fc: Tensor, proj: Tensor, h: Tensor, a: Tensor
                       ) -> tuple[Tensor, Tensor, Tensor]:
    """dL/dy (T, D) -> dL/dx (T, D), dL/dfc (D, 4D), dL/dproj (D, 4D)."""
    dy = dy.contiguous()
    return backward_from_dh(dy, down_backward(dy, proj, h), x.contiguous(), fc, a)


@relu2_mlp_backward.register_fake
def _(dy, x, fc, proj, h, a):
    return torch.empty_like(x), torch.empty_like(fc), torch.empty_like(proj)


def _setup_context(ctx, inputs, output) -> None:
    x, fc, proj = inputs
    ctx.save_for_backward(x, fc, proj, output[1], output[2])


def _backward(ctx, dy: Tensor, _dh: Tensor, _da: Tensor):
    return relu2_mlp_backward(dy, *ctx.saved_tensors)


relu2_mlp.register_autograd(_backward, setup_context=_setup_context)


# ---- checks and timing ----------------------------------------------------------------------------------------------

def selfcheck(device: str, shapes=((100, 64, 256), (256, 128, 512)), seed: int = 0) -> dict:
    """The fused matmul in both epilogues against `reference_up` / `reference_dh`, and the op's gradients against
    the record's expression differentiated in float64 (the truth), on random input. Shapes: (T, D, 4D).

    Raises AssertionError where they disagree. Tolerances, and why they hold:
    - h and a against torch's: float32 sums in another order, so a bf16 rounding of h flips now and then: at
      most 1 % of elements apart, h by one bf16 step (train/kernel_checks.py). a = relu(h)² follows h:
      a flip of h (δh ≤ 2^-7·h) moves h² by 2·h·δh ≤ 2^-6·a, and a's step is at least 2^-8·a, so up to 4 of
      a's steps, 5 after both sides' rounding (an H200 showed 3 on 2026-12-01, where 2 had been allowed);
    - dL/dh: a flip of dL/da (≤ 2^-7 relative) times 2·relu(h) is at most 2 of dL/dh's steps, 3 rounded;
    - the op's gradients against the truth: relative L2 error at most 2 % above what the record's own bf16
      autograd makes, plus 1e-3 (the same roundings in another place).
    """
    gen = torch.Generator(device=device).manual_seed(seed)
    return {f"{T}x{D}x{F4}": _check_shape(device, gen, T, D, F4) for T, D, F4 in shapes}


def _check_shape(device: str, gen: torch.Generator, T: int, D: int, F4: int) -> dict:
    from train.kernel_checks import against_truth, gradients, steps_apart

    def steps(got, want, what, most):
        return steps_apart(got, want, mantissa_bits=7, min_exponent=-126, what=f"{what} ({T}x{D}x{F4})",
                           max_steps=most)

    x = torch.randn(T, D, device=device, generator=gen).bfloat16()
    fc = (torch.randn(D, F4, device=device, generator=gen) / D ** 0.5).bfloat16()
    proj = (torch.randn(D, F4, device=device, generator=gen) / F4 ** 0.5).bfloat16()
    dy = torch.randn(T, D, device=device, generator=gen).bfloat16()
    entry = {}
    # the kernels themselves: on the CPU in Triton's interpreter (TRITON_INTERPRET=1), one small config of each
    # form; on a GPU every candidate
    if AVAILABLE and (device == "cuda" or os.environ.get("TRITON_INTERPRET") == "1"):
        fast = device == "cuda"
        configs = CONFIGS if fast else INTERPRETED
        h_want, a_want = reference_up(x, fc)
        dh_want = reference_dh(dy, proj, h_want)
        flips = []
        for config in configs:
            h, a = _launch(x, fc, None, config, fast)
            dh = _launch(dy, proj, h_want, config, fast)[0]
            flips += [steps(h, h_want, f"h {config}", 1), steps(a, a_want, f"a {config}", 5),
                      steps(dh, dh_want, f"dL/dh {config}", 3)]
        entry["flips"] = max(flips)
    # the op's gradients, whichever implementation it dispatches to, against float64 and the record's own
    inputs, ups = [x, fc, proj], [dy]
    entry.update(against_truth(("dx", "dfc", "dproj"),
                               truth=gradients(lambda *t: (record_expression(*t),), inputs, ups, True),
                               record=gradients(lambda *t: (record_expression(*t),), inputs, ups, False),
                               ours=gradients(lambda *t: relu2_mlp(*t)[:1], inputs, ups, False)))
    return entry


def time_record_shape(T: int = 49152, D: int = 768, reps: int = 20, device: str = "cuda") -> dict:
    """ms per layer at the record's micro-batch (49,152 tokens, D = 768): the record's MLP compiled, forward and
    forward + backward, against the op; cuBLAS's plain x·fc (the fused matmul's floor) and every tile candidate
    in both epilogues; both sides' forward + backward under the profiler (train/profile.py's per_call).
    device="cpu" (small shape, Triton's interpreter when TRITON_INTERPRET=1,
    TORCHDYNAMO_DISABLE=1) is the CI's smoke run of this code."""
    from train import timing

    x = torch.randn(T, D, device=device).bfloat16().requires_grad_()
    fc = (torch.randn(D, 4 * D, device=device) / D ** 0.5).bfloat16().requires_grad_()
    proj = (torch.randn(D, 4 * D, device=device) / (4 * D) ** 0.5).bfloat16().requires_grad_()
    dy = torch.randn(T, D, device=device).bfloat16()
    record = torch.compile(record_expression)
    fused = torch.compile(lambda *t: relu2_mlp(*t)[0])

    def step(fn):
        def run():
            x.grad = fc.grad = proj.grad = None
            fn(x, fc, proj).backward(dy)
        return run

    ms = lambda fn: timing.time_ms(fn, reps, device)  # noqa: E731
    xd, fcd, projd = x.detach(), fc.detach(), proj.detach()
    fast = device == "cuda"
    h = reference_up(xd, fcd)[0]
    tiles = {}
    for c in CONFIGS if fast else INTERPRETED:
        name = "x".join(map(str, c[:3])) + f"w{c[3]}s{c[4]}" + ("p" if c[5] else "")
        try:
            tiles[name] = (ms(lambda c=c: _launch(xd, fcd, None, c, fast)),
                           ms(lambda c=c: _launch(dy, projd, h, c, fast)))
        except Exception as e:  # noqa: BLE001  (a candidate that does not fit this GPU: reported, not fatal)
            tiles[name] = repr(e)[:80]
    forward = (lambda: record(xd, fcd, projd), lambda: fused(xd, fcd, projd))
    return dict(timing.record_and_fused(forward, (step(record), step(fused)), reps, device),
                cublas_x_fc_ms=ms(lambda: xd @ fcd), tiles_fwd_bwd_ms=tiles)


if __name__ == "__main__":
    from train.kernel_checks import main

    main(selfcheck, time_record_shape)
