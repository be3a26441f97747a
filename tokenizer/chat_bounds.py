"""Bounded rendering of chat templates. A template is code from whoever published the model, so a
rendering is bounded: RENDER_SECONDS of CPU time, its compilation included, and a budget of
characters, SIZE_LIMIT plus SIZE_PER_CHAR for each character of the conversation, that the text
it writes and every value it makes on the way (a string's characters, a list's items) spend
together as they are made; a number has at most NUMBER_DIGITS digits. An operation that would
make a value larger than what is left is refused before it makes it (chat_sandbox.py measures
each), so that a refused template holds at most about the budget in memory. Past any bound the
rendering stops: OverTime or PastBounds (chat.py makes them a ChatError).

    compiled = compile_template(source)             # NotJinja if it does not compile
    with Bounds(size_limit(messages)) as bounds:
        text = "".join(bounds.written(chunk) for chunk in compiled.generate(messages=..., ...))

jinja2 is imported only where a template is compiled (`pip install gptkit[chat]`).
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import os
import threading
import time
from typing import TYPE_CHECKING

from gptkit.shared.errors import InputError

if TYPE_CHECKING:  # imported where a template is compiled: an optional dependency
    import jinja2

# Bounds on rendering. A real template renders a conversation in milliseconds, and makes a few
# times its text on the way; these are far above that, and far below what hurts a machine.
RENDER_SECONDS = 1.0  # CPU time of the rendering thread, so that a busy machine does not trip it
SIZE_LIMIT = 1 << 22  # characters a rendering may write and make in all (a template's own, too) beyond...
SIZE_PER_CHAR = 16  # ...this many for each character of the conversation's text
NUMBER_DIGITS = 4300  # digits of a number: Python's own limit for printing one, past which arithmetic is slow
_LOOK = RENDER_SECONDS / 8  # seconds between the watchdog's looks: a rendering stops at most twice this late


class NotJinja(Exception):
    """The template does not compile."""


class PastBounds(Exception):
    """A rendering wrote, or made a value, past its budget of characters, or made too long a number."""


class OverTime(BaseException):
    """Raised in a rendering past RENDER_SECONDS (by _Watchdog). Not an Exception, so that no
    `except Exception` in jinja's runtime can take it for the template's own error."""


def size_limit(messages: object) -> int:
    """The characters a rendering of `messages` (or of their first ones) may write and make in all:
    SIZE_LIMIT and SIZE_PER_CHAR for each character of their texts."""
    return SIZE_LIMIT + SIZE_PER_CHAR * _size(messages)


def _size(value: object) -> int:
    """Characters of the texts in a message, a list or an object, nested (what a rendering may
    reasonably repeat)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(map(_size, value.values()))
    if isinstance(value, list):
        return sum(map(_size, value))
    return 0


_CURRENT: contextvars.ContextVar[Bounds | None] = contextvars.ContextVar("chat_template_bounds", default=None)


class Bounds:
    """The bounds of one rendering in this thread: its CPU time (_Watchdog), and the characters
    its text and its values spend of `limit` (written here, the values by the sandbox's
    operations through allow and spend)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.made = limit, 0

    def __enter__(self) -> Bounds:
        self.token = _CURRENT.set(self)
        self.watchdog = _Watchdog.of_this_process()
        self.watchdog.watch()
        return self

    def __exit__(self, *exc: object) -> None:
        self.watchdog.unwatch()
        _CURRENT.reset(self.token)

    def written(self, chunk: str) -> str:
        """`chunk` of the rendering's text, spent."""
        self.made += len(chunk)
        if self.made > self.limit:
            raise _past(f"makes {self.made:,} characters in all", self.limit)
        return chunk


def _past(what: str, limit: int) -> PastBounds:
    return PastBounds(
        f"the rendering {what}, past its limit of {limit:,} ({SIZE_LIMIT:,} and {SIZE_PER_CHAR} for each "
        "character of the messages, for its text and the values it makes together)"
    )


def left() -> int:
    """The characters the current rendering may still make (outside one, SIZE_LIMIT: jinja evaluates
    nothing of a template ahead of rendering it, but a check made there still has a bound)."""
    bounds = _CURRENT.get()
    return SIZE_LIMIT if bounds is None else bounds.limit - bounds.made


def allow(size: int, exact: bool = True) -> None:
    """Refuse a value of `size` characters about to be made, where it does not fit in what the
    rendering has left; `exact`: `size` is the value's, or at least it (else at most it)."""
    bounds = _CURRENT.get()
    limit, made = (SIZE_LIMIT, 0) if bounds is None else (bounds.limit, bounds.made)
    if made + size > limit:
        what = f"makes a value of {size:,} characters" if exact else f"may make a value of up to {size:,} characters"
        raise _past(what + (f" with {made:,} made before" if made else ""), limit)


