"""A tokenizer cut to its first merges, and its ids mapped to the cut's.

BPE learns its merges one at a time, so a tokenizer's first m merges are the tokenizer that
training on the same text to that size makes; no merges at all leaves the 256 bytes. The train
recipe tries such cuts of the data's tokenizer on the user's text (train/trials.py) without
encoding the text again: the cut's encoding of any text is the full tokenizer's with each token
beyond the cut replaced by the two tokens its merge joined, again until every token is in the
cut. Encoding applies the lowest-ranked merge first, and a merge beyond the cut only ever makes
a pair whose merge ranks later still, so the full encoding goes through the cut's encoding on its
way (a test holds the two alike).
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import numpy.typing as npt

from gptkit.shared.shard_data import ShardData
from gptkit.shared.shards import dtype_for

from .bpe import Tokenizer

BLOCK = 1 << 20  # ids mapped at a time


def cuttable(tokenizer: Tokenizer) -> bool:
    """Whether `tokenizer` lists its tokens as a cut needs them: the 256 bytes first, merge k's token
    at id 256 + k, the special tokens after the merges (ours, and GPT-2's)."""
    merges = len(tokenizer.merges)
    return (
        tokenizer.vocab_size == 256 + merges + len(tokenizer.special_tokens)
        and all(256 + merges <= i for i in tokenizer.special_tokens.values())
        and all(
            tokenizer.vocab[256 + k] == tokenizer.vocab[a] + tokenizer.vocab[b]
            for k, (a, b) in enumerate(tokenizer.merges)
        )
        and not tokenizer.normalizer
        and not tokenizer.ignore_merges
    )


def first_merges(tokenizer: Tokenizer, merges: int) -> Tokenizer:
    """`tokenizer` with its first `merges` merges (at most all of them) and its special tokens,
    numbered after them; `tokenizer` itself where that is all of them."""
    if merges >= len(tokenizer.merges):
        return tokenizer
    specials = sorted(tokenizer.special_tokens, key=tokenizer.special_tokens.__getitem__)
    vocab = tokenizer.vocab[: 256 + merges] + [s.encode("utf-8") for s in specials]
    return Tokenizer(
        vocab,
        tokenizer.merges[:merges],
        {s: 256 + merges + i for i, s in enumerate(specials)},
        pattern=tokenizer.pattern,
    )


class Unmerge:
    """The map from the ids of a cuttable tokenizer to those of its cut to `merges` merges (`tokenizer`,
    the cut): `unmerge(ids)` is the cut's encoding of the text the full tokenizer encoded as `ids`."""

    def __init__(self, tokenizer: Tokenizer, merges: int) -> None:
        self.tokenizer = first_merges(tokenizer, merges)
        kept = 256 + merges
        parts: list[list[int]] = [[i] for i in range(kept)]
        for a, b in tokenizer.merges[merges:]:
            parts.append(parts[a] + parts[b])
        specials = sorted(tokenizer.special_tokens.values())
        parts += [[kept + k] for k in range(len(specials))]
        self.lengths = np.array([len(p) for p in parts], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.lengths)[:-1]])
        self.flat = np.array([i for p in parts for i in p], np.int64)

    def __call__(self, ids: np.ndarray, dtype: npt.DTypeLike) -> np.ndarray:
        """The cut's ids for `ids`, as `dtype`; a block at a time, so that the work arrays stay small."""
        out = np.empty(self.length(ids), dtype)
        done = 0
        for start in range(0, len(ids), BLOCK):
            block = np.asarray(ids[start : start + BLOCK], np.int64)
            lengths = self.lengths[block]
            ends = np.cumsum(lengths)
            # each output position: where its token's parts start, plus its place among them
            within = np.arange(int(ends[-1])) - np.repeat(ends - lengths, lengths)
            out[done : done + len(within)] = self.flat[np.repeat(self.starts[block], lengths) + within]
            done += len(within)
        return out

    def length(self, ids: np.ndarray) -> int:
        """How many ids of the cut `ids` make."""
        return sum(int(self.lengths[np.asarray(ids[s : s + BLOCK], np.int64)].sum()) for s in range(0, len(ids), BLOCK))


def cut_to(full: Tokenizer, cut: Tokenizer) -> Unmerge | None:
    """The map from the ids of `full` to those of `cut` where `cut` is a cut of `full` to its first
    merges (the tokenizer of a run trained with `--merges` on data of `full`'s ids); else None."""
    merges = len(cut.merges)
    if merges >= len(full.merges) or not cuttable(full):
        return None
    unmerge = Unmerge(full, merges)
    return unmerge if unmerge.tokenizer.fingerprint == cut.fingerprint else None


def cut_split(split: ShardData, unmerge: Unmerge, context_length: int) -> ShardData:
    """`split` (of the full tokenizer's ids, without a mask) in the ids of the cut `unmerge` maps
    them to, in memory, read in sequences of `context_length` tokens: what a run trained on a cut
    reads, and what eval reads of the same data for it."""
    vocab_size = unmerge.tokenizer.vocab_size
    dtype = dtype_for(vocab_size)
    cut = copy.copy(split)
    cut.shards = [dataclasses.replace(s, tokens=unmerge(s.tokens, dtype)) for s in split.shards]
    cut.vocab_size, cut.verified, cut.context_length, cut.dtype = vocab_size, True, context_length, np.dtype(dtype)
    cut.sizes = np.array([len(s.tokens) for s in cut.shards], np.int64)
    cut.starts = np.concatenate([[0], np.cumsum(cut.sizes)])
    return cut
