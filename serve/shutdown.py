"""How `gptkit serve` stops: SIGINT (Ctrl-C) or SIGTERM drains the server, as vLLM's
--shutdown-timeout and uvicorn's --timeout-graceful-shutdown do.

From the first signal on, a new request gets a 503 (the listening socket stays open to say so);
the requests in flight get up to the grace period to finish. Those still running then are ended:
the batcher stops, each sample's finish_reason is "abort" (vLLM's), and a stream ends with its
final chunks and [DONE] as any other; they get LAST_WORDS seconds to be written. A second signal
ends them at once. Then the server stops taking connections, the step at the model (if one runs)
has ended and no other starts, and the command returns: exit status 0.

The server answers on its threads while the main thread waits here for the signals, which only
wake it (signal.set_wakeup_fd). Ctrl-C's KeyboardInterrupt, raised in the main thread wherever it
was, let Python exit while a thread was inside torch: a C++ abort (SIGABRT).
"""

from __future__ import annotations

import contextlib
import select
import signal
import socket
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import TYPE_CHECKING

import click

from .api import ApiError

if TYPE_CHECKING:
    from .server import Server

SIGNALS = (signal.SIGINT, signal.SIGTERM)
POLL = 0.05  # seconds between looks at the requests in flight while draining
LAST_WORDS = 5  # seconds the requests ended at the grace period get to write their last chunks


def shutting_down() -> ApiError:
    """The 503 for a request that comes while the server drains."""
    return ApiError(
        503, "the server is shutting down and takes no new requests", kind="server_error", code="server_shutting_down"
    )


class InFlight:
    """The requests a server is answering, which a drain waits for."""

    def __init__(self) -> None:
        self.draining = False
        self.count = 0
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def answering(self) -> Iterator[bool]:
        """A request counted until its answer is written; yields whether it is admitted, False
        where it came during the drain (to be answered with shutting_down())."""
        with self._lock:
            admitted = not self.draining
            self.count += 1
        try:
            yield admitted
        finally:
            with self._lock:
                self.count -= 1

    def drain(self) -> int:
        """Admit no more requests; the number in flight."""
        with self._lock:
            self.draining = True
            return self.count


class Signals:
    """SIGINT and SIGTERM, handled by waking the main thread (`wait`) while this block runs."""

    def __enter__(self) -> Signals:
        self._read, self._write = socket.socketpair()
        self._read.setblocking(False)
        self._write.setblocking(False)  # set_wakeup_fd's rule: a signal never blocks on it
        self._fd = signal.set_wakeup_fd(self._write.fileno(), warn_on_full_buffer=False)
        self._handlers = {sig: signal.signal(sig, _wake) for sig in SIGNALS}
        return self

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._handlers.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._fd)
        self._read.close()
        self._write.close()

    def wait(self, timeout: float | None = None) -> signal.Signals | None:
        """The next of SIGNALS to come within `timeout` seconds (None: however long), or None."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not select.select([self._read], [], [], left)[0]:
                return None
            with contextlib.suppress(BlockingIOError):
                number = self._read.recv(1)[0]  # the wakeup fd's byte: the signal's number
                if number in SIGNALS:
                    return signal.Signals(number)


def _wake(signum: int, frame: FrameType | None) -> None:
    """The signals' Python handler: nothing; set_wakeup_fd's byte wakes Signals.wait."""


def serve(server: Server, grace: int) -> None:
    """Serve until SIGINT or SIGTERM, then drain for up to `grace` seconds (module docstring)."""
    assert server.engine is not None  # set before serving (make_server)
    batcher = server.engine.batcher
    with Signals() as signals:
        thread = threading.Thread(target=server.serve_forever, name="accept")
        thread.start()
        try:
            first = signals.wait()
            assert first is not None  # wait() without a timeout returns a signal
            in_flight = server.requests.drain()
            if in_flight:
                then = (
                    f"up to {grace} s to finish (a second Ctrl-C or SIGTERM ends them now)"
                    if grace
                    else f"{'ends' if in_flight == 1 else 'end'} now (--shutdown-timeout 0)"
                )
                click.echo(
                    f"stopping on {first.name}: new requests get a 503, the {_requests(in_flight)} in flight {then}",
                    err=True,
                )
            if not _settled(server, grace, signals):
                left = server.requests.count
                batcher.stop()
                if grace:
                    click.echo(f"stopping: ended the {_requests(left)} still in flight (finish_reason abort)", err=True)
                _settled(server, LAST_WORDS, signals)
        finally:
            batcher.stop()  # again where ended above: it returns at once
            server.shutdown()
            thread.join()


def _settled(server: Server, seconds: float, signals: Signals) -> bool:
    """Whether every request in flight has been answered within `seconds`, and before a signal."""
    deadline = time.monotonic() + seconds
    while server.requests.count:
        left = deadline - time.monotonic()
        if left <= 0 or signals.wait(min(POLL, left)) is not None:
            return False
    return True


def _requests(n: int) -> str:
    return f"{n} request{'' if n == 1 else 's'}"