def spend(size: int) -> None:
    """Count `size` characters (or items) just made by the current rendering; refused past its limit."""
    bounds = _CURRENT.get()
    if bounds is not None:
        bounds.made += size
        if bounds.made > bounds.limit:
            raise _past(f"makes {bounds.made:,} characters in all", bounds.limit)


def make(size: int) -> None:
    """allow, then spend: for a value whose size is known before it is made."""
    allow(size)
    spend(size)


def number(digits: int) -> None:
    """Refuse a number of `digits` digits about to be made, past NUMBER_DIGITS."""
    if digits > NUMBER_DIGITS:
        raise PastBounds(
            f"the rendering makes a number of {digits:,} digits, past the limit of {NUMBER_DIGITS:,} "
            "(Python's for printing one)"
        )


class _Watchdog:
    """Stops renderings that run past RENDER_SECONDS of their thread's CPU time. Its own thread
    looks every _LOOK seconds while any rendering is registered: it reads the CPU clock of each
    (from its first look at it) and raises OverTime in one past the limit (CPython's
    PyThreadState_SetAsyncExc), which stops even a loop that calls nothing. It raises again in one
    that ran on for another _LOOK of CPU since: an exception that lands in a garbage collector's
    callback or a finalizer is dropped there, and the rendering would go on. A rendering pays only
    for a lock to register and leave, and wakes the watchdog only where it was idle (a trace
    function on each line of the template, or a clock read or a wake-up for each rendering,
    would slow every rendering down)."""

    _instance: _Watchdog | None = None

    @classmethod
    def of_this_process(cls) -> _Watchdog:
        """The watchdog of this process, started with its first rendering."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @classmethod
    def forget(cls) -> None:
        """In a forked child: the parent's watchdog thread is not there (threads do not fork)."""
        cls._instance = None

    def __init__(self) -> None:
        self.changed, self.idle = threading.Condition(threading.Lock()), False
        self.watched: dict[
            int, list[float | None]
        ] = {}  # thread id: [its CPU seconds when first looked at, and when OverTime was last raised]
        self.started = 0  # renderings registered so far: the watchdog idles only where none began since its last look
        threading.Thread(target=self._watch, name="chat-template-watchdog", daemon=True).start()

    def watch(self) -> None:
        """Watch the calling thread's rendering from now."""
        with self.changed:
            self.watched[threading.get_ident()] = [None, None]
            self.started += 1
            if self.idle:
                self.changed.notify()

    def unwatch(self) -> None:
        """The calling thread's rendering is over; an OverTime raised too late to land in it is withdrawn."""
        ident = threading.get_ident()
        with self.changed:
            if self.watched.pop(ident)[1] is not None:
                _raise_in(ident, None)

    def _watch(self) -> None:
        with self.changed:
            seen = self.started
            while True:
                # Idle only after a look with none registered and none begun since the last: while
                # short renderings come one after another it keeps looking, and none has to wake it.
                self.idle = not self.watched and self.started == seen
                seen = self.started
                if self.idle:
                    self.changed.wait()
                    continue
                for ident, entry in self.watched.items():
                    # A watched thread is alive: it leaves through unwatch, under this lock.
                    now = _cpu_seconds(ident)
                    if entry[0] is None:
                        entry[0] = now
                    elif now - entry[0] > RENDER_SECONDS and (entry[1] is None or now - entry[1] > _LOOK):
                        _raise_in(ident, OverTime)
                        entry[1] = now
                self.changed.wait(_LOOK)


os.register_at_fork(after_in_child=_Watchdog.forget)


def _cpu_seconds(ident: int) -> float:
    """The CPU time of thread `ident`, or the wall clock where the system keeps none per thread."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError):
        return time.monotonic()


def _raise_in(ident: int, exception: type[BaseException] | None) -> None:
    """Raise `exception` (a class) in thread `ident` at its next bytecode; None withdraws one pending."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exception) if exception else None
    )


@functools.lru_cache(maxsize=8)
def compile_template(source: str) -> jinja2.Template:
    """The template compiled as transformers compiles it, in the sandbox that measures every value
    a rendering makes (chat_sandbox.py). Called within a rendering's Bounds: compiling is bounded too."""
    try:
        from .chat_sandbox import compile_sandboxed
    except ModuleNotFoundError as e:
        if e.name not in ("jinja2", "markupsafe"):
            raise
        raise InputError("chat templates need jinja2: pip install 'gptkit[chat]'") from None
    return compile_sandboxed(source)
