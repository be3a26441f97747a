"""Batches of token sequences from a shard directory, deterministic in (seed, step, micro-step, rank).

Every global batch (all ranks, one micro-step) is defined first; rank r takes rows
[r*B, (r+1)*B) of it. So a run on 2 ranks of B sequences sees the same global batches as a run
on one rank of 2B, and a resumed run the same as an uninterrupted one: the loader's only
state is the step.

  random      each sequence starts at a uniform position of the training tokens (a uniform
              offset in [0, n - T - 1] of a shard chosen in proportion to its usable length),
              as nanoGPT's get_batch does
  sequential  the shards are one stream, read in order: global batch g covers tokens
              [g*G*T, (g+1)*G*T + 1) of it (G sequences), wrapping at the end, as llm.c does
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from gptkit.shared.errors import SettingError, named
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import TOKENIZER_FILE, ShardDir
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge, cuttable

from .processes import Dist
from .sections import Batch

PRESENCE_BLOCK = 1 << 24  # tokens read at a time by tokens_present


class Loader:
    """Training batches: `batch(step, micro)` -> (B, T + 1) token sequences in the shards' dtype
    (inputs are [:, :-1], targets [:, 1:]); they travel to the GPU at that width, not as int64.
    Where the data has a mask (chat data), `mask(step, micro)` is theirs: (B, T + 1) uint8, 1
    where the loss counts the token."""

    def __init__(self, data: ShardData, batch: Batch, seed: int, dist: Dist) -> None:
        """Sequences of the data's context length. `batch`: the loader, batch_size (of all processes:
        this one takes its share) and grad_accum; `dist`: this process's place."""
        assert batch.batch_size is not None  # settled
        self.data, self.mode, self.B, self.T = data, batch.loader, batch.batch_size // dist.world, data.context_length
        self.seed, self.rank, self.world, self.grad_accum = seed, dist.rank, dist.world, batch.grad_accum
        usable = np.maximum(data.sizes - self.T, 0)  # sequence start positions, shard by shard
        self.cumulative, self.first_pick = np.cumsum(usable), np.cumsum(usable) - usable

    def batch(self, step: int, micro: int = 0) -> np.ndarray:
        sequences, firsts = self._read(step, micro, "tokens")
        self.data.check_ids(sequences, firsts)
        return sequences

    def mask(self, step: int, micro: int = 0) -> np.ndarray:
        return self._read(step, micro, "mask")[0]

    def _read(self, step: int, micro: int, field: str) -> tuple[np.ndarray, np.ndarray]:
        """The rows of this process's share of global batch (step, micro) of the shards' `field`
        ("tokens" or "mask"), and the position of each row's first token in the stream."""
        rows = range(self.rank * self.B, (self.rank + 1) * self.B)
        G, T = self.B * self.world, self.T
        index = step * self.grad_accum + micro  # the global batch's number
        if self.mode == "random":
            rng = np.random.default_rng([self.seed, index])
            picks = rng.integers(0, self.cumulative[-1], size=G)[rows.start : rows.stop]
            shard = np.searchsorted(self.cumulative, picks, side="right")
            offset = picks - self.first_pick[shard]
            sequences = np.stack([getattr(self.data.shards[s], field)[o : o + T + 1] for s, o in zip(shard, offset)])
            return sequences, self.data.starts[shard] + offset
        start = (index * G + rows.start) * T
        flat = (self.data.span if field == "tokens" else self.data.mask_span)(start, self.B * T + 1)
        return np.stack([flat[i * T : i * T + T + 1] for i in range(self.B)]), start + T * np.arange(self.B)


def tokens_present(split: ShardData, ids: Iterable[int]) -> list[int]:
    """Which of `ids` the tokens of `split` hold, ascending: every shard read once, a block at a
    time (a lookup table of the vocabulary; the reading stops once every one is found)."""
    wanted = np.zeros(split.vocab_size, bool)
    wanted[list(ids)] = True
    found = np.zeros_like(wanted)
    for shard in split.shards:
        for start in range(0, len(shard.tokens), PRESENCE_BLOCK):
            block = shard.tokens[start : start + PRESENCE_BLOCK]
            if not split.verified:  # ids past the vocabulary are refused where a batch holds them (check_ids)
                block = block[block < split.vocab_size]
            found[block[wanted[block]]] = True
            if found.sum() == wanted.sum():
                return np.flatnonzero(found).tolist()
    return np.flatnonzero(found).tolist()


def data_tokenizer(data: ShardDir) -> Tokenizer:
    """The tokenizer.json of a data directory (pretokenize copies it there)."""
    data.check_exists()
    if not data.tokenizer.is_file():
        hint = (
            ""
            if data.manifest
            else f" (for plain llm.c shards, put the {TOKENIZER_FILE} they were made with beside them)"
        )
        raise SettingError("data", f"{data.path}: no {TOKENIZER_FILE}{hint}")
    return Tokenizer.from_file(data.tokenizer)


def cut_of(merges: int | None, data: ShardDir, tokenizer: Tokenizer, init_from: str | None) -> Unmerge | None:
    """The map to the cut of the data's `tokenizer` to its first `merges` merges (the merges setting),
    checked; None where the run reads the data's tokens as they are."""
    if merges is None or merges == len(tokenizer.merges):
        return None
    if init_from is not None:
        raise SettingError(
            "merges", f"{merges}: a checkpoint's model ({named('init_from')}) reads the data's tokens whole"
        )
    if data.has_mask:
        raise SettingError("merges", f"{merges}: {data.path} is chat data, whose mask follows the data's own tokens")
    if merges > len(tokenizer.merges):
        raise SettingError("merges", f"{merges}: {data.tokenizer} has {len(tokenizer.merges):,} merges")
    if not cuttable(tokenizer):
        raise SettingError(
            "merges", f"{merges}: {data.tokenizer} does not list its tokens in the order its merges made them"
        )
    return Unmerge(tokenizer, merges)
