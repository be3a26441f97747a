# The pipeline, stage by stage. `make help` lists the targets; variables chain them.
#
# Every target installs what is missing first: a virtual environment in $(VENV) with
# torch (the CPU build pinned below unless a torch is already importable) and this
# project with its test and lint extras.

PYTHON     ?= python3
VENV       ?= .venv
TORCH      ?= torch==2.13.0
CORPUS     ?= data/stories.txt
CORPUS_SIZE ?= 10MB
DATASET    ?= tinystories
DEMO       ?= out/demo
# auto: 512, 1024 or 4096 tokens, chosen for the corpus by its size and how often it repeats itself
# (tokenizer/vocab.py, measured with the recipe: docs/benchmarks/2026-11-24-recipe-vocabulary.md).
VOCAB_SIZE ?= auto
# Both named after the corpus (data/stories.txt: stories), so a second corpus replaces neither of the
# first's. The tokenizer sits beside DATA, not in it: pretokenize writes its own copy into DATA, and a
# retrained tokenizer in there would sit beside shards of the old one.
CORPUS_NAME = $(basename $(notdir $(patsubst %/,%,$(CORPUS))))
TOKENIZER  ?= out/$(CORPUS_NAME)-tokenizer.json
DATA       ?= out/$(CORPUS_NAME)
# A corpus's own validation text, kept beside it as CORPUS-val (make data puts TinyStories' there).
VAL_CORPUS ?= $(wildcard $(patsubst %/,%,$(CORPUS))-val)
CONFIG     ?=# empty: train.recipe sizes the model for DATA and the time budget (5m, or ARGS=--max-time 20m)
RUN        ?= runs/$(notdir $(DATA))
CKPT       ?= $(RUN)/latest
GPUS       ?= 1
ARGS       ?=
PROMPT     ?= Once upon a time
PORT       ?= 8000
THREADS    ?=# empty: every stage's --threads default (workers: one per physical core; torch: measured)
BENCH_DATA ?= data/bench
GPU_CHECK_OUT ?= out/gpu-check

PY := $(VENV)/bin/python
GPTKIT := $(VENV)/bin/gptkit
THREADS_FLAG = $(if $(THREADS),--threads $(THREADS))
# $(call needs,PATHS,WHAT,HOW): a step whose input an earlier step makes checks it first, so that a
# step taken too soon says which one to run (ls: CORPUS may be a glob).
needs = @ls -d $(1) >/dev/null 2>&1 || { echo "Error: $(1): no such $(2); $(3)" >&2; exit 2; }

.PHONY: help install demo test lint bench corpus data tokenizer encode train sample serve plot llama-cpp test-gguf

help: ## List the targets and their variables.
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "variables: CORPUS=$(CORPUS) VAL_CORPUS=$(VAL_CORPUS) CORPUS_SIZE=$(CORPUS_SIZE) DATASET=$(DATASET) VOCAB_SIZE=$(VOCAB_SIZE)"
	@echo "           TOKENIZER=$(TOKENIZER) DATA=$(DATA) CONFIG=$(CONFIG)"
	@echo "           RUN=$(RUN) GPUS=$(GPUS) ARGS='$(ARGS)' CKPT=$(CKPT) PROMPT='$(PROMPT)' PORT=$(PORT) THREADS=$(THREADS)"
	@echo "           BENCH_DATA=$(BENCH_DATA) GPU_CHECK_OUT=$(GPU_CHECK_OUT)"

install: $(VENV)/.installed ## Create .venv with torch and this project (editable, with test and lint extras).

