"""The one reader of run logs, in every layout the speedrun has used since 2024: the record's own logs,
its history's, a submission's and our native trainer's. `verify`, the importer and `records check` all
read logs through this module, so none of them can see less than another.

    from pipeline.records.logparse import parse_log
    log = parse_log(Path("runs/.../log.txt"))
    log.final_val_loss, log.train_time_ms, log.hardware.gpus[0].name, log.layout

Layouts (`layout`):
- current (2025 on): `<program>` "\n" + "="*100 + "\n" `<header: Running Python/PyTorch/Triton, nvidia-smi>`
  "="*100 `<steps>`; late 2024 logs have the same shape with `Running pytorch` in lower case and
  `train_loss:` in their step lines;
- late-2024: "="*100 `<program>` "="*100 `<header>` "="*100 `<steps>` (the program after the first line);
- llmc (mid 2024, llm.c style): no program, no header, only `s:N trl:X` / `s:N tel:X` lines (tel is the
  validation loss). It prints no schedule, so its last validation step stands in for it, and no train time.
A log may lack the program (the fixtures start at the first "=" line), may be cut anywhere by a
crash, or may be empty: all of these parse, and `problems` says what is missing. Only an unreadable
file raises. A validation step printed twice (say, a final-loss line appended after the real one) is a
problem: which of the two the run printed cannot be told.

Logs are untrusted (a bundle's, a stranger's), so they are read line by line in bounded memory: a line
is read at most MAX_LINE bytes at a time, the program and the header are kept up to a cap each, at most
MAX_POINTS step and validation points are kept, and problems of one kind are counted, not listed. A
1 GiB log parses in a few MiB. Non-finite losses or times (nan, inf, 1e400) are problems: such a run is
never judged. A log already in memory (parse_text: the importer reads each one bounded) is read by a few scans
of the whole buffer instead, which give the same ParsedLog (see _Scan); a log of any unusual shape is read line
by line as above.
"""

from __future__ import annotations

import hashlib
import io
import math
import operator
import re
from array import array
from dataclasses import dataclass
from itertools import compress
from pathlib import Path
from typing import BinaryIO

from pipeline.errors import InputError, os_error
from pipeline.records.identity import shared_tree
from pipeline.records.nvidia_smi_table import NvidiaSmiTable, find_nvidia_smi_table

SEPARATOR = b"=" * 100
MAX_LINE = 64 << 10  # longer lines are read in pieces; a log line is never this long
MAX_LOG_FILE_BYTES = 64 << 20  # a run log is ~250 kB (a 2024 log with its program 1.6 MB)
MAX_PROGRAM = 16 << 20  # the record's program is 60 KB
MAX_HEADER = 1 << 20  # the environment block and nvidia-smi table: a few KB on 8 GPUs
MAX_POINTS = 100_000  # step + validation points kept (the record has 1,680 steps; ~10 MB at most)

# Upstream printed these in more than one case over the years ("Running pytorch", "Running python").
_PYTHON = re.compile(r"^Running Python (\S+)", re.M | re.I)
_TORCH = re.compile(r"^Running PyTorch (\S+) compiled for CUDA (\S+)", re.M | re.I)
_TRITON = re.compile(r"^Running Triton version (\S+)", re.M | re.I)
_NUMBER = rb"[-+]?(?:\d{1,400}(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d{1,5})?|[-+]?(?:nan|inf|infinity)"
# Step lines are matched as bytes (no decoding on the hot path); numbers are bounded in length so that no
# int() or float() of a hostile line can be slow or raise.
_VAL = re.compile(rb"^step:(\d{1,12})/(\d{1,12}) val_loss:(" + _NUMBER + rb") train_time:(\d{1,15})ms "
                  rb"step_avg:(" + _NUMBER + rb")ms\s*$", re.I)
# 2024 step lines carry the train loss before the time: `step:1/3200 train_loss:10.8 train_time:4005ms ...`
_STEP = re.compile(rb"^step:(\d{1,12})/(\d{1,12}) (?:train_loss:(?:" + _NUMBER + rb") )?train_time:(\d{1,15})ms "
                   rb"step_avg:(" + _NUMBER + rb")ms\s*$", re.I)
