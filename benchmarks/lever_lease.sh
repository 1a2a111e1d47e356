#!/usr/bin/env bash
# benchmarks/lever_ab.sh in one device lease, detached from a private copy of the tree (each device call re-syncs
# the working tree under a running script), with a quick command before it and a profile after it when time is
# left. Written for issue 41's levers; the lease scripts under docs/device-runs/ were one-off forms of it.
#
#   bash benchmarks/lever_lease.sh start 540 LEVER...   # first device call: copy, start, wait up to 540 s, collect
#   bash benchmarks/lever_lease.sh poll 540             # each later call: wait up to 540 s, collect
#
# Environment (read by start): CHECK_TESTS (the levers' GPU tests, lever_ab.sh's), PRE (a command run first, its
# output in pre.txt: a kernel's own timing, seconds), BUDGET_S (lever_ab.sh's, default 1200; LEASE_DEVICE_S, status's
# budget_left_s, and LEASE_T0, the caller's `date +%s` just before the call, lower it to what the lease has left,
# as for benchmarks/lease.sh's table), PROFILE_SET (--set
# options for a profile of native after the A/B, e.g. "fused_loss_transpose=false"; none: no profile), PROFILE_NEED_S (150),
# DRY_RUN (lever_ab.sh's: plans the runs, no GPU; tests/test_lever_ab.py), LEASE_TREE and LEASE_DIR (the copy and
# the results, /tmp/lever-tree and /tmp/lever-lease). Every call leaves $OUT/lever-lease.tgz
# (all so far but compile caches) and prints progress. A call's wait ends early once the session is done.
# The copy, the detached start, the waits and the collection are benchmarks/lease.sh's.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export LEASE_TREE=${LEASE_TREE:-/tmp/lever-tree} LEASE_DIR=${LEASE_DIR:-/tmp/lever-lease} LEASE_NAME=lever-lease \
  LEASE_SHOW=lever-ab.txt BUDGET_S=${BUDGET_S:-1200} PROFILE_NEED_S=${PROFILE_NEED_S:-150}

session() {  # the detached part, in the copy (lease.sh's COMMAND); its levers are the arguments
  local R=$LEASE_DIR start=$SECONDS slack=200 lease
  mkdir -p "$R/profile"
  if [ -n "${LEASE_DEVICE_S:-}" ]; then
    # the device time the session had left when the call began (refused calls spend from it), less what the lease
    # held before this started and the collection: BUDGET_S never asks for more, and no profile runs past it
    lease=$(python3 benchmarks/session_plan.py budget ${LEASE_HELD_S:+--held-s "$LEASE_HELD_S"} \
      --device-s "$LEASE_DEVICE_S") || exit 1
    [ "$lease" -lt "$BUDGET_S" ] && BUDGET_S=$lease slack=0
    echo "budget $BUDGET_S s (the lease's device time allows $lease s)" >> "$R/progress.txt"
  fi
  { nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
    python3 -c "import torch, triton; print(torch.__version__, triton.__version__)"; } > "$R/gpus.csv" 2>&1
  if [ -n "${PRE:-}" ]; then
    bash -c "$PRE" > "$R/pre.txt" 2>&1
    echo "pre rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  fi
  DEST=$R/lever-ab BUDGET_S=$((BUDGET_S - (SECONDS - start))) bash benchmarks/lever_ab.sh "$@" > "$R/lever-ab.txt" 2>&1
  echo "lever-ab rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  if [ -n "${PROFILE_SET:-}" ] && [ -z "${DRY_RUN:-}" ] \
      && [ $((SECONDS - start)) -lt $((BUDGET_S + slack - PROFILE_NEED_S)) ]; then
    local sets=() kv
    for kv in $PROFILE_SET; do sets+=(--set "$kv"); done
    timeout "$PROFILE_NEED_S" python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m train \
      --preset record --train-files ".devcarry/docs-v1/fineweb_train_*.bin" \
      --val-files ".devcarry/docs-v1/fineweb_val_*.bin" --log-file "$R/profile/log.txt" --set scheduled_steps=12 \
      --set extension_steps=0 --set val_tokens=524288 --set val_batch_tokens=524288 --set attention=flex \
      --set data_cycle=true --set seed=301 "${sets[@]}" --profile "$R/profile" > "$R/profile.txt" 2>&1
    echo "profile rc $? after $((SECONDS - start)) s" >> "$R/progress.txt"
  fi
}

case ${1:?start, poll or session} in
  start)
    [ $# -gt 2 ] || { echo "usage: lever_lease.sh start SECONDS LEVER..." >&2; exit 2; }
    wait_for=$2; shift 2; exec bash "$HERE/lease.sh" start "$wait_for" bash benchmarks/lever_lease.sh session "$@" ;;
  poll) exec bash "$HERE/lease.sh" poll "${2:-540}" ;;
  session) shift; session "$@" ;;
esac