$(VENV)/.installed: pyproject.toml setup.py $(wildcard tokenizer/*.c)
	$(PYTHON) -m venv --system-site-packages $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH)"
	$(PY) -m pip install -q -e ".[test,lint]"
	touch $@

demo: install ## The whole pipeline offline on CPU: stories -> tokenizer -> shards -> tiny model -> samples, in DEMO.
	rm -rf $(DEMO) && mkdir -p $(DEMO)
	$(GPTKIT) stories --out $(DEMO)/stories.txt --size 10MB --seed 0
	$(GPTKIT) tokenizer train --input $(DEMO)/stories.txt --vocab-size 2048 --out $(DEMO)/tokenizer.json $(THREADS_FLAG)
	$(GPTKIT) pretokenize --tokenizer $(DEMO)/tokenizer.json --input $(DEMO)/stories.txt --out $(DEMO)/stories $(THREADS_FLAG)
	$(GPTKIT) train --config tiny --data $(DEMO)/stories --out $(DEMO)/run $(THREADS_FLAG)
	$(GPTKIT) sample --checkpoint $(DEMO)/run/latest --prompt "Once upon a time" --num-samples 3 --max-new-tokens 120 --seed 0 $(THREADS_FLAG)

# Two processes (pytest-xdist; CI's machine has 2 cores): each takes a whole test file (loadscope), so a
# file's module fixtures (the FSDP runs, the launched run) are made once; files in their order
# (--no-loadscope-reorder), the few long ones of tests/integration first and the many short ones of
# tests/unit last, which even out the two processes' ends. Not in pyproject's addopts: a single file
# run by hand, and bench/gpu_check.py's own pytest on a GPU machine without xdist, stay one process.
test: install ## Run the test suite in two processes (CPU only, about 5 minutes on 2 cores).
	$(PY) -m pytest -n 2 --dist loadscope --no-loadscope-reorder

# llama.cpp through llama-cpp-python, built from source (7 minutes on 2 idle cores, so not in CI): what the
# GGUF export's tests run the exported files with. GGML_NATIVE=OFF: a build for any x86-64 CPU, not only this one.
LLAMA_CPP_CMAKE ?= -DGGML_NATIVE=OFF
llama-cpp: install ## Build llama-cpp-python (llama.cpp) from source into .venv, for make test-gguf (about 7 minutes on 2 cores).
	CMAKE_ARGS="$(LLAMA_CPP_CMAKE)" $(PY) -m pip install -v llama-cpp-python

test-gguf: install ## The GGUF export's tests, llama.cpp's own among them (make llama-cpp first; skipped without it).
	$(PY) -m pytest tests/unit/test_gguf.py tests/integration/test_export_gguf.py

# mypy finds a module by its path, and gptkit.train's is train/: setuptools' package-dir has no mypy
# counterpart (mypy_path, explicit_package_bases and files all name a module after its folders), so mypy
# reads the package through MYPY_TREE, links laid out as it installs (gptkit/cli.py, gptkit/train -> train/,
# ...; the stages from pyproject's package-dir), the tree that pyproject's mypy_path names. Its findings
# are shown at the files here (train/cli.py, not build/mypy/gptkit/train/cli.py).
MYPY_TREE = build/mypy
STAGES = $(shell sed -n 's/^"gptkit\.[a-z_]*" = "\([a-z_]*\)"$$/\1/p' pyproject.toml)

lint: install ## ruff's lint and format check, then mypy (pyproject's [tool.ruff], [tool.mypy]); fails on any finding.
	rm -rf $(MYPY_TREE) && mkdir -p $(MYPY_TREE)/gptkit
	ln -s $(addprefix $(CURDIR)/,$(wildcard gptkit/*.py)) $(MYPY_TREE)/gptkit/
	$(foreach stage,$(STAGES),ln -s $(CURDIR)/$(stage) $(MYPY_TREE)/gptkit/$(stage) &&) true
	@status=0; \
	echo "ruff check ."; $(VENV)/bin/ruff check . || status=1; \
	echo "ruff format --check ."; $(VENV)/bin/ruff format --check . || status=1; \
	echo "mypy -p gptkit"; out=$$($(VENV)/bin/mypy -p gptkit 2>&1) || status=1; \
	printf '%s\n' "$$out" | sed -e 's|^$(MYPY_TREE)/gptkit/\([a-z_]*/\)|\1|' -e 's|^$(MYPY_TREE)/||'; \
	exit $$status

# The compiled peers (rustbpe, tiktoken, a server's one client) on source code no one wrote for this project:
# BENCH_CODE_MB of the machine's own .py files (bench/code_corpus.py; 0: all of them, 770 MB here).
BENCH_CODE_MB ?= 100
BENCH_CODE = $(BENCH_DATA)/code-$(BENCH_CODE_MB)mb.txt

$(BENCH_CODE):
	mkdir -p $(BENCH_DATA) && $(PY) bench/code_corpus.py $@ $(if $(filter 0,$(BENCH_CODE_MB)),,--max-mb $(BENCH_CODE_MB))

bench: install $(BENCH_CODE) ## Benchmarks against the reference clients, idle and beside two busy processes (ratios printed).
	$(PY) bench/tokenizer.py $(BENCH_DATA)/corpus_5mb.txt $(BENCH_DATA)/corpus_36mb.txt --threads 2
	$(PY) bench/encode.py $(BENCH_DATA)/corpus_5mb.txt $(BENCH_DATA)/corpus_36mb.txt --threads 1 2
	for busy in 0 2; do \
	  $(PY) bench/tokenizer.py $(BENCH_CODE) --vocab-size 32000 --threads 2 --repeat 1 --tasks train --busy $$busy && \
	  $(PY) bench/encode.py $(BENCH_CODE) --vocab-size 32000 --threads 1 2 --repeat 1 --busy $$busy && \
	  $(PY) bench/encode.py $(BENCH_CODE) --tokenizer llama3 --vocab-size 32000 --threads 2 --repeat 1 --busy $$busy && \
	  $(PY) bench/encode.py $(BENCH_CODE) --tokenizer qwen2 --vocab-size 32000 --threads 2 --repeat 1 --busy $$busy && \
	  $(PY) bench/encode_imported.py $(BENCH_CODE) --vocab-size 32000 --threads 1 2 --repeat 1 --busy $$busy && \
	  $(PY) bench/serve.py --clients 1 8 --busy $$busy || exit 1; \
	done
	$(PY) bench/sample.py
	$(PY) bench/train.py

