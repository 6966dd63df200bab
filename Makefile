# Two commands set everything up on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0

.PHONY: run test test-all lint format bench clean venv

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==$(TORCH_VERSION)
	$(BIN)/pip install -e '.[dev,solver,ray]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/gpusched leaderboard --suite quick --out results/leaderboard/quick

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m '' -p no:cacheprovider

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/gpusched bench

clean:
	rm -rf $(VENV) build *.egg-info
