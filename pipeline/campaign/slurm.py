"""The Slurm engine: plain `sbatch` of two generated job scripts per submission.

    CAMPAIGN/slurm/submit-N/prepare.sbatch   one job: image build/load + data fetch/generate, then verify
    CAMPAIGN/slurm/submit-N/tasks.sbatch     a job array, a task per missing run, --dependency=afterok:<prepare>

Why plain sbatch and not submitit: the scripts are the whole interface. A user reads them, resubmits one
by hand (`sbatch tasks.sbatch`), and squeue, scancel and sacct show exactly these jobs. submitit pickles a
Python callable into the shared folder instead, which nobody can read, ties each node's Python to the
submitter's pickle format, and adds a dependency for what is two `sbatch` calls. Each task `exec`s
`repro campaign task`, so the Python process is the job's main process: Slurm's SIGTERM (scancel, a
time limit) reaches it directly, and it marks the run aborted before SIGKILL follows KillWait later.

State comes from `squeue --states=all` (finished jobs stay there for MinJobAge) and, for jobs it no longer
knows, from `sacct` when the cluster keeps accounting; the run directories say the rest (status.py).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from pipeline.atomic import write_text
from pipeline.campaign.engine import Commands, JobState
from pipeline.campaign.model import Campaign, Submission
from pipeline.campaign.names import check_folder, check_partition
from pipeline.clock import utc_now
from pipeline.errors import InputError, MissingDependency, RunFailed

TIMEOUT_S = 60


def compact(indices: list[int]) -> str:
    """0,1,2,5,7,8 -> "0-2,5,7-8" (sbatch --array syntax)."""
    out, run = [], []
    for i in sorted(set(indices)):
        if run and i == run[-1] + 1:
            run.append(i)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [i]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ",".join(out)


def _header(campaign: Campaign, number: int, what: str) -> list[str]:
    return ["#!/bin/bash",
            f"# repro campaign {campaign.folder}: submission {number}, {what}.",
            "# Written by `repro campaign submit`: exactly what Slurm runs. `repro campaign submit --campaign "
            f"{campaign.folder}`",
            "# submits what is still missing."]


def _attempt_log(campaign: Campaign, stem: str) -> str:
    """A line that sends the rest of the job's output to a log of its own per attempt. A requeued job runs its
    script again under the same job id, and Slurm's %j / %A_%a file would then hold every attempt in one
    (appended: --open-mode=append; without it, truncated). `stem` holds only Slurm's variables."""
    logs = shlex.quote(str(campaign.logs_dir))
    return ("# each attempt (a requeued job runs again under the same id) writes its own log\n"
            f'exec >>{logs}/"{stem}.attempt-$(( ${{SLURM_RESTART_COUNT:-0}} + 1 )).out" 2>&1')


def prepare_script(campaign: Campaign, number: int, commands: Commands) -> str:
    s = campaign.slurm
    lines = _header(campaign, number, "the prepare job: the image (docker runtime) and the data, once, "
                                      "before the tasks")
    lines += [f"#SBATCH --job-name={campaign.folder.name}-prepare",
              f"#SBATCH --output={campaign.logs_dir}/prepare-%j.out", "#SBATCH --open-mode=append",
              "#SBATCH --nodes=1", "#SBATCH --ntasks=1", f"#SBATCH --time={s.prepare_time}"]
    lines += [f"#SBATCH --partition={s.partition}"] if s.partition else []
    lines += ["set -euo pipefail", _attempt_log(campaign, "prepare-${SLURM_JOB_ID}"),
              "exec " + shlex.join(commands.prepare(number))]
    return "\n".join(lines) + "\n"


def tasks_script(campaign: Campaign, number: int, indices: list[int], prepare_job: str, commands: Commands) -> str:
    s = campaign.slurm
    lines = _header(campaign, number, f"the runs: one array task per run index ({compact(indices)}), each one "
                                      "`repro train` writing its run directory under runs/")
    lines += [f"#SBATCH --job-name={campaign.folder.name}",
              f"#SBATCH --array={compact(indices)}",
              f"#SBATCH --dependency=afterok:{prepare_job}",
              "#SBATCH --kill-on-invalid-dep=yes",  # a failed prepare cancels the tasks instead of leaving them pending
              f"#SBATCH --output={campaign.logs_dir}/task-%A_%a.out", "#SBATCH --open-mode=append",
              f"#SBATCH --nodes={s.nodes_per_run}", "#SBATCH --ntasks=1", f"#SBATCH --time={s.time}"]
    if s.gpus_per_node:
        # a timed run needs the whole node to itself
        lines += [f"#SBATCH --gpus-per-node={s.gpus_per_node}", "#SBATCH --exclusive"]
    lines += [f"#SBATCH --partition={s.partition}"] if s.partition else []
    task = shlex.join(commands.task_without_index(number)) + ' "$SLURM_ARRAY_TASK_ID"'  # its own word, by position
    lines += ["set -euo pipefail", _attempt_log(campaign, "task-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}"),
              "# exec: the task is the job's main process, so scancel's SIGTERM reaches it and it records the run",
              "exec " + task]
    return "\n".join(lines) + "\n"


def _slurm(argv: list[str]) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except FileNotFoundError:
        raise MissingDependency(f"{argv[0]} is not installed here (no Slurm client)",
                                "run on a Slurm login node, or use --engine local") from None
    except subprocess.TimeoutExpired:
        raise MissingDependency(f"{argv[0]} did not answer in {TIMEOUT_S} s", "check that slurmctld is up: "
                                "`scontrol ping`") from None


