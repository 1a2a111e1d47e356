"""The record's own training program, fetched and proven to be the one the record ran.

    program = resolve_program(load_record("2025-09-23_MuonCustomSizing"))          # from the pinned commit
    program = resolve_program(record, "~/src/modded-nanogpt")                      # a local clone
    program = resolve_program(record, "b067b4ac-72a6-4436-a6f8-ea51c1efeef3.txt")   # a log, or a train_gpt.py
    program = resolve_program(record, cache=ws.cache)    # a log `repro records fetch-logs` put there, else the URL
    program.text, program.sha256, program.fingerprint

Where the program comes from, in order: the source given (--program-source); the workspace's cache of published
logs (an offline GPU node relies on it); the pinned raw URL. It is always one of the manifest's selected runs (its
`logs:`, which the importer chose), never the log the upstream table links: that one may be a one-GPU run or lie
outside the selected folder. Whatever the source, the bytes are checked against the pinned sha256s.

The program is read out of a log by the one log reader (pipeline/records/logparse.py), in every layout the
history has: `<program>` "\n" + "="*100 + "\n" `<output>` (2024-12 on), the program between a leading and a
trailing separator line (2024). Since 2026 the program is a set of files, one after the other in the log
(`program.files`: train_gpt.py, triton_kernels.py, ...; pipeline/records/program_files.py): every file is
pinned by the program's sha256, and each carries its own. A log must match the manifest's pinned log sha256, and the
program cut from it one of the pinned program sha256s — otherwise nothing runs, and the error
says which hash differs and from what.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from pipeline.errors import CheckFailed, InputError, MissingDependency
from pipeline.hashing import sha256_bytes
from pipeline.records.identity import program_fingerprint
from pipeline.records.logparse import ParsedLog, parse_text
from pipeline.records.model import PublishedLog, Record
from pipeline.records.program_files import ProgramFile, split_program
from pipeline.regular_file import kind_of, read_bounded

FETCH_TIMEOUT_S = 60
MAX_LOG_BYTES = 64 << 20  # the record's logs are ~250 kB; anything this large is not one of them
MAX_PROGRAM_BYTES = 8 << 20  # the records' programs are ~100 kB; parsing 60 MB of Python takes gigabytes


@dataclass(frozen=True, kw_only=True)
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
    """The program a run log carries, in any of the history's layouts; None when it carries none."""
    return parse_text(log).program


def _is_log(parsed: ParsedLog) -> bool:
    """Run output (step lines, or a separator line), as opposed to a program file."""
    return bool(parsed.steps or parsed.vals) or not any(i.code in ("no_header", "empty") for i in parsed.issues)


