"""Issue 41, lever 1: ReLU²'s backward in the epilogue of the MLP's grad_h GEMM, one layer at the record's shape.

    python3 benchmarks/relu2_gemm.py                    # on a GPU: check, then time (about 1-3 minutes)
    python3 benchmarks/relu2_gemm.py --no-autotune      # without (b), whose autotuning takes most of that
    TRITON_INTERPRET=1 python3 benchmarks/relu2_gemm.py --small    # CPU: the kernel's check only, small shapes

The native MLP (train/model.py) is pre = x·fc, h = relu(pre)², y = h·projᵀ; its backward computes
grad_h = grad_y·proj (M, 4D), then grad_pre = 2·relu(pre)·grad_h in a memory-bound pass (read grad_h and pre,
write grad_pre). Per layer at M = 49,152 tokens, D = 768, three ways:
  a. cuBLAS (torch.mm), then the elementwise pass compiled by Inductor (the record's graph; train/ off Triton);
  b. Inductor max-autotune on the whole expression (its Triton GEMM templates with the pointwise epilogue fused,
     or cuBLAS where that wins);
  c. train/relu2_grad.py's persistent Triton GEMM on TMA descriptors with the elementwise work in its epilogue,
     persistent and one program per tile.
Also timed: (a)'s forward (cuBLAS, then h = relu(pre)²), cuBLAS alone, and the forward's second GEMM after
Inductor's h. A fused forward (pre and h written by the epilogue) measured slower, 0.512 against 0.467 ms, and was
dropped (docs/device-runs/2026-12-03-h200-relu2-gemm/, run with this file as of commit 699dfb3). Levers 15 and 16
squared pre inside the GEMM y = h·projᵀ: lever 15 (h left to (c)'s epilogue) measured 1.0069 end to end and was
deleted (docs/device-runs/2026-12-04-h200-table-lost-lever15/, this file as of commit bfe3f3f); lever 16 (h stored
from the forward's registers) gave wrong y at its tile shape, 11,786,659 of 37,748,736 elements apart from (a) by up
to 1.41, and was deleted (docs/device-runs/2026-12-05-h100-lever16/, this file as of commit a126cb0). Lever 17, (c) on
128 × 128 tiles, one program each and two an SM, was timed only end to end, 1.0011 against the persistent kernel, and
deleted (docs/device-runs/2026-12-05-h200-lever17/). Each way is checked against (a) first (bf16: elements apart,
largest distance), then timed as means of 20 calls, 5 rounds alternating. One Python dict per line; the last holds
the medians.
"""

import argparse
import time

import torch
import torch.nn.functional as F

from benchmarks.timing import time_ms
from train.relu2_grad import launch


def relu2(pre):
    return F.relu(pre).square()


def relu2_backward(grad_h, pre):
    return 2 * F.relu(pre) * grad_h


def apart(a, b) -> tuple[int, float]:
    return (a != b).sum().item(), (a.float() - b.float()).abs().max().item()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--small", action="store_true", help="small shapes, check only (CPU interpreter)")
    ap.add_argument("--no-autotune", action="store_true", help="skip (b), Inductor's max-autotune")
    a = ap.parse_args()
    cuda = torch.cuda.is_available() and not a.small
    dev = "cuda" if cuda else "cpu"
    M, D = (49152, 768) if not a.small else (256, 64)
    dtype = torch.bfloat16 if cuda else torch.float16  # the interpreter's bf16 dot gives garbage (Triton 3.6)
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(M, D, device=dev, generator=g).to(dtype)
    fc = (torch.rand(D, 4 * D, device=dev, generator=g) * 2 - 1).mul(3 ** 0.5 * 0.5 * D ** -0.5).to(dtype)
    proj = (torch.randn(D, 4 * D, device=dev, generator=g) * 0.02).to(dtype)
    grad_y = torch.randn(M, D, device=dev, generator=g).to(dtype)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if cuda else 0

    ew = torch.compile(relu2) if cuda else relu2  # (a)'s elementwise passes, as Inductor compiles them
    ew_b = torch.compile(relu2_backward) if cuda else relu2_backward
    pre = x @ fc
    grad_pre = ew_b(grad_y @ proj, pre)
    forms = {"persistent": sms, "one tile each": 0} if cuda else {"one tile each": 0}  # (c)'s, launch's programs
    h = ew(pre)
    print({"check (elements apart, largest distance) against (a), of": pre.numel(),
           **{form: apart(launch(grad_y, proj, pre, p), grad_pre) for form, p in forms.items()}}, flush=True)
    if not cuda:
        return

    ways = {"a_forward": lambda: ew(x @ fc), "mm_alone": lambda: x @ fc,
            "a_backward": lambda: ew_b(grad_y @ proj, pre),
            "a_forward_proj (h, then h·projᵀ)": lambda: F.linear(ew(pre), proj),
            "proj_mm_alone": lambda: F.linear(h, proj)}
    for form, p in forms.items():
        ways[f"c_backward {form}"] = lambda p=p: launch(grad_y, proj, pre, p)
    if not a.no_autotune:
        began = time.time()
        bw = torch.compile(lambda gy, w, p: relu2_backward(gy @ w, p), mode="max-autotune-no-cudagraphs")
        check = apart(bw(grad_y, proj, pre), grad_pre)  # the first call compiles and autotunes
        print({"b_compile_s": round(time.time() - began, 1), "b_check": check}, flush=True)
        ways["b_backward"] = lambda: bw(grad_y, proj, pre)
    ms = {name: [] for name in ways}
    for _ in range(5):
        for name, fn in ways.items():
            ms[name].append(round(time_ms(fn, 20), 4))
    print(ms, flush=True)
    print({name: sorted(v)[2] for name, v in ms.items()}, "medians, ms per call, one layer at M = 49152")


if __name__ == "__main__":
    main()
