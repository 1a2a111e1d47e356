"""Issue 35: a record's Triton kernels, read from its syntax tree and compiled by Triton's frontend for sm_90 on
this CPU; the plan's `needs` lines from the committed results (docs/triton-kernels.md).

The fixture (tests/fixtures/triton_program/) is a two-file program written for these tests in the records'
shapes: a Python float launched into a loop that carries an fp32 value (what failed on torch 2.11), an
autotuned kernel whose configs are built by code, a tensor-descriptor launch, and an FP8 matmul.
"""

from __future__ import annotations

import sys

import pytest

from pipeline.records.program_files import ProgramFile, join_program
from pipeline.records.triton_compile import compile_launches, main_kernels
from pipeline.records.triton_launches import AUTOTUNED, kernel_launches
from pipeline.reproduce import program_needs
from tests.helpers_triton import needs_triton
from tests.paths import FIXTURES

PROGRAM = join_program(tuple(ProgramFile(name, (FIXTURES / "triton_program" / name).read_bytes())
                             for name in ("train_gpt.py", "triton_kernels.py")))


def by_kernel():
    return {launch.kernel: launch for launch in kernel_launches(PROGRAM)}


def test_launch_types_are_read_from_the_source():
    launches = by_kernel()
    lse = launches["capped_lse_kernel"]
    assert lse.skipped is None
    assert lse.signature == {"x_ptr": "*fp32", "out_ptr": "*fp32", "stride_row": "i32", "n_cols": "i32",
                             "cap": "float", "BLOCK_SIZE": "constexpr"}
    assert lse.floats == ("cap",) and lse.constexprs == {"BLOCK_SIZE": 1024}
    assert lse.assumed == ("x_ptr",)  # `logits` has no dtype in the source; `out` states float32
    assert launches["double_kernel"].constexprs == {"BLOCK": AUTOTUNED}
    assert "TensorDescriptor" in launches["tile_kernel"].skipped


def test_the_main_program_gives_only_its_definitions():
    text = b"import os\nimport not_a_module\nSIZE = 4\nX = compute()\ndef helper():\n    return 1\n" \
           b"train()\nopts[0].flag = False\n"
    module = main_kernels(text)
    assert "train()" not in module and "\nSIZE = 4\n" in module  # a statement never runs; a literal binds
    assert "try:\n    import not_a_module\nexcept Exception:\n    pass" in module
    assert "try:\n    X = compute()\nexcept Exception:\n    pass" in module
    assert "try:\n    opts[0].flag = False\nexcept Exception:\n    pass" in module  # a literal, but not to a name
    compile(module, "train_gpt_kernels.py", "exec")


@needs_triton
def test_fp64_floats_break_the_loop_carried_max_and_fp32_floats_compile():
    version, results = compile_launches(sys.executable, PROGRAM, kernel_launches(PROGRAM))
    got = {(r["kernel"], r["float_type"]): r for r in results}
    assert got[("capped_lse_kernel", "fp32")]["ok"], got[("capped_lse_kernel", "fp32")]
    failed = got[("capped_lse_kernel", "fp64")]
    assert not failed["ok"]
    assert "Loop-carried variable running_max has initial type fp32 but is re-assigned to fp64" in failed["error"]
    assert got[("double_kernel", "fp32")]["ok"] and got[("double_kernel", "fp64")]["ok"]  # its first config
    assert ("tile_kernel", "fp32") not in got  # skipped, never guessed
    assert version.count(".") >= 1


def test_plan_names_the_triton_failure_and_the_fp8_matmuls(monkeypatch):
    files = [{"name": "triton_kernels.py", "sha256": "ab" * 32}]
    fails = {"fp32": {"compiled": 2, "failed": []},
             "fp64": {"compiled": 1, "failed": [{"kernel": "k", "file": "triton_kernels.py", "error": "E!"}]}}
    data = {"ab" * 32: {"launches": [{"kernel": "k", "floats": ["A", "B"]}, {"kernel": "ok", "floats": ["x"]}],
                        "results": {"3.6.0": fails, "3.4.0": fails}}}
    monkeypatch.setattr(program_needs, "_data", lambda: data)
    lines = program_needs.program_needs(files, PROGRAM)
    assert lines[0] == ("Triton 3.6.0, 3.4.0 does not compile triton_kernels.py's k with its Python floats as "
                        "torch >= 2.11's inductor types them (fp64): E!")
    assert "passes Python floats to k(A, B): torch <= 2.10 types them fp32; on torch >= 2.11 a host run sets" \
        in lines[1]  # not `ok`, which compiles
    assert lines[2].startswith("FP8 matmuls (train_gpt.py:11 torch._scaled_mm, train_gpt.py:9 torch.float8_e4m3fn, "
                               "train_gpt.py:10 torch.float8_e4m3fn): the node's torch and cuBLAS must do them")
    assert program_needs.program_needs([], b"x = 1\n") == []


@pytest.mark.parametrize("name", ["2026-02-10", "2026-04-08"])
def test_the_committed_results_hold_the_two_failed_records(name):
    data = program_needs._data()
    entries = [e for e in data.values() if any(r.startswith(name) for r in e["records"])]
    assert entries, f"manifests/triton-kernels.yaml has no entry of {name}"
    results = entries[0]["results"]["3.6.0"]
    assert results["fp32"]["failed"] == []
    assert any("Loop-carried variable" in f["error"] for f in results["fp64"]["failed"])


def test_an_environment_is_refused_by_its_torch_and_triton(monkeypatch):
    files = [{"name": "triton_kernels.py", "sha256": "cd" * 32}]
    data = {"cd" * 32: {"launches": [], "results": {"3.6.0": {
        "fp32": {"compiled": 1, "failed": []}, "fp64": {"compiled": 0, "failed": [{"kernel": "k", "error": "E!"}]}}}}}
    monkeypatch.setattr(program_needs, "_data", lambda: data)
    assert program_needs.triton_refusal(files, "3.6.0", "2.10.0+cu128") is None
    assert program_needs.triton_refusal(files, "3.6.0", "2.10.0.dev20251210+cu126") is None
    assert program_needs.triton_refusal(files, "3.6.0", "2.11.0+cu130") == \
        "Triton 3.6.0 under torch 2.11.0+cu130 does not compile triton_kernels.py's k: E!"
    assert program_needs.triton_refusal(files, "3.4.0", "2.12.0") is None  # no result: nothing said


def test_a_file_this_python_cannot_parse_is_named_not_guessed():
    text = b'import triton\n@triton.jit\ndef k(x):\n    pass\nprint(f"{"a"}"\n'  # no Python parses this
    program = join_program((ProgramFile("train_gpt.py", b"x = 1\n"), ProgramFile("triton_kernels.py", text)))
    (launch,) = kernel_launches(program)
    assert launch.skipped.startswith("triton_kernels.py is not parsed by this Python")
    assert main_kernels(text) == ""
