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
CKPT       ?= out/model
PROMPT     ?= Once upon a time
WORKERS    ?= $(shell nproc 2>/dev/null || echo 1)
BENCH_DATA ?= data/bench

PY := $(VENV)/bin/python

.PHONY: help install test bench tokenizer encode model sample

help: ## List the targets and their variables.
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "variables: CORPUS=$(CORPUS) VOCAB_SIZE=$(VOCAB_SIZE) TOKENIZER=$(TOKENIZER) DATA=$(DATA) CONFIG=$(CONFIG)"
	@echo "           CKPT=$(CKPT) PROMPT='$(PROMPT)' WORKERS=$(WORKERS) BENCH_DATA=$(BENCH_DATA)"

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

tokenizer: install ## Train a byte-level BPE on CORPUS with VOCAB_SIZE tokens, written to TOKENIZER.
	$(PY) -m tokenizer train --input $(CORPUS) --vocab-size $(VOCAB_SIZE) --out $(TOKENIZER) --workers $(WORKERS)

encode: install ## Encode CORPUS with TOKENIZER into train/val token shards in DATA.
	$(PY) -m pretokenize --tokenizer $(TOKENIZER) --input $(CORPUS) --out-dir $(DATA) --workers $(WORKERS)

model: install ## Write a randomly initialized CONFIG model for TOKENIZER to CKPT (before training exists).
	$(PY) -m model init --config $(CONFIG) --tokenizer $(TOKENIZER) --out $(CKPT)

sample: install ## Continue PROMPT with the checkpoint CKPT.
	$(PY) -m sample --checkpoint $(CKPT) --prompt "$(PROMPT)"
