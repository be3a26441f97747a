"""One split of a data directory as its readers see it: the shards opened as memmaps, checked
against the manifest and the model's tokenizer, read as one stream of tokens (the trainer's
batches, train/data.py; the validation windows, eval/loss.py), with its mask where the data has
one (chat data: which tokens the loss counts)."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.shards import MASK_DTYPE, Shard, ShardError, open_shard, verify_shard

log = logging.getLogger(__name__)


class TooShort(SettingError):
    """A split whose longest shard holds fewer tokens than one sequence: `longest` tokens, so that
    a caller who knows where the context length came from can say what would fit."""

    def __init__(self, setting: str, problem: str, longest: int) -> None:
        super().__init__(setting, problem)
        self.longest = longest


class ShardData:
    """The shards of one split of a data directory, opened as memmaps and checked against the
    model's tokenizer and the manifest. With `verify`, every token is read once first: the CRC-32
    in the header must match (one flipped byte would otherwise train silently) and every id must
    be below the vocabulary size (else the embedding lookup fails, on CUDA as a device-side
    assert); without it, `check_ids` refuses each batch that holds such an id."""

    def __init__(
        self, data: ShardDir, split: str, vocab_size: int, fingerprint: str, context_length: int, verify: bool = True
    ) -> None:
        paths = data.shard_paths(split)
        if not paths:
            raise SettingError("data", f"{data.path}: no {split} shards (*_{split}_NNNNNN.bin); run pretokenize first")
        self.shards = [open_shard(p, vocab_size) for p in paths]
        _check_manifest(data, self.shards)  # headers only: before the long read of every token
        if verify:
            self.shards = [verify_shard(p, vocab_size) for p in paths]
        self.vocab_size, self.verified, self.context_length = vocab_size, verify, context_length
        self.masked = data.has_mask  # every shard has a mask then (_check_manifest)
        plain = [s.path.name for s in self.shards if not s.header.extended]
        if plain:
            log.warning(
                f"{data.path}: {len(plain)} plain llm.c shard(s) (e.g. {plain[0]}) carry no tokenizer "
                "fingerprint: cannot check that they match the model's tokenizer"
            )
        for shard in self.shards:
            if shard.header.extended and shard.header.fingerprint != fingerprint:
                raise InputError(
                    f"{shard.path}: written with tokenizer {shard.header.fingerprint}, "
                    f"the model's is {fingerprint} (vocab {vocab_size:,})"
                )
        self.dtype = np.result_type(*(s.tokens.dtype for s in self.shards))  # uint16, or uint32 for big vocabularies
        self.sizes = np.array([len(s.tokens) for s in self.shards], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])  # of each shard in the stream; [-1]: its length
        if self.sizes.max() < context_length + 1:
            raise TooShort(
                "data",
                f"{data.path}: the longest {split} shard has {self.sizes.max():,} tokens, "
                f"too few for one sequence of {context_length} + 1",
                int(self.sizes.max()),
            )

    def locate(self, position: int) -> tuple[int, int]:
        """(shard index, offset in that shard) of a position of the stream of all shards (wrapping around)."""
        position %= int(self.starts[-1])
        i = int(np.searchsorted(self.starts, position, side="right")) - 1
        return i, position - int(self.starts[i])

    def span(self, start: int, length: int) -> np.ndarray:
        """`length` tokens from position `start` of the stream of all shards (wrapping around)."""
        return self._gather("tokens", self.dtype, start, length)

    def mask_span(self, start: int, length: int) -> np.ndarray:
        """The mask of span(start, length): uint8, 1 where the loss counts the token (masked data only)."""
        return self._gather("mask", MASK_DTYPE, start, length)

    def _gather(self, field: str, dtype: npt.DTypeLike, start: int, length: int) -> np.ndarray:
        out = np.empty(length, dtype)
        done = 0
        while done < length:
            i, offset = self.locate(start + done)
            take = min(length - done, int(self.sizes[i] - offset))
            out[done : done + take] = getattr(self.shards[i], field)[offset : offset + take]
            done += take
        return out

    def check_ids(self, sequences: np.ndarray, firsts: Sequence[int] | np.ndarray) -> None:
        """Refuse sequences with an id not below the vocabulary size, which unverified shards can
        hold (the embedding lookup would fail: an IndexError, on CUDA a device-side assert); row r
        starts at position firsts[r] of the stream. One max per batch: negligible beside a step, and
        skipped where every id was read already."""
        if self.verified or sequences.max() < self.vocab_size:
            return
        row, column = np.argwhere(sequences >= self.vocab_size)[0]
        i, offset = self.locate(int(firsts[row]) + int(column))
        path = self.shards[i].path
        raise ShardError(
            f"{path}: token {offset:,} is id {int(sequences[row, column]):,}, not below the vocabulary size "
            f"{self.vocab_size:,} (unverified data: `gptkit pretokenize verify {path.parent}` finds every such id)"
        )


def _check_manifest(data: ShardDir, shards: Sequence[Shard]) -> None:
    """Refuse shards whose headers disagree with the manifest that lists them (a count, the
    end-of-text id, ...): one of the two was edited or damaged, and training on either is a guess."""
    if data.manifest is None:
        return
    problems = data.listing_problems()
    for shard in shards:
        problems += data.header_problems(shard.path, shard.header)
    if problems:
        raise ShardError(f"{problems[0]} (`gptkit pretokenize verify {data.path}` lists every disagreement)")
