"""Issue 41, lever 9: one attention layer's input side, forward and backward, as the record's expression and as
train/qk_rope.py's op (the QKV projection's gradient written whole), at the record's shape.

    python3 benchmarks/qkv_grad_time.py              # on a GPU: about a minute (two compiles)
    python3 benchmarks/qkv_grad_time.py --small      # CPU smoke run of the code (the op's torch forms; no timing)

From x (T, D) to the attention's inputs and back: qkv = x·Wᵀ viewed (T, 3H, hd), QK-norm and rotary on q and k,
v = λ₀·v + λ₁·ve, then the backward from given gradients of q, k and v down to dx, dW, dve and dλ. Two forms,
each compiled whole by Inductor as train/model.py's layer is:
  record: QK-norm, rotary and the value mix as the record writes them, all in Inductor; autograd concatenates dq,
          dk and λ₀·dv into dqkv (lever 9 was first timed against train/qk_rope.py's earlier op for QK-norm and
          rotary alone, in place of this expression: train/BENCHMARKS.md, 2026-12-04);
  lever 9: train/qk_rope.py's attention_inputs, whose backward kernel writes dqkv's three planes itself, and dve
           and dλ's partial sums with the third.
The two are compared first (elements apart: the record's graph rounds in other places, tests/test_train_qk_rope.py
bounds how far), then timed as means of 20 calls, 5 rounds alternating. One Python dict per line; the last holds
the medians in ms per layer.
"""

import argparse
import statistics

import torch
import torch.nn.functional as F

from benchmarks.timing import time_ms
from train.model import rms_norm
from train.qk_rope import attention_inputs, rotary


def record(x, w, ve, sa, cos, sin, H):
    qkv = F.linear(x, w).view(x.size(0), 3 * H, -1)
    q, k, v = qkv.chunk(3, dim=1)
    q, k = rotary(rms_norm(q), cos, sin), rotary(rms_norm(k), cos, sin)
    return q, k, sa[0] * v + sa[1] * ve.view_as(v)


def lever9(x, w, ve, sa, cos, sin, H):
    return attention_inputs(F.linear(x, w).view(x.size(0), 3 * H, -1), ve, sa, cos, sin)[:3]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="tiny shapes on the CPU: the code runs, nothing is timed")
    args = ap.parse_args()
    device = "cpu" if args.small else "cuda"
    T, D, H = (256, 128, 2) if args.small else (49152, 768, 6)
    hd = D // H
    g = torch.Generator().manual_seed(0)
    x = torch.randn(T, D, generator=g).bfloat16().to(device)
    w = (torch.randn(3 * D, D, generator=g) * D ** -0.5).bfloat16().to(device)
    ve = torch.randn(T, D, generator=g).bfloat16().to(device)
    sa = torch.tensor([0.5, 0.5], device=device)
    cos, sin = (torch.randn(T, hd // 2, generator=g).bfloat16().to(device) for _ in range(2))
    ups = [torch.randn(T, H, hd, generator=g).bfloat16().to(device) for _ in range(3)]

    def step(fn):
        xs, ws, es, ls = (t.clone().requires_grad_() for t in (x, w, ve, sa))
        torch.autograd.backward(list(fn(xs, ws, es, ls, cos, sin, H)), ups)
        return xs.grad, ws.grad, es.grad, ls.grad

    forms = {"record": torch.compile(record), "lever 9": torch.compile(lever9)}
    results = {name: step(fn) for name, fn in forms.items()}
    print({"apart": {name: (a != b).sum().item() for name, a, b in zip(
        ("dx", "dW", "dve", "dlambda"), results["record"], results["lever 9"])}})
    if args.small:
        return
    times = {name: [] for name in forms}
    for _ in range(5):
        for name, fn in forms.items():
            times[name].append(time_ms(lambda fn=fn: step(fn)))
        print({name: round(ms[-1], 4) for name, ms in times.items()})
    print({name: round(statistics.median(ms), 4) for name, ms in times.items()})


if __name__ == "__main__":
    main()
