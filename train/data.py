"""Token shards and the two loaders (trainer.md section 2).

    from train.data import TrainLoader, ValLoader, read_shard, write_shard
    loader = TrainLoader("data/fineweb10B/fineweb_train_*.bin", tokens_per_slot=49152, max_seq_len=2048,
                         slots=8, world_size=8, rank=0)
    batch = loader.next_batch()    # inputs (49152,) int32, targets (49152,) int64, doc_bounds (256,) int32

Shard: 256 int32 header (magic 20240520, version 1, token count n) then n uint16 tokens, nothing more.
Training batches are BOS-aligned. A step's batch is `slots` buffers of tokens_per_slot + 1 tokens (the record's
8 ranks); they are filled one after the other with sequences starting at consecutive BOS positions. A sequence
ends at the next BOS, after max_seq_len tokens, or when its buffer is full; the rest of a cut document is skipped.
When a shard has too few documents left for a whole step, the next shard starts. Rank r's micro-step m takes slot
m·world_size + r, so every world size that divides `slots` sees the record's 8-rank data at the same positions,
shard switches included. Running out of files is an error unless `cycle` is set. While a shard is in use the next
one is read in a background thread (ShardPrefetch), as the record's DataPreloader does.
Validation takes contiguous slices from the start of the val files, not BOS-aligned.
"""

import glob
import threading
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

MAGIC, VERSION = 20240520, 1
HEADER_BYTES = 256 * 4
BOS_ID = 50256


class DataError(ValueError):
    """A data file or glob is unusable; the message names it and says what to do."""


def write_shard(path: Path, tokens) -> Path:
    """Write tokens (ints < 65536) as a shard; for tests and generated data."""
    tokens = torch.as_tensor(tokens, dtype=torch.int32)
    if tokens.numel() and (tokens.min() < 0 or tokens.max() > 65535):
        raise ValueError("shard tokens must lie in [0, 65535]")
    header = torch.zeros(256, dtype=torch.int32)
    header[:3] = torch.tensor([MAGIC, VERSION, tokens.numel()])
    path = Path(path)
    path.write_bytes(header.numpy().tobytes() + tokens.to(torch.uint16).numpy().tobytes())
    return path


def shard_token_count(path: Path) -> int:
    """Check the header and the file size; return the token count n."""
    path = Path(path)
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            raw = f.read(HEADER_BYTES)
    except OSError as exc:
        raise DataError(f"{path}: cannot read ({exc.strerror}); check the path and permissions") from None
    if len(raw) < HEADER_BYTES:
        raise DataError(f"{path}: {size} bytes is shorter than the {HEADER_BYTES}-byte shard header; "
                        "the file is truncated or not a token shard: fetch or generate it again")
    header = torch.frombuffer(bytearray(raw), dtype=torch.int32)
    magic, version, n = (int(v) for v in header[:3])
    if magic != MAGIC:
        raise DataError(f"{path}: magic number {magic}, expected {MAGIC}: not a token shard "
                        "(fineweb .bin layout); point the file glob at shards")
    if version != VERSION:
        raise DataError(f"{path}: shard version {version}, expected {VERSION}; regenerate it in version 1 layout")
    if n < 0 or size != HEADER_BYTES + 2 * n:
        raise DataError(f"{path}: the header claims {n} tokens ({HEADER_BYTES + 2 * n} bytes) but the file has "
                        f"{size} bytes; it is truncated or corrupt: fetch or generate it again")
    return n


def read_shard(path: Path) -> Tensor:
    """(n,) uint16 tokens of a checked shard."""
    n = shard_token_count(path)
    raw = bytearray(2 * n)
    with Path(path).open("rb", buffering=0) as f:
        f.seek(HEADER_BYTES)
        got = f.readinto(raw)
    if got != 2 * n:
        raise DataError(f"{path}: read {got} of {2 * n} token bytes; the file changed while reading")
    return torch.frombuffer(raw, dtype=torch.uint16) if n else torch.empty(0, dtype=torch.uint16)


def list_shards(pattern: str, what: str) -> list[Path]:
    files = [Path(f) for f in sorted(glob.glob(pattern))]
    if not files:
        raise DataError(f"no {what} files match {pattern!r}; pass the right glob (--{what}-files) or fetch the data")
    return files


