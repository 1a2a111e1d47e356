"""The fused training loss (train/loss.py, config fused_loss) against autograd of the record's expression.

    .venv/bin/python -m pytest -q tests/test_train_loss.py

bf16 logits (the GPU's case): the gradient equals autograd's except for rare elements that round to the
neighbouring bf16 value (the log-sum-exp is summed in another order: measured 3 to 42 of 1,048,576 elements,
one ulp each), the loss equal up to its summation order. float32 (CPU presets): within a rounding. The FP8 head
(torch._scaled_mm runs on CPU in this torch): input and weight gradients as close to the unfused FP8 head's.
A tiny model: loss and every parameter's gradient equal with and without fused_loss, to float32 rounding.
"""

import pytest
import torch
import torch.nn.functional as F

from tests.test_train_model import tiny_batch, tiny_model
from train.kernels import record_loss
from train.loss import head_loss, loss_and_grad
from train.model import Head


def reference(logits: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The record's loss (train/model.py's unfused path) and autograd's dL/dlogits."""
    logits = logits.detach().requires_grad_()
    loss = F.cross_entropy(30 * torch.sigmoid(logits.float() / 7.5), targets, reduction="sum")
    loss.backward()
    return loss.detach(), logits.grad


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_loss_and_gradient_match_autograd(dtype):
    gen = torch.Generator().manual_seed(0)
    logits = (20 * torch.randn(256, 4096, generator=gen)).to(dtype)  # wide enough to saturate the softcap
    targets = torch.randint(0, 4096, (256,), generator=gen)
    want_loss, want_grad = reference(logits, targets)
    loss, grad = loss_and_grad(logits, targets)
    assert grad.dtype == dtype and loss.dtype == torch.float32
    assert loss.item() == pytest.approx(want_loss.item(), rel=1e-6)
    if dtype == torch.bfloat16:  # rounding flips only: rare, and one bf16 step (2^-8 relative) at most
        flipped = grad != want_grad
        assert flipped.float().mean().item() < 1e-3
        assert ((grad.float() - want_grad.float()).abs() <= want_grad.float().abs() * 2**-7 + 1e-30)[flipped].all()
    else:
        assert (grad - want_grad).abs().max().item() < 1e-8 and not torch.equal(grad, torch.zeros_like(grad))


def fp8_head(seed: int = 0) -> Head:
    torch.manual_seed(seed)
    head = Head(64, 512, fp8=True).bfloat16()
    with torch.no_grad():
        head.weight.normal_(0, 0.05)
    return head


def test_fp8_head_gradients_match_the_unfused_fp8_head():
    head = fp8_head()
    x = F.rms_norm(torch.randn(256, 64), (64,)).bfloat16().requires_grad_()
    targets = torch.randint(0, 512, (256,), generator=torch.Generator().manual_seed(1))
    try:
        want = F.cross_entropy(30 * torch.sigmoid(head(x).float() / 7.5), targets, reduction="sum")
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch._scaled_mm with float8 does not run on this CPU build: {exc}")
    want_dx, want_dw = torch.autograd.grad(want, (x, head.weight))
    got = head_loss(x, head, targets)
    dx, dw = torch.autograd.grad(got, (x, head.weight))
    assert got.item() == pytest.approx(want.item(), rel=1e-6)
    assert dx.dtype == want_dx.dtype == torch.bfloat16 and dw.dtype == want_dw.dtype == torch.bfloat16
    for got_g, want_g in ((dx, want_dx), (dw, want_dw)):  # rounding flips of the FP8/bf16 casts only
        assert ((got_g.float() - want_g.float()).norm() / want_g.float().norm()).item() < 1e-3
        assert (got_g != want_g).float().mean().item() < 1e-2


def test_fp8_products_from_a_given_transpose_equal_those_that_transpose_themselves():
    """fused_loss_transpose hands dW's operand over already transposed (the Triton pass writes it; on CUDA only):
    the products must be the same bits as when they copy g8 transposed themselves."""
    from train.fp8 import fp8_products, fp8_products_t

    gen = torch.Generator().manual_seed(2)
    g8 = (torch.randn(64, 96, generator=gen) * 100).to(torch.float8_e5m2)  # (T, V)
    x8 = torch.randn(64, 32, generator=gen).to(torch.float8_e4m3fn)  # (T, D)
    w8 = torch.randn(96, 32, generator=gen).to(torch.float8_e4m3fn)  # (V, D)
    scales = (32**0.5 / 448, 2**-9, 1 / 448)
    try:
        want_dx, want_dw = fp8_products(g8, x8, w8, *scales)
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch._scaled_mm with float8 does not run on this CPU build: {exc}")
    dx, dw = fp8_products_t(g8, g8.T.contiguous(), x8, w8, *scales)
    assert torch.equal(dx, want_dx) and torch.equal(dw, want_dw) and dw.stride() == want_dw.stride()
    assert want_dw.abs().sum() > 0
    bad_dx, bad_dw = fp8_products_t(g8, g8.flip(0).T.contiguous(), x8, w8, *scales)  # a wrong transpose shows
    assert torch.equal(bad_dx, want_dx) and not torch.equal(bad_dw, want_dw)


