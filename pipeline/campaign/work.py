"""What a campaign's jobs run: the prepare step (once, before the tasks) and one task (one run).

    repro campaign prepare CAMPAIGN          # Slurm: the dependency job; local: the first step
    repro campaign task CAMPAIGN --index I   # Slurm: array task I; local: run I, one after another

Both reuse the reproduce flow's stages (pipeline/reproduce/flow.py) and the train stage
(pipeline/runs/train_plan.py, train_run.py) rather than repeating them: the campaign is a reproduction whose runs are
spread over nodes. The prepare step builds (or loads) the image and fetches (or generates) the data,
then verifies it. Each task verifies the data again on its own node — a node that already holds it
verifies and does not fetch; a node-local folder that lacks it is filled under a lock — makes sure
the node's Docker engine has the image, records where it runs, and runs `repro train`, whose run
directory gets the node's preflight report. SIGTERM (scancel, a time limit: Slurm sends SIGTERM and
SIGKILL KillWait seconds later) ends the run as `aborted`, and the task still writes its record.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

from pipeline.campaign.model import Campaign, PrepareRecord, TaskRecord, TrainSettings, load_prepare
from pipeline.campaign.owner import owned
from pipeline.clock import utc_now
from pipeline.errors import CheckFailed, InputError, ReproError
from pipeline.records.model import load_record
from pipeline.reproduce.flow import Flow, ReproduceRequest, stage_data, stage_environment, train_request
from pipeline.runs.launch import interrupts_deferred, sigterm_as_interrupt
from pipeline.runs.rundir import RunDir, read_status
from pipeline.workspace import Workspace

Say = Callable[[str], None]


def reproduce_request(campaign: Campaign, train: TrainSettings | None = None) -> ReproduceRequest:
    """The campaign as the reproduce flow sees it: the same record, runs and configuration, its work folder
    being the campaign folder (so runs live in CAMPAIGN/runs/<record>/ and the bundle in CAMPAIGN/bundles/)."""
    t = train or campaign.train
    return ReproduceRequest(record=campaign.record, runs=campaign.runs, trainer=t.trainer, runtime=t.runtime,
                            preset=t.preset, overrides=tuple(t.overrides), nproc=t.nproc, python_env=t.python_env,
                            keep_going=True,
                            work_dir=campaign.folder, bundle_dir=campaign.folder / "bundles",
                            data_dir=campaign.data_dir, data_source=campaign.data.source,
                            synth=dict(campaign.data.synth) if campaign.data.synth else None,
                            image_tarball=Path(campaign.image_tarball) if campaign.image_tarball else None)


class StageValues:
    """What the flow's stages report through `state.set(section)` (pipeline/reproduce/state.py); a campaign
    keeps the sections in memory and writes its own records (prepare.json, the task files) instead of the
    reproduce state file."""

    def __init__(self):
        self.values: dict[str, object] = {}

    def set(self, section) -> None:
        self.values[section.STAGE] = section


def campaign_flow(ws: Workspace, campaign: Campaign, say: Say, terminal=None, train: TrainSettings | None = None,
                  **changes) -> Flow:
    """A reproduce flow over the campaign folder, for running the flow's own stages on it."""
    req = reproduce_request(campaign, train)
    if changes:
        req = replace(req, **changes)
    flow = Flow(ws=ws, req=req, record=load_record(campaign.record, ws.records_dir), state=StageValues(), say=say,
                terminal=terminal)
    flow.data_dir = campaign.data_dir
    return flow


def node_name() -> str:
    """The scheduler's name for this node (several slurmd 'nodes' may share one host), else the host name."""
    return os.environ.get("SLURMD_NODENAME") or socket.gethostname()


@contextlib.contextmanager
def data_lock(data_dir: Path) -> Iterator[None]:
    """One writer per data folder: two tasks on a node with a node-local folder must not both fetch into it."""
    lock = data_dir.parent / f".{data_dir.name}.lock"
    try:
        lock.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock, "a")  # closed by the with below
    except OSError as exc:
        raise InputError(f"cannot write beside the data folder {data_dir} ({exc.strerror}: {lock})",
                         "give the campaign a data folder this node can write (--data-dir)") from None
    with fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _data(flow: Flow) -> tuple[Path, str, str]:
    """(data folder, its lock digest, generated | fetched | verified): flow's data stage under the folder's lock."""
    with data_lock(flow.data_dir):
        stage_data(flow)
    data = flow.state.values["data"]  # the stage's typed section (DataState), not its sentence
    return flow.data_dir, data.lock_sha256, data.action


