#!/usr/bin/env bash
# Issue 15's GPU measurements in one lease of an nvidia-h200-x2 node, ordered so that the work that needs no
# quiet GPU (checks, timing, priming compiles) overlaps the record's cold compile (10-12 min).
# Started detached, polled across device calls (a machine left idle for 30 s is handed back: poll at once):
#
#   setsid nohup bash benchmarks/device_session.sh /tmp/ds ws2 > /tmp/ds.log 2>&1 < /dev/null &
#   tar -czf $OUT/ds.tgz --exclude=cache -C /tmp ds ds.log; cp /tmp/ds/cache/part-* $OUT/ 2>/dev/null   (each poll)
#   next lease: copy the returned part-* files into .devcarry/inductor-cache/ and carry that folder too
#
# Phases, run in the order given (default: ws2 ws1): diffN runs benchmarks/device_diff.py alone at world size N
# with fused_loss (6.6 min cold at N = 2 beside the record's compile; 61 and 78 s at N = 2 and 1 after a ws2
# phase). Phase wsN (ws1: GPU 0, its helpers on GPU 1, or GPU 0 on a one-GPU node; ws2: both GPUs):
#   1. train/xent_triton.py's GPU check (benchmarks/xent_check.py, seconds): native runs with fused_loss if it
#      passes, else without;
#   2. in the background, with 8 compile threads so the record's compile keeps the CPU: the loss kernels'
#      timing against the record's compiled loss (and by pass, beside one read of the logits), DistAdam's step
#      eager against compiled
#      (benchmarks/adam_time.py), native and each variant primed ($PRIME_STEPS steps: their measured runs start
#      warm). A prime is skipped once the record's first run has printed its step 0 (its timed steps follow), so
#      no helper shares a GPU with a timed run; progress.txt's times show it;
#   3. meanwhile sidebyside: 3 x (record, native) alternating, then the variants' runs in turn in the budget left
#      (--variants-last: the parity pairs are never the runs the budget cuts), --steps $STEPS (default 40),
#      --seed 1 so run i of every program starts from seed i (on 2026-11-30 train/ seeded nothing and drew
#      its weights on the GPU, from CUDA's fixed default seed: its runs shared one initialisation while the
#      record's, drawn on the CPU, did not, and the loss comparison measured that one draw).
# Every record run executes one program file (/tmp/sbs-record/train_gpt.py); the shards are docs-v1
# (.devcarry/docs-v1, unpacked by benchmarks/lease.sh from the carried .devcarry/docs-v1.txz). The bf16 matmul
# rate is measured once at the start and once at the end.
# SBS_BUDGET_S (default 1440): sidebyside starts no run after that many seconds; set it from the lease's
# budget_left_s less about two minutes.
# Compile caches across leases: after each phase the Inductor/Triton cache is packed into RESULTS/cache/ in
# parts of 15 MB, only when it is at most 32 MB compressed: with docs-v1 (23 MB) and the tree (5 MB) it stays
# under the 64 MiB one call carries. The parts come back through $OUT beside ds.tgz; a later lease that carries
# .devcarry/inductor-cache/ starts from them, and progress.txt says so (its "cold" startups are then warm).
# Measured on 2026-11-30: phase ws2 20.0 min with the variant (docs/device-runs/2026-11-30-h200x2-ws2-seeded), the
# record's cold compile 9.4 min of it; 20.7 min without the variant but with device_diff in the background; phase
# ws1 19.8 min with the variant (docs/device-runs/2026-11-30-h200x2-ws1-kernels), the record's cold compile 8.1 min.
# device_diff cold at world size 2 after a ws1 phase did not finish in 270 s: give it its own lease's start.
#
# Phase `one` (issues 29 and 41, one H200, every number in one lease): its time budget is planned by
# benchmarks/session_plan.py (the lease's limits, the measured run times, the rule every item is gated by, what is
# kept by priority: speed 3 + 3, then parity 5 + 5, then the startup options), and
#   DRY_RUN=1 bash benchmarks/device_session.sh RESULTS one     prints that plan with its times and what it drops,
#                                                               and exits (no GPU, nothing copied)
# The session refuses to start when speed 3 + 3 does not fit (exit 3). ONE_BUDGET_S (default the plan's budget:
# one lease, 1,800 s of device time (LEASE_DEVICE_S: what was left) held 29 minutes at most, less what the lease
# held before the session started, LEASE_HELD_S where benchmarks/lease.sh measured it, else the slowest start
# measured, and the collection) is the session's clock. The plan is warm (no cold compile) with ONE_WARM=1 or,
# unless ONE_WARM=0, when .devcarry/artifacts-<GPU>/ holds every part of the compile artifacts an earlier session on
# this GPU's kind packed (pack_artifacts: xz, 16 MB parts, SHA256SUMS, PARTS.sha256; brought back by lease.sh's polls,
# carried by the calls benchmarks/carry_calls.py lists): they are loaded into the caches before wave 1, each checked
# by its sha256. Cold, the default budget holds speed 3 + 3 and parity 5 + 5 on an H200 (the startup options are
# dropped: the record's cold compile alone takes half the lease); an H100 holds the whole table warm, startup options
# too (cold, speed where the lease had held at most 188 s at the start, parity at most 118 s). A cold session packs its
# artifacts in wave 1, beside the record's second run, so that they leave the lease whatever it holds after.
# Started and polled by benchmarks/lease.sh:
#   LEASE_DEVICE_S=<status's budget_left_s> LEASE_T0=<date +%s just before the call> \
#     bash benchmarks/lease.sh start 540 bash benchmarks/device_session.sh /tmp/lease/ds one  (then ... poll 540)
#   wave 1, nothing timed (the GPU shared; the record's cold compile, ~12 min, sets its length): the record's
#      program from the start, then, after the loss kernels' GPU check, native; 80-step schedule, fresh seed
#      ONE_SEED (default 101) and, when the plan keeps parity, a second run of each on ONE_SEED+1, their losses
#      for parity (sidebyside --shared-gpu keeps their step times out of the speed table). Cold, native's second
#      run always runs (inside the record's compile), and the record's is decided at its run 1's first timed
#      step, with the clock left then (session_plan.py has --at-first-step; never at speed's cost). The
#      record runs with the world-size-8 Muon patch (benchmarks/record_patch.py MUON_SPLIT). The first run of each
#      saves torch.compiler's cache artifacts (benchmarks/compile_artifacts). ONE_DIFF=1 adds device_diff.py at
#      world size 1 beside them (not in the plan). The record's run 2 starts beside run 1 only where the card
#      holds three runs' peaks (session_plan.py room: an H200 does, an 80 GB H100 does not), else once run 1 or
#      native's runs have ended;
#   wave 2, the GPU alone: 3 (record, native) pairs, seeds ONE_SEED+2 .. +4: speed by window phase, warm startups,
#      3 + 3 more final losses (5 + 5). Each pair is gated (sidebyside --gate-native): native starts 20 s before the
#      record and waits after its warm-up; its timed steps start when the record has exited, and a record run whose
#      timed steps native's warm-up reached is marked void. Each pair starts only when the plan's need for a whole
#      pair is left (after the first, the slowest pair this session ran after its first, which carries the first
#      warm start), so a cut drops a pair, never one side of it; sidebyside's --need-s does the same check;
#   wave 1's failed runs again (a run that ran out of memory, say), and its second runs that did not run, each
#      alone on its seed when its need is left: parity ranks above the startup options; a failed run's folder and
#      log are kept as *.failed;
#   startup options, as (record, native) pairs of 6-step runs on the idle GPU after wave 2 (the load under which
#      wave 2's warm startups, their baseline, were measured), each only when its pair and the end still fit:
#      torch.compiler's saved artifacts loaded into empty caches (a new node), and TORCHINDUCTOR_AUTOGRAD_CACHE=0
#      on warm caches; no single run starts without its own need left (sidebyside --need-s);
#   summaries: one-parity/ (all runs: Welch's test, every seed, startups), one-wave2/ (speed), startup.txt.
# Phase `carry` (about five minutes): native's compile artifacts through the carried path on one machine: a cold
# 6-step run saves them, pack_artifacts packs them (their size), load_carried loads the parts into empty caches, and
# a second 6-step run starts from those (its startup says whether they hit).
# Compile caches live where `make reproduce` keeps them: cache/inductor and cache/triton (of the snapshot).
set -uo pipefail
R=${1:?usage: device_session.sh RESULTS_DIR [ws1] [ws2] [diff1] [diff2] [one] [carry]}
shift
PHASES=${*:-ws2 ws1}
PLAN=(python3 "$(cd "$(dirname "$0")" && pwd)/session_plan.py")
SRC_ARTIFACTS=$(cd "$(dirname "$0")/.." && pwd)/.devcarry
WARM=(); [ "${ONE_WARM:-0}" = 1 ] && WARM=(--warm)
# phase one is planned from the times measured on its GPU (an H100's host compiles a third slower, and there the
# table cannot fit one lease): ONE_GPU, else nvidia-smi's name; a machine without one (a dry run) plans an H200's
GPU=(--gpu H200)
ONE_GPU=${ONE_GPU:-$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)}
# and its memory (MiB), which sets how many of wave 1's runs share it at once (session_plan.py room)
GPU_MIB=${ONE_GPU_MIB:-$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits 2> /dev/null | head -1)}
[[ "$GPU_MIB" =~ ^[0-9]+$ ]] || GPU_MIB=0  # unknown: no run starts beside two others
if [[ " $PHASES " == *" one "* ]] && [ -n "$ONE_GPU" ]; then
  GPU=(--gpu "$("${PLAN[@]}" gpu "$ONE_GPU")") || { echo "phase one cannot be planned on this GPU" >&2; exit 3; }
