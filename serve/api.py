"""The OpenAI API's requests and responses, without torch: a request is checked here, in one line
per problem, before it waits for the model."""
from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass

from gptkit.sample.settings import Settings
from gptkit.shared.errors import SettingError

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions; chat's is the rest of the context
# The request fields that become Settings, by their name there (Settings' errors name those).
FIELD_OF = {"max_new_tokens": "max_tokens", "num_samples": "n", "temperature": "temperature", "top_p": "top_p",
            "top_k": "top_k", "seed": "seed", "stops": "stop"}


class ApiError(Exception):
    """A request refused: `status` and OpenAI's error object."""

    def __init__(self, status: int, message: str, param=None, code=None, kind="invalid_request_error"):
        super().__init__(message)
        self.status, self.param, self.code, self.kind = status, param, code, kind

    def body(self) -> dict:
        return {"error": {"message": str(self), "type": self.kind, "param": self.param, "code": self.code}}


ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}  # OpenAI's -> a template's
PLAIN = {"system": "System", "user": "User", "assistant": "Assistant"}


def chat_messages(messages) -> list[dict]:
    """A request's messages as a chat template takes them: [{"role", "content"}, ...], the content
    a string, OpenAI's developer role a system message."""
    if not isinstance(messages, list) or not messages:
        raise ApiError(400, "messages: expected a non-empty list of {role, content} objects", "messages")
    checked = []
    for k, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            raise ApiError(400, f"messages[{k}]: expected a role of {', '.join(ROLES)} and a content", f"messages[{k}]")
        checked.append({"role": ROLES[message["role"]], "content": _text(message.get("content"), k)})
    return checked


def render_chat(messages) -> tuple[str, tuple[str, ...]]:
    """The prompt chat messages become for a checkpoint without a chat template, and the stops
    that end the reply: a plain-text template.

        System: {system text}        (system and developer messages, where given)
        User: {text}
        Assistant: {text}
        ...
        Assistant:

    The reply is the model's continuation of the last line; it ends where the model starts the
    next user's turn ("\nUser:")."""
    lines = [f"{PLAIN[m['role']]}: {m['content']}" for m in chat_messages(messages)]
    return "\n".join(lines) + "\nAssistant:", ("\nUser:",)


def _text(content, k) -> str:
    """A message's text: a string, or a list of text parts (OpenAI's {"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                                         for p in content):
        return "".join(p["text"] for p in content)
    raise ApiError(400, f"messages[{k}].content: expected a string or a list of text parts", f"messages[{k}].content")


@dataclass
class Request:
    """A checked request: `prompt` (a completion's) or `messages` (a chat's, chat_messages), its
    Settings (max_new_tokens None: the rest of the context), and how the answer goes back."""

    chat: bool
    prompt: str | None
    messages: list | None
    settings: dict
    stream: bool
    include_usage: bool


def parse(body: bytes, chat: bool) -> Request:
    """A request body of /v1/completions or /v1/chat/completions, checked (ApiError 400 otherwise)."""
    try:
        fields = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise ApiError(400, f"the request body is not JSON: {e}") from None
    if not isinstance(fields, dict):
        raise ApiError(400, "the request body: expected a JSON object")
    prompt = messages = None
    if chat:
        messages = chat_messages(fields.get("messages"))
    else:
        prompt = fields.get("prompt", "")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise ApiError(400, "prompt: expected a string (token ids and several prompts are not supported)", "prompt")
    stop = fields.get("stop")
    stop = [] if stop is None else [stop] if isinstance(stop, str) else stop
    if not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ApiError(400, "stop: expected a string or a list of strings", "stop")
    max_tokens = fields.get("max_completion_tokens", fields.get("max_tokens"))
    if max_tokens is None and not chat:
        max_tokens = COMPLETION_DEFAULT_MAX_TOKENS
    settings = dict(max_new_tokens=max_tokens, num_samples=_get(fields, "n", 1), temperature=_get(fields, "temperature", 1.0),
                    top_p=_get(fields, "top_p", 1.0), top_k=fields.get("top_k"), seed=fields.get("seed"),
                    stops=tuple(stop))
    check(settings)
    stream = _get(fields, "stream", False)
    options = _get(fields, "stream_options", {})
    if not isinstance(stream, bool) or not isinstance(options, dict):
        raise ApiError(400, "stream: expected true or false, stream_options an object", "stream")
    return Request(chat, prompt, messages, settings, stream, bool(options.get("include_usage")))


def _get(fields, name, default):
    """A field, its default where it is absent or null (as OpenAI takes null)."""
    value = fields.get(name)
    return default if value is None else value


def check(settings: dict) -> Settings:
    """Settings from a request's values, their errors as ApiError naming the request's field."""
    try:
        for name in ("temperature", "top_p"):  # JSON's numbers: a bool or a string is no number here
            if isinstance(settings[name], bool) or not isinstance(settings[name], (int, float)):
                raise SettingError(name, f"{settings[name]!r}: expected a number")
        max_new = settings["max_new_tokens"]
        return Settings(**{**settings, "max_new_tokens": 1 if max_new is None else max_new})  # None: checked later
    except SettingError as e:
        raise ApiError(400, f"{FIELD_OF.get(e.setting, e.setting)} {e.problem}", FIELD_OF.get(e.setting, e.setting)) from None


# -- responses -------------------------------------------------------------------------------------


class Reply:
    """The JSON objects that answer one request, whole or as stream chunks, in OpenAI's shapes."""

    def __init__(self, request: Request, model: str):
        self.chat, self.model = request.chat, model
        self.id = ("chatcmpl-" if self.chat else "cmpl-") + uuid.uuid4().hex
        self.created = int(time.time())
        self.object = "chat.completion" if self.chat else "text_completion"

    def _head(self, chunk=False):
        kind = self.object + (".chunk" if chunk and self.chat else "")
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def whole(self, texts, finish_reasons, usage, seed) -> dict:
        if self.chat:
            choices = [{"index": i, "message": {"role": "assistant", "content": text}, "logprobs": None,
                        "finish_reason": reason} for i, (text, reason) in enumerate(zip(texts, finish_reasons))]
        else:
            choices = [{"index": i, "text": text, "logprobs": None, "finish_reason": reason}
                       for i, (text, reason) in enumerate(zip(texts, finish_reasons))]
        return {**self._head(), "choices": choices, "usage": usage, "seed": seed}

    def chunk(self, i, text=None, finish_reason=None, first=False, usage=False) -> dict:
        """A stream chunk: a piece of choice i's text, or its end (finish_reason); with the
        stream's usage asked for, every chunk carries `usage`: null (OpenAI's shape)."""
        if self.chat:
            delta = {"role": "assistant", "content": ""} if first else {} if text is None else {"content": text}
            choice = {"index": i, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        else:
            choice = {"index": i, "text": text or "", "logprobs": None, "finish_reason": finish_reason}
        return {**self._head(chunk=True), "choices": [choice], **({"usage": None} if usage else {})}

    def usage_chunk(self, usage) -> dict:
        return {**self._head(chunk=True), "choices": [], "usage": usage}


def usage(prompt_tokens, completion_tokens) -> dict:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}
