#!/usr/bin/env bash
# The fourth lease of 2026-12-02 on nvidia-h200 (issue 35). Runs from a private copy of the tree (/tmp/tree),
# because each device call re-syncs the working tree under a running script.
#
#   bash docs/device-runs/2026-12-02-h200-history-4/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-02-h200-history-4/lease.sh poll 540    # later calls: wait, collect
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree W=/tmp/history
S=docs/device-runs/2026-12-02-h200-history-4

start() {
  rm -rf "$T" && cp -a "$REPO" "$T"
  # the report stage's chart library is not on the device's image: carried as the lock's wheels
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$T"/.devcarry/whl/*.whl
  (cd "$T" && PYTHONPATH=/tmp/site W="$W" bash "$S/run.sh" start)
}

wait_s() {  # up to N seconds, sooner when everything has finished
  for _ in $(seq $(( $1 / 5 ))); do [ -f "$W/ALL_DONE" ] && return; sleep 5; done
}

collect() { (cd "$T" && W="$W" bash "$S/run.sh" collect); }

case "${1:-}" in
  start) start; wait_s "${2:-540}"; collect ;;
  poll) wait_s "${2:-540}"; collect ;;
  *) echo "usage: lease.sh start|poll [SECONDS]" >&2; exit 2 ;;
esac
