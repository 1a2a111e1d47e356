"""The FA3 stand-in's numerics on the GPU: its FlexAttention path, compiled, against a float32 dense reference.

    python benchmarks/standin_check.py --out $OUT/standin                       (GPU: T 8192, 6 heads of 128)
    python benchmarks/standin_check.py --device cpu --tokens 512 --heads 2 --head-dim 16 --no-compile --out /tmp/s
    (CPU: FlexAttention has no backward there, so only outputs are compared; a smoke test of this script)

The call under test is the one the record's program makes, through pipeline/runs/fa3_standin exactly as a smoke
run imports it (`from flash_attn_interface import flash_attn_varlen_func`, that folder first on sys.path):

    flash_attn_varlen_func(q, k, v, cu_seqlens_q=b, cu_seqlens_k=b, max_seqlen_q=n, max_seqlen_k=n,
                           causal=True, softmax_scale=s, window_size=(left, 0))        # bf16 (T, H, hd)

inside torch.compile (the record compiles its whole model around it). Reference: the same bf16 inputs in float32,
the (T, T) mask materialised from FA3's definition (the stand-in's dense path, written independently of train/),
eager. Compared: the output and the gradients of q, k, v for one random upstream gradient, as relative L2 errors,
for each window the record uses (long 3..20 blocks of 128, short half of that) on packed documents of 50 to 3,000
tokens. For scale, the same reference computed in bf16 (inputs and output rounded, float32 inside) is also
compared: that is the error any bf16 attention kernel has. Bound: 1e-2 per tensor (bf16 rounds at 2^-9 relative;
the measured error of train/'s FlexAttention path was 1.9e-3 to 2.8e-3 on an H200). Exit 1 when a check fails.
Results: <out>/standin_check.json and a table on stdout.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STANDIN_DIR = REPO / "pipeline" / "runs" / "fa3_standin"
sys.path[:0] = [str(STANDIN_DIR), str(REPO)]  # as a smoke run: the stand-in first, train/ importable

import torch  # noqa: E402

from benchmarks.numerics import rel  # noqa: E402

BOUND = 1e-2
WINDOW_BLOCKS = (1, 3, 5, 7, 11, 13, 20)  # short (half of long) and long windows of the record, in 128-token blocks


def packed_documents(T: int, gen: torch.Generator, device: torch.device) -> torch.Tensor:
    """cu_seqlens (int32, padded with T to a fixed length as the record pads it): documents of 50..3000 tokens."""
    bounds = [0]
    while bounds[-1] < T:
        bounds.append(min(T, bounds[-1] + int(torch.randint(50, 3000, (1,), generator=gen))))
    cu = torch.full((len(bounds) + 8,), T, dtype=torch.int32)
    cu[: len(bounds)] = torch.tensor(bounds, dtype=torch.int32)
    return cu.to(device)


def forward_backward(fn, qkv, grad_out, rest, dtype) -> list[torch.Tensor]:
    """[out, dq, dk, dv] of fn(q, k, v, *rest) with the inputs cast to dtype; without grad_out, [out] * 4."""
    leaves = [x.detach().to(dtype).requires_grad_(grad_out is not None) for x in qkv]
    out = fn(*leaves, *rest)
    if grad_out is None:
        return [out.detach()] * 4
    out.backward(grad_out.to(out.dtype))
    return [out.detach()] + [x.grad for x in leaves]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="benchmarks/standin_check.py")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tokens", type=int, default=8192, help="packed micro-batch length (multiple of 128)")
    ap.add_argument("--heads", type=int, default=6)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--no-compile", action="store_true", help="eager FlexAttention (CPU smoke of this script)")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args(argv)
    device = torch.device(a.device)
    standin = importlib.import_module("flash_attn_interface")
    assert getattr(standin, "REPRO_STANDIN", None), f"imported {standin.__file__}, not the stand-in"
    standin.BACKEND = "flex"

    def call(q, k, v, cu, left, scale):
        return standin.flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu, cu_seqlens_k=cu, max_seqlen_q=q.size(0),
                                              max_seqlen_k=q.size(0), causal=True, softmax_scale=scale,
                                              window_size=(left, 0))

    backward = device.type == "cuda"  # FlexAttention has no backward on CPU: the CPU smoke checks outputs only
    under_test = call if a.no_compile else torch.compile(call, dynamic=False, fullgraph=True)
    gen = torch.Generator().manual_seed(0)
    T, H, hd = a.tokens, a.heads, a.head_dim
    result = dict(device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
                  torch=torch.__version__, tokens=T, heads=H, head_dim=hd, compiled=not a.no_compile, bound=BOUND,
                  gradients_checked=backward,
                  checks=[])
    failed = 0
    print("| window (tokens) | out | dq | dk | dv | bf16 dense out / dq | ok |\n|---|---|---|---|---|---|---|")
    for blocks in WINDOW_BLOCKS:
        left = blocks * 128
        cu = packed_documents(T, gen, device)
        q, k, v = (torch.randn(T, H, hd, generator=gen).to(device, torch.bfloat16) for _ in range(3))
        grad_out = torch.randn(T, H, hd, generator=gen).to(device, torch.bfloat16)
        scale = 0.12
        started = time.perf_counter()

        case = ((q, k, v), grad_out if backward else None, (cu, left, scale))
        got = forward_backward(under_test, *case, torch.bfloat16)
        standin.BACKEND = "dense"
        want = forward_backward(call, *case, torch.float32)  # the stand-in's dense float32 path: FA3's definition
        bf16_dense = forward_backward(call, *case, torch.bfloat16)  # what bf16 inputs and output cost any kernel
        standin.BACKEND = "flex"
        errors = [rel(g, w) for g, w in zip(got, want)]
        scale_errors = [rel(bf16_dense[0], want[0]), rel(bf16_dense[1], want[1])]
        ok = all(e <= BOUND for e in errors)
        failed += not ok
        result["checks"].append(dict(window=left, out=errors[0], dq=errors[1], dk=errors[2], dv=errors[3],
                                     bf16_dense_out=scale_errors[0], bf16_dense_dq=scale_errors[1], ok=ok,
                                     seconds=round(time.perf_counter() - started, 1)))
        print(f"| {left} | " + " | ".join(f"{e:.2e}" for e in errors)
              + f" | {scale_errors[0]:.2e} / {scale_errors[1]:.2e} | {'ok' if ok else 'FAIL'} |", flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "standin_check.json").write_text(json.dumps(result, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
