"""What the log reader derives from a log's bytes, remembered by the bytes' sha256: each log is read once.

    log_cache.use_folder(ws.cache / "log-reader")   # the CLI, once per command (without it: this process only)
    facts = log_cache.log_facts(raw, "b067….txt")     # == logfacts.facts_from_bytes(raw, "b067….txt")
    fp = log_cache.program_fingerprint(program)        # == identity.program_fingerprint(program)
    need = log_cache.data_need(program, args, derive, DataNeed)  # == derive(): data_need.remembered_data_need
    log_cache.flush()                                  # the CLI, when the command ends: one atomic write

A log's facts (its numbers, header, program's files and fingerprint), a program's fingerprint (a walk of its
syntax tree: with Python's parse of it, most of a log's reading time) and the importer's data need of a program
are pure functions of the bytes (and arguments), so they are a memo, never a source:
- the key is the content's sha256 and the reader's key: logfacts.READER_VERSION and the source text of the
  modules of pipeline/records/, so a change to the reader, bumped or not, starts a new memo;
- one JSON file per reader key, read bounded (MAX_MEMO_BYTES) once per process and written atomically once, when
  the command ends, merged with what another process may have written meanwhile;
- an entry that is not well formed (a corrupt or hand-edited file) is ignored and computed again from the bytes.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import os
import pickle
import shutil
import stat
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline.hashing import sha256_bytes

if TYPE_CHECKING:  # the readers call this memo and hand it their own functions: it imports none of them
    from pipeline.records.logfacts import LogFacts
    from pipeline.records.logparse import ParsedLog

# The reader's version: bump it on any change to what the log reader derives from a log (logparse, logfacts,
# identity, program_files). The memo is keyed on it and on the source of every module of pipeline/records/, so a
# forgotten bump still starts a fresh memo.
READER_VERSION = 1

MAX_LOG_BYTES = 64 << 20  # logparse.MAX_LOG_FILE_BYTES: a log the importer reads whole (a larger one: streamed)
MAX_MEMO_BYTES = 256 << 20  # ~1 KB a log: the whole history is ~2 MB; a larger file is not ours, and is ignored

TABLES = ("facts", "fingerprints", "needs")
_state: dict = {"folder": None, "loaded": False, "dirty": False, "facts": {}, "fingerprints": {}, "needs": {}}


def reader_key() -> str:
    """READER_VERSION and the source text of every module of pipeline/records/ (the reader and what it calls:
    logparse, logfacts, identity, program_files, ... as they are split and joined), so a changed reader never
    reads an old memo, bumped or not. Computed once per process."""
    if "key" not in _state:
        digest = hashlib.sha256(f"reader {READER_VERSION}\n".encode())
        for path in sorted(Path(__file__).resolve().parent.glob("*.py")):  # a build without sources: the version
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        _state["key"] = digest.hexdigest()[:16]
    return _state["key"]


def use_folder(folder: Path | None) -> None:
    """Keep the memo in `folder` (the workspace's cache); None: in this process only."""
    flush()
    _state.update(folder=Path(folder) if folder else None, loaded=False, dirty=False, facts={}, fingerprints={},
                  needs={})


def _memo_path() -> Path | None:
    folder = _state["folder"]
    return folder / f"log-reader-{reader_key()}.json" if folder else None


def _read_memo(path: Path) -> dict:
    """The memo file's tables, or empty ones when it is absent, too large or not a memo."""
    from pipeline.errors import ReproError
    from pipeline.regular_file import read_bounded

    try:  # a memo larger than the limit, a FIFO or a folder in its place: no memo (read_bounded never blocks)
        doc = json.loads(read_bounded(path, MAX_MEMO_BYTES, "log memo", ""))
    except (ReproError, ValueError):
        doc = None
    ok = isinstance(doc, dict) and all(isinstance(doc.get(k), dict) for k in ("facts", "fingerprints"))
    return {k: doc[k] if ok and isinstance(doc.get(k), dict) else {} for k in TABLES}  # "needs": since reader 2


def _table(kind: str) -> dict:
    if not _state["loaded"]:
        _state["loaded"] = True
        path = _memo_path()
        if path is not None:
            disk = _read_memo(path)
            for name in TABLES:
                _state[name] = {**disk[name], **_state[name]}
    return _state[kind]


def _remember(kind: str, key: str, entry: dict) -> None:
    _table(kind)[key] = entry
    _state["dirty"] = True


def flush() -> None:
    """Write what this process learnt (with what is on disk now) in one atomic write; drop older readers' memos."""
    path = _memo_path()
    if path is None or not _state["dirty"]:
        return
    from pipeline.atomic import write_text
    from pipeline.errors import ReproError

    disk = _read_memo(path)
    doc = {"reader": reader_key(), **{k: {**disk[k], **_state[k]} for k in TABLES}}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text(path, json.dumps(doc, allow_nan=False, separators=(",", ":")))
        for old in path.parent.glob("log-reader-*.json"):
            if old != path:
                old.unlink(missing_ok=True)
        for old in path.parent.glob("parsed-*"):  # an older reader's parses: never read again
            if old.name != f"parsed-{reader_key()}":
                shutil.rmtree(old, ignore_errors=True)
    except (OSError, ReproError, ValueError):
        pass  # a memo that cannot be written costs time, never a result
    _state["dirty"] = False


# --- a program's fingerprint --------------------------------------------------------------------------------

def program_fingerprint(program: bytes, walk: Callable[[bytes], str], sha256: str | None = None) -> str:
    """walk(program) (identity.program_fingerprint), done once per distinct program (errors remembered too);
    `sha256`: the program's hex digest, when the caller has it."""
    key = sha256 or sha256_bytes(program)
    entry = _table("fingerprints").get(key)
    if not _fingerprint_entry_ok(entry):
        try:
            entry = {"fingerprint": walk(program)}
        except (SyntaxError, ValueError) as exc:
            entry = {"error": type(exc).__name__, "message": str(exc)}
        _remember("fingerprints", key, entry)
    if "fingerprint" in entry:
        return entry["fingerprint"]
    raise (SyntaxError if entry["error"] == "SyntaxError" else ValueError)(entry["message"])


def _fingerprint_entry_ok(entry) -> bool:
    if not isinstance(entry, dict):
        return False
    if set(entry) == {"fingerprint"}:
        return isinstance(entry["fingerprint"], str) and bool(entry["fingerprint"])
    return set(entry) == {"error", "message"} and entry["error"] in ("SyntaxError", "ValueError") \
        and isinstance(entry["message"], str)


# --- a program's data need ------------------------------------------------------------------------------------

def data_need(program: bytes, args: dict, derive: Callable[[], object], kind: type):
    """derive() (data_need's shards of `program` at `args`, a `kind`: DataNeed), once per program and arguments;
    its CheckFailed (a program whose batch cannot be read) is remembered and raised again too."""
    from pipeline.errors import CheckFailed

    try:
        key = sha256_bytes(program) + json.dumps(args, sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):  # arguments JSON cannot hold exactly: not remembered
        return derive()
    entry = _table("needs").get(key)
    kinds = {f.name: str(f.type) for f in fields(kind)}
    if isinstance(entry, dict) and set(entry) == {"failed", "fix"} and isinstance(entry["failed"], str) \
            and isinstance(entry["fix"], (str, type(None))):
        raise CheckFailed(entry["failed"], entry["fix"])
    if isinstance(entry, dict) and set(entry) == set(kinds) and all(_check(kinds[k], entry[k]) for k in kinds):
        return kind(**entry)
    try:
        need = derive()
    except CheckFailed as exc:
        _remember("needs", key, {"failed": exc.what, "fix": exc.fix})
        raise
    _remember("needs", key, asdict(need))
    return need


# --- a log's facts -------------------------------------------------------------------------------------------

def log_facts(raw: bytes, file: str, *, parse: Callable[[bytes, str, str], tuple[ParsedLog, tuple | None]],
              derive: Callable[[bytes, ParsedLog, str], LogFacts], kind: type) -> LogFacts:
    """derive(raw, log, file) (logfacts' facts of these bytes, of dataclass `kind`) where (log, unread) =
    parse(raw, file, their sha256) (logparse.parse_text_unread: the steps maybe left unread, which the facts never
    read), read from the memo when these bytes were read before."""
    key = sha256_bytes(raw)
    facts = _facts_from_entry(_table("facts").get(key), key, len(raw), file, kind)
    if facts is None:
        parsed, unread = parse(raw, file, key)
        if _state["folder"] is not None:  # `records check` and `verify` of this log will not parse it again
            entry = _state["folder"] / f"parsed-{reader_key()}" / f"{key}.pickle"
            _write_unread(entry, parsed, unread, raw) if unread and unread[1] else _write_parsed(entry, parsed)
        facts = derive(raw, parsed, file)
        entry = asdict(facts)
        del entry["file"]  # the only field not derived from the bytes
        _remember("facts", key, entry)
    return facts


def _check(kind: str, value) -> bool:
    """Is a JSON value of the field's declared type? (LogFacts' annotations are strings: postponed evaluation)."""
    if kind.endswith(" | None"):
        return value is None or _check(kind.removesuffix(" | None"), value)
    if kind.startswith("tuple[") and kind.endswith(", ...]"):
        return isinstance(value, list) and all(_check(kind[6:-6], v) for v in value)
    simple = {"str": (str,), "int": (int,), "float": (int, float), "dict": (dict,), "bool": (bool,)}.get(kind)
    if simple is None:
        return False  # a field of a type this memo cannot check: never served from it
    return isinstance(value, simple) and (kind == "bool" or not isinstance(value, bool))


def _facts_from_entry(entry, key: str, size: int, file: str, kind: type) -> LogFacts | None:
    """The entry as LogFacts, or None when it is not a well-formed record of these very bytes."""
    if not isinstance(entry, dict) or entry.get("sha256") != key or entry.get("size") != size:
        return None
    kinds = {f.name: str(f.type) for f in fields(kind) if f.name != "file"}
    if set(entry) != set(kinds) or not all(_check(kinds[name], entry[name]) for name in kinds):
        return None
    values = {name: tuple(v) if isinstance(v, list) else v for name, v in entry.items()}
    return kind(file=file, **values)


def checkable(kind: type) -> bool:
    """Can every field of `kind` (LogFacts) be checked on the way back from JSON (else the memo never serves)?"""
    return all(_check(str(f.type), _sample(str(f.type))) for f in fields(kind) if f.name != "file")


def _sample(kind: str):
    base = kind.removesuffix(" | None")
    if base.startswith("tuple["):
        return []
    return {"str": "", "int": 0, "float": 0.0, "dict": {}, "bool": False}.get(base, object())


# --- a log as the reader parses it (ParsedLog: every step, for `verify`, `records check` and the site) ----------
# One file per log, named by its sha256: a parsed log keeps every step (a 1.4 MB log: ~5,000 of them), too many
# to keep in the memo above. Pickled (a dataclass tree; JSON would need a codec per class), and read back with an
# unpickler that builds nothing but the reader's own classes and plain values, so a damaged or planted file
# is refused like any other bad entry.
_PARSED_CLASSES = {("pipeline.records.logparse", n) for n in ("ParsedLog", "StepPoint", "ValPoint", "LogIssue")} | \
    {("pipeline.records.nvidia_smi_table", n) for n in ("NvidiaSmiTable", "TableGpu")} | \
    {("copyreg", "_reconstructor"), ("builtins", "object")}


class _ReaderUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        if (module, name) not in _PARSED_CLASSES:
            raise pickle.UnpicklingError(f"{module}.{name} is not a class of the log reader")
        return super().find_class(module, name)


def parsed_log(path: Path, parse: Callable[[], ParsedLog], *, steps: bool = True,
               read_steps: Callable[[bytes, int], tuple] | None = None) -> ParsedLog:
    """parse() (logparse's reading of the file at `path`), or the memo of the same bytes read before; steps=False:
    a memo's log may come without its steps (for a reader of its program or header only). A memo whose steps the
    import left unread gets them from read_steps(the file's bytes, where they start) (logparse.step_columns), and
    is written again with them; its program is a slice of those bytes."""
    folder = _state["folder"]
    if folder is None:
        return parse()
    from pipeline.errors import ReproError
    from pipeline.hashing import sha256_file
    from pipeline.regular_file import read_bounded

    try:
        status = os.stat(path)
        if not stat.S_ISREG(status.st_mode):
            return parse()  # a FIFO or a device is not hashed here (it could block): parse() refuses it
        raw = read_bounded(path, MAX_LOG_BYTES, "log", "") if status.st_size <= MAX_LOG_BYTES else None
        digest = sha256_bytes(raw) if raw is not None else sha256_file(path)
    except (OSError, ReproError):
        return parse()  # parse() says what is wrong with the path
    entry = folder / f"parsed-{reader_key()}" / f"{digest}.pickle"
    log = _read_parsed(entry, digest, steps=steps)
    if isinstance(log, _Unread):
        log = _read_unread(entry, log, raw, read_steps if steps else None)
    if log is not None:
        return dataclasses.replace(log, path=str(path))
    log = parse()
    if log.log_sha256 == digest:  # the file did not change while it was read
        _write_parsed(entry, log)
    return log


def _read_parsed(entry: Path, digest: str, *, steps: bool = True) -> ParsedLog | None:
    from pipeline.regular_file import read_bounded

    try:
        doc = _ReaderUnpickler(io.BytesIO(read_bounded(entry, MAX_MEMO_BYTES, "parsed log memo", ""))).load()
        if isinstance(doc, tuple) and doc[:1] == (_UNREAD,):
            unread = _Unread(*doc[1:])
            return unread if unread.ok(digest) else None
        log = _unpacked(doc, steps) if isinstance(doc, tuple) else doc
    except Exception:  # noqa: BLE001  any damage at all (truncated, not a pickle, another class): not a memo
        return None
    ok = (type(log).__module__, type(log).__name__) == ("pipeline.records.logparse", "ParsedLog") \
        and log.log_sha256 == digest and isinstance(log.steps, tuple) \
        and isinstance(log.vals, tuple) and isinstance(log.issues, tuple)
    return log if ok else None


# A log's steps (a million of them in the whole history) are kept as three columns of machine numbers rather than
# as a pickled object each: pickling the objects was a tenth of a cold import (and they read back no slower).
_PACKED = "steps-columns-1"
_COLUMNS = ("q", "q", "d")  # StepPoint's step, train_time_ms, step_avg_ms: int64, int64, float64


def _packed(log: ParsedLog, columns: tuple | None) -> tuple | ParsedLog:
    """(_PACKED, the log without its steps, each column's bytes) from the reader's columns (the log has no steps
    then) or from the log's steps; the log itself when one of its numbers does not fit."""
    from array import array

    if columns is not None:
        return (_PACKED, log, *(column.tobytes() for column in columns))
    values = [[getattr(p, name) for p in log.steps] for name in ("step", "train_time_ms", "step_avg_ms")]
    if any(type(v) is not float for v in values[2]):  # an int would come back as a float
        return log
    try:
        columns = [array(code, column).tobytes() for code, column in zip(_COLUMNS, values)]
    except (OverflowError, TypeError):  # a number past int64, or not a number
        return log
    return (_PACKED, dataclasses.replace(log, steps=()), *columns)


def _unpacked(doc: tuple, steps: bool = True) -> ParsedLog:
    """The ParsedLog _packed() wrote (steps=False: without its steps); ValueError when `doc` is not one."""
    from array import array

    if len(doc) != 2 + len(_COLUMNS) or doc[0] != _PACKED or not all(isinstance(c, bytes) for c in doc[2:]) \
            or doc[1].steps != ():
        raise ValueError("not a packed parsed log")
    columns = []
    for code, data in zip(_COLUMNS, doc[2:]):
        column = array(code)
        column.frombytes(data)  # ValueError when not a whole number of items
        columns.append(column)
    if len({len(c) for c in columns}) != 1:
        raise ValueError("columns of different lengths")
    if not steps:
        return doc[1]
    step_point = _ReaderUnpickler(io.BytesIO()).find_class("pipeline.records.logparse", "StepPoint")  # its list
    return dataclasses.replace(doc[1], steps=tuple(map(step_point, *columns)))


# A log the import read keeps its steps unread (logparse.parse_text_unread): where they start and how many they are.
_UNREAD = "steps-unread-2"


@dataclasses.dataclass(frozen=True)
class _Unread:
    """A memo entry of a log without its steps: (the log, the offset its steps start at, their count, and where
    its program lies in its bytes, the log then holding none; None: the log holds it)."""

    log: ParsedLog
    at: int
    count: int
    program: tuple[int, int] | None

    def ok(self, digest: str) -> bool:
        log, span = self.log, self.program
        return (type(log).__module__, type(log).__name__) == ("pipeline.records.logparse", "ParsedLog") \
            and log.log_sha256 == digest and log.steps == () and isinstance(log.vals, tuple) \
            and isinstance(log.issues, tuple) and type(self.at) is int and type(self.count) is int \
            and 0 <= self.at and 0 < self.count and (span is None or (
                type(span) is tuple and len(span) == 2 and all(type(i) is int for i in span) and log.program is None
                and 0 <= span[0] <= span[1]))


def _read_unread(entry: Path, unread: _Unread, raw: bytes | None,
                 read_steps: Callable[[bytes, int], tuple] | None) -> ParsedLog | None:
    """The log of an entry the import wrote, its program sliced from `raw` (the file's bytes, which hash to the
    entry's name) and, given read_steps, its steps read from them: the entry is then written again whole, so they
    are read once. None: no bytes, or steps that are not the entry's."""
    if raw is None:
        return None  # a file over MAX_LOG_BYTES: not one the import read
    log = unread.log
    if unread.program is not None:
        log = dataclasses.replace(log, program=raw[unread.program[0]:unread.program[1]])
    if read_steps is None:
        return log
    columns = read_steps(raw, unread.at)
    if len(columns[0]) != unread.count:
        return None
    step_point = _ReaderUnpickler(io.BytesIO()).find_class("pipeline.records.logparse", "StepPoint")
    _write_parsed(entry, log, columns)
    return dataclasses.replace(log, steps=tuple(map(step_point, *columns)))


_LEAD = 101  # a late-2024 log's program follows a separator line of 100 "=" (logparse's layouts)


def _write_unread(entry: Path, log: ParsedLog, unread: tuple[int, int], raw: bytes) -> None:
    """The log without its program where that is a slice of `raw` (it starts the log, or follows its first line):
    the whole history's programs are 90 MB, which cost 0.15 s of the kernel's time to write on a quiet machine and
    up to a second on a busy one; whoever reads the entry has the log's bytes at hand."""
    from pipeline.atomic import write_cache_bytes

    program, span = log.program, None
    for start in (0, _LEAD):
        if program is not None and raw.startswith(program, start):
            log, span = dataclasses.replace(log, program=None), (start, start + len(program))
            break
    write_cache_bytes(entry, pickle.dumps((_UNREAD, log, *unread, span), protocol=pickle.HIGHEST_PROTOCOL))


def _write_parsed(entry: Path, log: ParsedLog, columns: tuple | None = None) -> None:
    """Renamed into place, not fsynced (pipeline/atomic.py write_cache_bytes): an entry a crash leaves short or
    empty is refused by _read_parsed (not a pickle, or not these bytes' parse) and parsed again."""
    from pipeline.atomic import write_cache_bytes

    write_cache_bytes(entry, pickle.dumps(_packed(log, columns), protocol=pickle.HIGHEST_PROTOCOL))
