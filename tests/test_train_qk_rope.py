"""train/qk_rope.py (issue 41, levers 2 and 9): QK-norm, rotary and the value mix as triton_ops, against the
model's expression.

    .venv/bin/python -m pytest -q tests/test_train_qk_rope.py

1. The kernels in Triton's interpreter (CPU, a subprocess) against their torch forms: q, k and v bit for bit,
   1/rms to float32 order, the backward's q and k planes equal but for rare one-step bf16 flips (float32 sums in
   another order), its v plane and dve bit for bit, dλ to float32 order; inputs are strided views of a QKV
   projection, tables YaRN-extended, head sizes 64 and 128, with and without ve.
2. The op (its torch form on the CPU, its kernels on CUDA) against the model's expression: forward within the
   eager expression's bf16 roundings, gradients at least as close to float64 as the eager record's own.
3. The model calls the op in every attention layer where it runs its kernels, with the expression's loss.
4. Compiled by Inductor on CUDA, the eager op's bits; compiled for sm_90a, only the stores each mode needs.
"""

import pytest
import torch
import torch.nn.functional as F

from tests.conftest import cuda_or_skip
from tests.helpers_triton import needs_triton, run_interpreted
from train.config import preset
from train.model import GPT, Yarn, rms_norm, rotary
from train.qk_rope import EPS, WARPS, attention_inputs

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
    ve = torch.randn(T, H * hd, generator=g).bfloat16() if T == 100 else None  # with and without ve
    sa = torch.tensor([0.7, -0.3])
    got, want = launch(q, k, v, ve, sa, yarn.cos, yarn.sin, fast=False), reference(q, k, yarn.cos, yarn.sin)
    ups = [torch.randn(T, 3 * H, hd, generator=g).bfloat16()[:, :H] for _ in range(2)]  # strided, as attention's
    dv = torch.randn(T, 3 * H, hd, generator=g).bfloat16()[:, H:2 * H]  # strided too, in other planes than ups'
    dqkv, dve, dsa = launch_backward(*ups, dv, q, k, v, ve, yarn.cos, yarn.sin, want[2], sa, fast=False)
    wb = reference_backward(*ups, q, k, yarn.cos, yarn.sin, want[2])
    gb = (dqkv[:, :H], dqkv[:, H:2 * H])
    far = [((a.float() - b.float()).abs() > b.float().abs() * 2 ** -7).sum().item() for a, b in zip(gb, wb)]
    wdve, wdsa = reference_mix_backward(dv, v, ve, sa)
    out[f"{T}x{H}x{hd}"] = dict(qk_equal=torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]),
                                v_equal=torch.equal(got[2], reference_mix(v, ve, sa)),
                                rstd_rel=((got[3] - want[2]).abs() / want[2]).max().item(),
                                bwd_flips=sum((a != b).sum().item() for a, b in zip(gb, wb)) / (2 * T * H * hd),
                                bwd_beyond_one_step=sum(far), dqkv_shape=tuple(dqkv.shape),
                                dv_equal=torch.equal(dqkv[:, 2 * H:], reference_mix(dv, None, sa)),
                                dve_equal=torch.equal(dve, wdve), dve_shape=tuple(dve.shape),
                                dsa=dsa.tolist(), want_dsa=wdsa.tolist())
