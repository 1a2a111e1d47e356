"""One program reader for every log layout of upstream's history, and the smoke cut of every era.

The fixtures (tests/fixtures/program-layouts/, README there) are real upstream logs trimmed: each program
keeps its imports, its Hyperparameters class and, where it matters, one real line (Record7's Python 3.12
f-string); each log keeps its separators, its environment header and its last lines. The reader must find
the program in each layout, `reproduce` must accept it by its pinned sha256 (pipeline/records/program.py),
and the smoke cut must cut each era at the fields its schedule is built from.
"""

from __future__ import annotations

import dataclasses
import hashlib

import pytest

from pipeline.errors import CheckFailed
from pipeline.records.identity import program_fingerprint
from pipeline.records.logfacts import facts_from_bytes
from pipeline.records.model import PublishedLog, load_record
from pipeline.records.program import cut_program, resolve_program
from pipeline.records.smoke_cut import smoke_cut
from tests.paths import FIXTURES, REPO_ROOT

LAYOUTS = FIXTURES / "program-layouts"
# fixture -> (layout: lead = a separator line before the program too; files of the program; Python printed)
CASES = {
    "2024-10-10_Muon": ("lead", ["train_gpt.py"]),
    "2024-11-24_WindowWarmup": ("lead", ["train_gpt.py"]),
    "2025-04-16_Record7": ("trailing, Running Python 3.12.9", ["train_gpt.py"]),
    "2025-09-23_MuonCustomSizing": ("trailing", ["train_gpt.py"]),
    "2025-10-24_NorMuon": ("trailing", ["train_gpt.py"]),
    "2025-11-29_BatchSizeSchedule": ("trailing", ["train_gpt.py"]),
    "2026-01-24_ImprovedLMHead": ("trailing, two files", ["train_gpt.py", "triton_kernels.py"]),
    "2026-07-13_PrefixTokenPrediction": ("trailing, two files", ["train_gpt.py", "triton_kernels.py"]),
}
# fixture -> {field: (was, now)} for --smoke 20 --smoke-val-tokens 524288, and the fields left as written
ERAS = {
    "2024-10-10_Muon": ({"num_iterations": ("6200", "20"), "warmdown_iters": ("1800", "6"),
                         "val_tokens": ("10485760", "524288")}, []),
    "2024-11-24_WindowWarmup": ({"num_iterations": ("1750", "20"), "cooldown_iters": ("640", "7"),
                                 "val_tokens": ("10485760", "524288")}, []),
    "2025-04-16_Record7": ({"num_iterations": ("6450", "20"), "val_tokens": ("10485760", "524288")}, []),
    "2025-09-23_MuonCustomSizing": ({"num_iterations": ("1640", "20"), "iteration_extension": ("40", "2"),
                                     "val_tokens": ("10485760", "524288"),
                                     "val_batch_size": ("4 * 64 * 1024 * 8", "524288")}, ["ws_schedule"]),
    "2025-10-24_NorMuon": ({"num_scheduled_iterations": ("2275", "20"), "num_extension_iterations": ("40", "2"),
                            "val_tokens": ("10485760", "524288"), "val_batch_size": ("4 * 64 * 1024 * 8", "524288")},
                           ["num_iterations", "ws_schedule"]),
    "2025-11-29_BatchSizeSchedule": ({"num_scheduled_iterations": ("2120", "20"),
                                      "num_extension_iterations": ("40", "2"), "val_tokens": ("10485760", "524288"),
                                      "val_batch_size": ("4 * 64 * 1024 * 8", "524288")},
                                     ["num_iterations", "train_bs_schedule", "ws_schedule"]),
    "2026-01-24_ImprovedLMHead": ({"num_scheduled_iterations": ("1515", "20"),
                                   "num_extension_iterations": ("40", "2"), "val_tokens": ("10485760", "524288"),
                                   "val_batch_size": ("4 * 64 * 1024 * 8", "524288")}, ["TRAINING_STAGES"]),
    "2026-07-13_PrefixTokenPrediction": ({"num_scheduled_iterations": ("1365", "20"),
                                          "num_extension_iterations": ("10", "2"),
                                          "val_tokens": ("10485760", "524288"),
                                          "val_batch_size": ("4 * 64 * 1024 * 8", "524288")}, ["TRAINING_STAGES"]),
}


def _log(name: str) -> bytes:
    return (LAYOUTS / f"{name}.txt").read_bytes()


