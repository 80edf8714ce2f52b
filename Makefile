# gpusched: two commands for a new user.
#   make run   -- set everything up and run the main job on the built-in default
#   make test  -- set everything up and run every check and test
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TRACES ?= ../shared/traces

.PHONY: run test setup lint typecheck unit bench clean controlplane

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/gpusched simulate

lint: setup
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests
	$(BIN)/lint-imports

typecheck: setup
	$(BIN)/mypy

unit: setup
	GPUSCHED_TRACES=$(TRACES) $(BIN)/python -m pytest -q -n 2

test: lint typecheck unit

# kube-apiserver, kube-scheduler, kubectl, etcd, kwok from the Go module proxy, cached per version
# (docs/live.md); the e2e tests run this themselves when the binaries are missing.
controlplane: setup
	hack/controlplane/build.sh

bench: setup
	$(BIN)/gpusched bench openb --trace-dir $(TRACES)/openb --workload default

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis
