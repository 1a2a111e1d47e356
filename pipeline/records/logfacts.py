"""What one published run log says, in every layout the speedrun has used since 2024.

    facts = read_log_facts(Path("records/track_1_short/2025-09-23_MuonCustomSizing/b067….txt"))
    facts.val_loss, facts.train_time_ms, facts.fingerprint, facts.torch, facts.missing

Three layouts (pipeline/records/logparse.py reads the current one; this module adds the older two):
- current (2025 on): `<program>` SEP `<header: Running Python/PyTorch/Triton, nvidia-smi>` SEP `<steps>`;
- late 2024: SEP `<program>` SEP `<header: "Running pytorch X compiled for CUDA Y", nvidia-smi>` SEP `<steps>`,
  step lines carrying `train_loss:`;
- mid 2024 (llm.c style): no program, no header, only `s:N trl:X` / `s:N tel:X` lines (tel = validation
  loss), and no train time at all.
A log is parsed for what it has; `missing` names what it lacks, so an old log is described, never refused.
Files are read up to MAX_LOG_BYTES (an untrusted file must not exhaust memory).
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from pipeline.hashing import sha256_bytes
from pipeline.records.identity import program_fingerprint
from pipeline.records.logparse import SEPARATOR, parse_text
from pipeline.records.program_files import program_file_pins

MAX_LOG_BYTES = 64 << 20
LOG_SUFFIXES = (".txt", ".log")

_TORCH_ANY_CASE = re.compile(r"^Running [Pp]y[Tt]orch (\S+) compiled for CUDA (\S+)", re.M)
_LLMC_VAL = re.compile(rb"^s:(\d+) tel:([\d.]+)\s*$", re.M)


@dataclass(frozen=True)
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
    files: tuple[dict, ...] = ()  # a program of several files: each one's name, sha256 and size


class LogUnreadable(Exception):
    """The file cannot be read at all (the caller turns this into a named warning)."""


def _late_2024_program(raw: bytes) -> bytes | None:
    """SEP program SEP header...: the first segment is the program when it is Python, not a header."""
    start = len(SEPARATOR) + 1
    cut = raw.find(b"\n" + SEPARATOR + b"\n", start)
    if cut < 0:
        return None
    segment = raw[start:cut]
    if segment.lstrip().startswith(b"Running"):
        return None
    try:
        ast.parse(segment)
    except (SyntaxError, ValueError):
        return None
    return segment + b"\n"


def _gpu_summary(table) -> tuple[str, int | None, str, str]:
    if table is None:
        return "", None, "", ""
    names = sorted({g.name for g in table.gpus})
    return (names[0] if len(names) == 1 else ", ".join(names)), len(table.gpus), table.driver, table.cuda


def facts_from_bytes(raw: bytes, file: str) -> LogFacts:
    parsed = parse_text(raw, file)
    text = raw.decode("utf-8", errors="replace")
    layout = "current"
    program = parsed.program
    if program is None and raw.startswith(SEPARATOR + b"\n"):
        program = _late_2024_program(raw)
        if program is not None:
            layout = "late-2024"
    torch, torch_cuda = parsed.torch or "", parsed.torch_cuda or ""
    if not torch and (m := _TORCH_ANY_CASE.search(text)):
        torch, torch_cuda = m.group(1), m.group(2)
        layout = "late-2024"
    val_loss = parsed.final_val_loss
    train_ms = parsed.train_time_ms
    warnings: list[str] = []
    scheduled = parsed.scheduled_steps
    llmc = _LLMC_VAL.findall(raw) if not parsed.vals else []
    if llmc:
        layout = "llmc"
        val_loss = float(llmc[-1][1])
        scheduled = int(llmc[-1][0])  # the llm.c format prints no schedule: its last validation step stands in
        warnings.append(f"llm.c-style log: the final validation loss is the last `tel` line (step {int(llmc[-1][0])}); "
                        "it prints no train time")
    elif not parsed.vals and not parsed.steps:
        layout = "unknown"
    fp = ""
    if program is not None:
        try:
            fp = program_fingerprint(program)
        except (SyntaxError, ValueError) as exc:
            warnings.append(f"the program text is not valid Python: {exc}")
    gpu_model, gpu_count, driver, cuda_driver = _gpu_summary(parsed.hardware)
    avg = parsed.vals[-1].train_time_ms / parsed.vals[-1].step if parsed.completed and parsed.vals[-1].step else None
    missing = [name for name, absent in (
        ("program", program is None), ("python version", not parsed.python),
        ("pytorch version", not torch), ("triton version", not parsed.triton),
        ("nvidia-smi table", parsed.hardware is None), ("final validation loss", val_loss is None),
        ("train time", train_ms is None)) if absent]
    if val_loss is None and layout != "llmc":
        # why the run has no final loss (truncated, crashed, empty): logparse's own words, a few of them
        warnings += [i.detail for i in parsed.issues if i.code != "unreadable_lines"][:3]
    return LogFacts(
        file=file, sha256=sha256_bytes(raw), size=len(raw),
        program_sha256=sha256_bytes(program) if program is not None else "",
        program_bytes=len(program) if program is not None else 0, fingerprint=fp,
        val_loss=val_loss, train_time_ms=train_ms, scheduled_steps=scheduled,
        step_avg_ms=round(avg, 2) if avg is not None else None, peak_allocated_mib=parsed.peak_allocated_mib,
        python=parsed.python or "", torch=torch, torch_cuda=torch_cuda, triton=parsed.triton or "",
        gpu_model=gpu_model, gpu_count=gpu_count, driver=driver, cuda_driver=cuda_driver,
        layout=layout, missing=tuple(missing), warnings=tuple(warnings),
        files=program_file_pins(program) if program is not None else ())


def read_log_facts(path: Path) -> LogFacts:
    """Facts of one log file; LogUnreadable when it cannot be read or is too large to be a run log."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_LOG_BYTES + 1)
    except OSError as exc:
        raise LogUnreadable(f"{path.name}: cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_LOG_BYTES:
        raise LogUnreadable(f"{path.name}: larger than {MAX_LOG_BYTES >> 20} MiB, not a run log")
    return facts_from_bytes(raw, path.name)


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
