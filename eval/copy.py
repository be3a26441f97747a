"""Copying, as compressors copy: a model's probabilities mixed with an unbounded n-gram (an
"infinity-gram", Liu et al. 2024) over a stream of earlier tokens, the training text's and the
scored text's before each position.

For each scored position, each context ending just before it that occurred earlier in the
stream, from 1 token up to the longest (MAX_N at most), predicts the token by what followed it.
The n-gram interpolates them from the model up, as a hierarchical Dirichlet (a PPM with the
model below its shortest order): p_k = (count of the context of k tokens followed by the token
+ alpha p_(k-1)) / (count of the context + alpha), p_0 the model's. The mixture is then
(1 - w) p_model + w p_ngram, the weight w chosen by the longest matched length and that context's
count. Alpha and the weights are fitted online, as a compressor's mixer adapts: the scored
positions in blocks of doubling size, each block with those that fit every position before it
best (the first block: the model alone). So every token's probability depends only on the text
before it, and the summed losses are a code length the text could be decoded from.

The counts are exact: windows of k tokens compared by rank, refined one token at a time from
k = 1 (a stable sort of the windows still repeated each round), in memory linear in the stream
(int32 positions: below 2**31 tokens) and time O(stream log stream) a length.

The same ranks tell which scored tokens were there to copy whole: those inside a window of MAX_N
tokens of the scored text that the training text holds verbatim. A text (partly) from the training
text scores far below what the model predicts of new text, and this share says so.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

MAX_N = 32
ALPHAS = np.array([1.0, 2.0, 4.0, 8.0, 16.0])  # the interpolation's alphas the online fit chooses from
LENGTHS = (1, 2, 3, 5, 9, 17)  # the matched-length buckets start here
COUNTS = (1, 2, 4)  # and the context-count buckets
WEIGHTS = np.linspace(0, 0.95, 20)  # the weights a bucket chooses from
FIRST_BLOCK = 256  # positions scored by the model alone, before any fit
MAX_STREAM = 2**31 - 1  # tokens: positions and counts are int32


class Matches(NamedTuple):
    """For each scored position: the n-gram's probability of its token for each of ALPHAS (rows),
    the length of the longest earlier context matched (0: none), that context's earlier count, and
    whether the token lies in a span of max_n tokens or more that the training text holds verbatim."""

    prob: np.ndarray
    length: np.ndarray
    count: np.ndarray  # type: ignore[assignment]  # shadows tuple.count, which nothing here calls
    verbatim: np.ndarray


def ngram(stream: npt.ArrayLike, first: int, p_model: npt.ArrayLike, max_n: int = MAX_N) -> Matches:
    """The n-gram's predictions of positions first.. of `stream` (token ids), each from the stream
    before it, interpolated down to `p_model` (the model's probability of each of those tokens). A
    context's count is the times it ended before the position's previous token, and the token's
    count the times the context was followed by it there. The scored text starts at first - 1 (its
    first token is read, not scored); the stream before it is the training text, which `verbatim`
    is about."""
    tokens = np.asarray(stream, np.int32)
    m, targets = len(tokens), np.arange(first, len(tokens))
    if first < 1:
        raise ValueError("the first scored position needs a token before it")
    if m > MAX_STREAM:
        raise ValueError(f"{m:,} tokens: more than the {MAX_STREAM:,} positions int32 holds")
    prob = np.tile(np.asarray(p_model, np.float64), (len(ALPHAS), 1))
    length, context_count = np.zeros(len(targets), np.int64), np.zeros(len(targets), np.int64)
    verbatim = np.zeros(len(targets), bool)
    rank = tokens.copy()  # of the window of k tokens ending at each position; equal windows, equal ranks
    earlier = np.zeros(m, np.int32)  # how often that window ended before the position
    active = np.arange(m, dtype=np.int32)  # the positions whose window recurs: the others' longer windows cannot
    base = int(tokens.max()) + 1 if m else 1
    contexts = np.zeros(len(targets), np.int64)  # the counts of the contexts of k - 1 tokens
    for k in range(1, max_n + 2):
        active = active[active >= k - 1]  # a window of k tokens ends at k - 1 or later
        key = rank[active] if k == 1 else rank[active].astype(np.int64) * base + tokens[active - k + 1]
        order = np.argsort(key, kind="stable")  # the positions of equal windows stay in order
        positions, key = active[order], key[order]
        new = np.r_[True, key[1:] != key[:-1]] if len(order) else np.zeros(0, bool)
        del key, order
        group = np.cumsum(new, dtype=np.int32) - 1
        starts = np.flatnonzero(new).astype(np.int32)
        earlier[:] = 0
        earlier[positions] = np.arange(len(positions), dtype=np.int32) - starts[group]
        rank[positions] = group
        if k == max_n:
            verbatim = _in_training_windows(positions, positions[starts[group]], k, first, m)
        # the context of k - 1 tokens, followed by the token: the window of k tokens at the target
        seen = contexts > 0
        followed = earlier[targets[seen]]
        prob[:, seen] = (followed + ALPHAS[:, None] * prob[:, seen]) / (contexts[seen] + ALPHAS[:, None])
        if k <= max_n:
            contexts = earlier[targets - 1].astype(np.int64)
            found = contexts > 0
            length[found], context_count[found] = k, contexts[found]
        sizes = np.diff(np.r_[starts, len(positions)])
        active = np.sort(positions[sizes[group] > 1])
        if not len(active):  # no context recurs: none of k tokens was seen (contexts are all 0)
            break
    return Matches(prob, length, context_count, verbatim)


def _in_training_windows(ends, earliest, k, first, m):
    """Whether each of positions first..m - 1 lies in a window of k tokens of the scored text (from
    first - 1 on) that the training text (before it) holds. `ends`: where the windows that recur
    end; `earliest`: where the first window equal to each ends, which lies in the training text
    where any does (the training text comes first in the stream)."""
    source = first - 1
    ends = ends[(earliest < source) & (ends >= source + k - 1)] - source
    # each window covers k positions: +1 where it starts, -1 after it ends, summed along the text
    size = m - source + 1
    covered = np.cumsum(np.bincount(ends - k + 1, minlength=size) - np.bincount(ends + 1, minlength=size)) > 0
    return covered[first - source : m - source]


def buckets(matches: Matches) -> np.ndarray:
    """Each position's bucket of the matched length and the context's count."""
    return np.searchsorted(LENGTHS, matches.length, side="right") * (len(COUNTS) + 1) + np.searchsorted(
        COUNTS, matches.count, side="right"
    )


def mixed(p_model: npt.ArrayLike, matches: Matches) -> np.ndarray:
    """p_model (each scored position's model probability) mixed with the n-gram's, online: the
    positions in blocks of doubling size from FIRST_BLOCK, each mixed with the alpha and the
    weights fitted on all the positions before it."""
    p_model = np.asarray(p_model, np.float64)
    bucket, out = buckets(matches), p_model.copy()
    start = FIRST_BLOCK
    while start < len(p_model):
        end = min(2 * start, len(p_model))
        fits = [fitted_weights(p_model[:start], p_ngram[:start], bucket[:start]) for p_ngram in matches.prob]
        best = min(range(len(fits)), key=lambda a: fits[a][1])
        w = fits[best][0][bucket[start:end]]
        out[start:end] = (1 - w) * p_model[start:end] + w * matches.prob[best, start:end]
        start = end
    return out


def fitted_weights(p_model: np.ndarray, p_ngram: np.ndarray, bucket: np.ndarray) -> tuple[np.ndarray, float]:
    """For each bucket, the weight of WEIGHTS that gives these positions the least loss (0 where
    the bucket has none), and the positions' loss with those weights."""
    weights, loss = np.zeros((len(LENGTHS) + 1) * (len(COUNTS) + 1)), 0.0
    for b in np.unique(bucket):
        rows = bucket == b
        mix = (1 - WEIGHTS[:, None]) * p_model[rows] + WEIGHTS[:, None] * p_ngram[rows]
        losses = -np.log(np.maximum(mix, 1e-300)).sum(axis=1)
        weights[b], loss = WEIGHTS[np.argmin(losses)], loss + losses.min()
    return weights, loss
