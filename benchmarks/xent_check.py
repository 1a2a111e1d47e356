"""train/xent_triton.py's kernels checked against the record's expression and float64, and timed at the record's shape.

    TRITON_INTERPRET=1 python benchmarks/xent_check.py   # the self-check, on the CPU (Triton's interpreter)
    python benchmarks/xent_check.py                      # on a GPU (FP8 casts checked too); exit 1 on a failure
    python benchmarks/xent_check.py --time               # then ms per micro-step at the record's shape

benchmarks/device_session.sh runs the check before native runs with fused_loss; tests/test_xent_triton.py runs
it on the CPU. Each check raises AssertionError naming the tensor and the distance when it fails.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import timing  # noqa: E402
from train.xent_triton import (  # noqa: E402
    TILE_T,
    TILE_V,
    _grad,
    _launch,
    _row_stats,
    softcap_xent_fp8,
    softcap_xent_fp8_t,
)


def steps_apart(got: Tensor, want: Tensor, mantissa_bits: int, min_exponent: int, what: str,
                max_steps: int = 1) -> float:
    """Fraction of elements apart; asserts at most 1 % are, each by at most max_steps steps of the format at its
    magnitude (min_exponent: the smallest normal exponent, below which the spacing stays fixed)."""
    got, want = got.float(), want.float()
    big = torch.maximum(got.abs(), want.abs()).clamp(min=torch.finfo(torch.float32).tiny)
    spacing = torch.exp2(torch.clamp(torch.floor(torch.log2(big)), min=min_exponent) - mantissa_bits)
    steps = (got - want).abs() / spacing
    # 1e-3 of a step: the float32 rounding of a division by grad_s and its undoing, not a flip
    frac = (steps > 1e-3).float().mean().item()
    worst = steps.max().item()
    assert frac <= 0.01 and worst <= max_steps + 0.001, f"{what}: {frac:.2%} of elements apart, up to {worst:.2f} steps"
    return frac


# pass 1 softcaps its sum by 15 + 15·tanh(x / 15); on a GPU tanh.approx's relative error 2^-11 moves each such z by
# at most 15·2^-11, and so each row's log sum (a weighted mean of the moves) by at most as much
TANH_Z_ERR = 15 * 2.0**-11


def record_row_stats(logits: Tensor) -> tuple[Tensor, Tensor]:
    """The record's row max and log sum exp(z - max) in float32, z = 30·sigmoid(logits / 7.5): pass 2's inputs as
    the record's log_softmax computes them (train/loss.py's loss_and_grad)."""
    z = 30 * torch.sigmoid(logits.float() / 7.5)
    top = z.amax(dim=-1)
    return top, torch.log(torch.exp(z - top[:, None]).sum(dim=-1))


def selfcheck(device: str, shapes=((200, 300), (256, 192), (5, 5000), (3, 4096)), grad_s: float = 1 / 448) -> dict:
    """The kernels on random logits, each against what it must equal. Raises AssertionError where one does not.

    - Pass 2 alone, given the record's row statistics: dL/dlogits (float32 output, before any FP8 cast: the
      interpreter's FP8 casts do not round as GPUs do) equal to the record's bf16 gradient (train/loss.py) but
      where exp or sigmoid differ by an ulp and the bf16 rounding flips: at most 1 % of elements, one bf16 step
      each. Its transposed output is exactly the row-major one, transposed.
    - Both passes against float64: pass 1's sum is not the record's arithmetic (15 + 15·tanh, tanh.approx on a
      GPU), so every logp of a row moves by the same d, |d| <= TANH_Z_ERR. Each row's loss may be off by d (plus
      float32 rounding), each gradient element by d times its softmax term (plus one bf16 step, the record's own
      rounding).
    - On a GPU, the FP8 outputs: the kernel's e5m2 cast equal to torch's cast of its float32 value but for
      rounding flips, one e5m2 step each; the transposed output exactly the row-major one, transposed.
    Reports, per shape, the worst row's loss error, the worst gradient element's share of its bound, and the
    fractions of flipped elements.
    """
    from train.loss import loss_and_grad

    gen = torch.Generator(device=device).manual_seed(0)
    report = {}
    for T, V in shapes:
        # the record's logits span about ±20 at initialisation and wider in training: both softcap tails
        logits = (torch.randn(T, V, device=device, generator=gen) * 12).bfloat16()
        targets = torch.randint(0, V, (T,), device=device, generator=gen)

        _, grad_record = loss_and_grad(logits, targets)  # bf16, as the record's autograd hands it on
        got, got_t = _grad(logits, targets, *record_row_stats(logits), grad_s, torch.float32, transposed=True)
        assert torch.equal(got_t, got.T), f"the transposed gradient is not the gradient transposed ({T}x{V})"
        # compared unscaled, where the bf16 grid is: one flip is one bf16 step of dL/dlogits
        flips = steps_apart(got * grad_s, grad_record.float(), mantissa_bits=7, min_exponent=-126,
                            what=f"pass 2's dL/dlogits ({T}x{V})")

        s = torch.sigmoid(logits.double() / 7.5)
        logp = torch.log_softmax(30 * s, dim=-1)  # (T, V) float64
        rows_ref = -logp.gather(1, targets[:, None])[:, 0]
        soft = torch.exp(logp) * 4 * s * (1 - s)  # the softmax term of dL/dlogits = (p - onehot)·30·s(1 - s)/7.5
        onehot = torch.zeros_like(soft).scatter_(1, targets[:, None], 1.0)
        grad_ref = soft - onehot * 4 * s * (1 - s)
        rows, grad, _ = _launch(logits, targets, grad_s, torch.float32)
        d = (rows.double() - rows_ref).abs()
        assert d.max().item() <= TANH_Z_ERR + 1e-5 * rows_ref.abs().max().item(), \
            f"a row's loss is {d.max().item():.3g} off, more than tanh's {TANH_Z_ERR:.3g} ({T}x{V})"
        err = (grad.double() * grad_s - grad_ref).abs()
        bound = TANH_Z_ERR * 1.01 * soft + 2.0**-7 * grad_ref.abs() + 1e-30
        worst = (err / bound).max().item()
        assert worst <= 1.0, f"dL/dlogits off by {worst:.2f} of its bound ({T}x{V})"
        entry = dict(row_loss_err=d.max().item(), grad_err_of_bound=worst, bf16_flips=flips)

        if device == "cuda":
            _, g8 = softcap_xent_fp8(logits, targets, grad_s)
            _, g8_again, g8_t = softcap_xent_fp8_t(logits, targets, grad_s)
            assert torch.equal(g8_again.view(torch.uint8), g8.view(torch.uint8)), f"g8 with g8_t ({T}x{V})"
            assert torch.equal(g8_t.view(torch.uint8), g8.view(torch.uint8).T), f"g8_t is not g8.T ({T}x{V})"
            entry["fp8_flips"] = steps_apart(g8.float(), grad.to(torch.float8_e5m2).float(), mantissa_bits=2,
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
                 # every element masked): what FAST and EVEN buy, benchmarks/xent_sass.py counting the instructions
                 pass1_portable_ms=time_ms(lambda: _row_stats(x, targets, fast=False)),
                 pass2_portable_ms=time_ms(pass2(fast=False)))
    # pass 2's tile was chosen when the pass was bound by other work (train/BENCHMARKS.md): the shapes around
    # it, with and without the transposed store, so that the next choice is measured (V = 50,304 = 393 x 128)
    tiles = {f"{t}x{v}w{w}{'_t' if tr else ''}": time_ms(pass2((t, v, w), tr))
             for t, v, w in ((128, 64, 4), (64, 128, 4), (128, 128, 8), (64, 64, 4), (256, 64, 8), (128, 64, 8))
             for tr in (False, True)}
    return dict(record_compiled_ms=time_ms(record_path), triton_ms=time_ms(triton_path),
                triton_transposed_ms=time_ms(triton_transposed_path), **parts, pass2_tiles_ms=tiles)


def main() -> None:
    """The self-check on the GPU (the CPU without one), then with --time the timing report."""
    device = "cuda" if torch.cuda.is_available() else "cpu"
    print(selfcheck(device))
    if "--time" in sys.argv[1:]:
        print(time_record_shape())


if __name__ == "__main__":
    main()
