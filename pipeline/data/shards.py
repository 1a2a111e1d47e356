"""The token shard format shared by the data stage, the synthetic generator and the trainer.

One shard = a header of 256 little-endian int32 [20240520, 1, n, 0, ...] followed by n
little-endian uint16 GPT-2 token ids. This is the layout of the FineWeb10B shards the record
trains on (`kjj0/fineweb10B-gpt2`), so files written here are drop-in for the record's loader.

    from pipeline.data.shards import read_header, read_tokens, write_shard, ShardFile

The trainer reads the same layout with its own code (train/data.py: the trainer is a separate
package); tests/test_shard_contract.py writes with each and reads with the other.
"""

from __future__ import annotations

import errno
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline.atomic import commit, disk_full, temp_path, write_error
from pipeline.regular_file import open_regular

MAGIC = 20240520
VERSION = 1
HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
TOKEN_BYTES = 2  # uint16
BOS = 50256  # GPT-2 <|endoftext|>, written before every document
MAX_TOKEN = 2**16 - 1


@dataclass(frozen=True)
class ShardHeader:
    magic: int
    version: int
    num_tokens: int

    @property
    def expected_size(self) -> int:
        return shard_bytes(self.num_tokens)


def shard_bytes(num_tokens: int) -> int:
    """Exact file size of a shard holding num_tokens tokens."""
    return HEADER_BYTES + TOKEN_BYTES * num_tokens


def size_from_header(prefix: bytes) -> int | None:
    """The exact file size a shard's first HEADER_BYTES promise, or None when they are not a shard header.

    Lets a download stop at the size the content itself declares when no lock and no server says it.
    """
    if len(prefix) < HEADER_BYTES:
        return None
    magic, version, n = (int(v) for v in np.frombuffer(prefix[:12], dtype="<i4"))
    if magic != MAGIC or version != VERSION or n < 0:
        return None
    return shard_bytes(n)


def read_header(path: Path) -> ShardHeader | None:
    """The header of a shard file, or None when the file is shorter than a header."""
    from pipeline.regular_file import open_regular  # a FIFO named *.bin: refused, not waited on

    with open_regular(Path(path), "shard", "remove it and fetch the data again") as f:
        raw = f.read(HEADER_BYTES)
    if len(raw) < HEADER_BYTES:
        return None
    header = np.frombuffer(raw, dtype="<i4", count=3)
    return ShardHeader(int(header[0]), int(header[1]), int(header[2]))


def header_problems(path: Path, tokens_expected: int | None = None) -> list[str]:
    """Everything wrong with a shard's header and length; empty when the file is well formed.

    The header alone is a weak check (a truncated download keeps a valid header), so the
    file size must match the token count exactly.
    """
    size = os.path.getsize(path)
    header = read_header(path)
    if header is None:
        return [f"file is {size} bytes, shorter than the {HEADER_BYTES}-byte header"]
    problems = []
    if header.magic != MAGIC:
        problems.append(f"header magic is {header.magic}, expected {MAGIC} (not a token shard)")
    if header.version != VERSION:
        problems.append(f"header version is {header.version}, expected {VERSION}")
    if header.num_tokens < 0:
        problems.append(f"header token count is negative ({header.num_tokens})")
    elif size != header.expected_size:
        problems.append(f"file is {size} bytes but its header's {header.num_tokens} tokens need "
                        f"{header.expected_size} (truncated or padded)")
    if tokens_expected is not None and header.num_tokens != tokens_expected:
        problems.append(f"header says {header.num_tokens} tokens, the dataset's shards hold {tokens_expected}")
    return problems


def read_tokens(path: Path, mmap: bool = True) -> np.ndarray:
    """The tokens of a shard as a uint16 array (memory-mapped by default: shards are 200 MB)."""
    header = read_header(path)
    if header is None or header.magic != MAGIC:
        raise ValueError(f"{path} is not a token shard (bad or missing header)")
    if mmap:
        return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(header.num_tokens,))
    with open_regular(path, "shard", "give a token shard (.bin)") as f:
        f.seek(HEADER_BYTES)
        return np.frombuffer(f.read(TOKEN_BYTES * header.num_tokens), dtype="<u2")


def _header(num_tokens: int) -> bytes:
    header = np.zeros(HEADER_INTS, dtype="<i4")
    header[:3] = (MAGIC, VERSION, num_tokens)
    return header.tobytes()


class ShardFile:
    """One shard written as a stream, in bounded memory: the tokens are appended as they come, the header's
    count is filled in at the end, and only then is the file renamed to its name (pipeline/atomic.py)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tmp = temp_path(self.path)
        self.tokens = 0
        try:
            self.file = open(self.tmp, "wb")
            self.file.write(_header(0))
        except OSError as exc:
            self.abort()
            raise self._error(exc) from None

    def _error(self, exc: OSError):
        return disk_full(self.path, "the partial shard") if exc.errno == errno.ENOSPC else write_error(self.path, exc)

    def append(self, tokens: np.ndarray) -> None:
        tokens = np.asarray(tokens)
        if tokens.size and (int(tokens.min()) < 0 or int(tokens.max()) > MAX_TOKEN):
            self.abort()
            raise ValueError(f"token ids must lie in [0, {MAX_TOKEN}] to fit uint16")
        try:
            self.file.write(tokens.astype("<u2", copy=False).tobytes())
        except OSError as exc:
            self.abort()
            raise self._error(exc) from None
        self.tokens += int(tokens.size)

    def close(self) -> int:
        """Fill in the header, make the bytes durable and give the file its name; returns its size."""
        try:
            self.file.seek(0)
            self.file.write(_header(self.tokens))
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()
        except OSError as exc:
            self.abort()
            raise self._error(exc) from None
        commit(self.tmp, self.path)
        return shard_bytes(self.tokens)

    def abort(self) -> None:
        file = getattr(self, "file", None)
        if file is not None and not file.closed:
            try:
                file.close()
            except OSError:
                pass
        self.tmp.unlink(missing_ok=True)


def write_shard(path: Path, tokens: np.ndarray) -> int:
    """Write tokens (any int array, values < 65536) as a shard; returns the file size.

    Written under a temporary name and renamed, so a reader never sees half a shard.
    """
    shard = ShardFile(path)
    shard.append(tokens)
    return shard.close()
