"""Continuous batching: a server's requests decode together, one step for all of them.

A request waits until there are rows free for its samples, then joins the running batch: its
prompt runs alone (the prefill), its keys and values go into its rows of the batch's cache
(KVCache.put), and from then on each step feeds one token to every row at the row's own position.
A request leaves, freeing its rows for the next, after its max_new_tokens or as soon as its reader
stops (its end-of-text, a stop string, a client that went away). Each request draws from its own
rows' logits with its own settings and generator, as generate() does for the samples of one
prompt; requests that sample alike draw in one call.

No thread of its own runs the model: the readers take turns at it. A reader that wants its
request's next tokens and finds none takes the next turn (the waiting requests that get rows
join, else every running request takes a step), unless another reader's turn runs; then it waits
for that turn's end. One request alone so decodes in its reader's thread, as `gptkit sample` does:
a thread of the model's own that handed each token to the reader's thread paid, per token, for
the two threads' handover of the interpreter's lock (the GIL), 3-7% of a small model's decoding
time on 2 busy cores (docs/benchmarks/2026-11-28-serving-one-user.md). With several requests,
whichever reader comes back first takes the step for all.

By default a step computes the rows in use alone, over the positions in use: the running
requests' rows are kept first in the cache (a request's rows move down into those a leaving one
freed), a step computes as many rows as samples run, and attends over the longest row's
positions, the shorter rows' later ones masked (KVCache.at with a position per row and a span).
Where every row is at the same length (one request alone) the step is generate()'s own, so that
a request alone gets the tokens `gptkit sample` gives for its prompt, settings and seed. In
company its shapes change with the company, and math libraries choose their kernels by shape: a
row's logits in a batch of one and of eight can differ in the last bit, and a greedy choice
between two nearly equal tokens then flips.

`invariant` (serve --batch-invariant): every step has all `rows` rows over the whole context,
those without a request fed a token that nothing reads, and each request draws alone: the same
shapes whether one request runs or eight, so that a request's tokens for a seed are the same alone
as in company, at the price of a step of `rows` rows over the context for one request alone.

Bounded: at most `rows` samples decode at once; up to WAITING_PER_ROW times as many wait, in
order; a request beyond that is refused (Busy), and so is one with more samples than rows.

Stopped (a server's shutdown): `stop()` ends every request at once, its reader's next token
none, and returns when the turn at the model, if one runs, has ended, and no reader takes
another: nothing runs torch while the process exits.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterator, Sequence

import torch

from gptkit.model.generate import choose, logits_of_last, uniforms
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
    step, as generate() yields them; `close()` ends it (it frees its rows at the next turn)."""

    def __init__(self, batcher: Batcher, ids: Sequence[int], settings: Settings, seed: int) -> None:
        self.batcher = batcher
        self.ids, self.settings, self.n = list(ids), settings, settings.num_samples
        self.generator = torch.Generator().manual_seed(seed)
        self.rows: list[int] = []
        self.length = 0  # positions of its rows filled
        self.made = 0  # steps taken
        self.last = torch.zeros(0, dtype=torch.long)  # its rows' last tokens, on the model's device (after its prefill)
        self.closed = False
        self.ended = False  # its last item is queued
        self.cut = False  # ended by stop(): its reader takes no more of what is queued
        self.out: deque[torch.Tensor | BaseException | None] = deque()  # what its reader takes next

    def __iter__(self) -> Iterator[torch.Tensor]:
        return self

    def __next__(self) -> torch.Tensor:
        item = self.batcher.next_item(self)
        if item is _END or self.cut:
            raise StopIteration
        if isinstance(item, BaseException):
            raise item
        return item

    def close(self) -> None:
        self.closed = True

    def end(self, item: BaseException | None = _END) -> None:
        """Queue the request's last item: the end of its steps, or the error that ended them."""
        self.out.append(item)
        self.ended = True


