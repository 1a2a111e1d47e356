"""Text or JSONL → GPT-2 token shards, the FineWeb layout: BOS before every document.

    repro data tokenize corpus/*.txt --out data/mycorpus --tokenizer-dir tokenizer/gpt2
    repro data tokenize dump.jsonl --field text --out data/web --val-tokens 1000000

A text file is one document; a JSONL line is one document (its --field). The token stream is
cut like upstream's fineweb.py: the first --val-tokens tokens form the val shard(s)
(`<prefix>_val_000000.bin`, ...), the rest train shards of --shard-tokens tokens
(`<prefix>_train_000001.bin`, ...), splitting a document where a shard fills; shards an earlier
run left under those names are removed first. Documents are
encoded in worker processes (one per core) in input order, so the output does not depend on
the number of workers.
"""

from __future__ import annotations

import gzip
import io
import json
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import islice
from multiprocessing import get_context
from pathlib import Path

import numpy as np

from pipeline.atomic import write_error
from pipeline.data.paths import check_file_name
from pipeline.data.shards import BOS, ShardFile
from pipeline.data.verify import LockEntry, write_local_lock
from pipeline.errors import InputError, MissingDependency
from pipeline.hashing import sha256_file
from pipeline.regular_file import open_regular

# The sha256 values tiktoken's own "gpt2" encoding checks its two downloads against.
GPT2_FILES = {
    "encoder.json": "196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783",
    "vocab.bpe": "1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5",
}
JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
BATCH_DOCS = 64  # documents per worker task: big enough to amortise pickling, small enough to stream
# One document (a text file, or a JSONL line) is held whole while it is encoded: refused above this many characters,
# so that a 200 MB file without a newline, or a gzip bomb of one line, costs 64 MiB, not ten GB (FineWeb's longest
# documents are about 1 MB)
MAX_DOCUMENT_CHARS = 64 << 20


def load_gpt2(tokenizer_dir: Path | None = None):
    """The GPT-2 BPE as a tiktoken Encoding: from local files (hash-checked) or tiktoken's download."""
    import tiktoken

    if tokenizer_dir is None:
        try:
            return tiktoken.get_encoding("gpt2")
        except Exception as exc:  # tiktoken raises requests/OS errors when it cannot download
            raise MissingDependency(f"cannot load the GPT-2 tokenizer ({type(exc).__name__}: {exc})",
                                    "pass --tokenizer-dir DIR holding encoder.json and vocab.bpe") from None
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    from tiktoken_ext.openai_public import r50k_pat_str

    tokenizer_dir = Path(tokenizer_dir)
    for name, want in GPT2_FILES.items():
        path = tokenizer_dir / name
        if not path.is_file():
            raise InputError(f"{path} does not exist", f"--tokenizer-dir must hold {' and '.join(GPT2_FILES)}")
        got = sha256_file(path)
        if got != want:
            raise InputError(f"{path} has sha256 {got}, GPT-2's is {want}",
                             "use the original GPT-2 encoder.json / vocab.bpe files")
    ranks = data_gym_to_mergeable_bpe_ranks(
        vocab_bpe_file=str(tokenizer_dir / "vocab.bpe"), encoder_json_file=str(tokenizer_dir / "encoder.json"),
        vocab_bpe_hash=GPT2_FILES["vocab.bpe"], encoder_json_hash=GPT2_FILES["encoder.json"])
    return tiktoken.Encoding(name="gpt2", pat_str=r50k_pat_str, mergeable_ranks=ranks,
                             special_tokens={"<|endoftext|>": BOS}, explicit_n_vocab=50257)


# ---- input ------------------------------------------------------------------------------------

def input_files(inputs: list[Path]) -> list[Path]:
    files = []
    for path in map(Path, inputs):
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        elif path.is_file():
            files.append(path)
        else:
            raise InputError(f"input {path} does not exist", "give text/JSONL files or folders of them")
    if not files:
        raise InputError("no input files found", "give text/JSONL files or folders that contain some")
    return files


def _open_text(path: Path, errors: str):
    raw = open_regular(path, "input text", "give text/JSONL files or folders of them")
    raw = gzip.GzipFile(fileobj=raw, mode="rb") if path.suffix == ".gz" else raw
    return io.TextIOWrapper(raw, encoding="utf-8", errors=errors)


def _is_jsonl(path: Path, fmt: str) -> bool:
    if fmt != "auto":
        return fmt == "jsonl"
    return (path.suffixes[-2] if path.suffix == ".gz" and len(path.suffixes) > 1 else path.suffix) in JSONL_SUFFIXES


def _bounded(text: str, where: str, fix: str) -> str:
    if len(text) > MAX_DOCUMENT_CHARS:
        raise InputError(f"{where}: a document of more than {MAX_DOCUMENT_CHARS:,} characters (each is held whole "
                         "while it is encoded)", fix)
    return text