_LLMC = re.compile(rb"^s:(\d{1,12}) (tel|trl):(" + _NUMBER + rb")\s*$")
_PEAK = re.compile(rb"^peak memory allocated: (\d{1,12}) MiB reserved: (\d{1,12}) MiB\s*$")


@dataclass(frozen=True)
class ValPoint:
    step: int
    val_loss: float
    train_time_ms: int | None  # None in llm.c logs, which print no time


@dataclass(frozen=True)
class StepPoint:
    step: int
    train_time_ms: int
    step_avg_ms: float


@dataclass(frozen=True)
class LogIssue:
    """Something a log lacks or gets wrong: `code` for programs, `detail` for people."""

    code: str  # empty | no_header | smi_table | unreadable_lines | non_finite | too_many_points |
    #            schedule_disagrees | never_started | truncated | no_peak | duplicate_val
    detail: str


@dataclass(frozen=True, kw_only=True)
class ParsedLog:
    path: str
    log_sha256: str
    program: bytes | None  # the exact bytes before the first separator, when the log has them
    python: str | None
    torch: str | None
    torch_cuda: str | None
    triton: str | None
    hardware: NvidiaSmiTable | None
    steps: tuple[StepPoint, ...]
    vals: tuple[ValPoint, ...]
    scheduled_steps: int | None
    peak_allocated_mib: int | None
    peak_reserved_mib: int | None
    issues: tuple[LogIssue, ...]
    layout: str = "current"  # current | late-2024 | llmc | unknown (see the module docstring)

    @property
    def problems(self) -> tuple[str, ...]:
        return tuple(i.detail for i in self.issues)

    @property
    def last_step(self) -> int:
        last = [p.step for p in self.steps] + [v.step for v in self.vals]
        return max(last, default=0)

    @property
    def completed(self) -> bool:
        """The schedule ran to its end and the final validation was printed."""
        return (self.scheduled_steps is not None and bool(self.vals)
                and self.vals[-1].step == self.scheduled_steps)

    @property
    def final_val_loss(self) -> float | None:
        return self.vals[-1].val_loss if self.completed else None

    @property
    def train_time_ms(self) -> int | None:
        return self.vals[-1].train_time_ms if self.completed else None


