"""The default CPU recipe: a model, batch and schedule sized for the corpus and the time budget.

`train` without --config on the CPU trains with `recipe(...)`'s settings (flags still win). A
preset is sized for a machine and a corpus that may not be the user's: the `tiny` preset (3.7M
parameters, 16 x 256 tokens a step) does ~140 steps in 2 minutes of a 2-core CPU, far too few
to learn much, and a 0.8M-parameter character model doing 2,000 steps in those minutes beat
it. What counts on a CPU budget is how many steps the budget buys, so the recipe estimates the
step time of each shape of a ladder from its FLOPs and the CPU's measured FLOP rate, and takes
the largest shape that still trains on enough tokens for its size (TOKENS_PER_PARAM); more
time buys a bigger model, never a smaller one. The corpus sets a ceiling: more parameters
than MAX_PARAMS_PER_TOKEN per training token only memorize it.

On CUDA there is no recipe: the FLOP rate below is a CPU's, and nothing here was measured on a
GPU. Without --config a CUDA run takes the `tiny` preset (GPU_PRESET), as `make train` gave it
before the recipe; other GPU runs name a preset.

bench/recipe.py measures the recipe against a nanoGPT-style char model in the same minutes.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

GPU_PRESET = "tiny"
DEFAULT_BUDGET = "5m"  # without any length flag: long enough to learn something, short enough to wait for

# Training FLOPs a second per CPU thread (fp32) at these small shapes, on the 2-core machine of
# bench/recipe.py: nanoGPT's char model (5.2 MFLOP a token, 12 x 64 tokens a step) does 2,000
# steps in 2 minutes (issue 12), 67 GFLOP/s on 2 threads (2,741 steps, 92 GFLOP/s, in the bench
# at load 1.2-1.9); bigger matrices do better (tiny: ~120 GFLOP/s). The low figure under-promises:
# a shape then gets more steps than planned (d 96: 1,688 of 1,277 in the bench), never fewer.
CPU_FLOPS_PER_THREAD = 33e9

# Training tokens per parameter that a shape must get in the budget. On 1 MB of text (Tiny
# Shakespeare, 1024 tokens) each shape trained for the steps it gets in 2 minutes of 2 threads
# scored, in held-out bits per byte: d 192 (~300 steps, 0.3 tokens per parameter) 2.45, d 128
# (~600, 1.4) 2.29, d 96 with 3 layers (~1,300, 6) 2.19, d 64 with 2 layers (~2,450, 30) 2.24
# (README, "Small corpora on a CPU"). Keeping the ratio as the budget grows splits more compute
# evenly between a bigger model and more tokens, as Chinchilla's compute-optimal rule does
# (both grow as its square root; the ratio is lower than Chinchilla's 20 at this tiny scale).
TOKENS_PER_PARAM = 6

# A ceiling from the corpus, a judgment rather than a measurement: nanoGPT's shakespeare_char fits
# 10.7M parameters to 1M characters only with dropout 0.2; we train without dropout, so at most
# 4 parameters per training token (it binds only on long budgets over small corpora).
MAX_PARAMS_PER_TOKEN = 4


@dataclass(frozen=True)
class Shape:
    """One rung of the ladder: the model, the batch, and a peak learning rate that suits it."""

    d_model: int
    n_layers: int
    n_heads: int  # head size 32 below d_model 256, 64 from there
    d_ff: int  # SwiGLU hidden size: 8/3 d_model rounded to a multiple of 8, as LLaMA's
    context: int
    batch: int
    lr: float  # AdamW; smaller models take larger steps (tiny's 3e-3 at d 256, GPT-2's 6e-4 at d 768)

    def model(self, vocab_size):
        return {"vocab_size": vocab_size, "context_length": self.context, "d_model": self.d_model,
                "n_layers": self.n_layers, "n_heads": self.n_heads, "d_ff": self.d_ff, "tie_embeddings": True}


# Smallest first. Tokens per step grow with the model (2K -> 16K): a bigger model has the budget
# for fewer steps, and gets a less noisy gradient in each.
LADDER = (
    Shape(64, 2, 2, 176, 64, 32, 3e-3),
    Shape(96, 3, 3, 256, 128, 16, 3e-3),
    Shape(128, 4, 4, 344, 128, 16, 3e-3),
    Shape(192, 4, 6, 512, 128, 32, 3e-3),
    Shape(256, 4, 4, 688, 256, 32, 3e-3),
    Shape(384, 6, 6, 1024, 256, 32, 2e-3),
    Shape(512, 8, 8, 1368, 256, 64, 1e-3),
    Shape(768, 12, 12, 2048, 512, 32, 6e-4),
)

WARMUP_FRACTION = 0.05  # of the planned steps: long enough for AdamW's moments, short against the run
EVALS = 5  # validations in a run (the last one included)


@dataclass(frozen=True)
class Recipe:
    shape: Shape
    vocab_size: int
    params: int
    steps: int  # the estimate the shape was chosen by (--max-time measures the real number)

    def settings(self, steps=None):
        """TrainConfig fields; `steps`: the length of the run where it is fixed in steps."""
        s, steps = self.shape, steps or self.steps
        return {"model": s.model(self.vocab_size), "batch_size": s.batch, "lr": s.lr, "min_lr": s.lr / 10,
                "warmup_steps": max(1, round(WARMUP_FRACTION * steps)), "eval_interval": max(1, steps // EVALS)}

    def line(self, train_tokens, budget, threads, config):
        """What train logs at its start: the corpus, the budget, and the choice (`config`: with the flags)."""
        model, context = config.model, config.context_length or config.model["context_length"]
        epochs = self.steps * config.batch_size * context / max(train_tokens, 1)
        corpus = f"{train_tokens / 1e6:.1f}M" if train_tokens >= 100_000 else f"{train_tokens / 1e3:.0f}K"
        return (f"recipe for {corpus} training tokens and {budget} on cpu ({threads} threads): "
                f"d {model['d_model']}, {model['n_layers']} layers, {model['n_heads']} heads, d_ff {model['d_ff']}, "
                f"{self.params / 1e6:.2f}M parameters, batch {config.batch_size} x {context}, "
                f"lr {config.lr:g}, warmup {config.warmup_steps} (about {self.steps:,} steps in the budget, {epochs:.1f} "
                f"epochs; pass --config for a preset)")


def recipe(train_tokens, vocab_size, budget_seconds, threads) -> Recipe:
    """The largest shape of LADDER that trains on TOKENS_PER_PARAM tokens per parameter in
    `budget_seconds` on `threads` CPU threads and has at most MAX_PARAMS_PER_TOKEN parameters
    per training token; the smallest shape if none does."""
    from gptkit.model.config import ModelConfig
    from gptkit.model.info import model_cost

    flops = CPU_FLOPS_PER_THREAD * threads * budget_seconds

    def plan(shape):
        cost = model_cost(ModelConfig(**shape.model(vocab_size)))
        return Recipe(shape, vocab_size, cost.params, int(flops / (cost.flops_per_token * shape.batch * shape.context)))

    chosen = plan(LADDER[0])
    for shape in LADDER[1:]:
        candidate = plan(shape)
        tokens = candidate.steps * shape.batch * shape.context
        if tokens >= TOKENS_PER_PARAM * candidate.params and candidate.params <= MAX_PARAMS_PER_TOKEN * train_tokens:
            chosen = candidate
    return chosen


def recipe_config(overrides):
    """The TrainConfig of a run given no --config: the recipe for its --data and budget, with
    `overrides` (the flags) on top. Where the flags name the model (--model: the user has
    chosen it) or give no data (with_overrides says it is needed), the flags go on TrainConfig's
    defaults, as with no recipe; on CUDA, on the GPU_PRESET preset."""
    import torch

    from .config import LENGTH, load_train_config, parse_duration, with_overrides
    from .data import data_tokenizer

    if "model" in overrides or overrides.get("data") is None:
        return with_overrides({}, overrides)
    device = overrides.get("device", "auto")
    if device == "cuda" or (device == "auto" and torch.cuda.is_available()):
        _log(f"no recipe on cuda: the {GPU_PRESET} preset (pass --config for another)")
        return load_train_config(GPU_PRESET, overrides)
    data = overrides["data"]
    budget = overrides.get("max_time") or DEFAULT_BUDGET
    threads, train_tokens = torch.get_num_threads(), _train_tokens(data)
    chosen = recipe(train_tokens, data_tokenizer(data).vocab_size, parse_duration(budget), threads)
    if not any(overrides.get(k) is not None for k in LENGTH):
        settings = {**chosen.settings(), "max_time": budget}
    elif overrides.get("max_time") is None:  # a length in steps or tokens: the warmup and evaluations fit it
        tokens_per_step = overrides.get("batch_size", chosen.shape.batch) * chosen.shape.context
        settings = chosen.settings(overrides.get("max_steps") or -(-overrides["max_tokens"] // tokens_per_step))
    else:
        settings = chosen.settings()
    config = with_overrides(settings, overrides)
    _log(chosen.line(train_tokens, budget if overrides.get("max_time") else f"{budget} (the default budget)", threads, config))
    return config


def _log(line):
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one line, not one a process
        print(line, flush=True)


def _train_tokens(data):
    """Training tokens of a shard directory: its manifest's count, else the shards' own."""
    from gptkit.shared.shards import open_shard, read_manifest, shard_paths

    totals = (read_manifest(data) or {}).get("totals", {}).get("train", {})
    if "tokens" in totals:
        return totals["tokens"]
    return sum(len(open_shard(path).tokens) for path in shard_paths(data, "train"))
