"""Corpora to token shards.

The parent reads documents and cuts them into jobs of whole documents (a very long one
is cut only where the cut cannot change its tokens); workers encode the jobs; the parent
takes the results in submission order, sends each document to the train or validation
split, and appends it to that split's current shard. Jobs in flight are bounded, so memory
does not grow with the corpus, and the output does not depend on the number of workers.

All shards are written under temporary names and renamed into place, with the manifest,
only when the whole corpus is done: an interrupted run leaves the directory as it was.
"""
from __future__ import annotations

import functools
import json
import time
from bisect import bisect_right
from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from itertools import accumulate
from pathlib import Path

import numpy as np

from shared.errors import InputError
from shared.files import atomic_write
from shared.progress import Progress
from shared.shards import HEADER_BYTES, MANIFEST, SHARD_NAME, ShardHeader, ShardWriter, dtype_for, read_manifest
from shared.workers import process_pool
from tokenizer.split import safe_cut

DEFAULT_EOT = "<|endoftext|>"
DEFAULT_SHARD_TOKENS = 100_000_000
MANIFEST_VERSION = 1
JOB_CHARS = 1 << 20  # characters of text per worker job
IN_FLIGHT_PER_WORKER = 2  # jobs queued per worker: keeps them busy, bounds memory


@dataclass(frozen=True)
class Split:
    """Which documents are held out for validation: a fraction of them, evenly spaced, or
    the leading documents up to a number of tokens (as llm.c's first shard)."""

    val_fraction: float | None = None
    val_tokens: int | None = None

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

    @functools.cached_property
    def _fraction(self):
        f = Fraction(str(self.val_fraction))  # exact, so the rule is the same on every machine
        return f.numerator, f.denominator


def encode_corpus(corpus, tokenizer, out_dir, *, split=Split(val_fraction=0.01), shard_tokens=DEFAULT_SHARD_TOKENS,
                  workers=1, eot_token=DEFAULT_EOT, tokenizer_source=None, overwrite=False, quiet=False):
    """Encode every document of `corpus` into shards in `out_dir`; returns the manifest."""
    out_dir = Path(out_dir)
    eot_id = None
    if eot_token is not None:
        eot_id = tokenizer.special_tokens.get(eot_token)
        if eot_id is None:
            raise InputError(f"{tokenizer_source or 'the tokenizer'}: no special token {eot_token!r} "
                             f"(it has: {', '.join(tokenizer.special_tokens) or 'none'}); use --eot-token or --no-eot")
    _check_out_dir(out_dir, tokenizer.fingerprint, overwrite)
    shards = ShardSet(out_dir, tokenizer, eot_id, shard_tokens)
    start = time.perf_counter()
    try:
        shards.begin()
        counts = _encode_into(shards, corpus, tokenizer, split, eot_id, workers, quiet)
        manifest = _manifest(shards, corpus, tokenizer, tokenizer_source, eot_token, eot_id, split, counts)
        manifest["seconds"] = round(time.perf_counter() - start, 3)
        shards.commit(manifest)
    except OSError as e:
        shards.discard()
        detail = f"{e.filename}: {e.strerror}" if e.filename else e.strerror
        raise InputError(f"--out-dir {out_dir}: cannot write ({detail})") from None
    except BaseException:
        shards.discard()
        raise
    return manifest


