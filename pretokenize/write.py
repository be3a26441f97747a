"""Encoded documents written to a ShardSet, each to its split: whole documents by `Split`'s rule
(or all of a corpus to one side, with --val-input), or the text with its tail held back
(`TailSplit`).

For a tail, the texts are held back in memory until enough text follows them; the tail begins at
a document start or at a line end where a cut changes no token.
"""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from itertools import accumulate

import numpy as np

from gptkit.shared.corpus import Corpus
from gptkit.shared.progress import Progress
from gptkit.shared.shard_set import ShardSet
from gptkit.tokenizer import Tokenizer

from .jobs import encoded_jobs
from .split import Split, TailSplit, all_to

Counts = dict[str, list[int]]  # each split's [documents, tokens]


def write_splits(
    shards: ShardSet,
    split: Split | TailSplit,
    *,
    corpus: Corpus,
    val_corpus: Corpus | None,
    tokenizer: Tokenizer,
    eot_id: int | None,
    workers: int,
    quiet: bool,
) -> Counts:
    """Encode into `shards` by the split rule; returns the documents and tokens of each split."""
    shards.begin()
    counts: Counts = {"train": [0, 0], "val": [0, 0]}  # documents, tokens
    if val_corpus is not None:
        for name, each in (("val", val_corpus), ("train", corpus)):
            _encode_documents(shards, each, tokenizer, eot_id, workers, quiet, counts, all_to(name))
    elif isinstance(split, TailSplit):
        _encode_tail(shards, corpus, tokenizer, eot_id, workers, quiet, counts, split)
    else:
        _encode_documents(
            shards,
            corpus,
            tokenizer,
            eot_id,
            workers,
            quiet,
            counts,
            lambda doc_index: "val" if split.is_val(doc_index, counts["val"][1]) else "train",
        )
        if counts["train"][0] == 0:  # only --val-tokens can take every document
            raise LeadingSplitTakesAll(counts["val"][0])
    shards.finish_all()
    return counts


class LeadingSplitTakesAll(Exception):
    """--val-tokens took every document: the corpus is to be split as text."""

    def __init__(self, documents: int) -> None:
        self.documents = documents


class NoTailCut(Exception):
    """No place in the text where a validation tail of the size asked may begin."""


