"""What both runtimes share: the launch description, the output tee and signal handling.

A `Launch` says what to start (argv, working directory, extra environment, bind mounts) in the
paths the training process sees; runtime_host.py starts it as a subprocess, runtime_docker.py in
a container. Output goes through a `Tee`: to the terminal and to the run's stdout.txt as it comes.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO


@dataclass(frozen=True)
class Mount:
    source: Path  # on the host
    target: str  # inside the container
    read_only: bool


@dataclass(frozen=True)
class Launch:
    argv: tuple[str, ...]
    workdir: str  # as the process sees it
    env: dict[str, str] = field(default_factory=dict)  # added to (host) or making up (docker) the environment
    mounts: tuple[Mount, ...] = ()  # docker only: the host runtime sees host paths directly


@dataclass(frozen=True)
class Outcome:
    exit_code: int | None  # None: the process never started
    aborted: bool  # stopped by Ctrl-C / SIGTERM


class Discard:
    """A terminal that shows nothing: the trainer's output then goes to stdout.txt only (repro reproduce
    without --stream prints one line per run instead)."""

    def write(self, chunk: bytes) -> int:
        return len(chunk)

    def flush(self) -> None:
        pass


class Tee:
    """Bytes from the training process, to the terminal and to stdout.txt, flushed as they come."""

    FIRST_STEP = b"step:1/"  # the first timed step's line, in the record's log format (both trainers)

    def __init__(self, path: Path, terminal: BinaryIO | None = None):
        self._file = open(path, "ab")
        self._terminal = terminal if terminal is not None else sys.stdout.buffer
        self.opened_at = time.monotonic()
        self.first_step_at: float | None = None  # when the trainer printed its first timed step

    @property
    def startup_s(self) -> float | None:
        """Seconds from launch to the first timed step: compile, warm-up and data loading (untimed in the log)."""
        return None if self.first_step_at is None else round(self.first_step_at - self.opened_at, 1)

    def write(self, chunk: bytes) -> None:
        if self.first_step_at is None and self.FIRST_STEP in chunk:
            self.first_step_at = time.monotonic()
        self._file.write(chunk)
        self._file.flush()
        try:
            self._terminal.write(chunk)
            self._terminal.flush()
        except (BrokenPipeError, ValueError):  # a closed terminal must not stop the run's own record
            pass

    def note(self, text: str) -> None:
        """A line from repro itself (not the trainer): marked so the two are never confused."""
        self.write(f"[repro] {text}\n".encode())

    def close(self) -> None:
        self._file.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def sigterm_as_interrupt():
    """SIGTERM (a scheduler's kill, `docker stop` of a wrapper) ends a run like Ctrl-C does: cleanly."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


@contextlib.contextmanager
def interrupts_deferred():
    """While cleaning up after an abort, a second Ctrl-C must not leave a container or workers behind."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
