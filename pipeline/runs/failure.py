"""Why a run failed, in the trainer's own words: the last exception line of its output.

    failure_reason(run_dir / "stdout.txt")   -> "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when ..."

A failed record program ends in a Python traceback printed by its workers (prefixed `[rankN]:` under torchrun),
then torchrun's own summary, which names only ChildFailedError. The reason is the last exception line that is
not torchrun's wrapper, so the verdict can say what stopped the run (an FP8 matmul cuBLAS does not support, an
assertion about the world size) instead of an exit code. Only the output's tail is read: it may be gigabytes.
"""

from __future__ import annotations

import re
from pathlib import Path

from pipeline.errors import ReproError
from pipeline.regular_file import read_tail

TAIL_BYTES = 256 << 10
MAX_CHARS = 400
_EXCEPTION = re.compile(r"^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt)\b.*)$")
_WRAPPERS = ("ChildFailedError", "[repro]")


def failure_reason(output: Path) -> str | None:
    """The last exception line of a run's output (None when it printed none)."""
    try:
        tail = read_tail(output, TAIL_BYTES, "run output", "").decode("utf-8", errors="replace")
    except (OSError, ReproError):
        return None
    found = None
    for line in tail.splitlines():
        m = _EXCEPTION.match(line.strip())
        if m and not any(w in line for w in _WRAPPERS):
            found = m.group(1)
    return found[:MAX_CHARS] if found else None
