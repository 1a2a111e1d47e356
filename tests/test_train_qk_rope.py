"""train/qk_rope.py (issue 41, lever 2): QK-norm + rotary as triton_ops, against the existing path.

    .venv/bin/python -m pytest -q tests/test_train_qk_rope.py

1. The kernels in Triton's interpreter (CPU, a subprocess) against their torch forms: q and k bit for bit, 1/rms
   to float32 order, the backward equal but for rare one-step bf16 flips (float32 sums in another order); inputs
   are strided views of a QKV projection, tables YaRN-extended, head sizes 64 and 128.
2. The op (its torch form on the CPU, its kernels on CUDA) against the model's expression: forward within the
   eager expression's bf16 roundings, gradients at least as close to float64 as the eager record's own.
3. The model calls the op in every attention layer where it runs its kernels, with the record expression's loss.
"""

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import cuda_or_skip
from tests.helpers_triton import needs_triton, run_interpreted
from train.config import preset
from train.model import GPT, Yarn, rms_norm, rotary
from train.qk_rope import EPS, qk_norm_rope

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

INTERPRETED = """
import torch
from train.model import Yarn
from train.qk_rope import launch, launch_backward, reference, reference_backward
out = {}
for T, H, hd in ((100, 3, 64), (64, 2, 128)):
    g = torch.Generator().manual_seed(T)
    yarn = Yarn(hd, 128, 8); yarn.extend(3, 7)
    qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16()
    q, k, _ = qkv.view(T, 3 * H, hd).chunk(3, dim=1)
    got, want = launch(q, k, yarn.cos, yarn.sin, fast=False), reference(q, k, yarn.cos, yarn.sin)
    ups = [torch.randn(T, 3 * H, hd, generator=g).bfloat16()[:, :H] for _ in range(2)]  # strided, as attention's
    gb = launch_backward(*ups, q, k, yarn.cos, yarn.sin, want[2], fast=False)
    wb = reference_backward(*ups, q, k, yarn.cos, yarn.sin, want[2])
    far = [((a.float() - b.float()).abs() > b.float().abs() * 2 ** -7).sum().item() for a, b in zip(gb, wb)]
    out[f"{T}x{H}x{hd}"] = dict(qk_equal=torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]),
                                rstd_rel=((got[2] - want[2]).abs() / want[2]).max().item(),
                                bwd_flips=sum((a != b).sum().item() for a, b in zip(gb, wb)) / (2 * T * H * hd),
                                bwd_beyond_one_step=sum(far))
print(out)
"""


@needs_triton
def test_the_kernels_in_the_interpreter_equal_their_torch_forms():
    for shape, r in run_interpreted("-c", INTERPRETED).items():
        assert r["qk_equal"], shape
        assert r["rstd_rel"] < 1e-6, shape
        assert r["bwd_flips"] < 1e-3 and r["bwd_beyond_one_step"] == 0, (shape, r)


def inputs(device: str, T: int = 96, H: int = 3, hd: int = 64):
    g = torch.Generator().manual_seed(5)
    yarn = Yarn(hd, 128, 8)
    yarn.extend(3, 7)
    qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16()
    ups = [torch.randn(T, H, hd, generator=g).bfloat16() for _ in range(2)]
    return qkv.to(device), [u.to(device) for u in ups], yarn.cos.to(device), yarn.sin.to(device), H, hd


def grads(qkv, ups, H, hd, fn, dtype):
    x = qkv.to(dtype).requires_grad_()
    q, k, _ = x.view(qkv.size(0), 3 * H, hd).chunk(3, dim=1)
    out = fn(q, k)
    torch.autograd.backward(list(out), [u.to(dtype) for u in ups])
    return out, x.grad


@pytest.mark.parametrize("device", DEVICES)
def test_the_op_matches_the_models_expression(device):
    qkv, ups, cos, sin, H, hd = inputs(device)
    norm64 = lambda t: F.rms_norm(t, (hd,), eps=EPS)  # noqa: E731  (F.rms_norm's default eps for bf16 input)
    _, truth = grads(qkv, ups, H, hd, lambda q, k: (rotary(norm64(q), cos.double(), sin.double()),
                                                    rotary(norm64(k), cos.double(), sin.double())), torch.float64)
    (rq, rk), record = grads(qkv, ups, H, hd, lambda q, k: (rotary(rms_norm(q), cos, sin),
                                                            rotary(rms_norm(k), cos, sin)), torch.bfloat16)
    (oq, ok), ours = grads(qkv, ups, H, hd, lambda q, k: qk_norm_rope(q, k, cos, sin)[:2], torch.bfloat16)
    for a, b in ((oq, rq), (ok, rk)):  # the eager expression rounds each product and sum to bf16 in between
        assert a.is_contiguous() and ((a.float() - b.float()).abs() <= 3 * 2 ** -8 * b.float().abs() + 2 ** -6).all()
    err = lambda g: ((g.double() - truth).norm() / truth.norm()).item()  # noqa: E731
    assert err(ours) <= err(record) * 1.05 + 1e-4, (err(ours), err(record))


def test_the_model_calls_the_op_in_every_attention_layer(monkeypatch):
    """GPT's attention takes QK-norm and rotary from the op where it runs its kernels (made true here, so the CPU
    takes the op's torch form); with the record's expression swapped in, the same loss."""
    import train.model

    calls = []
    monkeypatch.setattr(train.model, "runs_triton", lambda q: True)
    monkeypatch.setattr(train.model, "qk_norm_rope", lambda *a: calls.append(1) or qk_norm_rope(*a))
    cfg = preset("tiny")
    torch.manual_seed(0)
    model = GPT(cfg)
    T = cfg.train_max_seq_len
    inputs_, targets = torch.randint(0, 100, (T,), dtype=torch.int32), torch.randint(0, 100, (T,))
    args = (inputs_, targets, torch.tensor([0, T], dtype=torch.int32), torch.tensor(16), torch.tensor(32),
            torch.tensor(0.1))
    loss_op = model(*args)
    assert len(calls) == sum(spec.has_attn for spec in model.plan) > 0
    monkeypatch.setattr(train.model, "qk_norm_rope", lambda q, k, cos, sin: (
        rotary(rms_norm(q), cos, sin), rotary(rms_norm(k), cos, sin), None))
    assert torch.allclose(model(*args), loss_op, rtol=1e-5)


def test_the_op_compiles_with_its_kernels_on_cuda():
    """Inductor traces the triton_ops (their kernels inside its graph, launched by its own code): the same bits as
    the eager op. Fails with eps a run-time argument of the forward kernel: Inductor types a float argument fp64
    (3 q and k elements one bf16 step apart on an H200, docs/device-runs/2026-12-03-h200-levers/qk-diff.txt)."""
    cuda_or_skip()
    qkv, ups, cos, sin, H, hd = inputs("cuda")

    def f(x):
        q, k, _ = x.view(qkv.size(0), 3 * H, hd).chunk(3, dim=1)
        return qk_norm_rope(q, k, cos, sin)

    runs = []
    for fn in (f, torch.compile(f, fullgraph=True)):
        x = qkv.clone().requires_grad_()
        q, k, rstd = fn(x)
        torch.autograd.backward([q, k], ups)
        runs.append((q, k, rstd, x.grad))
    apart = {name: ((a != b).sum().item(), (a.float() - b.float()).abs().max().item())
             for name, a, b in zip(("q", "k", "rstd", "dqkv"), *runs)}
    assert all(n == 0 for n, _ in apart.values()), f"(elements apart, largest distance): {apart}"
