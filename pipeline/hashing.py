"""sha256 of bytes and of files: one implementation for every stage (data, environment, bundles, programs)."""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from pipeline.regular_file import open_regular

HASH_BUFFER = 1 << 20  # few syscalls, yet the chunk is still in L2 cache when SHA-256 reads it


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path, buffer_bytes: int = HASH_BUFFER) -> str:
    """sha256 of a file with large reads into one reused buffer (no per-chunk allocation)."""
    digest = hashlib.sha256()
    buf = bytearray(buffer_bytes)
    view = memoryview(buf)
    with open_regular(path, "file", "give a regular file") as f:  # a FIFO or a device: InputError, never a hang
        while n := f.readinto(buf):
            digest.update(view[:n])
    return digest.hexdigest()


def sha256_files(paths: list[Path], workers: int = 2) -> dict[Path, str]:
    """Hash several files at once: hashlib releases the GIL, so threads use every core."""
    if len(paths) <= 1 or workers <= 1:
        return {p: sha256_file(p) for p in paths}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(paths, pool.map(sha256_file, paths)))
