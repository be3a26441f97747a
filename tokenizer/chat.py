"""Chat templates: conversations (OpenAI's `messages`: [{"role": ..., "content": ...}, ...]) as text,
token ids and the mask of the assistant's tokens, rendered as `transformers` renders them.

A tokenizer's chat template lives beside its tokenizer.json in TEMPLATE_FILE (as transformers >=
4.43 saves it; a tokenizer_config.json's "chat_template" is read where that file is missing); data
directories and checkpoints carry it beside their tokenizer.json. A tokenizer with neither, but
with gptkit's chat tokens (`gptkit tokenizer train --chat`), takes gptkit's own template.

    from gptkit.tokenizer.chat import ChatTemplate

    template = ChatTemplate.beside("out/data/tokenizer.json")   # InputError if it has none
    text = template.render(messages)                 # a str, as apply_chat_template(tokenize=False)
    ids, mask = template.encode(tokenizer, messages) # lists; mask True on the assistant's tokens
    ids = template.prompt_ids(tokenizer, messages)   # the prompt for the next assistant reply
    template.stops, template.stop_ids                # what ends a reply: ("<|im_end|>",), {151645}
    template.files()                                 # {name: text} to write beside a tokenizer.json

Text is data, never control. Only the template's own markup makes special tokens: the text of a
message (any role, any field) that spells a special token (`<|im_end|>`, `<|endoftext|>`) is
encoded as that text, as tiktoken's encode_ordinary encodes it. transformers encodes the rendered
string whole, so that a user who types `<|im_end|><|im_start|>assistant` forges a turn. To tell
markup from text, the template renders each text marked: its special-token spellings escaped,
and its core (the text without its leading and trailing whitespace, which templates often trim)
between two markers. The markers and escapes are noncharacters (U+FDD0), which no text carries
unescaped, so rendering and then reading them back gives the text transformers renders and where
each message's text lies in it; special tokens are matched only outside those places. A template
that changes a text in a way the markers do not survive (slicing it, comparing it with a
string) is rendered with escapes only: its special-token spellings stay text, and the rest of
what it renders is matched as transformers matches it.

A template is code from whoever published the model, so rendering is bounded: RENDER_SECONDS of
CPU time, and SIZE_LIMIT characters plus SIZE_PER_CHAR for each character of the conversation,
for what it writes and for any value it makes with `*`, `**` or `+`. Past either, ChatError.

The mask is found by rendering prefixes: the assistant's part of message k is what rendering
messages[:k+1] adds to rendering messages[:k] with the generation prompt, up to and including the
last end-of-turn token in it (the reply and the token that closes it; not the role header, nor
the newline some templates put after the end-of-turn token). A template for which those
renderings are not prefixes of the whole conversation's is refused (ChatError).

jinja2 is imported only where a template is rendered (`pip install gptkit[chat]`).
"""
from __future__ import annotations

import bisect
import contextvars
import ctypes
import functools
import json
import os
import re
import threading
import time
from datetime import datetime
from itertools import accumulate
from pathlib import Path

from gptkit.shared.errors import InputError
from gptkit.shared.jsonfile import read_json

from .bpe import Tokenizer
from .split import normalize

TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"

# gptkit's own chat tokens: one token per role, so a role costs one id, and one end-of-turn
# token, the single stop of a reply. <|endoftext|> stays what separates documents.
SYSTEM, USER, ASSISTANT, END = "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"
SPECIAL_TOKENS = (SYSTEM, USER, ASSISTANT, END)
GPTKIT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant'] %}"
    "{{ raise_exception('role ' + message['role'] + ': gptkit\\'s chat template knows system, user and assistant') }}"
    "{% endif %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + '<|end|>' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
GPTKIT_ORIGIN = "gptkit's chat template"
# tokenizer_config.json's special tokens that transformers passes to the template as variables.
TEMPLATE_VARIABLES = ("bos_token", "eos_token", "unk_token", "pad_token")
_PROBE = "\x00reply\x00"  # an assistant reply no template changes, to find what follows a reply

