#!/usr/bin/env bash
# One lease on nvidia-h200 for issue 41 (2026-12-03): the two levers still undecided, each alone against the same
# base runs, 3 runs per arm (benchmarks/lever_ab.sh qk_rope_op loss_poly_exp), after two cheap looks:
#   qk-diff.txt   why lever 2's compiled op gave other bits than its eager op (2026-12-02): eager, compiled and
#                 the forward kernel launched by hand with and without Triton's FMA contraction, compared bit
#                 by bit, with the lines of Inductor's code that launch the kernel;
#   pass1-time.txt  lever 3's first loss pass alone at the record's shape, ex2 against the polynomial, 5 + 5
#                 alternating means of 20 calls.
# The 2026-12-02 leases' outputs were lost with that session's machine; this one measures again what they left
# undecided. Detached from a private copy of the tree (/tmp/tree): each device call re-syncs the working tree.
#
#   bash docs/device-runs/2026-12-03-h200-levers/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-03-h200-levers/lease.sh poll 540    # later calls: wait, collect
# Each call leaves $OUT/levers.tgz (everything so far but compile caches) and prints progress.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree R=/tmp/levers
BUDGET_S=${BUDGET_S:-1000}

session() {  # the detached part
  local start=$SECONDS
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpus.csv" 2>&1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$R/gpus.csv" 2>&1
  timeout 150 python3 - > "$R/qk-diff.txt" 2>&1 <<'PY'
import torch
from torch._inductor.utils import run_and_get_code
from train.model import Yarn
from train.qk_rope import BLOCK_R, EPS, WARPS, qk_norm_rope, reference, triton_cdiv
from train.qk_rope_kernel import forward_kernel
T, H, hd = 96, 3, 64  # tests/test_train_qk_rope.py's inputs
g = torch.Generator().manual_seed(5)
yarn = Yarn(hd, 128, 8)
yarn.extend(3, 7)
qkv = (torch.randn(T, 3 * H * hd, generator=g) * 3).bfloat16().cuda()
ups = [torch.randn(T, H, hd, generator=g).bfloat16().cuda() for _ in range(2)]
cos, sin = yarn.cos.cuda(), yarn.sin.cuda()
def f(x):
    q, k, _ = x.view(T, 3 * H, hd).chunk(3, dim=1)
    return qk_norm_rope(q, k, cos, sin)
def apart(a, b):  # (elements apart, largest distance)
    return ((a != b).sum().item(), (a.float() - b.float()).abs().max().item())
runs, code = {}, []
for name, fn in (("eager", f), ("compiled", torch.compile(f, fullgraph=True))):
    x = qkv.clone().requires_grad_()
    if name == "compiled":
        out, code = run_and_get_code(fn, x)  # the forward graph's code (the backward compiles later)
    else:
        out = fn(x)
    torch.autograd.backward(list(out[:2]), ups)
    runs[name] = (*[o.detach() for o in out], x.grad)
names = ("q", "k", "rstd", "dqkv")
print("compiled against eager:", dict(zip(names, map(apart, runs["eager"], runs["compiled"]))))
q, k, _ = qkv.view(T, 3 * H, hd).chunk(3, dim=1)
print("torch reference against eager:", dict(zip(names, map(apart, runs["eager"], reference(q, k, cos, sin)))))
for fusion in (True, False):
    qo, ko = (q.new_empty(T, H, hd) for _ in range(2))
    r = q.new_empty(T, 2 * H, dtype=torch.float32)
    forward_kernel[(triton_cdiv(T * H, BLOCK_R), 2)](q, k, cos, sin, qo, ko, r, T, q.stride(0), q.stride(1), EPS,
        H=H, HALF=hd // 2, BLOCK_R=BLOCK_R, FAST=True, num_warps=WARPS, enable_fp_fusion=fusion)
    for name in ("eager", "compiled"):
        print(f"by hand, enable_fp_fusion={fusion}, against {name}:", dict(zip(names, map(apart, runs[name], (qo, ko, r)))))
for src in code:
    for i, line in enumerate(src.splitlines()):
        if "_kernel" in line and ("run(" in line or "[grid" in line or "def " in line or "launch" in line):
            print("inductor:", line.strip()[:300])
PY
  echo "qk diff rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  timeout 120 python3 - > "$R/pass1-time.txt" 2>&1 <<'PY'
import torch
from benchmarks.timing import time_ms
from train.xent_triton import _row_stats
T, V = 49152, 50304  # the record's micro-batch and padded vocabulary
x = (torch.randn(T, V, device="cuda") * 12).bfloat16()
targets = torch.randint(0, V, (T,), device="cuda")
ms = {"ex2": [], "poly": []}
for _ in range(5):  # alternating, each a mean of 20 calls after 3 warm-up calls
    ms["ex2"].append(round(time_ms(lambda: _row_stats(x, targets), 20), 4))
    ms["poly"].append(round(time_ms(lambda: _row_stats(x, targets, poly=True), 20), 4))
print(ms)
print({k: sorted(v)[2] for k, v in ms.items()}, "medians, ms per pass 1 at 49152 x 50304")
PY
  echo "pass1 timing rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  DEST=$R/lever-ab BUDGET_S=$((BUDGET_S - (SECONDS - start))) bash benchmarks/lever_ab.sh qk_rope_op loss_poly_exp \
    > "$R/lever-ab.txt" 2>&1
  echo "lever-ab done after $((SECONDS - start)) s" >> "$R/progress.txt"
  echo all-done >> "$R/progress.txt"
}

start() {
  rm -rf "$T" "$R" && cp -a "$REPO" "$T" && mkdir -p "$R"
  (cd "$T" && R=$R BUDGET_S=$BUDGET_S setsid nohup bash "$0" session > "$R/session.log" 2>&1 < /dev/null &)
}

collect() {
  tar -czf "$OUT/levers.tgz" --exclude=cache -C /tmp levers
  cat "$R/qk-diff.txt" 2> /dev/null | head -n 30; tail -n 2 "$R/pass1-time.txt" 2> /dev/null
  tail -n 4 "$R/lever-ab/sidebyside.txt" 2> /dev/null; tail -n 14 "$R/lever-ab.txt" "$R/progress.txt" 2> /dev/null
}

wait_s() {  # up to N seconds, sooner once the session is done
  for _ in $(seq $(( $1 / 5 ))); do
    grep -qs all-done "$R/progress.txt" && return
    sleep 5
  done
}

case ${1:?start, poll or session} in
  start) start; wait_s "${2:-540}"; collect ;;
  poll) wait_s "${2:-540}"; collect ;;
  session) session ;;
esac
