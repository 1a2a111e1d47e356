"""train/relu2_grad.py (issue 41, lever 1): the MLP whose ReLU² backward rides the grad_h GEMM's epilogue.

    .venv/bin/python -m pytest -q tests/test_train_relu2_grad.py

1. The kernel in Triton's interpreter (CPU, a subprocess; float16, the interpreter's bf16 dot being broken)
   against its torch form: equal but for rare one-step flips (float32 sums in another order), tile edges included.
2. The MLP's forward and gradients against the record's expression (record_mlp): the forward
   bit for bit, gradients within float32 rounding (CPU) or at least as close to float64 as the record's own (CUDA);
   compiled whole (fullgraph), the eager values.
3. The model takes every MLP from it where it runs Triton, and elsewhere keeps the record's expression, with the
   same loss and gradients.
"""

import pytest
import torch

from tests.conftest import cuda_or_skip
from tests.helpers_triton import needs_triton, run_interpreted
from train.config import preset
from train.model import GPT
from train.relu2_grad import record_mlp, relu2_mlp

INTERPRETED = """
import torch
from train.relu2_grad import launch, reference
out = {}
for M, D in ((256, 64), (200, 64)):   # 200: a row tile that the descriptors cut at the edge
    g = torch.Generator().manual_seed(M)
    grad_y, proj = torch.randn(M, D, generator=g).half(), (torch.randn(D, 4 * D, generator=g) * 0.1).half()
    pre = torch.randn(M, 4 * D, generator=g).half()
    got, want = launch(grad_y, proj, pre, 0), reference(grad_y, proj, pre)
    far = ((got.float() - want.float()).abs() > want.float().abs() * 2 ** -9).sum().item()
    out[f"grad {M}x{D}"] = dict(flips=(got != want).sum().item() / want.numel(), beyond_one_step=far,
                                zeros_kept=bool((got[pre <= 0] == 0).all()))
print(out)
"""


@needs_triton
def test_the_kernel_in_the_interpreter_equals_its_torch_form():
    """Against torch's ops: equal but for one-step flips of float32 sums in another order, rows cut at the edge too."""
    results = run_interpreted("-c", INTERPRETED)
    assert len(results) == 2
    for name, r in results.items():
        assert r["flips"] < 0.01 and r["beyond_one_step"] == 0 and r["zeros_kept"], (name, r)


def mlp_inputs(device: str, dtype: torch.dtype, T: int = 96, D: int = 64):
    g = torch.Generator().manual_seed(3)
    x = torch.randn(T, D, generator=g)
    fc, proj = torch.randn(D, 4 * D, generator=g) * D ** -0.5, torch.randn(D, 4 * D, generator=g) * 0.1
    grad_y = torch.randn(T, D, generator=g)
    return [t.to(device, dtype) for t in (x, fc, proj, grad_y)]


def run(fn, x, fc, proj, grad_y):
    leaves = [t.detach().clone().requires_grad_() for t in (x, fc, proj)]
    y = fn(*leaves)
    y.backward(grad_y)
    return y.detach(), [t.grad for t in leaves]


def test_the_mlp_gives_the_records_values_on_the_cpu():
    inputs = mlp_inputs("cpu", torch.float32)
    y, grads = run(relu2_mlp, *inputs)
    y_rec, grads_rec = run(record_mlp, *inputs)
    assert torch.equal(y, y_rec)
    for name, a, b in zip(("x", "fc", "proj"), grads, grads_rec):
        assert torch.allclose(a, b, rtol=1e-5, atol=1e-6), (name, (a - b).abs().max().item())


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_the_mlp_compiles_whole_with_the_same_values(device):
    """Dynamo traces the autograd.Function and the custom op (fullgraph); Inductor gives the eager values."""
    if device == "cuda":
        cuda_or_skip()
    inputs = mlp_inputs(device, torch.bfloat16 if device == "cuda" else torch.float32, T=1000, D=128)
    y, grads = run(torch.compile(relu2_mlp, fullgraph=True), *inputs)
    y_eager, grads_eager = run(relu2_mlp, *inputs)
    assert torch.equal(y, y_eager)
    for name, a, b in zip(("x", "fc", "proj"), grads, grads_eager):
        assert torch.equal(a, b), (name, (a != b).sum().item())


def test_the_mlp_on_cuda_is_as_close_to_float64_as_the_record():
    """The kernel's grad_pre rounds once where eager bf16 rounds twice: at least as close to the truth. The
    forward is cuBLAS's bits."""
    cuda_or_skip()
    inputs = mlp_inputs("cuda", torch.bfloat16, T=1000, D=128)
    y, grads = run(relu2_mlp, *inputs)
    y_rec, grads_rec = run(record_mlp, *inputs)
    _, truth = run(record_mlp, *[t.double() for t in inputs])
    assert torch.equal(y, y_rec)
    for name, ours, rec, t in zip(("x", "fc", "proj"), grads, grads_rec, truth):
        err_ours, err_rec = (((g.double() - t).norm() / t.norm()).item() for g in (ours, rec))
        assert err_ours <= err_rec * 1.05 + 1e-4, (name, err_ours, err_rec)