# Bounds on rendering. A real template renders a conversation in milliseconds and writes little
# more than its text; these are far above that, and far below what hurts a machine.
RENDER_SECONDS = 1.0  # CPU time of the rendering thread, so that a busy machine does not trip it
SIZE_LIMIT = 1 << 20  # characters a rendering may write (or a value it makes) beyond...
SIZE_PER_CHAR = 4  # ...this many for each character of the conversation's text
_LOOK = RENDER_SECONDS / 8  # seconds between the watchdog's looks: a rendering stops at most twice this late

# A marker is a noncharacter, a code and the noncharacter again: "(" and ")" around a text's core,
# or the index of an escaped string (the noncharacter itself, then each special token).
_MARK = "\ufdd0"
_MARKER = re.compile(f"{_MARK}([()]|[0-9]+){_MARK}")
_OPEN, _CLOSE = f"{_MARK}({_MARK}", f"{_MARK}){_MARK}"


class ChatError(InputError):
    """A conversation or a template that cannot be rendered as asked: `reason`, in `where` (the
    template's file or name, or "messages"). A server shows `reason` alone: the file is its own."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason

    def __reduce__(self):  # across processes (pretokenize's workers): rebuilt from both parts
        return type(self), (self.where, self.reason)


class ChatTemplate:
    """A Jinja chat template bound to a tokenizer's special tokens (which of them end a reply, and
    which spellings in a message's text are escaped)."""

    def __init__(self, source: str, tokenizer: Tokenizer, variables=None, origin=GPTKIT_ORIGIN):
        """`source`: the Jinja template; `variables`: what the template sees besides the messages
        (bos_token, eos_token, ...); `origin`: where it comes from, for messages (a path). The
        template renders a probe conversation here, so that one that fails or runs past the
        bounds is refused at once, not at the first request."""
        self.source, self.variables, self.origin = source, dict(variables or {}), str(origin)
        if not source.strip():
            raise ChatError(self.origin, "the chat template is empty; expected a Jinja template")
        self._escapes = [_MARK, *sorted(tokenizer.special_tokens, key=len, reverse=True)]
        self._code = {text: f"{_MARK}{i}{_MARK}" for i, text in enumerate(self._escapes)}
        self._spelled = re.compile("|".join(map(re.escape, self._escapes)))  # longest first, as the tokenizer
        self._special = re.compile("|".join(map(re.escape, self._escapes[1:]))) if len(self._escapes) > 1 else None
        self.stops = self._find_stops(tokenizer.special_tokens)
        self.stop_ids = {tokenizer.special_tokens[s] for s in self.stops if s in tokenizer.special_tokens}

    @classmethod
    def beside(cls, tokenizer_path, tokenizer: Tokenizer | None = None) -> ChatTemplate:
        """The chat template of the tokenizer.json at `tokenizer_path` (loaded unless `tokenizer`
        is given): TEMPLATE_FILE beside it, else tokenizer_config.json's "chat_template", else
        gptkit's own where the tokenizer has its chat tokens; else a one-line InputError."""
        path = Path(tokenizer_path)
        tokenizer = tokenizer or Tokenizer.from_file(path)
        config_path = path.parent / CONFIG_FILE
        config = _read_config(config_path)
        variables = token_names(config, config_path)
        file = path.parent / TEMPLATE_FILE
        if file.is_file():
            try:
                return cls(file.read_text(encoding="utf-8"), tokenizer, variables, file)
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"{file}: cannot read ({getattr(e, 'strerror', None) or e})") from None
        if (source := config_template(config, config_path)[0]) is not None:
            return cls(source, tokenizer, variables, config_path)
        missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.special_tokens]
        if missing:
            raise InputError(f"{path}: no chat template ({file} is missing) and not gptkit's chat tokens (no "
                             f"{', '.join(missing)}): train the tokenizer with `gptkit tokenizer train --chat`, or put "
                             f"its model's {TEMPLATE_FILE} beside it")
        return cls(GPTKIT_TEMPLATE, tokenizer, variables)

    @property
    def is_gptkit(self) -> bool:
        """Whether this is gptkit's own template (which no file carries)."""
        return self.source == GPTKIT_TEMPLATE

    def files(self) -> dict[str, str]:
        """What a directory carries beside its tokenizer.json for `beside` to find this template
        again: {file name: text}, the template and the token names it renders with; none for
        gptkit's own (the tokenizer's chat tokens select it)."""
        if self.is_gptkit:
            return {}
        return {TEMPLATE_FILE: self.source, CONFIG_FILE: json.dumps(self.variables, indent=2, ensure_ascii=False) + "\n"}

    # -- rendering ---------------------------------------------------------------------------

    def render(self, messages, add_generation_prompt=False) -> str:
        """The text of `messages`, as transformers' apply_chat_template(tokenize=False) renders it:
        keys whose value is None dropped, the template's variables, tools and documents None."""
        return self._text(messages, add_generation_prompt, _limit(messages))

    def encode(self, tokenizer: Tokenizer, messages) -> tuple[list[int], list[bool]]:
        """The ids of the rendered conversation (apply_chat_template(tokenize=True)'s, but for the
        special-token spellings of its texts, which stay text) and, one per id, whether it is the
        assistant's (see the module's docstring)."""
        limit = _limit(messages)
        text, markup = self._parts(messages, False, limit)
        ids = self._ids(tokenizer, text, markup)
        spans = self._assistant_spans(messages, text, limit)
        # Byte offsets of each token in the text the ids spell: the rendered text, or where the
        # tokenizer has a normalizer that changed it, the normalized text (each boundary's prefix likewise).
        pieces = [tokenizer.vocab[i] for i in ids]
        spelled, as_encoded = b"".join(pieces), str
        if spelled != text.encode("utf-8"):
            as_encoded = functools.partial(normalize, tokenizer.normalizer)
            if not (tokenizer.normalizer and spelled == as_encoded(text).encode("utf-8")):
                raise ChatError(self.origin, "the ids of the rendered conversation do not spell its text: cannot "
                                             "tell the assistant's tokens")
        starts = list(accumulate(map(len, pieces), initial=0))  # each token's first byte
        mask = [False] * len(ids)
        for a, b in spans:
            a, b = (bisect.bisect_left(starts, len(as_encoded(text[:end]).encode("utf-8"))) for end in (a, b))
            mask[a:b] = [True] * (b - a)
        return ids, mask

    def prompt_ids(self, tokenizer: Tokenizer, messages) -> list[int]:
        """The ids that prompt the assistant's next reply: the messages with the generation prompt."""
        return self._ids(tokenizer, *self._parts(messages, True, _limit(messages)))

    def _text(self, messages, add_generation_prompt, limit):
        """The text of `messages` rendered with their texts escaped, read back."""
        return self._read_back(self._render(messages, add_generation_prompt, False, limit))[0]

    def _parts(self, messages, add_generation_prompt, limit):
        """(the rendered text, the [start, end) runs of it that are the template's markup): the
        text with escapes only, the runs from the rendering with markers where it gives the same
        text, else every run between escapes (see the module's docstring)."""
        text, runs = self._read_back(self._render(messages, add_generation_prompt, False, limit))
        marked_text, marked_runs = self._read_back(self._render(messages, add_generation_prompt, True, limit))
        return text, marked_runs if marked_text == text else runs

    def _ids(self, tokenizer, text, markup):
        """The ids of `text`: special tokens where the runs `markup` spell them, ordinary text elsewhere."""
        if self._special is None:
            return tokenizer.encode(text)
        specials = [m for a, b in markup for m in self._special.finditer(text, a, b)]
        if [m.span() for m in specials] == [m.span() for m in self._special.finditer(text)]:
            return tokenizer.encode(text)  # the markup spells every special token there is: one call does it
        cuts = [0, *(i for m in specials for i in m.span()), len(text)]
        plain = tokenizer.encode_batch([text[a:b] for a, b in zip(cuts[::2], cuts[1::2])], allowed_special=(), workers=1)
        ids = plain[0]
        for m, between in zip(specials, plain[1:]):
            ids += [tokenizer.special_tokens[m.group()], *between]
        return ids

    def _render(self, messages, add_generation_prompt, marked, limit):
        """The template's rendering of `messages` with their texts escaped (`marked`: and their
        cores between markers), within the bounds: RENDER_SECONDS, and `limit` characters (_limit)."""
        seen = [self._as_seen(m, marked) for m in messages]
        try:
            compiled = _compiled(self.source)
            with _Bounds(limit) as bounds:
                return "".join(bounds.written(chunk) for chunk in compiled.generate(
                    messages=seen, tools=None, documents=None, add_generation_prompt=add_generation_prompt,
                    **self.variables))
        except _NotJinja as e:
            raise ChatError(self.origin, f"not a Jinja template ({e})") from None
        except _PastBounds as e:
            raise ChatError(self.origin, str(e)) from None
        except _OverTime:
            raise ChatError(self.origin, f"the rendering takes more than {RENDER_SECONDS:g} s of CPU time, the limit") from None
        except InputError:
            raise
        except Exception as e:  # the template's own raise_exception, an undefined name, a type error in it
            # The message may quote a text the template saw escaped: it shows the text as given.
            raise ChatError(self.origin, f"{type(e).__name__}: {self._read_back(str(e))[0]}") from None

    def _as_seen(self, message, marked):
        """A message as the template sees it: every text in it escaped (its special-token spellings
        and the marker character); where `marked`, the core of its content's text (a string, or
        each text part's) also between markers. Roles and names stay comparable: they are only
        escaped, which changes no text without such spellings."""
        seen = {key: self._escape(value) for key, value in message.items() if value is not None}
        content = seen.get("content")
        if marked and isinstance(content, str):
            seen["content"] = _marked(content)
        elif marked and isinstance(content, list):
            seen["content"] = [{**part, "text": _marked(part["text"])}
                               if isinstance(part, dict) and isinstance(part.get("text"), str) else part for part in content]
        return seen

    def _escape(self, value):
        if isinstance(value, str):
            return self._spelled.sub(lambda m: self._code[m.group()], value)
        if isinstance(value, list):
            return [self._escape(v) for v in value]
        if isinstance(value, dict):
            return {k: self._escape(v) for k, v in value.items()}
        return value

    def _read_back(self, rendered):
        """(the text a rendering stands for, its [start, end) runs outside any marked core and
        between escapes): markers dropped, escapes replaced by what they stand for."""
        if _MARK not in rendered:
            return rendered, [(0, len(rendered))]
        text, runs, depth, at = [], [], 0, 0
        for i, piece in enumerate(_MARKER.split(rendered)):
            if i % 2 == 0:  # text between markers
                if depth == 0 and piece:
                    runs.append((at, at + len(piece)))
            elif piece in "()":
                depth, piece = max(0, depth + (1 if piece == "(" else -1)), ""
            else:  # an escape, or a marker the template made itself (it is kept as it is)
                index = int(piece)
                piece = self._escapes[index] if index < len(self._escapes) else f"{_MARK}{piece}{_MARK}"
            text.append(piece)
            at += len(piece)
        return "".join(text), runs

    def _assistant_spans(self, messages, text, limit):
        """[start, end) in `text` (the whole conversation rendered) of each assistant reply."""
        spans = []
        for k, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            before, through = self._text(messages[:k], True, limit), self._text(messages[: k + 1], False, limit)
            if not (text.startswith(before) and text.startswith(through) and len(through) >= len(before)):
                raise ChatError(self.origin, f"rendering the first {k + 1} message(s) is not a beginning of rendering "
                                             "all of them (the template rewrites earlier turns): the assistant's tokens "
                                             "cannot be told")
            part = text[len(before) : len(through)]
            ends = [part.rfind(stop) + len(stop) for stop in self.stops if stop in part]
            spans.append((len(before), len(before) + (max(ends) if ends else len(part))))
        return spans

    def _find_stops(self, special_tokens):
        """What ends a reply: the special tokens the template puts after an assistant's content (or,
        where it puts none, that text itself, stripped of whitespace)."""
        probe = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _PROBE}]
        whole = self.render(probe)
        after = whole[whole.find(_PROBE) + len(_PROBE) :] if _PROBE in whole else ""
        found = sorted((after.find(s), s) for s in special_tokens if s in after)
        if found:
            return tuple(s for _, s in found)
        return (after.strip(),) if after.strip() else ()


