# Two commands set everything up on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_VERSION := 2.13.0
# wheel index of a CUDA build of torch (pick the CUDA version of your driver: cu126, cu128, ...)
TORCH_INDEX ?= https://download.pytorch.org/whl/cu128

.PHONY: run test test-all lint format bench clean venv venv-cuda train-gpu docs docs-check

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==$(TORCH_VERSION)
	$(BIN)/pip install -e '.[all,dev]'
	touch $(STAMP)

venv: $(STAMP)

# A GPU box: the same venv with torch from $(TORCH_INDEX) (a CUDA build), then the package; prints what torch sees.
venv-cuda:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --upgrade pip
	$(BIN)/pip install torch==$(TORCH_VERSION) --index-url $(TORCH_INDEX)
	$(BIN)/pip install -e '.[all,dev]'
	touch $(STAMP)
	$(BIN)/python -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda, 'GPU available:', torch.cuda.is_available())"

# Train the shipped PPO config on the GPU when there is one (--device auto: CUDA if available, else the CPU).
train-gpu: venv-cuda
	$(BIN)/gpusched train ppo --config ppo_jobselect_gnn --device auto --out runs/ppo_gpu

run: $(STAMP)
	$(BIN)/gpusched leaderboard --suite quick --workers 2 --out results/leaderboard/quick

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(MAKE) docs-check
	$(BIN)/python -m pytest -q -p no:cacheprovider

test-all: $(STAMP)
	$(BIN)/python -m pytest -q -m '' -p no:cacheprovider

# The documentation site (MkDocs + Material + mkdocstrings) into site/; --strict fails on a broken link or reference.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

# The same strict build into a temporary folder (run by `make test`).
docs-check: $(STAMP)
	d=$$(mktemp -d) && NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $$d/site; \
	  rc=$$?; rm -rf $$d; exit $$rc

lint: $(STAMP)
	$(BIN)/ruff check . && $(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff format . && $(BIN)/ruff check --fix .

bench: $(STAMP)
	$(BIN)/gpusched bench

clean:
	rm -rf $(VENV) build *.egg-info site