fi
# compile artifacts an earlier session on this GPU's kind packed (pack_artifacts) and the calls before this one carried
# into .devcarry/artifacts-<GPU>/: with every part there and intact (PARTS.sha256), the plan is warm
carried_whole() {  # a folder of packed artifacts -> exit 0: both programs' parts are there, each intact
  local who
  [ -f "$1/SHA256SUMS" ] && [ -f "$1/PARTS.sha256" ] || return 1
  for who in record native; do  # one program's parts alone would plan warm and then compile the other cold
    grep -q " artifacts-$who.bin$" "$1/SHA256SUMS" && grep -q " artifacts-$who.bin.xz.part-" "$1/PARTS.sha256" \
      || return 1
  done
  (cd "$1" && sha256sum --quiet -c PARTS.sha256 > /dev/null 2>&1)
}
CARRIED=$SRC_ARTIFACTS/artifacts-${GPU[1]}
if [ "${ONE_WARM:-}" = "" ] && carried_whole "$CARRIED"; then WARM=(--warm); fi
# what the lease had held when this session started, where benchmarks/lease.sh measured it (LEASE_T0)
# and the device time the session had left when that call began (LEASE_DEVICE_S: status's budget_left_s; a refused
# call spends from it)
ONE_BUDGET_S=${ONE_BUDGET_S:-$("${PLAN[@]}" budget ${LEASE_HELD_S:+--held-s "$LEASE_HELD_S"} \
  ${LEASE_DEVICE_S:+--device-s "$LEASE_DEVICE_S"})}
