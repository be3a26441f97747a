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

import logging

import numpy as np

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.shard_dir import TOKENIZER_FILE, ShardDir
from gptkit.shared.shards import ShardError, open_shard, verify_shard
from gptkit.tokenizer import Tokenizer

log = logging.getLogger(__name__)


class ShardData:
    """The shards of one split of a data directory, opened as memmaps and checked against the
    model's tokenizer and the manifest. With `verify`, every token is read once first: the CRC-32
    in the header must match (one flipped byte would otherwise train silently) and every id must
    be below the vocabulary size (else the embedding lookup fails, on CUDA as a device-side
    assert); without it, `check_ids` refuses each batch that holds such an id."""

    def __init__(self, data: ShardDir, split, vocab_size, fingerprint, context_length, verify=True):
        paths = data.shard_paths(split)
        if not paths:
            raise SettingError("data", f"{data.path}: no {split} shards (*_{split}_NNNNNN.bin); run pretokenize first")
        self.shards = [open_shard(p, vocab_size) for p in paths]
        _check_manifest(data, self.shards)  # headers only: before the long read of every token
        if verify:
            self.shards = [verify_shard(p, vocab_size) for p in paths]
        self.vocab_size, self.verified = vocab_size, verify
        plain = [s.path.name for s in self.shards if not s.header.extended]
        if plain:
            log.warning(f"{data.path}: {len(plain)} plain llm.c shard(s) (e.g. {plain[0]}) carry no tokenizer "
                        "fingerprint: cannot check that they match the model's tokenizer")
        for shard in self.shards:
            if shard.header.extended and shard.header.fingerprint != fingerprint:
                raise InputError(f"{shard.path}: written with tokenizer {shard.header.fingerprint}, "
                                 f"the model's is {fingerprint} (vocab {vocab_size:,})")
        self.dtype = np.result_type(*(s.tokens.dtype for s in self.shards))  # uint16, or uint32 for big vocabularies
        self.sizes = np.array([len(s.tokens) for s in self.shards], np.int64)
        self.starts = np.concatenate([[0], np.cumsum(self.sizes)])  # of each shard in the stream; [-1]: its length
        if self.sizes.max() < context_length + 1:
            raise SettingError("data", f"{data.path}: the longest {split} shard has {self.sizes.max():,} tokens, "
                             f"too few for one sequence of {context_length} + 1")

    def locate(self, position):
        """(shard index, offset in that shard) of a position of the stream of all shards (wrapping around)."""
        position %= int(self.starts[-1])
        i = int(np.searchsorted(self.starts, position, side="right")) - 1
        return i, position - int(self.starts[i])

    def span(self, start, length):
        """`length` tokens from position `start` of the stream of all shards (wrapping around)."""
        out = np.empty(length, self.dtype)
        done = 0
        while done < length:
            i, offset = self.locate(start + done)
            take = min(length - done, int(self.sizes[i] - offset))
            out[done : done + take] = self.shards[i].tokens[offset : offset + take]
            done += take
        return out

    def check_ids(self, sequences, firsts):
        """Refuse sequences with an id not below the vocabulary size, which unverified shards can
        hold (the embedding lookup would fail: an IndexError, on CUDA a device-side assert); row r
        starts at position firsts[r] of the stream. One max per batch: negligible beside a step, and
        skipped where every id was read already."""
        if self.verified or sequences.max() < self.vocab_size:
            return
        row, column = np.argwhere(sequences >= self.vocab_size)[0]
        i, offset = self.locate(int(firsts[row]) + int(column))
        path = self.shards[i].path
        raise ShardError(f"{path}: token {offset:,} is id {int(sequences[row, column]):,}, not below the vocabulary size "
                         f"{self.vocab_size:,} (unverified data: `gptkit pretokenize verify {path.parent}` finds every such id)")


class Loader:
    """Training batches: `batch(step, micro)` -> (B, T + 1) token sequences in the shards' dtype
    (inputs are [:, :-1], targets [:, 1:]); they travel to the GPU at that width, not as int64."""

    def __init__(self, data: ShardData, mode, batch_size, context_length, seed, rank=0, world_size=1, grad_accum=1):
        self.data, self.mode, self.B, self.T = data, mode, batch_size, context_length
        self.seed, self.rank, self.world, self.grad_accum = seed, rank, world_size, grad_accum
        usable = np.maximum(data.sizes - context_length, 0)  # sequence start positions, shard by shard
        self.cumulative, self.first_pick = np.cumsum(usable), np.cumsum(usable) - usable

    def batch(self, step, micro=0):
        rows = range(self.rank * self.B, (self.rank + 1) * self.B)
        G, T = self.B * self.world, self.T
        index = step * self.grad_accum + micro  # the global batch's number
        if self.mode == "random":
            rng = np.random.default_rng([self.seed, index])
            picks = rng.integers(0, self.cumulative[-1], size=G)[rows.start : rows.stop]
            shard = np.searchsorted(self.cumulative, picks, side="right")
            offset = picks - self.first_pick[shard]
            sequences = np.stack([self.data.shards[s].tokens[o : o + T + 1] for s, o in zip(shard, offset)])
            firsts = self.data.starts[shard] + offset
        else:
            start = (index * G + rows.start) * T
            flat = self.data.span(start, self.B * T + 1)
            sequences = np.stack([flat[i * T : i * T + T + 1] for i in range(self.B)])
            firsts = start + T * np.arange(self.B)
        self.data.check_ids(sequences, firsts)
        return sequences


def eval_sequences(data: ShardData, context_length, max_tokens):
    """The fixed validation set: the first `max_tokens` tokens of the validation stream, as
    sequences of context_length + 1 (the same tokens in every evaluation of every run)."""
    total = int(data.sizes.sum())
    count = max(1, min(max_tokens, total - 1) // context_length)
    flat = data.span(0, count * context_length + 1)
    sequences = np.stack([flat[i * context_length : (i + 1) * context_length + 1] for i in range(count)])
    data.check_ids(sequences, context_length * np.arange(count))
    return sequences


def _check_manifest(data, shards):
    """Refuse shards whose headers disagree with the manifest that lists them (a count, the
    end-of-text id, ...): one of the two was edited or damaged, and training on either is a guess."""
    if data.manifest is None:
        return
    problems = data.listing_problems()
    for shard in shards:
        problems += data.header_problems(shard.path, shard.header)
    if problems:
        raise ShardError(f"{problems[0]} (`gptkit pretokenize verify {data.path}` lists every disagreement)")


def data_tokenizer(data: ShardDir):
    """The tokenizer.json of a data directory (pretokenize copies it there)."""
    if not data.tokenizer.is_file():
        hint = "" if data.manifest else f" (for plain llm.c shards, put the {TOKENIZER_FILE} they were made with beside them)"
        raise SettingError("data", f"{data.path}: no {TOKENIZER_FILE}{hint}")
    return Tokenizer.from_file(data.tokenizer)
