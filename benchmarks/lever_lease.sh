#!/usr/bin/env bash
# benchmarks/lever_ab.sh in one device lease, detached from a private copy of the tree (each device call re-syncs
# the working tree under a running script), with a quick command before it and a profile after it when time is
# left. Written for issue 41's levers; the lease scripts under docs/device-runs/ were one-off forms of it.
#
#   bash benchmarks/lever_lease.sh start 540 LEVER...   # first device call: copy, start, wait up to 540 s, collect
#   bash benchmarks/lever_lease.sh poll 540             # each later call: wait up to 540 s, collect
#
# Environment (read by start): CHECK_TESTS (the levers' GPU tests, lever_ab.sh's), PRE (a command run first, its
# output in pre.txt: a kernel's own timing, seconds), BUDGET_S (lever_ab.sh's, default 1200), PROFILE_SET (--set
# options for a profile of native after the A/B, e.g. "fused_loss_transpose=false"; none: no profile), PROFILE_NEED_S (150),
# DRY_RUN (lever_ab.sh's: plans the runs, no GPU; tests/test_lever_ab.py), LEASE_TREE and LEASE_DIR (the copy and
# the results, /tmp/lever-tree and /tmp/lever-lease). Every call leaves $OUT/lever-lease.tgz
# (all so far but compile caches) and prints progress. A call's wait ends early once the session is done.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
T=${LEASE_TREE:-/tmp/lever-tree} R=${LEASE_DIR:-/tmp/lever-lease}
BUDGET_S=${BUDGET_S:-1200} PROFILE_NEED_S=${PROFILE_NEED_S:-150}

session() {  # the detached part, in the copy; its levers are the arguments
  local start=$SECONDS
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$R/gpus.csv" 2>&1
  if [ -n "${PRE:-}" ]; then
    bash -c "$PRE" > "$R/pre.txt" 2>&1
    echo "pre rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  fi
  DEST=$R/lever-ab BUDGET_S=$((BUDGET_S - (SECONDS - start))) bash benchmarks/lever_ab.sh "$@" > "$R/lever-ab.txt" 2>&1
  echo "lever-ab rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  if [ -n "${PROFILE_SET:-}" ] && [ -z "${DRY_RUN:-}" ] \
      && [ $((SECONDS - start)) -lt $((BUDGET_S + 200 - PROFILE_NEED_S)) ]; then
    local sets=() kv
    for kv in $PROFILE_SET; do sets+=(--set "$kv"); done
    timeout "$PROFILE_NEED_S" python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m train \
      --preset record --train-files ".devcarry/docs-v1/fineweb_train_*.bin" \
      --val-files ".devcarry/docs-v1/fineweb_val_*.bin" --log-file "$R/profile/log.txt" --set scheduled_steps=12 \
      --set extension_steps=0 --set val_tokens=524288 --set val_batch_tokens=524288 --set attention=flex \
      --set data_cycle=true --set seed=301 "${sets[@]}" --profile "$R/profile" > "$R/profile.txt" 2>&1
    echo "profile rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  fi
  echo all-done >> "$R/progress.txt"
}

start() {
  [ $# -gt 0 ] || { echo "usage: lever_lease.sh start SECONDS LEVER..." >&2; exit 2; }
  rm -rf "$T" "$R" && mkdir -p "$T" "$R/profile" || exit 1
  # the tree and the carried shards (.devcarry); not a virtual environment or git's objects (CPU tests, 2 GB)
  tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./cache -cf - . | tar -C "$T" -xf - || exit 1
  (cd "$T" && LEASE_DIR=$R LEASE_TREE=$T BUDGET_S=$BUDGET_S PROFILE_NEED_S=$PROFILE_NEED_S setsid nohup \
    bash benchmarks/lever_lease.sh session "$@" > "$R/session.log" 2>&1 < /dev/null &)
}

collect() {
  tar -czf "${OUT:-/tmp}/lever-lease.tgz" --exclude=cache -C "$(dirname "$R")" "$(basename "$R")"
  tail -n 12 "$R/lever-ab.txt" "$R/progress.txt" 2> /dev/null
}

wait_s() {  # up to N seconds, sooner once the session is done
  for _ in $(seq $(($1 / 5))); do
    grep -qs all-done "$R/progress.txt" && return
    sleep 5
  done
}

case ${1:?start, poll or session} in
  start) wait_for=${2:?seconds to wait}; shift 2; start "$@"; wait_s "$wait_for"; collect ;;
  poll)  # a machine idle for 30 s is handed back, and the next call gets a fresh one with no session on it
    [ -d "$R" ] || { echo "lever_lease.sh: no lease session on this machine ($R): it was handed back and this" \
      "one is fresh; the runs so far are in the last call's lever-lease.tgz. Start again." >&2; exit 3; }
    wait_s "${2:-540}"; collect ;;
  session) shift; session "$@" ;;
esac
