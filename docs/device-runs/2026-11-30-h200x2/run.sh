#!/usr/bin/env bash
# What ran on the nvidia-h200-x2 device for issue 13's proof (started detached with setsid, polled across
# calls): `repro reproduce --smoke 40 --runs 2` of the record's program on GPU 0 and of the native trainer on
# GPU 1, at the same time, host runtime, on docs-v1 (manifests/datasets/docs-v1-x4.yaml).
#   usage: run.sh REPO OUT            REPO: a clean export of the commit under test; OUT: results folder
set -uo pipefail
REPO=$1; OUT=$2; W=/tmp/proof
mkdir -p "$OUT" "$W/src"
cd "$REPO"
# docs-v1's shards under the names docs-v1-x4 locks (the train shard four times); fetched from this folder
# and verified against the lock like any other source.
for i in 1 2 3 4; do ln -sf "$REPO/.devcarry/docs-v1/fineweb_train_000001.bin" "$W/src/fineweb_train_00000$i.bin"; done
ln -sf "$REPO/.devcarry/docs-v1/fineweb_val_000000.bin" "$W/src/fineweb_val_000000.bin"
LOG=$(ls "$REPO"/.devcarry/record-logs/*.txt | head -1)
common=(reproduce --runtime host --smoke 40 --smoke-val-tokens 524288 --runs 2 --nproc 1 --dataset docs-v1-x4
        --data-source "$W/src" --keep-going)
run() {  # name gpu args...
  local name=$1 gpu=$2; shift 2
  ( export CUDA_VISIBLE_DEVICES=$gpu
    date +%s > "$OUT/$name.started"; python3 -m pipeline --root "$W/$name" "${common[@]}" "$@" > "$OUT/$name.out" 2> "$OUT/$name.err"
    echo "exit $? at $(date +%s)" >> "$OUT/$name.out"
    b=$(ls "$W/$name"/bundles/*.tar.gz 2>/dev/null | head -1)
    if [ -n "$b" ]; then
      python3 -m pipeline --root "$W/$name" bundle verify "$b" > "$OUT/$name.bundle-verify.txt" 2>&1
      python3 -m pipeline --root "$W/$name" bundle show "$b" > "$OUT/$name.bundle-show.txt" 2>&1
      cp "$b" "$OUT/"
    fi
    mkdir -p "$OUT/$name-work"
    cp -r "$W/$name"/work/*/report "$OUT/$name-work/" 2>/dev/null
    for r in "$W/$name"/work/*/runs/*/*/; do
      d="$OUT/$name-work/runs/$(basename "$r")"; mkdir -p "$d"
      cp "$r"/run.yaml "$r"/status "$r"/log.txt "$r"/stdout.txt "$r"/metrics.jsonl "$r"/preflight.json "$d"/ 2>/dev/null
    done
    echo done > "$OUT/$name.finished" ) &
}
run record 0 --trainer record --program-source "$LOG"
run native 1 --trainer native --preset record
wait
echo all-done > "$OUT/ALL_DONE"