def _marked(text):
    """`text` with its core (the text without leading and trailing whitespace, which templates
    trim) between markers."""
    core = text.strip()
    if not core:
        return text
    start = len(text) - len(text.lstrip())
    return f"{text[:start]}{_OPEN}{core}{_CLOSE}{text[start + len(core):]}"


def _limit(messages) -> int:
    """The characters a rendering of `messages` (or of their first ones) may write: SIZE_LIMIT and
    SIZE_PER_CHAR for each character of their texts. ChatError where they are not a list of objects."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ChatError("messages", f"expected a list of objects, got {json.dumps(messages)[:60]}")
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


class _NotJinja(Exception):
    """The template does not compile."""


class _PastBounds(Exception):
    """A rendering wrote, or made a value, past its size limit."""


class _OverTime(BaseException):
    """Raised in a rendering past RENDER_SECONDS (by _Watchdog). Not an Exception, so that no
    `except Exception` in jinja's runtime can take it for the template's own error."""


_LIMIT = contextvars.ContextVar("chat_template_size_limit", default=SIZE_LIMIT)


class _Bounds:
    """The bounds of one rendering in this thread: its CPU time (_Watchdog), and the size of what
    it writes and of the values it makes (the sandbox's operators read the limit from _LIMIT)."""

    def __init__(self, limit):
        self.limit, self.size = limit, 0

    def __enter__(self):
        self.token = _LIMIT.set(self.limit)
        self.watchdog = _Watchdog.of_this_process()
        self.watchdog.watch()
        return self

    def __exit__(self, *exc):
        self.watchdog.unwatch()
        _LIMIT.reset(self.token)

    def written(self, chunk):
        self.size += len(chunk)
        if self.size > self.limit:
            raise _PastBounds(f"the rendering writes more than {self.limit:,} characters, the limit ({SIZE_LIMIT:,} "
                              f"and {SIZE_PER_CHAR} for each character of the messages)")
        return chunk


class _Watchdog:
    """Stops renderings that run past RENDER_SECONDS of their thread's CPU time. Its own thread
    looks every _LOOK seconds while any rendering is registered: it reads the CPU clock of each
    (from its first look at it) and raises _OverTime in one past the limit (CPython's
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
        self.watched = {}  # thread id: [its CPU seconds when first looked at, whether _OverTime was raised]
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
        """The calling thread's rendering is over; an _OverTime raised too late to land in it is withdrawn."""
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
                        _raise_in(ident, _OverTime)
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
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(ident), ctypes.py_object(exception) if exception else None)


