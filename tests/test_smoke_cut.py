"""The smoke cut of any record's program, found in its syntax tree (pipeline/records/smoke_cut.py).

Real programs of four eras (tests/fixtures/: 2024-10-10's train_gpt2.py, 2025-09-23's train_gpt.py, 2026-02-10's
program cut from its log, the newest record's full log): each is cut, changes exactly the declared fields,
and restores to its own fingerprint; the smoke judge accepts the cut and nothing beyond it. Then a real
`repro train --smoke` of the two-file stand-in under torchrun, judged smoke by `repro verify`.
"""

from __future__ import annotations

import difflib
import hashlib
import json

import pytest
import yaml

from pipeline.errors import CheckFailed
from pipeline.records.identity import program_fingerprint
from pipeline.records.model import load_record
from pipeline.records.program import cut_program
from pipeline.records.smoke_cut import planned_smoke_cut, restore, smoke_cut
from pipeline.records.val_window import validation_window
from pipeline.verdict.smoke import check_program
from tests.paths import FIXTURES, REPO_ROOT
from tests.standin.record import NAME, multifile_program, repro, served_record, write_data

NEWEST = "2026-07-17_FP8DownProjection"
PROGRAMS = {
    "2024-10-10_Muon": FIXTURES / "record-program/2024-10-10_Muon/train_gpt2.py",
    "2025-09-23_MuonCustomSizing": FIXTURES / "record-program/2025-09-23_MuonCustomSizing/train_gpt.py",
    "2026-02-10_ShortWindow": FIXTURES / "record-program/2026-02-10_ShortWindow/Short-Window_1_1.program.txt",
    NEWEST: FIXTURES / f"record-logs/{NEWEST}/11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt",
}
EXPECTED = {  # field -> (was, now) for --smoke 40 --smoke-val-tokens 524288
    "2024-10-10_Muon": {"num_iterations": ("6200", "40"), "warmdown_iters": ("1800", "12"),  # 1800/6200 of 40
                        "val_tokens": ("10485760", "524288")},
    "2025-09-23_MuonCustomSizing": {"num_iterations": ("1640", "40"), "iteration_extension": ("40", "2"),
                                    "val_tokens": ("10485760", "524288"),
                                    "val_batch_size": ("4 * 64 * 1024 * 8", "524288")},
    "2026-02-10_ShortWindow": {"num_scheduled_iterations": ("1515", "40"), "num_extension_iterations": ("40", "2"),
                               "val_tokens": ("10485760", "524288"), "val_batch_size": ("4 * 64 * 1024 * 8", "524288"),
                               "train_files": ('"/data/250010180/bjx/data/fineweb10B/fineweb_train_*.bin"',
                                               "'data/fineweb10B/fineweb_train_*.bin'"),
                               "val_files": ('"/data/250010180/bjx/data/fineweb10B/fineweb_val_*.bin"',
                                             "'data/fineweb10B/fineweb_val_*.bin'")},
    NEWEST: {"num_scheduled_iterations": ("1380", "40"), "num_extension_iterations": ("10", "2"),
             "val_tokens": ("10485760", "524288"), "val_batch_size": ("4 * 64 * 1024 * 8", "524288")},
}


def _program(name: str) -> bytes:
    raw = PROGRAMS[name].read_bytes()
    return cut_program(raw) or raw


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_each_era_is_cut_at_its_own_fields_and_restores_to_its_code(name):
    program = _program(name)
    cut = smoke_cut(program, 40, 524288)
    assert {c["field"]: (c["was"], c["now"]) for c in cut.listing} == EXPECTED[name]
    patched = cut.apply(program)
    changed = [line for line in difflib.unified_diff(program.decode().splitlines(), patched.decode().splitlines(),
                                                     lineterm="", n=0) if line[:1] == "+" and line[:3] != "+++"]
    assert len(changed) == len(EXPECTED[name])  # one line per declared field, nothing else
    assert program_fingerprint(patched) != program_fingerprint(program)
    assert restore(patched, cut.listing) == program  # byte for byte: every `was` is the record's own text


def test_the_newest_program_keeps_its_second_file():
    program = _program(NEWEST)
    patched = smoke_cut(program, 40).apply(program)
    assert patched.split(b"\n# triton_kernels.py\n")[1] == program.split(b"\n# triton_kernels.py\n")[1]


def test_a_program_without_the_fields_is_refused_naming_them():
    with pytest.raises(CheckFailed, match=r"step count \(num_iterations or num_scheduled_iterations\)"):
        smoke_cut(b"class Hyperparameters:\n    steps: int = 1640\n", 40)
    with pytest.raises(CheckFailed, match="validation token count"):
        smoke_cut(b"class Hyperparameters:\n    num_iterations: int = 1640\n", 40, 1024)
    with pytest.raises(CheckFailed, match="more than once"):
        smoke_cut(b"class A:\n    num_iterations = 1\nclass B:\n    num_scheduled_iterations = 2\n", 40)


def test_a_validation_field_that_sizes_the_model_is_never_cut_for_a_new_run():
    # 2025-09-23 builds GPT(max_seq_len=max(args.train_batch_size, args.val_batch_size) // ...): cut, the model changes
    program = _program("2025-09-23_MuonCustomSizing")
    with pytest.raises(CheckFailed, match=r"sizes its model from val_batch_size \(line 1265\).* at least 2,097,152 "
                                          r"tokens \(val_batch_size = 4 \* 64 \* 1024 \* 8\)") as refused:
        planned_smoke_cut(program, 40, 524288)
    assert "without --smoke-val-tokens" in refused.value.fix
    kept = planned_smoke_cut(program, 40, 2097152)  # val_batch_size fits: not cut, nothing refused
    assert [c.field for c in kept.changes] == ["num_iterations", "iteration_extension", "val_tokens"]
    assert smoke_cut(program, 40, 524288).changes[-1].field == "val_batch_size"  # the judge still recomputes old cuts