def _check_out_dir(out_dir, fingerprint, overwrite):
    """Refuse a directory that holds shards of another tokenizer (or of none we can tell)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"--out-dir {out_dir}: exists and is not a directory")
    if overwrite or not out_dir.exists():
        return
    manifest = read_manifest(out_dir) if (out_dir / MANIFEST).exists() else None
    found = {manifest.get("tokenizer", {}).get("fingerprint")} if manifest else set()
    for path in out_dir.glob("*.bin"):
        if SHARD_NAME.search(path.name):
            with open(path, "rb") as f:
                raw = f.read(HEADER_BYTES)
            try:
                found.add(ShardHeader.from_bytes(raw, path).fingerprint)
            except InputError:
                found.add(None)
    others = found - {fingerprint}
    if others:
        theirs = ", ".join(sorted(fp or "unknown" for fp in others))
        raise InputError(f"--out-dir {out_dir}: holds shards of another tokenizer ({theirs}; this one is {fingerprint}); "
                         "choose another directory or pass --overwrite")


class ShardSet:
    """The shards of one output directory: numbered in the order they are opened, written under
    temporary names, renamed into place by `commit` (bench/encode.py writes its reference with it too)."""

    def __init__(self, out_dir, tokenizer, eot_id, shard_tokens):
        self.out_dir, self.tokenizer, self.shard_tokens = out_dir, tokenizer, shard_tokens
        self.name = out_dir.resolve().name
        self.dtype = dtype_for(tokenizer.vocab_size)
        self.facts = dict(vocab_size=tokenizer.vocab_size, eot_id=eot_id, fingerprint=tokenizer.fingerprint)
        self.open_writers, self.finished = {}, []  # finished: (split, writer, header)
        self.count = 0
        self.created_dir = not out_dir.exists()
        self.unigrams = {split: np.zeros(tokenizer.vocab_size, np.int64) for split in ("val", "train")}  # token counts

    def begin(self):
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for stale in self.out_dir.glob(".*.bin.tmp-*"):  # left by a killed run
            stale.unlink()
        for split in ("val", "train"):  # so validation is shard 0, as in llm.c
            self._open(split)

    def write(self, split, tokens, doc_ends):
        """Append tokens to the split, starting new shards as they fill; `doc_ends` are the
        offsets (sorted) in `tokens` just after each document that ends there."""
        self.unigrams[split] += np.bincount(tokens, minlength=len(self.unigrams[split]))
        done = 0
        while done < len(tokens):
            writer = self.open_writers.get(split) or self._open(split)
            stop = min(len(tokens), done + self.shard_tokens - writer.num_tokens)
            writer.write(tokens[done:stop], bisect_right(doc_ends, stop) - bisect_right(doc_ends, done))
            done = stop
            if writer.num_tokens == self.shard_tokens:
                self._finish(split)

    def _open(self, split):
        path = self.out_dir / f"{self.name}_{split}_{self.count:06d}.bin"
        self.count += 1
        writer = self.open_writers[split] = ShardWriter(path, self.dtype, **self.facts)
        return writer

    def _finish(self, split):
        writer = self.open_writers.pop(split)
        self.finished.append((split, writer, writer.close()))

    def finish_all(self):
        for split in list(self.open_writers):
            self._finish(split)
        self.finished.sort(key=lambda f: f[1].path.name[-10:])  # by shard number

    def commit(self, manifest):
        """Replace the directory's dataset: old manifest out, new shards in, new manifest, stale shards out."""
        (self.out_dir / MANIFEST).unlink(missing_ok=True)
        for _, writer, _ in self.finished:
            writer.commit()
        self.tokenizer.save(self.out_dir / "tokenizer.json")
        with atomic_write(self.out_dir / MANIFEST) as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
        ours = {writer.path.name for _, writer, _ in self.finished}
        for path in self.out_dir.glob("*.bin"):
            if SHARD_NAME.search(path.name) and path.name not in ours:
                path.unlink()

    def discard(self):
        for writer in [*self.open_writers.values(), *(w for _, w, _ in self.finished)]:
            writer.discard()
        if self.created_dir and self.out_dir.is_dir() and not any(self.out_dir.iterdir()):
            self.out_dir.rmdir()


