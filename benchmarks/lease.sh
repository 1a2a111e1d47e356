#!/usr/bin/env bash
# A device lease's long command, detached from a private copy of the tree (each device call re-syncs the working
# tree under a running script), and collected by the calls that poll it (a machine idle for 30 s is handed back,
# and the next call gets a fresh one: poll at once).
#
#   bash benchmarks/lease.sh start SECONDS COMMAND...   # first call: copy the tree, start COMMAND in the copy,
#                                                       # wait up to SECONDS (sooner once it ends), collect
#   bash benchmarks/lease.sh poll SECONDS               # each later call: wait, collect; exit 3 at once on a
#                                                       # fresh machine (the session is gone with the last one)
#   bash benchmarks/lease.sh stash                      # a call before the start that carries files too large
#                                                       # for one call: keeps them for the start, lists them
# A wait ends early when the session is done or has published packed parts (a folder named parts): what a machine
# taken back has not sent is lost, so they leave at the first collection after they exist.
#
# The full table of issue 41, native against the record in one lease (benchmarks/device_session.sh's phase one,
# planned by benchmarks/session_plan.py; carry .devcarry/docs-v1.txz), with the caller's clock when it made the call and
# the device time the session had left then (status's budget_left_s):
#   LEASE_DEVICE_S=1800 LEASE_T0=1764851234 bash benchmarks/lease.sh start 540 \
#     bash benchmarks/device_session.sh /tmp/lease/ds one
#
# COMMAND runs in the copy with LEASE_DIR exported (its results belong there); its exit status, then "all-done", end
# $LEASE_DIR/progress.txt. Every call leaves $OUT/$LEASE_NAME.tgz, LEASE_DIR without compile caches, compile
# artifacts or parts, beside it the next four files of any folder named parts (device_session.sh's packed compile
# artifacts: poll until none is left; keep them in .devcarry/artifacts-<GPU>/), and prints the tails of LEASE_SHOW (a
# file under LEASE_DIR, where set), of every progress.txt in a folder below LEASE_DIR (a results folder's, as
# device_session.sh keeps) and of progress.txt.
# LEASE_T0, where given (seconds since the epoch when the caller made the start call), gives COMMAND LEASE_HELD_S,
# what the lease has held so far (the machine's start, 29-87 s measured, and the tree's copy): the session's time
# budget is the lease's less that, not less the slowest start. A T0 late by the caller's delay only shortens it.
# The shards travel compressed: one call carries at most 64 MiB, tracked files and carried paths together, and the
# tracked tree is 42 MB (2026-12-05, most of it docs/device-runs), so the 23 MB of docs-v1 no longer fit beside it;
# xz makes them 7.4 MB. Made once on this machine, carried as .devcarry/docs-v1.txz, unpacked into the copy here:
#   mkdir -p .devcarry && tar -cJf .devcarry/docs-v1.txz -C <the docs-v1 folder> .
# Files that need more than one call (compile artifacts in parts: benchmarks/carry_calls.py lists the calls) are
# carried under .devcarry/ by calls that run `stash`: it copies this call's .devcarry/ into LEASE_STASH, outside the
# tree the next call re-syncs (the device README keeps ignored outputs between calls, but a carried path the next
# call does not name has never been seen to stay), and prints every file stashed so far with its size; `start` adds
# the stash to its copy of the tree, never over a file its own call carried.
# Environment: LEASE_TREE (/tmp/lease-tree), LEASE_DIR (/tmp/lease), LEASE_NAME (lease), LEASE_SRC (the tree copied:
# this checkout), LEASE_STASH (/tmp/lease-stash). benchmarks/lever_lease.sh is this with lever_ab.sh's session.
set -uo pipefail
REPO=${LEASE_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
T=${LEASE_TREE:-/tmp/lease-tree} R=${LEASE_DIR:-/tmp/lease} S=${LEASE_STASH:-/tmp/lease-stash}

start() {
  [ $# -gt 0 ] || { echo "usage: lease.sh start SECONDS COMMAND..." >&2; exit 2; }
  rm -rf "$T" "$R" && mkdir -p "$T" "$R" || exit 1
  # the tree and the carried shards (.devcarry); not a virtual environment or git's objects (CPU tests, 2 GB)
  tar -C "$REPO" --exclude=./.venv --exclude=./.git --exclude=./cache -cf - . | tar -C "$T" -xf - || exit 1
  if [ -d "$S/.devcarry" ]; then mkdir -p "$T/.devcarry" && cp -rn "$S/.devcarry/." "$T/.devcarry/" || exit 1; fi
  local shards=$T/.devcarry/docs-v1
  if [ -f "$shards.txz" ] && [ ! -d "$shards" ]; then
    mkdir -p "$shards" && tar -xJf "$shards.txz" -C "$shards" \
      || { echo "lease.sh: cannot unpack $shards.txz" >&2; exit 1; }
  fi
  held_since "${LEASE_T0:-}"
  (cd "$T" && export LEASE_DIR=$R && setsid nohup bash -c \
    '"$@" > "$LEASE_DIR/session.log" 2>&1; echo "session rc $?" >> "$LEASE_DIR/progress.txt"; echo all-done >> "$LEASE_DIR/progress.txt"' \
    lease "$@" &) < /dev/null > /dev/null 2>&1  # the whole subshell's: one left holding the caller's stdout keeps a
  # pipe open for the session's length
}

stash() {  # this call's carried .devcarry/ into the stash, then every stashed file with its size
  [ -d "$REPO/.devcarry" ] || { echo "lease.sh: nothing to stash: this call carried no .devcarry/ files" >&2; exit 2; }
  mkdir -p "$S" && tar -C "$REPO" -cf - .devcarry | tar -C "$S" -xf - || exit 1
  (cd "$S" && find .devcarry -type f -printf '%10s %p\n' | sort -k2)
}

held_since() {  # LEASE_T0 (the caller's clock when it made the device call) -> LEASE_HELD_S, the lease's time so far
  [[ $1 =~ ^[0-9]+$ ]] || return 0
  local held=$(($(date +%s) - $1))
  # a clock off by minutes, or a stale T0, is no measurement: the session then assumes the slowest start
  if [ "$held" -ge 0 ] && [ "$held" -le 600 ]; then export LEASE_HELD_S=$held
  else echo "lease.sh: LEASE_T0 is $held s ago, not a start (0..600 s): ignored" >> "$R/progress.txt"; fi
}

collect() {
  tar -czf "${OUT:-/tmp}/${LEASE_NAME:-lease}.tgz" --exclude=cache --exclude='artifacts-*.bin' --exclude='parts*' \
    -C "$(dirname "$R")" "$(basename "$R")"
  # large results cut into parts (device_session.sh's packed compile artifacts: a folder named parts): four a call,
  # beside the tarball (a call brings back 64 MiB at most: four parts of 16 MB), each moved to parts-sent/ once copied
  local part sent=0
  for part in $(find "$R" -path '*/parts/*' -type f 2> /dev/null | sort); do
    [ "$sent" -lt 4 ] && [ -n "${OUT:-}" ] || break
    cp "$part" "$OUT/" && mkdir -p "$(dirname "$part")-sent" && mv "$part" "$(dirname "$part")-sent/" && sent=$((sent + 1))
  done
  if [ "$sent" -gt 0 ]; then echo "parts sent: $sent; left: $(find "$R" -path '*/parts/*' -type f | wc -l)"; fi
  # the command's own progress.txt files (a results folder below LEASE_DIR), then the session's
  local f shown=()
  for f in ${LEASE_SHOW:+"$R/$LEASE_SHOW"} $(find "$R" -mindepth 2 -name progress.txt 2> /dev/null | sort) \
    "$R/progress.txt"; do [ -f "$f" ] && shown+=("$f"); done
  if [ ${#shown[@]} -gt 0 ]; then tail -n 12 "${shown[@]}"; else echo "(no progress yet)"; fi
  # a session that failed may have said why only on its own output (device_session.sh refusing an H100 before it
  # has a results folder): show that too
  if grep -qs "^session rc [1-9]" "$R/progress.txt"; then
    echo "==> session.log <=="; tail -n 12 "$R/session.log"
  fi
}

wait_s() {  # up to N seconds, sooner once the session is done or has parts to send (a machine taken back loses
  # what it has not sent: the parts leave at the first collect after they are packed)
  for _ in $(seq $(($1 / 5))); do
    grep -qs all-done "$R/progress.txt" && return
    find "$R" -path '*/parts/*' -type f 2> /dev/null | grep -q . && return
    sleep 5
  done
}

case ${1:?start, poll or stash} in
  start) wait_for=${2:?seconds to wait}; shift 2; start "$@"; wait_s "$wait_for"; collect ;;
  poll)
    [ -d "$R" ] || { echo "lease.sh: no lease session on this machine ($R): it was handed back and this one is" \
      "fresh; the results so far are in the last call's ${LEASE_NAME:-lease}.tgz. Start again." >&2; exit 3; }
    wait_s "${2:-540}"; collect ;;
  stash) stash ;;
  *) echo "lease.sh: start, poll or stash, not $1" >&2; exit 2 ;;
esac
