"""Shard verification and the local data lock: every bad file is reported, not just the first.

    repro data verify data/fineweb10B-gpt2            # or: python -m pipeline data verify DIR --json

A data folder carries `data.lock.yaml`: what was fetched or generated there (per file: size,
sha256, token count, source). `verify_dir` checks each shard's header and exact size, and its
sha256 against that lock and against the dataset manifest's lock; `data_lock_digest` names the
folder's content for run records and bundles.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from pipeline.atomic import write_yaml
from pipeline.data.manifest import DatasetManifest, load_dataset
from pipeline.data.paths import file_in, name_problem
from pipeline.data.shards import header_problems, read_header
from pipeline.errors import InputError, ManifestError, ReproError, os_error
from pipeline.hashing import sha256_file
from pipeline.manifest_io import Fields, check_schema_version, load_yaml
from pipeline.regular_file import kind_of
from pipeline.yamlio import YamlRefused, load_bytes

LOCK_NAME = "data.lock.yaml"
LOCK_SCHEMA = 1
# ---- the local lock: data/<dataset>/data.lock.yaml -------------------------------------------

@dataclass(frozen=True, kw_only=True)
class LockEntry:
    name: str
    size: int
    sha256: str
    tokens: int | None = None
    source: str = ""


@dataclass(frozen=True)
class LocalLock:
    dataset: str
    files: dict[str, LockEntry]
    generator: dict = field(default_factory=dict)  # synth parameters and entropies, when generated


_lock_guard = threading.Lock()


def read_local_lock(data_dir: Path) -> LocalLock | None:
    path = Path(data_dir) / LOCK_NAME
    if not path.exists():
        return None
    return parse_local_lock(load_yaml(path, "lock"), path)


def parse_lock_bytes(data: bytes, source: str) -> LocalLock:
    """A data.lock.yaml held in memory (a bundle member): the same checks as reading it from a folder."""
    try:
        doc = load_bytes(data, source, "lock")
    except YamlRefused as exc:
        raise ManifestError(source, "", f"line {exc.line}: {exc.problem}" if exc.line else exc.problem,
                            exc.fix) from None
    if not isinstance(doc, dict):
        raise ManifestError(source, "", "the top level must be a mapping of fields", "check the data lock")
    return parse_local_lock(doc, Path(source))


def parse_local_lock(doc: dict, path: Path) -> LocalLock:
    top = Fields(doc, path)
    top.only("schema_version", "dataset", "files", "generator")
    check_schema_version(top, LOCK_SCHEMA)
    files = {}
    for name in top.opt("files", dict, {}):
        problem = name_problem(name)
        if problem is not None:  # a lock key like ../../evil.bin must never become a path
            raise top.fail(f"files.{str(name)[:80]}", f"is not a plain file name: it {problem}",
                           "a data lock lists the folder's own files by their plain names; restore or delete it")
        entry = top.sub("files").sub(name)
        entry.only("size", "sha256", "tokens", "source")
        size = entry.req("size", int)
        if size < 0:
            raise entry.fail("size", f"is {size}, a negative size", "restore the lock or delete it and fetch again")
        files[name] = LockEntry(name=name, size=size, sha256=entry.sha256("sha256"), tokens=entry.opt("tokens", int),
                                source=entry.opt("source", str, ""))
    return LocalLock(top.req("dataset", str), files, top.opt("generator", dict, {}))


def write_local_lock(data_dir: Path, dataset: str, entries: list[LockEntry], generator: dict | None = None,
                     replace: bool = False) -> Path:
    """Merge entries into the folder's lock (or replace it) and write it atomically."""
    data_dir = Path(data_dir)
    with _lock_guard:
        old = None if replace else read_local_lock(data_dir)
        if old is not None and old.dataset != dataset:
            raise InputError(f"{data_dir / LOCK_NAME} belongs to dataset {old.dataset!r}, not {dataset!r}",
                             "use a separate --dir for each dataset")
        files = dict(old.files) if old else {}
        files.update({e.name: e for e in entries})
        doc = {"schema_version": LOCK_SCHEMA, "dataset": dataset, "files": {
            name: {k: v for k, v in (("size", e.size), ("sha256", e.sha256), ("tokens", e.tokens),
                                     ("source", e.source)) if v not in (None, "")}
            for name, e in sorted(files.items())}}
        generator = generator if generator is not None else (old.generator if old else {})
        if generator:
            doc["generator"] = generator
        return write_yaml(data_dir / LOCK_NAME, doc)


def data_lock_digest(data_dir: Path) -> str:
    """sha256 of the folder's content as locked: sorted (name, size, sha256) of every file.

    Where the bytes came from (hub, mirror, folder) does not change it: equal digests mean equal data.
    """
    lock = read_local_lock(data_dir)
    if lock is None:
        raise InputError(f"{Path(data_dir) / LOCK_NAME} does not exist",
                         "fetch, tokenize or synth into that folder first (each writes the lock)")
    return lock_digest(lock)


def lock_digest(lock: LocalLock) -> str:
    """data_lock_digest of a lock already parsed (e.g. with parse_lock_bytes from a bundle member)."""
    canonical = [[e.name, e.size, e.sha256] for e in sorted(lock.files.values(), key=lambda e: e.name)]
    return hashlib.sha256(json.dumps(canonical, separators=(",", ":")).encode()).hexdigest()


