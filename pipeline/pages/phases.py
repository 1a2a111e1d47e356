"""Step time per window phase: the record's schedule grows the long attention window in equal thirds of
training (train/schedule.py: phase = len(schedule) x step / (1 + steps)), so each third costs a different
time per step and a mean over the whole run hides where a run is slower.

A phase's time per step is read from the log's clock (train_time) at its first and its last step line:
the step that opens a phase holds the window switch and is left out, as benchmarks/sidebyside.py does.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.records.logparse import StepPoint

PHASES = 3  # the record's window schedule has three long-window sizes


@dataclass(frozen=True)
class PhaseTime:
    phase: int  # 1-based
    first_step: int
    last_step: int
    ms_per_step: float | None  # None: fewer than two step lines inside the phase


def phase_of(step: int, scheduled_steps: int, phases: int = PHASES) -> int:
    return int(phases * min(step / (1 + scheduled_steps), 0.9999))


def phase_bounds(phase: int, scheduled_steps: int, phases: int = PHASES) -> tuple[int, int]:
    """First and last step of a 0-based phase, from the rule above (no loop: a log may claim any step count)."""
    first = -(-phase * (1 + scheduled_steps) // phases)
    last = -(-(phase + 1) * (1 + scheduled_steps) // phases) - 1
    return first, min(last, scheduled_steps)


def phase_times(steps: tuple[StepPoint, ...], scheduled_steps: int | None) -> tuple[PhaseTime, ...]:
    if not scheduled_steps or not steps:
        return ()
    out = []
    for phase in range(PHASES):
        first, last = phase_bounds(phase, scheduled_steps)
        inside = [p for p in steps if first < p.step <= last]  # the phase's opening step holds its switch
        ms = None
        if len(inside) >= 2 and inside[-1].step > inside[0].step:
            ms = (inside[-1].train_time_ms - inside[0].train_time_ms) / (inside[-1].step - inside[0].step)
        out.append(PhaseTime(phase + 1, first, last, ms))
    return tuple(out)
