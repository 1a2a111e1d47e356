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
from train.qk_rope import launch, launch_backward, reference, reference_backward, reference_mix, reference_mix_backward
out = {}
for T, H, hd in ((100, 3, 64), (64, 2, 128)):
    g = torch.Generator().manual_seed(T)
    yarn = Yarn(hd, 128, 8); yarn.extend(3, 7)
    qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16()
    q, k, v = qkv.view(T, 3 * H, hd).chunk(3, dim=1)
    got, want = launch(q, k, yarn.cos, yarn.sin, fast=False), reference(q, k, yarn.cos, yarn.sin)
    ups = [torch.randn(T, 3 * H, hd, generator=g).bfloat16()[:, :H] for _ in range(2)]  # strided, as attention's
    gb = launch_backward(*ups, q, k, yarn.cos, yarn.sin, want[2], fast=False)
    wb = reference_backward(*ups, q, k, yarn.cos, yarn.sin, want[2])
    far = [((a.float() - b.float()).abs() > b.float().abs() * 2 ** -7).sum().item() for a, b in zip(gb, wb)]
    out[f"{T}x{H}x{hd}"] = dict(qk_equal=torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]),
                                rstd_rel=((got[2] - want[2]).abs() / want[2]).max().item(),
                                bwd_flips=sum((a != b).sum().item() for a, b in zip(gb, wb)) / (2 * T * H * hd),
                                bwd_beyond_one_step=sum(far))
    # lever 9's form: the value mix as a third plane, the backward writing the projection's gradient whole
    ve = torch.randn(T, H * hd, generator=g).bfloat16() if T == 100 else None  # with and without ve
    sa = torch.tensor([0.7, -0.3])
    got = launch(q, k, yarn.cos, yarn.sin, fast=False, v=v, ve=ve, sa=sa)
    dv = torch.randn(T, 3 * H, hd, generator=g).bfloat16()[:, H:2 * H]  # strided too, in other planes than ups'
    dqkv, dve, dsa = launch_backward(*ups, q, k, yarn.cos, yarn.sin, want[2], fast=False, dv=dv, sa=sa, v=v, ve=ve)
    wv, wdv = reference_mix(v, ve, sa), reference_mix(dv, None, sa)
    wdve, wdsa = reference_mix_backward(dv, v, ve, sa)
    out[f"{T}x{H}x{hd}"].update(mix_qk_equal=torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]),
                                mix_v_equal=torch.equal(got[2], wv), mix_shape=tuple(dqkv.shape),
                                mix_dqk_equal=torch.equal(dqkv[:, :H], gb[0]) and torch.equal(dqkv[:, H:2 * H], gb[1]),
                                mix_dv_equal=torch.equal(dqkv[:, 2 * H:], wdv),
                                mix_dve_equal=torch.equal(dve, wdve), dve_shape=tuple(dve.shape),
                                dsa=dsa.tolist(), want_dsa=wdsa.tolist())
