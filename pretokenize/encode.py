"""Corpora to token shards.

The parent reads documents and cuts them into jobs of whole documents (a very long one
is cut only where the cut cannot change its tokens); workers encode the jobs; the parent
takes the results in submission order, sends each document to the train or validation
split, and appends it to that split's current shard. Jobs in flight are bounded, so memory
does not grow with the corpus, and the output does not depend on the number of workers.

A corpus with too few documents for the split rule (one book in one .txt file) is split as
text instead: validation is its tail. The documents are counted first, only up to the number
the rule needs (all of them when they are fewer), so that costs a read of the text only for
such a corpus; the tail's texts are held back in memory until enough text follows them.

The tokens a split holds are known only once it is written: one that holds fewer than half the
validation tokens asked, or leaves training fewer than half of the rest (documents of very
uneven sizes), is written again as a tail of the tokens asked; if no tail can be cut, the first
split stays, with a warning.

The manifest is the commit point (shared/shard_dir.py's ShardSet writes the directory). Shards
are written under temporary names, and only when the whole corpus is done are they renamed to
names no file of the directory has (the old dataset stays whole beside them), then the manifest
that lists them replaces the old one (renamed over it, atomically), then the shards it does not
list are removed. A run stopped at any instant, `kill -9` included, leaves the old dataset or
the new one; what a killed run left (temporary files, shards no manifest lists) the next run
removes.
"""
from __future__ import annotations

import functools
import logging
import numbers
import time
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate
from pathlib import Path

import numpy as np

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.progress import Progress
from gptkit.shared.shard_dir import ShardSet, check_shard_directory
from gptkit.shared.text import EOT
from gptkit.shared.workers import process_pool

log = logging.getLogger(__name__)

DEFAULT_SHARD_TOKENS = 100_000_000
JOB_CHARS = 1 << 20  # characters of text per worker job
IN_FLIGHT_PER_WORKER = 2  # jobs queued per worker: keeps them busy, bounds memory


