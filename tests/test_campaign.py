"""`repro campaign` without a cluster: the job scripts, the campaign files, bad input, and the local engine.

The local engine runs the same prepare and task commands the Slurm scripts run, here, one after the other;
the test takes it from a failed submission (a bad --set) through a corrected resubmission to a bundle that
`repro bundle verify` accepts, with the failed run kept as an attempt.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest
import yaml

from pipeline.campaign.engine import Commands
from pipeline.campaign.model import (
    Campaign,
    DataSettings,
    SlurmSettings,
    TrainSettings,
    load_campaign,
)
from pipeline.campaign.slurm import compact, prepare_script, tasks_script
from tests.campaign_helpers import QUICK, bundle_manifest, bundle_members, bundle_of, explain, repro


def _campaign(folder: Path, gpus: int = 8, partition: str | None = "gpu") -> Campaign:
    return Campaign(folder=folder, record="2025-09-23_MuonCustomSizing", runs=11, engine="slurm",
                    train=TrainSettings(trainer="record", runtime="docker"),
                    data=DataSettings(str(folder / "data" / "fineweb10B")),
                    slurm=SlurmSettings(partition=partition, nodes_per_run=1, gpus_per_node=gpus, time="00:30:00"))


def test_array_ranges_are_compact():
    assert compact([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8"
    assert compact([3]) == "3"
    assert compact([4, 2, 3, 2]) == "2-4"


def test_job_scripts_say_what_runs(tmp_path):
    campaign = _campaign(tmp_path / "c")
    commands = Commands("/opt/venv/bin/python", tmp_path, tmp_path / "manifests", campaign.folder)
    prepare = prepare_script(campaign, 2, commands)
    tasks = tasks_script(campaign, 2, [0, 2, 3], "4711", commands)
    assert prepare.startswith("#!/bin/bash\n")
    assert "#SBATCH --partition=gpu" in prepare and "campaign prepare" in prepare
    for line in ("#SBATCH --array=0,2-3", "#SBATCH --dependency=afterok:4711", "#SBATCH --kill-on-invalid-dep=yes",
                 "#SBATCH --gpus-per-node=8", "#SBATCH --exclusive", "#SBATCH --time=00:30:00",
                 f"#SBATCH --output={campaign.folder}/logs/task-%A_%a.out", "#SBATCH --open-mode=append"):
        assert line in tasks.splitlines(), line
    # every attempt of a task (a requeue runs it again under the same job id) logs to a file of its own
    assert (f'exec >>{campaign.folder}/logs/"task-${{SLURM_ARRAY_JOB_ID}}_${{SLURM_ARRAY_TASK_ID}}.attempt-'
            '$(( ${SLURM_RESTART_COUNT:-0} + 1 )).out" 2>&1') in tasks.splitlines()
    # exec, so that scancel's SIGTERM reaches the task itself; the index comes from Slurm
    assert "\nexec /opt/venv/bin/python -m pipeline --root" in tasks
    assert tasks.rstrip().endswith('--submission 2 --index "$SLURM_ARRAY_TASK_ID"')
    cpu = tasks_script(_campaign(tmp_path / "d", gpus=0, partition=None), 1, [0], "1", commands)
    assert "--gpus-per-node" not in cpu and "--exclusive" not in cpu and "--partition" not in cpu


def test_paths_in_the_shell_lines_of_a_script_are_quoted(tmp_path):
    campaign = _campaign(tmp_path / "c")
    odd = tmp_path / "a root with 'quotes' and $(x)"
    commands = Commands(str(odd / "bin" / "python"), odd, odd / "manifests", campaign.folder)
    script = tasks_script(campaign, 1, [0], "1", commands)
    exec_line = script.splitlines()[-1]
    assert shlex.split(exec_line)[1:4] == [str(odd / "bin" / "python"), "-m", "pipeline"]
    assert shlex.split(exec_line)[5] == str(odd)


def test_the_task_index_is_its_own_word_and_paths_holding_index_survive(tmp_path):
    """Substitution by structure: a campaign or registry path containing INDEX is not rewritten (issue 38)."""
    campaign = _campaign(tmp_path / "INDEX-campaign" / "c-INDEX")
    commands = Commands("/opt/INDEX/bin/python", tmp_path / "rootINDEX", tmp_path / "INDEX" / "manifests",
                        campaign.folder)
    words = shlex.split(tasks_script(campaign, 3, [0, 1], "1", commands).splitlines()[-1])
    assert words[-2:] == ["--index", "$SLURM_ARRAY_TASK_ID"]  # the index: the last word, alone
    assert words[1] == "/opt/INDEX/bin/python" and str(campaign.folder) in words
    assert str(tmp_path / "rootINDEX") in words and str(tmp_path / "INDEX" / "manifests") in words
    assert sum("SLURM_ARRAY_TASK_ID" in w for w in words) == 1


def test_a_long_name_or_path_is_refused_clearly(tmp_path):
    for folder in (tmp_path / ("n" * 300), tmp_path / ("deep/" * 840) / "c"):  # 300 characters; 4,200+
        done = repro(tmp_path, "campaign", "submit", "--demo", "--engine", "local", "--campaign", str(folder))
        assert done.returncode == 3, explain(done)
        assert "Traceback" not in done.stderr and "fix:" in done.stderr
        assert "300 characters" in done.stderr or "characters long (at most 1000)" in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    done = repro(tmp_path, "campaign", "submit", "--demo", "--engine", "local", "--campaign", str(tmp_path / "a" / "c"))
    assert done.returncode == 3 and "cannot be resolved" in done.stderr, explain(done)
    assert "Traceback" not in done.stderr


def test_training_options_are_checked_before_anything_is_submitted(tmp_path):
    for option, words in ((("--set", "nosuchkey=1"), "--set nosuchkey: unknown key"),
                          (("--set", "num_layers=seven"), "expected an integer"),
                          (("--set", "num_layers=7"), "num_layers=7"),
                          (("--set", "seed=1", "--runs", "4"), "copies of one run"),
                          (("--trainer", "record", "--set", "num_layers=8"), "apply to the native trainer")):
        folder = tmp_path / "c"
        done = repro(tmp_path, "campaign", "submit", "--demo", "--engine", "slurm", *option, "--campaign", str(folder))
        assert done.returncode == 2 and words in done.stderr and "fix:" in done.stderr, explain(done)
        assert not folder.exists()  # nothing written, nothing submitted (sbatch is never reached)
    one = repro(tmp_path, "campaign", "submit", "--demo", "--engine", "slurm", "--set", "seed=1", "--runs", "1",
                "--partition", "no-such-partition", "--campaign", str(tmp_path / "d"))
    assert "copies" not in one.stderr, explain(one)  # one seeded run is no copy of another


def test_collect_of_a_campaign_that_never_ran_says_so(tmp_path):
    campaign = _campaign(tmp_path / "c")
    campaign.save()
    done = repro(tmp_path, "campaign", "collect", str(campaign.folder))
    assert done.returncode == 1, explain(done)
    assert f"campaign {campaign.folder} has no run yet: it was never submitted" in done.stderr
    assert "repro reproduce" not in done.stderr and f"repro campaign submit --campaign {campaign.folder}" in done.stderr


def test_campaign_file_round_trips_and_names_a_bad_field(tmp_path):
    campaign = _campaign(tmp_path / "c")
    campaign.save()
    assert load_campaign(campaign.folder) == campaign
    data = yaml.safe_load((campaign.folder / "campaign.yaml").read_text())
    data["slurm"]["gpus_per_node"] = "eight"
    (campaign.folder / "campaign.yaml").write_text(yaml.safe_dump(data))
    done = repro(tmp_path, "campaign", "status", str(campaign.folder))
    assert done.returncode == 3, explain(done)
    assert "slurm.gpus_per_node" in done.stderr and "Traceback" not in done.stderr


def test_bad_input_is_refused_with_a_fix(tmp_path):
    done = repro(tmp_path, "campaign", "status", str(tmp_path))
    assert done.returncode == 3 and "not a campaign folder" in done.stderr, explain(done)
    done = repro(tmp_path, "campaign", "submit", "--demo", "--engine", "slurm", "--nodes-per-run", "2",
                 "--campaign", str(tmp_path / "c"))
    assert done.returncode == 3 and "--nodes-per-run 2" in done.stderr and "fix:" in done.stderr, explain(done)
    done = repro(tmp_path, "campaign", "submit", "--demo", "--time", "30min", "--campaign", str(tmp_path / "e"))
    assert done.returncode == 2 and "not a Slurm time limit" in done.stderr, explain(done)
    assert not (tmp_path / "e").exists()
    done = repro(tmp_path, "campaign", "submit", "--record", "no-such-record", "--engine", "local",
                 "--campaign", str(tmp_path / "d"))
    assert done.returncode == 3 and "Traceback" not in done.stderr, explain(done)


@pytest.mark.slow
def test_local_engine_failed_run_then_corrected_resubmission_into_one_bundle(tmp_path):
    folder = tmp_path / "campaign"
    # more steps than the generated shards hold: the trainer refuses at its start, so the run fails
    bad = repro(tmp_path, "campaign", "submit", *QUICK, "--set", "scheduled_steps=5000", "--runs", "1",
                "--engine", "local", "--campaign", str(folder))
    assert bad.returncode == 5 and "task 0 ended failed" in bad.stderr, explain(bad)  # the local engine ran it
    status = json.loads(repro(tmp_path, "campaign", "status", str(folder), "--json").stdout)
    (task,) = status["tasks"]
    assert task["outcome"] == "failed" and not task["done"] and status["missing"] == [0]
    assert [r["status"] for r in task["runs"]] == ["failed"]

    fixed = repro(tmp_path, "campaign", "submit", *QUICK, "--campaign", str(folder))  # the same set, corrected
    assert fixed.returncode == 0, explain(fixed)
    assert "submission 2: run(s) 0 of 1 through local" in fixed.stdout
    again = repro(tmp_path, "campaign", "submit", "--campaign", str(folder))
    assert again.returncode == 0 and "nothing to submit" in again.stdout, explain(again)

    collected = repro(tmp_path, "campaign", "collect", str(folder))
    assert "bundle verified" in collected.stdout, explain(collected)
    bundle = bundle_of(folder)
    checked = repro(tmp_path, "bundle", "verify", str(bundle))
    assert checked.returncode == 0 and "bundle verified" in checked.stdout, explain(checked)
    manifest = bundle_manifest(bundle)
    assert [r["status"] for r in manifest["runs"]] == ["succeeded"]
    assert [a["status"] for a in manifest["attempts"]] == ["failed"]
    members = bundle_members(bundle)
    nodes = [json.loads(v) for k, v in members.items() if k.endswith("/node.json")]
    assert sorted(n["outcome"] for n in nodes) == ["failed", "succeeded"]
    assert {n["engine"] for n in nodes} == {"local"}
    assert "| judged |" in collected.stdout and "| attempt |" in collected.stdout  # the per-run table
    # the per-node table is a member of the bundle (hashed, verified), and the report folder has the same bytes
    assert members["campaign/nodes.md"] == (folder / "report" / "nodes.md").read_bytes()
    assert b"| judged |" in members["campaign/nodes.md"] and b"campaign.yaml" not in members["campaign/nodes.md"]
    assert yaml.safe_load(members["campaign/campaign.yaml"])["record"] == "demo-cpu-synth"
    assert (folder / "report" / "report.md").is_file()
