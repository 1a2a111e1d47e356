"""The engine interface: what runs a campaign's jobs (Engine), the command lines every engine runs (Commands),
and what a scheduler says of a job (JobState). The engines themselves are pipeline/campaign/engines.py (local)
and pipeline/campaign/slurm.py; both import this module, and neither the other.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pipeline.campaign.model import Campaign, Submission
from pipeline.workspace import Workspace

# Scheduler states in which a job may still start or is running (anything else: it is over).
ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING",
                 "SIGNALING", "STAGE_OUT", "STOPPED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")


@dataclass(frozen=True)
class JobState:
    job: str  # "<job id>" (prepare) or "<array job id>_<task id>"
    state: str  # the scheduler's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
    node: str | None
    reason: str | None  # why pending, or None

    @property
    def active(self) -> bool:
        return self.state.split()[0].rstrip("+") in ACTIVE_STATES


@dataclass(frozen=True)
class Commands:
    """The command lines a campaign's jobs run: this Python, this workspace, the campaign folder."""

    python: str
    root: Path
    registry: Path
    folder: Path

    @classmethod
    def for_workspace(cls, ws: Workspace, campaign: Campaign) -> Commands:
        return cls(sys.executable, ws.root, ws.registry, campaign.folder)

    def _head(self) -> list[str]:
        return [self.python, "-m", "pipeline", "--root", str(self.root), "--registry", str(self.registry), "campaign"]

    def prepare(self, submission: int) -> list[str]:
        return self._head() + ["prepare", str(self.folder), "--submission", str(submission)]

    def task(self, submission: int, index: str) -> list[str]:
        """`index` is a number: the last argument, after `task_without_index`'s."""
        return self.task_without_index(submission) + [index]

    def task_without_index(self, submission: int) -> list[str]:
        """The task's command line up to its index: a job script appends the scheduler's index as its own shell
        word, so nothing in a path (a folder named INDEX...) is ever substituted."""
        return self._head() + ["task", str(self.folder), "--submission", str(submission), "--index"]


class Engine(Protocol):
    name: str

    def submit(self, campaign: Campaign, number: int, indices: list[int], commands: Commands, say,
               recorded: Callable[[Submission], None]) -> Submission:
        """Start the prepare step and one task per index; `recorded` gets the submission as soon as it is
        known (before the local engine runs anything, after Slurm accepted the jobs)."""

    def states(self, campaign: Campaign) -> dict[str, JobState]:
        """What the scheduler knows of the campaign's jobs, by job key (empty: nothing it tracks)."""

    def cancel(self, campaign: Campaign, say) -> list[str]:
        """Cancel every job of the campaign still pending or running; returns the job ids signalled."""
