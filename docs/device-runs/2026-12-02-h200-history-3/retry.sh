#!/usr/bin/env bash
# Run again, in the same lease, records whose first attempt ran out of GPU memory beside others (run.sh's `one`,
# the same command: `reproduce` resumes, keeping the failed run aside as an attempt). Waits until each record in
# WAIT_FOR has finished first, so that their memory is free.
#
#   WAIT_FOR="A B" bash docs/device-runs/2026-12-02-h200-history-3/retry.sh start RECORD...   (from the tree copy)
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
W=${W:-/tmp/history}
export REPRO_REGISTRY=$REPO/.devcarry/registry
FLAGS=(--runtime host --python-env system --smoke 20 --runs 1 --nproc 1 --dataset docs-v1-smoke)

one() {
  local record=$1 root=$W/$1 n
  n=$(ls "$W/$record".attempt*.out 2>/dev/null | wc -l); n=$((n + 1))
  for ext in out err finished bundle-verify.txt; do [ -f "$W/$record.$ext" ] && mv "$W/$record.$ext" "$W/$record.attempt$n.$ext"; done
  date +%s > "$W/$record.started"
  CUDA_VISIBLE_DEVICES=0 python3 -m pipeline --root "$root" reproduce --record "$record" "${FLAGS[@]}" \
    --data-source "$W/src" --keep-going > "$W/$record.out" 2> "$W/$record.err"
  echo "exit $? at $(date +%s)" >> "$W/$record.out"
  local bundle
  bundle=$(ls -t "$root"/bundles/*.tar.gz 2>/dev/null | head -1)
  if [ -n "$bundle" ]; then
    python3 -m pipeline --root "$root" bundle verify "$bundle" > "$W/$record.bundle-verify.txt" 2>&1
    echo "exit $?" >> "$W/$record.bundle-verify.txt"
  fi
  date +%s > "$W/$record.finished"
}

retry() {
  cd "$REPO" || exit 1
  rm -f "$W/ALL_DONE"
  for name in ${WAIT_FOR:-}; do while [ ! -f "$W/$name.finished" ]; do sleep 5; done; done
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 15 > "$W/gpu-memory-retry.csv" 2>&1 &
  local mon=$!
  for name in "$@"; do one "$name" & done
  wait $(jobs -rp | grep -v "^$mon$")
  kill "$mon"
  date +%s > "$W/ALL_DONE"
}

case "${1:-}" in
  start) shift; setsid nohup bash "$0" _retry "$@" > "$W/retry.log" 2>&1 < /dev/null & echo "retry started: $*" ;;
  _retry) shift; retry "$@" ;;
  *) echo "usage: retry.sh start RECORD..." >&2; exit 2 ;;
esac