class _Parser:
    """One pass over a log's lines; memory bounded by the caps above, whatever the input."""

    def __init__(self, path: str):
        self.path = path
        self.digest = hashlib.sha256()
        self.size = 0
        self.phase = "start"  # start -> program | lead -> body (header lines, then steps)
        self.program = bytearray()
        self.program_found: bytes | None = None
        self.header: list[str] = []
        self.header_bytes = 0
        self.in_steps = False
        self.steps: list[StepPoint] = []
        self.unread: tuple[int, int] | None = None  # the scan's steps left unread: (from where, how many)
        self.vals: list[ValPoint] = []
        self.last_point: int = 0
        self.dropped_points = 0
        self.latest_step: tuple | None = None  # the last step and validation seen past MAX_POINTS
        self.latest_val: tuple | None = None
        self.scheduled: set[int] = set()
        self.peak: tuple[int, int] | None = None
        self.unreadable = 0
        self.first_unreadable = ""
        self.non_finite: list[str] = []
        self.non_finite_count = 0
        self.saw_separator = False
        self.nonblank = False
        self.continuing = False  # the previous piece was part of an over-long line
        self.late_2024 = False  # the program came after a leading separator line
        self.llmc_last: int | None = None  # the last `s:N` step of an llm.c log
        self.val_steps: set[int] = set()
        self.repeated_vals: list[tuple[int, float]] = []

    # -- feeding ----------------------------------------------------------------------------------
    def feed(self, chunk: bytes, complete: bool) -> None:
        """One line (or one piece of an over-long line: `complete` is False for all but its last piece)."""
        self.digest.update(chunk)
        self.size += len(chunk)
        if not self.nonblank and chunk.strip():
            self.nonblank = True
        if self.phase == "start":
            if chunk.rstrip(b"\n") == SEPARATOR and chunk.endswith(b"\n"):
                # the header (fixtures, native logs) or, in late-2024 logs, the program follows
                self.phase, self.saw_separator = "lead", True
                return
            self.phase = "program"
        if self.phase in ("program", "lead"):
            if complete and chunk == SEPARATOR + b"\n" and (self.program.endswith(b"\n") or not self.program):
                self._end_of_first_segment()
                return
            if self.phase == "lead" and complete and self._closes_unterminated_program(chunk):
                # a 2024 program writes its code then the separator: code without a final newline (as the
                # pinned program is, cut from its log) leaves the separator at the end of its last line
                self.program += chunk[:-len(SEPARATOR) - 1] + b"\n"
                self._end_of_first_segment()
                return
            self.program += chunk
            if len(self.program) > MAX_PROGRAM:  # no separator within any plausible program: not one
                self._replay_program()
            return
        self._body_line(chunk, complete)

    def _closes_unterminated_program(self, chunk: bytes) -> bool:
        """A line `<last line of the program><separator>` after which what came so far reads as a program."""
        head = chunk[:-len(SEPARATOR) - 1]
        if not chunk.endswith(SEPARATOR + b"\n") or not head.strip() or head.endswith(b"="):
            return False
        return _is_program(bytes(self.program) + head)

    def _end_of_first_segment(self) -> None:
        """A separator closed the first segment: it is the program, unless a leading separator opened it and
        it reads as a header (a log that starts at its environment block)."""
        segment = bytes(self.program)
        if self.phase == "lead" and not _is_program(segment):
            self._replay_program()
            self._body_line(SEPARATOR + b"\n", True)
            return
        self.program_found = segment[:-1] if segment.endswith(b"\n") else segment
        self.late_2024 = self.phase == "lead"
        self.program = bytearray()
        self.phase, self.saw_separator = "body", True

    def _replay_program(self) -> None:
        """What looked like a program is no program: read those bytes as body lines."""
        buffered, self.program = bytes(self.program), bytearray()
        self.phase = "body"
        for line in io.BytesIO(buffered):
            for piece_start in range(0, len(line), MAX_LINE):
                piece = line[piece_start:piece_start + MAX_LINE]
                self._body_line(piece, piece_start + MAX_LINE >= len(line))

    def _body_line(self, chunk: bytes, complete: bool) -> None:
        continuing, self.continuing = self.continuing, not complete
        if continuing:  # the rest of an over-long line, already counted: its tail is not a line of its own
            return
        if not complete:
            self._unreadable(chunk[:80], overlong=True)
            return
        if chunk.startswith(b"step:"):  # the hot path: matched as bytes, nothing decoded
            self.in_steps = True
            self._step_line(chunk)
        elif chunk.startswith(b"s:") and (m := _LLMC.match(chunk)):
            self.in_steps = True
            self._llmc_line(*m.groups())
        elif m := _PEAK.match(chunk):
            self.peak = (int(m.group(1)), int(m.group(2)))
        elif not self.in_steps and self.header_bytes < MAX_HEADER:
            self.header.append(chunk.decode("utf-8", errors="replace").rstrip("\r\n"))
            self.header_bytes += len(chunk)

    def _unreadable(self, raw: bytes, overlong: bool = False) -> None:
        self.unreadable += 1
        if not self.first_unreadable:
            text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            self.first_unreadable = (f"a line longer than {MAX_LINE} bytes starting {text[:80]!r}" if overlong
                                     else repr(text[:80]))

    def _step_line(self, line: bytes) -> None:
        room = len(self.steps) + len(self.vals) < MAX_POINTS
        if m := _STEP.match(line):
            s, n, ms, avg = m.groups()
            # step_avg is the program's own quotient, nan at step 0 in 2024-25 logs by design; the verdict
            # uses train_time (an integer) and val_loss, so only those can make a run invalid
            step, avg_ms = int(s), float(avg)
            if room:
                self.steps.append(StepPoint(step, int(ms), avg_ms))
            else:  # past the cap only the latest point matters (a real log never gets here)
                self.dropped_points += 1
                self.latest_step = (step, int(ms), avg_ms)
        elif m := _VAL.match(line):
            s, n, loss, ms, avg = m.groups()
            step, val_loss, avg_ms = int(s), float(loss), float(avg)
            self._val_point(step, val_loss, int(ms), room)
        else:
            self._unreadable(line)
            return
        if len(self.scheduled) < 16:
            self.scheduled.add(int(n))
        if step > self.last_point:
            self.last_point = step

    def _val_point(self, step: int, val_loss: float, ms: int | None, room: bool) -> None:
        if not math.isfinite(val_loss):
            self._non_finite(step, "val_loss", val_loss)
        if step in self.val_steps:
            if len(self.repeated_vals) < 3:
                self.repeated_vals.append((step, val_loss))
        elif len(self.val_steps) < MAX_POINTS:
            self.val_steps.add(step)
        if room:
            self.vals.append(ValPoint(step, val_loss, ms))
        else:
            self.dropped_points += 1
            self.latest_val = (step, val_loss, ms)

    def _llmc_line(self, s: bytes, kind: bytes, value: bytes) -> None:
        step = int(s)
        room = len(self.steps) + len(self.vals) < MAX_POINTS
        if kind == b"tel":
            self._val_point(step, float(value), None, room)
        self.llmc_last = max(step, self.llmc_last or 0)
        self.last_point = max(step, self.last_point)

    def _non_finite(self, step: int, name: str, value: float) -> None:
        self.non_finite_count += 1
        if len(self.non_finite) < 3:
            self.non_finite.append(f"{name} {value} at step {step}")

    # -- the result -------------------------------------------------------------------------------
    def finish(self) -> ParsedLog:
        if self.phase == "program":  # the whole log was read without a separator line
            self._replay_program()
        llmc = self.llmc_last is not None and not self._has_steps()
        # issues are listed in the order a reader meets them: header, lines, schedule, the run's end
        problems = self._header_issues(llmc)
        text = "\n".join(self.header)
        try:
            hardware = find_nvidia_smi_table(text)
        except (InputError, ValueError) as exc:
            hardware = None
            problems.append(LogIssue("smi_table", f"the nvidia-smi table could not be read: {exc}"))
        problems += self._line_issues()
        scheduled_steps = self._scheduled_steps(llmc, problems)
        self._keep_latest_points()
        problems += self._ending_issues(scheduled_steps)
        peak = self.peak
        return ParsedLog(
            path=self.path, log_sha256=self.digest.hexdigest(), program=self.program_found, **_software(text),
            hardware=hardware, steps=tuple(self.steps), vals=tuple(self.vals), scheduled_steps=scheduled_steps,
            peak_allocated_mib=peak[0] if peak else None, peak_reserved_mib=peak[1] if peak else None,
            issues=tuple(problems), layout=self._layout(llmc))

    def _header_issues(self, llmc: bool) -> list[LogIssue]:
        if not self.nonblank:
            return [LogIssue("empty", "the log is empty")]
        if not self.saw_separator and not llmc:  # llm.c logs have no header by their format
            return [LogIssue("no_header", "no environment header (no line of 100 '=' found)")]
        return []

    def _line_issues(self) -> list[LogIssue]:
        """Step and validation lines that could not be read or cannot be trusted."""
        problems = []
        if self.unreadable:
            more = f" (and {self.unreadable - 1} more)" if self.unreadable > 1 else ""
            problems.append(LogIssue("unreadable_lines", "unreadable step line (cut by a crash?): "
                                                         f"{self.first_unreadable}{more}"))
        if self.non_finite_count:
            more = f" (and {self.non_finite_count - 3} more)" if self.non_finite_count > 3 else ""
            problems.append(LogIssue("non_finite", f"non-finite values: {', '.join(self.non_finite)}{more}"))
        if self.dropped_points:
            problems.append(LogIssue("too_many_points", f"more than {MAX_POINTS} step lines ({self.dropped_points} "
                                     "past the limit were not kept): not a log of a real run"))
        if self.repeated_vals:
            shown = ", ".join(f"step {s} (val_loss {v})" for s, v in self.repeated_vals)
            problems.append(LogIssue("duplicate_val", f"a validation step is printed more than once: {shown}; "
                                     "which value the run printed cannot be told"))
        return problems

    def _scheduled_steps(self, llmc: bool, problems: list[LogIssue]) -> int | None:
        """The step count the lines say was scheduled; lines that disagree are an issue and the largest stands."""
        if llmc and not self.scheduled and self.vals:
            self.scheduled.add(self.vals[-1].step)  # llm.c prints no schedule: its last validation stands in
        if len(self.scheduled) > 1:
            problems.append(LogIssue("schedule_disagrees", "step lines disagree on the scheduled step count: "
                                                           f"{sorted(self.scheduled)}"))
        return max(self.scheduled) if self.scheduled else None

    def _has_steps(self) -> bool:
        return bool(self.steps) or bool(self.unread and self.unread[1])

    def _keep_latest_points(self) -> None:
        """Past the point cap only the latest step and validation were remembered: they end the series."""
        if self.latest_step and self.steps:
            self.steps[-1] = StepPoint(*self.latest_step)
        if self.latest_val and self.vals:
            self.vals[-1] = ValPoint(*self.latest_val)

    def _ending_issues(self, scheduled_steps: int | None) -> list[LogIssue]:
        """How the run ended: never started, cut before its final validation, or without its peak memory line."""
        problems = []
        steps, vals = self._has_steps(), self.vals
        finished = scheduled_steps is not None and bool(vals) and vals[-1].step == scheduled_steps
        if self.nonblank and not steps and not vals:
            problems.append(LogIssue("never_started",
                                     "no step or validation lines: the run never reached its first step"))
        elif scheduled_steps is not None and not finished:
            problems.append(LogIssue("truncated", f"truncated: the last step reached is {self.last_point} of "
                                                  f"{scheduled_steps}, with no final validation"))
        if steps and self.peak is None and finished:
            problems.append(LogIssue("no_peak", "no 'peak memory' line after the final validation"))
        return problems

    def _layout(self, llmc: bool) -> str:
        if llmc:
            return "llmc"
        if not self._has_steps() and not self.vals:
            return "unknown"
        return "late-2024" if self.late_2024 else "current"