def pinned_record(log: bytes, file: str = "run.txt"):
    """A record whose one selected run is this log (its sha256 and its program's, as the importer pins them)."""
    program = cut_program(log)
    record = load_record("2025-09-23_MuonCustomSizing", REPO_ROOT / "manifests" / "records")
    pin = PublishedLog(file=file, sha256=hashlib.sha256(log).hexdigest(),
                       program_sha256=hashlib.sha256(program).hexdigest(), program_bytes=len(program),
                       val_loss=None, train_time_ms=None)
    return dataclasses.replace(record, logs=(pin,), program=dataclasses.replace(record.program, fingerprint=""))


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_program_is_read_from_every_layout_and_accepted_by_its_pinned_sha256(name, tmp_path):
    log = _log(name)
    layout, files = CASES[name]
    program = cut_program(log)
    assert program is not None and program.startswith(b"import ") and b"class Hyperparameters" in program
    assert b"=" * 100 not in program and b"Running" not in program.split(b"\n")[0]
    assert log.startswith(b"=" * 100) == (layout == "lead")
    source = tmp_path / "run.txt"
    source.write_bytes(log)
    found = resolve_program(pinned_record(log), str(source))
    assert found.text == program and [f.name for f in found.files] == files
    assert found.fingerprint == program_fingerprint(program)
    facts = facts_from_bytes(log, "run.txt")  # the importer reads the same program, with no warning about it
    assert facts.program_sha256 == found.sha256 and not [w for w in facts.warnings if "not valid Python" in w]


def test_a_python_312_fstring_program_parses_with_a_stable_fingerprint():
    program = cut_program(_log("2025-04-16_Record7"))
    assert b'{metadata_fn().get("filename", "Unknown")}' in program  # PEP 701: the f-string's own quote inside
    prints = {program_fingerprint(program) for _ in range(3)}
    assert len(prints) == 1
    # the same code with the quotes Python 3.11 reads has the same tree, so the same fingerprint
    swapped = program.replace(b'get("filename", "Unknown")', b"get('filename', 'Unknown')")
    assert program_fingerprint(swapped) == prints.pop()


@pytest.mark.parametrize("name", sorted(ERAS))
def test_each_era_is_cut_at_the_fields_its_schedule_is_built_from(name):
    program = cut_program(_log(name))
    changes, left = ERAS[name]
    cut = smoke_cut(program, 20, 524288)
    assert {c["field"]: (c["was"], c["now"]) for c in cut.listing} == changes
    assert [x["field"] for x in cut.left] == left
    patched = cut.apply(program)
    again = {c["field"]: c["was"] for c in smoke_cut(patched, 20, 524288).listing}  # the patched program, cut again
    assert all(again.get(field) == now for field, (_, now) in changes.items() if field in again)
    if "num_iterations" in left:  # the derived total is as written, so it follows the cut fields: 20 + 0
        assert b"num_iterations: int = num_scheduled_iterations + num_extension_iterations" in patched
        assert "derived from num_extension_iterations, num_scheduled_iterations" in cut.left[0]["why"]


def test_a_log_without_a_program_says_so(tmp_path):
    log = (LAYOUTS / "2024-06-06_AdamW.log").read_bytes()  # llm.c style: output only
    assert cut_program(log) is None
    source = tmp_path / "main.log"
    source.write_bytes(log)
    record = pinned_record(_log("2025-09-23_MuonCustomSizing"))
    with pytest.raises(CheckFailed, match="this log holds no program"):
        resolve_program(record, str(source))
    pinned = dataclasses.replace(record, logs=(*record.logs, dataclasses.replace(
        record.logs[0], file="main.log", sha256=hashlib.sha256(log).hexdigest(), program_sha256="")))
    with pytest.raises(CheckFailed, match="this log holds no program"):
        resolve_program(pinned, str(source))


@pytest.mark.parametrize("name, stages", [("2025-11-29_BatchSizeSchedule", "train_bs_schedule"),
                                          ("2026-01-24_ImprovedLMHead", "TRAINING_STAGES")])
def test_a_cut_shorter_than_a_schedules_stages_is_refused(name, stages):
    program = cut_program(_log(name))
    assert any(x["field"] == stages and "stages" in x["why"] for x in smoke_cut(program, 3).left)
    with pytest.raises(CheckFailed, match=f"fewer steps than the 3 stages of {stages}"):
        smoke_cut(program, 2)
