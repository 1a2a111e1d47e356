"""Reading a path a user gave: only a regular file, and never more of it than its kind needs.

    with open_regular(path, "bundle", fix) as f: ...        # a FIFO, a device, a folder: InputError at once
    data = read_bounded(path, 64 << 10, "public key", fix)  # a file over the limit: InputError, nothing more read
    kind_of(path)                                           # "regular file", "FIFO", "character device", ...

Why one helper: `open()` of a FIFO blocks until a writer appears (forever, for `data verify` on a FIFO named
*.bin), and `read()` of /dev/zero or /dev/urandom never ends (a key read that way fills memory in seconds).
The path is opened with O_NONBLOCK, which makes opening a FIFO return at once, and what was opened is then
checked with fstat: the same file that is read, with no window for it to be swapped between a check and
the open. Shards, keys, bundles, logs and manifests all go through here.
"""

from __future__ import annotations

import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

from pipeline.errors import InputError, os_error

_KINDS = ((stat.S_ISDIR, "folder"), (stat.S_ISFIFO, "FIFO (named pipe)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"), (stat.S_ISREG, "regular file"))


def describe_mode(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "special file")


def kind_of(path: Path) -> str | None:
    """What is at `path` (following links), without opening it; None when nothing is."""
    try:
        return describe_mode(os.stat(path).st_mode)
    except OSError:
        return None


def not_regular(path: Path, what: str, kind: str, fix: str) -> InputError:
    return InputError(f"{path}: the {what} is a {kind}, not a regular file (it is not read: a pipe or a device "
                      "could block or never end)", fix)


def open_regular(path: Path, what: str, fix: str) -> BinaryIO:
    """`path` opened for binary reading, if it is a regular file; InputError naming `what` otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise os_error(path, exc, fix) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise not_regular(path, what, describe_mode(mode), fix)
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(path: Path, limit: int, what: str, fix: str) -> bytes:
    """All of a regular file of at most `limit` bytes; InputError when it is larger (read no further; a file
    whose size already says so, such as a 6 GiB sparse file, is not read at all)."""
    with open_regular(path, what, fix) as f:
        try:
            data = b"" if os.fstat(f.fileno()).st_size > limit else f.read(limit + 1)
        except OSError as exc:
            raise os_error(path, exc, fix) from None
        if not data and os.fstat(f.fileno()).st_size > limit or len(data) > limit:
            raise InputError(f"{path}: the {what} is larger than {_size(limit)}; this is not a {what}", fix)
    return data


def read_text_bounded(path: Path, limit: int, what: str, fix: str) -> str:
    """`read_bounded` decoded as UTF-8 (undecodable bytes replaced: a hostile file is text to show, not code)."""
    return read_bounded(path, limit, what, fix).decode("utf-8", errors="replace")


def sha256_regular(path: Path, limit: int, what: str, fix: str) -> str:
    """sha256 of a regular file of at most `limit` bytes, hashed through the one descriptor that was checked;
    InputError for anything else (a FIFO, a device, a file over the limit: nothing past the limit is read)."""
    import hashlib

    digest, seen = hashlib.sha256(), 0
    with open_regular(path, what, fix) as f:
        try:
            while chunk := f.read(min(1 << 20, limit + 1 - seen)):
                seen += len(chunk)
                if seen > limit:
                    raise InputError(f"{path}: the {what} is larger than {_size(limit)}; this is not a {what}", fix)
                digest.update(chunk)
        except OSError as exc:
            raise os_error(path, exc, fix) from None
    return digest.hexdigest()


def read_tail(path: Path, limit: int, what: str, fix: str) -> bytes:
    """The last `limit` bytes of a regular file (an output log of any length: only its end is read)."""
    with open_regular(path, what, fix) as f:
        try:
            f.seek(max(0, os.fstat(f.fileno()).st_size - limit))
            return f.read(limit)
        except OSError as exc:
            raise os_error(path, exc, fix) from None


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:g} {unit}"
    return f"{n} bytes"
