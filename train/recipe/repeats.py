"""How far back a corpus repeats itself, for the recipe's context (ladder.py): a shape whose
context is shorter than the spans a corpus repeats takes a longer one."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gptkit.shared.shard_data import ShardData

if TYPE_CHECKING:  # ladder.py imports this module
    from .ladder import Shape

# The context of text that repeats itself: code, markup, records and tables repeat spans a few lines
# apart, which a model can copy only from inside its context. Where at least REPEAT_SHARE of the
# training positions begin a span of REPEAT_SPAN tokens last seen beyond a shape's context but
# within REPEAT_CONTEXT tokens, the shape takes REPEAT_CONTEXT tokens of context at the same tokens
# a step (and is timed so). Measured at fixed steps, held-out bits per byte
# (docs/benchmarks/2026-11-25-recipe-context.md): d 64 x 2 layers, 64 -> 256 tokens, on CSV (8.7% of its positions so), HTML (14.9%),
# C headers (5.1%) and key: value records (3.5%) 1.6-3.0% better; on Tiny Shakespeare (1.6%) 1.1%
# worse. d 96 x 3 layers on Python (3.5%): 128 -> 256 as good (1.210 against 1.216 and 1.212), 512
# worse (1.252): so a floor of 256, not a multiple of the shape's context.
REPEAT_CONTEXT = 256
REPEAT_SPAN = 8
REPEAT_SHARE = 0.03
REPEAT_SAMPLE = 1 << 20  # training tokens read to measure it (from the first)


@dataclass(frozen=True)
class Repeats:
    """How far back a corpus repeats itself: for each of its first training positions, how many
    tokens back the REPEAT_SPAN tokens that start there last started (a huge number: never)."""

    distances: np.ndarray

    @classmethod
    def of(cls, train: ShardData) -> Repeats:
        """Of the first REPEAT_SAMPLE tokens of the training split `train`."""
        tokens = train.span(0, min(REPEAT_SAMPLE, int(train.starts[-1]))).astype(np.uint64)
        n = len(tokens) - REPEAT_SPAN + 1
        if n <= 0:
            return cls(np.empty(0, np.int64))
        span = np.zeros(n, np.uint64)
        for k in range(REPEAT_SPAN):  # a polynomial hash of each span (wrapping uint64 arithmetic)
            span = span * np.uint64(1_000_003) + tokens[k : k + n]
        order = np.lexsort((np.arange(n), span))  # by span, then position
        again = np.r_[False, span[order[1:]] == span[order[:-1]]]  # the same span as the one sorted before it
        distances = np.full(n, np.iinfo(np.int64).max, np.int64)
        distances[order[again]] = order[again] - order[np.r_[again[1:], False]]
        return cls(distances)

    def share(self, context: int) -> float:
        """The share of positions whose span was last seen beyond `context` tokens but within REPEAT_CONTEXT."""
        return (
            float(((self.distances > context) & (self.distances <= REPEAT_CONTEXT)).mean())
            if len(self.distances)
            else 0.0
        )

    def fit(self, shape: Shape) -> Shape:
        """`shape`, with REPEAT_CONTEXT tokens of context at the same tokens a step where the corpus
        repeats itself beyond its context (REPEAT_SHARE)."""
        if shape.context >= REPEAT_CONTEXT or self.share(shape.context) < REPEAT_SHARE:
            return shape
        return shape.at_context(REPEAT_CONTEXT)
