#!/usr/bin/env bash
# One lease on nvidia-h200 for issues 27 and 29: the three records' smoke reproductions (run.sh) and, beside
# them on the same GPU, the GPU differential of the native trainer's current default (benchmarks/device_diff.py
# at world size 1, no overrides). Everything runs from a private copy of the tree (/tmp/tree), because each
# device call re-syncs the working tree under a running script.
#
#   bash docs/device-runs/2026-12-01-h200-anyrecord/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-01-h200-anyrecord/lease.sh poll 540    # later calls: wait, collect
# Each call leaves one file, $OUT/proof.tgz (the device returns at most 8 files), and prints the state.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree W=/tmp/anyrecord D=/tmp/diff1

start() {
  rm -rf "$T" && cp -a "$REPO" "$T"
  # the report stage's chart library is not on the device's image: carried as the lock's wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$T"/.devcarry/whl/*.whl
  export PYTHONPATH=/tmp/site
  (cd "$T" && DOCS="$T/.devcarry/docs-v1" W="$W" bash docs/device-runs/2026-12-01-h200-anyrecord/run.sh start)
  mkdir -p "$D"
  (cd "$T" && CUDA_VISIBLE_DEVICES=0 PYTHONPATH="$T/pipeline/runs/fa3_standin:$T:/tmp/site" setsid nohup \
    python3 -m torch.distributed.run --standalone --nproc_per_node=1 benchmarks/device_diff.py --out "$D" \
    > "$D/stdout.txt" 2>&1 < /dev/null; echo "exit $?" > "$D/exit") &
}

collect() {  # what is done so far, as one tarball
  local c=/tmp/collect
  rm -rf "$c" && mkdir -p "$c"
  (cd "$T" && OUT="$c" W="$W" bash docs/device-runs/2026-12-01-h200-anyrecord/run.sh collect)
  cp -r "$D" "$c/device-diff" 2>/dev/null
  tar -czf "$OUT/proof.tgz" -C "$c" .
  ls "$W"/*.finished 2>/dev/null; cat "$D/exit" 2>/dev/null; tail -n 3 "$D/stdout.txt" 2>/dev/null
}

wait_s() {  # up to N seconds, sooner when everything has finished
  for _ in $(seq $(( $1 / 5 ))); do
    [ -f "$W/ALL_DONE" ] && [ -f "$D/exit" ] && return
    sleep 5
  done
}

case "${1:-}" in
  start) start; wait_s "${2:-540}"; collect ;;
  poll) wait_s "${2:-540}"; collect ;;
  *) echo "usage: lease.sh start|poll [SECONDS]" >&2; exit 2 ;;
esac
