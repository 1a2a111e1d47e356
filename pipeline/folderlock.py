"""One writer per folder: `with FolderLock(work, "repro reproduce"):` or a second writer is refused.

The lock is an flock(2) on `<folder>/.repro.lock`, which the kernel drops when the holder exits, however
it exits (a crash or SIGKILL leaves no stale lock). The file names the holder (PID, command, start time)
so the refusal can say who has the folder.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path

from pipeline.errors import InputError, os_error

LOCK_NAME = ".repro.lock"


class FolderLock:
    def __init__(self, folder: Path, what: str):
        self.path = Path(folder) / LOCK_NAME
        self.what = what
        self._fd: int | None = None

    def __enter__(self) -> FolderLock:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise os_error(self.path, exc, "give a folder you can write to") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise InputError(f"{self.path.parent} is in use by {holder}",
                             "wait for it to finish (or stop it), or use another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} ({self.what}, since {time.strftime('%H:%M:%S')})\n".encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.close(self._fd)  # closing releases the flock
            self._fd = None