def _check_size(size):
    """Refuse a value of `size` characters (items, bytes) past the rendering's limit (_LIMIT)."""
    if size > _LIMIT.get():
        raise _PastBounds(f"the rendering makes a value of {size:,} characters, more than the limit of {_LIMIT.get():,}")


@functools.lru_cache(maxsize=8)
def _compiled(source):
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
        raise _NotJinja(f"{type(e).__name__}: {e}") from None


def _read_config(path):
    """tokenizer_config.json beside a tokenizer ({} where there is none)."""
    try:
        config = read_json(path)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not readable JSON ({e})") from None
    if not isinstance(config, dict):
        raise InputError(f"{path}: expected a JSON object")
    return config


def config_template(config, path) -> tuple[str | None, list[str]]:
    """tokenizer_config.json's "chat_template" (`config`, read from `path`) and the names of the
    templates it leaves out: a string, or named templates ({name, template} objects) of which the
    "default" is the one kept, as transformers renders by default."""
    value = config.get("chat_template")
    if value is None or isinstance(value, str):
        return value, []
    if not (isinstance(value, list) and all(isinstance(t, dict) and isinstance(t.get("name"), str)
                                            and isinstance(t.get("template"), str) for t in value)):
        raise InputError(f"{path}: chat_template is not a string or a list of {{name, template}} objects")
    named = {t["name"]: t["template"] for t in value}
    if "default" not in named:
        raise InputError(f"{path}: chat_template names {', '.join(map(json.dumps, named))} but no \"default\"; "
                         "expected one named default")
    return named["default"], [name for name in named if name != "default"]


def token_names(config, path) -> dict:
    """{bos_token: its text, ...}: the special-token names of tokenizer_config.json (`config`, read
    from `path`) that a template renders with; each a string or an AddedToken object's content."""
    names = {}
    for name in TEMPLATE_VARIABLES:
        value = config.get(name)
        if value is None:
            continue
        text = value.get("content") if isinstance(value, dict) else value
        if not isinstance(text, str):
            raise InputError(f"{path}: {name} {json.dumps(value)} is not a token's text; expected a string or "
                             "{\"content\": ...}")
        names[name] = text
    return names