print(out)
"""


@needs_triton
def test_the_kernels_in_the_interpreter_equal_their_torch_forms():
    for shape, r in run_interpreted("-c", INTERPRETED).items():
        assert r["qk_equal"], shape
        assert r["rstd_rel"] < 1e-6, shape
        assert r["bwd_flips"] < 1e-3 and r["bwd_beyond_one_step"] == 0, (shape, r)
        # the mixed form: q and k and the backward's q, k planes as the two-plane form's, v and λ₀·dv as torch's
        assert r["mix_qk_equal"] and r["mix_v_equal"] and r["mix_dqk_equal"] and r["mix_dv_equal"], (shape, r)
        T, H, hd = map(int, shape.split("x"))
        assert r["mix_shape"] == (T, 3 * H, hd)
        # the third plane's programs: dve = λ₁·dv as torch rounds it (with ve, T = 100; none without), and dλ as
        # float32 sums of per-program partials, within float32 summation order of torch's
        assert r["mix_dve_equal"] and r["dve_shape"] == ((T, H, hd) if T == 100 else (0,)), (shape, r)
        assert r["dsa"] == pytest.approx(r["want_dsa"], rel=1e-5, abs=1e-6), (shape, r)
        assert (r["want_dsa"][1] != 0) == (T == 100) and r["want_dsa"][0] != 0, (shape, r)


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


def mixed_grads(qkv, ve, sa, ups, H, hd, fn, dtype):
    """Gradients of qkv, ve and sa through fn(q, k, v views of qkv, ve, sa) -> (q, k, v), given ups for each."""
    x = qkv.to(dtype).requires_grad_()
    e = None if ve is None else ve.to(dtype).requires_grad_()
    lam = sa.clone().requires_grad_()  # float32 in every form, as the model's scalars
    out = fn(x.view(qkv.size(0), 3 * H, hd), e, lam)
    torch.autograd.backward(list(out), [u.to(dtype) for u in ups])
    return out, (x.grad, None if e is None else e.grad, lam.grad)


def model_expression(norm):
    def fn(qkv, ve, sa, cos, sin):
        q, k, v = qkv.chunk(3, dim=1)
        v = sa[0] * v + sa[1] * ve.view_as(v) if ve is not None else sa[0] * v
        return rotary(norm(q), cos, sin), rotary(norm(k), cos, sin), v
    return fn


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_ve", [True, False])
def test_attention_inputs_match_the_models_expression(device, with_ve):
    """Lever 9's op (its torch form on the CPU, its kernels on CUDA) against the model's expression: q, k, v within
    the eager expression's bf16 roundings; the gradients of qkv (now one tensor), ve and (λ₀, λ₁) at least as close
    to float64 as the eager model's own."""
    from train.qk_rope import attention_inputs

    qkv, ups, cos, sin, H, hd = inputs(device)
    g = torch.Generator().manual_seed(6)
    ups.append(torch.randn(qkv.size(0), H, hd, generator=g).bfloat16().to(device))
    ve = torch.randn(qkv.size(0), H * hd, generator=g).bfloat16().to(device) if with_ve else None
    sa = torch.tensor([0.7, -0.3], device=device)
    norm64 = lambda t: F.rms_norm(t, (hd,), eps=EPS)  # noqa: E731
    _, truth = mixed_grads(qkv, ve, sa.double(), ups, H, hd, lambda x, e, lam: model_expression(norm64)(
        x, e, lam, cos.double(), sin.double()), torch.float64)
    record_out, record = mixed_grads(qkv, ve, sa, ups, H, hd, lambda x, e, lam: model_expression(rms_norm)(
        x, e, lam, cos, sin), torch.bfloat16)
    ours_out, ours = mixed_grads(qkv, ve, sa, ups, H, hd, lambda x, e, lam: attention_inputs(
        x, e, lam, cos, sin)[:3], torch.bfloat16)
    for a, b in zip(ours_out, record_out):
        assert a.is_contiguous() and ((a.float() - b.float()).abs() <= 3 * 2 ** -8 * b.float().abs() + 2 ** -6).all()
    for name, o, r, t in zip(("qkv", "ve", "sa"), ours, record, truth):
        if t is None:
            assert o is None and r is None
            continue
        err = lambda grad, t=t: ((grad.double() - t).norm() / t.norm()).item()  # noqa: E731
        assert err(o) <= err(r) * 1.05 + 1e-4, (name, err(o), err(r))
    if not with_ve:  # λ₁ has no part in a layer without a value embedding
        assert ours[2][1].item() == 0


def test_the_model_with_qkv_grad_in_place_trains_as_without():
    """Config qkv_grad_in_place (lever 9) where the kernels run (made true here: the op's torch form on the CPU):
    the op in every attention layer, the same loss and the same gradients to bf16 rounding as the two-op path."""
    import dataclasses

    import train.model
    from train import qk_rope

    cfg = preset("tiny")
    T = cfg.train_max_seq_len
    inputs_, targets = torch.randint(0, 100, (T,), dtype=torch.int32), torch.randint(0, 100, (T,))
    args = (inputs_, targets, torch.tensor([0, T], dtype=torch.int32), torch.tensor(16), torch.tensor(32),
            torch.tensor(0.1))
    results, calls = [], []
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(train.model, "runs_triton", lambda q: True)
        mp.setattr(train.model, "attention_inputs", lambda *a: calls.append(1) or qk_rope.attention_inputs(*a))
        for on in (False, True):
            torch.manual_seed(0)
            model = GPT(dataclasses.replace(cfg, qkv_grad_in_place=on))
            with torch.no_grad():  # nonzero everywhere, so that every gradient is tested
                for p in model.parameters():
                    p.add_(torch.randn_like(p) * 0.02)
            loss = model(*args)
            loss.backward()
            results.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    assert len(calls) == sum(spec.has_attn for spec in model.plan) > 0
    (loss0, g0), (loss1, g1) = results
    assert loss1 == pytest.approx(loss0, rel=1e-5)
    for name in g0:
        a, b = g1[name].float(), g0[name].float()
        assert ((a - b).norm() <= 2e-2 * b.norm() + 1e-6).item(), name


