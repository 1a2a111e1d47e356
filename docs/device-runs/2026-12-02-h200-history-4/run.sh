#!/usr/bin/env bash
# Issue 35's fourth device proof on nvidia-h200 (one H200, torch 2.11 + Triton 3.6 system-wide, no network, no FA3,
# no Docker): `repro reproduce --smoke 20` of the records the third lease left unproven, on the one GPU, host runtime,
# the machine's own Python: 2026-07-17 with its FP8 scales handed aligned (pipeline/runs/fp8_scales.py, new since),
# 2025-11-29 without two 53 GB programs beside it, and a track-2 record that runs on one GPU. No program flag (each
# program comes from the record's pinned runs in the workspace's log cache, as `repro records fetch-logs NAME --from
# DIR` leaves them; prep.py), no --smoke-val-tokens (docs-v1-smoke). At most HEAVY runs train at once: records.txt
# lists each record with `quick` (expected to stop before training: it starts at once) or `heavy` (waits for a free
# slot, in the file's order; none starts after START_BY seconds).
#
#   bash docs/device-runs/2026-12-02-h200-history-4/run.sh start     # first call: returns at once
#   bash docs/device-runs/2026-12-02-h200-history-4/run.sh collect   # each later call: what is done -> $OUT
#
# DOCS: the folder holding docs-v1's two shards; W (default /tmp/history): scratch, kept while the machine is warm.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DOCS=${DOCS:-$REPO/.devcarry/docs-v1}
W=${W:-/tmp/history}
HEAVY=${HEAVY:-3}
START_BY=${START_BY:-420}
export REPRO_REGISTRY=$REPO/.devcarry/registry  # prep.py: upstream's whole history, freshly imported
FLAGS=(--runtime host --python-env system --smoke 20 --runs 1 --nproc 1 --dataset docs-v1-smoke)
RECORDS=()
while read -r name kind; do [ -n "$name" ] && RECORDS+=("$name"); done < "$HERE/records.txt"

one() {  # record: its plan, one smoke reproduction, then its bundle checked offline
  local record=$1 root=$W/$1
  date +%s > "$W/$record.started"
  mkdir -p "$root/cache/record-logs"
  cp -r "$REPO/.devcarry/history/$record" "$root/cache/record-logs/$record"
  python3 -m pipeline --root "$root" reproduce --record "$record" "${FLAGS[@]}" --data-source "$W/src" --plan \
    > "$W/$record.plan.txt" 2>&1
  echo "exit $?" >> "$W/$record.plan.txt"
  CUDA_VISIBLE_DEVICES=0 python3 -m pipeline --root "$root" reproduce --record "$record" "${FLAGS[@]}" \
    --data-source "$W/src" --keep-going > "$W/$record.out" 2> "$W/$record.err"
  echo "exit $? at $(date +%s)" >> "$W/$record.out"
  local bundle
  bundle=$(ls "$root"/bundles/*.tar.gz 2>/dev/null | head -1)
  if [ -n "$bundle" ]; then
    python3 -m pipeline --root "$root" bundle verify "$bundle" > "$W/$record.bundle-verify.txt" 2>&1
    echo "exit $?" >> "$W/$record.bundle-verify.txt"
  fi
  date +%s > "$W/$record.finished"
}

all() {
  cd "$REPO" || exit 1  # python3 -m pipeline: this checkout's repro
  local t0 mon
  t0=$(date +%s)
  python3 tools/docs_v1_smoke.py "$DOCS" "$W/src" > "$W/docs-v1-smoke.txt" 2>&1
  nvidia-smi > "$W/nvidia-smi.txt" 2>&1
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" \
    > "$W/versions.txt" 2>&1
  nvidia-smi --query-gpu=timestamp,memory.used,utilization.gpu --format=csv -l 15 > "$W/gpu-memory.csv" 2>&1 &
  mon=$!
  local heavy=() alive
  while read -r name kind; do
    [ -n "$name" ] || continue
    if [ "$kind" = heavy ]; then
      while :; do
        alive=0; for p in "${heavy[@]}"; do kill -0 "$p" 2>/dev/null && alive=$((alive + 1)); done
        [ "$alive" -lt "$HEAVY" ] && break; sleep 5
      done
      if [ $(( $(date +%s) - t0 )) -gt "$START_BY" ]; then echo "$name: not started (past START_BY)" > "$W/$name.skipped"; continue; fi
      one "$name" & heavy+=($!)
    else
      one "$name" &  # expected to stop before training: no slot
    fi
  done < "$HERE/records.txt"
  wait $(jobs -rp | grep -v "^$mon$")
  kill "$mon"
  date +%s > "$W/ALL_DONE"
}

collect() {  # everything finished so far into $OUT/proof.tgz
  local c=/tmp/collect
  rm -rf "$c" && mkdir -p "$c"
  cp "$W"/*.txt "$W"/*.csv "$W"/*.out "$W"/*.err "$W"/*.started "$W"/*.finished "$W"/*.skipped "$W"/ALL_DONE \
    "$c"/ 2>/dev/null
  for record in "${RECORDS[@]}"; do
    [ -f "$W/$record.finished" ] || { echo "$record: running since $(cat "$W/$record.started" 2>/dev/null)"; \
      tail -n 2 "$W/$record.err" 2>/dev/null; continue; }
    echo "$record: finished; $(tail -n 1 "$W/$record.out")"
    mkdir -p "$c/$record"
    cp "$W/$record"/bundles/*.tar.gz "$c/$record/" 2>/dev/null
    cp "$W/$record"/work/*/report/report.md "$c/$record/" 2>/dev/null
    for run in "$W/$record"/work/*/runs/*/*/; do
      [ -d "$run" ] || continue
      mkdir -p "$c/$record/runs/$(basename "$run")"
      cp "$run"/run.yaml "$run"/status "$run"/log.txt "$run"/metrics.jsonl "$run"/preflight.json \
        "$c/$record/runs/$(basename "$run")/" 2>/dev/null
      tail -c 100000 "$run/stdout.txt" > "$c/$record/runs/$(basename "$run")/stdout.tail.txt" 2>/dev/null
    done
  done
  tar -czf "${OUT:?}/proof.tgz" -C "$c" .
}

case "${1:-}" in
  start) [ -f "$DOCS/fineweb_train_000001.bin" ] || { echo "no docs-v1 shards in $DOCS (set DOCS=)" >&2; exit 4; }
         mkdir -p "$W"; setsid nohup bash "$0" _all > "$W/driver.log" 2>&1 < /dev/null & echo "started; W=$W" ;;
  _all) all ;;
  collect) collect ;;
  *) echo "usage: run.sh start | collect" >&2; exit 2 ;;
esac
