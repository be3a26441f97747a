# The pipeline, stage by stage. `make help` lists the targets; variables chain them.
#
# Every target installs what is missing first: a virtual environment in $(VENV) with
# torch (the CPU build pinned below unless a torch is already importable) and this
# project with its test extras.

PYTHON     ?= python3
VENV       ?= .venv
TORCH      ?= torch==2.13.0
CORPUS     ?= data/corpus.txt
VOCAB_SIZE ?= 4096
TOKENIZER  ?= out/tokenizer.json
DATA       ?= out/$(basename $(notdir $(CORPUS)))
CONFIG     ?= tiny
RUN        ?= runs/$(notdir $(DATA))
CKPT       ?= $(RUN)/latest
GPUS       ?= 1
ARGS       ?=
PROMPT     ?= Once upon a time
WORKERS    ?= $(shell nproc 2>/dev/null || echo 1)
BENCH_DATA ?= data/bench

PY := $(VENV)/bin/python

.PHONY: help install test bench tokenizer encode train sample

help: ## List the targets and their variables.
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "variables: CORPUS=$(CORPUS) VOCAB_SIZE=$(VOCAB_SIZE) TOKENIZER=$(TOKENIZER) DATA=$(DATA) CONFIG=$(CONFIG)"
	@echo "           RUN=$(RUN) GPUS=$(GPUS) ARGS='$(ARGS)' CKPT=$(CKPT) PROMPT='$(PROMPT)' WORKERS=$(WORKERS)"
	@echo "           BENCH_DATA=$(BENCH_DATA)"

install: $(VENV)/.installed ## Create .venv with torch and this project (editable, with test extras).

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test]"
	touch $@

test: install ## Run the test suite (CPU only, a few minutes on 2 cores).
	$(PY) -m pytest

bench: install ## Benchmarks against the reference clients; corpora from ../shared/data/build_bench_corpus.py.
	$(PY) bench/tokenizer.py $(BENCH_DATA)/corpus_5mb.txt $(BENCH_DATA)/corpus_36mb.txt --workers 2
	$(PY) bench/encode.py $(BENCH_DATA)/corpus_5mb.txt $(BENCH_DATA)/corpus_36mb.txt --workers 1 2
	$(PY) bench/sample.py
	$(PY) bench/train.py

tokenizer: install ## Train a byte-level BPE on CORPUS with VOCAB_SIZE tokens, written to TOKENIZER.
	$(PY) -m tokenizer train --input $(CORPUS) --vocab-size $(VOCAB_SIZE) --out $(TOKENIZER) --workers $(WORKERS)

encode: install ## Encode CORPUS with TOKENIZER into train/val token shards in DATA.
	$(PY) -m pretokenize --tokenizer $(TOKENIZER) --input $(CORPUS) --out-dir $(DATA) --workers $(WORKERS)

train: install ## Train the CONFIG preset on DATA into RUN; GPUS=N>1 runs torchrun; ARGS adds flags (e.g. --resume).
	$(if $(filter-out 0 1,$(GPUS)),$(PY) -m torch.distributed.run --standalone --nproc_per_node=$(GPUS),$(PY)) -m train \
		--config $(CONFIG) --data $(DATA) --out $(RUN) $(ARGS)

sample: install ## Continue PROMPT with the checkpoint CKPT.
	$(PY) -m sample --checkpoint $(CKPT) --prompt "$(PROMPT)"