def iter_documents(files: list[Path], fmt: str = "auto", field: str = "text", errors: str = "strict") -> Iterator[str]:
    """Documents in input order: a whole text file, or one JSONL line's `field`."""
    for path in files:
        try:
            with _open_text(path, errors) as f:
                if not _is_jsonl(path, fmt):
                    yield _bounded(f.read(MAX_DOCUMENT_CHARS + 1), str(path), "split it: one document per file")
                    continue
                for line_no, line in enumerate(iter(lambda: f.readline(MAX_DOCUMENT_CHARS + 1), ""), 1):
                    _bounded(line, f"{path}:{line_no}", "give one document per line")
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except (ValueError, RecursionError) as exc:  # JSONDecodeError, an int of 5,000 digits, nesting
                        why = exc.msg if isinstance(exc, json.JSONDecodeError) else (
                            "nested too deeply" if isinstance(exc, RecursionError) else str(exc)[:80])
                        raise InputError(f"{path}:{line_no}: not valid JSON ({why})",
                                         "give one JSON object per line, or --format text") from None
                    if not isinstance(record, dict) or not isinstance(record.get(field), str):
                        keys = ", ".join(sorted(record)) if isinstance(record, dict) else type(record).__name__
                        raise InputError(f"{path}:{line_no}: no string field {field!r} (has: {keys})",
                                         "name the text field with --field NAME")
                    yield record[field]
        except UnicodeDecodeError as exc:
            raise InputError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})",
                             "convert it to UTF-8, or pass --errors replace") from None
        except (OSError, EOFError) as exc:
            raise InputError(f"cannot read {path} ({exc})", "check the file (a truncated .gz?)") from None


# ---- encoding (worker processes) --------------------------------------------------------------

_encoding = None


def _init_worker(tokenizer_dir: str | None, encoding=None) -> None:
    """Set this process's encoding; a forked worker already has its parent's and keeps it."""
    global _encoding
    if encoding is not None:
        _encoding = encoding
    elif _encoding is None:
        _encoding = load_gpt2(Path(tokenizer_dir) if tokenizer_dir else None)


def start_pool(workers: int, tokenizer_arg: str | None):
    """`workers` encoding processes. They are forked with SIGTERM's default action and SIGINT ignored, whatever the
    caller's handlers (the CLI turns SIGTERM into KeyboardInterrupt): Python drops a signal that reaches a child
    between fork and its own start-up, so a worker told to stop by Pool.terminate() that early, under a Python
    handler, lived on and terminate() waited for it forever (6 runs in 400 of a one-document input, 6 at once on 2
    cores). Ctrl-C is the parent's to handle: it stops the workers."""
    handlers = {signal.SIGTERM: signal.SIG_DFL, signal.SIGINT: signal.SIG_IGN}
    main_thread = threading.current_thread() is threading.main_thread()  # signal.signal works there only
    saved = {sig: signal.signal(sig, handler) for sig, handler in handlers.items()} if main_thread else {}
    try:
        return get_context("spawn" if sys.platform == "darwin" else "fork").Pool(
            workers, initializer=_init_worker, initargs=(tokenizer_arg,))
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def encode_batch(docs: list[str]) -> np.ndarray:
    """[BOS, doc0..., BOS, doc1..., ...] as uint16. encode_ordinary: text that spells <|endoftext|> stays text."""
    pieces = []
    for doc in docs:
        pieces.append(np.array([BOS], dtype=np.uint16))
        pieces.append(np.asarray(_encoding.encode_ordinary(doc), dtype=np.uint16))
    return np.concatenate(pieces) if pieces else np.zeros(0, dtype=np.uint16)


def _batches(docs: Iterator[str], size: int) -> Iterator[list[str]]:
    while batch := list(islice(docs, size)):
        yield batch


# ---- output -----------------------------------------------------------------------------------

def check_prefix(prefix: str) -> str:
    """The shard name prefix names files inside the output folder: "../x" or "a/b" would write elsewhere."""
    check_file_name(f"{prefix}_train_000001.bin", f"--prefix {prefix!r}",
                    "give a plain prefix such as fineweb (letters, digits, '_', '-'; no '/' or '..')")
    return prefix


