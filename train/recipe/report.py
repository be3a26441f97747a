"""What the recipe says of its choice: the lines a run logs at its start (line: the choice, then a
line a reason) and the record metrics.jsonl keeps of it (record)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gptkit.model.config import ModelConfig

from ..sections import Batch
from .ladder import MEMORIZE_EPOCHS, MEMORIZE_PARAM_EPOCHS, TOKENS_PER_PARAM, Choice, dropout_for
from .repeats import REPEAT_CONTEXT, REPEAT_SHARE, REPEAT_SPAN
from .trials import scored

if TYPE_CHECKING:  # settings.py imports this module
    from .settings import Recipe


def line(recipe: Recipe, model: ModelConfig, batch: Batch, lr: float) -> str:
    """What train logs at its start: the corpus, the budget and the choice in its first line, then why,
    a line a reason. `model`, `batch` and `lr`: the run's, settled, the flags included."""
    choice, steps = recipe.choice, recipe.fixed_steps
    assert batch.batch_size is not None  # settled
    context = batch.context_length or model.context_length
    epochs = (steps or choice.steps) * batch.batch_size * context / max(choice.train_tokens, 1)
    reasons = [
        f"d {model.d_model} x {model.n_layers}: the largest shape that gets {TOKENS_PER_PARAM} tokens a "
        f"non-embedding parameter; {1000 * choice.seconds_per_step:.0f} ms a step as timed here, about "
        f"{choice.steps:,} steps in the budget, {epochs:.1f} epochs",
        f"dropout {model.dropout:g}: {_dropout_reason(choice, steps)}",
        _context_reason(choice),
        _vocabulary_reason(recipe),
        "a flag changes any of it; --config PRESET trains a preset instead",
    ]
    return "\n  ".join(
        [
            f"recipe for {tokens(choice.train_tokens)} training tokens and {recipe.budget} on {recipe.where}: "
            f"d {model.d_model}, {model.n_layers} layers, {model.n_heads} heads, d_ff {model.d_ff} "
            f"({choice.params / 1e6:.2f}M parameters), batch {batch.batch_size} x {context}, lr {lr:g}, "
            f"dropout {model.dropout:g}, vocabulary {choice.vocab_size:,}; the recipe took {recipe.spent:.0f} s "
            "of the budget. Why:",
            *(reason for reason in reasons if reason),
        ]
    )


def record(recipe: Recipe) -> dict[str, Any]:
    """What metrics.jsonl records of the choice: the trials' rounds and the time the recipe took."""
    return {
        "step": 0,
        "recipe": {
            "spent_s": round(recipe.spent, 2),
            "vocab_size": recipe.choice.vocab_size,
            "trials": [[score.record() for score in scores] for scores in recipe.trials],
            **({"not_tried": recipe.not_tried} if recipe.not_tried else {}),
        },
    }


def tokens(count: int) -> str:
    """A corpus's tokens, as the recipe's lines say them."""
    return f"{count / 1e6:.1f}M" if count >= 100_000 else f"{count / 1e3:.0f}K"


def _vocabulary_reason(recipe: Recipe) -> str:
    """What the trials scored, where they ran."""
    vocab_size = recipe.choice.vocab_size
    if not recipe.trials:
        return f"vocabulary {vocab_size:,}: no trials, {recipe.not_tried}" if recipe.not_tried else ""
    rounds = "; then ".join(scored(scores) for scores in recipe.trials)
    return f"vocabulary {vocab_size:,} by trial, held-out bits per byte: {rounds}"


def _dropout_reason(choice: Choice, steps: int | None = None) -> str:
    """Why the dropout is what it is for the passes its `steps` make (as Choice.settings)."""
    epochs, params = choice.epochs(steps), choice.params
    if epochs < MEMORIZE_EPOCHS:
        return f"{epochs:.1f} passes over the corpus, fewer than the {MEMORIZE_EPOCHS} it takes to memorize it"
    verdict = "past" if dropout_for(epochs, params) else "below"
    reason = (
        f"{epochs:.0f} passes x {params / 1e6:.2f}M parameters = {epochs * params / 1e6:.1f}M parameter-passes, "
        f"{verdict} the {MEMORIZE_PARAM_EPOCHS / 1e6:g}M where a model memorizes its corpus"
    )
    if steps is None and choice.slower is not None:
        slower = choice.slower.epochs()
        reason += (
            f", but at the {1000 * choice.slower.seconds_per_step:.0f} ms a step dropout takes it would make "
            f"{slower:.0f} passes, {slower * params / 1e6:.1f}M"
        )
    return reason


def _context_reason(choice: Choice) -> str:
    """Why the context is what it is, where the corpus's repeats could have changed it (Repeats.fit)."""
    share = choice.repeat_share
    if share is None:
        return ""
    verdict = "for text that repeats itself" if share >= REPEAT_SHARE else "the ladder's"
    return (
        f"context {choice.shape.context}, {verdict}: {100 * share:.1f}% of its positions begin a span of "
        f"{REPEAT_SPAN} tokens last seen beyond the ladder's context and within {REPEAT_CONTEXT} tokens; "
        f"{100 * REPEAT_SHARE:g}% asks for {REPEAT_CONTEXT}"
    )
