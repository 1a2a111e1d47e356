"""Python float kernel arguments typed as the record's torch typed them (pipeline/runs/float_args.py).

torch >= 2.11's inductor types a Python float handed to a user Triton kernel fp64, torch <= 2.10's fp32; the 2026
records' cross-entropy kernel compiles only with fp32 (docs/triton-kernels.md). A host run whose torch is newer
than the record's starts the program through a launcher that sets the flag back. Here: the launcher runs a
program as `python train_gpt.py` would (a real Python, the CPU torch of this environment), and a real `repro
train` of the two-file stand-in record, whose kernels file holds a `@triton.jit`, goes through it and declares it.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from pipeline.runs.float_args import LAUNCHER, fp32_float_args, typings_differ
from tests.standin.record import MULTIFILE_DIR, NAME, repro, served_record, write_data

PROGRAM = """
import json, os, sys
import torch._inductor.config as config
from beside import VALUE
with open(sys.argv[0]) as f:
    own = f.read()
print(json.dumps({"flag": config._use_fp64_for_unbacked_floats, "argv": sys.argv, "name": __name__,
                  "beside": VALUE, "file": os.path.basename(__file__), "reads_itself": "beside import" in own}))
"""


@pytest.mark.parametrize("record, training, differ", [
    ("2.10.0+cu126", "2.11.0+cu130", True), ("2.10.0.dev20251210+cu126", "2.12.0", True), ("", "2.11.0", True),
    ("2.11.0+cu128", "2.11.0+cu130", False), ("2.10.0+cu128", "2.10.0+cu128", False), ("2.10.0", None, False)])
def test_the_typings_differ_only_from_a_torch_before_2_11_to_one_from_it(record, training, differ):
    assert typings_differ(record_torch=record, training_torch=training) is differ
    assert fp32_float_args(b"@triton.jit\ndef k(): pass\n", record_torch=record, training_torch=training) is differ
    assert not fp32_float_args(b"import torch\n", record_torch=record, training_torch=training)  # no kernels


def test_the_launcher_sets_the_flag_and_runs_the_program_as_its_own_main(tmp_path):
    (tmp_path / "train_gpt.py").write_text(PROGRAM)
    (tmp_path / "beside.py").write_text("VALUE = 7\n")
    done = subprocess.run([sys.executable, str(LAUNCHER), "train_gpt.py", "--x", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"flag": False, "argv": ["train_gpt.py", "--x", "1"], "name": "__main__",
                                       "beside": 7, "file": "train_gpt.py", "reads_itself": True}
    assert "[repro] inductor: Python float kernel arguments typed fp32" in done.stderr
    plain = subprocess.run([sys.executable, "train_gpt.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert json.loads(plain.stdout)["flag"] is True  # this torch's own default: the launcher is what changes it


def _kernels_program() -> bytes:
    """The two-file stand-in, its kernels file holding a Triton kernel's decorator as the 2026 records' does."""
    from pipeline.records.program_files import ProgramFile, join_program

    kernels = (MULTIFILE_DIR / "triton_kernels.py").read_bytes() + b"\n# @triton.jit kernels would be defined here\n"
    return join_program((ProgramFile("train_gpt.py", (MULTIFILE_DIR / "train_gpt.py").read_bytes()),
                         ProgramFile("triton_kernels.py", kernels)))


def test_a_host_run_of_a_2_9_record_on_this_newer_torch_types_its_floats_back_and_declares_it(tmp_path):
    with served_record(tmp_path, _kernels_program()) as env:  # the record's torch: 2.9.0.dev20250726
        done = repro(env, "train", "--record", NAME, "--runtime", "host", "--data-dir",
                     str(write_data(tmp_path / "data")), "--runs-dir", str(tmp_path / "runs"))
        assert done.returncode == 0, done.stdout + done.stderr
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        meta = yaml.safe_load((run / "run.yaml").read_text())
        assert meta["inductor_fp32_floats"] is True and meta["command"][-2:] == [str(LAUNCHER), "train_gpt.py"]
        assert "[repro] inductor: Python float kernel arguments typed fp32" in (run / "stdout.txt").read_text()
        verdict = repro(env, "verify", "--record", NAME, "--json", str(run))
    assert "inductor.fp32_floats" in [f["code"] for f in json.loads(verdict.stdout)["findings"]]
