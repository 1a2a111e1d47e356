"""Issue 41, lever 1: could ReLU² ride the MLP's GEMM epilogues? One MLP layer at the record's shape, timed three ways.

    python3 benchmarks/relu2_gemm.py                    # on a GPU: check, then time (about 2-4 minutes)
    TRITON_INTERPRET=1 python3 benchmarks/relu2_gemm.py --small    # CPU: the kernel's check only, small shapes

The native MLP (train/model.py) is pre = x·fc, h = relu(pre)², y = h·projᵀ. ReLU² costs two memory-bound passes
per layer and micro-step (forward: read pre, write h; backward: read grad_h and pre, write grad_pre), 30 ms per
step at world size 1 on an H200 (profile of 2026-12-02). Here, per layer at M = 49,152 tokens, D = 768:
  forward   pre = x·fc (M, 4D), then h = relu(pre)²;   backward  grad_h = grad_y·proj (M, 4D), then
            grad_pre = 2·relu(pre)·grad_h (bf16 product, as the compiled record rounds it)
  a. unfused: cuBLAS (torch.mm), then the elementwise pass compiled by Inductor (what train/ does today);
  b. Inductor max-autotune on the whole expression (its Triton GEMM templates, pointwise epilogues fused, or
     cuBLAS where that wins);
  c. one persistent Triton GEMM (TMA descriptors) with the elementwise work in its epilogue (this file's kernel).
Each is checked against (a) first (bf16 outputs: elements apart and the largest distance), then timed as means
of 20 calls, 5 rounds alternating. It prints one Python dict per line; the last line holds the medians.
"""

import argparse
import time

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

from benchmarks.timing import time_ms


@triton.jit
def _tile(a_desc, b_desc, pre_desc, out_desc, tile, tiles_m, tiles_n, K: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr, BACKWARD: tl.constexpr):
    group = tile // (GROUP_M * tiles_n)  # GROUP_M row tiles at a time: their programs share B's columns in L2
    first_m = group * GROUP_M
    rows_in_group = min(tiles_m - first_m, GROUP_M)
    off_m = (first_m + (tile % (GROUP_M * tiles_n)) % rows_in_group) * BLOCK_M
    off_n = ((tile % (GROUP_M * tiles_n)) // rows_in_group) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        acc = tl.dot(a_desc.load([off_m, k]), b_desc.load([k, off_n]), acc)
    mm = acc.to(pre_desc.dtype)  # torch.mm's output dtype: the elementwise pass reads these bits
    if BACKWARD:
        r = tl.maximum(pre_desc.load([off_m, off_n]).to(tl.float32), 0.0)
        out_desc.store([off_m, off_n], (2.0 * r * mm.to(tl.float32)).to(pre_desc.dtype))
    else:
        pre_desc.store([off_m, off_n], mm)
        r = tl.maximum(mm.to(tl.float32), 0.0)
        out_desc.store([off_m, off_n], (r * r).to(pre_desc.dtype))


@triton.jit
def mm_relu2_kernel(a_desc, b_desc, pre_desc, out_desc, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                    NUM_PROGRAMS: tl.constexpr, BACKWARD: tl.constexpr):
    """acc = A·B (A (M, K), B (K, N), bf16 row-major, float32 accumulation), rounded to bf16 (the dtype of the
    tensors; float16 in the interpreter's check), then per tile:
    forward (BACKWARD=False): pre_desc <- acc, out_desc <- relu(acc)² (bf16);
    backward (BACKWARD=True): acc is grad_h; out_desc <- 2·relu(pre)·grad_h (bf16), pre read from pre_desc.
    NUM_PROGRAMS > 0: persistent, that many programs walk the output tiles; 0: one program per tile (the form
    Triton's interpreter can run: its loops cannot start at a program id)."""
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    if NUM_PROGRAMS > 0:
        for tile in tl.range(tl.program_id(0), tiles_m * tiles_n, NUM_PROGRAMS):
            _tile(a_desc, b_desc, pre_desc, out_desc, tile, tiles_m, tiles_n, K, BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M,
                  BACKWARD)
    else:
        _tile(a_desc, b_desc, pre_desc, out_desc, tl.program_id(0), tiles_m, tiles_n, K, BLOCK_M, BLOCK_N, BLOCK_K,
              GROUP_M, BACKWARD)


CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_stages, num_warps)
    (128, 256, 64, 3, 8), (128, 128, 64, 4, 8), (128, 128, 64, 4, 4), (256, 128, 64, 3, 8),
]


