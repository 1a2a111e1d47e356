"""train/relu2_mlp.py: the fused matmul in both epilogues against its torch forms, and the model routed through
the op.

The GPU half (every tile candidate compiled and timed against the record's compiled MLP and cuBLAS) runs on the
device: `python -m train.relu2_mlp --time`, train/BENCHMARKS.md. tests/test_train_vs_record.py runs the record's
comparison with the option on (float32, CPU: the op's torch forms in both directions).
"""


import pytest

from tests.helpers_model import assert_option_runs_through_op_and_computes_the_same
from tests.helpers_triton import needs_triton, run_interpreted, timing_report
from train import relu2_mlp


@needs_triton
def test_the_kernel_matches_its_torch_forms_under_the_interpreter():
    report = run_interpreted("-m", "train.relu2_mlp")
    # 100 rows: a ragged last row tile of 64 (rows read wrapped, never stored); K = 64 and 128
    assert set(report) == {"100x64x256", "256x128x512"}
    for shape, entry in report.items():
        assert entry["flips"] <= 0.01, shape  # the kernel ran and agrees
        for name in ("dx", "dfc", "dproj"):
            assert entry[f"{name}_rel_err"] <= 1.02 * entry[f"{name}_record_rel_err"] + 1e-3, (shape, name)


def test_the_selfcheck_rejects_a_wrong_backward(monkeypatch):
    """The check can fail: a backward that forgets ReLU's mask (dL/dh = dL/da · 2h) is caught."""
    def unmasked(dy, proj, h):
        return ((dy.float() @ proj.float()).to(h.dtype).float() * 2 * h.float()).to(h.dtype)

    monkeypatch.setattr(relu2_mlp, "reference_dh", unmasked)
    with pytest.raises(AssertionError, match="error"):
        relu2_mlp.selfcheck("cpu", shapes=((32, 16, 64),))
    monkeypatch.undo()
    assert relu2_mlp.selfcheck("cpu", shapes=((32, 16, 64),))


def test_the_model_with_the_option_runs_through_the_op_and_computes_the_same():
    assert_option_runs_through_op_and_computes_the_same("fused_mlp", "relu2_mlp")


@needs_triton
def test_the_gpu_timing_runs_on_the_cpu():
    """`--time`'s code at a small shape, torch.compile off, wall-clock timing: that it runs and reports each part."""
    report = timing_report("train.relu2_mlp", "96, 64")
    tiles = report.pop("tiles_fwd_bwd_ms")
    assert set(report) == {"record_fwd_ms", "fused_fwd_ms", "record_fwd_bwd_ms", "fused_fwd_bwd_ms", "cublas_x_fc_ms"}
    assert list(tiles) == ["64x128x64w4s2", "64x128x64w4s2p"] and all(f > 0 and b > 0 for f, b in tiles.values())
    assert all(v > 0 for v in report.values())


@needs_triton
@pytest.mark.parametrize("config", relu2_mlp.CONFIGS)
def test_every_tile_candidate_compiles_for_an_h100_to_tensor_core_and_16_byte_code(config):
    """Each candidate compiled on the CPU with Triton's ptxas (train/xent_sass.py): the products on Hopper's
    warpgroup tensor cores (HGMMA), tiles loaded asynchronously into shared memory (LDGSTS, the software
    pipeline; the persistent form by TMA, UTMALDG), and every output and h's read in 16-byte accesses."""
    from train import relu2_mlp_kernel as k
    from train.xent_sass import kernel_opcodes

    block_m, block_n, block_k, warps, stages, persistent = config
    ints = ("stride_a", "stride_b") if persistent else ("M", "N", "stride_a", "stride_b")
    consts = ("M", "N", "K", "PROGRAMS") if persistent else ("K",)
    sig = dict(a="*bf16", b="*bf16", aux="*bf16", out="*bf16", out2="*bf16", **dict.fromkeys(ints, "i32"),
               **dict.fromkeys((*consts, "BACKWARD", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "FAST"), "constexpr"))
    fn = k.matmul_relu2_persistent_kernel if persistent else k.matmul_relu2_kernel
    for backward in (False, True):
        values = dict(K=768, BACKWARD=backward, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8,
                      FAST=True, **(dict(M=49152, N=3072, PROGRAMS=132) if persistent else {}))
        ops = kernel_opcodes(fn, sig, values, ["a", "b", "aux", "out", "out2", *ints], warps, stages)
        assert ops["HGMMA"] > 0 and ops["UTMALDG" if persistent else "LDGSTS"] > 0, (backward, ops)
        narrow = {op: n for op, n in ops.items() if op in ("LDG.E.U16", "STG.E.U16", "LDG.E.64", "STG.E.64", "LDG.E")}
        assert not narrow, (backward, narrow)
        # per thread, 16-byte stores: h and a forward, dL/dh backward; h read backward
        per_thread = block_m * block_n * 2 // 16 // (32 * warps)
        assert ops["STG.E.128"] == per_thread * (1 if backward else 2), (backward, ops)
        assert ops.get("LDG.E.128", 0) == (per_thread if backward else 0), (backward, ops)
