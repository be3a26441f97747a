"""Continuous batching: a server's requests decode together, one step for all of them.

One thread owns the model. A request waits until there are rows free for its samples, then joins
the running batch before the next step: its prompt runs alone (the prefill), its keys and values
go into its rows of the batch's cache (KVCache.put), and from then on each step feeds one token
to every row at the row's own position (KVCache.at with a position per row). A request leaves,
freeing its rows for the next, after its max_new_tokens or as soon as its reader stops (its
end-of-text, a stop string, a client that went away).

Every step has all `rows` rows, those without a request fed a token that nothing reads: the same
shapes whether one request runs or eight. The math libraries choose their kernels by shape, and
the logits of a row of a batch of one and of a batch of eight can differ in the last bit (a
greedy choice between two nearly equal tokens would then flip); with one shape, a request's
tokens for a seed are the same alone as in company. Each request draws from its own rows' logits
with its own settings and generator, as generate() does for the samples of one prompt.

Bounded: at most `rows` samples decode at once; up to WAITING_PER_ROW times as many wait, in
order; a request beyond that is refused (Busy), and so is one with more samples than rows.

Stopped (a server's shutdown): `stop()` ends every request at once, its reader's next token
none, and returns when the thread has finished its step and left the model, so that nothing
runs torch while the process exits.
"""

from __future__ import annotations

import functools
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence

import torch

from gptkit.model.generate import logits_of_last, next_tokens
from gptkit.model.model import KVCache, TransformerLM
from gptkit.sample.settings import Settings

log = logging.getLogger(__name__)

# Samples that may wait for rows, per row: a burst of requests queues; more than this would hold
# as many threads and connections for minutes, so a client is told to come back (HTTP 429).
WAITING_PER_ROW = 4
_END = None  # what a request's queue holds after its last step


class Busy(Exception):
    """The queue is full: come back later."""


class Stopped(Exception):
    """The batcher has stopped: it takes no more requests."""


class Request:
    """A request's samples in the batch: an iterator of their next tokens, a (n,) CPU tensor per
    step, as generate() yields them; `close()` ends it (it frees its rows at the next step)."""

    def __init__(self, ids: Sequence[int], settings: Settings, seed: int) -> None:
        self.ids, self.settings, self.n = list(ids), settings, settings.num_samples
        self.generator = torch.Generator().manual_seed(seed)
        self.rows: list[int] = []
        self.length = 0  # positions of its rows filled
        self.made = 0  # steps taken
        self.last: torch.Tensor | None = None  # its rows' last tokens, on the model's device
        self.closed = False
        self.cut = False  # ended by stop(): its reader takes no more of what is queued
        self._out: queue.SimpleQueue[torch.Tensor | BaseException | None] = queue.SimpleQueue()

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        item = self._out.get()
        if item is _END or self.cut:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.closed = True


class Batcher:
    """Decodes the requests given to `submit`, `rows` samples at a time (module docstring)."""

    def __init__(self, model: TransformerLM, rows: int) -> None:
        self.model, self.rows = model, rows
        self.device = next(model.parameters()).device
        self.cache = KVCache(model.config, rows)  # every row has room for the whole context
        self.free = list(range(rows - 1, -1, -1))
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.changed = threading.Condition()
        self.stopped = False
        self._thread = threading.Thread(target=self._run, name="batcher", daemon=True)
        self._thread.start()

    def submit(self, ids: Sequence[int], settings: Settings, seed: int) -> Request:
        """Queue a request (its prompt ids fit the context with its max_new_tokens, and it asks for
        at most `rows` samples: the caller checks both); Busy where too many wait already."""
        assert 0 < settings.num_samples <= self.rows and len(ids) + settings.max_new_tokens <= self.cache.capacity
        request = Request(ids, settings, seed)
        with self.changed:
            if self.stopped:
                raise Stopped("the server is stopping")
            waiting = sum(r.n for r in self.waiting if not r.closed)
            if waiting + request.n > WAITING_PER_ROW * self.rows:
                raise Busy(f"{self.rows} samples are decoding and {waiting} waiting")
            self.waiting.append(request)
            self.changed.notify()
        return request

    def stop(self) -> None:
        """End every request now, waiting or decoding (they end as if their steps had run out),
        refuse new ones (Stopped), and return once the thread has left the model."""
        with self.changed:
            self.stopped = True
            for request in [*self.waiting, *self.running]:
                request.cut = True
                request._out.put(_END)  # a reader waiting for its next token wakes to none
            self.changed.notify_all()
        self._thread.join()

    def _run(self) -> None:
        with torch.inference_mode():
            while (admitted := self._admitted()) is not None:
                for request in admitted:
                    self._guarded([request], functools.partial(self._join, request))
                if self.running:
                    self._guarded(self.running, functools.partial(self._step, self.running))

    def _admitted(self) -> list[Request] | None:
        """The waiting requests that get rows now, in order (blocking while there is no work);
        None once stopped."""
        with self.changed:
            while not self.waiting and not self.running and not self.stopped:
                self.changed.wait()
            if self.stopped:
                return None
            for request in [r for r in self.running if r.closed]:
                self._leave(request)
            admitted = []
            while self.waiting and (self.waiting[0].closed or self.waiting[0].n <= len(self.free)):
                request = self.waiting.popleft()
                if not request.closed:
                    request.rows = [self.free.pop() for _ in range(request.n)]
                    self.running.append(request)
                    admitted.append(request)
            return admitted

    def _guarded(self, requests: list[Request], work: Callable[[], None]) -> None:
        """Run `work`; an error (out of memory, a bug) ends `requests` with it."""
        try:
            work()
        except Exception as e:
            log.debug(f"decoding failed: {type(e).__name__}: {e}")
            with self.changed:
                for request in list(requests):
                    request._out.put(e)
                    self._leave(request)

    def _join(self, request: Request) -> None:
        cache = KVCache(self.model.config, 1, capacity=len(request.ids))
        logits = logits_of_last(self.model, torch.tensor([request.ids], device=self.device), cache)
        for row in request.rows:
            self.cache.put(row, cache)
        request.length = len(request.ids)
        self._emit(request, logits.expand(request.n, -1))

    def _step(self, requests: list[Request]) -> None:
        tokens = torch.zeros(self.rows, 1, dtype=torch.long, device=self.device)
        positions = torch.zeros(self.rows, dtype=torch.long)
        for request in requests:
            assert request.last is not None  # its prefill drew its first tokens
            tokens[request.rows, 0] = request.last
            positions[request.rows] = request.length
        with self.cache.at(positions.to(self.device)):
            logits = logits_of_last(self.model, tokens, self.cache)
        for request in list(requests):
            request.length += 1
            self._emit(request, logits[request.rows])

    def _emit(self, request: Request, logits: torch.Tensor) -> None:
        """Draw the request's next tokens and hand them to its reader; after its last, it leaves."""
        s = request.settings
        request.last = next_tokens(logits, s.temperature, s.top_p, s.top_k, request.generator)
        request._out.put(request.last.cpu())
        request.made += 1
        if request.made == s.max_new_tokens:
            request._out.put(_END)
            with self.changed:
                self._leave(request)

    def _leave(self, request: Request) -> None:
        """Free the request's rows (holding `changed`)."""
        if request in self.running:
            self.running.remove(request)
            self.free += request.rows
