"""Jobs of whole documents, encoded by worker processes.

The parent reads documents and cuts them into jobs of about JOB_CHARS characters (a very long
document is cut only where the cut cannot change its tokens); workers encode the jobs; the parent
takes the results in submission order. Jobs in flight are bounded, so memory does not grow with
the corpus, and the output does not depend on the number of workers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from typing import TypeVar

import numpy as np

from gptkit.shared.corpus import Corpus
from gptkit.shared.workers import process_pool
from gptkit.tokenizer import Tokenizer

JOB_CHARS = 1 << 20  # characters of text per worker job
IN_FLIGHT_PER_WORKER = 2  # jobs queued per worker: keeps them busy, bounds memory

Job = list[tuple[str, bool]]  # (text, ends_document)
J = TypeVar("J")
R = TypeVar("R")


def encoded_jobs(
    corpus: Corpus,
    tokenizer: Tokenizer,
    eot_id: int | None,
    dtype: np.dtype,
    workers: int,
    cut: Callable[[str, int], int],
) -> Iterator[tuple[list[tuple[str, bool]], np.ndarray, list[int]]]:
    """(job, tokens, token counts of its texts) per job, in order: `workers` processes, a bounded queue."""
    encoded = in_order(workers, tokenizer, _start_worker, (tokenizer, eot_id, dtype), _encode_job, _jobs(corpus, cut))
    for job, (tokens, lengths) in encoded:
        yield job, tokens, lengths


def in_order(
    workers: int,
    tokenizer: Tokenizer,
    start: Callable[..., None],
    args: tuple,
    encode: Callable[[J], R],
    jobs: Iterable[J],
) -> Iterator[tuple[J, R]]:
    """(job, encode(job)) per job, in the order of `jobs`: in this process after start(*args), or
    by `workers` processes that each ran it, with at most IN_FLIGHT_PER_WORKER jobs a worker
    waiting (memory stays bounded). The documents' jobs and chat.py's conversations' go this way."""
    if workers <= 1:
        start(*args)
        for job in jobs:
            yield job, encode(job)
        return
    tokenizer.build_engine()  # once, here: the workers fork with it
    with process_pool(workers, start, args) as pool:
        pending: deque[tuple[J, Future[R]]] = deque()
        for job in jobs:
            pending.append((job, pool.submit(encode, job)))
            if len(pending) > IN_FLIGHT_PER_WORKER * workers:
                job, future = pending.popleft()
                yield job, future.result()
        while pending:
            job, future = pending.popleft()
            yield job, future.result()


def _jobs(corpus: Corpus, cut: Callable[[str, int], int]) -> Iterator[Job]:
    """Lists of (text, ends_document) of about JOB_CHARS characters, cut only between documents
    or, inside a long document, where the cut cannot change its tokens (`cut(text, end)`: the
    last such place at or before `end`)."""
    job: Job = []
    size, carry = 0, ""
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


_worker: tuple[Tokenizer, bytes, np.dtype] | None = None


def _start_worker(tokenizer: Tokenizer, eot_id: int | None, dtype: np.dtype) -> None:
    global _worker
    eot = b"" if eot_id is None else np.array([eot_id], np.uint32).tobytes()
    _worker = tokenizer, eot, dtype


def _encode_job(job: Job) -> tuple[np.ndarray, list[int]]:
    """A job's tokens in the shard dtype (each document followed by the end-of-text token),
    and the number of tokens of each of its texts."""
    assert _worker is not None, "_start_worker first"
    tokenizer, eot, dtype = _worker
    packed = tokenizer.encode_packed([text for text, _ in job], allowed_special=())
    parts: list[bytes] = []
    lengths = []
    for ids, (_, ends) in zip(packed, job):
        parts += (ids, eot) if ends else (ids,)
        lengths.append((len(ids) + (len(eot) if ends else 0)) // 4)
    return np.frombuffer(b"".join(parts), np.uint32).astype(dtype), lengths
