"""train/qk_rope.py: the QK-norm + rotary kernel against its torch form, and the model routed through the op.

The GPU half (the kernel compiled, timed against the record's compiled expression) runs on the device:
`python -m train.qk_rope --time`, train/BENCHMARKS.md. tests/test_train_vs_record.py runs the record's
comparison with the option on (float32, CPU: the op's torch forward and its own backward formula).
"""

import ast
import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import torch

from tests.test_xent_triton import needs_triton
from train import qk_rope
from train.config import preset
from train.model import GPT

REPO = Path(__file__).resolve().parents[1]


@needs_triton
def test_the_kernel_matches_its_torch_form_under_the_interpreter():
    env = dict(os.environ, TRITON_INTERPRET="1", PYTHONPATH=str(REPO), CUDA_VISIBLE_DEVICES="")
    done = subprocess.run([sys.executable, "-m", "train.qk_rope"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert set(report) == {"100x2x128", "64x6x128", "33x3x64"}  # 100 x 4 rows: a ragged last block of 64
    for shape, entry in report.items():
        assert entry["kernel"] and entry["bf16_flips"] <= 0.01 and entry["rstd_rel_err"] < 1e-6, shape
        assert entry["grad_rel_err"] <= entry["record_grad_rel_err"], shape  # float32 inside: the more accurate


def test_the_selfcheck_rejects_a_wrong_backward(monkeypatch):
    """The check can fail: a backward that forgets the norm's own term is caught."""
    def forgetful(ctx, grad_qk, _):
        qkv, rstd, cos, sin = ctx.saved_tensors
        T, H = qkv.size(0), ctx.num_heads
        dy = grad_qk.float().transpose(0, 1).reshape(T, 2 * H, -1)
        c, s = cos[:T, None, :].float(), sin[:T, None, :].float()
        dy1, dy2 = dy.chunk(2, dim=-1)
        dx = rstd[..., None] * torch.cat((dy1 * c - dy2 * s, dy1 * s + dy2 * c), dim=-1)
        return torch.cat((dx.to(qkv.dtype), qkv.new_zeros(T, H, dx.size(-1))), dim=1).view_as(qkv), None, None, None

    qk_rope.qk_rope.register_autograd(forgetful, setup_context=qk_rope._setup_context)
    try:
        try:
            qk_rope.selfcheck("cpu", shapes=((16, 2, 32),))
        except AssertionError as e:
            assert "dL/dqkv error" in str(e)
        else:
            raise AssertionError("the self-check passed a wrong backward")
    finally:
        qk_rope.qk_rope.register_autograd(qk_rope._backward, setup_context=qk_rope._setup_context)
    assert qk_rope.selfcheck("cpu", shapes=((16, 2, 32),))  # restored


def backward_nodes(loss) -> set[str]:
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack += [f for f, _ in node.next_functions]
    return {type(n).__name__ for n in seen}


def test_the_model_with_the_option_runs_through_the_op_and_computes_the_same():
    cfg = preset("tiny")
    T = cfg.train_tokens_per_slot
    inputs = torch.randint(0, 1000, (T,), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 1000, (T,), generator=torch.Generator().manual_seed(2))
    bounds = torch.tensor([0, 100, T], dtype=torch.int32)
    losses, grads = {}, {}
    for fused in (False, True):
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(cfg, fused_qk_rope=fused))
        for p in model.parameters():  # the zero-initialised projections and gates too: every path carries
            torch.nn.init.normal_(p, std=0.05)
        loss = model(inputs, targets, bounds, torch.tensor(16), torch.tensor(32), torch.tensor(0.1))
        assert any("qk_rope" in n for n in backward_nodes(loss)) == fused
        loss.backward()
        losses[fused], grads[fused] = loss.detach(), {n: p.grad for n, p in model.named_parameters()}
    assert torch.allclose(losses[True], losses[False], rtol=1e-6)
    for name, g in grads[False].items():
        assert torch.allclose(grads[True][name], g, rtol=1e-4, atol=1e-6), name


def test_the_gpu_timing_runs_on_the_cpu():
    """`--time`'s code at a small shape, torch.compile off, wall-clock timing: that it runs and reports each part."""
    code = "from train.qk_rope import time_record_shape; print(time_record_shape(64, 2, 32, reps=1, device='cpu'))"
    env = dict(os.environ, TORCHDYNAMO_DISABLE="1", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    report = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert set(report) == {"record_fwd_ms", "fused_fwd_ms", "record_fwd_bwd_ms", "fused_fwd_bwd_ms", "copy_qk_ms"}
    assert all(v > 0 for v in report.values())