@dataclass(frozen=True)
class Split:
    """Which documents are held out for validation: a fraction of them, evenly spaced, or
    the leading documents up to a number of tokens (as llm.c's first shard)."""

    val_fraction: float | None = None
    val_tokens: int | None = None

    def __post_init__(self):
        if (self.val_fraction is None) == (self.val_tokens is None):
            raise InputError("val_fraction and val_tokens: give one or the other")
        # NaN fails every comparison, so this refuses it and the infinities too.
        if self.val_fraction is not None and not (isinstance(self.val_fraction, numbers.Real) and 0 < self.val_fraction < 1):
            raise SettingError("val_fraction", f"{self.val_fraction}: expected a number between 0 and 1, both excluded")
        if self.val_tokens is not None and not (_is_whole(self.val_tokens) and self.val_tokens >= 1):
            raise SettingError("val_tokens", f"{self.val_tokens}: expected a whole number, 1 or more")

    def describe(self):
        if self.val_tokens is not None:
            return {"rule": "leading", "val_tokens": self.val_tokens,
                    "text": f"the first documents in input order, until validation holds at least {self.val_tokens} tokens"}
        f = "{}/{}".format(*self._fraction)
        return {"rule": "fraction", "val_fraction": self.val_fraction,
                "text": f"document i (0-based, in input order) is validation iff floor((i+1)*{f}) > floor(i*{f})"}

    def is_val(self, doc_index, val_tokens_so_far):
        if self.val_tokens is not None:
            return val_tokens_so_far < self.val_tokens
        num, den = self._fraction
        return (doc_index + 1) * num // den > doc_index * num // den

    def fewest_documents(self):
        """The fewest documents with which this rule can leave neither split empty."""
        if self.val_tokens is not None:
            return 2
        num, den = self._fraction
        return -(-den // num)

    def asked(self, total_tokens):
        """The validation tokens this rule asks for, of a text of `total_tokens`."""
        if self.val_tokens is not None:
            return self.val_tokens
        num, den = self._fraction
        return -(-total_tokens * num // den)

    @functools.cached_property
    def _fraction(self):
        f = Fraction(str(self.val_fraction))  # exact, so the rule is the same on every machine
        return f.numerator, f.denominator


def _is_whole(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


@dataclass(frozen=True)
class TailSplit:
    """For a corpus with too few documents for `Split`'s rule: validation is the tail of the
    text, as nanoGPT cuts its Shakespeare. It is the shortest tail that holds at least `target`
    characters (the --val-fraction of the text) or tokens (--val-tokens) and begins at a document
    start or at the newline ending a line where the tokenizer says a cut changes no token
    (Tokenizer.line_cuts; the newline goes to validation). A
    document cut in two is two documents, each followed by the end-of-text token. Also the split of
    a corpus whose first split held too few or too many tokens (`_tail_instead`)."""

    rule: Split
    documents: int
    target: int
    unit: str  # "characters" or "tokens"
    why: str  # why not whole documents

    @classmethod
    def of(cls, rule, documents, characters):
        why = f"{documents:,} document(s), too few to hold out whole ones"
        if rule.val_tokens is not None:
            return cls(rule, documents, rule.val_tokens, "tokens", why)
        return cls(rule, documents, rule.asked(characters), "characters", why)

    def describe(self):
        given = {"val_tokens": self.rule.val_tokens} if self.rule.val_tokens is not None else {"val_fraction": self.rule.val_fraction}
        return {"rule": "tail", **given, "documents": self.documents, "val_at_least": self.target, "unit": self.unit,
                "text": f"{self.why}: validation is the shortest tail of the text with at least {self.target:,} "
                        f"{self.unit} that begins at a document start or at the newline ending a line"}

    def size(self, held):
        return len(held.text) if self.unit == "characters" else len(held.tokens)


def encode_corpus(corpus, tokenizer, out_dir, *, split=Split(val_fraction=0.01), val_corpus=None,
                  shard_tokens=DEFAULT_SHARD_TOKENS, workers=1, eot_token=EOT, tokenizer_source=None,
                  overwrite=False, quiet=False):
    """Encode every document of `corpus` into shards in `out_dir`; returns the manifest.

    With `val_corpus`, all of it is the validation split and all of `corpus` the training one;
    otherwise `split` says which documents are held out, or the tail of the text is (`TailSplit`)
    when there are too few documents for it."""
    out_dir = Path(out_dir)
    eot_id = eot_id_of(tokenizer, eot_token, tokenizer_source)
    check_shard_directory(out_dir, tokenizer.fingerprint, overwrite)
    if val_corpus is not None:
        for setting, each in (("val_input", val_corpus), ("input", corpus)):
            if each.count(1)[0] == 0:
                raise SettingError(setting, f"{', '.join(map(str, each.paths))}: no documents (every file is empty)")
    else:
        documents, characters = corpus.count(split.fewest_documents())
        if documents == 0:
            raise InputError(f"{', '.join(map(str, corpus.paths))}: no documents (every file is empty)")
        if documents < split.fewest_documents():
            split = TailSplit.of(split, documents, characters)
    start = time.perf_counter()
    written = []  # the shards of the latest encoding; an encoding again discards the earlier one's

    def encode(rule):
        if written:
            written.pop().discard()
        written.append(ShardSet(out_dir, tokenizer, eot_id, shard_tokens))
        return _encode(written[-1], rule, corpus=corpus, val_corpus=val_corpus, tokenizer=tokenizer, eot_id=eot_id,
                       workers=workers, quiet=quiet)

    try:
        try:
            try:
                counts = encode(split)
            except _LeadingSplitTakesAll as e:  # documents few or short for --val-tokens: encode again, as text
                split = TailSplit.of(split, e.documents, characters=None)
                counts = encode(split)
        except _NoTailCut:
            raise _no_tail_error(split, corpus) from None
        if val_corpus is None:
            if (tail := _tail_instead(split, counts)) is not None:
                try:
                    counts, split = encode(tail), tail
                except _NoTailCut:
                    counts = encode(split)  # the first split after all; the warning below says why
            _warn_if_off(split, counts, corpus)
        shards = written[-1]
        manifest = shards.manifest(counts, _how_made(corpus, val_corpus, split), eot_token=eot_token,
                                   tokenizer_source=tokenizer_source)
        manifest["seconds"] = round(time.perf_counter() - start, 3)
        shards.commit(manifest)
    except BaseException as e:
        if written:
            written[-1].discard()
        if not isinstance(e, OSError):
            raise
        detail = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
        raise SettingError("out", f"{out_dir}: cannot write ({detail})") from None
    return manifest


def eot_id_of(tokenizer, eot_token, tokenizer_source=None):
    """The id of `eot_token`, a special token of the tokenizer (None: no end-of-text token)."""
    if eot_token is None:
        return None
    eot_id = tokenizer.special_tokens.get(eot_token)
    if eot_id is None:
        raise SettingError("eot_token", f"{eot_token!r}: not a special token of {tokenizer_source or 'the tokenizer'} "
                                        f"(it has: {', '.join(tokenizer.special_tokens) or 'none'}); name one it has, "
                                        "or none (--no-eot)")
    return eot_id


def _sizes(split, counts):
    """(validation tokens, all tokens, validation tokens asked) of an encoding."""
    val, total = counts["val"][1], counts["val"][1] + counts["train"][1]
    return val, total, (split.rule if isinstance(split, TailSplit) else split).asked(total)


def _off(val, total, asked):
    """Whether a split is too far from the one asked: validation has fewer than half the tokens
    asked, or leaves training fewer than half of the rest."""
    return 2 * val < asked or 2 * (total - val) < total - asked


def _tail_instead(split, counts):
    """The split to encode again by when `split` is too far from the one asked (`_off`): the
    shortest tail with the tokens asked. None: near enough, or such a tail already."""
    if isinstance(split, TailSplit) and split.unit == "tokens":
        return None
    val, total, asked = _sizes(split, counts)
    if not _off(val, total, asked):
        return None
    if isinstance(split, TailSplit):
        held, documents, rule = f"a tail of {split.target:,} characters", split.documents, split.rule
    else:
        held, documents, rule = "whole documents", counts["val"][0] + counts["train"][0], split
    too = f"under half of the {asked:,} asked" if 2 * val < asked else "leaving training under half of the rest"
    return TailSplit(rule, documents, asked, "tokens", f"{held} held {val:,} of the {total:,} tokens, {too}")


def _warn_if_off(split, counts, corpus):
    val, total, asked = _sizes(split, counts)
    if _off(val, total, asked):
        log.warning(f"{_paths(corpus)}: the validation split holds {val:,} of {total:,} tokens, {asked:,} asked: no "
                    f"document start or line end begins a tail nearer that size; give --val-input")


def _paths(corpus):
    return f"{corpus.paths[0]}{' ...' if len(corpus.paths) > 1 else ''}"


class _NoTailCut(Exception):
    """No place in the text where a validation tail of the size asked may begin."""


def _no_tail_error(split, corpus):
    setting = "val_tokens" if split.rule.val_tokens is not None else "val_fraction"
    return SettingError(
        setting,
        f"{getattr(split.rule, setting)}: {_paths(corpus)} has {split.why}, and no line end before the last "
        f"{split.target:,} {split.unit} to cut a validation tail at; give more text, more documents or --val-input"
    )


def _encode(shards, split, *, corpus, val_corpus, tokenizer, eot_id, workers, quiet):
    """Encode into `shards` by the split rule; returns the documents and tokens of each split."""
    shards.begin()
    counts = {"train": [0, 0], "val": [0, 0]}  # documents, tokens
    if val_corpus is not None:
        for name, each in (("val", val_corpus), ("train", corpus)):
            _encode_documents(shards, each, tokenizer, eot_id, workers, quiet, counts, lambda doc_index: name)
    elif isinstance(split, TailSplit):
        _encode_tail(shards, corpus, tokenizer, eot_id, workers, quiet, counts, split)
    else:
        _encode_documents(shards, corpus, tokenizer, eot_id, workers, quiet, counts,
                          lambda doc_index: "val" if split.is_val(doc_index, counts["val"][1]) else "train")
        if counts["train"][0] == 0:  # only --val-tokens can take every document
            raise _LeadingSplitTakesAll(counts["val"][0])
    shards.finish_all()
    return counts


class _LeadingSplitTakesAll(Exception):
    """--val-tokens took every document: the corpus is to be split as text."""

    def __init__(self, documents):
        self.documents = documents


def _encode_documents(shards, corpus, tokenizer, eot_id, workers, quiet, counts, split_of):
    """Send each document, whole, to the split `split_of(its index)` names, counting into `counts`."""
    progress = Progress("encoding", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    doc_index, doc_split = 0, None
    # A long document is cut where the tokenizer's pattern and normalizer say no id can change.
    for job, tokens, lengths in _encoded_jobs(corpus, tokenizer, eot_id, shards.dtype, workers, tokenizer.safe_cut):
        # Consecutive texts of the same split are written together: one write per run of documents.
        run_split, run_start, run_ends, position = None, 0, [], 0
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
                doc_index, doc_split = doc_index + 1, None
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
    def may_start_tail(self):
        return self.starts_doc or self.starts_at_line_end


def _encode_tail(shards, corpus, tokenizer, eot_id, workers, quiet, counts, split):
    """Training is the text up to the cut, validation the tail after it (see TailSplit)."""
    progress = Progress("encoding", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    held, held_size, last = deque(), 0, None
    # The progress counts what was read: `counts` leaves out the held texts until the end, and
    # then counts the document the tail cuts as two.
    documents_read, tokens_read = 0, 0
    cut = functools.partial(_last_line_end, tokenizer)
    for job, tokens, lengths in _encoded_jobs(corpus, tokenizer, eot_id, shards.dtype, workers, cut):
        documents_read, tokens_read = documents_read + sum(ends for _, ends in job), tokens_read + len(tokens)
        for (text, ends), start, stop in zip(job, accumulate([0, *lengths]), accumulate(lengths)):
            # A text starts at a line end only where _jobs cut at one; the lookbehind needs the text before.
            at_line_end = last is not None and not last.ends and tokenizer.line_cuts(last.text[-1] + text[:2], 1, 1) == [1]
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
        raise _NoTailCut
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


def _tail_cut(held, split, tokenizer, first_held_is_first_text):
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


def _write_held(shards, name, held, counts):
    if len(held.tokens):
        shards.write(name, held.tokens, [len(held.tokens)] if held.ends else [])
    counts[name][0] += held.ends
    counts[name][1] += len(held.tokens)


def _show(progress, corpus, documents, tokens):
    progress.update(corpus.bytes_read, f"{documents:,} docs, {tokens:,} tokens")


def _jobs(corpus, cut):
    """Lists of (text, ends_document) of about JOB_CHARS characters, cut only between documents
    or, inside a long document, where the cut cannot change its tokens (`cut(text, end)`: the
    last such place at or before `end`)."""
    job, size, carry = [], 0, ""
    for text, ends in corpus.pieces():
        text, carry = carry + text, ""
        if not ends:
            at = cut(text, len(text) - 1)
            text, carry = text[:at], text[at:]
        if text:
            job.append((text, ends))
            size += len(text)
        if size >= JOB_CHARS:
            yield job
            job, size = [], 0
    if job:
        yield job


def _last_line_end(tokenizer, text, end):
    """The last line end at or before `end` where a validation tail may begin; else any place where
    a cut cannot change the tokens (a line longer than a piece of the corpus)."""
    return tokenizer.last_line_cut(text, end) or tokenizer.safe_cut(text, end)


def _encoded_jobs(corpus, tokenizer, eot_id, dtype, workers, cut):
    """(job, tokens, token counts of its texts) per job, in order: `workers` processes, a bounded queue."""
    worker_args = (tokenizer, eot_id, dtype)
    if workers <= 1:
        _start_worker(*worker_args)
        for job in _jobs(corpus, cut):
            yield job, *_encode_job(job)
        return
    with process_pool(workers, _start_worker, worker_args) as pool:
        pending = deque()
        for job in _jobs(corpus, cut):
            pending.append((job, pool.submit(_encode_job, job)))
            if len(pending) > IN_FLIGHT_PER_WORKER * workers:
                job, future = pending.popleft()
                yield job, *future.result()
        while pending:
            job, future = pending.popleft()
            yield job, *future.result()


_worker = None


def _start_worker(tokenizer, eot_id, dtype):
    global _worker
    eot = b"" if eot_id is None else np.array([eot_id], np.uint32).tobytes()
    _worker = tokenizer, eot, dtype


def _encode_job(job):
    """A job's tokens in the shard dtype (each document followed by the end-of-text token),
    and the number of tokens of each of its texts."""
    tokenizer, eot, dtype = _worker
    packed = tokenizer.encode_packed([text for text, _ in job], allowed_special=())
    parts, lengths = [], []
    for ids, (_, ends) in zip(packed, job):
        parts += (ids, eot) if ends else (ids,)
        lengths.append((len(ids) + (len(eot) if ends else 0)) // 4)
    return np.frombuffer(b"".join(parts), np.uint32).astype(dtype), lengths


def _how_made(corpus, val_corpus, split):
    """What the manifest records of how the shards were made: the split rule and the sources."""
    if val_corpus is not None:
        split = {"rule": "given", "text": "validation is all of --val-input, training all of --input"}
    else:
        split = split.describe()
    corpora = [corpus] if val_corpus is None else [corpus, val_corpus]
    return {
        "split": split,
        "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in corpus.paths],
        **({"val_sources": [{"path": str(p), "bytes": p.stat().st_size} for p in val_corpus.paths]} if val_corpus else {}),
        "invalid_utf8_replaced": sum(c.invalid_utf8 for c in corpora),
    }
