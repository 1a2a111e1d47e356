"""The record's own training program, fetched and proven to be the one the record ran.

    program = resolve_program(load_record("2025-09-23_MuonCustomSizing"))          # from the pinned commit
    program = resolve_program(record, "~/src/modded-nanogpt")                      # a local clone
    program = resolve_program(record, "b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt")   # a log, or a train_gpt.py
    program.text, program.sha256, program.fingerprint

The record spec: each run log is `<program>` "\n" + "="*100 + "\n" `<output>`; the program is the
bytes before the first separator. Since 2026 the program is a set of files, one after the other in the log
(`program.files`: train_gpt.py, triton_kernels.py, ...; pipeline/records/program_files.py): every file is
pinned by the program's sha256, and each carries its own. A log must match the manifest's pinned log sha256, and the
program cut from it one of the pinned program sha256s — otherwise nothing runs, and the error
says which hash differs and from what.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import CheckFailed, InputError, MissingDependency
from pipeline.hashing import sha256_bytes
from pipeline.records.identity import program_fingerprint
from pipeline.records.logparse import SEPARATOR as LOG_SEPARATOR
from pipeline.records.model import PublishedLog, Record
from pipeline.records.program_files import ProgramFile, split_program
from pipeline.regular_file import kind_of, read_bounded

SEPARATOR = b"\n" + LOG_SEPARATOR + b"\n"  # the separator line, as it stands inside a log
FETCH_TIMEOUT_S = 60
MAX_LOG_BYTES = 64 << 20  # the record's logs are ~250 kB; anything this large is not one of them
MAX_PROGRAM_BYTES = 8 << 20  # the records' programs are ~100 kB; parsing 60 MB of Python takes gigabytes


@dataclass(frozen=True)
class RecordProgram:
    text: bytes
    sha256: str
    fingerprint: str
    source: str  # where the bytes came from: a URL or a path
    log_file: str | None  # the pinned log the program was cut from; None when given as a program file

    @property
    def files(self) -> tuple[ProgramFile, ...]:
        """The files the program is made of, main file first (what a run writes into its working folder)."""
        return split_program(self.text)


def cut_program(log: bytes) -> bytes | None:
    """The program at the top of a run log: everything before the first separator line."""
    if log.startswith(SEPARATOR[1:]):  # output only (no program): its first line is the separator itself
        return None
    cut = log.find(SEPARATOR)
    return log[:cut] if cut >= 0 else None


def fetch(url: str, timeout: float = FETCH_TIMEOUT_S) -> bytes:
    """The pinned log at `url`, through the tool's one HTTP client (pipeline/http.py: retries, bounded size)."""
    from pipeline.http import HttpRefused, Policy, Unreachable, fetch_bytes

    try:
        return fetch_bytes(url, MAX_LOG_BYTES, Policy(timeout_s=timeout, retries=3, max_retry_s=120))
    except HttpRefused as exc:
        if exc.status == 404:
            raise MissingDependency(f"the pinned log is not at {url} (HTTP 404)",
                                    "give --program-source with a local copy: a clone of the upstream "
                                    "repository, the log file, or the program") from None
        raise MissingDependency(f"fetching {url} failed: {exc.what}",
                                "retry later, or give --program-source with a local copy") from None
    except Unreachable as exc:
        raise MissingDependency(f"cannot reach {url}: {exc.what}",
                                "check the network, or give --program-source with a local copy") from None
    except CheckFailed:
        raise CheckFailed(f"{url} is larger than {MAX_LOG_BYTES >> 20} MiB: not a run log of this record",
                          "give --program-source with the record's log or program") from None


def _from_log(record: Record, log: bytes, pinned: PublishedLog, source: str) -> RecordProgram:
    digest = sha256_bytes(log)
    if digest != pinned.sha256:
        raise CheckFailed(f"the log from {source} has sha256 {digest}, but {record.name} pins {pinned.file} "
                          f"at {pinned.sha256}: it is not the record's log",
                          "use the log from the pinned commit; a changed log cannot prove which program ran")
    program = cut_program(log)
    if program is None:
        raise CheckFailed(f"the log from {source} holds no program: no line of 100 '=' after it",
                          "use the record's full run log (program text, separator, output)")
    found = _check_program(record, program, source, pinned)
    files = tuple((f.name, f.sha256) for f in found.files)
    if pinned.files and tuple((p.name, p.sha256) for p in pinned.files) != files:
        raise CheckFailed(f"the program cut from {pinned.file} is not the set of files {record.name} pins for it "
                          f"({', '.join(p.name for p in pinned.files)})", "correct the manifest's files list")
    return found


