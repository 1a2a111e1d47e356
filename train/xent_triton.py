"""The head's loss and its FP8 gradient in two Triton passes over the logits (CUDA; config `fused_loss`).

    from train.xent_triton import softcap_xent_fp8
    rows, g8 = softcap_xent_fp8(logits, targets, grad_s)   # (T, V) bf16 logits -> (T,) float32, (T, V) e5m2
    TRITON_INTERPRET=1 python -m train.xent_triton              # the self-check, on the CPU
    python -m train.xent_triton --time                           # on a GPU: also ms per micro-step, record's shape

The record's head, loss and gradient cost one bf16 (T, V) logits tensor written by the FP8 matmul, then
compiled passes that read it, keep float32 (T, V) tensors for the backward pass, write dL/dlogits in bf16, cast
that to float8_e5m2 and copy the FP8 gradient transposed for dW's matmul (train/BENCHMARKS.md, profile: about
12 ms of each 84 ms micro-step on an H200, where one read of the logits takes 1 ms). Here:
  pass 1, one program per row: z = 30·sigmoid(logit / 7.5), the row's max and sum of exp(z - 30)
          -> the row's max, log sum exp(z - max), and its loss -logp[target];
  pass 2, one program per (rows, columns) tile: dL/dlogits in the record's arithmetic order (train/loss.py),
          rounded to bf16 as the record's autograd does, divided by grad_s and cast to float8_e5m2, row-major.
Two reads of the bf16 logits and one FP8 write; nothing of shape (T, V) in float32 exists. dW's transposed
copy of g8 (FP8 matmuls take K contiguous) is written by pass 2 from its tiles turned through shared memory
(softcap_xent_fp8_t, config `fused_loss_transpose`, on by default): 16-byte stores (train/xent_sass.py), the
path 5.14 against 6.71 ms per micro-step on an H200 where train/fp8.py's compiled products copy it
(softcap_xent_fp8, 1.98 ms of the 6.71; train/BENCHMARKS.md).
"""

from __future__ import annotations

import importlib.util

import torch
from torch import Tensor

from train.kernel_checks import steps_apart

# Whether Triton is installed, found without importing it: the kernels (train/xent_kernels.py) are imported at
# their first launch, so a process that never launches them (CPU runs) does not pay Triton's import (~0.15 s).
AVAILABLE = importlib.util.find_spec("triton") is not None
ROWS_BLOCK_V = 2048  # pass 1: columns per loop iteration
TILE_T, TILE_V = 128, 64  # pass 2: one tile per program (the fastest of six shapes tried on an H200)