def image_tarball_path(campaign: Campaign, environment: str) -> Path:
    return campaign.image_dir / f"{environment}.tar.gz"


def prepare(ws: Workspace, campaign: Campaign, say: Say) -> PrepareRecord:
    """Once per submission, before any task: the image (docker) saved for other nodes, and the data."""
    flow = campaign_flow(ws, campaign, say)
    image_id = tarball = None
    outcome = stage_environment(flow)  # the image (docker), the venv (host), or nothing (host, system Python)
    say(f"[environment] {outcome.action}: {outcome.detail}")
    if campaign.train.runtime == "docker":
        from pipeline.env.image import save_image

        image_id = flow.image_state["image_id"]
        target = image_tarball_path(campaign, flow.record.environment)
        previous = load_prepare(campaign)
        if not (target.is_file() and previous is not None and previous.image_id == image_id):
            say(f"[image] saving {image_id[:19]}… to {target} for nodes whose engine lacks it")
            save_image(target, image_id)
        tarball = str(target.relative_to(campaign.folder))
    data_dir, digest, action = _data(flow)
    say(f"[data] {action}: {data_dir} (lock {digest[:12]}…)")
    prepared = PrepareRecord(finished_at=utc_now(), node=node_name(), data_dir=str(data_dir), data_lock_sha256=digest,
                             data_action=action, image_id=image_id, image_tarball=tarball)
    prepared.save(campaign)
    return prepared


def _ensure_image(campaign: Campaign, prepared: PrepareRecord, say: Say) -> str:
    """The prepared image on this node's engine: present, or loaded from the campaign's tarball."""
    from pipeline.env.image import connect, load_image

    client = connect()
    try:
        client.inspect_image(prepared.image_id)
        present = True
    except Exception:  # not on this engine (the SDK's NotFound, or an older engine's error): load it below
        present = False
    if present:
        say(f"[image] {prepared.image_id[:19]}… is on this node's engine")
        return prepared.image_id
    tarball = campaign.folder / (prepared.image_tarball or "")
    say(f"[image] loading {tarball} on {node_name()}")
    loaded = load_image(tarball, client=client)
    if loaded.image_id != prepared.image_id:
        raise CheckFailed(f"{tarball} holds image {loaded.image_id[:19]}…, not the prepared {prepared.image_id[:19]}…",
                          "submit the campaign again: the prepare job saves it anew")
    return prepared.image_id


def placement(campaign: Campaign, index: int, submission: int) -> TaskRecord:
    """Where this task runs, from the scheduler's environment (Slurm sets these in every task)."""
    env = os.environ
    array_job, task_id = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    restarts = env.get("SLURM_RESTART_COUNT", "0")
    slurm = env.get("SLURM_JOB_ID") is not None
    job = f"{array_job}_{task_id}" if slurm and array_job else env.get("SLURM_JOB_ID") if slurm \
        else f"local-{submission}"
    return TaskRecord(index=index, job=job, engine="slurm" if slurm else "local", node=node_name(),
                      hostname=socket.gethostname(), slurm_job_id=env.get("SLURM_JOB_ID"),
                      slurm_array_job_id=array_job, slurm_array_task_id=task_id, started_at=utc_now(),
                      attempt=1 + int(restarts) if slurm and restarts.isdigit() else 1)


