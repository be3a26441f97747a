"""The rank of each merge of a tokenizer, looked up for whole arrays of pairs (bpe.py's numpy rounds)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

NO_RANK = np.iinfo(np.int64).max  # the rank of a pair that is no merge


class PairRanks:
    """The rank of each merge, looked up for a whole array of pairs at once: an open-addressing
    hash table (linear probing, at most half full) searched with numpy, one probe per round."""

    _EMPTY = -1

    def __init__(self, pairs: Sequence[tuple[int, ...]], vocab_size: int) -> None:
        self.vocab_size = vocab_size
        self.bits = max(4, (2 * len(pairs)).bit_length())
        mask = (1 << self.bits) - 1
        keys, ranks = [self._EMPTY] * (mask + 1), [0] * (mask + 1)
        pair_keys = self._keys(pairs)
        for rank, (key, slot) in enumerate(zip(pair_keys.tolist(), self._slots(pair_keys).tolist())):
            while keys[slot] != self._EMPTY:
                slot = (slot + 1) & mask
            keys[slot], ranks[slot] = key, rank
        self.keys, self.ranks = np.array(keys, np.int64), np.array(ranks, np.int64)

    def _keys(self, pairs: Sequence[tuple[int, ...]]) -> np.ndarray:
        array = np.asarray(pairs, np.int64).reshape(-1, 2)
        return array[:, 0] * self.vocab_size + array[:, 1]

    def _slots(self, keys: np.ndarray) -> np.ndarray:
        # Fibonacci hashing: the top bits of key * 2^64/phi.
        return ((keys.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(64 - self.bits)).astype(np.int64)

    def lookup(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The rank of each pair (left[i], right[i]), or NO_RANK where it is no merge."""
        keys = left * self.vocab_size + right
        slots = self._slots(keys)
        rank = np.full(len(keys), NO_RANK)
        todo = np.arange(len(keys))
        mask = (1 << self.bits) - 1
        while len(todo):
            found = self.keys[slots[todo]]
            hit = found == keys[todo]
            rank[todo[hit]] = self.ranks[slots[todo[hit]]]
            todo = todo[~hit & (found != self._EMPTY)]
            slots[todo] = (slots[todo] + 1) & mask
        return rank
