"""The OpenAI API's requests and responses, without torch: a request is checked here, in one line
per problem, before it waits for the model.

Every field a client sends is checked for its type and range, and every text for being Unicode
that UTF-8 can encode; a wrong one is a 400 naming the field (`param`) and what it accepts. The
sampling settings are checked by the sample library's own rules (Settings), its errors named by
the request's fields; here are only the API's: OpenAI's limits where it has them (temperature 0 to
2, up to 4 stop strings), and the two names and the default of max_tokens."""

from __future__ import annotations

import json
import reprlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from gptkit.sample.settings import Settings
from gptkit.shared.errors import SettingError

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions; chat's is the rest of the context
MAX_TEMPERATURE = 2  # OpenAI's range is 0 to 2
MAX_STOPS = 4  # OpenAI's limit
# The request fields that become Settings, by their name there (Settings' errors name those).
FIELD_OF = {
    "max_new_tokens": "max_tokens",
    "num_samples": "n",
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "seed": "seed",
    "stops": "stop",
}
MAX_DIGITS = 100  # of a whole number in a request: far more than any field takes

# A value as a message shows it: its repr, a long text, number or nesting cut short.
_shown = reprlib.Repr()
_shown.maxlevel, _shown.maxlist, _shown.maxdict, _shown.maxstring, _shown.maxlong, _shown.maxother = 2, 3, 3, 40, 40, 40


def shown(value: object) -> str:
    return _shown.repr(value)