class Batcher:
    """Decodes the requests given to `submit`, `rows` samples at a time, in the turns their
    readers take; `invariant`: every step computes all rows over the whole context (module
    docstring). `widths` counts the steps taken by the rows they computed."""

    def __init__(self, model: TransformerLM, rows: int, invariant: bool = False) -> None:
        self.model, self.rows, self.invariant = model, rows, invariant
        self.device = next(model.parameters()).device
        self.cache = KVCache(model.config, rows)  # every row has room for the whole context
        self.free = list(range(rows - 1, -1, -1))  # popped from the end: the lowest first
        self.widths: Counter[int] = Counter()
        self.views: dict[int, KVCache] = {}  # the cache's first rows as caches of their own, by count
        self.waiting: deque[Request] = deque()
        self.running: list[Request] = []
        self.changed = threading.Condition()
        self.turning = False  # a reader is taking a turn at the model
        self.stopped = False

    def submit(self, ids: Sequence[int], settings: Settings, seed: int) -> Request:
        """Queue a request (its prompt ids fit the context with its max_new_tokens, and it asks for
        at most `rows` samples: the caller checks both); Busy where too many wait already."""
        assert 0 < settings.num_samples <= self.rows and len(ids) + settings.max_new_tokens <= self.cache.capacity
        request = Request(self, ids, settings, seed)
        with self.changed:
            if self.stopped:
                raise Stopped("the server is stopping")
            waiting = sum(r.n for r in self.waiting if not r.closed)
            if waiting + request.n > WAITING_PER_ROW * self.rows:
                raise Busy(f"{self.rows} samples are decoding and {waiting} waiting")
            self.waiting.append(request)
        return request

    def stop(self) -> None:
        """End every request now, waiting or decoding (they end as if their steps had run out),
        refuse new ones (Stopped), and return once no reader is at the model, nor will be."""
        with self.changed:
            self.stopped = True
            for request in [*self.waiting, *self.running]:
                request.cut = True
                request.end()  # a reader waiting for its next token wakes to none
            self.changed.notify_all()
            while self.turning:
                self.changed.wait()

    def next_item(self, request: Request) -> torch.Tensor | BaseException | None:
        """The request's next item (tokens, an error, or the end); while it has none, its reader
        takes the next turn at the model, or waits for another reader's turn to end."""
        with self.changed:
            while True:
                while not request.out and not request.ended and self.turning:
                    self.changed.wait()
                if request.out:
                    return request.out.popleft()
                if request.ended or self.stopped:
                    return _END
                self.turning = True
                self.changed.release()  # the turn runs without the lock: submit() and the others' reads go on
                try:
                    self._turn()
                finally:
                    self.changed.acquire()
                    self.turning = False
                    self.changed.notify_all()  # the readers whose tokens came, and those who wait to turn

    def _turn(self) -> None:
        """One turn at the model: the waiting requests that get rows join the batch, else the
        running ones take a step."""
        with torch.inference_mode():
            admitted = self._admitted()
            for request in admitted:
                self._guarded([request], functools.partial(self._join, request))
            if not admitted and self.running:
                running = list(self.running)
                self._guarded(running, functools.partial(self._step, running))

    def _admitted(self) -> list[Request]:
        """The waiting requests that get rows now, in order, after those whose readers closed them
        have left."""
        with self.changed:
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
                for request in requests:
                    request.end(e)
                    self._leave(request)

    def _join(self, request: Request) -> None:
        cache = KVCache(self.model.config, 1, capacity=len(request.ids))
        logits = logits_of_last(self.model, torch.tensor([request.ids], device=self.device), cache)
        for row in request.rows:
            self.cache.put(row, cache)
        request.length = len(request.ids)
        self._emit([request], logits.expand(request.n, -1))

    def _step(self, requests: list[Request]) -> None:
        rows = self.rows if self.invariant else self._pack()
        # The requests that draw alike, together (each alone where the batch is invariant): one
        # choice of the next tokens for a group's rows, in the order of `order`.
        groups: dict[object, list[Request]] = {}
        for request in requests:
            s = request.settings
            groups.setdefault(request if self.invariant else (s.temperature, s.top_p, s.top_k), []).append(request)
        batch = [request for group in groups.values() for request in group]
        order = [row for request in batch for row in request.rows]
        in_order = order == list(range(rows))
        lasts = batch[0].last if len(batch) == 1 else torch.cat([request.last for request in batch])
        if in_order:
            tokens = lasts[:, None]
        else:  # rows without a request (invariant) are fed a token that nothing reads
            tokens = torch.zeros(rows, 1, dtype=torch.long, device=self.device)
            tokens[order, 0] = lasts
        longest = max(request.length for request in requests)
        if self.invariant or any(request.length != longest for request in requests):
            positions = torch.zeros(rows, dtype=torch.long)
            for request in requests:
                positions[request.rows] = request.length
            cache = self.cache if self.invariant else self._first(rows, longest)
            span = None if self.invariant else longest + 1
            with cache.at(positions.to(self.device), span):
                logits = logits_of_last(self.model, tokens, cache)
        else:  # every row at the same length: generate()'s own step
            logits = logits_of_last(self.model, tokens, self._first(rows, longest))
        self.widths[rows] += 1
        logits = logits if in_order else logits[order]
        start = 0
        for group in groups.values():
            n = sum(request.n for request in group)
            for request in group:
                request.length += 1
            self._emit(group, logits if n == rows else logits[start : start + n])
            start += n

    def _first(self, rows: int, length: int) -> KVCache:
        """The cache's first `rows` rows as a cache of their own, `length` positions filled: made
        once for each count (a new one at every step cost 2% of a small model's step)."""
        view = self.views.get(rows) or self.views.setdefault(rows, self.cache.rows(0, rows, length))
        view.length = length
        return view

    def _pack(self) -> int:
        """Move the running requests' rows down into the free rows below them, so that the rows in
        use come first; their number."""
        used = sum(request.n for request in self.running)
        if self.free and self.free[-1] < used:  # free is sorted, the lowest last: there are holes
            holes = sorted((row for row in self.free if row < used), reverse=True)
            for request in self.running:
                for i, row in enumerate(request.rows):
                    if row >= used:
                        request.rows[i] = holes.pop()
                        self.cache.put(request.rows[i], self.cache.rows(row, row + 1, request.length))
            self.free = list(range(self.rows - 1, used - 1, -1))
        return used

    def _emit(self, requests: list[Request], logits: torch.Tensor) -> None:
        """Draw the next tokens of `requests`, which sample alike, from their rows' `logits` (one
        request's rows after another's), each with uniform numbers from its own generator, and hand
        them to their readers; after its last, a request leaves."""
        s = requests[0].settings
        u = None
        if s.temperature != 0:  # greedy draws nothing, as generate() draws nothing
            draws = [uniforms(r.generator, r.n, self.device) for r in requests]
            u = draws[0] if len(draws) == 1 else torch.cat(draws)
        tokens = choose(logits, s.temperature, s.top_p, s.top_k, u)
        host = tokens.cpu()
        start = 0
        for request in requests:
            if len(requests) == 1:
                request.last, drawn = tokens, host
            else:
                request.last, drawn = tokens[start : start + request.n], host[start : start + request.n]
            start += request.n
            request.out.append(drawn)
            request.made += 1
            if request.made == request.settings.max_new_tokens:
                request.end()
                with self.changed:
                    self._leave(request)

    def _leave(self, request: Request) -> None:
        """Free the request's rows (holding `changed`)."""
        if request in self.running:
            self.running.remove(request)
            self.free = sorted(self.free + request.rows, reverse=True)