def _software(header: str) -> dict[str, str | None]:
    """The versions the environment header names, None where it names none."""
    def first(rx):
        m = rx.search(header)
        return m.groups() if m else None

    python, torch, triton = first(_PYTHON), first(_TORCH), first(_TRITON)
    return {"python": python[0] if python else None, "torch": torch[0] if torch else None,
            "torch_cuda": torch[1] if torch else None, "triton": triton[0] if triton else None}


def _is_program(segment: bytes) -> bool:
    """Python source, not an environment header (which starts `Running ...` and holds nvidia-smi's table)."""
    if segment.lstrip()[:8].lower().startswith(b"running") or not segment.strip():
        return False
    try:  # the one parser of programs: a record's 3.12 f-strings are a program too
        shared_tree(segment)  # the fingerprint of this program will not parse it again
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def parse_stream(stream: BinaryIO, path: str = "<log>") -> ParsedLog:
    """Parse a log from a binary stream, line by line."""
    parser = _Parser(path)
    while chunk := stream.readline(MAX_LINE):
        complete = chunk.endswith(b"\n") or len(chunk) < MAX_LINE
        parser.feed(chunk, complete)
    return parser.finish()


def parse_text(raw: bytes, path: str = "<log>") -> ParsedLog:
    """Parse a log held in memory: the same ParsedLog as parse_stream, found by whole-buffer scans (see _Scan)
    when the log has the usual shape, else by the line-by-line reading."""
    parser = _Parser(path)
    if _Scan(parser, raw).run():
        return parser.finish()
    return parse_stream(io.BytesIO(raw), path)


