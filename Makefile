# Entry points. `make demo` runs the whole flow on any machine; `make reproduce` is the real thing
# on an 8xH100 node; `make test` is what CI runs (.ci/run).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# CPU development and CI take torch's CPU build; on GPU nodes training runs inside the pinned image.
TORCH_SPEC ?= torch==2.13.0
RECORD ?= 2025-09-23_MuonCustomSizing
RUNS   ?= 4

.PHONY: setup test lint demo reproduce smoke docker-engine slurm-cluster chromium clean

setup: $(VENV)/.installed

# The orchestrator's dependencies come from requirements.lock (every file's sha256 enforced; regenerate with
# `uv pip compile pyproject.toml --extra dev --universal --python-version 3.10 --generate-hashes -o requirements.lock`).
# torch is the CPU trainer's, installed beside it; GPU nodes train in the pinned image or `repro env venv`.
$(VENV)/.installed: pyproject.toml requirements.lock requirements-triton.lock
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check --require-hashes -r requirements.lock
	$(BIN)/pip install -q --disable-pip-version-check "$(TORCH_SPEC)"
	$(BIN)/pip install -q --disable-pip-version-check --require-hashes --no-deps -r requirements-triton.lock
	$(BIN)/pip install -q --disable-pip-version-check --no-deps -e .
	touch $@

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

demo: setup
	$(BIN)/repro reproduce --demo --runs 2

reproduce: setup
	$(BIN)/repro reproduce --record $(RECORD) --runs $(RUNS)

# Before paying for full runs: the record's exact program with its step count cut (verdict smoke-passed).
SMOKE ?= 40
smoke: setup
	$(BIN)/repro reproduce --record $(RECORD) --runs 1 --smoke $(SMOKE)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
