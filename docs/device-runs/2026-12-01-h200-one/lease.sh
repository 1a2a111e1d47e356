#!/usr/bin/env bash
# One lease on nvidia-h200 for issue 29: benchmarks/device_session.sh's phase `one` (speed 3 + 3, parity 5 + 5 on
# fresh seeds, startups), detached, polled across device calls. The default's GPU differential passed in the
# lease of docs/device-runs/2026-12-01-h200-anyrecord (100 of 100), so it is not run again (ONE_DIFF=0).
#
#   bash docs/device-runs/2026-12-01-h200-one/lease.sh start 540   # first call: start, wait, collect
#   bash docs/device-runs/2026-12-01-h200-one/lease.sh poll 540    # later calls: wait, collect
# Each call leaves $OUT/one.tgz (everything so far but compile caches and cache artifacts) and prints progress.
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../../.." && pwd)
T=/tmp/tree R=/tmp/ds

start() {
  rm -rf "$T" "$R" && cp -a "$REPO" "$T"
  (cd "$T" && ONE_DIFF=0 ONE_BUDGET_S=${ONE_BUDGET_S:-1560} setsid nohup bash benchmarks/device_session.sh "$R" one \
    > /tmp/ds.log 2>&1 < /dev/null &)
}

collect() {
  ls -l "$R"/artifacts-*.bin 2> /dev/null
  tar -czf "$OUT/one.tgz" --exclude=cache --exclude='artifacts-*.bin' -C /tmp ds ds.log
  tail -n 12 "$R/progress.txt" 2> /dev/null
}

wait_s() {  # up to N seconds, sooner once the session is done
  for _ in $(seq $(( $1 / 5 ))); do
    grep -qs all-done "$R/progress.txt" && return
    sleep 5
  done
}

case ${1:?start or poll} in
  start) start; wait_s "${2:-540}"; collect ;;
  poll) wait_s "${2:-540}"; collect ;;
esac