def run_task(ws: Workspace, campaign: Campaign, index: int, submission: int, say: Say, terminal=None) -> TaskRecord:
    """One run of the campaign on this node. The task's record is written before anything can fail, so a
    task that never reached its run still says why; once the run exists, its run directory gets node.json."""
    if not 0 <= index < campaign.runs:
        raise InputError(f"task index {index} is outside this campaign's {campaign.runs} run(s)",
                         f"give an index from 0 to {campaign.runs - 1}")
    task = placement(campaign, index, submission)
    # held from before the record says running until after it says how the run ended: a reader that finds the
    # record running and the lock free knows this process is gone (owner.py)
    with owned(campaign.tasks_dir / task.owner_lock):
        task.save(campaign)
        say(f"[task {index}] {task.job} on node {task.node} (host {task.hostname})"
            + (f", attempt {task.attempt}" if task.attempt > 1 else ""))
        return _run_task(ws, campaign, task, submission, say, terminal)


def _run_task(ws: Workspace, campaign: Campaign, task: TaskRecord, submission: int, say: Say,
              terminal=None) -> TaskRecord:
    from pipeline.runs.train_plan import plan_train
    from pipeline.runs.train_run import run_train

    train = next((s.train for s in campaign.submissions if s.number == submission), campaign.train)

    def end(outcome: str, detail: str | None, run_dir: Path | None = None) -> TaskRecord:
        with interrupts_deferred():  # a second SIGTERM must not leave the record half-done
            done = replace(task, outcome=outcome, detail=detail, ended_at=utc_now())
            done.save(campaign)
            if run_dir is not None and run_dir.is_dir():
                done.save_in_run(run_dir)
        return done

    with sigterm_as_interrupt():
        try:
            prepared = load_prepare(campaign)
            if prepared is None:
                raise InputError(f"{campaign.folder} was not prepared (no prepare.json)",
                                 "submit the campaign again; the prepare step runs before the tasks")
            flow = campaign_flow(ws, campaign, say, terminal, train)
            data_dir, digest, action = _data(flow)
            if digest != prepared.data_lock_sha256:
                raise CheckFailed(f"the data in {data_dir} on node {task.node} has lock {digest[:12]}…, the prepared "
                                  f"data {prepared.data_lock_sha256[:12]}…", "remove that folder on this node and "
                                  "resubmit: the task fetches it again")
            say(f"[data] {action} on {task.node}: {data_dir}")
            image = _ensure_image(campaign, prepared, say) if train.runtime == "docker" else None
            if train.runtime == "host" and train.python_env == "venv":
                # the venv the prepare job built: reused where this node sees it, built from the same lock if not
                built = stage_environment(flow)
                say(f"[environment] {built.action} on {task.node}: {built.detail}")
            # the run the reproduce flow would make, with the image (or venv) this node was given
            request = replace(train_request(flow), image=image)
            if train.runtime == "docker" and campaign.slurm.gpus_per_node == 0:
                request = replace(request, gpus=0)
            plan = plan_train(request)
        except KeyboardInterrupt:
            return end("aborted-before-run", "interrupted (SIGTERM or Ctrl-C) before the run started")
        except ReproError as exc:
            end("failed-before-run", str(exc))
            raise
        except Exception as exc:  # a fault in repro itself: the record says so, the traceback goes to the job's log
            end("failed-before-run", f"{type(exc).__name__}: {exc}")
            raise
        task = replace(task, run_dir=str(plan.run_dir.relative_to(campaign.folder)))
        task.save(campaign)
        try:
            result = run_train(plan, terminal=terminal)
        except KeyboardInterrupt:  # outside run_train's own handling (say, as it created the run directory)
            with interrupts_deferred():
                if plan.run_dir.is_dir() and read_status(plan.run_dir) in ("running", "unknown"):
                    RunDir(plan.run_dir, plan.run_dir.name).finish("aborted", None)
            return end(_run_outcome(plan.run_dir, "aborted-before-run"), "interrupted", plan.run_dir)
        except ReproError as exc:
            end(_run_outcome(plan.run_dir, "failed-before-run"), str(exc), plan.run_dir)
            raise
        detail = f"exit code {result.exit_code}" if result.exit_code is not None else None
        return end(result.status, detail, plan.run_dir)


def _run_outcome(run_dir: Path, otherwise: str) -> str:
    """The run directory's status as a task outcome; `otherwise` when the run never got a status."""
    status = read_status(run_dir) if run_dir.is_dir() else "unknown"
    return status if status in ("running", "succeeded", "failed", "aborted") else otherwise
