#!/usr/bin/env bash
# Issue 15's (and 13's) GPU measurements in one lease of an nvidia-h200-x2 node, ordered so that the compile
# caches built by the first runs serve the measured ones. Started detached, polled across device calls:
#
#   setsid nohup bash benchmarks/device_session.sh /tmp/ds ws2 ws1 > /tmp/ds.log 2>&1 < /dev/null &
#   tar -czf $OUT/ds.tgz --exclude=cache -C /tmp ds; cp /tmp/ds/cache/part-* $OUT/ 2>/dev/null   (each poll)
#   next lease: copy the returned part-* files into .devcarry/inductor-cache/ and carry that folder too
#
# Phases, run in the order given (default: ws1 ws2):
# ws1  GPU 0: the record's program at world size 1, cold (compiles 10-12 min), then its 80 measured steps.
#      GPU 1 meanwhile, Inductor limited to 8 compile threads so GPU 0's process keeps its CPU: train/ at world
#      size 1 cold, the FA3 stand-in's numerics, device_diff at world size 1, a profile of train/.
#      Then GPU 0: train/ at world size 1, warm: the same GPU as the record's run, one after the other; then
#      train/ with fused_loss=true (train/loss.py) on GPU 0, and device_diff with it on GPU 1 in the first part.
# ws2  both GPUs: 3 x (record, native) alternating, 40 steps (ratio, loss parity), native with fused_loss when
#      train/xent_triton.py's GPU check passes (WS2_VARIANT=unfused:fused_loss=false adds a third program);
#      during the first record run's cold compile: the loss kernels' timing, native primed, device_diff at
#      world size 2.
# Every record run executes one program file (/tmp/sbs-record/train_gpt.py); the shards are docs-v1
# (.devcarry/docs-v1, carried). The bf16 matmul rate is measured once at the start and once at the end.
# Compile caches across leases: after each phase the Inductor/Triton cache is packed into RESULTS/cache/
# (parts of 15 MB, only when it is at most 40 MB compressed, so it can come back through $OUT beside ds.tgz and
# be carried again); a later lease that carries .devcarry/inductor-cache/ starts from it. A run's "cold" startup
# is then not cold: progress.txt says when a cache was restored.
# Measured on 2026-11-30: phase ws1 took 19.5 min (docs/device-runs/2026-11-30-h200x2-sbs).
set -uo pipefail
R=${1:?usage: device_session.sh RESULTS_DIR [ws1] [ws2]}
shift
PHASES=${*:-ws1 ws2}
mkdir -p "$R"
SRC=$(pwd)
SNAP=/tmp/ds-repo  # a private copy: later device calls re-sync the working tree under this script's feet
rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -r "$SRC"/. "$SNAP"/ && cd "$SNAP"
DATA=$SNAP/.devcarry/docs-v1
export PYTHONUNBUFFERED=1
note() { echo "$(date -u +%H:%M:%S) $*" >> "$R/progress.txt"; }
CACHE=${TORCHINDUCTOR_CACHE_DIR:-/tmp/torchinductor_$(whoami)}
restore_cache() {
  if ls "$SNAP"/.devcarry/inductor-cache/part-* > /dev/null 2>&1; then
    mkdir -p "$CACHE" && cat "$SNAP"/.devcarry/inductor-cache/part-* | tar -xz -C "$CACHE" \
      && note "compile cache restored from .devcarry/inductor-cache ($(du -sh "$CACHE" | cut -f1))"
  fi
}
pack_cache() {
  rm -rf "$R/cache" "$R/cache.tgz" && mkdir -p "$R/cache"
  tar -czf "$R/cache.tgz" -C "$CACHE" . 2> /dev/null
  local size; size=$(stat -c %s "$R/cache.tgz")
  if [ "$size" -le 41943040 ]; then
    split -b 15m "$R/cache.tgz" "$R/cache/part-"; note "compile cache packed: $size bytes"
  else
    note "compile cache not packed: $size bytes compressed (over 40 MB)"
  fi
  rm -f "$R/cache.tgz"
}
sbs() { python3 benchmarks/sidebyside.py --data "$DATA" --program-dir /tmp/sbs-record --budget-s "${SBS_BUDGET_S:-1440}" \
          --matmul-file "$R/matmul-start.json" "$@"; }
diff_run() {  # world size, GPUs, out, extra device_diff options
  local n=$1 gpus=$2 out=$3; shift 3
  CUDA_VISIBLE_DEVICES=$gpus PYTHONPATH=$SNAP/pipeline/runs/fa3_standin:$SNAP \
    python3 -m torch.distributed.run --standalone --nproc_per_node="$n" benchmarks/device_diff.py --out "$out" "$@"
}

