"""A record's one-element FP8 scales handed to cuBLAS at an aligned address, where the node's cuBLAS needs it.

    use = needs_aligned_scales(python, program)   # pipeline/preflight/fp8.py: the node's own answer

2026-07-17_FP8DownProjection hands `torch._scaled_mm` one-element slices of a scale tensor (`scales[i:i+1]`).
cuBLASLt under torch 2.11.0+cu130 refuses a scale 12 bytes into its tensor (CUBLAS_STATUS_NOT_SUPPORTED) and
does the same value at an aligned address (docs/device-runs/2026-12-02-h200-history-3/fp8_scales.txt); the
record's own torch 2.10.0+cu128 cannot be installed on such a node. When the node's FP8 probe answers exactly so,
a host run starts the program through `launchers/aligned_fp8_scales.py`, which gives such a scale its own tensor
before the matmul: the same scale values, so the same products, plus a four-byte copy per call. It is declared
(run.yaml `fp8_aligned_scales`, the verdict's `fp8.aligned_scales`, the plan's stand-in "FP8 scales"), and never
applied where the node does the program's own call.
"""

from __future__ import annotations

from pathlib import Path

LAUNCHER = Path(__file__).resolve().parent / "launchers" / "aligned_fp8_scales.py"


def why(torch: str) -> str:
    """The plan's and the run's one line for the deviation."""
    return (f"torch {torch}'s cuBLAS refuses a one-element FP8 scale 12 bytes into its tensor and does it aligned: "
            "the run hands torch._scaled_mm each such scale as its own tensor (the same value), "
            "pipeline/runs/fp8_scales.py")