def test_attention_inputs_compile_with_their_kernels_on_cuda():
    """Inductor traces lever 9's triton_ops: q, k, v and dqkv the same bits as the eager op, with and without ve
    (1/rms: the two-plane op's test above). Fails when the backward kernel takes its one output as three arguments:
    Inductor's functional form kept only the last argument's writes and lost the q and k planes (2026-12-04,
    docs/device-runs/2026-12-04-h200-lever9-layer). dve = λ₁·dv, now the kernel's, is compared with the compiled
    model expression's (Inductor rounds that product once; eager torch otherwise: 8,718 of 18,432 elements apart
    there); λ's gradients are float32 sums of the kernel's per-program partials, where the model's graph rounds them
    to bf16."""
    cuda_or_skip()
    from train.qk_rope import attention_inputs

    qkv, ups, cos, sin, H, hd = inputs("cuda")
    T = qkv.size(0)
    g = torch.Generator().manual_seed(7)
    ups.append(torch.randn(T, H, hd, generator=g).bfloat16().cuda())
    ve = torch.randn(T, H * hd, generator=g).bfloat16().cuda()
    sa = torch.tensor([0.7, -0.3], device="cuda")
    for e in (ve, None):
        ours = lambda x, e_, lam: attention_inputs(x, e_, lam, cos, sin)[:3]  # noqa: E731
        model = lambda x, e_, lam: model_expression(rms_norm)(x, e_, lam, cos, sin)  # noqa: E731
        (eager_out, eager), (compiled_out, compiled), (_, model_compiled) = (
            mixed_grads(qkv, e, sa, ups, H, hd, fn, torch.bfloat16)
            for fn in (ours, torch.compile(ours, fullgraph=True), torch.compile(model, fullgraph=True)))
        apart = {name: (a != b).sum().item() for name, a, b in zip(
            ("q", "k", "v", "dqkv"), (*eager_out, eager[0]), (*compiled_out, compiled[0]))}
        assert all(n == 0 for n in apart.values()), f"elements apart, eager and compiled: {apart}"
        if e is not None:
            assert torch.equal(compiled[1], model_compiled[1])
        # λ's gradients: float32 sums, the record's graph rounds them to bf16; eager torch rounds each product dv·v
        assert torch.allclose(compiled[2], model_compiled[2], rtol=2**-7) and torch.allclose(compiled[2], eager[2],
                                                                                             rtol=1e-2)


@needs_triton
def test_the_backward_kernel_compiles_for_an_h100_with_only_its_modes_stores():
    """Compiled for sm_90a (no GPU needed): each mode keeps only its own stores. Where a mode does not write an
    argument, the launch passes an input it only reads (never an output twice: the bug of 2026-12-04), and Inductor
    takes any argument the kernel's code stores to for a mutated one, so a store left in would mean a copy of that
    input per call. Two-plane: dq and dk's two halves; lever 9 adds λ₀·dv's halves and λ₀'s partial sum, and with
    ve dve's halves and λ₁'s sum (a constant 0 without)."""
    from benchmarks.xent_sass import _compile
    from train.qk_rope_kernel import backward_kernel

    pointers = dict.fromkeys(("dq", "dk", "dv", "q", "k", "v", "ve", "dq_in", "dk_in", "dve_out"), "*bf16")
    pointers |= dict.fromkeys(("cos", "sin", "rstd", "sa", "lam_part"), "*fp32")
    ints = dict.fromkeys(("g_stride_t", "g_stride_h", "dv_stride_t", "dv_stride_h", "stride_t", "stride_h",
                          "ve_stride_t", "plane_offset", "out_stride_t", "T"), "i32")
    modes = dict.fromkeys(("H", "HALF", "BLOCK_R", "FAST", "MIX_V", "HAS_VE"), "constexpr")
    signature = {name: {**pointers, **ints, **modes}[name] for name in backward_kernel.arg_names}
    stores = {}
    for mix, ve in ((False, False), (True, False), (True, True)):
        kernel = _compile(backward_kernel, signature, dict(H=6, HALF=64, BLOCK_R=64, FAST=True, MIX_V=mix, HAS_VE=ve),
                          [], num_warps=4)
        stores[mix, ve] = kernel.asm["ttir"].count("tt.store")
    assert stores == {(False, False): 2, (True, False): 6, (True, True): 8}
