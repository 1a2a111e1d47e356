"""When does a fullgraph-compiled GPT hand its parameters their gradients? (issue 41, world size >= 2)

    .venv/bin/python benchmarks/grad_hooks.py          # CPU, the tiny preset, about 10 s (one compile)

Issue 41 asks to start each gradient's reduce-scatter from the backward pass with
`register_post_accumulate_grad_hook`, so that communication overlaps the rest of the backward. That overlap needs
the parameters' gradients to arrive while backward kernels are still to be queued. train/loop.py compiles the model
with fullgraph=True, as the record does: AOTAutograd then puts the whole backward in one autograd node, and every
parameter's AccumulateGrad hangs below it. The engine runs those only once that node has returned, that is once
the CPU has queued every backward kernel, so a collective a hook starts waits on an event behind all of them: on
the GPU it begins when the backward ends, as it does when the optimizer's step() starts it.

This prints the backward node each parameter's AccumulateGrad hangs below, and the order in which the hooks
fired. It exits 0 when one node hands over every gradient (the case above), 1 otherwise: then hooks could overlap,
and the option is worth building and measuring. Overlap with the model compiled whole would need the backward cut
at block boundaries (each block compiled alone, or compiled autograd), which also cuts the fusions across blocks
at world size 1: a change to measure at world size 2 against its cost at 1.
"""

from __future__ import annotations

import collections
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from train.config import apply_overrides, preset  # noqa: E402
from train.model import GPT  # noqa: E402


def main() -> int:
    torch.manual_seed(0)
    model = GPT(apply_overrides(preset("tiny"), []), attention_backend="dense", fp8=False)
    T = 128  # tokens; documents bounded at 0, 40, 41, 100 (the rest padding at T)
    inputs = torch.randint(0, 50257, (T,), dtype=torch.int32)
    targets = torch.randint(0, 50257, (T,))
    bounds = torch.tensor([0, 40, 41, 100] + [T] * 124, dtype=torch.int32)
    loss = torch.compile(model, fullgraph=True)(inputs, targets, bounds, 16, 32, 0.1)

    params = {id(p) for p in model.parameters()}
    parents: collections.Counter[str] = collections.Counter()  # backward node type -> parameters below it
    seen, todo = set(), [loss.grad_fn]
    while todo:
        node = todo.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        for child, _ in node.next_functions:
            if type(child).__name__ == "AccumulateGrad" and id(child.variable) in params:
                parents[f"{type(node).__name__}@{id(node):x}"] += 1
            todo.append(child)

    fired: list[str] = []
    for name, p in model.named_parameters():
        p.register_post_accumulate_grad_hook(lambda _, name=name: fired.append(name))
    loss.backward()

    print(f"torch {torch.__version__}: {len(params)} parameters, {len(seen)} backward nodes")
    for node, n in parents.items():
        print(f"  {n} parameters' AccumulateGrad below {node}")
    print(f"hooks fired after the backward node returned, in this order: {', '.join(fired)}")
    return 0 if len(parents) == 1 and sum(parents.values()) == len(params) else 1


if __name__ == "__main__":
    sys.exit(main())
