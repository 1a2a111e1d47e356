"""Engines: what runs a campaign's jobs. One small interface, two engines.

    engine = get_engine("slurm")                  # or "local"
    submission = engine.submit(campaign, number, indices, commands, say, recorded)
    engine.states(campaign)                       # {job key: JobState} the scheduler still knows
    engine.cancel(campaign, say)

Both run the same two commands (`Commands`): the prepare step once, then one task per missing run.
The Slurm engine (slurm.py) writes them into job scripts and submits a prepare job and a job array that
depends on it. The local engine runs them here, one after another, and returns when they are done:
the demo and CI path, and a machine without a scheduler.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Callable
from pathlib import Path

from pipeline.campaign.engine import Commands, Engine, JobState
from pipeline.campaign.model import Campaign, Submission
from pipeline.clock import utc_now
from pipeline.errors import Interrupted, RunFailed
from pipeline.regular_file import read_tail
from pipeline.runs.launch import interrupts_deferred

STOP_TIMEOUT_S = 90  # a task stopping its trainer waits up to 30 s for torchrun (runtime_host.STOP_TIMEOUT_S)

class LocalEngine:
    """This machine, one run after another; `submit` returns when the last task has ended."""

    name = "local"

    def submit(self, campaign: Campaign, number: int, indices: list[int], commands: Commands, say,
               recorded: Callable[[Submission], None]) -> Submission:
        campaign.logs_dir.mkdir(parents=True, exist_ok=True)
        submission = Submission(number=number, submitted_at=utc_now(), engine=self.name, indices=tuple(indices),
                                train=campaign.train)
        recorded(submission)
        self._run(commands.prepare(number), campaign.logs_dir / f"local-{number}-prepare.out", "prepare", say)
        failed = []
        for index in indices:
            log = campaign.logs_dir / f"local-{number}-task-{index}.out"
            code = self._run(commands.task(number, str(index)), log, f"task {index}", say, check=False)
            if code == 130:
                raise Interrupted(f"task {index} was interrupted; its run directory says aborted",
                                  f"submit again to run what is missing: repro campaign submit --campaign "
                                  f"{campaign.folder}")
            if code != 0:
                failed.append((index, log))
        if failed:  # here, submitting is running: say so as `repro train` would
            index, log = failed[0]
            more = f" (and {len(failed) - 1} more)" if len(failed) > 1 else ""
            raise RunFailed(f"task {index} ended failed{more}",
                            f"read {log}; `repro campaign status {campaign.folder}` lists every task, and "
                            f"`repro campaign submit --campaign {campaign.folder}` runs the missing ones again")
        return submission

    @staticmethod
    def _run(argv: list[str], log: Path, what: str, say, check: bool = True) -> int:
        say(f"[{what}] running here (output: {log})")
        with open(log, "ab") as out:
            # its own process group: a terminal's Ctrl-C reaches this process only, which passes on exactly one
            child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                     process_group=0)
            try:
                code = child.wait()
            except KeyboardInterrupt:
                code = _let_it_finish(child)
                say(f"[{what}] interrupted; it ended with exit code {code}, its run marked aborted")
                raise Interrupted(f"{what} was interrupted", "submit again to run what is missing") from None
        tail = read_tail(log, 64 << 10, "job log", "see the campaign's logs/").decode(
            "utf-8", errors="replace").strip().splitlines()[-1:] or [""]
        say(f"[{what}] exit code {code}: {tail[0][:160]}")
        if check and code != 0:
            raise RunFailed(f"the campaign's {what} step failed (exit code {code})", f"read {log}")
        return code

    def states(self, campaign: Campaign) -> dict[str, JobState]:
        return {}  # nothing is queued: submit ran everything before returning

    def cancel(self, campaign: Campaign, say) -> list[str]:
        say("the local engine queues nothing; stop a running `repro campaign submit` with Ctrl-C")
        return []


def _let_it_finish(child: subprocess.Popen, timeout_s: float = STOP_TIMEOUT_S) -> int:
    """After Ctrl-C: the task stops its trainer and records the run as aborted, however long that takes (up to
    `timeout_s`). Killing it at once would leave the run `running` (subprocess.run kills 0.25 s after a Ctrl-C)."""
    with interrupts_deferred():
        try:
            child.send_signal(signal.SIGINT)
            return child.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()  # its lock is then free, and `repro campaign status` marks the run aborted
            return child.wait()


def get_engine(name: str) -> Engine:
    if name == "slurm":
        from pipeline.campaign.slurm import SlurmEngine

        return SlurmEngine()
    if name == "local":
        return LocalEngine()
    from pipeline.errors import InputError

    raise InputError(f"unknown engine {name!r}", "use --engine slurm or --engine local")
