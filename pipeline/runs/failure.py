"""Why a run failed, in the trainer's own words: the last exception line of its output.

    failure_reason(run_dir / "stdout.txt")   -> "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when ..."
    shared_gpu(reason)                       -> "other processes held 105.85 GiB of the GPU when it ran out ..."

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


_OTHER_PROCESS = re.compile(r"Process \d+ has ([\d.]+) GiB memory in use")
_OWN = re.compile(r"this process has ([\d.]+) GiB memory in use")


def shared_gpu(reason: str | None) -> str | None:
    """For a run stopped by CUDA running out of memory, what torch's message says other processes held of the GPU
    at that moment: a cause outside the run (several runs, or a leftover process, on one GPU). None otherwise."""
    if not reason or "OutOfMemoryError" not in reason:
        return None
    others = [float(x) for x in _OTHER_PROCESS.findall(reason)]
    if not others:
        return None
    own = _OWN.search(reason)
    return (f"other processes ({len(others)}) held {sum(others):.2f} GiB of the GPU when it ran out"
            + (f", this run {float(own.group(1)):.2f} GiB" if own else "")
            + ": the GPU was shared, run it alone")
