"""Programs as a set of files: every file a log carries is cut out, pinned and written back for the run.

The real input is the newest record's log (tests/fixtures/record-logs/2026-07-17_FP8DownProjection/, a full
log: train_gpt.py, the divider, triton_kernels.py, the separator, the run); the run is the two-file stand-in
(tests/standin/multifile/) served on 127.0.0.1 and started by the real torchrun of this venv.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys

import pytest
import yaml

from pipeline.errors import CheckFailed
from pipeline.records.identity import program_fingerprint
from pipeline.records.model import load_record
from pipeline.records.program import cut_program, resolve_program
from pipeline.records.program_files import ProgramFile, join_program, split_program
from tests.paths import REPO_ROOT
from tests.standin.record import NAME, multifile_program, repro, served_record, write_data

NEWEST = "2026-07-17_FP8DownProjection"
NEWEST_LOG = REPO_ROOT / "tests/fixtures/record-logs" / NEWEST / "11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt"
REPRO = [sys.executable, "-m", "pipeline"]


def test_the_newest_log_carries_two_files_cut_at_the_programs_own_divider():
    program = cut_program(NEWEST_LOG.read_bytes())
    files = split_program(program)
    assert [f.name for f in files] == ["train_gpt.py", "triton_kernels.py"]
    assert join_program(files) == program  # every byte kept: the log's program is exactly the files joined
    assert files[0].text.startswith(b"import os\nimport sys\n") and not files[0].text.endswith(b"\n\n")
    assert files[1].text.startswith(b"import torch\nimport triton\n")
    record = load_record(NEWEST, REPO_ROOT / "manifests" / "records")
    pinned = next(log for log in record.logs if log.file == f"this_pr/{NEWEST_LOG.name}")
    assert [(p.name, p.sha256, p.bytes) for p in pinned.files] == [(f.name, f.sha256, len(f.text)) for f in files]
    assert program_fingerprint(program) == record.program.fingerprint


def test_resolving_the_newest_record_from_its_log_gives_its_files():
    record = load_record(NEWEST, REPO_ROOT / "manifests" / "records")
    found = resolve_program(record, str(NEWEST_LOG))
    assert [f.name for f in found.files] == ["train_gpt.py", "triton_kernels.py"]
    assert found.sha256 == hashlib.sha256(cut_program(NEWEST_LOG.read_bytes())).hexdigest()


@pytest.mark.parametrize("name", ["../evil.py", "sub/dir.py", "train_gpt.py", "notes.txt"])
def test_a_divider_naming_no_plain_python_file_is_refused(name):
    program = b"print(1)" + b"\n\n" + b"-" * 40 + f"\n# {name}\n".encode() + b"-" * 40 + b"\n\nprint(2)\n"
    with pytest.raises(CheckFailed, match="not a plain .py file name"):
        split_program(program)
    with pytest.raises(ValueError):
        program_fingerprint(program)


def test_a_program_without_divider_is_one_file():
    assert split_program(b"print(1)\n") == (ProgramFile("train_gpt.py", b"print(1)\n"),)


def test_records_show_lists_the_files():
    shown = subprocess.run(REPRO + ["records", "show", NEWEST], capture_output=True, text=True, timeout=120,
                           cwd=REPO_ROOT)
    assert shown.returncode == 0, shown.stderr
    lines = [line.split() for line in shown.stdout.splitlines() if line.strip().startswith("file ")]
    assert [line[1] for line in lines] == ["train_gpt.py", "triton_kernels.py"]


def test_records_fingerprint_of_the_newest_log_is_its_pinned_set_fingerprint():
    shown = subprocess.run(REPRO + ["records", "fingerprint", str(NEWEST_LOG)], capture_output=True, text=True,
                           timeout=120, cwd=REPO_ROOT)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip() == load_record(NEWEST, REPO_ROOT / "manifests" / "records").program.fingerprint


def test_a_two_file_program_runs_as_its_files_and_logs_itself_unchanged(tmp_path):
    program = multifile_program()
    train = ["train", "--record", NAME, "--runtime", "host", "--data-dir", str(write_data(tmp_path / "data")),
             "--runs-dir", str(tmp_path / "runs")]
    with served_record(tmp_path, program) as env:
        dry = repro(env, *train, "--dry-run", "--json")
        assert dry.returncode == 0, dry.stderr
        assert [f["name"] for f in yaml.safe_load(dry.stdout)["program"]["files"]] == ["train_gpt.py",
                                                                                       "triton_kernels.py"]
        done = repro(env, *train)
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = (tmp_path / "runs" / NAME).iterdir()
    assert cut_program((run / "log.txt").read_bytes()) == program  # both files written, read and logged back
    assert not (run / "work").exists()  # the files the stage wrote are removed once the log is collected