def parse_text_unread(raw: bytes, path: str = "<log>",
                      sha256: str | None = None) -> tuple[ParsedLog, tuple[int, int] | None]:
    """parse_text(raw, path) for a reader of everything but the steps (the importer: a log's facts never read them):
    (the log, None), or (the log without its steps, (at, count)) where dataclasses.replace(log,
    steps=steps_of(step_columns(raw, at))) is parse_text's log, of `count` steps. Every step line is still matched
    (an unreadable one, a schedule, a validation are the log's facts); only turning a million of them into numbers
    is left to the reader that wants them (`records check`, `verify`: log_cache.parsed_log), which was a tenth of a
    cold import. `sha256`: the hex digest of `raw`, when the caller has it."""
    parser = _Parser(path)
    if _Scan(parser, raw, unread=True, sha256=sha256).run():
        return parser.finish(), parser.unread
    return parse_stream(io.BytesIO(raw), path), None


def step_columns(raw: bytes, at: int) -> tuple[array, array, array]:
    """The step columns of the log `raw` from `at`, where parse_text_unread left them unread (a reader that
    checked that `raw` are that log's bytes: its steps lines were all matched then)."""
    return _step_columns(_POINTS.findall(raw, at))


class _Known:
    """A digest already computed, where the parser keeps its hash object (only its hexdigest is read)."""

    def __init__(self, hexdigest: str):
        self.value = hexdigest

    def hexdigest(self) -> str:
        return self.value


