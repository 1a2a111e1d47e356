"""One-element FP8 scales handed to cuBLAS aligned where the node needs it (pipeline/runs/fp8_scales.py).

cuBLASLt under torch 2.11.0+cu130 refused 2026-07-17's `scales[i:i+1]` (12 bytes into its tensor) and did the same
value aligned. Here: the launcher runs a compiled program as `python train_gpt.py` would with this CPU's real
torch and copies such a scale (inductor drops a plain clone, so it must be an operator); and a real `repro train`
of the stand-in record, whose program hands `torch._scaled_mm` such a slice, goes through it and declares it when
the node's FP8 probe answers as the H200 did (the one answer this CPU cannot give: it is replayed).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml
from click.testing import CliRunner

from pipeline.runs.float_args import LAUNCHER as FLOATS
from pipeline.runs.fp8_scales import LAUNCHER
from tests.standin.record import NAME, program_bytes, served_record, write_data

pytest.importorskip("torch")

PROGRAM = """
import json, sys
import torch
from beside import VALUE
x = torch.randn(32, 64).to(torch.float8_e4m3fn)
w = torch.randn(64, 16).to(torch.float8_e4m3fn).T.contiguous().T
scales = torch.tensor([1.0, 2.0, 0.5, 0.25, 4.0])

def f(x, w, scales, i):  # a one-element slice at element i, as 2026-07-17's scales[i:i+1]
    return torch._scaled_mm(x, w, out_dtype=torch.float32, scale_a=scales[i:i + 1], scale_b=scales[0:1])

want = [torch.ops.aten._scaled_mm(x, w, scales[i:i + 1], scales[0:1], out_dtype=torch.float32) for i in range(4)]
got = [torch.compile(f, dynamic=False)(x, w, scales, i) for i in range(4)]
import torch._inductor.config as config
print(json.dumps({"equal": all(torch.equal(a, b) for a, b in zip(want, got)), "argv": sys.argv, "name": __name__,
                  "beside": VALUE, "fp64_floats": config._use_fp64_for_unbacked_floats}))
"""


def test_the_launcher_copies_an_unaligned_scale_inside_a_compiled_program(tmp_path):
    """Chained with the float launcher, as a 2026-07-17 run on torch 2.11 starts: the products are the
    original's, the program is its own __main__ with its argv and folder, and the copy is said once."""
    (tmp_path / "train_gpt.py").write_text(PROGRAM)
    (tmp_path / "beside.py").write_text("VALUE = 7\n")
    done = subprocess.run([sys.executable, str(LAUNCHER), str(FLOATS), "train_gpt.py", "--x", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"equal": True, "argv": ["train_gpt.py", "--x", "1"], "name": "__main__",
                                       "beside": 7, "fp64_floats": False}
    # element 1 (4 bytes in) is the first unaligned one the compiled calls hand over; said once per process
    assert done.stderr.count("[repro] fp8 scales: a one-element scale 4 bytes into its tensor") == 1, done.stderr


# The stand-in record's program with an FP8 down projection's scales in the shape of 2026-07-17's
FP8_TAIL = b"""
import torch
mlp_down_scales = torch.ones(12)
slices = [mlp_down_scales[i:i+1] for i in range(12)]
x8 = torch.ones(16, 32).to(torch.float8_e4m3fn)
w8 = torch.ones(32, 16).to(torch.float8_e4m3fn).T.contiguous().T
torch._scaled_mm(x8, w8, scale_a=slices[3], scale_b=slices[3], out_dtype=torch.float32)
"""
H200 = {"torch": "2.11.0+cu130", "cuda": "13.0", "device": "NVIDIA H200",  # 2026-12-02, fp8_scales.txt
        "forms": {"0-d": "ok", "slice": "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when calling "
                  "cublasLtMatmul", "slice copied": "ok"}}


def test_a_host_run_on_such_a_node_hands_the_scales_aligned_and_declares_it(tmp_path, monkeypatch):
    from pipeline.cli import cli
    from pipeline.preflight import fp8

    monkeypatch.setattr(fp8, "_ask", lambda python, forms, timeout: (json.dumps(H200), None))
    program = program_bytes() + FP8_TAIL
    with served_record(tmp_path, program) as env:
        args = ["train", "--record", NAME, "--runtime", "host", "--data-dir", str(write_data(tmp_path / "data")),
                "--runs-dir", str(tmp_path / "runs")]
        done = CliRunner().invoke(cli, args, env=env)
        assert done.exit_code == 0, done.output
        (run,) = (tmp_path / "runs" / NAME).iterdir()
        meta = yaml.safe_load((run / "run.yaml").read_text())
        assert meta["fp8_aligned_scales"] is True
        assert meta["command"][-2:] == [str(LAUNCHER), "train_gpt.py"]  # no Triton kernel: no float launcher
        out = (run / "stdout.txt").read_text()
        assert "preflight fp8_matmul: pass: " in out and "copied to aligned tensors" in out
        assert "[repro] fp8 scales: a one-element scale 12 bytes into its tensor" in out
        verdict = CliRunner().invoke(cli, ["verify", "--record", NAME, "--json", str(run)], env=env)
    assert "fp8.aligned_scales" in [f["code"] for f in json.loads(verdict.output)["findings"]]
