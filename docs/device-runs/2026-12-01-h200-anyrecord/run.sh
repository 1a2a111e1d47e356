#!/usr/bin/env bash
# Issue 27's device proof on nvidia-h200 (one H200, torch 2.11 + Triton 3.6 system-wide, no network, no FA3, no
# Docker): `repro reproduce --smoke 40` of three records of three eras at the same time on the one GPU, host
# runtime, the machine's own Python, docs-v1 data. A run longer than one device call, so it starts detached:
#
#   bash docs/device-runs/2026-12-01-h200-anyrecord/run.sh start     # first call: returns at once
#   bash docs/device-runs/2026-12-01-h200-anyrecord/run.sh collect   # each later call: what is done -> $OUT
#
# DOCS (default shared/data/docs-v1): the folder holding docs-v1's fineweb_train_000001.bin and
# fineweb_val_000000.bin, carried into the tree. W (default /tmp/anyrecord): scratch, kept while the machine is warm.
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
DOCS=${DOCS:-$REPO/shared/data/docs-v1}
W=${W:-/tmp/anyrecord}
F=$REPO/tests/fixtures
# name | record | its program, from the tree (a pinned log or program: sha256-checked against the manifest)
RECORDS=(
  "fp8down|2026-07-17_FP8DownProjection|$F/record-logs/2026-07-17_FP8DownProjection/11cb620c-daaf-4e85-83fc-258a5eb7ba09.txt"
  "shortwindow|2026-02-10_ShortWindow|$F/record-program/2026-02-10_ShortWindow/Short-Window_1_1.program.txt"
  "muon|2025-09-23_MuonCustomSizing|$F/record-program/2025-09-23_MuonCustomSizing/train_gpt.py"
)

one() {  # name record source: one smoke reproduction, then its bundle checked offline
  local name=$1 record=$2 source=$3 root=$W/$1
  date +%s > "$W/$name.started"
  CUDA_VISIBLE_DEVICES=0 python3 -m pipeline --root "$root" reproduce --record "$record" --runtime host \
    --python-env system --smoke 40 --smoke-val-tokens 524288 --runs 1 --nproc 1 --dataset docs-v1-x4 \
    --data-source "$W/src" --program-source "$source" --keep-going > "$W/$name.out" 2> "$W/$name.err"
  echo "exit $? at $(date +%s)" >> "$W/$name.out"
  local bundle
  bundle=$(ls "$root"/bundles/*.tar.gz 2>/dev/null | head -1)
  if [ -n "$bundle" ]; then
    python3 -m pipeline --root "$root" bundle verify "$bundle" > "$W/$name.bundle-verify.txt" 2>&1
    python3 -m pipeline --root "$root" bundle show "$bundle" > "$W/$name.bundle-show.txt" 2>&1
  fi
  date +%s > "$W/$name.finished"
}

all() {
  cd "$REPO" || exit 1  # python3 -m pipeline: this checkout's repro
  mkdir -p "$W/src"
  # docs-v1 under the names docs-v1-x4 locks (its train shard four times); `repro data fetch` copies and verifies them
  for i in 1 2 3 4; do ln -sf "$DOCS/fineweb_train_000001.bin" "$W/src/fineweb_train_00000$i.bin"; done
  ln -sf "$DOCS/fineweb_val_000000.bin" "$W/src/fineweb_val_000000.bin"
  nvidia-smi > "$W/nvidia-smi.txt" 2>&1
  python3 -c "import sys, torch, triton; print(sys.version.split()[0], torch.__version__, triton.__version__)" \
    > "$W/versions.txt" 2>&1
  for entry in "${RECORDS[@]}"; do
    IFS='|' read -r name record source <<< "$entry"
    one "$name" "$record" "$source" &
  done
  wait
  date +%s > "$W/ALL_DONE"
}

collect() {  # everything finished so far into $OUT (bundles, verify/show output, reports, run directories)
  local out=${OUT:?collect writes into \$OUT}
  cp "$W"/*.txt "$W"/*.out "$W"/*.err "$W"/*.started "$W"/*.finished "$W"/ALL_DONE "$out"/ 2>/dev/null
  for entry in "${RECORDS[@]}"; do
    IFS='|' read -r name _ _ <<< "$entry"
    [ -f "$W/$name.finished" ] || { echo "$name: running since $(cat "$W/$name.started" 2>/dev/null)"; continue; }
    echo "$name: finished; $(tail -n 1 "$W/$name.out")"
    mkdir -p "$out/$name"
    cp "$W/$name"/bundles/*.tar.gz "$out/$name/" 2>/dev/null
    cp -r "$W/$name"/work/*/report "$out/$name/" 2>/dev/null
    for run in "$W/$name"/work/*/runs/*/*/; do
      mkdir -p "$out/$name/runs/$(basename "$run")"
      cp "$run"/run.yaml "$run"/status "$run"/log.txt "$run"/metrics.jsonl "$run"/preflight.json \
        "$out/$name/runs/$(basename "$run")/" 2>/dev/null
      tail -c 200000 "$run/stdout.txt" > "$out/$name/runs/$(basename "$run")/stdout.tail.txt" 2>/dev/null
    done
  done
}

case "${1:-}" in
  start) [ -f "$DOCS/fineweb_train_000001.bin" ] || { echo "no docs-v1 shards in $DOCS (set DOCS=)" >&2; exit 4; }
         mkdir -p "$W"; setsid nohup bash "$0" _all > "$W/driver.log" 2>&1 < /dev/null & echo "started; W=$W" ;;
  _all) all ;;
  collect) collect ;;
  *) echo "usage: run.sh start | collect" >&2; exit 2 ;;
esac
