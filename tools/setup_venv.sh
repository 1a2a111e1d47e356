#!/usr/bin/env bash
# make setup: build .venv from the locks, every file pinned by sha256 (pip --require-hashes on every install).
# Says what each step installs and how far it is; a second `make` started meanwhile waits on the lock and says so.
# Usage: tools/setup_venv.sh PYTHON VENV TORCH   (TORCH: cpu or pypi; see the Makefile)
set -euo pipefail
python=$1 venv=$2 torch=$3
torch_lock=requirements-torch-$torch.lock
if [ ! -f "$torch_lock" ]; then
    echo "make setup: TORCH=$torch is not a choice: TORCH=cpu (default) or TORCH=pypi" >&2
    exit 2
fi
if [ "$torch" = pypi ] && [ "$(uname -s)" = Linux ]; then
    echo "[setup] warning: TORCH=pypi on Linux is PyPI's CUDA build, whose CUDA libraries (~3 GB) the lock does" \
         "not hold: \`import torch\` will fail; TORCH=cpu is the CPU build"
fi
exec 9>"$venv.lock"
waited=0
if command -v flock >/dev/null && ! flock -n 9; then  # util-linux's flock; macOS has none and builds unlocked
    echo "[setup] another make is building $venv now (lock $venv.lock held by PID $(cat "$venv.lock.pid" 2>/dev/null || echo '?')); waiting for it"
    flock 9
    waited=1
fi
echo $$ > "$venv.lock.pid"
if [ "$waited" = 1 ] && [ -f "$venv/.installed" ] && [ "$(cat "$venv/.installed")" = "$torch" ]; then
    echo "[setup] $venv is ready: the other make built it"
    exit 0
fi
# pip's report of each step (what it installed, from where, with which sha256) stays in the venv:
# tests/test_setup_locked.py checks that every file in them is one the locks pin.
reports=$venv/setup-reports
pip_install() { local name=$1; shift; "$venv/bin/pip" install -q --disable-pip-version-check --report "$reports/$name.json" "$@"; }
started=$SECONDS
step() { echo "[setup $1/5] $2 ($((SECONDS - started)) s so far)"; }
rm -rf "$venv"
step 1 "a virtualenv in $venv from $python ($("$python" --version 2>&1))"
"$python" -m venv "$venv"
mkdir -p "$reports"
step 2 "the orchestrator's packages: requirements.lock, $(grep -c '^[A-Za-z]' requirements.lock) pins"
pip_install orchestrator --require-hashes -r requirements.lock
case $torch in
    cpu) what="torch 2.13.0+cpu, the CPU-only build: 191.8 MB from https://download.pytorch.org/whl/cpu (or pip's own find-links) + 6 packages, 10 MB, from PyPI";;
    pypi) what="torch 2.13.0 from PyPI: 111-122 MB on macOS/Windows, 427-527 MB on Linux (its CUDA build) + 6 packages, 10 MB";;
esac
step 3 "$what: $torch_lock"
# the CPU index is asked for torch only where TORCH=cpu; one retry, so that a machine that cannot reach it
# (a local copy in pip's find-links serves instead) loses seconds, not a minute of retries
index=()
[ "$torch" = cpu ] && index=(--extra-index-url "${TORCH_CPU_INDEX:-https://download.pytorch.org/whl/cpu}" --retries 1)
pip_install torch --require-hashes --no-deps "${index[@]}" -r "$torch_lock"
step 4 "triton 3.6.0 (its interpreter runs train/xent_triton.py's kernels in the tests): requirements-triton.lock, 188 MB"
pip_install triton --require-hashes --no-deps -r requirements-triton.lock
step 5 "this project, editable (no download: built with the venv's own pinned setuptools)"
pip_install project --no-deps --no-build-isolation -e .
echo "$torch" > "$venv/.installed"
echo "[setup] done in $((SECONDS - started)) s: $venv"