ONE_PLAN=(--budget-s "$ONE_BUDGET_S" "${WARM[@]}" "${GPU[@]}")  # what `plan` and `has` take
if [ "${DRY_RUN:-0}" = 1 ]; then  # the plan of phase one and its budget; nothing else
  "${PLAN[@]}" plan "${ONE_PLAN[@]}"; exit $?
fi
# ONE_SHORT=1 runs what fits when the plan, at the slowest measured times, does not promise speed 3 + 3 (a lease
# that started late): each pair still starts only where its gate passes on the clock as it is, so what runs is a
# table only where it holds 3 + 3 pairs and parity 5 + 5, and otherwise a check of where native stands; progress.txt
# and plan.txt say which
ONE_SHORT=${ONE_SHORT:-0}
if [[ " $PHASES " == *" one "* ]] && ! "${PLAN[@]}" plan "${ONE_PLAN[@]}" > /dev/null; then
  if [ "$ONE_SHORT" != 1 ]; then
    echo "phase one does not fit ONE_BUDGET_S=$ONE_BUDGET_S s on an ${GPU[1]}: DRY_RUN=1 shows the plan" \
      "(ONE_SHORT=1 runs what fits)" >&2
    exit 3
  fi
  # a short session without one pair times nothing: cold, it still runs wave 1 where that fits, for the compile
  # artifacts it packs (they make the next lease on this GPU's kind warm, and the table fit); warm, it is refused
  short_plan=$("${PLAN[@]}" plan "${ONE_PLAN[@]}")
  if ! grep -Eq '^wave 2 pair 1 .* runs$' <<< "$short_plan"; then
    if [ ${#WARM[@]} -eq 0 ] && grep -Eq '^wave 1 runs 1 .* runs$' <<< "$short_plan"; then
      ONE_ARTIFACTS_ONLY=1
    else
      echo "phase one: not even one pair fits ONE_BUDGET_S=$ONE_BUDGET_S s on an ${GPU[1]}" \
        "$([ ${#WARM[@]} -eq 0 ] && echo "(nor a cold wave 1)")" >&2
      exit 3
    fi
  fi
fi
STEPS=${STEPS:-40}
PRIME_STEPS=${PRIME_STEPS:-6}  # the warm-up compiles every window size; a priming run need not train long
# the programs after record and native: native with options changed (sidebyside --variant), space-separated,
# e.g. SBS_VARIANT="tstore:fused_loss_transpose=false unfused:fused_loss=false". DIFF_SET: device_diff's train/ overrides.
read -r -a VARIANTS <<< "${SBS_VARIANT:-unfused:fused_loss=false}"
# NATIVE_SET: train/ options for the native runs beside fused_loss=true, space-separated KEY=VALUE (a candidate
# default measured against the record in alternation, the variants then taking options back out)
read -r -a NATIVE_SET <<< "${NATIVE_SET:-}"
read -r -a DIFF_SET <<< "${DIFF_SET:-fused_loss=true}"
mkdir -p "$R"
SRC=$(pwd)
SNAP=${ONE_SNAP:-/tmp/ds-repo}  # a private copy: later device calls re-sync the working tree under this script's feet
rm -rf "$SNAP" && mkdir -p "$SNAP" && cp -r "$SRC"/. "$SNAP"/ && cd "$SNAP"
PLAN=(python3 "$SNAP/benchmarks/session_plan.py")  # the snapshot's, like every other tool below
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
  if [ "$size" -le 33554432 ]; then
    split -b 15m "$R/cache.tgz" "$R/cache/part-"; note "compile cache packed: $size bytes"
  else
    note "compile cache not packed: $size bytes compressed (over 32 MB)"
  fi
  rm -f "$R/cache.tgz"
}
SBS=(python3 benchmarks/sidebyside.py --data "$DATA" --program-dir /tmp/sbs-record --budget-s "${SBS_BUDGET_S:-1440}"
     --matmul-file "$R/matmul-start.json")
sbs() { "${SBS[@]}" "$@"; }
diff_run() {  # world size, GPUs, out, extra device_diff options
  local n=$1 gpus=$2 out=$3; shift 3
  CUDA_VISIBLE_DEVICES=$gpus PYTHONPATH=$SNAP/pipeline/runs/fa3_standin:$SNAP \
    python3 -m torch.distributed.run --standalone --nproc_per_node="$n" benchmarks/device_diff.py --out "$out" "$@"
}

measure() {  # world size, the helpers' GPU (sidebyside's runs take GPUs 0..N-1)
  local n=$1 helper=$2
  local natives=(--native-set fused_loss=true) v
  for v in "${NATIVE_SET[@]}"; do natives+=(--native-set "$v"); done
  for v in "${VARIANTS[@]}"; do natives+=(--variant "$v"); done
  CUDA_VISIBLE_DEVICES=$helper python3 benchmarks/xent_check.py > "$R/xent-check-ws$n.txt" 2>&1 \
    || { natives=(--native-set fused_loss=false); note "ws$n: xent_triton check FAILED: native without fused_loss"; }
  note "ws$n: natives ${natives[*]}"
  ( export TORCHINDUCTOR_COMPILE_THREADS=8
    CUDA_VISIBLE_DEVICES=$helper python3 benchmarks/xent_check.py --time > "$R/xent-ws$n.txt" 2>&1
    note "ws$n: xent_triton timing exit $?"
    if [ "${ADAM_TIME:-1}" = 1 ]; then  # ADAM_TIME=0: skip it (unchanged since measured; the helpers end sooner)
      CUDA_VISIBLE_DEVICES=$helper python3 benchmarks/adam_time.py > "$R/adam-ws$n.txt" 2>&1
      note "ws$n: adam_time exit $?"
    fi
    local primed=(native) v
    [ "${natives[1]}" = fused_loss=true ] && for v in "${VARIANTS[@]}"; do primed+=("native-${v%%:*}"); done
    # no prime may share a GPU with the record's timed steps: where the helpers' GPU is one the runs use, none
    # starts once the record's first run has printed step 0, and one still running then is stopped (SIGTERM:
    # sidebyside stops its program too). On 2026-12-01 a 407 s prime (a since-deleted autotuning option) began
    # 63 s before the record's step 0 and ran through two record runs: those are void. A program not primed compiles in its own
    # first run (its startup pays, not its step time)
    local record_out=/dev/null
    [ "$helper" -lt "$n" ] && record_out="$R/sbs-ws$n/record-ws$n-1/stdout.txt"
    for who in "${primed[@]}"; do
      if grep -qs "^step:0/" "$record_out"; then note "ws$n: $who not primed"; continue; fi
      (exec "${SBS[@]}" --world-sizes "$n" --first-gpu "$helper" --steps "$PRIME_STEPS" --only "$who" \
        "${natives[@]}" --out "$R/prime-$who-ws$n" > "$R/prime-$who-ws$n.txt" 2>&1) &
      local pid=$! outcome=primed  # sidebyside's own pid (exec): the SIGTERM below reaches it
      while kill -0 "$pid" 2> /dev/null; do
        if grep -qs "^step:0/" "$record_out"; then kill -TERM "$pid"; outcome="prime stopped (record timing)"; break; fi
        sleep 2
      done
      wait "$pid"; note "ws$n: $who $outcome"
    done
  ) &
  sbs --world-sizes "$n" --repeat 3 --seed 1 --steps "$STEPS" --variants-last "${natives[@]}" \
    --out "$R/sbs-ws$n" > "$R/sbs-ws$n.txt" 2>&1
  note "ws$n: runs done"
  wait
}

startup_of() {  # a sidebyside --out folder -> "program: startup s" for each run in it
  python3 -c 'import json, sys
for ws, pair in json.load(open(sys.argv[1] + "/summary.json"))["runs"].items():
    print(" ".join(who + " " + str(r.get("startup_s")) + " s (rc " + str(r.get("rc")) + ")"
                   for who in pair if who != "patch" for r in pair[who]))' \
    "$1" 2> /dev/null || echo "none ($1 has no summary)"
}

left_s() { echo $(( ONE_END - SECONDS )); }

wave1_record() {  # NATIVE_PID: record run 1 of phase one, and run 2 (parity) once run 1's compile is done (the
  # caches warm); when run 1 and native's wave 1 (NATIVE_PID) have exited, a cold session packs both programs'
  # compile artifacts beside run 2 (untimed: the xz takes no time from the clock), so that they leave this lease
  # whatever the rest of it holds. Cold, run 2 is decided at run 1's first timed step, by the clock it has then
  # (the compile took 645 to 848 s on the H100s, and the plan's need is its slowest): parity where speed still fits
  local first="$R/one-w1-record-1/record-ws1/stdout.txt" second="" packer="" parity=$ONE_PARITY
  REPRO_COMPILE_ARTIFACTS_SAVE=$R/artifacts-record.bin sbs --only record --world-sizes 1 --steps "$ONE_STEPS" \
    --seed "$ONE_SEED" --shared-gpu "${ONE_SITE[@]}" --budget-s "$(left_s)" --out "$R/one-w1-record-1" \
    > "$R/one-w1-record-1.txt" 2>&1 &
  local pid=$!
  if [ "$parity" = 1 ] || [ ${#WARM[@]} -eq 0 ]; then
    until grep -qs "^step:0/" "$first" || ! kill -0 "$pid" 2> /dev/null; do sleep 5; done
  fi
  if [ ${#WARM[@]} -eq 0 ] && grep -qs "^step:0/" "$first"; then  # cold: the plan's guess is behind it now
    local left; left=$(left_s)
    if "${PLAN[@]}" has parity --at-first-step --budget-s "$left" "${GPU[@]}"; then
      parity=1; note "one: at the record's first timed step $left s are left: parity fits, its run 2 starts"
    else parity=0; note "one: at the record's first timed step $left s are left: parity does not fit beside speed"; fi
  fi
  if [ "$parity" = 1 ]; then
    # three runs at once only where the card holds their peaks: on 2026-12-06 a warm H100 (80 GB) ran the record
    # twice beside native, and run 2 ran out of memory; elsewhere run 2 waits for run 1 or native's runs to end
    local room; room=$("${PLAN[@]}" room --gpu-mib "$GPU_MIB" record record native)
    if [ $? -ne 0 ]; then
      while kill -0 "$pid" 2> /dev/null && kill -0 "$1" 2> /dev/null; do sleep 2; done
      note "one: the record's run 2 starts once $(kill -0 "$pid" 2> /dev/null && echo "native's runs have" \
        || echo "its run 1 has") ended ($room)"
    fi
    sbs --only record --world-sizes 1 --steps "$ONE_STEPS" --seed $((ONE_SEED + 1)) --shared-gpu \
      --budget-s "$(left_s)" --out "$R/one-w1-record-2" > "$R/one-w1-record-2.txt" 2>&1 &
    second=$!
  fi
  wait "$pid" "$1"
  if [ ${#WARM[@]} -eq 0 ]; then pack_artifacts & packer=$!; fi  # a warm session compiled nothing new
  wait $second $packer
  note "one: wave 1 record runs done; startups $(startup_of "$R/one-w1-record-1")" \
    "$([ "$parity" = 1 ] && startup_of "$R/one-w1-record-2")"
}

wave1_native() {  # the loss kernels' GPU check first (its result sets native's options), then native's two runs
  # (cold, its second always: it ends inside the record's compile, which sets wave 1's length)
  CUDA_VISIBLE_DEVICES=0 python3 benchmarks/xent_check.py > "$R/xent-check.txt" 2>&1 \
    || { ONE_NATIVES=(--native-set fused_loss=false); note "one: xent check FAILED: native without fused_loss"; }
  local v; : > "$R/one-natives.txt"  # wave 2 and the options run what wave 1 ran (this is a background subshell)
  for v in "${ONE_NATIVES[@]}"; do echo "$v" >> "$R/one-natives.txt"; done
  REPRO_COMPILE_ARTIFACTS_SAVE=$R/artifacts-native.bin sbs --only native --world-sizes 1 --steps "$ONE_STEPS" \
    --seed "$ONE_SEED" --shared-gpu "${ONE_SITE[@]}" "${ONE_NATIVES[@]}" --budget-s "$(left_s)" \
    --out "$R/one-w1-native-1" > "$R/one-w1-native-1.txt" 2>&1
  local second=$ONE_PARITY; [ ${#WARM[@]} -eq 0 ] && second=1
  if [ "$second" = 1 ]; then
    sbs --only native --world-sizes 1 --steps "$ONE_STEPS" --seed $((ONE_SEED + 1)) --shared-gpu \
      "${ONE_NATIVES[@]}" --budget-s "$(left_s)" --out "$R/one-w1-native-2" > "$R/one-w1-native-2.txt" 2>&1
  fi
  note "one: wave 1 native runs done; startups $(startup_of "$R/one-w1-native-1")" \
    "$([ "$second" = 1 ] && startup_of "$R/one-w1-native-2")"
}

ran_ok() {  # a sidebyside --out folder -> exit 0: it has runs, and every one exited 0
  python3 -c 'import json, sys
runs = [r for pair in json.load(open(sys.argv[1] + "/summary.json"))["runs"].values()
        for who, rs in pair.items() if who != "patch" for r in rs]
sys.exit(0 if runs and all(r.get("rc") == 0 for r in runs) else 1)' "$1" 2> /dev/null
}

rerun_wave1() {  # wave 1's failed runs (one out of memory beside the others, say) again, and its second runs that
  # did not run (parity dropped), each on its seed and the GPU alone, when its need and the end's are left: parity
  # 5 + 5 ranks above the startup options. A failed run's folder and log are kept beside it as *.failed
  local dir who n
  for who in record native; do
    for n in 1 2; do
      dir=$R/one-w1-$who-$n
      [ -d "$dir" ] && ran_ok "$dir" && continue
      fits "run-$who" || continue
      local why="(not run in wave 1)"
      if [ -d "$dir" ]; then mv "$dir" "$dir.failed" && mv "$dir.txt" "$dir.failed.txt"; why=again; fi
      sbs --only "$who" --world-sizes 1 --steps "$ONE_STEPS" --seed $((ONE_SEED + n - 1)) "${ONE_NATIVES[@]}" \
        --need-s "$who=$("${PLAN[@]}" need "$who" "${GPU[@]}")" --budget-s "$(left_s)" --out "$dir" > "$dir.txt" 2>&1
      note "one: wave 1's $who run $n $why, alone: $(startup_of "$dir")"
    done
  done
}

fits() {  # KIND [--pair-took-s T ...]: session_plan.py's gate: an item of this kind (pair, run-PROGRAM,
  # option-NAME) started now can finish
  local verdict; verdict=$("${PLAN[@]}" fits "$@" --left-s "$(left_s)" "${GPU[@]}"); local ok=$?
  note "one: $verdict"; return $ok
}

startup_option() {  # program, name, env assignments...: one short run to time its startup
  local who=$1 name=$2 kind=native-option; shift 2
  [ "$who" = record ] && kind=record-$name
  env "$@" "${SBS[@]}" --only "$who" --world-sizes 1 --steps 6 "${ONE_SITE[@]}" "${ONE_NATIVES[@]}" \
    --need-s "$who=$("${PLAN[@]}" need "$kind" "${GPU[@]}")" --budget-s "$(left_s)" \
    --out "$R/one-startup-$name-$who" > "$R/one-startup-$name-$who.txt" 2>&1
  note "one: startup $name: $(startup_of "$R/one-startup-$name-$who")"
}

option_pair() {  # name, then per program the same option: fresh caches where it loads artifacts
  local name=$1 who
  fits "option-$name" || return 0
  for who in record native; do
    case $name in
      artifacts) startup_option "$who" artifacts TORCHINDUCTOR_CACHE_DIR="$SNAP/cache-fresh-$who/inductor" \
        TRITON_CACHE_DIR="$SNAP/cache-fresh-$who/triton" REPRO_COMPILE_ARTIFACTS_LOAD="$R/artifacts-$who.bin" ;;
      no-aot-cache) startup_option "$who" no-aot-cache TORCHINDUCTOR_AUTOGRAD_CACHE=0 ;;
    esac
  done
}

pack_artifacts() {  # [KEEP_DIR] wave 1's compile artifacts for a later lease of this GPU's kind (packed in wave 1,
  # beside the record's untimed second run), where the clock has 90 s to spare: xz-compressed, cut into parts of
  # 16,000,000 bytes in RESULTS/parts/ with their SHA256SUMS, which benchmarks/lease.sh's polls send back four a
  # call (KEEP_DIR gets a copy first). Kept in .devcarry/artifacts-<GPU>/ and carried there, they make a later
  # lease's plan warm (load_carried): no cold compile, so an H100 holds the table and an H200 its startup options
  local f
  [ "$(left_s)" -ge 90 ] || { note "one: artifacts not packed: $(left_s) s left"; return 0; }
  local tmp=$R/parts.tmp  # renamed to parts/ when whole: lease.sh sends what it finds there, and must not find half
  rm -rf "$tmp" && mkdir -p "$tmp"
  for f in "$R"/artifacts-record.bin "$R"/artifacts-native.bin; do
    [ -f "$f" ] || continue
    (cd "$R" && sha256sum "$(basename "$f")") >> "$tmp/SHA256SUMS"
    xz -T0 -6 -c "$f" | split -b 16000000 -d - "$tmp/$(basename "$f").xz.part-"
    note "one: $(basename "$f") packed: $(stat -c %s "$f") bytes, $(cat "$tmp/$(basename "$f").xz.part-"* | wc -c)" \
      "with xz, in $(ls "$tmp/$(basename "$f").xz.part-"* | wc -l) parts"
  done
  (cd "$tmp" && sha256sum artifacts-*.part-* > PARTS.sha256) || return 1  # PARTS: a later test that every part came
  if [ -n "${1:-}" ]; then mkdir -p "$1" && cp "$tmp"/* "$1"/; fi
  mv "$tmp" "$R/parts"
}

load_carried() {  # DIR PROGRAM...: carried artifacts into this session's compile caches, each checked by its sha256
  local dir=$1 who bin; shift
  for who in "$@"; do
    bin=$R/artifacts-$who-carried.bin
    cat "$dir"/artifacts-$who.bin.xz.part-* | xz -dc > "$bin" || return 1
    [ "$(sha256sum < "$bin" | cut -c1-64)" = "$(grep "artifacts-$who.bin" "$dir/SHA256SUMS" | cut -c1-64)" ] \
      || { note "one: carried artifacts-$who.bin: sha256 differs from SHA256SUMS"; return 1; }
    python3 benchmarks/compile_artifacts/sitecustomize.py "$bin" >> "$R/artifacts-load.txt" 2>&1 || return 1
  done
}

one_gpu() {
  ONE_END=$ONE_BUDGET_S  # on the script's clock (SECONDS counts from its start, as the plan's clock does)
  ONE_STEPS=${ONE_STEPS:-80}; ONE_SEED=${ONE_SEED:-101}
  ONE_SITE=(--site "$SNAP/benchmarks/compile_artifacts")
  export TORCHINDUCTOR_CACHE_DIR=$SNAP/cache/inductor TRITON_CACHE_DIR=$SNAP/cache/triton
  if [ ${#WARM[@]} -gt 0 ] && [ "${ONE_WARM:-}" = "" ]; then
    if load_carried "$SNAP/.devcarry/artifacts-${GPU[1]}" record native; then
      note "one: carried compile artifacts loaded ($(du -sh "$SNAP/cache" | cut -f1) of caches)"
    else note "one: carried compile artifacts NOT loaded (artifacts-load.txt): wave 1 compiles cold, the gates cut"; fi
  fi
  ONE_NATIVES=()  # train/'s defaults (fused_loss and fused_loss_transpose on)
  # a plan that does not fit got this far only with ONE_SHORT=1
  "${PLAN[@]}" plan "${ONE_PLAN[@]}" > "$R/plan.txt" \
    || { note "one: SHORT (ONE_SHORT=1): at the slowest measured times speed 3 + 3 does not fit the budget; each" \
           "pair runs where its gate passes, a table only with 3 + 3 pairs and parity 5 + 5"; }
  [ "${ONE_ARTIFACTS_ONLY:-0}" = 1 ] && note "one: not one pair fits: wave 1 runs for the compile artifacts it packs"
  ONE_PARITY=0; "${PLAN[@]}" has parity "${ONE_PLAN[@]}" && ONE_PARITY=1
  note "one: wave 1 (shared GPU), seed $ONE_SEED$([ "$ONE_PARITY" = 1 ] && echo " and $((ONE_SEED + 1))");" \
    "budget $ONE_BUDGET_S s${LEASE_HELD_S:+ (the lease had held $LEASE_HELD_S s)}; plan.txt drops: $(grep -o '^drops [a-z]*' "$R/plan.txt" | cut -d' ' -f2 | xargs)"
  local diff=""
  if [ "${ONE_DIFF:-0}" = 1 ]; then  # not in the plan: its CPU load lengthens the record's cold compile
    ( diff_run 1 0 "$R/diff1" > "$R/diff1.txt" 2>&1; note "one: diff1 (defaults) device_diff exit $?" ) &
    diff=$!
  fi
  wave1_native &
  wave1_record $!
  wait $diff
  mapfile -t ONE_NATIVES < "$R/one-natives.txt"
  note "one: wave 2 (GPU alone), seeds $((ONE_SEED + 2))..$((ONE_SEED + 4)), $(left_s) s left"
  # gated pairs: native starts first and waits after its warm-up; its timed steps follow the record's exit
  local i began took=() needs
  for i in 1 2 3; do  # a pair after the first needs this session's pairs' pace (session_plan.py item_need_s)
    fits pair "${took[@]}" || break
    # sidebyside checks the pair's runs again against what it is handed: the record's part of the same need
    needs=(--gate-native "$("${PLAN[@]}" need gate-lead)"
           --need-s "record=$("${PLAN[@]}" need record "${took[@]}" "${GPU[@]}")"
           --need-s "native=$("${PLAN[@]}" need native-timed "${GPU[@]}")")
    began=$SECONDS
    sbs --world-sizes 1 --steps "$ONE_STEPS" --seed $((ONE_SEED + 1 + i)) "${ONE_NATIVES[@]}" "${needs[@]}" \
      --budget-s "$(left_s)" --out "$R/one-wave2-$i" > "$R/one-wave2-$i.txt" 2>&1
    took+=(--pair-took-s $((SECONDS - began)))
  done
  sbs --summarize "$R"/one-wave2-? --out "$R/one-wave2" > "$R/one-wave2.txt" 2>&1
  note "one: wave 2 done; startups $(startup_of "$R/one-wave2")"
  rerun_wave1
  option_pair artifacts
  option_pair no-aot-cache
  sbs --summarize "$R"/one-w1-record-? "$R"/one-w1-native-? "$R"/one-wave2-? --out "$R/one-parity" \
    > "$R/one-parity.txt" 2>&1
  grep -h "startup" "$R/progress.txt" > "$R/startup.txt"
  note "one: done, $(left_s) s of the budget left"
}

carry_check() {  # native's compile artifacts through the carried path on one machine, in about 5 minutes: a cold
  # 6-step run saves them, pack_artifacts packs them (their size), load_carried loads the parts into empty caches,
  # and a second 6-step run starts from those: its startup against the cold one's says whether they hit
  ONE_END=$ONE_BUDGET_S
  local site=(--site "$SNAP/benchmarks/compile_artifacts") kept=$SNAP/.devcarry/artifacts-check
  export TORCHINDUCTOR_CACHE_DIR=$SNAP/cache/inductor TRITON_CACHE_DIR=$SNAP/cache/triton
  REPRO_COMPILE_ARTIFACTS_SAVE=$R/artifacts-native.bin sbs --only native --world-sizes 1 --steps 6 "${site[@]}" \
    --budget-s "$(left_s)" --out "$R/carry-cold" > "$R/carry-cold.txt" 2>&1
  note "carry: cold run: startups $(startup_of "$R/carry-cold")"
  pack_artifacts "$kept" || { note "carry: artifacts not packed"; return 1; }
  export TORCHINDUCTOR_CACHE_DIR=$SNAP/cache-carried/inductor TRITON_CACHE_DIR=$SNAP/cache-carried/triton
  if load_carried "$kept" native; then note "carry: parts loaded into empty caches"
  else note "carry: parts NOT loaded (artifacts-load.txt)"; fi
  sbs --only native --world-sizes 1 --steps 6 "${site[@]}" --budget-s "$(left_s)" --out "$R/carry-warm" \
    > "$R/carry-warm.txt" 2>&1
  note "carry: run from the carried artifacts: startups $(startup_of "$R/carry-warm")"
}

# ws1's helpers take GPU 1 where there is one; on a one-GPU node they share GPU 0, and the primes yield to the
# record's timed steps (measure)
HELPER_GPU=1; [ "$(nvidia-smi -L | wc -l)" -lt 2 ] && HELPER_GPU=0
note "start: $PHASES"; restore_cache; nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv > "$R/gpus.csv"
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-start.json"
note "matmul $(cat "$R/matmul-start.json")"
for phase in $PHASES; do
  case $phase in
    ws1) measure 1 "$HELPER_GPU"; pack_cache ;;
    ws2) measure 2 0; pack_cache ;;
    one) one_gpu ;;
    carry) carry_check ;;
    diff1|diff2) n=${phase#diff}; diff_run "$n" "$(seq -s, 0 $((n - 1)))" "$R/$phase" "${DIFF_SET[@]/#/--set=}" \
          > "$R/$phase.txt" 2>&1; note "$phase: device_diff exit $?" ;;
    *) note "unknown phase $phase (ws1, ws2, diff1, diff2, one, carry)" ;;
  esac
done
CUDA_VISIBLE_DEVICES=0 python3 benchmarks/sidebyside.py --matmul > "$R/matmul-end.json"
note all-done