# ---- verification ------------------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class FileCheck:
    name: str
    size: int | None
    sha256: str | None
    tokens: int | None
    problems: tuple[str, ...]
    hash_checked: bool  # False: header and size were fine but no recorded sha256 existed to compare

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass(frozen=True)
class VerifyReport:
    data_dir: Path
    dataset: str | None
    files: tuple[FileCheck, ...]

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.files)

    @property
    def bad(self) -> tuple[FileCheck, ...]:
        return tuple(f for f in self.files if not f.ok)

    def to_dict(self) -> dict:
        return {"data_dir": str(self.data_dir), "dataset": self.dataset, "ok": self.ok,
                "files": [{"name": f.name, "ok": f.ok, "size": f.size, "sha256": f.sha256, "tokens": f.tokens,
                           "hash_checked": f.hash_checked, "problems": list(f.problems)} for f in self.files]}


def expected_hashes(manifest: DatasetManifest | None, lock: LocalLock | None, name: str) -> dict[str, tuple]:
    """Every recorded (size, sha256) for a file, keyed by where it is recorded."""
    out = {}
    if manifest is not None and name in manifest.lock:
        entry = manifest.lock[name]
        out[f"manifest {manifest.path.name}"] = (entry.size, entry.sha256)
    if lock is not None and name in lock.files:
        out[LOCK_NAME] = (lock.files[name].size, lock.files[name].sha256)
    return out


def check_file(path: Path, sha256: str | None, expected: dict[str, tuple], tokens_expected: int | None) -> FileCheck:
    """Header, exact size and sha256 of one file against every recorded expectation."""
    if not path.exists():
        return FileCheck(name=path.name, size=None, sha256=None, tokens=None,
                         problems=("missing: recorded in the lock but not in the folder",), hash_checked=False)
    if path.is_dir():
        return FileCheck(name=path.name, size=None, sha256=None, tokens=None,
                         problems=("is a directory where a shard belongs: remove it",), hash_checked=False)
    kind = kind_of(path)
    if kind != "regular file":  # a FIFO would block the read forever, a device never end it
        return FileCheck(name=path.name, size=None, sha256=None, tokens=None,
                         problems=(f"is a {kind}, not a regular file: not read; remove it",), hash_checked=False)
    if sha256 is None:  # the file exists but could not be hashed
        return FileCheck(name=path.name, size=None, sha256=None, tokens=None, problems=(_unreadable(path),),
                         hash_checked=False)
    size = path.stat().st_size
    problems = header_problems(path, tokens_expected)
    header = read_header(path)
    hash_checked = False
    for where, (want_size, want_sha) in expected.items():
        if want_size is not None and size != want_size:
            problems.append(f"size {size} differs from {want_size} in {where}")
        if want_sha:
            hash_checked = True
            if sha256 != want_sha:
                problems.append(f"sha256 {sha256} differs from {want_sha} in {where}")
    return FileCheck(name=path.name, size=size, sha256=sha256, tokens=header.num_tokens if header else None,
                     problems=tuple(problems), hash_checked=hash_checked)


def _unreadable(path: Path) -> str:
    try:
        os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK))  # non-blocking: check_file let no FIFO through anyway
    except OSError as exc:
        return f"cannot be read ({exc.strerror}): fix its permissions or fetch it again"
    return "could not be hashed: fetch it again"


def _hash_readable(paths: list[Path], workers: int) -> dict[Path, str]:
    """sha256 of every file that can be read; an unreadable one is left out and reported by check_file."""
    from concurrent.futures import ThreadPoolExecutor

    def one(path: Path) -> tuple[Path, str | None]:
        try:
            return path, sha256_file(path)
        except (OSError, ReproError):
            return path, None

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return {p: h for p, h in pool.map(one, paths) if h is not None}


def verify_dir(data_dir: Path, dataset: str | None = None, workers: int = 2,
               registry: Path | None = None) -> VerifyReport:
    """Check every shard in a folder (and every file its lock lists); never stops at the first bad one."""
    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise InputError(f"{data_dir} is not a folder", "give the folder that holds the .bin shards")
    try:
        listed = sorted(n for n in os.listdir(data_dir) if n.endswith(".bin"))  # directories too: reported
    except OSError as exc:
        raise os_error(data_dir, exc, "give the folder that holds the .bin shards") from None
    lock = read_local_lock(data_dir)
    dataset = dataset or (lock.dataset if lock else None)
    manifest = None
    if dataset:
        try:
            manifest = load_dataset(dataset, registry)
        except InputError:
            if lock is None or dataset != lock.dataset:
                raise
            # generated and tokenized folders have no dataset manifest: their lock is the record
    names = sorted(set(listed) | set(lock.files if lock else ()))
    if not names:
        raise InputError(f"{data_dir} holds no .bin shards and no {LOCK_NAME}",
                         "fetch, tokenize or synth into it first")
    paths: dict[str, Path] = {}
    refused: dict[str, FileCheck] = {}  # a name no shard can have: reported with the rest, never read
    for n in names:
        where = data_dir if n in listed else data_dir / LOCK_NAME  # who gave the name: the folder, or the lock
        try:
            paths[n] = file_in(data_dir, n, str(where))
        except InputError as exc:
            refused[n] = FileCheck(name=ascii(n)[1:-1], size=None, sha256=None, tokens=None, hash_checked=False,
                                   problems=(f"not a shard's name ({exc.what.split(': ', 1)[-1]}), in {where}",))
    hashes = _hash_readable([p for p in paths.values() if p.is_file()], workers)
    checks = []
    for name in names:
        if name in refused:
            checks.append(refused[name])
            continue
        tokens_expected = manifest.tokens_expected(name) if manifest else None
        path = paths[name]
        checks.append(check_file(path, hashes.get(path), expected_hashes(manifest, lock, name), tokens_expected))
    return VerifyReport(data_dir, dataset, tuple(checks))
