"""Config embed_grad_accum (issue 41, lever 8): the embeddings' gradients summed in float32 by their backward pass
over a step's micro-steps and handed to .grad once (train/embed_accum.py), against autograd's per-micro-step sum.

    .venv/bin/python -m pytest -q tests/test_train_embed_accum.py

On the CPU in float32 (the tiny preset), where the two differ only in the order the rows are added.
"""

import dataclasses

import pytest
import torch

from tests.test_train_model import tiny_batch, tiny_model
from train.embed_accum import lookup

# torch.compile on the CPU calls torch.jit.script_method inside torch, which warns: not this project's code
pytestmark = pytest.mark.filterwarnings("ignore:.*script_method.*:DeprecationWarning")


def model(seed: int, **overrides):
    """The tiny model with every weight moved a little: the record starts the head and the attention's output at
    zero, where no gradient reaches the embeddings."""
    m = tiny_model(seed=seed, **overrides)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * 0.05)
    return m


def micro_steps(model, n: int = 3) -> None:
    for seed in range(n):
        inputs, targets, bounds = tiny_batch(seed=seed)
        model(inputs, targets, bounds, 16, 32, 0.1).backward()


def test_the_summed_gradients_equal_autograds_over_a_steps_micro_steps():
    plain, summed = model(5), model(5, embed_grad_accum=True)
    assert summed.state_dict().keys() == plain.state_dict().keys()  # the sums are no part of a saved model
    micro_steps(plain)
    micro_steps(summed)
    tables = [summed.embed, *summed.value_embeds]
    assert all(t.weight.grad is None for t in tables)  # nothing handed over before the step's end
    summed.take_embedding_grads()
    for (name, a), b in zip(plain.named_parameters(), summed.parameters()):
        assert b.grad is not None and b.grad.dtype == a.grad.dtype, name
        if name.startswith(("embed.", "value_embeds.")):
            assert torch.allclose(b.grad, a.grad, rtol=1e-5, atol=1e-7), name
            assert a.grad.abs().sum() > 0, name
        else:
            assert torch.equal(b.grad, a.grad), name  # the rest of the backward pass is untouched
    assert all(getattr(summed, f"embed_grad_sum_{i}").abs().sum() == 0 for i in range(len(tables)))


def test_without_it_the_model_hands_nothing_over():
    plain = model(5)
    micro_steps(plain, 1)
    grads = [p.grad.clone() for p in plain.parameters()]
    plain.take_embedding_grads()
    assert all(torch.equal(g, p.grad) for g, p in zip(grads, plain.parameters()))


def test_the_sum_is_added_to_inside_a_compiled_backward_graph():
    """fullgraph torch.compile, as the trainer compiles the model: the lookup traced, the add a mutating custom op in
    the backward graph, across several backward passes of the same compiled graph."""
    torch.manual_seed(0)
    weight = torch.randn(50, 8, requires_grad=True)
    proj = torch.randn(8, 3)
    grad_sum = torch.zeros(50, 8)

    def loss(inputs):
        return (lookup(weight, inputs, grad_sum) @ proj).square().sum()

    compiled = torch.compile(loss, fullgraph=True)
    batches = [torch.randint(0, 50, (40,), generator=torch.Generator().manual_seed(i)) for i in range(3)]
    for inputs in batches:
        compiled(inputs).backward()
    assert weight.grad is None
    want = torch.zeros(50, 8)
    for inputs in batches:
        w = weight.detach().requires_grad_()
        (w[inputs] @ proj).square().sum().backward()
        want += w.grad
    assert torch.allclose(grad_sum, want, rtol=1e-5, atol=1e-6) and want.abs().sum() > 0


def test_the_loop_hands_the_sums_to_the_optimizer_every_step():
    """train.loop.accumulate_gradients: after the micro-steps the embeddings have their step's gradient (divided by
    grad_accum like every other), so that Adam updates them; without the hand-over it would skip them."""
    from train.loop import accumulate_gradients

    @dataclasses.dataclass
    class Batch:
        inputs: torch.Tensor
        targets: torch.Tensor
        doc_bounds: torch.Tensor

        def to(self, device):
            return self

    class Batches:  # the loader's interface: next_batch() with .to(device)
        seed = 0

        def next_batch(self):
            self.seed += 1
            return Batch(*tiny_batch(seed=self.seed))

    plain, summed = model(6), model(6, embed_grad_accum=True)
    for m in (plain, summed):
        accumulate_gradients(m, m, Batches(), 2, torch.device("cpu"), (16, 32, 0.1))
    assert torch.allclose(summed.embed.weight.grad, plain.embed.weight.grad, rtol=1e-5, atol=1e-7)
    assert summed.embed.weight.grad.abs().sum() > 0


def test_on_cuda_compiled_in_bf16_the_sums_match_autograd():
    """The lever's GPU check before it is timed (benchmarks/lever_lease.sh): the tiny model in bf16 on CUDA, compiled
    whole as the trainer compiles it, two micro-steps: the handed-over gradients equal autograd's bf16 sums within
    bf16's rounding (the record rounds after each micro-step, the sum only once)."""
    from tests.conftest import cuda_or_skip

    cuda_or_skip()
    grads = []
    for on in (False, True):
        m = model(7, bf16=True, embed_grad_accum=on).cuda()
        compiled = torch.compile(m, fullgraph=True)
        for seed in range(2):
            inputs, targets, bounds = (t.cuda() for t in tiny_batch(seed=seed))
            compiled(inputs, targets, bounds, 16, 32, 0.1).backward()
        m.take_embedding_grads()
        grads.append([m.embed.weight.grad, *(e.weight.grad for e in m.value_embeds)])
    for a, b in zip(*grads):
        assert b.dtype == a.dtype == torch.bfloat16 and a.float().abs().sum() > 0
        assert torch.allclose(b.float(), a.float(), rtol=2**-6, atol=1e-6)