def fused(a, b, pre, config, backward: bool, programs: int):
    """(c): out (M, N) bf16 (h forward, grad_pre backward); forward also fills pre. programs: the persistent
    kernel's program count (the GPU's SMs), 0 for one program per tile."""
    bm, bn, bk, stages, warps = config
    M, K = a.shape
    N = b.size(1)
    out = a.new_empty(M, N)
    descs = (TensorDescriptor.from_tensor(a, [bm, bk]), TensorDescriptor.from_tensor(b, [bk, bn]),
             TensorDescriptor.from_tensor(pre, [bm, bn]), TensorDescriptor.from_tensor(out, [bm, bn]))
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    persistent = min(programs, tiles)  # programs = 0: one per tile
    mm_relu2_kernel[(persistent or tiles,)](*descs, M=M, N=N, K=K, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8,
                             NUM_PROGRAMS=persistent,
                             BACKWARD=backward, num_stages=stages, num_warps=warps)
    return out


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
    pre_a = x @ fc
    h_a, grad_h = ew(pre_a), grad_y @ proj
    gp_a = ew_b(grad_h, pre_a)
    report = {}
    configs = CONFIGS if cuda else [(32, 32, 32, 1, 4)]
    for cfg in configs:
        pre_c = torch.empty_like(pre_a)
        h_c = fused(x, fc, pre_c, cfg, False, sms)
        gp_c = fused(grad_y, proj, pre_a, cfg, True, sms)
        report[str(cfg)] = dict(pre=apart(pre_c, pre_a), h=apart(h_c, h_a), grad_pre=apart(gp_c, gp_a))
    print({"check (elements apart, largest distance) against (a), of": pre_a.numel(), **report}, flush=True)
    if not cuda:
        return

    ways = {
        "a_forward": lambda: ew(x @ fc), "a_backward": lambda: ew_b(grad_y @ proj, pre_a),
        "mm_alone": lambda: x @ fc,
    }
    for cfg in configs:
        pre_c = torch.empty_like(pre_a)
        for programs, form in ((sms, "persistent"), (0, "one tile each")):
            ways[f"c_forward {cfg} {form}"] = (
                lambda cfg=cfg, pre_c=pre_c, p=programs: fused(x, fc, pre_c, cfg, False, p))
            ways[f"c_backward {cfg} {form}"] = lambda cfg=cfg, p=programs: fused(grad_y, proj, pre_a, cfg, True, p)
    if not a.no_autotune:
        began = time.time()
        fw = torch.compile(lambda x, w: (lambda p: (p, relu2(p)))(x @ w), mode="max-autotune-no-cudagraphs")
        bw = torch.compile(lambda gy, w, p: relu2_backward(gy @ w, p), mode="max-autotune-no-cudagraphs")
        b_f, b_b = fw(x, fc), bw(grad_y, proj, pre_a)
        print({"b_compile_s": round(time.time() - began, 1), "b_check": dict(
            pre=apart(b_f[0], pre_a), h=apart(b_f[1], h_a), grad_pre=apart(b_b, gp_a))}, flush=True)
        ways["b_forward"], ways["b_backward"] = (lambda: fw(x, fc)), (lambda: bw(grad_y, proj, pre_a))
    ms = {name: [] for name in ways}
    for _ in range(5):
        for name, fn in ways.items():
            ms[name].append(round(time_ms(fn, 20), 4))
    print(ms, flush=True)
    print({name: sorted(v)[2] for name, v in ms.items()}, "medians, ms per call, one layer at M = 49152")


if __name__ == "__main__":
    main()
