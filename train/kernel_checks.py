"""What train/'s kernel self-checks share (train/xent_triton.py, train/qk_rope.py, train/relu2_mlp.py): how far
a kernel's rounded output may sit from its torch form, and how its gradients compare with the truth.

    from train.kernel_checks import steps_apart, gradients, against_truth
    frac = steps_apart(got, want, mantissa_bits=7, min_exponent=-126, what="h")     # bf16, one step
    report = against_truth(("dx",), truth=gradients(f, xs, ups, True), record=..., ours=...)
    main(selfcheck, time_record_shape)      # a kernel module's `python -m`: the self-check, then --time's report

Each raises AssertionError naming the tensor and the distance when a check fails.
"""

from __future__ import annotations

import sys

import torch
from torch import Tensor


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


def gradients(fn, inputs: list[Tensor], ups: list[Tensor], float64: bool) -> list[Tensor]:
    """Gradients of <fn(*inputs), ups> (fn returns a tuple of outputs, one per up) for every input, as float64;
    float64: the inputs in float64 too (the truth), else in their own dtype (what a program computes)."""
    xs = [x.to(torch.float64 if float64 else x.dtype, copy=True).requires_grad_() for x in inputs]
    outs = fn(*xs)
    torch.autograd.backward(list(outs), [u.to(o.dtype) for o, u in zip(outs, ups)])
    return [x.grad.double() for x in xs]


def against_truth(names, truth: list[Tensor], record: list[Tensor], ours: list[Tensor]) -> dict:
    """Each gradient's relative L2 error from the truth, ours against the record's own: ours may be at most 2 %
    above the record's, plus 1e-3 (the same bf16 roundings in other places). -> {name_rel_err,
    name_record_rel_err}."""
    report = {}
    for name, t, r, o in zip(names, truth, record, ours):
        err, record_err = (((g - t).norm() / t.norm()).item() for g in (o, r))
        assert err <= 1.02 * record_err + 1e-3, f"{name} error {err:.2e} against the record's {record_err:.2e}"
        report[f"{name}_rel_err"], report[f"{name}_record_rel_err"] = err, record_err
    return report


def main(selfcheck, time_record_shape) -> None:
    """`python -m train.<kernel module> [--time]`: the self-check on the GPU (the CPU without one), then with
    --time the timing report at the record's shape."""
    print(selfcheck("cuda" if torch.cuda.is_available() else "cpu"))
    if "--time" in sys.argv[1:]:
        print(time_record_shape())
