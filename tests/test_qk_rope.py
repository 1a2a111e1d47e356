"""train/qk_rope.py: the attention-input kernels against their torch forms, and the model routed through the op.

The GPU half (the kernels compiled, timed against the record's compiled expression) runs on the device:
`python -m train.qk_rope --time`, train/BENCHMARKS.md. tests/test_train_vs_record.py runs the record's
comparison with the option on (float32, CPU: the op's torch forms in both directions).
"""


import pytest
import torch

from tests.helpers_model import assert_option_runs_through_op_and_computes_the_same
from tests.helpers_triton import needs_triton, run_interpreted, timing_report
from train import qk_rope


@needs_triton
def test_the_kernels_match_their_torch_forms_under_the_interpreter():
    report = run_interpreted("-m", "train.qk_rope")
    # 100 x 2 rows: a ragged last block of 64; layers with a value embedding and without
    assert set(report) == {"100x2x128_ve", "64x6x128", "33x3x64_ve"}
    for shape, entry in report.items():
        assert entry["fwd_flips"] <= 0.01 and entry["bwd_flips"] <= 0.01, shape  # the kernels ran and agree
        assert entry["rstd_rel_err"] < 1e-5 and entry["dsa_kernel_rel_err"] < 1e-5, shape
        assert entry["dqkv_rel_err"] <= entry["dqkv_record_rel_err"], shape  # float32 inside: the more accurate
        assert ("dve_rel_err" in entry) == shape.endswith("_ve"), shape


def test_the_selfcheck_rejects_a_wrong_backward(monkeypatch):
    """The check can fail: a backward that forgets RMS norm's own term is caught."""
    right = qk_rope.reference_backward

    def forgetful(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, num_heads):
        grad_qkv, grad_ve, grad_sa = right(dq, dk, dv, qkv, ve, sa, cos, sin, rstd, num_heads)
        T, H = qkv.size(0), num_heads
        dy = torch.cat((dq, dk), dim=1).float()
        dy1, dy2 = dy.chunk(2, dim=-1)
        c, s = cos[:T, None, :].float(), sin[:T, None, :].float()
        dx = rstd[..., None] * torch.cat((dy1 * c - dy2 * s, dy1 * s + dy2 * c), dim=-1)
        grad_qkv = grad_qkv.clone().view(T, 3 * H, -1)
        grad_qkv[:, : 2 * H] = dx.to(grad_qkv.dtype)
        return grad_qkv.view_as(qkv), grad_ve, grad_sa

    monkeypatch.setattr(qk_rope, "reference_backward", forgetful)
    with pytest.raises(AssertionError, match="dqkv error"):
        qk_rope.selfcheck("cpu", shapes=((16, 2, 32, True),))
    monkeypatch.setattr(qk_rope, "reference_backward", right)
    assert qk_rope.selfcheck("cpu", shapes=((16, 2, 32, True),))


def test_the_model_with_the_option_runs_through_the_op_and_computes_the_same():
    assert_option_runs_through_op_and_computes_the_same("fused_qk_rope", "qk_rope")


@needs_triton
def test_the_gpu_timing_runs_on_the_cpu():
    """`--time`'s code at a small shape, torch.compile off, wall-clock timing: that it runs and reports each part."""
    report = timing_report("train.qk_rope", "64, 2, 32")
    blocks = report.pop("kernels_fwd_bwd_ms_by_block")
    assert set(report) == {"record_fwd_ms", "fused_fwd_ms", "record_fwd_bwd_ms", "fused_fwd_bwd_ms", "copy_qkv_ms"}
    assert set(blocks) == {"32w4", "64w4", "64w8", "128w8"}
    assert all(v > 0 for v in report.values()) and all(f > 0 and b > 0 for f, b in blocks.values())


@needs_triton
def test_the_kernels_compile_for_an_h100_to_16_byte_loads_and_stores():
    """Both kernels are memory-bound passes: every bf16 row half moves in 16-byte accesses (a scalar 2-byte
    access would quarter the bandwidth a warp uses). Compiled on the CPU with Triton's ptxas (train/xent_sass.py)."""
    from train import qk_rope_kernel as k
    from train.xent_sass import kernel_opcodes

    consts = dict(H=6, HALF=64, HAS_VE=True, BLOCK_R=qk_rope.BLOCK_R, FAST=True)
    bf16 = ("qkv", "ve", "cos", "sin")
    fwd = kernel_opcodes(k.forward_kernel, dict(
        qkv="*bf16", ve="*bf16", sa="*fp32", cos="*bf16", sin="*bf16", q_out="*bf16", k_out="*bf16", v_out="*bf16",
        rstd_out="*fp32", T="i32", qkv_stride="i32", eps="fp32", **dict.fromkeys(consts, "constexpr")), consts,
        [*bf16, "q_out", "k_out", "v_out", "qkv_stride"])
    bwd = kernel_opcodes(k.backward_kernel, dict(
        dq="*bf16", dk="*bf16", dv="*bf16", g_stride_t="i32", g_stride_h="i32", qkv="*bf16", ve="*bf16", sa="*fp32",
        cos="*bf16", sin="*bf16", rstd="*fp32", grad_qkv="*bf16", grad_ve="*bf16", sa_partial="*fp32", T="i32",
        qkv_stride="i32", **dict.fromkeys(consts, "constexpr")), consts,
        [*bf16, "dq", "dk", "dv", "g_stride_t", "g_stride_h", "grad_qkv", "grad_ve", "qkv_stride"])
    for name, ops in (("forward", fwd), ("backward", bwd)):
        narrow = {op: n for op, n in ops.items() if op in ("LDG.E.U16", "STG.E.U16", "LDG.E.64", "STG.E.64")}
        assert not narrow, (name, narrow)
    # per thread: 64 rows x 64 columns per half over 128 threads = 4 x 16 bytes per half-row tensor
    assert fwd["STG.E.128"] == 16 and fwd["LDG.E.128"] >= 16, fwd  # q or k (8 stores), or v (8)
    assert bwd["STG.E.128"] == 24 and bwd["LDG.E.128"] >= 24, bwd  # dL/dqkv's part (8), or it and dL/dve (16)
