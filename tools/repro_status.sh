#!/usr/bin/env bash
# The make targets' way to run the tool: show the command, run it, and on failure name the tool's exit code
# (README.md, exit codes), since make itself can only end with 2; `bin/repro ARGS` returns that code as its own.
# Usage: tools/repro_status.sh VENV_REPRO ARGS...
repro=$1
shift
echo "\$ bin/repro $*"
"$repro" "$@"
rc=$?
if [ "$rc" -ne 0 ]; then
    echo "make: bin/repro exited $rc (README.md, exit codes); make's own status is 2: run 'bin/repro $*' to get $rc" >&2
fi
exit "$rc"