def max_docs(tokens_per_slot: int) -> int:
    """Fixed length of doc_bounds: a multiple of 128 >= tokens_per_slot / 300 (the median document is ~400)."""
    return (tokens_per_slot // 300 // 128 + 1) * 128


def pad_bounds(bounds: Tensor, tokens_per_slot: int, where: str) -> Tensor:
    """bounds (k,) starting with 0 -> (max_docs,) int32 padded with tokens_per_slot."""
    slots = max_docs(tokens_per_slot)
    if bounds.numel() > slots:
        raise DataError(f"{where}: {bounds.numel() - 1} documents in one micro-batch of {tokens_per_slot} tokens, "
                        f"more than the {slots - 1} the fixed-size boundary table holds (documents average "
                        "under 300 tokens); use data with longer documents")
    out = torch.full((slots,), tokens_per_slot, dtype=torch.int32)
    out[: bounds.numel()] = bounds
    return out


@dataclass(frozen=True)
class Batch:
    inputs: Tensor  # (T,) int32
    targets: Tensor  # (T,) int64
    doc_bounds: Tensor  # (max_docs,) int32: 0, document starts, then T repeated

    def to(self, device: torch.device) -> "Batch":
        if device.type != "cuda":
            return self
        return Batch(*(t.pin_memory().to(device, non_blocking=True) for t in (self.inputs, self.targets,
                                                                              self.doc_bounds)))


def pick_sequences(bos: list[int], shard_len: int, start: int, tokens_per_slot: int, max_seq_len: int,
                   ranks: int) -> tuple[list[list[tuple[int, int]]], int] | None:
    """(start, end) spans per rank for one micro-step from BOS index `start`, and the next BOS index;
    None when the shard has too few documents left."""
    idx, spans = start, []
    for _ in range(ranks):
        rank_spans, filled = [], 0
        while filled <= tokens_per_slot:
            if idx >= len(bos):
                return None
            begin = bos[idx]
            next_doc = bos[idx + 1] if idx + 1 < len(bos) else shard_len
            end = min(next_doc, begin + max_seq_len, begin + tokens_per_slot + 1 - filled)
            rank_spans.append((begin, end))
            filled += end - begin
            idx += 1
        spans.append(rank_spans)
    return spans, idx


def read_shard_with_bos(path: Path) -> tuple[Tensor, list[int]]:
    """(n,) uint16 tokens of a checked shard and the positions of its BOS tokens."""
    tokens = read_shard(path)
    return tokens, (tokens == BOS_ID).nonzero().flatten().tolist()


class ShardPrefetch:
    """Reads one training shard and its BOS positions in a background thread, as the record's DataPreloader does,
    so the timed loop does not wait for the disk when it moves to the next shard. get() waits for the thread and
    re-raises its error (a DataError naming the file) in the caller's thread, where a synchronous read would have
    raised it."""

    def __init__(self, path: Path):
        self.path = path
        self._result: tuple[Tensor, list[int]] | None = None
        self._error: BaseException | None = None
        # not a daemon: a run that ends (or a loader dropped after warm-up) while a read is in flight waits for
        # it at exit; a daemon thread still inside torch's C++ code when the interpreter finalizes is killed
        # there and aborts the process ("terminate called without an active exception", seen in CI at 2 ranks)
        self._thread = threading.Thread(target=self._read, name=f"prefetch {Path(path).name}")
        self._thread.start()

    def _read(self) -> None:
        try:
            self._result = read_shard_with_bos(self.path)
        except BaseException as exc:  # handed over by get()
            self._error = exc

    def get(self) -> tuple[Tensor, list[int]]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._result


class TrainLoader:
    """BOS-aligned micro-batches for one rank; every rank walks the same shard positions.

    Once the first step is served, the file after the current one is read in the background (ShardPrefetch);
    with a single file and `cycle`, the shard in memory is reused instead of read again.
    """

    def __init__(self, pattern: str, tokens_per_slot: int, max_seq_len: int, slots: int, world_size: int,
                 rank: int, cycle: bool = False):
        if slots % world_size:
            raise DataError(f"{slots} batch slots cannot be shared by {world_size} ranks")
        self.files = list_shards(pattern, "train")
        self.tokens_per_slot, self.max_seq_len, self.slots = tokens_per_slot, max_seq_len, slots
        self.world_size, self.rank, self.cycle = world_size, rank, cycle
        self.steps_served = 0
        self._queue: list[Batch] = []  # this rank's micro-batches of the current step
        self._file_idx, self.path = -1, None
        self._prefetch: ShardPrefetch | None = None
        self._load_next_shard()

    def _following(self) -> int | None:
        """Index of the file after the current one; None when the files end there and `cycle` is off."""
        idx = self._file_idx + 1
        if idx == len(self.files):
            return 0 if self.cycle else None
        return idx

    def _load_next_shard(self) -> None:
        idx = self._following()
        if idx is None:
            raise DataError(f"the training data ran out after {self.steps_served} steps' batches "
                            f"({len(self.files)} files, first {self.files[0]}): add shards, run fewer "
                            "steps, or opt in to reuse with --set data_cycle=true")
        path = self.files[idx]
        if self._prefetch is not None and self._prefetch.path == path:
            self.tokens, self.bos = self._prefetch.get()  # (n,) uint16, BOS positions
        elif path != self.path:  # (the same single file again when cycling: already in memory)
            self.tokens, self.bos = read_shard_with_bos(path)
        self._prefetch = None
        self._file_idx, self.path, self._next = idx, path, 0

    def _start_prefetch(self) -> None:
        idx = self._following()
        if self._prefetch is None and idx is not None and self.files[idx] != self.path:
            self._prefetch = ShardPrefetch(self.files[idx])

    def _next_step(self) -> list[list[tuple[int, int]]]:
        """The spans of all slots of the next step, moving to the next shard when this one is too short."""
        tried = 0
        while (picked := pick_sequences(self.bos, self.tokens.numel(), self._next, self.tokens_per_slot,
                                        self.max_seq_len, self.slots)) is None:
            tried += 1
            if tried > len(self.files):
                raise DataError(f"no training file holds enough documents (BOS tokens {BOS_ID}) for one step "
                                f"of {self.slots} x {self.tokens_per_slot + 1} tokens; use more data or a "
                                "smaller batch")
            self._load_next_shard()
        spans, self._next = picked
        self.steps_served += 1
        return spans

    def _batch(self, spans: list[tuple[int, int]]) -> Batch:
        buf = torch.cat([self.tokens[b:e] for b, e in spans]).to(torch.int32)  # (T + 1,)
        lengths = torch.tensor([e - b for b, e in spans])
        lengths[-1] -= 1  # the last sequence lends its final token to the targets only
        bounds = torch.cat([torch.zeros(1, dtype=torch.int64), lengths.cumsum(0)])
        return Batch(buf[:-1], buf[1:].to(torch.int64),
                     pad_bounds(bounds, self.tokens_per_slot, f"{self.path} before BOS #{self._next}"))

    def next_batch(self) -> Batch:
        if not self._queue:
            spans = self._next_step()
            self._queue = [self._batch(spans[m * self.world_size + self.rank])
                           for m in range(self.slots // self.world_size)]
            self._start_prefetch()  # not in __init__: loaders built only to check the files read nothing more
        return self._queue.pop(0)


def shards_total_tokens(pattern: str, what: str) -> int:
    return sum(shard_token_count(f) for f in list_shards(pattern, what))


class ValLoader:
    """Contiguous validation slices: micro-step m, rank r reads [pos + r·T, pos + (r+1)·T + 1)."""

    def __init__(self, pattern: str, tokens_per_slot: int, world_size: int, rank: int, micro_steps: int):
        self.files = list_shards(pattern, "val")
        self.tokens_per_slot, self.world_size, self.rank = tokens_per_slot, world_size, rank
        self.micro_steps = micro_steps
        self._check_enough()
        self._file_idx, self.tokens, self.pos = 0, read_shard(self.files[0]), 0

    def _check_enough(self) -> None:
        """Walk the shard sizes with the loader's rule before any model runs, so a short set fails early."""
        step = self.tokens_per_slot * self.world_size
        sizes = [shard_token_count(f) for f in self.files]
        file_idx, pos = 0, 0
        for _ in range(self.micro_steps):
            while pos + step + 1 >= sizes[file_idx]:
                file_idx, pos = file_idx + 1, 0
                if file_idx == len(sizes):
                    raise DataError(
                        f"validation needs {self.micro_steps} slices of {step} + 1 tokens but the val files "
                        f"({len(sizes)}, {sum(sizes)} tokens) are too short; lower val_tokens (e.g. --set "
                        "val_tokens=524288 --set val_batch_tokens=524288) or add val shards")
            pos += step

    def next_batch(self) -> Batch:
        step = self.tokens_per_slot * self.world_size
        if self.pos + step + 1 >= self.tokens.numel():
            self._file_idx, self.pos = self._file_idx + 1, 0
            self.tokens = read_shard(self.files[self._file_idx])
        start = self.pos + self.rank * self.tokens_per_slot
        buf = self.tokens[start:start + self.tokens_per_slot + 1].to(torch.int32)  # (T + 1,)
        self.pos += step
        inputs = buf[:-1]
        starts = (inputs == BOS_ID).nonzero().flatten()
        bounds = torch.cat([torch.zeros(1, dtype=torch.int64), starts[starts > 0]])
        return Batch(inputs, buf[1:].to(torch.int64),
                     pad_bounds(bounds, self.tokens_per_slot, f"{self.files[self._file_idx]} at {start}"))
