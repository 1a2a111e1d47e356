"""Issue 35: the FP8 matmul preflight (pipeline/preflight/fp8.py): found from the program's syntax tree, asked of
the Python that trains, a refusal stops the run before the trainer starts.

No CUDA here: the probe's own answer is "skip" with the reason (torch sees no GPU); the refusal path runs with a
real interpreter that cannot do the matmul (a fresh venv without torch) and through run_train's hook.
"""

from __future__ import annotations

import sys
import venv
from pathlib import Path

import pytest

from pipeline.errors import CheckFailed
from pipeline.preflight.fp8 import _verdict, check_fp8_matmul, fp8_uses, one_element_scales
from pipeline.records.program_files import ProgramFile, join_program
from tests.paths import FIXTURES

PROGRAM = join_program(tuple(ProgramFile(name, (FIXTURES / "triton_program" / name).read_bytes())
                             for name in ("train_gpt.py", "triton_kernels.py")))
NO_FP8 = b"import torch\n\ndef f(x):\n    return x @ x.T  # float8 only in a comment\n"


@pytest.fixture(scope="module")
def python_without_torch(tmp_path_factory) -> str:
    folder = tmp_path_factory.mktemp("no-torch")
    venv.create(folder, with_pip=False)
    return str(folder / "bin" / "python")


def test_fp8_is_found_in_the_syntax_tree_not_the_text():
    assert fp8_uses(PROGRAM)[0] == "train_gpt.py:11 torch._scaled_mm"
    assert fp8_uses(NO_FP8) == ()


def test_a_file_this_python_cannot_parse_is_read_as_text():
    text = b'import torch\ny = torch._scaled_mm(a, b)\nprint(f"{"a"}")\n'  # PEP 701: 3.12 only
    if sys.version_info >= (3, 12):
        pytest.skip("this Python parses PEP 701 f-strings")
    assert fp8_uses(text) == ("train_gpt.py:2 torch._scaled_mm",)


def test_a_program_without_fp8_is_not_probed():
    check = check_fp8_matmul("/nonexistent/python", NO_FP8)  # never started: nothing to ask
    assert (check.status, check.reason) == ("skip", "the program does no FP8 matmul")


def test_without_a_gpu_the_probe_skips_with_its_reason():
    pytest.importorskip("torch")
    check = check_fp8_matmul(sys.executable, PROGRAM)
    import torch

    if torch.cuda.is_available():
        assert check.status in ("pass", "fail"), check
    else:
        assert check.status == "skip" and "sees no CUDA GPU" in check.reason, check


def test_a_python_that_cannot_do_the_matmul_is_refused(python_without_torch):
    check = check_fp8_matmul(python_without_torch, PROGRAM)
    assert check.status == "fail"
    assert "No module named 'torch'" in check.reason


def test_cublas_refusal_is_named_with_the_layout():
    data = {"torch": "2.11.0+cu130", "cuda": "13.0",
            "forms": {"0-d": "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED"}}
    check = _verdict(data, ("train_gpt.py:78 torch._scaled_mm",))
    assert check.status == "fail"
    assert check.reason == ("torch 2.11.0+cu130 (CUDA 13.0) cannot do the program's FP8 matmul (torch._scaled_mm "
                            "e4m3 x e4m3 -> bf16, 16384x3072 by 3072x768): RuntimeError: CUDA error: "
                            "CUBLAS_STATUS_NOT_SUPPORTED")


def test_the_run_stops_before_the_trainer_starts(tmp_path, python_without_torch):
    from pipeline.runs.launch import Tee
    from pipeline.runs.train_run import fp8_gate

    with Tee(tmp_path / "stdout.txt", open(tmp_path / "terminal", "wb")) as tee:
        fp8_gate(python_without_torch, NO_FP8, tee)  # nothing asked, nothing said
        with pytest.raises(CheckFailed, match="preflight fp8_matmul: .*No module named 'torch'"):
            fp8_gate(python_without_torch, PROGRAM, tee)
    assert Path(tmp_path / "stdout.txt").read_text().startswith("[repro] preflight fp8_matmul: fail: ")


DOWN_PROJECTION = b"""import torch
def mlp(x, W2_f8, W2_scale):
    return torch._scaled_mm(x, W2_f8, scale_a=one, scale_b=W2_scale)
class GPT:
    def forward(self):
        mlp_down_proj_scales = [self._mlp_down_proj_scales[i:i+1] for i in range(12)]
        return mlp(x, w, mlp_down_proj_scales[3])
"""
# 2026-05-19's shape: one-element up-projection scales go to a Triton kernel; each _scaled_mm scale is made 0-d
UP_PROJECTION = b"""import torch
def mm(grad, w_f8, w_s, grad_s):
    w_scale = grad.new_tensor(w_s, dtype=torch.float32)
    return torch._scaled_mm(grad, w_f8, scale_a=grad.new_tensor(grad_s), scale_b=w_scale)
class GPT:
    def forward(self):
        mlp_up_proj_scales = [self._mlp_up_proj_scales[i:i+1] for i in range(12)]
        triton_kernel(x, dequant_scale_ptr=mlp_up_proj_scales[3])
"""


