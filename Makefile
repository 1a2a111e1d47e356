# Entry points. `make demo` runs the whole flow on any machine; `make reproduce` is the real thing
# on an 8xH100 node; `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
RECORD ?= 2025-09-23_MuonCustomSizing
RUNS   ?= 4
# torch, locked like everything else (every file's sha256; tools/torch_lock.py writes both locks):
#   TORCH=cpu  (default) torch 2.13.0+cpu, the CPU-only build: 191.8 MB from https://download.pytorch.org/whl/cpu
#              (or from a copy pip's own configuration finds, as on this project's machines); pinned for CPython
#              3.11 on Linux x86_64, the file checked here: any other Python or machine stops at pip's hash check.
#   TORCH=pypi torch 2.13.0 from PyPI, every file PyPI publishes pinned: 111 MB (macOS arm64), 122 MB (Windows);
#              on Linux it is PyPI's CUDA build (427 MB aarch64, 527 MB x86_64), whose CUDA libraries (~3 GB)
#              are not in the lock, so `import torch` fails there: on Linux take TORCH=cpu.
# Both add 6 packages torch needs (10 MB, PyPI) and triton 3.6.0 (188 MB, requirements-triton.lock).
TORCH  ?= cpu
# a TORCH with no lock stops here, with the choices (as a prerequisite, the absent lock stopped make on its name)
ifeq ($(wildcard requirements-torch-$(TORCH).lock),)
$(error TORCH=$(TORCH) is not a choice: TORCH=cpu (default) or TORCH=pypi)
endif

.PHONY: setup test lint demo reproduce smoke docker-engine slurm-cluster chromium clean

setup: $(VENV)/.installed

# The orchestrator's dependencies come from requirements.lock (every file's sha256 enforced; regenerate with
# `uv pip compile pyproject.toml --extra dev --universal --python-version 3.10 --generate-hashes -o requirements.lock`),
# torch from requirements-torch-$(TORCH).lock, triton from requirements-triton.lock: pip --require-hashes on each
# (tests/test_setup_locked.py). The script prints each step with what it installs, and waits for another make's
# build of the same venv instead of racing it.
$(VENV)/.installed: pyproject.toml requirements.lock requirements-torch-$(TORCH).lock requirements-triton.lock tools/setup_venv.sh
	@tools/setup_venv.sh "$(PYTHON)" "$(VENV)" "$(TORCH)"

# ruff, and the import contract: stage order, public faces, train/ never importing pipeline/ (tests/test_layers.py)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_layers.py

test: lint
	$(BIN)/python -m pytest -q

# Install and start a Docker engine on this machine (root): what the docker tests need.
docker-engine:
	bash tests/ci/docker-engine.sh

# Install Slurm from Debian and start a one-host cluster (munge, slurmctld, two slurmd nodes; root):
# what the campaign tests on Slurm need (tests/test_campaign_slurm.py).
slurm-cluster:
	bash tests/ci/slurm.sh

# Install Debian's headless Chromium and chromium-driver (root): what the browser tests of the HTML report and
# the records site drive through Selenium (tests/test_html_browser.py).
chromium:
	bash tests/ci/chromium.sh

# GNU make ends every failed recipe with its own status 2; the tool's code (README, exit codes) is the "Error N"
# of make's last line and is printed before it; `bin/repro ARGS` (the command each target shows) returns it.
REPRO = tools/repro_status.sh $(BIN)/repro

# The demo takes 2 runs unless RUNS is given (`make demo RUNS=4`); reproduce's default is the record's 4.
# ARGS: more options for the command, e.g. `make demo ARGS=--stream` (the trainer's own output)
demo: setup
	@$(REPRO) reproduce --demo --runs $(if $(filter command line environment,$(origin RUNS)),$(RUNS),2)$(if $(ARGS), $(ARGS))

reproduce: setup
	@$(REPRO) reproduce --record $(RECORD) --runs $(RUNS)$(if $(ARGS), $(ARGS))

# Before paying for full runs: the record's exact program with its step count cut (verdict smoke-passed).
SMOKE ?= 40
smoke: setup
	@$(REPRO) reproduce --record $(RECORD) --runs 1 --smoke $(SMOKE)$(if $(ARGS), $(ARGS))

clean:
	rm -rf $(VENV) $(VENV).lock $(VENV).lock.pid .pytest_cache .ruff_cache