def test_the_validation_window_is_read_from_the_fields_as_written():
    triton = (FIXTURES / "record-program/2025-07-18_TritonMuon/hyperparameters.py").read_bytes()
    tokens, how = validation_window(triton, 262144)  # val_seq_len x (grad_accum_steps x world_size)
    assert tokens == 2_097_152 and "val_seq_len 262,144 (line 9) x 8" in how and "8 // world_size" in how
    assert validation_window(triton.replace(b"grad_accum_steps = 8 // world_size", b"grad_accum_steps = 1")) is None
    program = _program("2025-09-23_MuonCustomSizing")
    assert validation_window(program) == (2_097_152, "val_batch_size = 4 * 64 * 1024 * 8 = 2,097,152 (line 1198)")
    assert validation_window(program, 524288)[0] == 524288  # as the smoke cut leaves it
    assert validation_window(_program("2024-10-10_Muon")) is None


def _declared(name: str, program: bytes, **change) -> tuple[bytes, dict]:
    cut = smoke_cut(program, 40, 524288)
    patched = cut.apply(program)
    info = cut.declared(patched)
    return patched, {**info, **change}


@pytest.mark.parametrize("name", ["2025-09-23_MuonCustomSizing", NEWEST])
def test_the_smoke_judge_accepts_the_cut_and_nothing_beyond_it(name):
    record = load_record(name, REPO_ROOT / "manifests" / "records")
    patched, info = _declared(name, _program(name))
    identity, problems = check_program(record, "run", patched, info, "record")
    assert problems == [] and identity.status == "smoke" and identity.fingerprint == record.program.fingerprint

    beyond = patched.replace(b"val_loss_every: int = 250", b"val_loss_every: int = 5").replace(
        b"val_loss_every: int = 125", b"val_loss_every: int = 5")
    assert beyond != patched
    info_beyond = {**info, "patched_sha256": hashlib.sha256(beyond).hexdigest()}
    identity, problems = check_program(record, "run", beyond, info_beyond, "record")
    assert identity.status == "different" and "not the record's" in problems[0].data["issue"]

    _, forged = _declared(name, _program(name), parameters={"steps": 41, "val_tokens": 524288})
    identity, problems = check_program(record, "run", patched, forged, "record")
    assert identity.status == "different" and "not the smoke cut of its own parameters" in problems[0].data["issue"]


def test_a_two_file_program_smoke_runs_and_is_judged_smoke(tmp_path):
    with served_record(tmp_path, multifile_program()) as env:
        done = repro(env, "train", "--record", NAME, "--runtime", "host", "--data-dir",
                     str(write_data(tmp_path / "data")), "--runs-dir", str(tmp_path / "runs"),
                     "--smoke", "6", "--smoke-val-tokens", "1024")
        assert done.returncode == 0, done.stdout + done.stderr
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        meta = yaml.safe_load((run / "run.yaml").read_text())
        assert [c["field"] for c in meta["program_patch"]["changes"]] == [
            "num_scheduled_iterations", "num_extension_iterations", "val_tokens", "val_batch_size"]
        assert b"step:8/8 val_loss" in (run / "log.txt").read_bytes()  # 6 steps and 2 of the extension
        verdict = repro(env, "verify", "--record", NAME, "--json", str(run))
    assessed = json.loads(verdict.stdout)["runs"][0]
    assert assessed["program"]["status"] == "smoke", assessed["program"]
    # and `reproduce --smoke 6` of the same counts it as one of its runs (its verdict judges it, its bundle packs it)
    from pipeline.reproduce.request import ReproduceRequest
    from pipeline.reproduce.selection import RunSelection, counts

    wanted = RunSelection.wanted(ReproduceRequest(record=NAME, runs=1, runtime="host", smoke_steps=6,
                                                  smoke_val_tokens=1024))
    assert counts(run, wanted)
    assert not counts(run, RunSelection.wanted(ReproduceRequest(record=NAME, runs=1, runtime="host", smoke_steps=7,
                                                                smoke_val_tokens=1024)))


def test_reproduce_refuses_a_program_it_cannot_cut_before_any_stage(tmp_path):
    from tests.standin.record import program_bytes

    # a node with GPUs, as far as `reproduce --smoke`'s first check looks (an nvidia-smi on PATH): on this CPU
    # machine it would otherwise exit 4 for the missing GPUs before the download the cut needs
    gpu_node = tmp_path / "gpu-node-bin"
    gpu_node.mkdir()
    (gpu_node / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (gpu_node / "nvidia-smi").chmod(0o755)
    with served_record(tmp_path, program_bytes()) as env:  # the one-file stand-in: no Hyperparameters class
        env = {**env, "PATH": f"{gpu_node}:{env.get('PATH', '')}"}
        done = repro(env, "reproduce", "--record", NAME, "--runtime", "host", "--python-env", "system",
                     "--smoke", "6", "--runs", "1")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "no class-level field for the step count (num_iterations or num_scheduled_iterations)" in done.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "data").exists()  # no stage ran