def test_the_model_takes_every_mlp_from_it_where_triton_runs(monkeypatch):
    """Made true here, runs_triton sends the CPU through the autograd.Function (its backward's torch form): every
    MLP goes through it, and the loss and gradients are the record expression's (float32 rounding apart)."""
    import train.model

    calls = []
    cfg = preset("tiny")
    T = cfg.train_max_seq_len
    inputs_, targets = torch.randint(0, 100, (T,), dtype=torch.int32), torch.randint(0, 100, (T,))
    args = (inputs_, targets, torch.tensor([0, T], dtype=torch.int32), torch.tensor(16), torch.tensor(32),
            torch.tensor(0.1))

    def loss_and_grads(model):
        model.zero_grad()
        loss = model(*args)
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    torch.manual_seed(0)
    model = GPT(cfg)
    record = loss_and_grads(model)
    monkeypatch.setattr(train.model, "runs_triton", lambda t: True)
    monkeypatch.setattr(train.model, "relu2_mlp", lambda *a: calls.append(1) or relu2_mlp(*a))
    ours = loss_and_grads(model)
    assert len(calls) == sum(spec.has_mlp for spec in model.plan) > 0
    assert torch.allclose(ours[0], record[0], rtol=1e-5)
    assert ours[1].keys() == record[1].keys()
    for name, g in ours[1].items():
        assert torch.allclose(g, record[1][name], rtol=1e-4, atol=1e-6), name


H100_SHARED_BYTES = 232448  # the most shared memory one program may take on an H100 or H200 (sm_90)


def compiled_on_sm90a(kernel, signature: dict, constants: dict, warps: int, stages: int):
    """A kernel compiled as the launches compile it, for sm_90a, by Triton's own ptxas (no GPU needed)."""
    import triton
    from triton.backends.compiler import GPUTarget

    signature = {**signature, **dict.fromkeys(constants, "constexpr")}
    src = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constants)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options=dict(num_warps=warps, num_stages=stages))


def backward_on_sm90a(M: int, N: int, K: int):
    """The backward kernel compiled as `launch` compiles it: persistent on 132 programs (an H100's SMs) on TILE."""
    from train.relu2_grad import GROUP_M, STAGES, TILE, WARPS, programs_for
    from train.relu2_grad_kernel import relu2_grad_kernel

    (bm, bn, bk), stages, warps = TILE, STAGES, WARPS
    signature = {"a_desc": f"tensordesc<bf16[{bm},{bk}]>", "b_desc": f"tensordesc<bf16[{bk},{bn}]>",
                 "pre_desc": f"tensordesc<bf16[{bm},{bn}]>", "out_desc": f"tensordesc<bf16[{bm},{bn}]>"}
    constants = dict(M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=GROUP_M,
                     NUM_PROGRAMS=programs_for(M, N, bm, bn, 132)[1])
    return compiled_on_sm90a(relu2_grad_kernel, signature, constants, warps, stages)


def shared_bytes_on_sm90a(M: int, N: int, K: int) -> int:
    """The backward kernel's shared memory in bytes, which Triton checks against the GPU's limit at the first
    launch."""
    return backward_on_sm90a(M, N, K).metadata.shared


@needs_triton
def test_the_kernel_fits_an_h100_at_the_records_shape_and_not_with_one_k_block():
    """Why relu2_grad keeps a fallback: at model_dim 64 (one K block, the tiny preset) the compiled kernel needs more
    shared memory than an H100 or H200 has per program (measured 278,568 bytes, 2026-12-03, Triton 3.6.0), which
    the lease of that day hit on a GPU; from two K blocks on it fits (213,016), the record's 768 included."""
    assert shared_bytes_on_sm90a(49152, 3072, 768) <= H100_SHARED_BYTES
    assert shared_bytes_on_sm90a(1000, 512, 128) <= H100_SHARED_BYTES
    assert shared_bytes_on_sm90a(512, 256, 64) > H100_SHARED_BYTES


def test_a_shape_the_gpu_refuses_takes_the_torch_form_once_asked(monkeypatch):
    """Triton's refusal at the first launch (OutOfResources, raised before anything runs) sends that shape to the
    torch form, the same arithmetic, and it is not asked again in this process. The refusal is injected here;
    test_the_tiny_shape_on_cuda_gives_the_torch_forms_bits meets the real one."""
    triton_errors = pytest.importorskip("triton.runtime.errors")
    import train.relu2_grad as mod

    launches = []

    def refuse(*args):
        launches.append(args)
        raise triton_errors.OutOfResources(278568, 232448, "shared memory")

    monkeypatch.setattr(mod, "runs_triton", lambda t: True)
    monkeypatch.setattr(mod, "launch", refuse)
    monkeypatch.setattr(mod, "NO_FIT", set())
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda device: type("P", (), {"multi_processor_count": 1}))
    _, _, proj, grad_y = mlp_inputs("cpu", torch.float32)
    pre = torch.randn(grad_y.size(0), proj.size(1))
    for _ in range(2):
        assert torch.equal(mod.relu2_grad(grad_y, proj, pre), mod.reference(grad_y, proj, pre))
    assert len(launches) == 1 and mod.NO_FIT == {("relu2_grad", 96, 256, 64)}


def test_the_tiny_shape_on_cuda_gives_the_torch_forms_bits():
    """model_dim 64 on a GPU: the backward runs (the torch form, where the kernel does not fit) with its bits."""
    cuda_or_skip()
    from train.relu2_grad import reference, relu2_grad

    _, _, proj, grad_y = mlp_inputs("cuda", torch.bfloat16, T=512, D=64)
    pre = torch.randn(512, 256, device="cuda").bfloat16()
    assert torch.equal(relu2_grad(grad_y, proj, pre), reference(grad_y, proj, pre))