print(out)
"""


@needs_triton
def test_the_kernels_in_the_interpreter_equal_their_torch_forms():
    for shape, r in run_interpreted("-c", INTERPRETED).items():
        assert r["qk_equal"] and r["v_equal"], shape
        assert r["rstd_rel"] < 1e-6, shape
        # the backward: q and k planes within float32 summation order, the v plane λ₀·dv as torch rounds it
        assert r["bwd_flips"] < 1e-3 and r["bwd_beyond_one_step"] == 0, (shape, r)
        T, H, hd = map(int, shape.split("x"))
        assert r["dqkv_shape"] == (T, 3 * H, hd) and r["dv_equal"], (shape, r)
        # the third plane's programs: dve = λ₁·dv as torch rounds it (with ve, T = 100; none without), and dλ as
        # float32 sums of per-program partials, within float32 summation order of torch's
        assert r["dve_equal"] and r["dve_shape"] == ((T, H, hd) if T == 100 else (0,)), (shape, r)
        assert r["dsa"] == pytest.approx(r["want_dsa"], rel=1e-5, abs=1e-6), (shape, r)
        assert (r["want_dsa"][1] != 0) == (T == 100) and r["want_dsa"][0] != 0, (shape, r)


def inputs(device: str, T: int = 96, H: int = 3, hd: int = 64):
    g = torch.Generator().manual_seed(5)
    yarn = Yarn(hd, 128, 8)
    yarn.extend(3, 7)
    qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16()
    ups = [torch.randn(T, H, hd, generator=g).bfloat16() for _ in range(2)]
    return qkv.to(device), [u.to(device) for u in ups], yarn.cos.to(device), yarn.sin.to(device), H, hd


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


def test_the_model_calls_the_op_in_every_attention_layer(monkeypatch):
    """GPT's attention takes q, k and v from the op where it runs its kernels (made true here, so the CPU takes the
    op's torch form); with the model's expression swapped in for it, the same loss and the same gradients to bf16
    rounding."""
    import train.model
    from train import qk_rope

    cfg = preset("tiny")
    T = cfg.train_max_seq_len
    inputs_, targets = torch.randint(0, 100, (T,), dtype=torch.int32), torch.randint(0, 100, (T,))
    args = (inputs_, targets, torch.tensor([0, T], dtype=torch.int32), torch.tensor(16), torch.tensor(32),
            torch.tensor(0.1))
    expression = model_expression(rms_norm)
    results, calls = [], []
    monkeypatch.setattr(train.model, "runs_triton", lambda q: True)
    for form in ("op", "expression"):
        monkeypatch.setattr(train.model, "attention_inputs", (
            lambda *a: calls.append(1) or qk_rope.attention_inputs(*a)) if form == "op" else (
            lambda qkv, ve, sa, cos, sin: (*expression(qkv, ve, sa, cos, sin), None)))
        torch.manual_seed(0)
        model = GPT(cfg)
        with torch.no_grad():  # nonzero everywhere, so that every gradient is tested
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.02)
        loss = model(*args)
        loss.backward()
        results.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters()}))
    assert len(calls) == sum(spec.has_attn for spec in model.plan) > 0
    (loss_op, g_op), (loss_expr, g_expr) = results
    assert loss_op == pytest.approx(loss_expr, rel=1e-5)
    for name in g_op:
        a, b = g_op[name].float(), g_expr[name].float()
        assert ((a - b).norm() <= 2e-2 * b.norm() + 1e-6).item(), name


def test_attention_inputs_compile_with_their_kernels_on_cuda():
    """Inductor traces the triton_ops: q, k, v, 1/rms and dqkv the same bits as the eager op, with and without ve.
    Fails with eps a run-time argument of the forward kernel: Inductor types a float argument fp64 (3 q and k
    elements one bf16 step apart on an H200, docs/device-runs/2026-12-03-h200-levers/qk-diff.txt). Fails when the
    backward kernel takes its one output as three arguments: Inductor's functional form kept only the last
    argument's writes and lost the q and k planes (2026-12-04, docs/device-runs/2026-12-04-h200-lever9-layer).
    dve = λ₁·dv, the kernel's, is compared with the compiled model expression's (Inductor rounds that product once;
    eager torch otherwise: 8,718 of 18,432 elements apart there); λ's gradients are float32 sums of the kernel's
    per-program partials, where the model's graph rounds them to bf16."""
    cuda_or_skip()
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
        rstd = lambda x, e_, lam: attention_inputs(x, e_, lam, cos, sin)[3]  # noqa: E731
        x = qkv.view(T, 3 * H, hd)
        apart["rstd"] = (rstd(x, e, sa) != torch.compile(rstd, fullgraph=True)(x, e, sa)).sum().item()
        assert all(n == 0 for n in apart.values()), f"elements apart, eager and compiled: {apart}"
        if e is not None:
            assert torch.equal(compiled[1], model_compiled[1])
        # λ's gradients: float32 sums, the record's graph rounds them to bf16; eager torch rounds each product dv·v
        assert torch.allclose(compiled[2], model_compiled[2], rtol=2**-7) and torch.allclose(compiled[2], eager[2],
                                                                                             rtol=1e-2)


def compiled_for_sm90a(kernel, warps: int = WARPS, **modes):
    """One of train/qk_rope_kernel.py's kernels compiled for sm_90a (no GPU needed) at the record's head size, H = 6
    heads, bf16 tensors, float32 tables and statistics, int32 strides; the op's warps per program unless told."""
    from benchmarks.xent_sass import _compile

    types = dict.fromkeys(("dq", "dk", "dv", "q", "k", "v", "ve", "dqkv", "dve_out", "q_out", "k_out", "v_out"),
                          "*bf16")
    types |= dict.fromkeys(("cos", "sin", "rstd", "sa", "lam_part", "rstd_out"), "*fp32")
    types |= dict.fromkeys(("g_stride_t", "g_stride_h", "dv_stride_t", "dv_stride_h", "stride_t", "stride_h",
                            "ve_stride_t", "plane_offset", "out_stride_t", "T"), "i32")
    types |= dict.fromkeys(("H", "HALF", "BLOCK_R", "FAST", "HAS_VE", "eps"), "constexpr")
    constants = dict(H=6, HALF=64, BLOCK_R=64, FAST=True, **modes)
    if "eps" in kernel.arg_names:
        constants["eps"] = EPS
    return _compile(kernel, {a: types[a] for a in kernel.arg_names}, constants, [], num_warps=warps)


@needs_triton
def test_the_backward_kernel_compiles_for_an_h100_with_only_its_modes_stores():
    """Compiled for sm_90a (no GPU needed): each mode keeps only its own stores. Where a mode does not write an
    argument, the launch passes an input it only reads (never an output twice: the bug of 2026-12-04), and Inductor
    takes any argument the kernel's code stores to for a mutated one, so a store left in would mean a copy of that
    input per call. Without ve: dq's, dk's and λ₀·dv's halves, λ₀'s partial sum and λ₁'s (a constant 0); with ve
    also dve's halves."""
    from train.qk_rope_kernel import backward_kernel

    stores = {ve: compiled_for_sm90a(backward_kernel, HAS_VE=ve).asm["ttir"].count("tt.store") for ve in (False, True)}
    assert stores == {False: 6, True: 8}


@needs_triton
def test_the_kernels_do_not_spill_at_their_warps():
    """Why WARPS is 8, compiled for sm_90a (no GPU needed): at the record's head size, with ve, both kernels store
    registers to local memory at 4 warps per program (measured 28 forward and 288 backward STL, Triton 3.6.0,
    2026-12-04) and none at WARPS."""
    from benchmarks.xent_sass import _opcodes
    from train.qk_rope_kernel import backward_kernel, forward_kernel

    spills = {(name, warps): _opcodes(compiled_for_sm90a(kernel, warps, HAS_VE=True).asm["cubin"])["STL"]
              for name, kernel in (("forward", forward_kernel), ("backward", backward_kernel)) for warps in (4, WARPS)}
    assert spills[("forward", 4)] > 0 and spills[("backward", 4)] > 100, spills
    assert spills[("forward", WARPS)] == 0 and spills[("backward", WARPS)] == 0, spills