class ShardWriter:
    """Cuts one token stream into val shards (first val_tokens) then train shards of shard_tokens.

    Each shard is streamed to disk as tokens arrive (shards.ShardFile), so memory does not grow with
    the shard size; `abort` removes the partial shard and every shard this writer finished.
    """

    def __init__(self, out_dir: Path, prefix: str, shard_tokens: int, val_tokens: int):
        check_prefix(prefix)
        self.out_dir, self.prefix, self.shard_tokens = out_dir, prefix, shard_tokens
        # Shards of an earlier run would be read by a loader globbing PREFIX_train_*.bin: remove them.
        for split in ("train", "val"):
            for stale in out_dir.glob(f"{prefix}_{split}_[0-9][0-9][0-9][0-9][0-9][0-9].bin"):
                stale.unlink()
        self.val_left = val_tokens
        self.current: ShardFile | None = None
        self.split, self.index = ("val", 0) if val_tokens else ("train", 1)
        self.written: list[tuple[str, int, str]] = []  # (name, tokens, split)

    def _capacity(self) -> int:
        return min(self.shard_tokens, self.val_left) if self.split == "val" else self.shard_tokens

    def _name(self) -> str:
        return f"{self.prefix}_{self.split}_{self.index:06d}.bin"

    def add(self, tokens: np.ndarray) -> None:
        pos = 0
        while pos < tokens.size:
            if self.current is None:
                self.current = ShardFile(self.out_dir / self._name())
            take = min(self._capacity() - self.current.tokens, tokens.size - pos)
            self.current.append(tokens[pos:pos + take])
            pos += take
            if self.current.tokens == self._capacity():
                self._flush()

    def _flush(self) -> None:
        if self.current is None:
            return
        shard, self.current = self.current, None
        if not shard.tokens:
            shard.abort()
            return
        shard.close()
        self.written.append((shard.path.name, shard.tokens, self.split))
        if self.split == "val":
            self.val_left -= shard.tokens
            self.index += 1
            if self.val_left == 0:
                self.split, self.index = "train", 1
        else:
            self.index += 1

    def close(self) -> None:
        self._flush()

    def abort(self) -> None:
        """Leave nothing behind: the shard being written and the ones finished (the set is incomplete)."""
        if self.current is not None:
            self.current.abort()
            self.current = None
        for name, _, _ in self.written:
            (self.out_dir / name).unlink(missing_ok=True)


@dataclass(frozen=True, kw_only=True)
class TokenizeResult:
    out_dir: Path
    documents: int
    tokens: int
    shards: tuple[tuple[str, int, str], ...]  # (file name, tokens, split)
    seconds: float

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else 0.0


def tokenize(inputs: list[Path], out_dir: Path, *, tokenizer_dir: Path | None = None, fmt: str = "auto",
             field: str = "text", shard_tokens: int = 100_000_000, val_tokens: int = 10_485_760,
             prefix: str = "fineweb", workers: int = 2, errors: str = "strict", quiet: bool = False,
             dataset_name: str | None = None) -> TokenizeResult:
    if shard_tokens <= 0 or val_tokens < 0:
        raise InputError("--shard-tokens must be > 0 and --val-tokens >= 0", "give positive token counts")
    check_prefix(prefix)
    files = input_files(inputs)
    encoding = load_gpt2(tokenizer_dir)  # fail here, once, before any worker starts
    out_dir = Path(out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise write_error(out_dir, exc) from None
    writer = ShardWriter(out_dir, prefix, shard_tokens, val_tokens)
    docs = iter_documents(files, fmt, field, errors)
    start = time.perf_counter()
    n_docs = n_tokens = 0
    pool = bar = None
    try:
        tokenizer_arg = str(tokenizer_dir) if tokenizer_dir else None
        _init_worker(tokenizer_arg, encoding)  # forked workers inherit it instead of loading it again
        if workers > 1:
            # Started before the progress bar's monitor thread: forking a process with threads is fragile.
            pool = start_pool(workers, tokenizer_arg)
            encoded = pool.imap(encode_batch, _batches(docs, BATCH_DOCS), chunksize=1)
        else:
            encoded = map(encode_batch, _batches(docs, BATCH_DOCS))
        if not quiet:
            from tqdm import tqdm

            bar = tqdm(unit="tok", unit_scale=True, file=sys.stderr, desc="tokenize", dynamic_ncols=True)
        for tokens in encoded:
            writer.add(tokens)
            n_docs += int(np.count_nonzero(tokens == BOS))  # documents never hold BOS: encode_ordinary
            n_tokens += tokens.size
            if bar is not None:
                bar.update(tokens.size)
        writer.close()
        if pool is not None:  # every batch is back: the workers end at their queue's end, no signal needed
            pool.close()
    except BaseException:
        writer.abort()  # a full disk or Ctrl-C leaves no partial shard and no incomplete set behind
        if pool is not None:
            pool.terminate()
        raise
    finally:
        if pool is not None:
            pool.join()
        if bar is not None:
            bar.close()
    seconds = time.perf_counter() - start
    entries = [LockEntry(name=name, size=(out_dir / name).stat().st_size, sha256=sha256_file(out_dir / name),
                         tokens=tokens,
                         source=f"tokenize: {len(files)} input files, GPT-2 BPE")
               for name, tokens, _ in writer.written]
    write_local_lock(out_dir, dataset_name or out_dir.name, entries, replace=True)
    return TokenizeResult(out_dir=out_dir, documents=n_docs, tokens=n_tokens, shards=tuple(writer.written),
                          seconds=seconds)
