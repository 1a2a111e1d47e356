"""Atomic writes: a reader sees the old file or the whole new one, never half of it, even after a crash.

    from pipeline.atomic import write_bytes, write_text, write_yaml, write_json, atomic_open, commit
    write_yaml(run_dir / "run.yaml", doc)
    with atomic_open(path) as f:          # stream a large file; renamed into place only on success
        f.write(header); f.write(body)

One recipe: a temporary file in the destination's folder (a rename is atomic only within one file
system), write, flush, fsync the file, rename over the destination, fsync the folder (so the rename
itself survives a power cut). On any failure the temporary file is removed. A full disk (ENOSPC)
becomes a DiskFull error naming the path, not a traceback; so do permission and is-a-directory errors.
"""

from __future__ import annotations

import errno
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

from pipeline.errors import MissingDependency, ReproError, os_error
from pipeline.yamlio import dump


class DiskFull(MissingDependency):
    """No space left where the tool writes (exit 4: space is something the machine must provide)."""


def disk_full(path: Path, removed: str = "") -> DiskFull:
    tail = f"; {removed} was removed" if removed else ""
    return DiskFull(f"the disk is full: no space left to write {path}{tail}",
                    f"free space on the file system holding {Path(path).parent} (`df -h {Path(path).parent}`), "
                    "or write elsewhere, then run the same command again")


def write_error(path: Path, exc: OSError) -> ReproError:
    """An OSError while writing `path`: a full disk as DiskFull, the rest as errors.os_error does."""
    if exc.errno == errno.ENOSPC:
        return disk_full(path)
    return os_error(path, exc, "check that the folder exists and is writable, or choose another location")


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new entry in `folder` durable (no-op where folders cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def temp_path(path: Path) -> Path:
    """A hidden sibling name unique to this writer (process and random suffix: threads may write at once)."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp-{os.getpid()}-{secrets.token_hex(3)}")


def commit(tmp: Path, path: Path) -> None:
    """Rename a finished (already fsynced) file into place and make the rename durable."""
    try:
        os.replace(tmp, path)
    except OSError as exc:
        raise write_error(path, exc) from None
    fsync_dir(Path(path).parent)


@contextmanager
def atomic_open(path: Path, mode: str = "wb", encoding: str | None = None) -> Iterator[BinaryIO]:
    """A file to write `path` through; renamed into place when the block ends without an exception."""
    path = Path(path)
    tmp = temp_path(path)
    try:
        f = open(tmp, mode, encoding=encoding) if "b" not in mode else open(tmp, mode)
    except OSError as exc:
        raise write_error(path, exc) from None
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.errno == errno.ENOSPC:
            raise disk_full(path, "the partial file") from None
        raise write_error(path, exc) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        commit(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> Path:
    with atomic_open(path, "wb") as f:
        view = memoryview(data)
        while view:
            view = view[f.write(view):]
    return Path(path)


def write_cache_bytes(path: Path, data: bytes) -> bool:
    """A cache entry, written whole under a temporary name and renamed into place but never fsynced: an entry a
    crash leaves short is the reader's to refuse (and recompute), and two fsyncs per entry were most of a cold
    import's wall time. False when it could not be written: a cache that cannot be written costs time only."""
    tmp = temp_path(path)
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(data)
        os.replace(tmp, path)
        return True
    except OSError:
        tmp.unlink(missing_ok=True)
        return False


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode("utf-8"))


def write_yaml(path: Path, doc: Any, header: str = "") -> Path:
    """YAML as the tool writes it everywhere: key order kept, wide lines, an optional comment header."""
    return write_text(path, header + dump(doc, sort_keys=False, width=200, allow_unicode=True))


def write_json(path: Path, obj: Any, indent: int | None = 2) -> Path:
    return write_text(path, json.dumps(obj, indent=indent, allow_nan=False, ensure_ascii=False) + "\n")


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """One JSON object per line; a diverged run's NaN loss is kept as NaN (metrics.jsonl records what ran)."""
    return write_text(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