phase_ws1() {
  ( sbs --world-sizes 1 --only record --first-gpu 0 --out "$R/a-record-ws1" > "$R/a-record-ws1.txt" 2>&1
    note "ws1: record (GPU 0, cold) done" ) &
  ( export TORCHINDUCTOR_COMPILE_THREADS=8
    sbs --world-sizes 1 --only native --first-gpu 1 --out "$R/a-native-ws1" > "$R/a-native-ws1.txt" 2>&1
    note "ws1: native (GPU 1, cold) done"
    CUDA_VISIBLE_DEVICES=1 python3 benchmarks/standin_check.py --out "$R/standin" > "$R/standin.txt" 2>&1
    note "ws1: standin check exit $?"
    diff_run 1 1 "$R/diff-ws1" > "$R/diff-ws1.txt" 2>&1; note "ws1: diff exit $?"
    diff_run 1 1 "$R/diff-ws1-fused" --set fused_loss=true > "$R/diff-ws1-fused.txt" 2>&1
    note "ws1: diff (fused_loss) exit $?"
    CUDA_VISIBLE_DEVICES=1 python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m train \
      --preset record --train-files "$DATA/fineweb_train_*.bin" --val-files "$DATA/fineweb_val_*.bin" \
      --set scheduled_steps=12 --set extension_steps=0 --set val_tokens=524288 --set val_batch_tokens=524288 \
      --set data_cycle=true --log-file "$R/profile/log.txt" --metrics-file "$R/profile/metrics.jsonl" \
      --profile "$R/profile" > "$R/profile.txt" 2>&1; note "ws1: profile exit $?" ) &
  wait
  sbs --world-sizes 1 --only native --first-gpu 0 --out "$R/b-native-ws1" > "$R/b-native-ws1.txt" 2>&1
  note "ws1: native (GPU 0, warm) done"
  sbs --world-sizes 1 --only native --first-gpu 0 --native-set fused_loss=true --out "$R/c-native-fused-ws1" \
    > "$R/c-native-fused-ws1.txt" 2>&1
  note "ws1: native with fused_loss (GPU 0) done"
  python3 benchmarks/sidebyside.py --summarize "$R/a-record-ws1" "$R/b-native-ws1" --out "$R/ws1" > /dev/null 2>&1
  python3 benchmarks/sidebyside.py --summarize "$R/a-record-ws1" "$R/c-native-fused-ws1" --out "$R/ws1-fused" \
    > /dev/null 2>&1
}

phase_ws2() {
  # The loss kernels' GPU check first (seconds): native runs with fused_loss when it passes, else without.
  local natives=(--native-set fused_loss=true)
  CUDA_VISIBLE_DEVICES=0 python3 -m train.xent_triton > "$R/xent-check.txt" 2>&1 \
    || { natives=(--native-set fused_loss=false); note "ws2: xent_triton check FAILED: native without fused_loss"; }
  note "ws2: natives ${natives[*]}"
  # During the first record run's cold compile (8 compile threads, so it keeps the CPU): the kernels' timing
  # against the record's compiled loss, native primed (its measured runs start warm), device_diff at world
  # size 2. Meanwhile 3 x (record, native), alternating.
  ( export TORCHINDUCTOR_COMPILE_THREADS=8
    CUDA_VISIBLE_DEVICES=1 python3 -m train.xent_triton --time > "$R/xent.txt" 2>&1
    note "ws2: xent_triton timing exit $?"
    sbs --world-sizes 2 --steps 40 --only native "${natives[@]}" --out "$R/prime-native" \
      > "$R/prime-native.txt" 2>&1; note "ws2: native primed"
    diff_run 2 0,1 "$R/diff-ws2" --set "${natives[1]}" > "$R/diff-ws2.txt" 2>&1; note "ws2: diff exit $?"
  ) &
  sbs --world-sizes 2 --repeat 3 --steps 40 "${natives[@]}" ${WS2_VARIANT:+--variant "$WS2_VARIANT"} \
    --out "$R/d-ws2" > "$R/d-ws2.txt" 2>&1
  note "ws2: runs done"
  wait
}

note "start: $PHASES"; restore_cache; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$R/gpus.csv"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-start.json"
note "matmul $(cat "$R/matmul-start.json")"
for phase in $PHASES; do
  case $phase in
    ws1) phase_ws1; pack_cache ;;
    ws2) phase_ws2 ;;  # the record's world-size-2 cache is over 40 MB
    *) note "unknown phase $phase (ws1, ws2)" ;;
  esac
done
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-end.json"
note all-done
