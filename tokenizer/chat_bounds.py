"""Bounded rendering of chat templates. A template is code from whoever published the model, so a
rendering is bounded: RENDER_SECONDS of CPU time, and SIZE_LIMIT characters plus SIZE_PER_CHAR for
each character of the conversation, for what it writes and for any value it makes with `*`, `**`
or `+`. Past either, the rendering stops: OverTime or PastBounds (chat.py makes them a ChatError).

    compiled = compile_template(source)             # NotJinja if it does not compile
    with Bounds(size_limit(messages)) as bounds:
        text = "".join(bounds.written(chunk) for chunk in compiled.generate(messages=..., ...))

jinja2 is imported only where a template is compiled (`pip install gptkit[chat]`).
"""

from __future__ import annotations

import contextvars
import ctypes
import functools
import json
import os
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING

from gptkit.shared.errors import InputError

if TYPE_CHECKING:  # imported where a template is compiled: an optional dependency
    import jinja2

# Bounds on rendering. A real template renders a conversation in milliseconds and writes little
# more than its text; these are far above that, and far below what hurts a machine.
RENDER_SECONDS = 1.0  # CPU time of the rendering thread, so that a busy machine does not trip it
SIZE_LIMIT = 1 << 20  # characters a rendering may write (or a value it makes) beyond...
SIZE_PER_CHAR = 4  # ...this many for each character of the conversation's text
_LOOK = RENDER_SECONDS / 8  # seconds between the watchdog's looks: a rendering stops at most twice this late


class NotJinja(Exception):
    """The template does not compile."""


class PastBounds(Exception):
    """A rendering wrote, or made a value, past its size limit."""


class OverTime(BaseException):
    """Raised in a rendering past RENDER_SECONDS (by _Watchdog). Not an Exception, so that no
    `except Exception` in jinja's runtime can take it for the template's own error."""


def size_limit(messages: object) -> int:
    """The characters a rendering of `messages` (or of their first ones) may write: SIZE_LIMIT and
    SIZE_PER_CHAR for each character of their texts."""
    return SIZE_LIMIT + SIZE_PER_CHAR * _size(messages)


def _size(value) -> int:
    """Characters of the texts in a message, a list or an object, nested (what a rendering may
    reasonably repeat)."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict):
        return sum(map(_size, value.values()))
    if isinstance(value, list):
        return sum(map(_size, value))
    return 0


_LIMIT = contextvars.ContextVar("chat_template_size_limit", default=SIZE_LIMIT)


class Bounds:
    """The bounds of one rendering in this thread: its CPU time (_Watchdog), and the size of what
    it writes and of the values it makes (the sandbox's operators read the limit from _LIMIT)."""

    def __init__(self, limit: int) -> None:
        self.limit, self.size = limit, 0

    def __enter__(self):
        self.token = _LIMIT.set(self.limit)
        self.watchdog = _Watchdog.of_this_process()
        self.watchdog.watch()
        return self

    def __exit__(self, *exc):
        self.watchdog.unwatch()
        _LIMIT.reset(self.token)

    def written(self, chunk: str) -> str:
        self.size += len(chunk)
        if self.size > self.limit:
            raise PastBounds(
                f"the rendering writes more than {self.limit:,} characters, the limit ({SIZE_LIMIT:,} "
                f"and {SIZE_PER_CHAR} for each character of the messages)"
            )
        return chunk


class _Watchdog:
    """Stops renderings that run past RENDER_SECONDS of their thread's CPU time. Its own thread
    looks every _LOOK seconds while any rendering is registered: it reads the CPU clock of each
    (from its first look at it) and raises OverTime in one past the limit (CPython's
    PyThreadState_SetAsyncExc), which stops even a loop that calls nothing. A rendering pays only
    for a lock to register and leave, and wakes the watchdog only where it was idle (a trace
    function on each line of the template, or a clock read or a wake-up for each rendering,
    would slow every rendering down)."""

    _instance = None

    @classmethod
    def of_this_process(cls):
        """The watchdog of this process, started with its first rendering."""
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    @classmethod
    def forget(cls):
        """In a forked child: the parent's watchdog thread is not there (threads do not fork)."""
        cls._instance = None

    def __init__(self):
        self.changed, self.idle = threading.Condition(threading.Lock()), False
        self.watched = {}  # thread id: [its CPU seconds when first looked at, whether OverTime was raised]
        self.started = 0  # renderings registered so far: the watchdog idles only where none began since its last look
        threading.Thread(target=self._watch, name="chat-template-watchdog", daemon=True).start()

    def watch(self):
        """Watch the calling thread's rendering from now."""
        with self.changed:
            self.watched[threading.get_ident()] = [None, False]
            self.started += 1
            if self.idle:
                self.changed.notify()

    def unwatch(self):
        """The calling thread's rendering is over; an OverTime raised too late to land in it is withdrawn."""
        ident = threading.get_ident()
        with self.changed:
            if self.watched.pop(ident)[1]:
                _raise_in(ident, None)

    def _watch(self):
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
                    if entry[1]:  # raised: its thread leaves (and may end) without another look
                        continue
                    now = _cpu_seconds(ident)
                    if entry[0] is None:
                        entry[0] = now
                    elif now - entry[0] > RENDER_SECONDS:
                        _raise_in(ident, OverTime)
                        entry[1] = True
                self.changed.wait(_LOOK)


os.register_at_fork(after_in_child=_Watchdog.forget)


def _cpu_seconds(ident):
    """The CPU time of thread `ident`, or the wall clock where the system keeps none per thread."""
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (AttributeError, OSError):
        return time.monotonic()


def _raise_in(ident, exception):
    """Raise `exception` (a class) in thread `ident` at its next bytecode; None withdraws one pending."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(ident), ctypes.py_object(exception) if exception else None
    )


def _check_size(size):
    """Refuse a value of `size` characters (items, bytes) past the rendering's limit (_LIMIT)."""
    if size > _LIMIT.get():
        raise PastBounds(f"the rendering makes a value of {size:,} characters, more than the limit of {_LIMIT.get():,}")


@functools.lru_cache(maxsize=8)
def compile_template(source: str) -> jinja2.Template:
    """The template compiled as transformers compiles it (chat_template_utils._compile_jinja_template),
    with `*` and `**` checked: each can make a value of any size in one step (and jinja would fold
    `9 ** 9 ** 9` while compiling)."""
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise InputError("chat templates need jinja2: pip install 'gptkit[chat]'") from None

    class Environment(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(("*", "**"))

        def call_binop(self, context, operator, left, right):
            if operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
                _check_size(left.bit_length() * right // 8)  # bytes
            elif operator == "*":
                for sequence, times in ((left, right), (right, left)):
                    if isinstance(sequence, (str, list, tuple)) and isinstance(times, int):
                        _check_size(len(sequence) * times)
            return left**right if operator == "**" else left * right

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # not jinja's own, which escapes HTML characters
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = Environment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        raise NotJinja(f"{type(e).__name__}: {e}") from None
