#!/usr/bin/env bash
# The second lease on nvidia-h200 for issue 41 (same day): lever 3 (`loss_poly_exp`, pass 1's exp(z - 30) on the
# FMA units) checked and timed alone at the record's shape (pass 1 with and without it, alternating, 5 + 5 means
# of 20 calls), then end to end against the same base runs (benchmarks/lever_ab.sh, 3 + 3); first, why lever 2's
# compiled op did not give the eager op's bits in the first lease (its CUDA test, which now names the tensor
# and the distance). Detached from a private copy of the tree (/tmp/tree), polled across calls.
#
#   bash docs/device-runs/2026-12-02-h200-levers-2/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-02-h200-levers-2/lease.sh poll 540    # later calls: wait, collect
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree R=/tmp/levers2
BUDGET_S=${BUDGET_S:-550}

session() {  # the detached part
  local start=$SECONDS
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpus.csv" 2>&1
  timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_train_qk_rope.py -k cuda > "$R/qk-check.txt" 2>&1
  echo "qk check rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  timeout 120 python3 benchmarks/xent_check.py > "$R/xent-check.txt" 2>&1
  echo "xent check rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
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
  DEST=$R/lever-ab BUDGET_S=$BUDGET_S NEED_S=80 bash benchmarks/lever_ab.sh loss_poly_exp > "$R/lever-ab.txt" 2>&1
  echo "lever-ab done after $((SECONDS - start)) s" >> "$R/progress.txt"
  echo all-done >> "$R/progress.txt"
}

start() {
  rm -rf "$T" "$R" && cp -a "$REPO" "$T" && mkdir -p "$R"
  (cd "$T" && R=$R BUDGET_S=$BUDGET_S setsid nohup bash "$0" session > "$R/session.log" 2>&1 < /dev/null &)
}

collect() {
  tar -czf "$OUT/levers2.tgz" --exclude=cache -C /tmp levers2
  tail -n 3 "$R/qk-check.txt" "$R/xent-check.txt" "$R/pass1-time.txt" 2> /dev/null
  tail -n 12 "$R/lever-ab.txt" "$R/progress.txt" 2> /dev/null
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
