"""`repro campaign --engine slurm` on a real Slurm cluster: slurmctld and two slurmd nodes on this host
(tests/ci/slurm.sh, started by `make slurm-cluster` and .ci/run).

Skipped, with the reason, when no cluster answers; with REPRO_REQUIRE_SLURM=1 (CI) they fail instead.
Each run is the tiny preset cut to a few steps, so the time goes to process start-up and scheduling.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.campaign_helpers import (
    QUICK,
    bundle_manifest,
    bundle_members,
    bundle_of,
    explain,
    repro,
    run_started,
    task_record,
    trainer_pid,
)

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def _cluster_problem() -> str | None:
    try:
        ping = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=30)
        nodes = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"no Slurm client here ({exc})"
    if ping.returncode != 0 or "UP" not in ping.stdout:
        return f"slurmctld does not answer: {ping.stdout.strip() or ping.stderr.strip()}"
    usable = [line for line in nodes.stdout.splitlines() if line.split()[-1].rstrip("*") in
              ("idle", "mixed", "allocated", "completing")]
    if len(usable) < 2:
        return f"fewer than two usable Slurm nodes: {nodes.stdout.strip()!r}"
    return None


@pytest.fixture(scope="module", autouse=True)
def slurm_cluster():
    problem = _cluster_problem()
    if problem is None:
        return
    if os.environ.get("REPRO_REQUIRE_SLURM") == "1":
        pytest.fail(f"REPRO_REQUIRE_SLURM=1 but {problem}")
    pytest.skip(f"{problem}; `make slurm-cluster` starts a one-host cluster (as root)")


def _status(root: Path, folder: Path) -> dict:
    done = repro(root, "campaign", "status", str(folder), "--json")
    assert done.returncode == 0, explain(done)
    return json.loads(done.stdout)


def _wait(root: Path, folder: Path) -> subprocess.CompletedProcess:
    return repro(root, "campaign", "wait", str(folder), "--poll", "1", "--timeout", "400")


def test_four_run_campaign_with_a_cancelled_a_failed_and_a_never_started_task_is_completed_and_collected(tmp_path):
    folder = tmp_path / "campaign"
    submitted = repro(tmp_path, "campaign", "submit", *QUICK, "--runs", "4", "--engine", "slurm",
                      "--campaign", str(folder))
    assert submitted.returncode == 0, explain(submitted)
    assert "(0-3), after job" in submitted.stdout
    array = yaml_submissions(folder)[0]["array_job"]

    # task 3 is cancelled while it waits for the prepare job: it never starts
    assert subprocess.run(["scancel", f"{array}_3"], timeout=30).returncode == 0
    # task 0 is cancelled mid-run: Slurm's SIGTERM reaches the task, which ends its run as aborted
    cancelled = task_record(folder, 0, until=lambda t: run_started(folder, t))
    assert subprocess.run(["scancel", cancelled["job"]], timeout=30).returncode == 0
    # task 1 fails: its trainer is killed outright (as the OOM killer would)
    failing = task_record(folder, 1, until=lambda t: t.get("run_dir") is not None)
    os.kill(trainer_pid(folder / failing["run_dir"]), signal.SIGKILL)

    waited = _wait(tmp_path, folder)
    assert waited.returncode == 1 and "3 run(s) did not succeed" in waited.stderr, explain(waited)
    status = _status(tmp_path, folder)
    assert status["missing"] == [0, 1, 3] and status["prepare_job"]["state"] == "COMPLETED"
    states = [(t["scheduler"], t["outcome"]) for t in status["tasks"]]
    # Slurm forgets an array element cancelled before it started (without accounting nothing records it):
    # neither the scheduler nor the campaign has anything for task 3, which is simply missing.
    assert states == [("CANCELLED", "aborted"), ("FAILED", "failed"), ("COMPLETED", "succeeded"),
                      (None, None)], states
    assert [len(t["runs"]) for t in status["tasks"]] == [1, 1, 1, 0]
    aborted_run = folder / cancelled["run_dir"]
    assert (aborted_run / "status").read_text().strip() == "aborted"
    assert (folder / failing["run_dir"] / "status").read_text().strip() == "failed"
    prepared = json.loads((folder / "prepare.json").read_text())
    assert prepared["data_action"] == "generated"

    # resubmitted: only the three missing tasks run
    again = repro(tmp_path, "campaign", "submit", "--campaign", str(folder))
    assert again.returncode == 0 and "run(s) 0, 1, 3 of 4" in again.stdout, explain(again)
    assert "#SBATCH --array=0-1,3\n" in (folder / "slurm" / "submit-2" / "tasks.sbatch").read_text()
    waited = _wait(tmp_path, folder)
    assert waited.returncode == 0, explain(waited)
    status = _status(tmp_path, folder)
    assert status["done"] == 4 and {t["node"] for t in status["tasks"]} == {"node1", "node2"}
    nothing = repro(tmp_path, "campaign", "submit", "--campaign", str(folder))
    assert "nothing to submit" in nothing.stdout, explain(nothing)
    # every task found the prepared data and verified it rather than generating it again
    logs = list((folder / "logs").glob("task-*.attempt-*.out"))  # each attempt's own log (slurm.py)
    assert len(logs) >= 4
    for log in logs:
        assert "[data] verified on node" in log.read_text(), log

    collected = repro(tmp_path, "campaign", "collect", str(folder))
    assert "bundle verified" in collected.stdout, explain(collected)
    assert "| node1 |" in collected.stdout and "| node2 |" in collected.stdout  # the per-node table
    bundle = bundle_of(folder)
    checked = repro(tmp_path, "bundle", "verify", str(bundle))
    assert checked.returncode == 0 and "bundle verified" in checked.stdout, explain(checked)
    manifest = bundle_manifest(bundle)
    assert [r["status"] for r in manifest["runs"]] == ["succeeded"] * 4
    assert sorted(a["status"] for a in manifest["attempts"]) == ["aborted", "failed"]
    assert aborted_run.name in {a["id"] for a in manifest["attempts"]}
    members = bundle_members(bundle)
    nodes = [json.loads(v) for k, v in members.items() if k.endswith("/node.json")]
    assert sorted(n["index"] for n in nodes) == [0, 0, 1, 1, 2, 3]
    assert {n["node"] for n in nodes} == {"node1", "node2"} and {n["engine"] for n in nodes} == {"slurm"}
    assert all(n["slurm_job_id"] and n["slurm_array_task_id"] == str(n["index"]) for n in nodes)
    for run in manifest["runs"]:  # every run ran preflight on its node
        assert f"runs/{run['id']}/preflight.json" in members
    table = members["campaign/nodes.md"].decode()  # the per-node table, inside the bundle
    assert table.count("| node1 |") >= 1 and table.count("| node2 |") >= 1
    assert len(yaml_submissions_of(members["campaign/campaign.yaml"])) == 2


def yaml_submissions(folder: Path) -> list[dict]:
    return yaml_submissions_of((folder / "campaign.yaml").read_bytes())


def yaml_submissions_of(text: bytes) -> list[dict]:
    import yaml

    return yaml.safe_load(text)["submissions"]


def test_cancelling_the_campaign_leaves_every_run_directory_with_a_status(tmp_path):
    folder = tmp_path / "campaign"
    submitted = repro(tmp_path, "campaign", "submit", *QUICK, "--runs", "2", "--engine", "slurm",
                      "--campaign", str(folder))
    assert submitted.returncode == 0, explain(submitted)
    runs = [folder / task_record(folder, i, until=lambda t: run_started(folder, t))["run_dir"] for i in (0, 1)]
    cancelled = repro(tmp_path, "campaign", "cancel", str(folder))  # scancel of every job of the campaign
    assert cancelled.returncode == 0 and "scancel" in cancelled.stdout, explain(cancelled)
    waited = _wait(tmp_path, folder)
    assert waited.returncode == 1, explain(waited)
    assert [(run / "status").read_text().strip() for run in runs] == ["aborted", "aborted"]
    status = _status(tmp_path, folder)
    assert [(t["scheduler"], t["outcome"]) for t in status["tasks"]] == [("CANCELLED", "aborted")] * 2
    nothing = repro(tmp_path, "campaign", "cancel", str(folder))
    assert "nothing of the campaign is queued or running" in nothing.stdout, explain(nothing)


def test_a_failed_prepare_job_cancels_the_tasks_and_wait_says_why(tmp_path):
    folder = tmp_path / "campaign"
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the data's parent folder should be\n")
    submitted = repro(tmp_path, "campaign", "submit", *QUICK, "--runs", "2", "--engine", "slurm",
                      "--campaign", str(folder), "--data-dir", str(blocked / "synth"))
    assert submitted.returncode == 0, explain(submitted)
    waited = _wait(tmp_path, folder)
    assert waited.returncode == 1 and "ended FAILED, so no task ran" in waited.stderr, explain(waited)
    (log,) = (folder / "logs").glob("prepare-*.attempt-1.out")
    assert "cannot write beside the data folder" in log.read_text()
    assert f"read {log}," in waited.stderr  # wait names the log that says why
    status = _status(tmp_path, folder)
    assert status["prepare_job"]["state"] == "FAILED" and status["missing"] == [0, 1] and not status["active"]
    assert not (folder / "tasks").exists()  # --kill-on-invalid-dep: no task started


def test_a_task_killed_before_it_could_write_its_status_is_marked_aborted_once_slurm_says_its_job_is_over(tmp_path):
    from pipeline.campaign.model import (
        Campaign,
        DataSettings,
        SlurmSettings,
        Submission,
        TaskRecord,
        TrainSettings,
        load_campaign,
    )

    # a real array job that is over: the stand-in for a task SIGKILLed after KillWait, or on a lost node
    job = subprocess.run(["sbatch", "--parsable", "--array=0", "-o", "/dev/null", "--wrap", "true"],
                         capture_output=True, text=True, timeout=30)
    assert job.returncode == 0, job.stderr
    array = job.stdout.strip().split(";")[0]
    deadline = time.monotonic() + 120
    while "COMPLETED" not in subprocess.run(["squeue", "-h", "-r", "--states=all", "-j", array, "-o", "%T"],
                                            capture_output=True, text=True, timeout=30).stdout:
        assert time.monotonic() < deadline, f"job {array} did not complete"
        time.sleep(0.5)
    folder = tmp_path / "campaign"
    train = TrainSettings(trainer="native", runtime="host", preset="tiny", overrides=(), nproc=1)
    Campaign(folder=folder, record="demo-cpu-synth", runs=1, engine="slurm", train=train,
             data=DataSettings(str(folder / "data" / "synth")),
             slurm=SlurmSettings(partition=None, nodes_per_run=1, gpus_per_node=0), image_tarball=None,
             submissions=(Submission(number=1, submitted_at="2026-01-01T00:00:00Z", engine="slurm", indices=(0,),
                                     train=train,
                                                          prepare_job=None, array_job=array),)).save()
    run = folder / "runs" / "demo-cpu-synth" / "20260101T000000Z-dead"
    run.mkdir(parents=True)
    (run / "status").write_text("running\n")
    (run / "stdout.txt").write_text("step:1/10 train_time:1ms step_avg:1ms\n")
    task = TaskRecord(index=0, job=f"{array}_0", engine="slurm", node="node1", hostname="vm", slurm_job_id=array,
                      slurm_array_job_id=array, slurm_array_task_id="0", started_at="2026-01-01T00:00:00Z",
                      run_dir=str(run.relative_to(folder)))
    task.save(load_campaign(folder))
    long_ago = time.time() - 3600  # quiet for an hour: no process of the task is still writing
    for path in (run / "stdout.txt", folder / "tasks" / task.file_name):
        os.utime(path, (long_ago, long_ago))

    status = _status(tmp_path, folder)
    (view,) = status["tasks"]
    assert view["outcome"] == "aborted" and "before the task wrote its status" in view["detail"]
    assert view["scheduler"] == "COMPLETED" and not status["active"]
    assert (run / "status").read_text().strip() == "aborted"
    assert "marked aborted by `repro campaign status`" in (run / "stdout.txt").read_text()
    assert json.loads((run / "node.json").read_text())["outcome"] == "aborted"


HOSTILE = {"newline": "a\n#SBATCH --wrap=touch {marker}", "command": "b$(touch {marker})",
           "backtick": "c`touch {marker}`", "percent": "d%j", "spaces": "e f g"}


def _jobs_named(fragment: str) -> list[str]:
    done = subprocess.run(["squeue", "-h", "-r", "--states=all", "-o", "%i %j"], capture_output=True, text=True,
                          timeout=30)
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if fragment in line]


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_name_or_partition_that_would_reach_the_job_script_as_code_is_refused_before_slurm(tmp_path, kind):
    marker = tmp_path / "injected"
    value = HOSTILE[kind].format(marker=marker)
    named = repro(tmp_path, "campaign", "submit", *QUICK, "--engine", "slurm", "--campaign",
                  str(tmp_path / "campaigns" / value))
    assert named.returncode == 3, explain(named)
    assert ("campaign name" in named.stderr or "campaign folder" in named.stderr) and "fix:" in named.stderr
    assert "letters, digits" in named.stderr
    folder = tmp_path / "campaigns" / "fine"
    partitioned = repro(tmp_path, "campaign", "submit", *QUICK, "--engine", "slurm", "--partition", value,
                        "--campaign", str(folder))
    assert partitioned.returncode == 3, explain(partitioned)
    assert "is not a Slurm partition name" in partitioned.stderr and "fix:" in partitioned.stderr
    for done in (named, partitioned):
        assert "Traceback" not in done.stderr and done.stderr.count("error:") == 1
        assert "\n#SBATCH" not in done.stderr  # the value is shown escaped, on the error's one line
    time.sleep(2)  # a job the script had started would have touched the marker by now
    assert not marker.exists() and not (tmp_path / "campaigns").exists()
    assert not _jobs_named("injected") and not _jobs_named("fine")


def test_a_campaign_under_a_folder_named_index_runs_its_task(tmp_path):
    """The job script appends the task index as its own word: a path holding INDEX reaches the task as is."""
    folder = tmp_path / "INDEX" / "campaign-INDEX"
    submitted = repro(tmp_path, "campaign", "submit", *QUICK, "--runs", "1", "--engine", "slurm",
                      "--campaign", str(folder))
    assert submitted.returncode == 0, explain(submitted)
    waited = _wait(tmp_path, folder)
    assert waited.returncode == 0, explain(waited)
    (task,) = _status(tmp_path, folder)["tasks"]
    assert task["outcome"] == "succeeded", task


def test_a_requeued_task_keeps_every_attempt_and_each_attempt_s_log(tmp_path):
    folder = tmp_path / "campaign"
    submitted = repro(tmp_path, "campaign", "submit", *QUICK, "--set", "scheduled_steps=40", "--set",
                      "data_cycle=true", "--runs", "1", "--engine", "slurm", "--campaign", str(folder))
    assert submitted.returncode == 0, explain(submitted)
    first = task_record(folder, 0, until=lambda t: run_started(folder, t))
    requeued = subprocess.run(["scontrol", "requeue", first["job"]], capture_output=True, text=True, timeout=30)
    assert requeued.returncode == 0, requeued.stderr
    task_record(folder, 0, until=lambda t: t["outcome"] != "running")  # the first attempt records its end
    # Slurm holds a requeued job back for a while (BeginTime); let it start now
    subprocess.run(["scontrol", "update", f"JobId={first['job']}", "BeginTime=now"], capture_output=True, timeout=30)
    waited = _wait(tmp_path, folder)
    assert waited.returncode == 0, explain(waited)
    (task,) = _status(tmp_path, folder)["tasks"]
    assert [(a["job"], a["attempt"], a["outcome"]) for a in task["attempts"]] == \
        [(first["job"], 1, "aborted"), (first["job"], 2, "succeeded")], task
    assert [r["status"] for r in task["runs"]] == ["aborted", "succeeded"]
    shown = repro(tmp_path, "campaign", "status", str(folder))
    assert f"attempt {first['job']} #2 on" in shown.stdout and f"attempt {first['job']} on" in shown.stdout
    logs = {p.name: p.read_text() for p in (folder / "logs").glob(f"task-{first['job']}*")}
    one, two = (f"task-{first['job']}.attempt-{n}.out" for n in (1, 2))
    assert one in logs and two in logs, sorted(logs)
    assert "[task 0] aborted" in logs[one] and "[task 0] succeeded" in logs[two]
    assert "attempt 2" in logs[two] and "attempt 2" not in logs[one]
    assert "DUE TO JOB REQUEUE" in logs[f"task-{first['job']}.out"]  # Slurm's own file: its messages, appended
