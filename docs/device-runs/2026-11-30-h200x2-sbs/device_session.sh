#!/usr/bin/env bash
# Issue 15's (and 13's) GPU measurements in one lease of an nvidia-h200-x2 node, ordered so that the compile
# caches built by the first runs serve the measured ones. Started detached, polled across device calls:
#
#   setsid nohup bash benchmarks/device_session.sh /tmp/ds > /tmp/ds.log 2>&1 < /dev/null &
#   tar -czf $OUT/ds.tgz -C /tmp ds                                  (each poll: whatever has finished)
#
# Phase A  GPU 0: the record's program, world size 1, cold (compiles ~10 min), then its 80 measured steps.
#          GPU 1 meanwhile, inductor limited to 8 compile threads so GPU 0's process keeps its CPU: train/ at
#          world size 1 cold, the FA3 stand-in's numerics, device_diff at world size 1, a profile of train/.
# Phase B  GPU 0: train/ at world size 1, warm: the same GPU as the record's run, one after the other.
# Phase C  both GPUs: device_diff at world size 2.
# Phase D  both GPUs: world size 2, 3 runs of each program alternating, 40 steps (ratio and loss parity).
# Every record run executes one program file (/tmp/sbs-record/train_gpt.py); the shards are docs-v1
# (.devcarry/docs-v1, carried). The bf16 matmul rate is measured once at the start and once at the end.
set -uo pipefail
R=${1:?usage: device_session.sh RESULTS_DIR}
mkdir -p "$R"
SRC=$(pwd)
SNAP=/tmp/ds-repo  # a private copy: later device calls re-sync the working tree under this script's feet
rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -r "$SRC"/. "$SNAP"/ && cd "$SNAP"
DATA=$SNAP/.devcarry/docs-v1
export PYTHONUNBUFFERED=1
note() { echo "$(date -u +%H:%M:%S) $*" >> "$R/progress.txt"; }
sbs() { python3 benchmarks/sidebyside.py --data "$DATA" --program-dir /tmp/sbs-record --budget-s 1500 \
          --tflops "$TFLOPS" "$@"; }
diff_run() {  # world size, GPUs, out
  CUDA_VISIBLE_DEVICES=$2 PYTHONPATH=$SNAP/pipeline/runs/fa3_standin:$SNAP \
    python3 -m torch.distributed.run --standalone --nproc_per_node="$1" benchmarks/device_diff.py --out "$3"
}

note start; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$R/gpus.csv"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-start.json"
TFLOPS=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['tflops'], 1))" "$R/matmul-start.json")
note "matmul $TFLOPS TFLOP/s"

( sbs --world-sizes 1 --only record --first-gpu 0 --out "$R/a-record-ws1" > "$R/a-record-ws1.txt" 2>&1
  note "A record ws1 done" ) &
( export TORCHINDUCTOR_COMPILE_THREADS=8
  sbs --world-sizes 1 --only native --first-gpu 1 --out "$R/a-native-ws1" > "$R/a-native-ws1.txt" 2>&1
  note "A native ws1 (cold) done"
  CUDA_VISIBLE_DEVICES=1 python3 benchmarks/standin_check.py --out "$R/standin" > "$R/standin.txt" 2>&1
  note "A standin check exit $?"
  diff_run 1 1 "$R/diff-ws1" > "$R/diff-ws1.txt" 2>&1; note "A diff ws1 exit $?"
  CUDA_VISIBLE_DEVICES=1 python3 -m torch.distributed.run --standalone --nproc_per_node=1 -m train --preset record \
    --train-files "$DATA/fineweb_train_*.bin" --val-files "$DATA/fineweb_val_*.bin" --set scheduled_steps=12 \
    --set extension_steps=0 --set val_tokens=524288 --set val_batch_tokens=524288 --set data_cycle=true \
    --log-file "$R/profile/log.txt" --metrics-file "$R/profile/metrics.jsonl" --profile "$R/profile" \
    > "$R/profile.txt" 2>&1; note "A profile exit $?" ) &
wait
note "phase A done"
sbs --world-sizes 1 --only native --first-gpu 0 --out "$R/b-native-ws1" > "$R/b-native-ws1.txt" 2>&1
note "B native ws1 (GPU 0, warm) done"
diff_run 2 0,1 "$R/diff-ws2" > "$R/diff-ws2.txt" 2>&1; note "C diff ws2 exit $?"
sbs --world-sizes 2 --repeat 3 --steps 40 --out "$R/d-ws2" > "$R/d-ws2.txt" 2>&1
note "D ws2 done"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-end.json"
python3 benchmarks/sidebyside.py --summarize "$R/a-record-ws1" "$R/b-native-ws1" --out "$R/ws1" > /dev/null 2>&1
python3 benchmarks/sidebyside.py --summarize "$R/d-ws2" --out "$R/ws2" > /dev/null 2>&1
note all-done
