"""Python floats handed to a record's own Triton kernels, typed as the record's torch typed them.

    use = fp32_float_args(program, record_torch="2.10.0+cu128", training_torch="2.11.0+cu130")   # True

A compiled model launches a user Triton kernel through inductor, which decides each argument's Triton type.
A Python float (the softcap constants `A=23.0, B=5.0, C=7.5` of the 2026 records' cross entropy) is fp32 under
torch <= 2.10 and fp64 from torch 2.11 on (`torch._inductor.config._use_fp64_for_unbacked_floats`, default
True; pytorch PR 170289). Under fp64 the 2026 records' `fused_softcapped_entropy_fwd_kernel` fails Triton's
frontend ("Loop-carried variable max_val has initial type fp32 but is re-assigned to fp64"): on a node whose
torch is newer than the record's, the record's own program cannot compile (docs/triton-kernels.md).

So when the training torch types fp64 and the record's typed fp32, and the program holds Triton kernels, the
run sets that flag back to False before the program starts: the one line of torch's behaviour the record's own
torch had, nothing else (inductor reads the flag for these signatures only). It is a declared deviation (run.yaml
`inductor_fp32_floats`, the verdict's `inductor.fp32_floats`), never applied silently, and never where the
training torch already types fp32.
"""

from __future__ import annotations

from pathlib import Path

# Started by torchrun in the program's place: sets the flag, then runs the program as __main__ (its own folder).
LAUNCHER = Path(__file__).resolve().parent / "launchers" / "fp32_floats.py"
FLAG = "torch._inductor.config._use_fp64_for_unbacked_floats"


def float_type_of(torch: str) -> str:
    """How the inductor of `torch` ("2.11.0+cu130", "2.10.0.dev20251210") types a Python float launched into a
    user Triton kernel: fp64 from 2.11 on, fp32 before (and for a version that does not say)."""
    parts = torch.split("+")[0].split(".")
    major_minor = (int(parts[0]), int(parts[1])) if len(parts) > 1 and parts[0].isdigit() and parts[1].isdigit() \
        else (0, 0)
    return "fp64" if major_minor >= (2, 11) else "fp32"


def typings_differ(*, record_torch: str, training_torch: str | None) -> bool:
    """Whether the training torch types a Python float kernel argument fp64 where the record's own torch ("" when
    its logs do not say) typed it fp32."""
    return training_torch is not None and float_type_of(training_torch) == "fp64" \
        and float_type_of(record_torch) == "fp32"


def fp32_float_args(program: bytes | None, *, record_torch: str, training_torch: str | None) -> bool:
    """Whether the run types the program's Python float kernel arguments fp32 again: it holds Triton kernels and
    the two torches type them differently."""
    return program is not None and b"triton.jit" in program \
        and typings_differ(record_torch=record_torch, training_torch=training_torch)


def why(record_torch: str, training_torch: str) -> str:
    """The plan's and the run's one line for the deviation."""
    return (f"torch {training_torch}'s inductor types a Python float kernel argument fp64, the record's torch "
            f"{record_torch or '(not logged)'} typed it fp32: the run sets {FLAG} = False before the program "
            "starts, so its own Triton kernels compile as they did (docs/triton-kernels.md)")
