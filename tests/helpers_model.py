"""A tiny GPT's training step with a train/ option off and on, for the tests of the fused-kernel options
(tests/test_qk_rope.py, tests/test_relu2_mlp.py): the same weights, batch and windows both times."""

import dataclasses

import torch

from train.config import preset
from train.model import GPT


def backward_nodes(loss) -> set[str]:
    """The type names of every node in loss's autograd graph (a custom op's shows its name)."""
    seen, stack = set(), [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack += [f for f, _ in node.next_functions]
    return {type(n).__name__ for n in seen}


def assert_option_runs_through_op_and_computes_the_same(option: str, op: str) -> None:
    """The tiny preset's loss and every gradient with `option` False and True: equal to float32 rounding, and
    only the run with it on has the custom op `op` in its backward graph."""
    cfg = preset("tiny")
    T = cfg.train_tokens_per_slot
    inputs = torch.randint(0, 1000, (T,), dtype=torch.int32, generator=torch.Generator().manual_seed(1))
    targets = torch.randint(0, 1000, (T,), generator=torch.Generator().manual_seed(2))
    bounds = torch.tensor([0, 100, T], dtype=torch.int32)
    losses, grads, nodes = {}, {}, {}
    for on in (False, True):
        torch.manual_seed(0)
        model = GPT(dataclasses.replace(cfg, **{option: on}))
        for p in model.parameters():  # the zero-initialised projections and gates too: every path carries
            torch.nn.init.normal_(p, std=0.05)
        loss = model(inputs, targets, bounds, torch.tensor(16), torch.tensor(32), torch.tensor(0.1))
        nodes[on] = backward_nodes(loss)
        loss.backward()
        losses[on], grads[on] = loss.detach(), {n: p.grad for n, p in model.named_parameters()}
    assert torch.allclose(losses[True], losses[False], rtol=1e-6)
    for name, g in grads[False].items():  # value embeddings and the lambdas in `scalars` included
        assert torch.allclose(grads[True][name], g, rtol=1e-4, atol=1e-6), name
    assert not any(op in n for n in nodes[False]) and any(op in n for n in nodes[True]), nodes[True]
