"""Where a campaign stands: per task, the scheduler's state and the run directories' own status.

    view = campaign_view(ws, campaign)  # CampaignView: prepare job, one TaskView per run index
    view.missing                        # indices without a run that counts (what a resubmission runs)
    wait(ws, campaign, poll_s=5)          # until the scheduler holds nothing of the campaign

A run counts when the reproduce flow would count it: it succeeded with a complete log and is of the
campaign's configuration (pipeline/reproduce/flow.py). A task whose process is gone without writing how
its run ended (SIGKILL after KillWait, a Ctrl-C'd or killed local engine, a lost node) is marked `aborted`
here: its lock is free (owner.py), or, for a record without one, the scheduler reports its job over.
So every run directory ends with a status, and `wait` and `collect` never wait on a run nobody runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline.campaign.engine import JobState
from pipeline.campaign.engines import get_engine
from pipeline.campaign.model import Campaign, TaskRecord, load_prepare, load_tasks, read_task
from pipeline.campaign.owner import ALIVE, GONE, owner_state
from pipeline.campaign.work import campaign_flow
from pipeline.clock import utc_now
from pipeline.errors import CheckFailed, ReproError
from pipeline.records.logparse import parse_log
from pipeline.reproduce.flow import Flow
from pipeline.runs.rundir import RunDir, RunMeta, read_status
from pipeline.workspace import Workspace

# Slurm marks a cancelled job over at once, while its processes still have KillWait seconds to finish; a task
# is taken for killed only when neither its record nor its run's output has changed for this long.
QUIET_S = 120


@dataclass(frozen=True, kw_only=True)
class RunView:
    run_id: str
    path: Path
    status: str
    counts: bool
    final_val_loss: float | None
    train_time_s: float | None


@dataclass(frozen=True, kw_only=True)
class TaskView:
    index: int
    job: str | None  # the latest job for this index
    scheduler: str | None  # its scheduler state (None: the scheduler does not know it, or the local engine)
    node: str | None
    reason: str | None
    outcome: str | None  # the latest task record's outcome
    runs: tuple[RunView, ...]  # every run directory of this index, oldest first
    detail: str | None
    # every task record of this index, oldest first: a submission's task, or one attempt of a requeued one
    attempts: tuple[TaskRecord, ...] = ()
    owner_alive: bool = False  # a task process of this index holds its lock: it is running now

    @property
    def done(self) -> bool:
        return any(r.counts for r in self.runs)

    @property
    def active(self) -> bool:
        if self.scheduler is not None and JobState(self.job or "", self.scheduler, None, None).active:
            return True
        return self.owner_alive  # the local engine's task running now (it has no scheduler state)


@dataclass(frozen=True)
class CampaignView:
    campaign: Campaign
    prepare: JobState | None
    prepared: bool
    tasks: tuple[TaskView, ...]

    @property
    def missing(self) -> list[int]:
        return [t.index for t in self.tasks if not t.done]

    @property
    def active(self) -> bool:
        return any(t.active for t in self.tasks) or (self.prepare is not None and self.prepare.active)

    def to_dict(self) -> dict:
        c = self.campaign
        return {"campaign": str(c.folder), "record": c.record, "runs_wanted": c.runs, "engine": c.engine,
                "done": c.runs - len(self.missing), "missing": self.missing, "active": self.active,
                "prepared": self.prepared,
                "prepare_job": None if self.prepare is None else vars(self.prepare),
                "tasks": [{"index": t.index, "job": t.job, "scheduler": t.scheduler, "node": t.node,
                           "reason": t.reason, "outcome": t.outcome, "done": t.done, "detail": t.detail,
                           "runs": [{"id": r.run_id, "path": str(r.path), "status": r.status, "counts": r.counts,
                                     "final_val_loss": r.final_val_loss, "train_time_s": r.train_time_s}
                                    for r in t.runs],
                           "attempts": [_attempt_dict(a) for a in t.attempts]}
                          for t in self.tasks]}


def _attempt_dict(task: TaskRecord) -> dict:
    return {"job": task.job, "attempt": task.attempt, "node": task.node, "outcome": task.outcome,
            "started_at": task.started_at, "run_id": _run_id(task), "detail": task.detail}


def _run_id(task: TaskRecord) -> str | None:
    return Path(task.run_dir).name if task.run_dir else None


def _run_view(campaign: Campaign, task: TaskRecord, flow: Flow) -> RunView | None:
    if task.run_dir is None:
        return None
    path = campaign.folder / task.run_dir
    if not path.is_dir():
        return None
    status = read_status(path)
    log = parse_log(path / "log.txt") if (path / "log.txt").is_file() else None
    time_s = log.train_time_ms / 1000 if log is not None and log.train_time_ms is not None else None
    return RunView(run_id=path.name, path=path, status=status, counts=status == "succeeded" and flow.counts(path),
                   final_val_loss=log.final_val_loss if log is not None else None, train_time_s=time_s)


def _quiet(campaign: Campaign, task: TaskRecord) -> bool:
    files = [campaign.tasks_dir / task.file_name]
    if task.run_dir is not None:
        files.append(campaign.folder / task.run_dir / "stdout.txt")
    newest = max((p.stat().st_mtime for p in files if p.exists()), default=0.0)
    return time.time() - newest > QUIET_S


def _mark_aborted(campaign: Campaign, task: TaskRecord, detail: str) -> TaskRecord:
    """The task's process is gone and never wrote how its run ended: say so in the run and the task record."""
    if task.run_dir is not None:
        path = campaign.folder / task.run_dir
        if path.is_dir() and read_status(path) == "running":
            with open(path / "stdout.txt", "ab") as out:
                out.write(f"[repro] {detail}: marked aborted by `repro campaign status`\n".encode())
            RunDir(path, path.name, meta=_meta_or_none(path)).finish("aborted", None)
    done = replace(task, outcome="aborted", ended_at=utc_now(), detail=detail)
    done.save(campaign)
    if task.run_dir is not None and (campaign.folder / task.run_dir).is_dir():
        done.save_in_run(campaign.folder / task.run_dir)
    return done