def _encode_into(shards, corpus, tokenizer, split, eot_id, workers, quiet):
    progress = Progress("encoding", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    counts = {"train": [0, 0], "val": [0, 0]}  # documents, tokens
    doc_index, doc_split = 0, None
    for ends, tokens, lengths in _encoded_jobs(corpus, tokenizer, eot_id, shards.dtype, workers):
        # Consecutive texts of the same split are written together: one write per run of documents.
        run_split, run_start, run_ends, position = None, 0, [], 0
        for end, length in zip(ends, lengths):
            doc_split = doc_split or ("val" if split.is_val(doc_index, counts["val"][1]) else "train")
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
        total_tokens = counts["train"][1] + counts["val"][1]
        progress.update(corpus.bytes_read, f"{doc_index:,} docs, {total_tokens:,} tokens")
    progress.close()
    if doc_index == 0:
        raise InputError(f"{', '.join(map(str, corpus.paths))}: no documents (every file is empty)")
    for name, (docs, _) in counts.items():
        if docs == 0:
            flag, value = ("--val-tokens", split.val_tokens) if split.val_tokens is not None else ("--val-fraction", split.val_fraction)
            raise InputError(
                f"{corpus.paths[0]}{' ...' if len(corpus.paths) > 1 else ''}: {doc_index:,} document(s) leave the {name} "
                f"split empty with {flag} {value}; give more documents (.txt files are cut at --separator) or another {flag}"
            )
    shards.finish_all()
    return counts


def _jobs(corpus):
    """Lists of (text, ends_document) of about JOB_CHARS characters, cut only between documents
    or, inside a long document, where the cut cannot change its tokens."""
    job, size, carry = [], 0, ""
    for text, ends in corpus.pieces():
        text, carry = carry + text, ""
        if not ends:
            cut = safe_cut(text, len(text) - 1)
            text, carry = text[:cut], text[cut:]
        if text:
            job.append((text, ends))
            size += len(text)
        if size >= JOB_CHARS:
            yield job
            job, size = [], 0
    if job:
        yield job


def _encoded_jobs(corpus, tokenizer, eot_id, dtype, workers):
    """(ends, tokens, token counts) per job, in order: `workers` processes, a bounded queue."""
    worker_args = (tokenizer, eot_id, dtype)
    if workers <= 1:
        _start_worker(*worker_args)
        for job in _jobs(corpus):
            yield [e for _, e in job], *_encode_job(job)
        return
    with process_pool(workers, _start_worker, worker_args) as pool:
        pending = deque()
        for job in _jobs(corpus):
            pending.append(([e for _, e in job], pool.submit(_encode_job, job)))
            if len(pending) > IN_FLIGHT_PER_WORKER * workers:
                ends, future = pending.popleft()
                yield ends, *future.result()
        while pending:
            ends, future = pending.popleft()
            yield ends, *future.result()


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


def _manifest(shards, corpus, tokenizer, tokenizer_source, eot_token, eot_id, split, counts):
    return {
        "format": "gptkit-shards",
        "version": MANIFEST_VERSION,
        "name": shards.name,
        "tokenizer": {"file": "tokenizer.json", "source": str(tokenizer_source) if tokenizer_source else None,
                      "fingerprint": tokenizer.fingerprint, "vocab_size": tokenizer.vocab_size},
        "eot_token": eot_token if eot_id is not None else None,
        "eot_id": eot_id,
        "dtype": shards.dtype.name,
        "shard_tokens": shards.shard_tokens,
        "split": split.describe(),
        "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in corpus.paths],
        "invalid_utf8_replaced": corpus.invalid_utf8,
        "totals": {name: {"documents": docs, "tokens": tokens, "unigram_entropy": _entropy(shards.unigrams[name])}
                   for name, (docs, tokens) in counts.items()},
        "shards": [
            {"file": writer.path.name, "split": name, "tokens": header.num_tokens,
             "documents": header.num_docs, "crc32": f"{header.checksum:08x}"}
            for name, writer, header in shards.finished
        ],
    }


def _entropy(counts):
    """The entropy of the tokens' unigram distribution, in nats per token: the loss of a model
    that knows only token frequencies, the baseline a trained model's loss must beat."""
    p = counts[counts > 0] / counts.sum()
    return round(float(-(p * np.log(p)).sum()), 6)
