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

The mask is found by rendering prefixes: the assistant's part of message k is what rendering
messages[:k+1] adds to rendering messages[:k] with the generation prompt, up to and including the
last end-of-turn token in it (the reply and the token that closes it; not the role header, nor
the newline some templates put after the end-of-turn token). A template for which those
renderings are not prefixes of the whole conversation's is refused (ChatError).

jinja2 is imported only where a template is rendered (`pip install gptkit[chat]`).
"""
from __future__ import annotations

import functools
import json
from datetime import datetime
from pathlib import Path

from gptkit.shared.errors import InputError
from gptkit.shared.jsonfile import read_json

from .bpe import Tokenizer
from .split import normalize

TEMPLATE_FILE = "chat_template.jinja"
CONFIG_FILE = "tokenizer_config.json"

# gptkit's own chat tokens: one token per role, so a role costs one id and cannot be spelled by a
# user's text (encoded as special only where the template puts it), and one end-of-turn token, the
# single stop of a reply. <|endoftext|> stays what separates documents.
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


class ChatError(InputError):
    """A conversation or a template that cannot be rendered as asked."""


class ChatTemplate:
    """A Jinja chat template bound to a tokenizer's special tokens (which of them end a reply)."""

    def __init__(self, source: str, tokenizer: Tokenizer, variables=None, origin=GPTKIT_ORIGIN):
        """`source`: the Jinja template; `variables`: what the template sees besides the messages
        (bos_token, eos_token, ...); `origin`: where it comes from, for messages (a path)."""
        self.source, self.variables, self.origin = source, dict(variables or {}), str(origin)
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
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ChatError(f"messages: expected a list of objects, got {json.dumps(messages)[:60]}")
        messages = [{k: v for k, v in m.items() if v is not None} for m in messages]
        try:
            return _compiled(self.source).render(messages=messages, tools=None, documents=None,
                                                 add_generation_prompt=add_generation_prompt, **self.variables)
        except ChatError as e:  # the template itself is not Jinja
            raise ChatError(f"{self.origin}: {e}") from None
        except Exception as e:  # the template's own raise_exception, an undefined name, a type error in it
            raise ChatError(f"{self.origin}: {type(e).__name__}: {e}") from None

    def encode(self, tokenizer: Tokenizer, messages) -> tuple[list[int], list[bool]]:
        """The ids of the rendered conversation (as apply_chat_template(tokenize=True) gives them)
        and, one per id, whether it is the assistant's (see the module's docstring)."""
        text = self.render(messages)
        ids = tokenizer.encode(text)
        spans = self._assistant_spans(messages, text)
        # Byte offsets of each token in the text the ids spell: the rendered text, or where the
        # tokenizer has a normalizer that changed it, the normalized text (each boundary's prefix likewise).
        pieces = [tokenizer.vocab[i] for i in ids]
        spelled, as_encoded = b"".join(pieces), str
        if spelled != text.encode("utf-8"):
            as_encoded = functools.partial(normalize, tokenizer.normalizer)
            if not (tokenizer.normalizer and spelled == as_encoded(text).encode("utf-8")):
                raise ChatError(f"{self.origin}: the ids of the rendered conversation do not spell its text: cannot "
                                "tell the assistant's tokens")
        byte_spans = [(len(as_encoded(text[:a]).encode("utf-8")), len(as_encoded(text[:b]).encode("utf-8"))) for a, b in spans]
        mask, start = [], 0
        for piece in pieces:
            mask.append(any(a <= start < b for a, b in byte_spans))
            start += len(piece)
        return ids, mask

    def prompt_ids(self, tokenizer: Tokenizer, messages) -> list[int]:
        """The ids that prompt the assistant's next reply: the messages with the generation prompt."""
        return tokenizer.encode(self.render(messages, add_generation_prompt=True))

    def _assistant_spans(self, messages, text):
        """[start, end) in `text` (the whole conversation rendered) of each assistant reply."""
        spans = []
        for k, message in enumerate(messages):
            if message.get("role") != "assistant":
                continue
            before, through = self.render(messages[:k], add_generation_prompt=True), self.render(messages[: k + 1])
            if not (text.startswith(before) and text.startswith(through) and len(through) >= len(before)):
                raise ChatError(f"{self.origin}: rendering the first {k + 1} message(s) is not a beginning of rendering "
                                "all of them (the template rewrites earlier turns): the assistant's tokens cannot be told")
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


@functools.lru_cache(maxsize=8)
def _compiled(source):
    """The template compiled as transformers compiles it (chat_template_utils._compile_jinja_template)."""
    try:
        import jinja2
        import jinja2.ext
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise InputError("chat templates need jinja2: pip install 'gptkit[chat]'") from None

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        # not jinja's own, which escapes HTML characters
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda format: datetime.now().strftime(format)
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        raise ChatError(f"not a Jinja template ({type(e).__name__}: {e})") from None


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