def test_fp8_products_give_dw_in_the_weights_layout():
    """Issue 41's lever 6, kept: the loss path's dW is g8ᵀ·x8, (V, D) row-major like the weight, where the record's
    program (and fp8_mm_backward) takes (x8ᵀ·g8)ᵀ: the same products (equal here; on a GPU cuBLAS may sum them in
    another order), dX untouched."""
    from train.fp8 import _products_body, fp8_products, fp8_products_t

    gen = torch.Generator().manual_seed(3)
    g8 = (torch.randn(64, 96, generator=gen) * 100).to(torch.float8_e5m2)  # (T, V)
    x8 = torch.randn(64, 32, generator=gen).to(torch.float8_e4m3fn)  # (T, D)
    w8 = torch.randn(96, 32, generator=gen).to(torch.float8_e4m3fn)  # (V, D)
    scales = (32**0.5 / 448, 2**-9, 1 / 448)
    try:
        want_dx, want_dw = _products_body(g8, x8, w8, *scales)  # the record's layout
    except (RuntimeError, NotImplementedError) as exc:
        pytest.skip(f"torch._scaled_mm with float8 does not run on this CPU build: {exc}")
    assert not want_dw.is_contiguous() and want_dw.T.is_contiguous()
    for dx, dw in (fp8_products(g8, x8, w8, *scales), fp8_products_t(g8, g8.T.contiguous(), x8, w8, *scales)):
        assert dw.shape == w8.shape and dw.is_contiguous()
        assert torch.equal(dx, want_dx) and torch.allclose(dw, want_dw, rtol=1e-6, atol=0)
    assert want_dw.abs().sum() > 0


def test_the_loss_path_accumulates_the_heads_gradient_in_the_weights_layout():
    """On a GPU, through head_loss and two accumulating backward passes: weight.grad from the Triton path (dW
    row-major) equals the unfused path's (the record's layout, column-major) up to the FP8 casts' rounding flips
    (pass 1's tanh.approx moves a row's log sum by at most 0.0073), in the weight's layout."""
    from tests.conftest import cuda_or_skip

    cuda_or_skip()
    head = fp8_head().cuda()
    gen = torch.Generator(device="cuda").manual_seed(4)
    xs = [F.rms_norm(torch.randn(256, 64, device="cuda", generator=gen), (64,)).bfloat16() for _ in range(2)]
    targets = torch.randint(0, 512, (256,), device="cuda", generator=gen)
    grads = []
    for fused in (False, True):
        head.weight.grad = None
        for x in xs:
            if fused:
                head_loss(x, head, targets, transposed=True).backward()
            else:
                record_loss(x, head, targets).backward()
        grads.append(head.weight.grad)
    assert grads[1].is_contiguous() and grads[1].stride() == head.weight.stride()
    assert ((grads[1].float() - grads[0].float()).norm() / grads[0].float().norm()).item() < 1e-2


def test_a_loss_gradient_other_than_one_scales_both_gradients():
    head = fp8_head()
    head.fp8 = False
    x = torch.randn(32, 64).requires_grad_()
    targets = torch.randint(0, 512, (32,))
    head.float()
    dx1, dw1 = torch.autograd.grad(head_loss(x, head, targets), (x, head.weight))
    dx3, dw3 = torch.autograd.grad(3 * head_loss(x, head, targets), (x, head.weight))
    assert torch.allclose(dx3, 3 * dx1) and torch.allclose(dw3, 3 * dw1)


def test_tiny_model_loss_and_every_gradient_match_with_fused_loss():
    grads, losses = [], []
    for fused in (False, True):
        model = tiny_model(fused_loss=str(fused).lower())
        with torch.no_grad():  # non-zero head and output blocks, so every gradient is non-trivial
            for p in model.parameters():
                if not p.any():
                    p.normal_(0, 0.02, generator=torch.Generator().manual_seed(p.numel()))
        inputs, targets, bounds = tiny_batch()
        loss = model(inputs, targets, bounds, 8, 24, 0.1)
        loss.backward()
        losses.append(loss.item())
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert losses[1] == pytest.approx(losses[0], rel=1e-6)
    assert grads[0].keys() == grads[1].keys() and len(grads[0]) > 10
    for name, want in grads[0].items():
        err = ((grads[1][name] - want).norm() / want.norm().clamp_min(1e-30)).item()
        assert err < 1e-5, (name, err)
    model.eval()  # evaluation keeps the unfused path (mean, no gradient)
    with torch.no_grad():
        assert model(inputs, targets, bounds, 8, 24, 0.1).item() == pytest.approx(losses[1] / len(targets), rel=1e-5)
