"""Which launch gives train/qk_rope.py's forward kernel other bits: Inductor's (compiled) or the eager op's, and
does num_warps matter. Prints Inductor's launch metadata (the kernel's argument types), then elements apart.

    PYTHONPATH=. python3 docs/device-runs/2026-12-03-h200-levers/qk_warps.py     # on a GPU
"""

import torch
from torch._inductor.utils import run_and_get_code

from train.model import Yarn
from train.qk_rope import BLOCK_R, EPS, qk_norm_rope, triton_cdiv
from train.qk_rope_kernel import forward_kernel

T, H, hd = 96, 3, 64
g = torch.Generator().manual_seed(5)
yarn = Yarn(hd, 128, 8)
yarn.extend(3, 7)
qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16().cuda()
cos, sin = yarn.cos.cuda(), yarn.sin.cuda()
def f(x):
    q, k, _ = x.view(T, 3 * H, hd).chunk(3, dim=1)
    return qk_norm_rope(q, k, cos, sin)
comp, code = run_and_get_code(torch.compile(f, fullgraph=True), qkv)
for src in code:
    for line in src.splitlines():
        if "num_warps" in line or "triton_meta" in line:
            print("inductor:", line.strip()[:400])
eager = f(qkv)
print("compiled against eager op:", [((a != b).sum().item()) for a, b in zip(comp, eager)])
q, k, _ = qkv.view(T, 3 * H, hd).chunk(3, dim=1)
for w in (1, 2, 4, 8):
    qo, ko = (q.new_empty(T, H, hd) for _ in range(2))
    r = q.new_empty(T, 2 * H, dtype=torch.float32)
    forward_kernel[(triton_cdiv(T * H, BLOCK_R), 2)](q, k, cos, sin, qo, ko, r, T, q.stride(0), q.stride(1), EPS,
        H=H, HALF=hd // 2, BLOCK_R=BLOCK_R, FAST=True, num_warps=w)
    print(f"by hand num_warps={w} against compiled, eager op:",
          [((a != b).sum().item()) for a, b in zip(comp, (qo, ko, r))],
          [((a != b).sum().item()) for a, b in zip(eager, (qo, ko, r))])