def _check_program(record: Record, program: bytes, source: str, pinned: PublishedLog | None) -> RecordProgram:
    digest = sha256_bytes(program)
    if digest not in record.accepted_program_sha256:
        raise CheckFailed(f"the program from {source} has sha256 {digest}, which is none of the "
                          f"{len(record.accepted_program_sha256)} programs {record.name} pins",
                          "use the record's unmodified program (or its log); the manifest lists the accepted "
                          "program_sha256 values")
    if pinned is not None and digest != pinned.program_sha256:
        raise CheckFailed(f"the program cut from {pinned.file} has sha256 {digest}, but the manifest pins "
                          f"{pinned.program_sha256} for that log", "correct the manifest's program_sha256")
    if len(program) > MAX_PROGRAM_BYTES:
        raise CheckFailed(f"the program from {source} is {len(program) >> 20} MiB, larger than the "
                          f"{MAX_PROGRAM_BYTES >> 20} MiB any record's program could be; it is not parsed",
                          "use the record's unmodified program (or its log); correct a manifest that pins this one")
    try:
        split_program(program)  # a divider naming no plain .py file is refused here, before anything runs
        fp = program_fingerprint(program)
    except (SyntaxError, ValueError) as exc:
        raise CheckFailed(f"the program from {source} is not valid Python: {exc}",
                          "use the record's full, unmodified log or program") from None
    if record.program.fingerprint and fp != record.program.fingerprint:
        raise CheckFailed(f"the program from {source} has code fingerprint {fp}, but {record.name} pins "
                          f"{record.program.fingerprint}", "correct the manifest's program fingerprint")
    return RecordProgram(program, digest, fp, source, pinned.file if pinned else None)


def _read_source(path: Path) -> bytes:
    return read_bounded(path, MAX_LOG_BYTES, "log or program", "give the record's log or its train_gpt.py")


def _from_bytes(record: Record, data: bytes, source: str) -> RecordProgram:
    """A file or URL given by the user: one of the pinned logs, or one of the pinned programs."""
    digest = sha256_bytes(data)
    for pinned in record.logs:
        if digest == pinned.sha256:
            return _from_log(record, data, pinned, source)
    if digest in record.accepted_program_sha256:
        return _check_program(record, data, source, None)
    if cut_program(data) is not None:
        raise CheckFailed(f"{source} looks like a run log, but its sha256 {digest} is none of the "
                          f"{len(record.logs)} logs {record.name} pins",
                          "use one of the record's logs unchanged: " + ", ".join(log.file for log in record.logs))
    return _check_program(record, data, source, None)


def _from_clone(record: Record, root: Path) -> RecordProgram:
    up = record.upstream
    folders = [f for f in (up.folder, up.folder_after_rename) if f] + [""]
    for pinned in record.logs:
        for folder in folders:
            path = root / folder / pinned.file
            if path.is_file():
                return _from_log(record, _read_source(path), pinned, str(path))
    raise InputError(f"none of {record.name}'s logs is in {root}",
                     f"give a clone of {up.repository} (the log files are under {up.folder_after_rename or up.folder}) "
                     "or a folder holding the logs")


def resolve_program(record: Record, source: str | None = None) -> RecordProgram:
    """The record's program from `source` (URL, file, clone folder) or, by default, the pinned commit."""
    if not record.logs:
        raise InputError(f"{record.name} pins no logs, so no program can be verified",
                         f"add the record's logs (file, sha256, program_sha256) to {record.path}")
    if source is None:
        if not record.upstream.raw_url_template or not record.upstream.commit:
            raise InputError(f"{record.name} has no upstream raw_url_template and commit to fetch from",
                             "give --program-source with a local copy of a log or the program")
        pinned = record.logs[0]
        url = record.upstream.log_url(pinned.file)
        return _from_log(record, fetch(url), pinned, url)
    if source.startswith(("http://", "https://")):
        return _from_bytes(record, fetch(source), source)
    path = Path(source).expanduser().resolve()
    if path.is_dir():
        return _from_clone(record, path)
    if path.is_file() or kind_of(path) not in (None, "folder"):  # a FIFO or a device: _read_source names it
        return _from_bytes(record, _read_source(path), str(path))
    raise InputError(f"--program-source {source} is neither a URL, a file nor a folder",
                     "give a URL, a log or train_gpt.py file, or a clone of the upstream repository")