def _meta_or_none(run_dir: Path) -> RunMeta | None:
    """The run's run.yaml, to end it too; None when it is missing or unreadable (the status file still ends)."""
    try:
        return RunMeta.load_if_present(run_dir)
    except ReproError:
        return None


def _settled(campaign: Campaign, task: TaskRecord, known: JobState | None) -> tuple[TaskRecord, bool]:
    """(the task record, whether its process still runs). A record that says running is marked aborted when
    its owner's lock is free (the process is gone: Ctrl-C'd engine, SIGKILL, a crash), or, for a record
    without a lock, when the scheduler says its job is over and nothing has been written for QUIET_S."""
    if task.outcome != "running":
        return task, False
    with owner_state(campaign.tasks_dir / task.owner_lock) as owner:
        if owner == GONE:
            current = read_task(campaign.tasks_dir / task.file_name)  # under the lock: nobody else marks it now
            if current.outcome != "running":
                return current, False
            return _mark_aborted(campaign, current, f"the task's process ({current.job} on {current.node}) "
                                                    "ended without recording how its run ended"), False
    if owner == ALIVE:
        return task, True
    if known is not None and not known.active and _quiet(campaign, task):
        return _mark_aborted(campaign, task, f"the scheduler ended job {known.job} ({known.state}) before the "
                                             "task wrote its status"), False
    return task, False


