"""Run a record's program with its one-element FP8 scales handed to cuBLAS aligned (pipeline/runs/fp8_scales.py).

    torchrun --standalone --nproc_per_node=8 .../launchers/aligned_fp8_scales.py train_gpt.py [ARGS]
    torchrun ... .../launchers/aligned_fp8_scales.py .../launchers/fp32_floats.py train_gpt.py [ARGS]

torchrun starts this file in the program's place. It replaces `torch._scaled_mm` by a call that gives any
one-element scale whose address is not 16-byte aligned its own tensor first (the same value, so the same
product), then runs the next argument as `__main__` exactly as `python train_gpt.py` would: its argv, its folder
first on the path, its `__file__`. The next argument may be another launcher of this folder, which runs the
program in turn.

Why an operator and not a plain wrapper: inside `torch.compile`, inductor drops a `clone()` whose result equals
its input (a no-op to it) and hands the extern matmul the offset view again. An opaque custom operator runs its
body eagerly on real tensors, where the address is known. Its fake implementation is the original's.
"""

import os
import runpy
import sys
from typing import Optional

import torch

ORIGINAL = torch._scaled_mm
ALIGN = 16  # bytes: cuBLASLt under torch 2.11.0+cu130 refused a scale 12 bytes into its tensor, ran 0 and 16
_told = []  # the first copy, said once per process


def _aligned(scale: torch.Tensor) -> torch.Tensor:
    if scale.numel() != 1 or scale.data_ptr() % ALIGN == 0:
        return scale
    if not _told and os.environ.get("RANK", "0") == "0":
        _told.append(True)
        print(f"[repro] fp8 scales: a one-element scale {scale.storage_offset() * scale.element_size()} bytes into "
              "its tensor handed to torch._scaled_mm as its own aligned tensor (same value)", file=sys.stderr,
              flush=True)
    return scale.clone()


@torch.library.custom_op("repro::aligned_scaled_mm", mutates_args=())
def aligned_scaled_mm(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                      bias: Optional[torch.Tensor], scale_result: Optional[torch.Tensor],  # noqa: UP045
                      out_dtype: Optional[torch.dtype], use_fast_accum: bool) -> torch.Tensor:  # noqa: UP045
    return ORIGINAL(a, b, _aligned(scale_a), _aligned(scale_b), bias=bias, scale_result=scale_result,
                    out_dtype=out_dtype, use_fast_accum=use_fast_accum)


@aligned_scaled_mm.register_fake
def _(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum):
    return ORIGINAL(a, b, scale_a, scale_b, bias=bias, scale_result=scale_result, out_dtype=out_dtype,
                    use_fast_accum=use_fast_accum)


def scaled_mm(a, b, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None, use_fast_accum=False):
    """torch._scaled_mm's signature (torch 2.10/2.11), through the operator."""
    return aligned_scaled_mm(a, b, scale_a, scale_b, bias, scale_result, out_dtype, use_fast_accum)


torch._scaled_mm = scaled_mm
if len(sys.argv) < 2:
    sys.exit("usage: aligned_fp8_scales.py PROGRAM [ARGS]")
if os.environ.get("RANK", "0") == "0":
    print("[repro] fp8 scales: torch._scaled_mm hands cuBLAS a one-element scale at an unaligned address as its "
          "own tensor (same value)", file=sys.stderr, flush=True)
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
