#!/usr/bin/env bash
# Speed levers of train/ measured each alone (issue 41): native with every named lever off (arm `base`) and with
# one lever on and the others off (one arm per lever, named after it), alternating base, lever 1, lever 2, ...,
# REPEAT runs each, in one detached device session on one H200. A lever is a boolean option of train/config.py;
# nothing else differs between arms: same shards (docs-v1), same seeds (run i of every arm from seed SEED+i-1),
# same schedule, FlexAttention. No run of the record's program.
#
#   bash benchmarks/lever_ab.sh LEVER                          # one lever against itself off
#   CHECK_TESTS="tests/test_train_x.py -k cuda" bash benchmarks/lever_ab.sh LEVER   # its GPU tests first
#   bash benchmarks/lever_ab.sh LEVER_A LEVER_B                # two levers, each against the same base runs
#   STEPS=20 (default) SEED=201 BUDGET_S=560 REPEAT=3 NEED_S=95 DEST=$OUT/lever-ab DATA=.devcarry/docs-v1
#   CHECK_TESTS= (none) CHECK_S=150 (the check's time limit): environment overrides; DRY_RUN=1 checks the levers
#   and prints the runs' commands (sidebyside --dry-run), no GPU and no checks (tests/test_lever_ab.py)
#
# First the levers' equivalence check on the GPU where CHECK_TESTS names one (pytest, seconds; e.g. lever 1's
# tests/test_train_relu2_grad.py -k cuda, 2026-12-03), then benchmarks/sidebyside.py --only
# native-base,native-LEVER... --repeat REPEAT (its per-run budget: no run starts with less than NEED_S left), then
# benchmarks/lever_summary.py: one line per run (median and mean step time), each lever's parity (final validation
# loss seed by seed against the base's; exit 1 where it fails, and its ratios are then no figure) and its ratio to
# base (median over runs of each run's median step), overall and by window phase. Everything lands in DEST
# (summary.json, summary.md, each run's log.txt and stdout.txt).
#
# The project's rule: a lever that fails parity, or is measured no faster (ratio >= 1.000 overall), is DELETED from
# train/, with the measured figure in train/BENCHMARKS.md; it is never kept switched off. Its option exists only for
# this measurement and goes with it either way (a kept lever loses its switch and is simply the code).
#
# Time (docs/device-runs/2026-12-01-h200-one, native alone on one H200: warm startup 44-52 s; cold startup about
# 110-150 s alone; 610 ms per step): a warm run of 20 steps is about 44-52 + 12 + 5 s. Each arm whose lever
# changes the compiled graph pays one cold compile (its first run). Two levers, 3 runs each: 8 s matmul rate +
# ~30 s checks + 3 x ~150 s cold + 6 x ~70 s warm = about 900 s: longer than one call, so start it detached.
set -uo pipefail
[ $# -gt 0 ] || { echo "usage: lever_ab.sh CONFIG_KEY...   (boolean options of train/config.py)" >&2; exit 2; }
LEVERS=("$@")
DEST=${DEST:-${OUT:-/tmp}/lever-ab}
SEED=${SEED:-201} BUDGET_S=${BUDGET_S:-560} REPEAT=${REPEAT:-3} NEED_S=${NEED_S:-95} STEPS=${STEPS:-20}
export PYTHONUNBUFFERED=1
START=$(date +%s)
for LEVER in "${LEVERS[@]}"; do
  grep -Eq "^    $LEVER: bool = (True|False)" train/config.py \
    || { echo "lever_ab.sh: $LEVER is not a boolean option of train/config.py" >&2; exit 2; }
done
DATA=${DATA:-.devcarry/docs-v1}
[ -d "$DATA" ] || { echo "lever_ab.sh: no shards in $DATA: carry .devcarry/docs-v1.txz (the docs-v1 shards;" \
  "benchmarks/lease.sh unpacks it)" >&2; exit 2; }
mkdir -p "$DEST"

# the levers' equivalence check on the GPU, where one is named (CHECK_TESTS: pytest's arguments)
read -ra CHECK <<< "${CHECK_TESTS:-}"
if [ ${#CHECK[@]} -gt 0 ] && [ -n "${DRY_RUN:-}" ]; then
  echo "check: not run (dry run): ${CHECK[*]}"
elif [ ${#CHECK[@]} -gt 0 ] && ! python3 -c "import pytest" 2> /dev/null; then
  echo "check: skipped, no pytest on this machine (run ${CHECK[*]} where there is a GPU and pytest)"
elif [ ${#CHECK[@]} -gt 0 ]; then
  if timeout "${CHECK_S:-150}" python3 -m pytest -q -p no:cacheprovider "${CHECK[@]}" > "$DEST/check.txt" 2>&1; then
    echo "check: passed ($(tail -n 1 "$DEST/check.txt"))"
  else
    echo "check: FAILED, a lever changes the numerics on the GPU (the timing follows anyway):"
    tail -n 20 "$DEST/check.txt"
  fi
fi

# arms: base (every lever off), then each lever on alone
all_off() { local IFS=,; echo "${LEVERS[*]/%/=false}"; }
VARIANTS=(--variant "base:$(all_off)") ONLY=native-base NEEDS=(--need-s "native-base=$NEED_S")
for LEVER in "${LEVERS[@]}"; do
  sets=$(all_off); sets=${sets/$LEVER=false/$LEVER=true}
  VARIANTS+=(--variant "$LEVER:$sets") NEEDS+=(--need-s "native-$LEVER=$NEED_S"); ONLY+=",native-$LEVER"
done

LEFT=$((BUDGET_S - ($(date +%s) - START)))
echo "runs: ${LEFT} s of the ${BUDGET_S} s budget left (a run starts only with its need left)"
python3 benchmarks/sidebyside.py --data "$DATA" ${DRY_RUN:+--dry-run} --world-sizes 1 --steps "$STEPS" --repeat "$REPEAT" \
  --seed "$SEED" "${VARIANTS[@]}" --only "$ONLY" --budget-s "$LEFT" "${NEEDS[@]}" --out "$DEST" \
  > "$DEST/sidebyside.txt" 2>&1
RC=$?
echo "sidebyside exit $RC after $(($(date +%s) - START)) s (its output: $DEST/sidebyside.txt)"

if [ -n "${DRY_RUN:-}" ]; then cat "$DEST/sidebyside.txt"; exit $RC; fi
[ -f "$DEST/summary.json" ] || { echo "no summary.json: sidebyside's last lines:"; tail -n 20 "$DEST/sidebyside.txt"; exit 1; }
python3 benchmarks/lever_summary.py "$DEST/summary.json" "${LEVERS[@]}"