def _row_stats(logits: Tensor, targets: Tensor, fast: bool | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """Pass 1: each row's max, log sum exp(z - max) and loss, float32 (T,). fast: the kernels' FAST (default:
    on CUDA); False on a GPU times the portable lowering for comparison."""
    from train.xent_kernels import row_stats_kernel  # imports Triton: at the first launch only

    T, V = logits.shape
    row_max, row_logsum, row_loss = (logits.new_empty(T, dtype=torch.float32) for _ in range(3))
    row_stats_kernel[(T,)](logits, targets, row_max, row_logsum, row_loss, logits.stride(0),
                           V=V, BLOCK_V=ROWS_BLOCK_V, FAST=logits.is_cuda if fast is None else fast, num_warps=8)
    return row_max, row_logsum, row_loss


def _grad(logits: Tensor, targets: Tensor, row_max: Tensor, row_logsum: Tensor, grad_s: float,
          out_dtype: torch.dtype, fast: bool | None = None, transposed: bool = False,
          tile: tuple[int, int, int] = (TILE_T, TILE_V, 4)) -> tuple[Tensor, Tensor | None]:
    """Pass 2: dL/dlogits / grad_s in out_dtype, (T, V) row-major, and with transposed the same (V, T) row-major.
    fast=False: portable, every element masked. tile: rows, columns and warps per program (--time tries others)."""
    from train.xent_kernels import grad_kernel

    T, V = logits.shape
    tile_t, tile_v, warps = tile
    out = logits.new_empty(T, V, dtype=out_dtype)
    out_t = logits.new_empty(V, T, dtype=out_dtype) if transposed else None
    grid = (-(-T // tile_t), -(-V // tile_v))
    grad_kernel[grid](logits, targets, row_max, row_logsum, out, out if out_t is None else out_t, T, V,
                      logits.stride(0), grad_s, BLOCK_T=tile_t, BLOCK_V=tile_v,
                      EVEN=fast is not False and T % tile_t == 0 and V % tile_v == 0,
                      FAST=logits.is_cuda if fast is None else fast, TRANSPOSED=transposed, num_warps=warps)
    return out, out_t


def _launch(logits: Tensor, targets: Tensor, grad_s: float, out_dtype: torch.dtype, transposed: bool = False
            ) -> tuple[Tensor, Tensor, Tensor | None]:
    if logits.stride(1) != 1 or not targets.is_contiguous():
        raise ValueError("softcap_xent_fp8 needs row-major logits and contiguous targets")
    row_max, row_logsum, row_loss = _row_stats(logits, targets)
    return row_loss, *_grad(logits, targets, row_max, row_logsum, grad_s, out_dtype, transposed=transposed)


@torch.library.custom_op("repro_train::softcap_xent_fp8", mutates_args=())
def softcap_xent_fp8(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor]:
    """(T, V) bf16 logits, (T,) int64 targets -> per-row loss (T,) float32, g8 = dL/dlogits / grad_s (T, V) e5m2."""
    if not AVAILABLE:
        raise RuntimeError("softcap_xent_fp8 needs Triton")
    return _launch(logits, targets, grad_s, torch.float8_e5m2)[:2]


@softcap_xent_fp8.register_fake
def _(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor]:
    T, V = logits.shape
    return logits.new_empty(T, dtype=torch.float32), logits.new_empty(T, V, dtype=torch.float8_e5m2)


@torch.library.custom_op("repro_train::softcap_xent_fp8_t", mutates_args=())
def softcap_xent_fp8_t(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    """softcap_xent_fp8, and g8 transposed (V, T) row-major from the same pass (config `fused_loss_transpose`)."""
    if not AVAILABLE:
        raise RuntimeError("softcap_xent_fp8_t needs Triton")
    return _launch(logits, targets, grad_s, torch.float8_e5m2, transposed=True)


@softcap_xent_fp8_t.register_fake
def _(logits: Tensor, targets: Tensor, grad_s: float) -> tuple[Tensor, Tensor, Tensor]:
    T, V = logits.shape
    e5m2 = torch.float8_e5m2
    return (logits.new_empty(T, dtype=torch.float32), logits.new_empty(T, V, dtype=e5m2),
            logits.new_empty(V, T, dtype=e5m2))


def selfcheck(device: str, shapes=((200, 300), (256, 192), (5, 5000), (3, 4096)), grad_s: float = 1 / 448) -> dict:
    """The kernels against the record's expression in torch (train/loss.py) on random logits.

    Raises AssertionError where they disagree. Tolerances, and why they hold:
    - the loss to 1e-5 relative: float32 sums in another order, shifted by 30 instead of the row's max;
    - the gradient before its FP8 cast (float32 output, any device; the Triton interpreter's FP8 casts do not
      round as GPUs do): bf16-rounded dL/dlogits equal but where exp or sigmoid differ by an ulp and the bf16
      rounding flips, at most 1 % of elements, each one bf16 step (2^-7 relative);
    - on a GPU, the FP8 output: equal to torch's cast of the same bf16 gradient (divided in float32, as the
      record's compiled backward does) but for the flips above carried through, one e5m2 step each;
    - the transposed output (fused_loss_transpose): exactly the row-major output, transposed.
    """
    from train.loss import loss_and_grad

    gen = torch.Generator(device=device).manual_seed(0)
    report = {}
    for T, V in shapes:
        # the record's logits span about ±20 at initialisation and wider in training: both softcap tails
        logits = (torch.randn(T, V, device=device, generator=gen) * 12).bfloat16()
        targets = torch.randint(0, V, (T,), device=device, generator=gen)
        loss_ref, grad_ref = loss_and_grad(logits, targets)  # grad in bf16, as the record's autograd hands it on
        want = grad_ref.float() / grad_s  # what the record's compiled backward casts to e5m2
        rows, got, got_t = _launch(logits, targets, grad_s, torch.float32, transposed=True)
        assert torch.equal(got_t, got.T), f"the transposed gradient is not the gradient transposed ({T}x{V})"
        loss_err = abs(rows.sum().item() - loss_ref.item()) / abs(loss_ref.item())
        assert loss_err < 1e-5, f"loss {rows.sum().item()} vs {loss_ref.item()} ({T}x{V})"
        # compared unscaled, where the bf16 grid is: one flip is one bf16 step of dL/dlogits
        flips = steps_apart(got * grad_s, grad_ref.float(), mantissa_bits=7, min_exponent=-126,
                            what=f"dL/dlogits ({T}x{V})")
        entry = dict(loss_rel_err=loss_err, bf16_flips=flips)
        if device == "cuda":
            _, g8 = softcap_xent_fp8(logits, targets, grad_s)
            _, g8_again, g8_t = softcap_xent_fp8_t(logits, targets, grad_s)
            assert torch.equal(g8_again.view(torch.uint8), g8.view(torch.uint8)), f"g8 with g8_t ({T}x{V})"
            assert torch.equal(g8_t.view(torch.uint8), g8.view(torch.uint8).T), f"g8_t is not g8.T ({T}x{V})"
            entry["fp8_flips"] = steps_apart(g8.float(), want.to(torch.float8_e5m2).float(), mantissa_bits=2,
                                             min_exponent=-14, what=f"g8 ({T}x{V})")
        report[f"{T}x{V}"] = entry
    return report


def time_record_shape(T: int = 49152, V: int = 50304, grad_s: float = 1 / 448, device: str = "cuda",
                      reps: int = 10) -> dict:
    """ms for one micro-step's loss, gradient and FP8 casts at the record's shape: the record's expression,
    compiled as its program compiles it (forward and backward through AOTAutograd, the casts in its compiled
    backward op), against these kernels; then the kernels' path by part (pass 1, pass 2, dW's transposed copy)
    beside one bf16 read of the logits, the memory-bound floor each pass is measured against, each pass again
    in its portable form, and the path with pass 2 writing the transposed copy itself (fused_loss_transpose).
    device="cpu" (small T and V, Triton's interpreter, TORCHDYNAMO_DISABLE=1) is the CI's smoke run of this code."""
    from train import timing

    def time_ms(fn) -> float:
        return timing.time_ms(fn, reps, device)

    logits = (torch.randn(T, V, device=device) * 12).bfloat16().requires_grad_()
    targets = torch.randint(0, V, (T,), device=device)
    loss = torch.compile(lambda x: torch.nn.functional.cross_entropy(30 * torch.sigmoid(x.float() / 7.5), targets,
                                                                      reduction="sum"))
    casts = torch.compile(lambda g: (lambda g8: (g8, g8.T.contiguous()))(g.div(grad_s).to(torch.float8_e5m2)))
    transpose = torch.compile(lambda g8: g8.T.contiguous())  # dW's operand, in train/fp8.py's compiled products

    def record_path() -> tuple[Tensor, Tensor]:
        logits.grad = None
        loss(logits).backward()
        return casts(logits.grad)

    def triton_path() -> tuple[Tensor, Tensor]:
        rows, g8 = softcap_xent_fp8(logits.detach(), targets, grad_s)
        return rows.sum(), transpose(g8)

    def triton_transposed_path() -> tuple[Tensor, Tensor]:  # fused_loss_transpose
        rows, _, g8_t = softcap_xent_fp8_t(logits.detach(), targets, grad_s)
        return rows.sum(), g8_t

    # where the Triton path's time goes, and what the memory alone would allow: one read of the bf16 logits
    # (a bf16 sum; pass 1 reads them once, pass 2 once more and writes one byte per element)
    x = logits.detach()
    stats = _row_stats(x, targets)
    g8, _ = _grad(x, targets, stats[0], stats[1], grad_s, torch.float8_e5m2)

    def pass2(tile=(TILE_T, TILE_V, 4), transposed=False, fast=None):
        return lambda: _grad(x, targets, stats[0], stats[1], grad_s, torch.float8_e5m2, fast, transposed, tile)

    parts = dict(pass1_ms=time_ms(lambda: _row_stats(x, targets)),
                 pass2_ms=time_ms(pass2()),
                 # pass 2 writing dW's transposed operand too (fused_loss_transpose), against pass2 + transpose
                 pass2_transposed_ms=time_ms(pass2(transposed=True)),
                 transpose_ms=time_ms(lambda: transpose(g8)),
                 read_logits_ms=time_ms(lambda: x.sum()),
                 # the same passes in the interpreter's portable form (the compiler's default exp and division,
                 # every element masked): what FAST and EVEN buy, train/xent_sass.py counting the instructions
                 pass1_portable_ms=time_ms(lambda: _row_stats(x, targets, fast=False)),
                 pass2_portable_ms=time_ms(pass2(fast=False)))
    # pass 2's tile was chosen when the pass was bound by other work (train/BENCHMARKS.md): the shapes around
    # it, with and without the transposed store, so that the next choice is measured (V = 50,304 = 393 x 128)
    tiles = {f"{t}x{v}w{w}{'_t' if tr else ''}": time_ms(pass2((t, v, w), tr))
             for t, v, w in ((128, 64, 4), (64, 128, 4), (128, 128, 8), (64, 64, 4), (256, 64, 8), (128, 64, 8))
             for tr in (False, True)}
    return dict(record_compiled_ms=time_ms(record_path), triton_ms=time_ms(triton_path),
                triton_transposed_ms=time_ms(triton_transposed_path), **parts, pass2_tiles_ms=tiles)


if __name__ == "__main__":
    from train.kernel_checks import main

    main(selfcheck, time_record_shape)