def _encode_documents(
    shards: ShardSet,
    corpus: Corpus,
    tokenizer: Tokenizer,
    eot_id: int | None,
    workers: int,
    quiet: bool,
    counts: Counts,
    split_of: Callable[[int], str],
) -> None:
    """Send each document, whole, to the split `split_of(its index)` names, counting into `counts`."""
    progress = Progress("encoding", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    doc_index, doc_split = 0, ""  # "": the split of the next document is not yet asked
    # A long document is cut where the tokenizer's pattern and normalizer say no id can change.
    for job, tokens, lengths in encoded_jobs(corpus, tokenizer, eot_id, shards.dtype, workers, tokenizer.safe_cut):
        # Consecutive texts of the same split are written together: one write per run of documents.
        run_split, run_start, position = "", 0, 0
        run_ends: list[int] = []
        for (_, end), length in zip(job, lengths):
            doc_split = doc_split or split_of(doc_index)
            if doc_split != run_split:
                if run_split:
                    shards.write(run_split, tokens[run_start:position], run_ends)
                run_split, run_start, run_ends = doc_split, position, []
            position += length
            counts[doc_split][1] += length
            if end:
                run_ends.append(position - run_start)
                counts[doc_split][0] += 1
                doc_index, doc_split = doc_index + 1, ""
        shards.write(run_split, tokens[run_start:position], run_ends)
        _show(progress, corpus, counts["train"][0] + counts["val"][0], counts["train"][1] + counts["val"][1])
    progress.close()


@dataclass
class _Held:
    """A text of the corpus kept back while it may still belong to the validation tail."""

    text: str
    tokens: np.ndarray
    ends: bool  # the text ends a document (its tokens end with the end-of-text token)
    starts_doc: bool
    starts_at_line_end: bool = False

    @property
    def may_start_tail(self) -> bool:
        return self.starts_doc or self.starts_at_line_end


def _encode_tail(
    shards: ShardSet,
    corpus: Corpus,
    tokenizer: Tokenizer,
    eot_id: int | None,
    workers: int,
    quiet: bool,
    counts: Counts,
    split: TailSplit,
) -> None:
    """Training is the text up to the cut, validation the tail after it (see TailSplit)."""
    progress = Progress("encoding", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    held: deque[_Held] = deque()
    held_size, last = 0, None
    # The progress counts what was read: `counts` leaves out the held texts until the end, and
    # then counts the document the tail cuts as two.
    documents_read, tokens_read = 0, 0
    cut_at = functools.partial(_last_line_end, tokenizer)
    for job, tokens, lengths in encoded_jobs(corpus, tokenizer, eot_id, shards.dtype, workers, cut_at):
        documents_read, tokens_read = documents_read + sum(ends for _, ends in job), tokens_read + len(tokens)
        for (text, ends), start, stop in zip(job, accumulate([0, *lengths]), accumulate(lengths)):
            # A text starts at a line end only where the jobs were cut at one; the lookbehind needs the text before.
            at_line_end = (
                last is not None and not last.ends and tokenizer.line_cuts(last.text[-1] + text[:2], 1, 1) == [1]
            )
            last = _Held(text, tokens[start:stop], ends, last is None or last.ends, at_line_end)
            held.append(last)
            held_size += split.size(last)
            # The oldest text can go to training once the texts after it hold a whole tail.
            while len(held) > 1 and held[1].may_start_tail and held_size - split.size(held[0]) >= split.target:
                held_size -= split.size(held[0])
                _write_held(shards, "train", held.popleft(), counts)
        _show(progress, corpus, documents_read, tokens_read)
    progress.close()
    found = _tail_cut(held, split, tokenizer, first_held_is_first_text=counts["train"][1] == 0)
    if found is None:
        raise NoTailCut
    index, chars, tokens_before = found
    for _ in range(index):
        _write_held(shards, "train", held.popleft(), counts)
    cut = held.popleft()
    if not (chars == 0 and cut.starts_doc):  # the text before the cut becomes a document
        eot = np.array([] if eot_id is None else [eot_id], shards.dtype)
        head = np.concatenate([cut.tokens[:tokens_before], eot])
        _write_held(shards, "train", _Held(cut.text[:chars], head, ends=True, starts_doc=cut.starts_doc), counts)
    _write_held(shards, "val", _Held(cut.text[chars:], cut.tokens[tokens_before:], cut.ends, starts_doc=True), counts)
    for rest in held:
        _write_held(shards, "val", rest, counts)


def _last_line_end(tokenizer: Tokenizer, text: str, end: int) -> int:
    """The last line end at or before `end` where a validation tail may begin; else any place where
    a cut cannot change the tokens (a line longer than a piece of the corpus)."""
    return tokenizer.last_line_cut(text, end) or tokenizer.safe_cut(text, end)


def _tail_cut(
    held: deque[_Held], split: TailSplit, tokenizer: Tokenizer, first_held_is_first_text: bool
) -> tuple[int, int, int] | None:
    """Where the validation tail begins: (index of the held text, characters and tokens into it)."""
    after = 0  # the size of the held texts after held[i]
    for i in reversed(range(len(held))):
        h = held[i]
        if after + split.size(h) >= split.target:
            starts = tokenizer.line_cuts(h.text, 1)
            if h.may_start_tail:
                starts.insert(0, 0)
            # Each part between two possible starts has the tokens it has in the whole text.
            parts = [h.text[a:b] for a, b in zip([0, *starts], starts)]
            part_tokens = (len(ids) // 4 for ids in tokenizer.encode_packed(parts, allowed_special=()))
            tokens_before = list(accumulate(part_tokens, initial=0))[1:]
            for chars, before in reversed(list(zip(starts, tokens_before))):
                size = len(h.text) - chars if split.unit == "characters" else len(h.tokens) - before
                if after + size >= split.target and not (i == 0 and chars == 0 and first_held_is_first_text):
                    return i, chars, before
        after += split.size(h)
    return None


def _write_held(shards: ShardSet, name: str, held: _Held, counts: Counts) -> None:
    if len(held.tokens):
        shards.write(name, held.tokens, [len(held.tokens)] if held.ends else [])
    counts[name][0] += held.ends
    counts[name][1] += len(held.tokens)


def _show(progress: Progress, corpus: Corpus, documents: int, tokens: int) -> None:
    progress.update(corpus.bytes_read, f"{documents:,} docs, {tokens:,} tokens")
