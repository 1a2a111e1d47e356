"""Parse record-format run logs (trainer.md section 5) — the record's own and our native trainer's.

    from pipeline.records.logparse import parse_log
    log = parse_log(Path("runs/.../log.txt"))
    log.final_val_loss, log.train_time_ms, log.hardware.gpus[0].name

Layout: `<program>` "\n" + "="*100 + "\n" `<environment header + nvidia-smi>` "="*100 "\n" `<steps>`.
A log may lack the program (the fixtures start at the first "=" line), may be cut anywhere by a
crash, or may be empty: all of these parse, and `problems` says what is missing. Only an unreadable
file raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pipeline.errors import InputError
from pipeline.records.identity import sha256_bytes
from pipeline.records.nvidia_smi_table import NvidiaSmiTable, find_nvidia_smi_table

SEPARATOR = b"=" * 100

_PYTHON = re.compile(r"^Running Python (\S+)", re.M)
_TORCH = re.compile(r"^Running PyTorch (\S+) compiled for CUDA (\S+)", re.M)
_TRITON = re.compile(r"^Running Triton version (\S+)", re.M)
_VAL = re.compile(r"^step:(\d+)/(\d+) val_loss:([\d.]+|nan|inf) train_time:(\d+)ms step_avg:([\d.]+)ms\s*$")
_STEP = re.compile(r"^step:(\d+)/(\d+) train_time:(\d+)ms step_avg:([\d.]+)ms\s*$")
_PEAK = re.compile(r"^peak memory allocated: (\d+) MiB reserved: (\d+) MiB\s*$")


@dataclass(frozen=True)
class ValPoint:
    step: int
    val_loss: float
    train_time_ms: int


@dataclass(frozen=True)
class StepPoint:
    step: int
    train_time_ms: int
    step_avg_ms: float


@dataclass(frozen=True)
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
    problems: tuple[str, ...]

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


def _split(raw: bytes) -> tuple[bytes | None, bytes]:
    """Cut off the program: the bytes before the first separator line are the program."""
    if raw.startswith(SEPARATOR + b"\n"):
        return None, raw
    cut = raw.find(b"\n" + SEPARATOR + b"\n")
    if cut < 0:
        return None, raw
    return raw[:cut], raw[cut + 1:]


def parse_text(raw: bytes, path: str = "<log>") -> ParsedLog:
    problems: list[str] = []
    if not raw.strip():
        problems.append("the log is empty")
    program, rest = _split(raw)
    text = rest.decode("utf-8", errors="replace")
    if program is None and raw.strip() and not rest.startswith(SEPARATOR):
        problems.append("no environment header (no line of 100 '=' found)")

    def first(rx):
        m = rx.search(text)
        return m.groups() if m else None

    python, torch, triton = first(_PYTHON), first(_TORCH), first(_TRITON)
    try:
        hardware = find_nvidia_smi_table(text)
    except (InputError, ValueError) as exc:
        hardware = None
        problems.append(f"the nvidia-smi table could not be read: {exc}")

    steps: list[StepPoint] = []
    vals: list[ValPoint] = []
    scheduled: set[int] = set()
    peak = None
    for line in text.splitlines():
        if line.startswith("step:"):
            if m := _VAL.match(line):
                s, n, loss, ms, _ = m.groups()
                vals.append(ValPoint(int(s), float(loss), int(ms)))
                scheduled.add(int(n))
            elif m := _STEP.match(line):
                s, n, ms, avg = m.groups()
                steps.append(StepPoint(int(s), int(ms), float(avg)))
                scheduled.add(int(n))
            else:
                problems.append(f"unreadable step line (cut by a crash?): {line[:80]!r}")
        elif m := _PEAK.match(line):
            peak = (int(m.group(1)), int(m.group(2)))
    if len(scheduled) > 1:
        problems.append(f"step lines disagree on the scheduled step count: {sorted(scheduled)}")
    scheduled_steps = max(scheduled) if scheduled else None
    if raw.strip() and not steps and not vals:
        problems.append("no step or validation lines: the run never reached its first step")
    elif scheduled_steps is not None and not (vals and vals[-1].step == scheduled_steps):
        last = max([p.step for p in steps] + [v.step for v in vals], default=0)
        problems.append(f"truncated: the last step reached is {last} of {scheduled_steps}, "
                        "with no final validation")
    if steps and peak is None and vals and vals[-1].step == scheduled_steps:
        problems.append("no 'peak memory' line after the final validation")
    return ParsedLog(
        path=path, log_sha256=sha256_bytes(raw), program=program,
        python=python[0] if python else None, torch=torch[0] if torch else None,
        torch_cuda=torch[1] if torch else None, triton=triton[0] if triton else None,
        hardware=hardware, steps=tuple(steps), vals=tuple(vals), scheduled_steps=scheduled_steps,
        peak_allocated_mib=peak[0] if peak else None, peak_reserved_mib=peak[1] if peak else None,
        problems=tuple(problems))


def parse_log(path: Path) -> ParsedLog:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise InputError(f"log not found: {path}", "give the path of a run's log.txt or a run directory") from None
    except OSError as exc:
        raise InputError(f"cannot read log {path}: {exc.strerror}", "check the path and its permissions") from None
    return parse_text(raw, str(path))
