"""The default recipe: a model, batch and schedule sized for the corpus, the time budget and
the device the run has.

`train` without --config and without --model trains with the recipe's settings (flags still
win). A preset is sized for a machine and a corpus that may not be the user's: the `tiny` preset
(3.7M parameters, 16 x 256 tokens a step) does ~140 steps in 2 minutes of a 2-core CPU, far too
few to learn much, and a 0.8M-parameter character model doing 2,000 steps in those minutes beat
it. What counts on a budget is how many steps it buys, and that depends on the machine as it is
now: the same CPU trains 2.7x slower beside two busy processes (bench/threads.py). So the recipe
times a few training steps of each shape of a ladder on the run's own device (the CPU with the
threads the load allows, or the GPU), climbing from the smallest, and takes the largest shape
that still trains on enough tokens for its size (TOKENS_PER_PARAM, per parameter outside the
embedding) in the budget; more time buys
a bigger model, never a smaller one. The corpus sets a ceiling: more parameters than
MAX_PARAMS_PER_TOKEN per training token only memorize it.

Timing is done on the model uncompiled: where the run compiles it (CUDA) the run is faster than
timed, and --max-time plans the steps from the run's own throughput in any case.

bench/recipe.py measures the recipe against a nanoGPT-style char model in the same minutes, and
bench/time_budget.py the same run on an idle and on a busy machine.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from gptkit.model.config import ModelConfig
from gptkit.model.info import model_cost
from gptkit.runtime.threads import Threads
from gptkit.shared.errors import GptkitError
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.text import counted
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge, cut_split, cuttable

from .config import TrainConfig, parse_duration
from .repeats import REPEAT_CONTEXT, REPEAT_SHARE, REPEAT_SPAN, Repeats
from .sections import DEFAULT_BUDGET
from .timing import StepTimer, TimedShapes, step_timer
from .trials import ENOUGH_STEPS, VAL_TOKENS, Candidate, Score, Tokens, Trial, halving, scored

# Training tokens per parameter that a shape must get in the budget. On 1 MB of text (Tiny
# Shakespeare, 1024 tokens) each shape trained for the steps it gets in 2 minutes of 2 threads
# scored, in held-out bits per byte: d 192 (~300 steps, 0.3 tokens per parameter) 2.45, d 128
# (~600, 1.4) 2.29, d 96 with 3 layers (~1,300, 6) 2.19, d 64 with 2 layers (~2,450, 30) 2.24
# (README, "Small corpora on a CPU"). Keeping the ratio as the budget grows splits more compute
# evenly between a bigger model and more tokens, as Chinchilla's compute-optimal rule does
# (both grow as its square root; the ratio is lower than Chinchilla's 20 at this tiny scale).
# The parameters counted are those outside the token embedding (Kaplan et al.'s count): a row of
# the embedding costs a lookup, not compute. Counted in, they sent a 4096-token vocabulary on the
# same 1 MB to the smallest rung (d 64), which scored worse than d 96 on every text tried: 1.256
# against 1.196 bits per byte on Python's standard library, 1.407 against 1.378 on Russian.
TOKENS_PER_PARAM = 6

# A ceiling from the corpus, a judgment rather than a measurement: nanoGPT's shakespeare_char fits
# 10.7M parameters to 1M characters only with dropout 0.2; at most 4 non-embedding parameters per
# training token (it binds only on long budgets over small corpora).
MAX_PARAMS_PER_TOKEN = 4

# Dropout where the run could memorize its corpus. A model memorizes in fewer passes the more
# parameters it has, its embedding's included (the rows of a 4,096-token vocabulary store what each
# token did), so the measure is the passes over the training tokens times the parameters: past
# MEMORIZE_PARAM_EPOCHS, dropout scored better in 14 of 16 runs, below it worse or within 1.5%
# (docs/benchmarks/2026-11-26-recipe-dropout.md: 14 kinds of text, d 64 and d 96, 1.7M to 19.6M). Passes alone cannot
# draw the line: at 27 passes a 0.36M-parameter model memorizes Chinese and a 0.17M one does not
# memorize Urdu. Within MEMORIZE_EPOCHS passes, repeated tokens are as good as new ones whatever the
# model's size (Muennighoff et al., 2023, "Scaling Data-Constrained Language Models").
MEMORIZE_PARAM_EPOCHS = 6e6
MEMORIZE_EPOCHS = 4
DROPOUT = 0.2  # where dropout helped, 0.1 helped less (100 KB, d 64: 2.22 at 8.4M, 2.38 at 16.8M); 0.3 as much (2.21)
# Not on the attention weights: there it scored no better on any kind of text measured, and it is
# most of what dropout costs a CPU step (docs/benchmarks/2026-11-26-recipe-dropout.md). A step is timed with the dropout
# it trains with: its steps decide the passes, and the shape.

# The vocabularies tried, by trial (trials.py), where the user gives no merges: the data's tokenizer cut to
# each of these sizes below its own (special tokens included), its bytes alone, and itself whole. Rules
# chose the size before, fitted on the benchmark's kinds of text; on a kind outside them one scored
# worse than a character model. Each cut's shapes are timed (timing.TIMING_SHARE at most each), and the trials
# take what is left of RECIPE_SHARE of the budget.
CUT_SIZES = (1024, 4096, 16384)
RECIPE_SHARE = 0.2  # of the budget: the timing and the trials together, about
CUT_TOKENS = 1 << 25  # training tokens at most, for the cuts (held in memory, up to ~4x as many tokens)


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

    def at_context(self, context: int) -> Shape:
        """This shape at `context` tokens of context, with the same tokens a step."""
        return replace(self, context=context, batch=max(1, self.batch * self.context // context))

    def model(self, vocab_size: int, dropout: float = 0.0) -> dict[str, Any]:
        return {
            "vocab_size": vocab_size,
            "context_length": self.context,
            "d_model": self.d_model,
            "n_layers": self.n_layers,
            "n_heads": self.n_heads,
            "d_ff": self.d_ff,
            "tie_embeddings": True,
            **({"dropout": dropout, "attention_dropout": 0.0} if dropout else {}),
        }


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
    Shape(1024, 24, 16, 2736, 1024, 32, 3e-4),  # GPT-2 medium's size: an hour or more of a GPU
)

EVALS = 5  # validations in a run (the last one included)


def dropout_for(epochs: float, params: int) -> float:
    """The model's dropout for a run that makes `epochs` passes over its training tokens with a model of
    `params` parameters: DROPOUT where it could memorize them (MEMORIZE_PARAM_EPOCHS, MEMORIZE_EPOCHS)."""
    return DROPOUT if epochs >= MEMORIZE_EPOCHS and epochs * params >= MEMORIZE_PARAM_EPOCHS else 0.0


@dataclass(frozen=True)
class Recipe:
    shape: Shape
    vocab_size: int
    params: int
    seconds_per_step: float  # as timed on the run's device
    steps: int  # in the budget at that speed (--max-time measures the real number)
    train_tokens: int
    repeat_share: float | None = None  # Repeats.share at the ladder's context, where Repeats.fit could change it
    dropout: float = (
        0.0  # in the budget: dropout_for the passes of steps timed with it (seconds_per_step is then that time)
    )
    slower: Recipe | None = (
        None  # with DROPOUT, where it was timed and not taken: its steps' passes fell below the line
    )
    # what the run's line says of the choice (recipe_settings)
    budget: str = ""
    where: str = ""  # the device, and a CPU's threads
    fixed_steps: int | None = None  # the run's length where it is given in steps or tokens
    trials: tuple[tuple[Score, ...], ...] = ()  # each round's scores, where cuts were tried
    not_tried: str = ""  # why no cuts were tried
    spent: float = 0.0  # seconds of the budget the recipe took: the run trains for the rest
    weights: dict[str, torch.Tensor] | None = None  # the trials' winner, in host memory: the run goes on from it

    def record(self) -> dict[str, Any]:
        """What metrics.jsonl records of the choice: the trials' rounds and the time the recipe took."""
        return {
            "step": 0,
            "recipe": {
                "spent_s": round(self.spent, 2),
                "vocab_size": self.vocab_size,
                "trials": [[score.record() for score in scores] for scores in self.trials],
                **({"not_tried": self.not_tried} if self.not_tried else {}),
            },
        }

    def epochs(self, steps: int | None = None) -> float:
        """The passes over the training tokens that `steps` (the budget's, as timed) make."""
        return (steps or self.steps) * self.shape.batch * self.shape.context / max(self.train_tokens, 1)

    def with_dropout(self, seconds: float, budget_seconds: float) -> Recipe:
        """This recipe with DROPOUT at `seconds` a step (as timed with it) where the steps the budget then
        buys still make the passes that call for it (dropout_for); else without it, knowing why."""
        slower = replace(self, seconds_per_step=seconds, steps=int(budget_seconds / seconds), dropout=DROPOUT)
        return slower if dropout_for(slower.epochs(), self.params) else replace(self, slower=slower)

    def settings(self, steps: int | None = None) -> dict[str, Any]:
        """TrainConfig fields; `steps`: the length of the run where it is fixed in steps (its dropout
        then dropout_for its passes). The warmup is the schedule's default, a fraction of the steps
        however many they turn out, and min_lr the default tenth of lr."""
        dropout = self.dropout if steps is None else dropout_for(self.epochs(steps), self.params)
        return {
            "model": self.shape.model(self.vocab_size, dropout),
            "batch_size": self.shape.batch,
            "lr": self.shape.lr,
            "eval_interval": max(1, (steps or self.steps) // EVALS),
        }

    def line(self, config: TrainConfig, model: ModelConfig) -> str:
        """What train logs at its start: the corpus, the budget and the choice in its first line, then why,
        a line a reason (`config`: the run's settled settings, the flags included; `model`: its model)."""
        steps, batch = self.fixed_steps, config.batch
        assert batch.batch_size is not None  # settled
        context = batch.context_length or model.context_length
        epochs = (steps or self.steps) * batch.batch_size * context / max(self.train_tokens, 1)
        reasons = [
            f"d {model.d_model} x {model.n_layers}: the largest shape that gets {TOKENS_PER_PARAM} tokens a "
            f"non-embedding parameter; {1000 * self.seconds_per_step:.0f} ms a step as timed here, about "
            f"{self.steps:,} steps in the budget, {epochs:.1f} epochs",
            f"dropout {model.dropout:g}: {self._dropout_reason(steps)}",
            self._context_reason(),
            self._vocabulary_reason(),
            "a flag changes any of it; --config PRESET trains a preset instead",
        ]
        return "\n  ".join(
            [
                f"recipe for {_tokens(self.train_tokens)} training tokens and {self.budget} on {self.where}: "
                f"d {model.d_model}, {model.n_layers} layers, {model.n_heads} heads, d_ff {model.d_ff} "
                f"({self.params / 1e6:.2f}M parameters), batch {batch.batch_size} x {context}, lr {config.optim.lr:g}, "
                f"dropout {model.dropout:g}, vocabulary {self.vocab_size:,}; the recipe took {self.spent:.0f} s "
                "of the budget. Why:",
                *(reason for reason in reasons if reason),
            ]
        )

    def _vocabulary_reason(self):
        """What the trials scored, where they ran."""
        if not self.trials:
            return f"vocabulary {self.vocab_size:,}: no trials, {self.not_tried}" if self.not_tried else ""
        rounds = "; then ".join(scored(scores) for scores in self.trials)
        return f"vocabulary {self.vocab_size:,} by trial, held-out bits per byte: {rounds}"

    def _dropout_reason(self, steps=None):
        """Why the dropout is what it is for the passes its `steps` make (as settings)."""
        epochs = self.epochs(steps)
        if epochs < MEMORIZE_EPOCHS:
            return f"{epochs:.1f} passes over the corpus, fewer than the {MEMORIZE_EPOCHS} it takes to memorize it"
        verdict = "past" if dropout_for(epochs, self.params) else "below"
        reason = (
            f"{epochs:.0f} passes x {self.params / 1e6:.2f}M parameters = {epochs * self.params / 1e6:.1f}M parameter-passes, "
            f"{verdict} the {MEMORIZE_PARAM_EPOCHS / 1e6:g}M where a model memorizes its corpus"
        )
        if steps is None and self.slower is not None:
            slower = self.slower.epochs()
            reason += (
                f", but at the {1000 * self.slower.seconds_per_step:.0f} ms a step dropout takes it would make "
                f"{slower:.0f} passes, {slower * self.params / 1e6:.1f}M"
            )
        return reason

    def _context_reason(self):
        """Why the context is what it is, where the corpus's repeats could have changed it (Repeats.fit)."""
        if self.repeat_share is None:
            return ""
        verdict = "for text that repeats itself" if self.repeat_share >= REPEAT_SHARE else "the ladder's"
        return (
            f"context {self.shape.context}, {verdict}: {100 * self.repeat_share:.1f}% of its positions begin a span of "
            f"{REPEAT_SPAN} tokens last seen beyond the ladder's context and within {REPEAT_CONTEXT} tokens; "
            f"{100 * REPEAT_SHARE:g}% asks for {REPEAT_CONTEXT}"
        )


def _tokens(count: int) -> str:
    """A corpus's tokens, as the recipe's lines say them."""
    return f"{count / 1e6:.1f}M" if count >= 100_000 else f"{count / 1e3:.0f}K"


def choose(
    train_tokens: int,
    vocab_size: int,
    budget_seconds: float,
    seconds_per_step: StepTimer,
    repeats: Repeats | None = None,
) -> Recipe | None:
    """The largest shape of LADDER, climbed from the smallest, that trains on TOKENS_PER_PARAM
    tokens per non-embedding parameter in `budget_seconds` and has at most MAX_PARAMS_PER_TOKEN such parameters per
    training token; the smallest shape if none does. Each shape with the context the corpus's
    `repeats` ask for (Repeats.fit; None: the ladder's). `seconds_per_step(shape)`: the time of one
    training step of the shape, or None where it could not be timed (out of memory, or the
    timing's share of the budget spent): the climb stops there, as at the first shape too big.
    A shape whose steps make the passes that call for dropout (dropout_for) is timed again with it,
    `seconds_per_step(shape, DROPOUT)`, and its steps are those."""
    chosen = None
    for rung in LADDER:
        shape = rung if repeats is None else repeats.fit(rung)
        cost = model_cost(ModelConfig(**shape.model(vocab_size)))
        if chosen is not None and cost.non_embedding_params > MAX_PARAMS_PER_TOKEN * train_tokens:
            break
        seconds = seconds_per_step(shape)
        if seconds is None:
            break
        share = repeats.share(rung.context) if repeats is not None and rung.context < REPEAT_CONTEXT else None
        candidate = Recipe(shape, vocab_size, cost.params, seconds, int(budget_seconds / seconds), train_tokens, share)
        if dropout_for(candidate.epochs(), cost.params):
            seconds = seconds_per_step(shape, DROPOUT)
            if seconds is None:
                break
            candidate = candidate.with_dropout(seconds, budget_seconds)
        if (
            chosen is not None
            and candidate.steps * shape.batch * shape.context < TOKENS_PER_PARAM * cost.non_embedding_params
        ):
            break
        chosen = candidate
    return chosen


def recipe_settings(
    config: TrainConfig,
    data: ShardDir,
    tokenizer: Tokenizer,
    device: torch.device,
    threads: Threads | None,
    agree: Callable[[float], float] = float,
    world: int = 1,
    quiet: bool = False,
) -> tuple[dict[str, Any], Recipe]:
    """(the recipe's layer of settings, the Recipe) for a run whose model is not given: chosen for its
    data (`data`, a ShardDir of `tokenizer`'s tokens), its budget (max_time, or DEFAULT_BUDGET where no
    length is given) and `device`, timed with `threads`. Where the merges are not given, the cuts of the
    tokenizer (CUT_SIZES) are tried on the data (trials.py) and the best is taken. The budget is the
    recipe's length, its own time included (Recipe.spent); a length of the config's own overrides it
    (settle.from_layers). Unless `quiet`, it shows what it does as it goes, on standard error (timing.py,
    trials.py), from its first line on."""
    started = time.monotonic()
    length, batch = config.length, config.batch
    budget = length.max_time or DEFAULT_BUDGET
    budget_text = budget if length.max_time else f"{budget} (the default budget)"
    seconds = parse_duration(budget)
    assert threads is not None  # train() measures them
    where = f"{device.type} ({counted(threads.count, 'thread')})" if device.type == "cpu" else str(device)
    full = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, 1, verify=False)
    val = ShardData(data, "val", tokenizer.vocab_size, tokenizer.fingerprint, 1, verify=False)
    cuts, not_tried = cut_sizes(config, data, tokenizer, full, val)
    given = batch.merges if batch.merges is not None else len(tokenizer.merges)
    plan = (
        f"timing model shapes for {len(cuts)} vocabularies, then trials of them"
        if len(cuts) > 1
        else f"timing model shapes ({'no trials: ' + not_tried if not_tried else 'one vocabulary'})"
    )
    if not quiet:  # its timing and trials may take minutes before the run's first line
        print(
            f"recipe: choosing the model for {_tokens(int(full.starts[-1]))} training tokens and {budget_text} on {where}: "
            f"{plan}; --model or --config skips it",
            file=sys.stderr,
            flush=True,
        )
    # each cut with the shape it would train: a smaller vocabulary makes faster steps, which buy a larger model
    shapes = {
        merges: _choose(full, tokenizer, merges, seconds, device, threads, agree, world, quiet)
        for merges in cuts or [given]
    }
    merges, chosen = next(iter(shapes.items()))
    rounds: list[list[Score]] = []
    weights = None
    if len(cuts) > 1:
        start = functools.partial(Trial, device=device, seed=config.job.seed, agree=agree)
        candidates = _candidates(shapes, data, tokenizer, val)
        left = RECIPE_SHARE * seconds - agree(time.monotonic() - started)
        slowest = max(shape.seconds_per_step for shape in shapes.values())
        best, rounds = halving(candidates, left, start, ENOUGH_STEPS * slowest, quiet)
        merges = cuts[candidates.index(best.candidate)]
        chosen = shapes[merges]
        if world == 1:  # the processes' trials differ in their steps: a run of several starts afresh
            weights = {name: t.detach().to("cpu", copy=True) for name, t in best.model.state_dict().items()}
    steps = None  # the budget's, as timed
    if length.max_time is None and (
        length.max_steps or length.max_tokens
    ):  # a length in steps or tokens: the evaluations fit it
        tokens_per_step = (
            (batch.batch_size or chosen.shape.batch) * (batch.context_length or chosen.shape.context) * batch.grad_accum
        )
        steps = length.max_steps or -(-(length.max_tokens or 0) // tokens_per_step)
    described = replace(
        chosen,
        budget=budget_text,
        where=where,
        fixed_steps=steps,
        trials=tuple(tuple(r) for r in rounds),
        not_tried=not_tried,
        spent=agree(time.monotonic() - started),
        weights=weights,
    )
    cut = {"merges": merges} if merges != len(tokenizer.merges) else {}
    return {**chosen.settings(steps), **cut, "max_time": budget}, described


def cut_sizes(
    config: TrainConfig, data: ShardDir, tokenizer: Tokenizer, train: ShardData, val: ShardData
) -> tuple[list[int], str]:
    """The merges of the cuts of `tokenizer` that the recipe tries on the splits `train` and `val`,
    fewest first, the data's own last (none where it tries none), and why it tries none."""
    if config.batch.merges is not None:
        return [], f"--merges {config.batch.merges} given"
    if config.length.max_time is None and (config.length.max_steps or config.length.max_tokens):
        return [], "the run's length is given in steps or tokens, which trials would add to"
    if data.has_mask:
        return [], "chat data, whose mask follows its own tokens"
    if not cuttable(tokenizer):
        return [], f"{data.tokenizer} does not list its tokens in the order its merges made them"
    if train.starts[-1] > CUT_TOKENS:
        return [], f"{train.starts[-1]:,} training tokens, more than the {CUT_TOKENS:,} a cut is tried on (in memory)"
    if val.starts[-1] <= max(shape.context for shape in LADDER):
        return [], f"{val.starts[-1]:,} validation tokens, too few to score a trial on"
    total = len(tokenizer.merges)
    specials = len(tokenizer.special_tokens)
    merges = [0, *(size - 256 - specials for size in CUT_SIZES if 0 < size - 256 - specials < total)]
    return ([*merges, total] if total > 0 else []), "" if total > 0 else f"{data.tokenizer} has no merges"


def _choose(full, tokenizer, merges, seconds, device, threads, agree, world, quiet):
    """choose() for the data `full` (the training split in `tokenizer`'s tokens) cut to `merges`."""
    vocab_size, train = tokenizer.vocab_size, full
    if merges != len(tokenizer.merges):
        unmerge = Unmerge(tokenizer, merges)
        vocab_size, train = unmerge.tokenizer.vocab_size, cut_split(full, unmerge, 1)
    shown = TimedShapes("bytes" if merges == 0 else f"{vocab_size:,}", quiet)
    timer = step_timer(vocab_size, device, threads, seconds, agree, world, shown)
    chosen = choose(int(train.starts[-1]), vocab_size, seconds, timer, Repeats.of(train))
    if chosen is None:
        raise GptkitError(f"the recipe's smallest model does not fit {device}: give a model, with a batch that fits")
    shown.close(chosen.shape, chosen.dropout)
    return chosen


def _candidates(shapes, data, tokenizer, val):
    """The trials' candidates: each cut of `tokenizer` (`shapes`: the Recipe chosen for each, by its
    merges) at its shape and learning rate, without dropout, scored on the same held-out bytes (the first
    of the validation split `val`)."""
    held_out = val.span(0, min(VAL_TOKENS, int(val.starts[-1])))
    candidates = []
    for merges, chosen in shapes.items():
        shape = chosen.shape
        train = ShardData(data, "train", tokenizer.vocab_size, tokenizer.fingerprint, shape.context, verify=False)
        unmerge = Unmerge(tokenizer, merges)
        cut = unmerge.tokenizer
        tokens = Tokens(cut, cut_split(train, unmerge, shape.context), unmerge(held_out, np.int64))
        name = f"{'bytes' if merges == 0 else f'{cut.vocab_size:,}'} (d {shape.d_model} x {shape.n_layers})"
        candidates.append(Candidate(name, tokens, ModelConfig(**shape.model(cut.vocab_size)), shape.batch, shape.lr))
    return candidates