def steps_of(columns: tuple) -> tuple[StepPoint, ...]:
    """The StepPoints of step columns (step, train_time_ms, step_avg_ms)."""
    return tuple(map(StepPoint, *columns))


_AT_STEP, _AT_TIME, _AT_AVG, _AT_LOSS = (operator.itemgetter(i) for i in (0, 2, 3, 4))  # _POINTS' groups


def _step_columns(points: list[tuple]) -> tuple[array, array, array]:
    """The step lines of _POINTS' matches (validation lines left out) as int64, int64 and float64 columns:
    each number converted as the line reading converts it, int(...) and float(...)."""
    train = list(compress(points, map(operator.not_, map(_AT_LOSS, points))))  # a validation line has its loss
    return (array("q", map(int, map(_AT_STEP, train))), array("q", map(int, map(_AT_TIME, train))),
            array("d", map(float, map(_AT_AVG, train))))


# --- the same reading, by scans of the whole buffer --------------------------------------------------------
# A log of 200 kB is ~2,000 lines, mostly `step:` lines: feeding them one by one to _Parser was most of an import's
# time. _Scan finds the program, the header and the step lines with a few searches over the bytes and leaves the
# parser in the state its line-by-line reading would have left it in. It handles what real logs are (no over-long
# line, no llm.c line, step lines fewer than MAX_POINTS and all readable, at most 16 schedules) and declines the
# rest, which parse_stream reads; tests/test_logparse.py checks both readings agree on every log at hand.
_SEP_LINE = SEPARATOR + b"\n"
_WINDOW = (MAX_LINE - 1) // 2  # a line readline(MAX_LINE) could cut holds a whole window of this many bytes
_LINE_END = rb"[ \t\r\f\v]*$"  # `\s*$` of one line, within the whole buffer (re.M: $ is before each newline)
# _STEP's and _VAL's lines in one scan, each from its newline (a literal start: the scan skips to each `step:`)
_POINTS = re.compile(rb"\n(?-i:step:)(\d{1,12})/(\d{1,12}) (?:(?:train_loss:(?:" + _NUMBER + rb") )?"
                     rb"train_time:(\d{1,15})ms step_avg:(" + _NUMBER + rb")ms|val_loss:(" + _NUMBER + rb") "
                     rb"train_time:(\d{1,15})ms step_avg:(?:" + _NUMBER + rb")ms)" + _LINE_END, re.M | re.I)
_ZEROS = bytes.maketrans(b"123456789", b"000000000")  # a line's shape: its digits made 0
_PEAKS = re.compile(rb"\npeak memory allocated: (\d{1,12}) MiB reserved: (\d{1,12}) MiB" + _LINE_END, re.M)


