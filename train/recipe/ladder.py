"""The recipe's ladder of model shapes and its climb: choose() takes the largest shape that trains on
enough tokens for its size in the budget, as timed on the run's device (timing.py), with dropout
where the run could memorize its corpus, at the context the corpus's repeats ask for (repeats.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from gptkit.model.config import ModelConfig
from gptkit.model.info import model_cost

from .repeats import REPEAT_CONTEXT, Repeats
from .timing import StepTimer

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
class Choice:
    """What the climb chose: a shape and what it was timed to do in the budget."""

    shape: Shape
    vocab_size: int
    params: int
    seconds_per_step: float  # as timed on the run's device
    steps: int  # in the budget at that speed (--max-time measures the real number)
    train_tokens: int
    repeat_share: float | None = None  # Repeats.share at the ladder's context, where Repeats.fit could change it
    # in the budget: dropout_for the passes of steps timed with it (seconds_per_step is then that time)
    dropout: float = 0.0
    # with DROPOUT, where it was timed and not taken: its steps' passes fell below the line
    slower: Choice | None = None

    def epochs(self, steps: int | None = None) -> float:
        """The passes over the training tokens that `steps` (the budget's, as timed) make."""
        return (steps or self.steps) * self.shape.batch * self.shape.context / max(self.train_tokens, 1)

    def with_dropout(self, seconds: float, budget_seconds: float) -> Choice:
        """This choice with DROPOUT at `seconds` a step (as timed with it) where the steps the budget then
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


def choose(
    train_tokens: int,
    vocab_size: int,
    budget_seconds: float,
    seconds_per_step: StepTimer,
    repeats: Repeats | None = None,
) -> Choice | None:
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
        candidate = Choice(shape, vocab_size, cost.params, seconds, int(budget_seconds / seconds), train_tokens, share)
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