def campaign_view(ws: Workspace, campaign: Campaign) -> CampaignView:
    # Slurm's view of every Slurm submission, even when the campaign has since moved to the local engine
    slurm_jobs = any(s.engine == "slurm" for s in campaign.submissions)
    states = get_engine("slurm").states(campaign) if slurm_jobs else {}
    tasks = load_tasks(campaign)
    flow = campaign_flow(ws, campaign, lambda line: None)
    latest_prepare = next((s.prepare_job for s in reversed(campaign.submissions) if s.prepare_job), None)
    views = []
    for index in range(campaign.runs):
        job = state = None
        for submission in reversed(campaign.submissions):
            if index in submission.indices and submission.array_job:
                job = f"{submission.array_job}_{index}"
                state = states.get(job)
                break
        settled = [_settled(campaign, t, states.get(t.job)) for t in tasks if t.index == index]
        mine = [t for t, _ in settled]
        runs = tuple(r for r in (_run_view(campaign, t, flow) for t in mine) if r is not None)
        last = mine[-1] if mine else None
        node = (state.node if state is not None else None) or (last.node if last else None)
        views.append(TaskView(index=index, job=job or (last.job if last else None),
                              scheduler=state.state if state else None, node=node,
                              reason=state.reason if state else None, outcome=last.outcome if last else None, runs=runs,
                              detail=last.detail if last else None, attempts=tuple(mine),
                              owner_alive=any(alive for _, alive in settled)))
    prepare = states.get(latest_prepare) if latest_prepare else None
    return CampaignView(campaign, prepare, load_prepare(campaign) is not None, tuple(views))


def render(view: CampaignView) -> str:
    c = view.campaign
    jobs = ", ".join(f"#{s.number}: prepare {s.prepare_job} array {s.array_job}" if s.array_job else
                     f"#{s.number}: local" for s in c.submissions) or "none yet"
    lines = [f"campaign {c.folder}", f"  record {c.record}; {c.runs - len(view.missing)} of {c.runs} run(s) done; "
                                     f"engine {c.engine}; submissions {jobs}"]
    if view.prepare is not None:
        lines.append(f"  prepare job {view.prepare.job}: {view.prepare.state}"
                     + (f" on {view.prepare.node}" if view.prepare.node else "")
                     + (f" ({view.prepare.reason})" if view.prepare.reason else ""))
    lines.append(f"  {'task':<5} {'job':<12} {'scheduler':<24} {'node':<10} {'outcome':<19} runs")
    for t in view.tasks:
        runs = "; ".join(f"{r.run_id} {r.status}" + (f" loss {r.final_val_loss:.4f}" if r.final_val_loss else "")
                         + (" (counts)" if r.counts else " (another configuration or code)"
                            if r.status == "succeeded" else "") for r in t.runs) or "—"
        sched = (t.scheduler or "—") + (f" ({t.reason})" if t.reason and t.scheduler == "PENDING" else "")
        lines.append(f"  {t.index:<5} {t.job or '—':<12} {sched:<24} {t.node or '—':<10} {t.outcome or '—':<19} {runs}")
        if t.detail and t.outcome in ("failed-before-run", "aborted-before-run"):
            lines.append(f"        {t.detail.splitlines()[0][:200]}")
        if len(t.attempts) > 1:  # a resubmitted or requeued task: every attempt, oldest first
            for a in t.attempts:
                lines.append(f"        attempt {a.job}" + (f" #{a.attempt}" if a.attempt > 1 else "")
                             + f" on {a.node} at {a.started_at}: {a.outcome}" + (f", run {_run_id(a)}" if a.run_dir
                                                                                  else ""))
    return "\n".join(lines)


def wait(ws: Workspace, campaign: Campaign, poll_s: float = 5.0, timeout_s: float | None = None,
         say: Callable[[str], None] = lambda line: None) -> CampaignView:
    """Poll until the scheduler holds nothing of the campaign that may still run; print changes."""
    started, last = time.monotonic(), None
    while True:
        view = campaign_view(ws, campaign)
        summary = (len(view.missing), tuple((t.scheduler, t.outcome) for t in view.tasks))
        if summary != last:
            counts: dict[str, int] = {}
            for t in view.tasks:
                key = t.scheduler or t.outcome or "not started"
                counts[key] = counts.get(key, 0) + 1
            say(f"[wait] {campaign.runs - len(view.missing)} of {campaign.runs} done; "
                + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
            last = summary
        if not view.active:
            return view
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise CheckFailed(f"the campaign's jobs are still queued or running after {timeout_s:.0f} s",
                              f"wait longer, or see `repro campaign status {campaign.folder}`")
        time.sleep(poll_s)