# bench/gpu_check.py (issue 31) on a GPU machine as it comes: a CUDA torch in its Python, often no package
# index. Nothing is installed: GPU_PYTHON (the first of .venv's and PYTHON's Python whose torch sees a CUDA
# device, else the first with a torch) runs this checkout as it is (gptkit/__init__.py finds the stages
# beside it). GPU_CHECK_DRY=1 (from the environment or the command line) runs the CPU dry run that
# tests/integration/test_gpu_check.py runs.
GPU_PYTHON ?= $(shell for p in $(wildcard $(PY)) $(PYTHON); do \
	$$p -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null && { echo $$p; exit; }; done; \
	for p in $(wildcard $(PY)) $(PYTHON); do $$p -c 'import torch' 2>/dev/null && { echo $$p; exit; }; done; echo $(PYTHON))

.PHONY: gpu-check
gpu-check: ## Every GPU promise in one call (<= 10 min on one H100), installing nothing: a table, GPU_CHECK_OUT/report.json.
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} GPU_CHECK_OUT=$(GPU_CHECK_OUT) GPU_CHECK_DRY=$(GPU_CHECK_DRY) \
		$(GPU_PYTHON) bench/gpu_check.py

NO_CORPUS = make corpus CORPUS=$(CORPUS) generates stories there (or make data downloads a corpus into data/DATASET)

corpus: install ## Generate CORPUS_SIZE of simple English stories (the embedded corpus) into CORPUS.
	$(GPTKIT) stories --out $(CORPUS) --size $(CORPUS_SIZE) $(if $(filter data/stories.txt,$(CORPUS)),--overwrite)

# The default corpus is made when a stage needs it and it is missing, and `make corpus` replaces it;
# any other CORPUS is yours: `make corpus` refuses to replace a file there (gptkit stories --overwrite).
data/stories.txt: | $(VENV)/.installed
	$(GPTKIT) stories --out $@ --size $(CORPUS_SIZE)

data: install ## Download DATASET (tinystories | fineweb-edu) into data/DATASET, its validation file into data/DATASET-val; then CORPUS=data/DATASET.
	$(GPTKIT) pretokenize download $(DATASET) --out data/$(DATASET)

tokenizer: install $(filter data/stories.txt,$(CORPUS)) ## Train a byte-level BPE on CORPUS with VOCAB_SIZE tokens, written to TOKENIZER (one per corpus).
	$(call needs,$(CORPUS),corpus,$(NO_CORPUS))
	$(GPTKIT) tokenizer train --input $(CORPUS) --vocab-size $(VOCAB_SIZE) --out $(TOKENIZER) $(THREADS_FLAG)

encode: install $(filter data/stories.txt,$(CORPUS)) ## Encode CORPUS with TOKENIZER into train/val token shards in DATA; VAL_CORPUS, if any, is the val split.
	$(call needs,$(CORPUS),corpus,$(NO_CORPUS))
	$(call needs,$(TOKENIZER),tokenizer,make tokenizer trains it)
	$(GPTKIT) pretokenize --tokenizer $(TOKENIZER) --input $(CORPUS) $(if $(VAL_CORPUS),--val-input $(VAL_CORPUS)) \
		--out $(DATA) $(THREADS_FLAG)

train: install ## Train on DATA into RUN: the recipe, or the CONFIG preset; GPUS=N>1: one process per GPU (--nproc-per-node); ARGS adds flags.
	$(call needs,$(DATA),data directory,make encode writes it)
	$(GPTKIT) train $(if $(filter-out 0 1,$(GPUS)),--nproc-per-node $(GPUS)) \
		$(if $(CONFIG),--config $(CONFIG)) --data $(DATA) --out $(RUN) $(THREADS_FLAG) $(ARGS)

# No run of its own: not the demo's model in its place (RUN's was asked for), but its name if there is one.
sample: install ## Continue PROMPT with the checkpoint CKPT.
	$(call needs,$(CKPT),checkpoint,make train writes it$$(test -e $(DEMO)/run/latest && echo " (the demo's model: make sample CKPT=$(DEMO)/run/latest)"))
	$(GPTKIT) sample --checkpoint $(CKPT) --prompt "$(PROMPT)" $(THREADS_FLAG)

serve: install ## Serve the checkpoint CKPT with the OpenAI API and a chat page on http://127.0.0.1:PORT/ (8000).
	$(call needs,$(CKPT),checkpoint,make train writes it$$(test -e $(DEMO)/run/latest && echo " (the demo's model: make serve CKPT=$(DEMO)/run/latest)"))
	$(GPTKIT) serve --checkpoint $(CKPT) --port $(PORT) $(THREADS_FLAG) $(ARGS)

plot: install ## Plot RUN's training and validation loss and learning rate to RUN/loss.png (needs matplotlib).
	$(call needs,$(RUN),run,make train writes it)
	$(GPTKIT) train plot $(RUN)
