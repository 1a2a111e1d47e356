"""One run's progress on screen, read from the trainer's own step lines (issue 37: no silent minutes).

The trainer writes `step:N/T ... step_avg:Xms` every step and `step:N/T val_loss:L ...` at each validation
(train/log.py, the record's log format). On a terminal one line updates in place (step/total, last val loss,
ms per step, ETA); anywhere else (a pipe, CI, a file) a plain line every `every_s` seconds, so logs stay
readable. It takes the bytes Tee gives a terminal; stdout.txt keeps the trainer's full output either way.
"""

from __future__ import annotations

import re
import time
from typing import TextIO

_STEP = re.compile(rb"step:(\d+)/(\d+)")
_AVG = re.compile(rb"step_avg:([0-9.]+)ms")
_LOSS = re.compile(rb"val_loss:([0-9.]+|nan|inf)")


class StepProgress:
    def __init__(self, screen: TextIO, label: str, *, tty: bool | None = None, every_s: float = 15.0,
                 clock=time.monotonic):
        self._screen, self._label, self._every_s, self._clock = screen, label, every_s, clock
        self._tty = screen.isatty() if tty is None else tty
        self._pending = b""
        self._step = self._total = None
        self._avg_ms: float | None = None
        self._loss: str | None = None
        self._shown_at: float | None = None
        self._drawn = False

    def line(self) -> str:
        if self._step is None:
            return f"  {self._label}: starting (compile, warm-up, data)"
        parts = [f"step {self._step}/{self._total}"]
        parts.append(f"val loss {self._loss}" if self._loss else "val loss -")
        if self._avg_ms:  # the step-0 validation line reports no step time yet
            eta = max(0, self._total - self._step) * self._avg_ms / 1000
            parts += [f"{self._avg_ms:.0f} ms/step", f"ETA {eta:.0f} s"]
        return f"  {self._label}: " + ", ".join(parts)

    def write(self, chunk: bytes) -> int:
        self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for raw in lines:
            self._read(raw)
        if lines:
            self._show()
        return len(chunk)

    def _read(self, raw: bytes) -> None:
        step = _STEP.search(raw)
        if step is None:
            return
        self._step, self._total = int(step[1]), int(step[2])
        if (avg := _AVG.search(raw)) is not None:
            self._avg_ms = float(avg[1])
        if (loss := _LOSS.search(raw)) is not None:
            self._loss = loss[1].decode()

    def _show(self) -> None:
        now = self._clock()
        if self._tty:
            self._screen.write("\r\x1b[K" + self.line())
            self._drawn = True
        elif self._shown_at is None or now - self._shown_at >= self._every_s:
            self._screen.write(self.line() + "\n")
            self._shown_at = now
        else:
            return
        self._screen.flush()

    def flush(self) -> None:
        pass

    def close(self) -> None:
        """Clear the in-place line, so that the run's result line takes its place."""
        if self._drawn:
            self._screen.write("\r\x1b[K")
            self._screen.flush()
            self._drawn = False
