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

Text is data, never control: a message's text that spells a special token is encoded as that
text, never as the token (chat_marks.py tells the template's markup from the texts). A template is
code from whoever published the model, so rendering is bounded in CPU time and in the size of
what it writes and makes (chat_bounds.py), every operation measured (chat_sandbox.py); past
either, ChatError.

The mask is found by rendering prefixes: the assistant's part of message k is what rendering
messages[:k+1] adds to rendering messages[:k] with the generation prompt, up to and including the
last end-of-turn token in it (the reply and the token that closes it; not the role header, nor
the newline some templates put after the end-of-turn token). A template for which those
renderings are not prefixes of the whole conversation's is refused (ChatError).
"""

from __future__ import annotations

import bisect
import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from itertools import accumulate
from pathlib import Path
from typing import Any

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath
from gptkit.shared.jsonfile import read_json

from .bpe import Tokenizer
from .chat_bounds import (
    RENDER_SECONDS,
    SIZE_LIMIT,
    Bounds,
    NotJinja,
    OverTime,
    PastBounds,
    compile_template,
    size_limit,
)
from .chat_marks import TextMarks
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
# A conversation: OpenAI's messages, {"role": ..., "content": ...} each, their values JSON of any shape
# (a content is a text or a list of parts) passed to the template as they are (`_limit` checks them).
Messages = Sequence[Mapping[str, Any]]
_PROBE = "\x00reply\x00"  # an assistant reply no template changes, to find what follows a reply


class ChatError(InputError):
    """A conversation or a template that cannot be rendered as asked: `reason`, in `where` (the
    template's file or name, or "messages"). A server shows `reason` alone: the file is its own."""

    def __init__(self, where: str, reason: str):
        super().__init__(f"{where}: {reason}")
        self.where, self.reason = where, reason

    # Across processes (pretokenize's workers): rebuilt from both parts.
    def __reduce__(self) -> tuple[type[ChatError], tuple[str, str]]:
        return type(self), (self.where, self.reason)


class ChatTemplate:
    """A Jinja chat template bound to a tokenizer's special tokens (which of them end a reply, and
    which spellings in a message's text are escaped)."""

    def __init__(
        self,
        source: str,
        tokenizer: Tokenizer,
        variables: Mapping[str, str] | None = None,
        origin: StrPath = GPTKIT_ORIGIN,
    ) -> None:
        """`source`: the Jinja template; `variables`: what the template sees besides the messages
        (bos_token, eos_token, ...); `origin`: where it comes from, for messages (a path). The
        template renders a probe conversation here, so that one that fails or runs past the
        bounds is refused at once, not at the first request."""
        self.source, self.variables, self.origin = source, dict(variables or {}), str(origin)
        if not source.strip():
            raise ChatError(self.origin, "the chat template is empty; expected a Jinja template")
        if len(source) > SIZE_LIMIT:  # compiling it is bounded in time; holding it, here
            raise ChatError(self.origin, f"the chat template has more than {SIZE_LIMIT:,} characters, the limit")
        self._marks = TextMarks(tokenizer.special_tokens)
        specials = self._marks.escapes[1:]  # the special tokens, longest first, as the tokenizer matches them
        self._special = re.compile("|".join(map(re.escape, specials))) if specials else None
        self.stops = self._find_stops(tokenizer.special_tokens)
        self.stop_ids = {tokenizer.special_tokens[s] for s in self.stops if s in tokenizer.special_tokens}

    @classmethod
    def beside(cls, tokenizer_path: StrPath, tokenizer: Tokenizer | None = None) -> ChatTemplate:
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
                with open(file, encoding="utf-8") as f:
                    text = f.read(SIZE_LIMIT + 1)  # more is refused
                return cls(text, tokenizer, variables, file)
            except (OSError, UnicodeDecodeError) as e:
                raise InputError(f"{file}: cannot read ({getattr(e, 'strerror', None) or e})") from None
        if (source := config_template(config, config_path)[0]) is not None:
            return cls(source, tokenizer, variables, config_path)
        missing = [t for t in SPECIAL_TOKENS if t not in tokenizer.special_tokens]
        if missing:
            raise InputError(
                f"{path}: no chat template ({file} is missing) and not gptkit's chat tokens (no "
                f"{', '.join(missing)}): train the tokenizer with `gptkit tokenizer train --chat`, or put "
                f"its model's {TEMPLATE_FILE} beside it"
            )
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
        return {
            TEMPLATE_FILE: self.source,
            CONFIG_FILE: json.dumps(self.variables, indent=2, ensure_ascii=False) + "\n",
        }

    # -- rendering ---------------------------------------------------------------------------

    def render(self, messages: Messages, add_generation_prompt: bool = False) -> str:
        """The text of `messages`, as transformers' apply_chat_template(tokenize=False) renders it:
        keys whose value is None dropped, the template's variables, tools and documents None."""
        return self._text(messages, add_generation_prompt, _limit(messages))

    def encode(self, tokenizer: Tokenizer, messages: Messages) -> tuple[list[int], list[bool]]:
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
        spelled = b"".join(pieces)
        as_encoded: Callable[[str], str] = str
        if spelled != text.encode("utf-8"):
            as_encoded = functools.partial(normalize, tokenizer.normalizer)
            if not (tokenizer.normalizer and spelled == as_encoded(text).encode("utf-8")):
                raise ChatError(
                    self.origin,
                    "the ids of the rendered conversation do not spell its text: cannot tell the assistant's tokens",
                )
        starts = list(accumulate(map(len, pieces), initial=0))  # each token's first byte
        mask = [False] * len(ids)
        for a, b in spans:
            a, b = (bisect.bisect_left(starts, len(as_encoded(text[:end]).encode("utf-8"))) for end in (a, b))
            mask[a:b] = [True] * (b - a)
        return ids, mask

    def prompt_ids(self, tokenizer: Tokenizer, messages: Messages) -> list[int]:
        """The ids that prompt the assistant's next reply: the messages with the generation prompt."""
        return self._ids(tokenizer, *self._parts(messages, True, _limit(messages)))

    def _text(self, messages: Messages, add_generation_prompt: bool, limit: int) -> str:
        """The text of `messages` rendered with their texts escaped, read back."""
        return self._marks.read_back(self._render(messages, add_generation_prompt, False, limit))[0]

    def _parts(self, messages: Messages, add_generation_prompt: bool, limit: int) -> tuple[str, list[tuple[int, int]]]:
        """(the rendered text, the [start, end) runs of it that are the template's markup): the
        text with escapes only, the runs from the rendering with markers where it gives the same
        text, else every run between escapes (see the module's docstring)."""
        text, runs = self._marks.read_back(self._render(messages, add_generation_prompt, False, limit))
        marked_text, marked_runs = self._marks.read_back(self._render(messages, add_generation_prompt, True, limit))
        return text, marked_runs if marked_text == text else runs

    def _ids(self, tokenizer: Tokenizer, text: str, markup: list[tuple[int, int]]) -> list[int]:
        """The ids of `text`: special tokens where the runs `markup` spell them, ordinary text elsewhere."""
        if self._special is None:
            return tokenizer.encode(text)
        specials = [m for a, b in markup for m in self._special.finditer(text, a, b)]
        if [m.span() for m in specials] == [m.span() for m in self._special.finditer(text)]:
            return tokenizer.encode(text)  # the markup spells every special token there is: one call does it
        cuts = [0, *(i for m in specials for i in m.span()), len(text)]
        plain = tokenizer.encode_batch(
            [text[a:b] for a, b in zip(cuts[::2], cuts[1::2])], allowed_special=(), workers=1
        )
        ids = plain[0]
        for m, between in zip(specials, plain[1:]):
            ids += [tokenizer.special_tokens[m.group()], *between]
        return ids

    def _render(self, messages: Messages, add_generation_prompt: bool, marked: bool, limit: int) -> str:
        """The template's rendering of `messages` with their texts escaped (`marked`: and their
        cores between markers), within the bounds: RENDER_SECONDS, and `limit` characters (_limit)."""
        seen = [self._marks.as_seen(m, marked) for m in messages]
        try:
            with Bounds(limit) as bounds:
                compiled = compile_template(self.source)  # bounded too: the first rendering compiles it
                return "".join(
                    bounds.written(chunk)
                    for chunk in compiled.generate(
                        messages=seen,
                        tools=None,
                        documents=None,
                        add_generation_prompt=add_generation_prompt,
                        **self.variables,
                    )
                )
        except NotJinja as e:
            raise ChatError(self.origin, f"not a Jinja template ({e})") from None
        except PastBounds as e:
            raise ChatError(self.origin, str(e)) from None
        except OverTime:
            raise ChatError(
                self.origin, f"the rendering takes more than {RENDER_SECONDS:g} s of CPU time, the limit"
            ) from None
        except InputError:
            raise
        except Exception as e:  # the template's own raise_exception, an undefined name, a type error in it
            # The message may quote a text the template saw escaped: it shows the text as given.
            raise ChatError(self.origin, f"{type(e).__name__}: {self._marks.read_back(str(e))[0]}") from None

    def _assistant_spans(self, messages: Messages, text: str, limit: int) -> list[tuple[int, int]]:
        """[start, end) in `text` (the whole conversation rendered) of each assistant reply."""
        spans = []
        for k, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            before, through = self._text(messages[:k], True, limit), self._text(messages[: k + 1], False, limit)
            if not (text.startswith(before) and text.startswith(through) and len(through) >= len(before)):
                raise ChatError(
                    self.origin,
                    f"rendering the first {k + 1} message(s) is not a beginning of rendering "
                    "all of them (the template rewrites earlier turns): the assistant's tokens "
                    "cannot be told",
                )
            part = text[len(before) : len(through)]
            ends = [part.rfind(stop) + len(stop) for stop in self.stops if stop in part]
            spans.append((len(before), len(before) + (max(ends) if ends else len(part))))
        return spans

    def _find_stops(self, special_tokens: Mapping[str, int]) -> tuple[str, ...]:
        """What ends a reply: the special tokens the template puts after an assistant's content (or,
        where it puts none, that text itself, stripped of whitespace)."""
        probe = [{"role": "user", "content": "?"}, {"role": "assistant", "content": _PROBE}]
        whole = self.render(probe)
        after = whole[whole.find(_PROBE) + len(_PROBE) :] if _PROBE in whole else ""
        found = sorted((after.find(s), s) for s in special_tokens if s in after)
        if found:
            return tuple(s for _, s in found)
        return (after.strip(),) if after.strip() else ()


def _limit(messages: object) -> int:
    """The characters a rendering of `messages` (or of their first ones) may write and make (size_limit).
    ChatError where they are not a list of objects."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise ChatError("messages", f"expected a list of objects, got {json.dumps(messages)[:60]}")
    return size_limit(messages)


def _read_config(path: StrPath) -> dict[str, Any]:
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


def config_template(config: Mapping[str, Any], path: StrPath) -> tuple[str | None, list[str]]:
    """tokenizer_config.json's "chat_template" (`config`, read from `path`) and the names of the
    templates it leaves out: a string, or named templates ({name, template} objects) of which the
    "default" is the one kept, as transformers renders by default."""
    value = config.get("chat_template")
    if value is None or isinstance(value, str):
        return value, []
    if not (
        isinstance(value, list)
        and all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("template"), str) for t in value
        )
    ):
        raise InputError(f"{path}: chat_template is not a string or a list of {{name, template}} objects")
    named = {t["name"]: t["template"] for t in value}
    if "default" not in named:
        raise InputError(
            f'{path}: chat_template names {", ".join(map(json.dumps, named))} but no "default"; '
            "expected one named default"
        )
    return named["default"], [name for name in named if name != "default"]


def token_names(config: Mapping[str, Any], path: StrPath) -> dict[str, str]:
    """{bos_token: its text, ...}: the special-token names of tokenizer_config.json (`config`, read
    from `path`) that a template renders with; each a string or an AddedToken object's content."""
    names: dict[str, str] = {}
    for name in TEMPLATE_VARIABLES:
        value = config.get(name)
        if value is None:
            continue
        text = value.get("content") if isinstance(value, dict) else value
        if not isinstance(text, str):
            raise InputError(
                f'{path}: {name} {json.dumps(value)} is not a token\'s text; expected a string or {{"content": ...}}'
            )
        names[name] = text
    return names
