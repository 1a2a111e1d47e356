"""What one published run log says, in every layout the speedrun has used since 2024.

    facts = read_log_facts(Path("records/track_1_short/2025-09-23_MuonCustomSizing/b067….txt"))
    facts.val_loss, facts.train_time_ms, facts.fingerprint, facts.torch, facts.missing

The reading is pipeline/records/logparse.py's (the one log reader, shared with `verify`); this module
only summarises it for the importer and for submissions. A log is described for what it has; `missing`
names what it lacks, so an old log is described, never refused. Files are read up to MAX_LOG_BYTES (an
untrusted file must not exhaust memory).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import ReproError
from pipeline.hashing import sha256_bytes
from pipeline.records.logparse import MAX_LOG_FILE_BYTES, ParsedLog, parse_text, parse_text_unread
from pipeline.records.program_files import program_file_pins
from pipeline.regular_file import read_bounded

MAX_LOG_BYTES = MAX_LOG_FILE_BYTES
LOG_SUFFIXES = (".txt", ".log")


@dataclass(frozen=True, kw_only=True)
class LogFacts:
    file: str
    sha256: str
    size: int
    program_sha256: str  # "" when the log carries no program text
    program_bytes: int
    fingerprint: str  # "" when there is no program or it is not valid Python
    val_loss: float | None  # the final validation loss, when the run completed and printed it
    train_time_ms: int | None
    scheduled_steps: int | None
    step_avg_ms: float | None
    peak_allocated_mib: int | None
    python: str
    torch: str
    torch_cuda: str
    triton: str
    gpu_model: str
    gpu_count: int | None
    driver: str
    cuda_driver: str
    layout: str  # current | late-2024 | llmc | unknown
    missing: tuple[str, ...]  # what this log lacks: program, header, final validation, train time, ...
    warnings: tuple[str, ...]
    problems: tuple[str, ...] = ()  # logparse issue codes that make the run unusable (BLOCKING)
    files: tuple[dict, ...] = ()  # a program of several files: each one's name, sha256 and size
    validations: int = 0  # validation points printed (a run's cadence: a diagnostic run validates far more often)


# What makes a completed log unusable as a run: its numbers cannot be trusted.
BLOCKING = ("non_finite", "duplicate_val", "schedule_disagrees", "too_many_points")


class LogUnreadable(Exception):
    """The file cannot be read at all (the caller turns this into a named warning)."""


def _gpu_summary(table) -> tuple[str, int | None, str, str]:
    if table is None:
        return "", None, "", ""
    names = sorted({g.name for g in table.gpus})
    return (names[0] if len(names) == 1 else ", ".join(names)), len(table.gpus), table.driver, table.cuda


def memo_fingerprint(program: bytes, sha256: str | None = None) -> str:
    """`sha256`: the program's hex digest, when the caller has it (a log's program is ~90 KB: hashed once)."""
    from pipeline.records.identity import program_fingerprint
    from pipeline.records.log_cache import program_fingerprint as remembered  # one walk per distinct program

    return remembered(program, program_fingerprint, sha256)


def facts_from_bytes(raw: bytes, file: str) -> LogFacts:
    return facts_from_parsed(raw, parse_text(raw, file), file)


def facts_from_parsed(raw: bytes, parsed: ParsedLog, file: str) -> LogFacts:
    """The facts of a log already parsed (pipeline/records/log_cache.py keeps the parse for `verify` too)."""
    program = parsed.program
    warnings: list[str] = []
    if parsed.layout == "llmc":
        warnings.append(f"llm.c-style log: the final validation loss is the last `tel` line (step "
                        f"{parsed.scheduled_steps}); it prints no train time")
    fp = ""
    program_sha256 = sha256_bytes(program) if program is not None else ""
    if program is not None:
        try:
            fp = memo_fingerprint(program, program_sha256)
        except (SyntaxError, ValueError) as exc:
            warnings.append(f"the program text is not valid Python: {exc}")
    gpu_model, gpu_count, driver, cuda_driver = _gpu_summary(parsed.hardware)
    last = parsed.vals[-1] if parsed.completed else None
    avg = last.train_time_ms / last.step if last and last.step and last.train_time_ms is not None else None
    val_loss, train_ms = parsed.final_val_loss, parsed.train_time_ms
    missing = [name for name, absent in (
        ("program", program is None), ("python version", not parsed.python),
        ("pytorch version", not parsed.torch), ("triton version", not parsed.triton),
        ("nvidia-smi table", parsed.hardware is None), ("final validation loss", val_loss is None),
        ("train time", train_ms is None)) if absent]
    if val_loss is None:
        # why the run has no final loss (truncated, crashed, empty): logparse's own words, a few of them
        warnings += [i.detail for i in parsed.issues if i.code != "unreadable_lines"][:3]
    return LogFacts(
        file=file, sha256=parsed.log_sha256, size=len(raw),  # the parse hashed these very bytes
        program_sha256=program_sha256,
        program_bytes=len(program) if program is not None else 0, fingerprint=fp,
        val_loss=val_loss, train_time_ms=train_ms, scheduled_steps=parsed.scheduled_steps,
        step_avg_ms=round(avg, 2) if avg is not None else None, peak_allocated_mib=parsed.peak_allocated_mib,
        python=parsed.python or "", torch=parsed.torch or "", torch_cuda=parsed.torch_cuda or "",
        triton=parsed.triton or "", gpu_model=gpu_model, gpu_count=gpu_count, driver=driver,
        cuda_driver=cuda_driver, layout=parsed.layout, missing=tuple(missing), warnings=tuple(warnings),
        problems=tuple(i.code for i in parsed.issues if i.code in BLOCKING),
        files=program_file_pins(program) if program is not None else (), validations=len(parsed.vals))


def read_log_facts(path: Path) -> LogFacts:
    """Facts of one log file; LogUnreadable when it cannot be read or is too large to be a run log."""
    path = Path(path)
    try:
        raw = read_bounded(path, MAX_LOG_BYTES, "log", "")
    except ReproError as exc:  # a FIFO, a device, over the limit, unreadable: described, never waited on
        raise LogUnreadable(f"{path.name}: {exc.what.removeprefix(f'{path}: ')}") from None
    from pipeline.records.log_cache import log_facts  # the memo of facts_from_bytes (keyed by the bytes' sha256)

    return log_facts(raw, path.name, parse=parse_text_unread, derive=facts_from_parsed, kind=LogFacts)


def logs_in(folder: Path) -> tuple[list[Path], list[str]]:
    """(the run logs directly in `folder`, the names of its subfolders), both sorted."""
    logs, subfolders = [], []
    for entry in sorted(Path(folder).iterdir()):
        if entry.is_dir():
            subfolders.append(entry.name)
        elif entry.is_file() and entry.suffix in LOG_SUFFIXES:
            logs.append(entry)
    return logs, subfolders


def most_common(values) -> object | None:
    counted = Counter(v for v in values if v not in (None, ""))
    return counted.most_common(1)[0][0] if counted else None
