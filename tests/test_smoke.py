"""Smoke runs (issue 13): the record's exact program with only its step count cut, as a declared patch.

The patch is applied to the record's real program (tests/fixtures/record-program/, the pinned sha256), and the
smoke judge must recognise exactly "record program + smoke patch": the declared lines, nothing else. Then a
real CPU smoke of the native trainer end to end: `repro reproduce --demo --smoke` ends smoke-passed.
"""

import difflib
import subprocess
import sys

import pytest

from pipeline.errors import CheckFailed, InputError
from pipeline.hashing import sha256_bytes
from pipeline.records.model import load_record
from pipeline.records.patch import smoke_patch
from pipeline.verdict.smoke import check_program
from tests.paths import FIXTURES, REPO_ROOT

PROGRAM = (FIXTURES / "record-program" / "2025-09-23_MuonCustomSizing" / "train_gpt.py").read_bytes()
RECORD = load_record("2025-09-23_MuonCustomSizing", REPO_ROOT / "manifests" / "records")


def declared(patch, text: bytes) -> dict:
    """What a run's run.yaml records about its cut (pipeline/runs/train_plan.py)."""
    return {"name": patch.name, "sha256": patch.sha256, "changes": patch.listing, "patched_sha256": sha256_bytes(text)}


def test_the_patch_changes_only_the_declared_lines():
    assert sha256_bytes(PROGRAM) == "47e4c12714522bc682968795479c6a89102a2b62656e2f00ba3a887fb770e010"
    patch = smoke_patch(40, 524288)
    patched = patch.apply(PROGRAM)
    diff = [line for line in difflib.unified_diff(PROGRAM.decode().splitlines(), patched.decode().splitlines(),
                                                  lineterm="", n=0) if line[:1] in "+-" and line[:3] not in "+++---"]
    changed = sorted(line[1:].split(":")[0].split("=")[0].strip() for line in diff if line.startswith("+"))
    assert changed == ["iteration_extension", "num_iterations", "val_batch_size", "val_tokens"]
    assert len(diff) == 8  # four lines out, four in
    assert smoke_patch(40, 524288).sha256 == patch.sha256 != smoke_patch(41, 524288).sha256


def test_smoke_judge_recognises_record_program_plus_patch():
    patch = smoke_patch(40, 524288)
    patched = patch.apply(PROGRAM)
    identity, problems = check_program(RECORD, "run", patched, declared(patch, patched), "record")
    assert problems == [] and identity.status == "smoke" and identity.fingerprint == RECORD.program.fingerprint


def test_smoke_judge_catches_a_change_beyond_the_cut():
    patch = smoke_patch(40, 524288)
    patched = patch.apply(PROGRAM)
    other = patched.replace(b"cooldown_frac: int = 0.5", b"cooldown_frac: int = 0.7")
    assert other != patched
    identity, problems = check_program(RECORD, "run", other, declared(patch, other), "record")
    assert identity.status == "different" and problems[0].code == "smoke.program"
    assert "not the record's" in problems[0].data["issue"]


def test_smoke_judge_catches_an_undeclared_or_mismatched_patch():
    patch = smoke_patch(40, 524288)
    patched = patch.apply(PROGRAM)
    lied = dict(declared(patch, patched), sha256="0" * 64)
    _, problems = check_program(RECORD, "run", patched, lied, "record")
    assert "not the smoke patch of its own parameters" in problems[0].data["issue"]
    _, problems = check_program(RECORD, "run", PROGRAM, declared(patch, patched), "record")
    assert "not the patched program the run declared" in problems[0].data["issue"]


def test_patch_refuses_a_program_it_does_not_fit_and_bad_counts():
    with pytest.raises(CheckFailed, match="num_iterations"):
        smoke_patch(40).apply(PROGRAM.replace(b"    num_iterations: int = 1640", b"    steps: int = 1640"))
    with pytest.raises(InputError):
        smoke_patch(1)
    with pytest.raises(InputError, match="multiple of 1024"):
        smoke_patch(40, 1000)


@pytest.mark.slow
def test_native_cpu_smoke_ends_smoke_passed(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pipeline", "--root", str(tmp_path), "reproduce", "--demo",
                           "--preset", "tiny", "--smoke", "6", "--runs", "1"], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "verdict: smoke-passed over 1 run(s)" in done.stdout and "(verified)" in done.stdout
    assert "smoke: val loss" in done.stdout
