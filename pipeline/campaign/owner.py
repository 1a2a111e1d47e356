"""Whether the process that owns a task attempt is still alive: a lock it holds for its whole life.

    with owned(campaign.tasks_dir / task.owner_lock):   # the task's process, before its record says running
        ...                                             # until after the record says how the run ended
    owner_state(path)                                   # alive | gone | unknown, for status, wait and collect

The lock is an flock(2) on tasks/<i>-<job>.lock. The kernel drops it when the holder exits, however it
exits: Ctrl-C, SIGTERM, SIGKILL, the out-of-memory killer, a crash. So a record that still says
`running` while nobody holds its lock belongs to a process that is gone and can never finish it: the
reader marks it aborted. A pid alone could not say that (pids are reused, and the reader may be on
another node); flock on a shared file system (NFS, Lustre with -o flock) is seen from every node.
Where the file system has no locks, or the record predates the lock, the answer is "unknown" and the
scheduler's word decides, as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import InputError, os_error

ALIVE, GONE, UNKNOWN = "alive", "gone", "unknown"


@contextlib.contextmanager
def owned(path: Path) -> Iterator[None]:
    """Hold `path` locked while the block runs. The file names the holder, for a person reading it."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise os_error(path, exc, "give the campaign a folder every node can write") from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise InputError(f"another process already runs this task attempt (it holds {path})",
                             "let it finish; `repro campaign status` shows it") from None
        except OSError:  # a file system without locks: readers then answer "unknown"
            pass
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"PID {os.getpid()} on {socket.gethostname()} since {time.strftime('%H:%M:%S')}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing drops the lock


@contextlib.contextmanager
def owner_state(path: Path) -> Iterator[str]:
    """ALIVE (someone holds the lock), GONE (the file is there and nobody holds it) or UNKNOWN. While the block
    runs after GONE, the caller holds the lock itself, so two readers do not both mark the same record."""
    try:
        # read-write: on NFS an flock is a POSIX write lock underneath, which a read-only descriptor cannot take
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        yield UNKNOWN  # no lock file (a record written before owners held one), or not ours to lock
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield ALIVE
            return
        except OSError:
            yield UNKNOWN
            return
        yield GONE
    finally:
        os.close(fd)