class ApiError(Exception):
    """A request refused: `status` and OpenAI's error object."""

    def __init__(
        self,
        status: int,
        message: str,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


def refused(name: str, value: object, expected: str) -> ApiError:
    """The 400 for a field's wrong value: `top_k '5': expected a whole number, 1 or more`."""
    if value is None:  # a field without a default, absent
        return ApiError(400, f"{name} is missing: expected {expected}", name)
    return ApiError(400, f"{name} {shown(value)}: expected {expected}", name)


def text(value: object, name: str) -> str:
    """`value` if it is a string UTF-8 can encode: JSON's escapes can spell a lone surrogate
    ("\\ud800"), half of a character, which no tokenizer can encode nor any text contain."""
    if not isinstance(value, str):
        raise refused(name, value, "a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise ApiError(
            400,
            f"{name}: a lone surrogate, {value[e.start]!a}, at character {e.start}; expected "
            "Unicode text (a surrogate pair such as \\ud83d\\ude00 is one character)",
            name,
        ) from None
    return value


ROLES = {
    "system": "system",
    "developer": "system",
    "user": "user",
    "assistant": "assistant",
}  # OpenAI's -> a template's
PLAIN = {"system": "System", "user": "User", "assistant": "Assistant"}


def chat_messages(messages: object) -> list[dict]:
    """A request's messages as a chat template takes them: [{"role", "content"}, ...], the content
    a string, OpenAI's developer role a system message."""
    if not isinstance(messages, list) or not messages:
        raise refused("messages", messages, "a non-empty list of {role, content} objects")
    checked = []
    for k, message in enumerate(messages):
        where = f"messages[{k}]"
        if not isinstance(message, dict):
            raise refused(where, message, "a {role, content} object")
        role = message.get("role")
        if not isinstance(role, str) or role not in ROLES:  # a list or an object is no key of ROLES
            raise refused(f"{where}.role", role, f"one of {', '.join(ROLES)}")
        checked.append({"role": ROLES[role], "content": _content(message.get("content"), where)})
    return checked


def _content(content: object, where: str) -> str:
    """A message's text: a string, or a list of text parts (OpenAI's {"type": "text", "text": ...})."""
    if isinstance(content, str):
        return text(content, f"{where}.content")
    if not isinstance(content, list):
        raise refused(f"{where}.content", content, 'a string or a list of {"type": "text", "text": ...} parts')
    for j, part in enumerate(content):
        if not isinstance(part, dict):
            raise refused(f"{where}.content[{j}]", part, 'a {"type": "text", "text": ...} part')
        if part.get("type") != "text":
            raise refused(f"{where}.content[{j}].type", part.get("type"), '"text" (the one kind of part served)')
        text(part.get("text"), f"{where}.content[{j}].text")
    return "".join(part["text"] for part in content)


def render_chat(messages: object, continue_final: bool = False) -> tuple[str, tuple[str, ...]]:
    """The prompt chat messages become for a checkpoint without a chat template, and the stops
    that end the reply: a plain-text template.

        System: {system text}        (system and developer messages, where given)
        User: {text}
        Assistant: {text}
        ...
        Assistant:

    The reply is the model's continuation of the last line; it ends where the model starts the
    next user's turn ("\\nUser:"). With `continue_final`, the last message is an assistant's reply
    to go on with: the prompt ends with its line, "Assistant: {text}"."""
    lines = [f"{PLAIN[m['role']]}: {m['content']}" for m in chat_messages(messages)]
    return "\n".join(lines) + ("" if continue_final else "\nAssistant:"), ("\nUser:",)


@dataclass
class Request:
    """A checked request: `prompt` (a completion's) or `messages` (a chat's, chat_messages), its
    Settings (max_new_tokens None: the rest of the context), and how the answer goes back;
    `continue_final`: the last message is an assistant's reply to go on with, not to answer;
    `max_tokens_field`: the name the request gave max_tokens, for its errors."""

    chat: bool
    prompt: str | None
    messages: list | None
    settings: dict
    stream: bool
    include_usage: bool
    continue_final: bool = False
    max_tokens_field: str = "max_tokens"


def parse(body: bytes, chat: bool) -> Request:
    """A request body of /v1/completions or /v1/chat/completions, checked (ApiError 400 otherwise)."""
    fields = parse_body(body)
    if not isinstance(fields, dict):
        raise ApiError(400, "the request body: expected a JSON object")
    model = _get(fields, "model", "")
    if not isinstance(model, str):
        raise refused("model", model, "a string (any name: this server has one model)")
    text(model, "model")
    prompt = messages = None
    continue_final = chat and _flag(fields, "continue_final_message")
    if chat:
        messages = chat_messages(fields.get("messages"))
        if continue_final and messages[-1]["role"] != "assistant":
            raise ApiError(
                400,
                f"continue_final_message: the last message is the {messages[-1]['role']}'s; expected "
                "an assistant's reply to continue",
                "continue_final_message",
            )
    else:
        prompt = _get(fields, "prompt", "")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise refused("prompt", prompt, "a string (token ids and several prompts are not supported)")
        text(prompt, "prompt")
    # max_completion_tokens is OpenAI's newer name of max_tokens, and the one taken where both are given.
    newer, older = _whole(fields, "max_completion_tokens"), _whole(fields, "max_tokens")
    max_tokens_field = "max_tokens" if newer is None else "max_completion_tokens"
    max_tokens = older if newer is None else newer
    if max_tokens is None and not chat:
        max_tokens = COMPLETION_DEFAULT_MAX_TOKENS
    temperature = _get(fields, "temperature", 1.0)
    if not (_number(temperature) and 0 <= temperature <= MAX_TEMPERATURE):
        raise refused("temperature", temperature, f"a number from 0 (greedy) to {MAX_TEMPERATURE}")
    settings = {
        "max_new_tokens": max_tokens,
        "num_samples": _get(fields, "n", 1),
        "temperature": temperature,
        "top_p": _get(fields, "top_p", 1.0),
        "top_k": fields.get("top_k"),
        "seed": fields.get("seed"),
        "stops": _stops(fields.get("stop")),
    }
    check(settings)
    stream = _flag(fields, "stream")
    options = _get(fields, "stream_options", {})
    if not isinstance(options, dict):
        raise refused("stream_options", options, 'an object, {"include_usage": true}')
    include_usage = _flag(options, "include_usage", "stream_options.include_usage")
    return Request(chat, prompt, messages, settings, stream, include_usage, continue_final, max_tokens_field)


def parse_body(body: bytes) -> Any:
    """The JSON value of a request body; a 400 for nesting too deep for the decoder (its
    RecursionError), for NaN and Infinity, which Python's decoder takes and JSON has not, and for
    whole numbers of more digits than any field takes (past 4,300 Python refuses to read them,
    with advice for its own programmer)."""

    def no_constant(name: str) -> NoReturn:
        raise ValueError(f"{name} is not a JSON value")

    def whole(digits: str) -> int:
        if len(digits) > MAX_DIGITS:
            raise ValueError(f"a number of {len(digits):,} digits, more than {MAX_DIGITS}")
        return int(digits)

    try:
        return json.loads(body, parse_constant=no_constant, parse_int=whole)
    except RecursionError:
        raise ApiError(400, "the request body is not JSON that can be read: nested too deeply") from None
    except ValueError as e:  # UnicodeDecodeError too
        raise ApiError(400, f"the request body is not JSON: {e}") from None


def _get(fields: dict[str, Any], name: str, default: object) -> Any:  # a JSON value of the client's
    """A field, its default where it is absent or null (as OpenAI takes null)."""
    value = fields.get(name)
    return default if value is None else value


def check(settings: dict) -> None:
    """The sample library's rules for the request's `settings` (Settings), its errors as 400s naming
    the request's field; max_new_tokens None (the rest of the context) is checked against it later."""
    try:
        Settings(**{**settings, "max_new_tokens": settings["max_new_tokens"] or 1})
    except SettingError as e:
        field = FIELD_OF[e.setting]
        raise ApiError(400, f"{field} {e.problem}", field) from None


def _number(value: object) -> bool:
    """Whether a JSON value is a number: true is none, though Python's bool is an int."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _whole(fields: dict[str, Any], name: str) -> int | None:
    """A field that is a whole number, 1 or more, or none (absent or null). JSON's true is no
    number, though Python's bool is an int."""
    value = fields.get(name)
    if value is not None and not (type(value) is int and value >= 1):
        raise refused(name, value, "a whole number, 1 or more")
    return value


def _flag(fields: dict[str, Any], name: str, param: str | None = None) -> bool:
    """A field that is true or false (absent or null: false)."""
    value = _get(fields, name, False)
    if not isinstance(value, bool):
        raise refused(param or name, value, "true or false")
    return value


def _stops(stop: object) -> tuple[str, ...]:
    """`stop`: none, a string, or a list of up to MAX_STOPS strings."""
    stops = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not (isinstance(stops, list) and len(stops) <= MAX_STOPS and all(isinstance(s, str) for s in stops)):
        raise refused("stop", stop, f"a string or a list of up to {MAX_STOPS} strings")
    return tuple(text(s, "stop") for s in stops)


# -- responses -------------------------------------------------------------------------------------


class Reply:
    """The JSON objects that answer one request, whole or as stream chunks, in OpenAI's shapes."""

    def __init__(self, request: Request, model: str) -> None:
        self.chat, self.model = request.chat, model
        self.id = ("chatcmpl-" if self.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion" if self.chat else "text_completion"

    def _head(self, chunk: bool = False) -> dict[str, Any]:
        kind = self.object + (".chunk" if chunk and self.chat else "")
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def whole(self, texts: Sequence[str], finish_reasons: Sequence[str], usage: dict, seed: int) -> dict:
        if self.chat:
            choices = [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": text},
                    "logprobs": None,
                    "finish_reason": reason,
                }
                for i, (text, reason) in enumerate(zip(texts, finish_reasons))
            ]
        else:
            choices = [
                {"index": i, "text": text, "logprobs": None, "finish_reason": reason}
                for i, (text, reason) in enumerate(zip(texts, finish_reasons))
            ]
        return {**self._head(), "choices": choices, "usage": usage, "seed": seed}

    def chunk(
        self,
        i: int,
        text: str | None = None,
        finish_reason: str | None = None,
        first: bool = False,
        usage: bool = False,
    ) -> dict:
        """A stream chunk: a piece of choice i's text, or its end (finish_reason); with the
        stream's usage asked for, every chunk carries `usage`: null (OpenAI's shape)."""
        if self.chat:
            delta = {"role": "assistant", "content": ""} if first else {} if text is None else {"content": text}
            choice = {"index": i, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": i, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        return {**self._head(chunk=True), "choices": [choice], **({"usage": None} if usage else {})}

    def usage_chunk(self, usage: dict) -> dict:
        return {**self._head(chunk=True), "choices": [], "usage": usage}


def usage(prompt_tokens: int, completion_tokens: int) -> dict:
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