def test_a_one_element_scale_that_may_reach_scaled_mm_is_seen_in_the_tree():
    assert one_element_scales(DOWN_PROJECTION)
    assert not one_element_scales(UP_PROJECTION)
    assert not one_element_scales(DOWN_PROJECTION.replace(b"[i:i+1]", b"[i]"))  # no one-element cut
    assert not one_element_scales(DOWN_PROJECTION.replace(b"[i:i+1]", b"[i:i+2]"))
    from pipeline.reproduce.program_needs import program_needs  # --plan says what a host run does with them

    assert "handed aligned by a host run" in program_needs([], DOWN_PROJECTION)[-1]
    assert "handed aligned" not in program_needs([], UP_PROJECTION)[-1]


H200_2026_12_02 = {"torch": "2.11.0+cu130", "cuda": "13.0", "device": "NVIDIA H200",
                   "forms": {"0-d": "ok", "slice": "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_SUPPORTED when "
                             "calling cublasLtMatmul", "slice copied": "ok"}}


def test_a_cublas_that_refuses_unaligned_one_element_scales_refuses_a_run_that_hands_them_so():
    """As on the H200 of 2026-12-02 (torch 2.11.0+cu130): 0-d and aligned one-element scales ran, a one-element
    slice 12 bytes into its tensor did not. A run that hands the scales as the program does is refused; one that
    copies them aligned (a host run, pipeline/runs/fp8_scales.py) passes and says why."""
    check = _verdict(H200_2026_12_02, ("train_gpt.py:78 torch._scaled_mm",))
    assert check.status == "fail" and "not with a one-element slice 12 bytes into its tensor" in check.reason
    assert "2026-07-17_FP8DownProjection" in check.reason and "--runtime host" in check.timing_impact
    check = _verdict(H200_2026_12_02, ("train_gpt.py:78 torch._scaled_mm",), aligned_scales=True)
    assert check.status == "pass" and "copied to aligned tensors" in check.reason
    assert "CUBLAS_STATUS_NOT_SUPPORTED" in check.reason
    both = {**H200_2026_12_02, "forms": {**H200_2026_12_02["forms"], "slice copied": "RuntimeError: no"}}
    check = _verdict(both, ("train_gpt.py:78 torch._scaled_mm",), aligned_scales=True)
    assert check.status == "fail" and "cannot do the program's FP8 matmul" in check.reason


def test_the_run_hands_scales_aligned_only_where_the_node_needs_it(monkeypatch):
    """needs_aligned_scales from the node's answer (the H200's, then a node that does the program's own call)."""
    import json

    from pipeline.preflight import fp8

    answers = {}
    monkeypatch.setattr(fp8, "_ask", lambda python, forms, timeout: (json.dumps(answers[python]), None))
    answers["h200"] = H200_2026_12_02
    answers["cu128"] = {**H200_2026_12_02, "forms": {"0-d": "ok", "slice": "ok", "slice copied": "ok"}}
    answers["no-gpu"] = {"torch": "2.11.0+cpu", "cuda": None, "skip": "torch 2.11.0+cpu sees no CUDA GPU"}
    assert fp8.needs_aligned_scales("h200", DOWN_PROJECTION)
    assert not fp8.needs_aligned_scales("cu128", DOWN_PROJECTION)
    assert not fp8.needs_aligned_scales("no-gpu", DOWN_PROJECTION)
    assert not fp8.needs_aligned_scales("h200", UP_PROJECTION)  # its _scaled_mm scales are 0-d: not asked


def test_plan_asks_the_node_only_where_a_gpu_driver_is(tmp_path, monkeypatch):
    """`--plan --python-env system` asks the FP8 probe itself where nvidia-smi is on the path (the node that
    trains); this CPU's torch answers `skip`, which refuses nothing. Without nvidia-smi nothing is started."""
    from pipeline.reproduce.program_needs import system_fp8_refusal

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("pipeline.preflight.fp8.check_fp8_matmul", None)  # no driver: never called
    assert system_fp8_refusal(DOWN_PROJECTION) == "" and system_fp8_refusal(None) == ""
    monkeypatch.undo()
    (tmp_path / "nvidia-smi").write_text("#!/bin/sh\nexit 0\n")
    (tmp_path / "nvidia-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert system_fp8_refusal(DOWN_PROJECTION) == ""  # asked: this CPU's torch sees no CUDA GPU (skip)
