"""Jobs of whole documents, encoded by worker processes.

The parent reads documents and cuts them into jobs of about JOB_CHARS characters (a very long
document is cut only where the cut cannot change its tokens); workers encode the jobs; the parent
takes the results in submission order. Jobs in flight are bounded, so memory does not grow with
the corpus, and the output does not depend on the number of workers.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future

import numpy as np

from gptkit.shared.corpus import Corpus
from gptkit.shared.workers import process_pool
from gptkit.tokenizer import Tokenizer

JOB_CHARS = 1 << 20  # characters of text per worker job
IN_FLIGHT_PER_WORKER = 2  # jobs queued per worker: keeps them busy, bounds memory


def encoded_jobs(
    corpus: Corpus,
    tokenizer: Tokenizer,
    eot_id: int | None,
    dtype: np.dtype,
    workers: int,
    cut: Callable[[str, int], int],
) -> Iterator[tuple[list[tuple[str, bool]], np.ndarray, list[int]]]:
    """(job, tokens, token counts of its texts) per job, in order: `workers` processes, a bounded queue."""
    worker_args = (tokenizer, eot_id, dtype)
    if workers <= 1:
        _start_worker(*worker_args)
        for job in _jobs(corpus, cut):
            yield job, *_encode_job(job)
        return
    tokenizer.build_engine()  # once, here: the workers fork with it
    with process_pool(workers, _start_worker, worker_args) as pool:
        pending: deque[tuple[list[tuple[str, bool]], Future[tuple[np.ndarray, list[int]]]]] = deque()
        for job in _jobs(corpus, cut):
            pending.append((job, pool.submit(_encode_job, job)))
            if len(pending) > IN_FLIGHT_PER_WORKER * workers:
                job, future = pending.popleft()
                yield job, *future.result()
        while pending:
            job, future = pending.popleft()
            yield job, *future.result()


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