def _has_long_line(raw: bytes) -> bool:
    """Could a line of `raw` be too long for readline(MAX_LINE)? (Some window of _WINDOW bytes has no newline.)"""
    return any(raw.find(b"\n", at, at + _WINDOW) < 0 for at in range(0, len(raw) - _WINDOW + 1, _WINDOW))


class _Scan:
    """parse_stream's reading of `raw` into `parser`, by scans (run() is False when this log is not one it reads)."""

    def __init__(self, parser: _Parser, raw: bytes, unread: bool = False, sha256: str | None = None):
        self.parser, self.raw, self.unread = parser, raw, unread
        self.sha256 = _Known(sha256) if sha256 else None  # the caller hashed these very bytes already

    def run(self) -> bool:
        raw, parser = self.raw, self.parser
        if not raw or len(raw) > MAX_LOG_FILE_BYTES or _has_long_line(raw):
            return False
        body = self._first_segment()
        if body is None or raw.startswith(b"s:", body) or raw.find(b"\ns:", body) >= 0:  # llm.c lines: declined
            return False
        parser.digest, parser.size = self.sha256 or hashlib.sha256(raw), len(raw)
        parser.nonblank = bool(raw.strip())
        return self._body(body)

    def _first_segment(self) -> int | None:
        """Where the body starts (len(raw): no body), the program and the phase set as the line reading sets
        them; None for a log this scan leaves to it."""
        raw, parser = self.raw, self.parser
        if not raw.startswith(_SEP_LINE):  # the program, up to the first separator line
            end = raw.find(b"\n" + _SEP_LINE)
            if end < 0:  # no separator line: all of it is body, once the program is given up at the end
                return 0 if len(raw) <= MAX_PROGRAM else None
            if end + 1 > MAX_PROGRAM:
                return None
            parser.program_found, parser.saw_separator, parser.phase = raw[:end], True, "body"
            return end + 1 + len(_SEP_LINE)
        return self._lead()

    def _lead(self) -> int | None:
        """A log that opens with a separator line: a 2024 program (closed by a separator, or by a separator at
        the end of its last line) or a header read as body."""
        raw, parser = self.raw, self.parser
        start = len(_SEP_LINE)
        parser.saw_separator = True
        found = raw.find(_SEP_LINE, start)
        while found >= 0:
            line = raw.rfind(b"\n", 0, found) + 1 if found > start else start
            if line - start > MAX_PROGRAM:
                return None
            head = raw[line:found]
            if line == found:  # a separator line: the program, unless it reads as a header
                if not _is_program(raw[start:line]):
                    return start
                segment = raw[start:line]
            elif head.strip() and not head.endswith(b"=") and _is_program(raw[start:line] + head):
                segment = raw[start:line] + head + b"\n"
            else:
                found = raw.find(_SEP_LINE, found + len(_SEP_LINE))
                continue
            parser.program_found, parser.late_2024, parser.phase = segment[:-1], True, "body"
            return found + len(_SEP_LINE)
        return len(raw) if len(raw) - start <= MAX_PROGRAM else None  # never closed: kept as program, unread

    def _body(self, start: int) -> bool:
        """The body's lines from `start`: the header ones fed to the parser, the step lines scanned."""
        raw, parser = self.raw, self.parser
        steps_at = raw.find(b"\nstep:", start - 1) + 1 if start else -1  # a body at the log's start: declined
        if raw.startswith(b"step:", start) or steps_at < 0:
            return False
        for line in io.BytesIO(raw[start:steps_at or len(raw)]):  # the header: a few dozen lines, as the parser reads
            parser._body_line(line, True)
        if not steps_at:
            return True
        parser.in_steps = True
        lines = raw.count(b"\nstep:", steps_at - 1)
        if lines >= MAX_POINTS:
            return False  # a cap reached: the line reading says where
        if not (self.unread and self._shapes(steps_at - 1, lines)) and not self._points(steps_at - 1, lines):
            return False
        if peaks := _PEAKS.findall(raw, steps_at - 1):
            parser.peak = (int(peaks[-1][0]), int(peaks[-1][1]))
        return True


    def _points(self, at: int, lines: int) -> bool:
        """The step lines from `at` (the newline before the first), each matched by _POINTS; False when one is not."""
        raw, parser = self.raw, self.parser
        points = _POINTS.findall(raw, at)
        if len(points) != lines:
            return False  # an unreadable step line: the line reading says which
        scheduled = {int(n) for n in {p[1] for p in points}}
        if len(scheduled) > 16:
            return False
        validations = list(compress(points, map(_AT_LOSS, points)))  # a validation line has its loss
        for s, _, _, _, loss, ms in validations:
            parser._val_point(int(s), float(loss), int(ms), True)
        parser.scheduled = scheduled
        vals = parser.vals
        if not self.unread:
            columns = _step_columns(points)
            parser.steps = list(steps_of(columns))
            parser.last_point = max([0, max(columns[0], default=0)] + [v.step for v in vals])
        else:
            parser.unread = (at, len(points) - len(validations))
            if not vals or vals[-1].step != max(scheduled):  # read only for a run cut short (_ending_issues)
                parser.last_point = max(map(int, map(_AT_STEP, points)))
        return True

    def _shapes(self, at: int, lines: int) -> bool:
        """_points' reading of a log whose step numbers stay unread, without matching each of its step lines: _POINTS
        tells digits by \\d only, so a line matches it exactly when its shape (each digit made 0) does, and a log's
        ~2,000 step lines have a dozen shapes. The validations are found by their text; a schedule shared by every
        line by counting it. False (nothing set): a log this cannot tell, read by _points."""
        raw, parser = self.raw, self.parser
        shapes = set(raw[at:].translate(_ZEROS).split(b"\n"))
        for shape in shapes:
            m = _POINTS.fullmatch(b"\n" + shape) if shape.startswith(b"step:") else True
            if m is None or (m is not True and m.group(5) and b" val_loss:" not in shape):
                return False  # an unreadable step line, or a validation in capitals the search below would miss
        first = _POINTS.match(raw, at)
        scheduled, width = first.group(2), len(first.group(2))
        # a valid step line holds one "/", before its schedule: when no other line holds "/<digits> " of that width,
        # counting "/<schedule> " counts the step lines that have that schedule
        if any(b"/" + b"0" * width + b" " in shape for shape in shapes if not shape.startswith(b"step:")) \
                or raw.count(b"/" + scheduled + b" ", at) != lines:
            return False
        validations = 0
        found = raw.find(b" val_loss:", at)
        while found >= 0:
            start = raw.rfind(b"\n", at, found)
            if raw.startswith(b"step:", start + 1):  # a step line: a validation (the shapes matched)
                s, _, _, _, loss, ms = _POINTS.match(raw, start).groups()
                parser._val_point(int(s), float(loss), int(ms), True)
                validations += 1
            end = raw.find(b"\n", found)
            found = raw.find(b" val_loss:", end) if end >= 0 else -1
        parser.scheduled, parser.unread, vals = {int(scheduled)}, (at, lines - validations), parser.vals
        if not vals or vals[-1].step != int(scheduled):  # read only for a run cut short (_ending_issues)
            parser.last_point = max(map(int, map(_AT_STEP, _POINTS.findall(raw, at))))
        return True


def log_program(path: Path) -> bytes | None:
    """parse_log(path).program, without building the log's steps when the memo has them (the importer's data need)."""
    return parse_log(path, steps=False).program


def parse_log(path: Path, *, steps: bool = True) -> ParsedLog:
    """The log at `path` (steps=False: maybe without its steps, for log_program)."""
    from pipeline.regular_file import open_regular

    path = Path(path)
    fix = "give the path of a run's log.txt or a run directory"
    def parse() -> ParsedLog:
        try:
            with open_regular(path, "log", fix) as f:
                return parse_stream(f, str(path))
        except OSError as exc:
            raise os_error(path, exc, "give the path of a run's log.txt or a run directory") from None

    from pipeline.records.log_cache import parsed_log  # a log read before (same sha256) is not parsed again

    return parsed_log(path, parse, steps=steps, read_steps=step_columns)
