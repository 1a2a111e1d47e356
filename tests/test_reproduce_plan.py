"""`repro reproduce --record NAME --plan`: every record of the registry plans or names why it cannot; nothing
is run, fetched or written. Real CLI subprocesses against the committed registry and the stand-in records."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from pipeline.records.model import record_names
from tests.paths import FIXTURES, REPO_ROOT
from tests.standin.record import NAME, multifile_program, program_bytes, standin_log, standin_manifests

REPRO = [sys.executable, "-m", "pipeline"]
NEWEST_LOG = FIXTURES / "record-logs/2026-07-17_FP8DownProjection/11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt"
SHORT_WINDOW = FIXTURES / "record-program/2026-02-10_ShortWindow/Short-Window_1_1.program.txt"
SECTIONS = ("environment:", "program:", "stand-ins:", "patch:", "data:")


def _plan(home, *args, registry=REPO_ROOT / "manifests"):
    env = {**os.environ, "REPRO_HOME": str(home), "REPRO_REGISTRY": str(registry)}
    done = subprocess.run(REPRO + ["reproduce", "--plan", "--json", *args], capture_output=True, text=True,
                          timeout=120, env=env, cwd=home)
    assert done.returncode in (0, 1), done.stderr
    plan = json.loads(done.stdout)
    assert plan["plans"] == (done.returncode == 0) == (not plan["refusals"])
    return plan


@pytest.mark.parametrize("name", record_names(REPO_ROOT / "manifests" / "records"))
def test_every_record_plans_or_names_why_it_cannot_and_nothing_is_written(name, tmp_path):
    plan = _plan(tmp_path, "--record", name)
    assert all(reason.startswith(SECTIONS) for reason in plan["refusals"]), plan["refusals"]
    if plan["plans"]:
        assert plan["environment"]["kind"] in ("exact", "deviation", "unpinned") and plan["environment"]["reason"]
        assert plan["cost"]["runs"] == 4 and plan["cost"]["train_s_per_run"] > 0
        if plan["cost"]["gpus"]:  # issue 37: the cost counts each run's startup, the download and the build too
            assert plan["cost"]["startup_s"] == pytest.approx(706.9 + 3 * 88.0)
            assert plan["cost"]["download_bytes"] > 1e8 and "FA3" in plan["cost"]["build"]
        assert plan["data"]["dataset"] == "generated" or plan["data"]["train"] > 0
    assert list(tmp_path.iterdir()) == []  # nothing run, fetched or written


def test_what_each_era_says(tmp_path):
    home = tmp_path
    newest = _plan(home, "--record", "2026-07-17_FP8DownProjection")
    assert newest["plans"] and newest["environment"]["name"] == "pypi-torch-2.10"
    assert newest["environment"]["kind"] == "exact"
    assert [f["name"] for f in newest["program"]["files"]] == ["train_gpt.py", "triton_kernels.py"]
    assert (newest["data"]["train"], newest["data"]["val"]) == (9, 1)  # the README of its commit, not assumed
    nightly = _plan(home, "--record", "2026-02-10_ShortWindow")
    assert nightly["environment"]["kind"] == "deviation" and "nearest stable" in nightly["environment"]["reason"]
    assert nightly["refusals"] == []  # its shard count is worked out from its program (dataset.derived)
    assert nightly["data"]["count_from"] == "dataset.derived" and nightly["data"]["train"] == 6
    adamw = _plan(home, "--record", "2024-06-06_AdamW")
    assert any(r.startswith("program: the record's logs carry no program text") for r in adamw["refusals"])
    assert list(home.iterdir()) == []


def test_a_smoke_plan_with_the_program_here_shows_the_cut_and_the_stand_ins(tmp_path):
    newest = _plan(tmp_path, "--record", "2026-07-17_FP8DownProjection", "--smoke", "40", "--smoke-val-tokens",
                   "524288", "--dataset", "docs-v1-x4", "--program-source", str(NEWEST_LOG), "--runtime", "host",
                   "--python-env", "system")
    # its model is sized from val_batch_size (GPT(max_seq_len=args.val_batch_size // ...)): the cut is refused
    assert newest["environment"]["kind"] == "unpinned" and newest["refusals"] == [
        "patch: this program sizes its model from val_batch_size (line 2107): the smoke cut would set it to 524288 "
        "and change the model; validation needs at least 2,097,152 tokens (val_batch_size = 4 * 64 * 1024 * 8) of "
        "validation data; give a validation shard of that size, or run without --smoke-val-tokens on the record's "
        "data"]
    # this Python's torch (2.13 here) types a float kernel argument fp64, the record's 2.10 fp32: typed back
    assert [s["name"] for s in newest["stand_ins"]] == ["kernels hub", "FA3", "float arguments"]
    assert "the record's torch 2.10.0+cu128 typed it fp32" in newest["stand_ins"][2]["why"]
    assert newest["data"]["dataset"] == "docs-v1-x4" and newest["cost"]["train_s_per_run"] == pytest.approx(2.3, 0.1)
    whole = _plan(tmp_path, "--record", "2026-07-17_FP8DownProjection", "--smoke", "40", "--dataset", "docs-v1-x4",
                  "--program-source", str(NEWEST_LOG), "--runtime", "host", "--python-env", "system")
    assert [c["field"] for c in whole["patch"]["changes"]] == ["num_scheduled_iterations", "num_extension_iterations"]
    assert whole["refusals"] == [  # uncut, one validation batch is more than docs-v1's validation shard
        "data: the program's validation reads 2,097,152 tokens at once (val_batch_size = 4 * 64 * 1024 * 8 = "
        "2,097,152 (line 1761)), but docs-v1-x4's validation shard(s) hold 541,192: its val loader would run out; "
        "give a dataset whose validation shards hold that many tokens"]
    short = _plan(tmp_path, "--record", "2026-02-10_ShortWindow", "--smoke", "40", "--dataset", "docs-v1-x4",
                  "--program-source", str(SHORT_WINDOW))
    assert [c["now"] for c in short["patch"]["changes"]][-2:] == [
        "'data/fineweb10B/fineweb_train_*.bin'", "'data/fineweb10B/fineweb_val_*.bin'"]  # its author's absolute paths


def _standin_registry(tmp_path, program: bytes):
    registry = standin_manifests(tmp_path, "http://127.0.0.1:9", program=program)
    log = tmp_path / "log.txt"
    log.write_bytes(standin_log(program))
    return registry, log


def test_an_unserved_hub_kernel_and_a_program_without_smoke_fields_are_refused_by_name(tmp_path):
    program = multifile_program().replace(b"'kernels-community/flash-attn3', version=1",
                                          b"'kernels-community/activation'")
    registry, log = _standin_registry(tmp_path / "hub", program)
    plan = _plan(tmp_path, "--record", NAME, "--program-source", str(log), registry=registry)
    assert plan["refusals"] == ["stand-ins: the program asks the kernels hub for kernels-community/activation, "
                                "which repro's stand-in does not serve"]
    registry, log = _standin_registry(tmp_path / "plain", program_bytes())
    plan = _plan(tmp_path, "--record", NAME, "--program-source", str(log), "--smoke", "6", registry=registry)
    assert plan["refusals"] == ["patch: train_gpt.py has no class-level field for the step count "
                                "(num_iterations or num_scheduled_iterations); this program cannot be cut for a "
                                "smoke run; run it in full (without --smoke)"]


def test_reproduce_refuses_a_record_without_a_shard_count_before_any_stage(tmp_path):
    registry = tmp_path / "registry"
    shutil.copytree(REPO_ROOT / "manifests", registry)
    manifest = registry / "records" / "2026-02-10_ShortWindow.yaml"
    doc = yaml.safe_load(manifest.read_text())
    doc["dataset"].pop("derived")  # no count pinned, none derived (an older import): nothing says what to fetch
    manifest.write_text(yaml.safe_dump(doc, sort_keys=False))
    home = tmp_path / "home"
    home.mkdir()
    env = {**os.environ, "REPRO_HOME": str(home), "REPRO_REGISTRY": str(registry)}
    done = subprocess.run(REPRO + ["reproduce", "--record", "2026-02-10_ShortWindow", "--runtime", "host",
                                   "--python-env", "system"], capture_output=True, text=True, timeout=120, env=env,
                          cwd=home)
    assert done.returncode == 3 and "train shard" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert list(home.iterdir()) == []


@pytest.mark.parametrize("smoke_val", [[], ["--smoke-val-tokens", "524288"]])
def test_reproduce_refuses_a_validation_larger_than_the_data_or_a_cut_of_the_model_before_any_stage(
        smoke_val, tmp_path):
    env = {**os.environ, "REPRO_HOME": str(tmp_path), "REPRO_REGISTRY": str(REPO_ROOT / "manifests")}
    done = subprocess.run(REPRO + ["reproduce", "--record", "2026-07-17_FP8DownProjection", "--runtime", "host",
                                   "--python-env", "system", "--smoke", "40", "--dataset", "docs-v1-x4",
                                   "--program-source", str(NEWEST_LOG), *smoke_val],
                          capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    said, code = ("sizes its model from val_batch_size (line 2107)", 1) if smoke_val else \
        ("reads 2,097,152 tokens at once", 3)
    assert done.returncode == code and said in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_record_whose_logs_show_no_machine_is_planned_on_gpus_not_on_a_cpu(tmp_path):
    """2024-06-06's log prints no nvidia-smi table: `records show` said 'hardware 0 x (?, ?)' and the plan costed
    '4 run(s) on CPU' with no startup, for a record trained on GPUs."""
    plan = _plan(tmp_path, "--record", "2024-06-06_AdamW")
    assert plan["cost"]["hardware_known"] is False and plan["cost"]["startup_s"] > 0
    shown = subprocess.run([sys.executable, "-m", "pipeline", "records", "show", "2024-06-06_AdamW"],
                           capture_output=True, text=True, cwd=REPO_ROOT)
    assert "hardware   not in its logs (no nvidia-smi table)" in shown.stdout and "0 x" not in shown.stdout
    planned = subprocess.run([sys.executable, "-m", "pipeline", "reproduce", "--record", "2024-06-06_AdamW", "--plan"],
                             capture_output=True, text=True, cwd=REPO_ROOT)
    assert "run(s) on GPUs (their model and count are not in the record's logs)" in planned.stdout


def test_records_show_leaves_out_what_the_logs_do_not_say():
    """An imported record's logs name no interconnect: `records show` printed '(SXM, ?)'; what is unknown is left
    out, and what is known stays."""
    shown = subprocess.run([sys.executable, "-m", "pipeline", "records", "show", "2026-07-17_FP8DownProjection"],
                           capture_output=True, text=True, cwd=REPO_ROOT)
    line = next(x for x in shown.stdout.splitlines() if x.startswith("  hardware"))
    assert "?" not in line and "8 x NVIDIA H100 80GB HBM3 (SXM), driver 580.159.04" in line, line


def test_plan_all_ends_with_how_many_plan_and_which_cannot():
    """`reproduce --all --plan` exits 1 when any record cannot run; its last line now says which."""
    done = subprocess.run([sys.executable, "-m", "pipeline", "reproduce", "--all", "--plan"], capture_output=True,
                          text=True, cwd=REPO_ROOT)
    last = done.stdout.rstrip().splitlines()[-1]
    names = record_names(REPO_ROOT / "manifests" / "records")
    assert last.startswith(f"{len(names) - 2} of {len(names)} record(s) plan; 2 cannot run: 2024-06-06_AdamW, "
                           "2025-01-18-row1"), last
    assert done.returncode == 1


def test_the_demos_plan_is_the_two_runs_make_demo_runs(tmp_path):
    """`reproduce --demo --plan` planned 4 runs while `make demo` runs 2: --demo's default is now 2."""
    assert _plan(tmp_path, "--demo")["cost"]["runs"] == 2
    assert _plan(tmp_path, "--record", "2025-09-23_MuonCustomSizing")["cost"]["runs"] == 4


def test_a_native_trainer_plan_names_the_native_trainer_not_the_records_program(tmp_path):
    """`--trainer native --plan` said the record's program would be "fetched at run time" from GitHub, with its
    stand-ins decided from that program: the native trainer runs train/ and fetches no program."""
    plan = _plan(tmp_path, "--record", "2025-09-23_MuonCustomSizing", "--trainer", "native")
    assert plan["plans"] and plan["program"] == {"trainer": "native", "files": []}
    assert plan["stand_ins"] == [] and plan["cost"]["startup_s"] == pytest.approx(166.1 + 3 * 44.6)
    shown = subprocess.run(REPRO + ["reproduce", "--record", "2025-09-23_MuonCustomSizing", "--trainer", "native",
                                    "--plan"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert "program     the native trainer (train/)" in shown.stdout, shown.stdout
    assert "fetched at run time" not in shown.stdout and "raw.githubusercontent.com" not in shown.stdout
    adamw = _plan(tmp_path, "--record", "2024-06-06_AdamW", "--trainer", "native")  # its logs hold no program
    assert not any(r.startswith("program:") for r in adamw["refusals"]), adamw["refusals"]
