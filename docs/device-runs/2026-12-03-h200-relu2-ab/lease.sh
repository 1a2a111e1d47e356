#!/usr/bin/env bash
# One lease on nvidia-h200 for issue 41 (2026-12-03, second session): lever 1, ReLU²'s backward in a GEMM epilogue
# (config relu2_grad_epilogue), measured end to end against itself off, 3 + 3 alternating
# (benchmarks/lever_ab.sh relu2_grad_epilogue, which first runs the lever's CUDA tests); then, in the time left, a
# profile of native with it on (train/profile.py, steps 6..8): where the step goes now, for the levers after it.
# Detached from a private copy of the tree (/tmp/tree): each device call re-syncs the working tree.
#
#   bash docs/device-runs/2026-12-03-h200-relu2-ab/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-03-h200-relu2-ab/lease.sh poll 540    # later calls: wait, collect
# Each call leaves $OUT/relu2-ab.tgz (everything so far but compile caches) and prints progress.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree R=/tmp/relu2-ab
BUDGET_S=${BUDGET_S:-700} PROFILE_NEED_S=${PROFILE_NEED_S:-150}

session() {  # the detached part
  local start=$SECONDS
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv > "$R/gpus.csv" 2>&1
  python3 -c "import torch, triton; print(torch.__version__, triton.__version__)" >> "$R/gpus.csv" 2>&1
  DEST=$R/lever-ab BUDGET_S=$BUDGET_S bash benchmarks/lever_ab.sh relu2_grad_epilogue > "$R/lever-ab.txt" 2>&1
  echo "lever-ab done after $((SECONDS - start)) s" >> "$R/progress.txt"
  if [ $((SECONDS - start)) -lt $((BUDGET_S + 200 - PROFILE_NEED_S)) ]; then
    timeout $PROFILE_NEED_S python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m train --preset record \
      --train-files ".devcarry/docs-v1/fineweb_train_*.bin" --val-files ".devcarry/docs-v1/fineweb_val_*.bin" \
      --log-file "$R/profile/log.txt" --set scheduled_steps=12 --set extension_steps=0 --set val_tokens=524288 \
      --set val_batch_tokens=524288 --set attention=flex --set data_cycle=true --set relu2_grad_epilogue=true \
      --set seed=301 --profile "$R/profile" > "$R/profile.txt" 2>&1
    echo "profile rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  fi
  echo all-done >> "$R/progress.txt"
}

start() {
  rm -rf "$T" "$R" && cp -a "$REPO" "$T" && mkdir -p "$R/profile"
  (cd "$T" && R=$R BUDGET_S=$BUDGET_S PROFILE_NEED_S=$PROFILE_NEED_S setsid nohup bash "$0" session \
    > "$R/session.log" 2>&1 < /dev/null &)
}

collect() {
  tar -czf "$OUT/relu2-ab.tgz" --exclude=cache -C /tmp relu2-ab
  tail -n 4 "$R/lever-ab/sidebyside.txt" 2> /dev/null; tail -n 12 "$R/lever-ab.txt" "$R/progress.txt" 2> /dev/null
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
