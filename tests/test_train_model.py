"""The model of train/model.py: topology, parameter count, init, dtypes, loss, gradient flow, rotary, FP8 head.

    .venv/bin/python -m pytest -q tests/test_train_model.py
"""

import math

import pytest
import torch

from train.config import ConfigError, TrainConfig, apply_overrides, preset
from train.loop import fp8_enabled
from train.model import GPT, Head, layer_plan, rotary
from train.muon import plan_groups

TINY = preset("tiny")


def tiny_model(seed: int = 0, **overrides) -> GPT:
    torch.manual_seed(seed)
    cfg = apply_overrides(TINY, [f"{k}={v}" for k, v in overrides.items()])
    return GPT(cfg, attention_backend="dense", fp8=False)


def tiny_batch(T: int = 128, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    inputs = torch.randint(0, 50257, (T,), generator=gen, dtype=torch.int32)
    targets = torch.randint(0, 50257, (T,), generator=gen)
    bounds = torch.tensor([0, 40, 41, 100] + [T] * 124, dtype=torch.int32)
    return inputs, targets, bounds


def test_record_topology_is_the_spec():
    plan = layer_plan(12)
    assert [i for i, s in enumerate(plan) if s.has_attn] == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert [i for i, s in enumerate(plan) if s.has_mlp] == list(range(1, 12))
    assert [s.value_embed for s in plan] == [None, 1, 2, None, None, None, None, None, None, 0, 1, 2]
    windows = ["L" if s.long_window else "S" for s in plan]
    assert [w if s.has_attn else "-" for w, s in zip(windows, plan)] == list("-SSSLSS-SSSL")


def test_smaller_topologies_follow_the_documented_rules():
    plan = layer_plan(6)
    assert [i for i, s in enumerate(plan) if s.has_attn] == [1, 2, 3, 5]  # no attention in 0 and L/2 + 1
    assert [s.value_embed for s in plan] == [None, 1, 2, 0, 1, 2]
    assert [i for i, s in enumerate(plan) if s.long_window] == [2, 5]  # L/3 and L - 1
    for bad in ("num_layers=5", "num_layers=4", "model_dim=66", "num_heads=5"):
        with pytest.raises(ConfigError):
            apply_overrides(TINY, [bad])


def test_the_transposed_loss_store_is_the_records_default_and_needs_nothing_else():
    """On by default (measured faster end to end); without the FP8 loss kernels it has nothing to change, so
    turning those off stays valid (sidebyside's unfused variant sets only fused_loss=false)."""
    assert preset("record").fused_loss_transpose
    for without in ("fused_loss=false", "fp8=false"):
        assert apply_overrides(preset("record"), [without]).fused_loss_transpose


def test_record_parameter_count_on_meta_device():
    cfg = TrainConfig()
    with torch.device("meta"):
        model = GPT(cfg, attention_backend="flex", fp8=True, world_size=8)
    D, Vp = 768, 50304
    assert cfg.padded_vocab == Vp
    expected = (4 * Vp * D  # embed + three value embeddings
                + Vp * D  # head
                + 10 * 4 * D * D + 22 * 4 * D * D  # qkvo, MLP fc and proj
                + 12 + 10 * 6 * 12  # smear gate, attention gates
                + 6 * 12)  # scalars (72 = a multiple of 8: no padding)
    assert sum(p.numel() for p in model.parameters()) == expected == 268_665_636
    params, kinds = model.muon_params()
    assert [kinds.count(k) for k in ("gate", "attn", "mlp")] == [11, 10, 22]
    assert plan_groups(kinds, 8, [tuple(p.shape) for p in params]).sizes == [1, 10, 16, 16]
    adam = [p for g in model.adam_groups() for p in g["params"]]
    assert len(adam) + len(params) == len(list(model.parameters()))  # every parameter has one optimizer


def test_init_zeros_dtypes_and_scalars():
    model = tiny_model(bf16=True)  # the record's dtypes (the CPU presets themselves keep fp32)
    L, D = 6, 64
    assert model.embed.weight.dtype == torch.bfloat16 and model.head.weight.dtype == torch.bfloat16
    assert all(p.dtype == torch.bfloat16 for e in model.value_embeds for p in e.parameters())
    for block in model.blocks[1:]:
        assert block.mlp.fc.dtype == torch.float32 and not block.mlp.proj.any()
        if block.attn is not None:
            q, k, v, o = block.attn.qkvo.view(4, D, D)
            assert not o.any() and not block.attn.gate.weight.any()
            bound = math.sqrt(3) * 0.5 * D ** -0.5
            for w in (q, k, v, block.mlp.fc):
                assert w.abs().max() <= bound and w.abs().max() > 0.95 * bound
    assert not model.head.weight.any() and not model.smear_gate.weight.any()
    assert model.blocks[0].attn is None and model.blocks[0].mlp is None
    s = model.scalars
    assert s.dtype == torch.float32 and s.numel() == 6 * L
    assert (s[:L] == -1.5).all() and s[L:3 * L].tolist() == [1.0, 0.0] * L
    assert s[3 * L:5 * L].tolist() == [0.5, 0.5] * L and not s[5 * L:].any()
    padded = GPT(TINY, world_size=8).scalars  # 36 entries padded to 40 with ones
    assert padded.numel() == 40 and padded[36:].tolist() == [1.0] * 4


def test_loss_at_init_is_uniform_over_the_padded_vocab():
    model = tiny_model()
    inputs, targets, bounds = tiny_batch()
    train_loss = model(inputs, targets, bounds, 8, 24, 0.1)  # zero head: logits all 15 after the soft-cap
    assert train_loss.item() == pytest.approx(128 * math.log(50304), rel=1e-5)
    model.eval()
    with torch.no_grad():
        assert model(inputs, targets, bounds, 8, 24, 0.1).item() == pytest.approx(math.log(50304), rel=1e-6)


def test_every_used_parameter_gets_a_gradient():
    model = tiny_model()
    with torch.no_grad():  # give every zero-initialised weight a value so gradients can flow everywhere
        for p in model.parameters():
            if not p.any():
                p.normal_(0, 0.02)
        for block in model.blocks:
            if block.attn is not None:
                block.attn.qkvo.view(4, 64, 64)[3].normal_(0, 0.02)  # the O block
        model.scalars[5 * 6] = 0.5  # smear lambda
    inputs, targets, bounds = tiny_batch()
    model(inputs, targets, bounds, 8, 24, 0.1).backward()
    for name, p in model.named_parameters():
        if name != "scalars":
            assert p.grad is not None and p.grad.abs().sum() > 0, name
    used = {0, 1}  # skip weights s[0], s[1]: pops before blocks 3 and 4
    used |= {6 + 2 * i + j for i in range(1, 6) for j in (0, 1)}  # block lambdas of blocks 1..5
    used |= {18 + 2 * i + j for i in (1, 2, 3, 5) for j in (0, 1)}  # SA lambdas of the attention blocks
    used |= {30}  # smear lambda
    nonzero = {i for i, g in enumerate(model.scalars.grad.tolist()) if g != 0}
    assert nonzero == used


def test_rotary_is_a_rotation_and_identity_at_position_zero():
    model = tiny_model()
    x = torch.randn(64, 2, 32)
    cos, sin = model.yarn.cos.float(), model.yarn.sin.float()
    y = rotary(x, cos, sin)
    assert torch.allclose(y[0], x[0])
    x1, x2, y1, y2 = x[..., :16], x[..., 16:], y[..., :16], y[..., 16:]
    assert torch.allclose(x1**2 + x2**2, y1**2 + y2**2, rtol=1e-2, atol=1e-5)  # bf16 tables: |cos²+sin²-1| small
    assert torch.equal(y[..., 8:16], x[..., 8:16]) and torch.equal(y[..., 24:], x[..., 24:])  # zero frequencies


def test_fp8_head_against_bf16():
    torch.manual_seed(0)
    head = Head(64, 512, fp8=True).bfloat16()
    with torch.no_grad():
        head.weight.normal_(0, 0.05)
    x = torch.nn.functional.rms_norm(torch.randn(256, 64), (64,)).bfloat16().requires_grad_()
    g = torch.randn(256, 512).bfloat16() * 1e-2
    try:
        out8 = head(x)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch._scaled_mm with float8 does not run on this CPU build: {exc}")
    dx8, dw8 = torch.autograd.grad(out8, (x, head.weight), g)
    head.fp8 = False
    out16 = head(x)
    dx16, dw16 = torch.autograd.grad(out16, (x, head.weight), g)

    def rel(a, b):
        return ((a.float() - b.float()).norm() / b.float().norm()).item()

    assert out8.dtype == torch.bfloat16 and dw8.dtype == torch.bfloat16
    assert rel(out8, out16) < 0.08 and rel(dx8, dx16) < 0.12 and rel(dw8, dw16) < 0.12  # e4m3 / e5m2 rounding
    head.eval()
    head.fp8 = True
    assert torch.equal(head(x), out16)  # eval always uses bf16


def test_fp8_switches(monkeypatch):
    cuda = torch.device("cuda", 0)
    monkeypatch.delenv("DISABLE_FP8", raising=False)
    assert fp8_enabled(TrainConfig(), cuda)
    assert not fp8_enabled(TrainConfig(), torch.device("cpu"))
    assert not fp8_enabled(apply_overrides(TrainConfig(), ["fp8=false"]), cuda)
    monkeypatch.setenv("DISABLE_FP8", "1")
    assert not fp8_enabled(TrainConfig(), cuda)


def test_optional_kernels_are_swapped_in_from_one_registry():
    """train/kernels.py decides, from the config alone, which implementation of each optional part the model uses;
    the fused loss (its CPU path here) gives the record expression's loss and gradients."""
    import dataclasses

    from train.kernels import OPTIONS, record_loss, select_kernels
    from train.loss import head_loss

    def fused(**changes):
        loss = select_kernels(dataclasses.replace(preset("record"), **changes)).train_loss
        assert loss.func is head_loss
        return loss.keywords

    assert set(OPTIONS) <= {f.name for f in dataclasses.fields(TrainConfig)}
    assert fused() == dict(transposed=True)
    assert fused(fused_loss_transpose=False) == dict(transposed=False)
    assert select_kernels(TINY).train_loss is record_loss
    inputs, targets, bounds = tiny_batch()
    losses, grads = [], []
    for on in (False, True):
        model = tiny_model(fused_loss=on)
        assert (model.kernels.train_loss.func is head_loss) if on else (model.kernels.train_loss is record_loss)
        loss = model(inputs, targets, bounds, 16, 32, 0.1)
        loss.backward()
        losses.append(loss.item())
        grads.append(model.head.weight.grad)
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    assert torch.allclose(grads[1], grads[0], rtol=1e-4, atol=1e-6)


def test_the_residual_add_is_eagers_sum_and_stays_out_of_the_gemm():
    """Block.add (issue 41's lever 11): compiled, a block's residual add stays a pointwise add where `x + mm`
    folds into addmm (which copies x into its output first), and gives eager's `x + delta` bits, compiled or not."""
    from torch._inductor.utils import run_and_get_code

    from train.model import Block

    gen = torch.Generator().manual_seed(3)
    x, y, w = (torch.randn(*shape, generator=gen).bfloat16() for shape in ((64, 32), (64, 48), (32, 48)))
    block = Block(32, 4, tiny_model().plan[1])
    codes = {}
    for name, add in (("plain", lambda x, d: x + d), ("block", block.add)):
        def residual_then_norm(x, y, w, add=add):  # as in Block.forward: the sum feeds the next block's norm
            x2 = add(x, torch.nn.functional.linear(y, w))
            return x2, torch.nn.functional.rms_norm(x2, (32,))

        torch._dynamo.reset()
        (x2, _), code = run_and_get_code(torch.compile(residual_then_norm), x, y, w)
        codes[name] = "\n".join(code)
        if name == "block":  # compiled, eager's rounding of delta kept
            eager = x + torch.nn.functional.linear(y, w)
            assert torch.equal(x2, eager) and torch.equal(block.add(x, torch.nn.functional.linear(y, w)), eager)
    assert "addmm" in codes["plain"] and "addmm" not in codes["block"]


@pytest.mark.parametrize("per_step", [False, True], ids=["cast-per-micro-step", "cast-once-per-step"])
def test_the_tiny_model_on_cuda_compiled_in_bf16_trains_as_eager(per_step):
    """On a GPU every Triton kernel of train/ runs at the tiny preset's shapes (model_dim 64, head_dim 32): the
    compiled model's loss and gradients after two micro-steps agree with eager's within bf16's rounding, with the
    record's casts (no refresh) and with the bf16 copies refreshed once per step. Before relu2_grad's fallback, the
    first backward pass died here (docs/device-runs/2026-12-03-h200-levers-5-8/)."""
    from tests.conftest import cuda_or_skip

    cuda_or_skip()
    results = []
    for compile_it in (False, True):
        m = tiny_model(seed=7, bf16=True).cuda()
        gen = torch.Generator().manual_seed(7)
        with torch.no_grad():  # every weight moved a little: the record starts some at zero
            for p in m.parameters():
                p.add_((torch.randn(p.shape, generator=gen) * 0.05).to(p.device, p.dtype))
        if per_step:
            m.refresh_step_weights()
        step = torch.compile(m, fullgraph=True) if compile_it else m
        losses = []
        for seed in range(2):
            inputs, targets, bounds = (t.cuda() for t in tiny_batch(seed=seed))
            loss = step(inputs, targets, bounds, 16, 32, 0.1)
            loss.backward()
            losses.append(loss.item())
        results.append((losses, {n: p.grad.float() for n, p in m.named_parameters() if p.grad is not None}))
    (eager_losses, eager), (compiled_losses, compiled) = results
    assert compiled_losses == pytest.approx(eager_losses, rel=1e-2)
    assert eager.keys() == compiled.keys() and len(eager) > 10
    for name, g in eager.items():
        assert torch.isfinite(compiled[name]).all(), name
        assert (compiled[name] - g).norm() <= 0.05 * g.norm() + 1e-6, name


def test_bf16_weights_cast_once_per_step_give_autograds_float32_gradients_bit_for_bit():
    """Lever 14 (GPT.refresh_step_weights, in bf16): Muon's float32 matrices cast to bf16 once per step and each
    micro-step's bf16 gradient added into .grad by the copies' hooks. Eager on the CPU, two micro-steps, then the
    weights changed in place (an optimizer step) and one more: the loss and every parameter's gradient are those
    of the record's cast in every micro-step, bit for bit. The copies are no parameters, and eval casts as before."""
    runs = {}
    for on in (False, True):
        m = tiny_model(seed=3, bf16=True)  # never refreshed, it casts in every micro-step as the record does
        gen = torch.Generator().manual_seed(3)
        with torch.no_grad():  # every weight moved a little: the record starts some at zero
            for p in m.parameters():
                p.add_((torch.randn(p.shape, generator=gen) * 0.05).to(p.dtype))
        losses, grads = [], []
        for step, micro_steps in enumerate((2, 1)):
            if on:
                m.refresh_step_weights()
            for seed in range(micro_steps):
                losses.append(m(*tiny_batch(seed=10 * step + seed), 16, 32, 0.1))
                losses[-1].backward()
            grads.append({n: p.grad.clone() for n, p in m.named_parameters() if p.grad is not None})
            with torch.no_grad():
                for p in m.parameters():
                    if p.grad is not None:
                        p.sub_(0.01 * p.grad.sign())
            m.zero_grad(set_to_none=True)
        m.eval()
        with torch.no_grad():
            losses.append(m(*tiny_batch(seed=99), 16, 32, 0.1))
        runs[on] = (torch.stack(losses), grads, m)
    (off_losses, off_grads, off), (on_losses, on_grads, on) = runs[False], runs[True]
    assert torch.equal(off_losses, on_losses)
    for before, after in zip(off_grads, on_grads):
        assert before.keys() == after.keys() and "blocks.1.mlp.fc" in after and "blocks.1.attn.qkvo" in after
        for name, g in before.items():
            assert after[name].dtype == g.dtype and torch.equal(after[name], g), name
    assert off.step_weights is None and len(on.step_weights.copies) == 4 + 2 * 5  # tiny: 4 attention, 5 MLPs
    assert all(c.dtype == torch.bfloat16 and c.grad is None for c in on.step_weights.copies)
    params = {id(p) for p in on.parameters()}
    assert not any(id(c) in params for c in on.step_weights.copies)
    assert on.state_dict().keys() == off.state_dict().keys()
    # the training forward multiplies by the copies (a copy changed by hand changes the loss), eval by the casts
    on.train()
    with torch.no_grad():
        before = on(*tiny_batch(seed=5), 16, 32, 0.1)
        on.blocks[1].mlp.copies[0].mul_(2)
        assert not torch.equal(on(*tiny_batch(seed=5), 16, 32, 0.1), before)
        on.eval()
        assert torch.equal(on(*tiny_batch(seed=99), 16, 32, 0.1), on_losses[-1])