def sbatch(script: Path) -> str:
    done = _slurm(["sbatch", "--parsable", str(script)])
    if done.returncode != 0:
        raise RunFailed(f"sbatch {script} failed: {done.stderr.strip()[-400:]}",
                        "check the partition and limits (`sinfo`), then submit again")
    job = done.stdout.strip().split(";")[0]
    if not job.isdigit():
        raise RunFailed(f"sbatch {script} answered {done.stdout.strip()!r}, not a job id", "submit again")
    return job


class SlurmEngine:
    name = "slurm"

    def submit(self, campaign: Campaign, number: int, indices: list[int], commands: Commands, say,
               recorded: Callable[[Submission], None]) -> Submission:
        if campaign.slurm.nodes_per_run != 1:
            raise InputError(f"--nodes-per-run {campaign.slurm.nodes_per_run}: a run is one `repro train`, which "
                             "starts torchrun --standalone on one node", "use --nodes-per-run 1 (8 GPUs of one node "
                             "is the record's setup)")
        check_folder(campaign.folder)  # both end up in #SBATCH lines, which no shell quoting protects
        check_partition(campaign.slurm.partition)
        folder = campaign.folder / "slurm" / f"submit-{number}"
        folder.mkdir(parents=True, exist_ok=True)
        campaign.logs_dir.mkdir(parents=True, exist_ok=True)
        prepare_file = folder / "prepare.sbatch"
        write_text(prepare_file, prepare_script(campaign, number, commands))
        prepare_job = sbatch(prepare_file)
        say(f"[submit] prepare job {prepare_job}: {prepare_file}")
        tasks_file = folder / "tasks.sbatch"
        write_text(tasks_file, tasks_script(campaign, number, indices, prepare_job, commands))
        try:
            array_job = sbatch(tasks_file)
        except BaseException:
            _slurm(["scancel", prepare_job])  # no tasks to prepare for
            raise
        say(f"[submit] array job {array_job} ({compact(indices)}), after job {prepare_job}: {tasks_file}")
        rel = [str(p.relative_to(campaign.folder)) for p in (prepare_file, tasks_file)]
        submission = Submission(number=number, submitted_at=utc_now(), engine=self.name, indices=tuple(indices),
                                train=campaign.train, prepare_job=prepare_job,
                                array_job=array_job, scripts=tuple(rel))
        recorded(submission)
        return submission

    def states(self, campaign: Campaign) -> dict[str, JobState]:
        ids = [j for s in campaign.submissions if s.engine == self.name for j in (s.prepare_job, s.array_job) if j]
        if not ids:
            return {}
        found = _squeue(ids)
        unknown = [j for j in ids if not any(k == j or k.startswith(f"{j}_") for k in found)]
        if unknown:
            found.update(_sacct(unknown))
        return found

    def cancel(self, campaign: Campaign, say) -> list[str]:
        states = self.states(campaign)
        ids = sorted({key.split("_")[0] for key, st in states.items() if st.active}, key=int)
        if ids:
            done = _slurm(["scancel", *ids])
            if done.returncode != 0:
                raise RunFailed(f"scancel {' '.join(ids)} failed: {done.stderr.strip()[-300:]}",
                                "cancel them by hand with scancel")
            say(f"[cancel] scancel {' '.join(ids)}")
        return ids


def _squeue_once(ids: list[str], tries: int = 3, pause_s: float = 2.0) -> subprocess.CompletedProcess:
    """One squeue call, retried when a busy controller times out (which is not an answer about the jobs)."""
    for attempt in range(tries):
        done = _slurm(["squeue", "-h", "-r", "--states=all", "-j", ",".join(ids), "-o", "%i|%T|%N|%r"])
        if done.returncode == 0 or "Invalid job id" in done.stderr or attempt == tries - 1:
            return done
        time.sleep(pause_s * (attempt + 1))
    return done


def _squeue(ids: list[str]) -> dict[str, JobState]:
    """Jobs slurmctld still holds (pending, running, and finished ones for MinJobAge), one line per array task."""
    found: dict[str, JobState] = {}
    for batch in ([ids], [[j] for j in ids]):  # all at once; one by one when one id is no longer known
        for group in batch:
            done = _squeue_once(group)
            if done.returncode != 0 and "Invalid job id" not in done.stderr:
                # not "the controller forgot this job": the controller is unreachable, and an empty answer
                # would read as "nothing queued" (and let a resubmission run tasks twice)
                raise MissingDependency(f"squeue failed: {done.stderr.strip()[-300:]}",
                                        "check that slurmctld answers (`scontrol ping`), then try again")
            if done.returncode != 0:
                continue
            for line in done.stdout.splitlines():
                parts = line.strip().split("|")
                if len(parts) == 4:
                    job, state, node, reason = parts
                    found[job] = JobState(job, state, node or None, None if reason in ("None", "") else reason)
        if all(any(k == j or k.startswith(f"{j}_") for k in found) for j in ids):
            break
    return found


def _sacct(ids: list[str]) -> dict[str, JobState]:
    """Finished jobs from accounting; {} when the cluster keeps none (AccountingStorageType=accounting_storage/none)."""
    done = _slurm(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,State,NodeList"])
    found: dict[str, JobState] = {}
    if done.returncode != 0:
        return found
    for line in done.stdout.splitlines():
        parts = line.strip().split("|")
        if len(parts) == 3 and parts[0]:
            node = None if parts[2] in ("", "None assigned") else parts[2]
            found[parts[0]] = JobState(parts[0], parts[1], node, None)
    return found