def _no_program(record: Record, source: str) -> CheckFailed:
    carrying = [log.file for log in record.logs if log.program_sha256]
    return CheckFailed(f"this log holds no program: {source} carries only a run's output (no program text before "
                       "its first line of 100 '=')",
                       "give a log of the record that carries its program" +
                       (f" ({', '.join(carrying[:3])})" if carrying else "") + ", or its train_gpt.py")


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
        raise _no_program(record, source)
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
    split_program(program)  # a divider naming no plain .py file is refused here, before anything runs
    try:
        fp = program_fingerprint(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        # the pinned sha256 already proves it is the record's program: one this Python cannot parse (a grammar
        # newer than the fstrings.py backport serves) runs on the record's own Python all the same; only a smoke
        # cut needs the tree, and refuses on its own
        fp = ""
    if fp and record.program.fingerprint and fp != record.program.fingerprint:
        raise CheckFailed(f"the program from {source} has code fingerprint {fp}, but {record.name} pins "
                          f"{record.program.fingerprint}", "correct the manifest's program fingerprint")
    return RecordProgram(text=program, sha256=digest, fingerprint=fp, source=source,
                         log_file=pinned.file if pinned else None)


def _left_out(record: Record, digest: str) -> str:
    """Why the importer did not take this log as one of the record's runs, when it is one it left out."""
    left = [x for x in (record.imported.left_out if record.imported else ()) if x.get("sha256") == digest]
    return f"; the importer left it out of the record's runs: {left[0].get('detail') or left[0].get('reason')}" \
        if left else ""
def _read_source(path: Path) -> bytes:
    return read_bounded(path, MAX_LOG_BYTES, "log or program", "give the record's log or its train_gpt.py")


def _from_bytes(record: Record, data: bytes, source: str) -> RecordProgram:
    """A file or URL given by the user: one of the pinned logs, one of the pinned programs, or another log of the
    record's program (the table's linked log, say): the program is identified by its pinned sha256 first."""
    digest = sha256_bytes(data)
    for pinned in record.logs:
        if digest == pinned.sha256:
            return _from_log(record, data, pinned, source)
    if digest in record.accepted_program_sha256:
        return _check_program(record, data, source, None)
    parsed = parse_text(data, source)
    if parsed.program is None and _is_log(parsed):
        raise _no_program(record, source)
    if parsed.program is not None:
        if sha256_bytes(parsed.program) in record.accepted_program_sha256:
            return _check_program(record, parsed.program, source, None)
        raise CheckFailed(f"{source} looks like a run log, but neither it (sha256 {digest}) nor its program is one "
                          f"of the {len(record.logs)} runs {record.name} pins{_left_out(record, digest)}",
                          "use one of the record's logs unchanged: " +
                          ", ".join(log.file for log in record.logs[:3]) + (" ..." if len(record.logs) > 3 else ""))
    return _check_program(record, data, source, None)


def _from_clone(record: Record, root: Path) -> RecordProgram:
    """A clone of upstream, the record's folder, or the folder of its selected runs (which a table may link)."""

    up = record.upstream
    folders = [f for f in (up.folder, up.folder_after_rename) if f] + [""]
    for pinned in sorted(record.logs, key=lambda log: not log.program_sha256):  # a log that carries the program first
        for path in [root / folder / pinned.file for folder in folders] + [root / PurePosixPath(pinned.file).name]:
            if path.is_file():
                return _from_log(record, _read_source(path), pinned, str(path))
    raise InputError(f"none of {record.name}'s logs is in {root}",
                     f"give a clone of {up.repository} (the log files are under {up.folder_after_rename or up.folder}) "
                     "or a folder holding the logs")


def _from_cache(record: Record, cache: Path) -> RecordProgram | None:
    """The program from a selected run's log in the workspace's cache (`repro records fetch-logs`), if one is there."""
    from pipeline.records.published import cache_dir
    from pipeline.regular_file import read_bounded

    for pinned in (log for log in record.logs if log.program_sha256):
        path = cache_dir(record, cache) / pinned.file
        if path.is_file():
            data = read_bounded(path, MAX_LOG_BYTES, "cached log", f"delete {path} and fetch it again "
                                f"(`repro records fetch-logs {record.name}`)")
            return _from_log(record, data, pinned, str(path))
    return None


def resolve_program(record: Record, source: str | None = None, cache: Path | None = None) -> RecordProgram:
    """The record's program from `source` (URL, file, clone folder) or, by default, from a selected run's log in the
    workspace `cache`, else fetched from the pinned commit."""
    carrying = [log for log in record.logs if log.program_sha256]
    if not carrying:
        raise InputError(f"{record.name} pins no log that carries a program, so no program can be verified",
                         f"add the record's logs (file, sha256, program_sha256) to {record.path}")
    if source is None:
        found = _from_cache(record, Path(cache)) if cache is not None else None
        if found is not None:
            return found
        if not record.upstream.raw_url_template or not record.upstream.commit:
            raise InputError(f"{record.name} has no upstream raw_url_template and commit to fetch from",
                             "give --program-source with a local copy of a log or the program, or put its logs in "
                             f"the cache: `repro records fetch-logs {record.name} --from DIR`")
        url = record.upstream.log_url(carrying[0].file)
        return _from_log(record, fetch(url), carrying[0], url)
    if source.startswith(("http://", "https://")):
        return _from_bytes(record, fetch(source), source)
    path = Path(source).expanduser().resolve()
    if path.is_dir():
        return _from_clone(record, path)
    if path.is_file() or kind_of(path) not in (None, "folder"):  # a FIFO or a device: _read_source names it
        return _from_bytes(record, _read_source(path), str(path))
    raise InputError(f"--program-source {source} is neither a URL, a file nor a folder",
                     "give a URL, a log or train_gpt.py file, or a clone of the upstream repository")
