"""An HTTP server speaking the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions,
whole or streamed as server-sent events) and the chat page at /, from the standard library.

Chat messages are rendered with the checkpoint's chat template where it has one (Sampler.chat_ids),
the reply ending at the template's end of turn; else with serve/api.py's plain-text template.

Requests are answered by threads, but the model decodes one request at a time (Engine.lock): a
request waits for the one before it, so no two ever share a batch or a cache, and a request's
text is what it gives alone with its seed.
"""
from __future__ import annotations

import contextlib
import hmac
import importlib.resources
import json
import logging
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from gptkit.model.generate import prompt_ids
from gptkit.runtime.device import out_of_memory
from gptkit.sample.settings import Settings
from gptkit.shared.errors import InputError, SettingError

from .api import ApiError, Reply, parse, render_chat, usage

log = logging.getLogger(__name__)

MAX_BODY = 16 * 2**20  # bytes of a request body: far more than any context's text
PAGE = importlib.resources.files(__package__).joinpath("chat.html")


class Engine:
    """A loaded Sampler that decodes one request at a time."""

    def __init__(self, sampler, name: str):
        self.sampler, self.name = sampler, name
        self.context = sampler.model.config.context_length
        self.lock = threading.Lock()

    @property
    def template(self) -> str:
        """How chat messages become a prompt, for the start-up line."""
        if self.sampler.template is not None:
            return "its chat template"
        return f"the plain-text template, User: and Assistant: lines, since {self.sampler.no_template}"

    def prompt(self, request) -> tuple[list[int], tuple[str, ...]]:
        """The request's prompt as token ids, and the stops that end its reply."""
        sampler = self.sampler
        if request.chat and sampler.template is not None:
            try:
                return sampler.chat_ids(request.messages), sampler.template.stops
            except InputError as e:  # the template's own refusal (roles out of order, ...)
                raise ApiError(400, f"messages: {e}", "messages") from None
        text, stops = render_chat(request.messages) if request.chat else (request.prompt, ())
        return prompt_ids(sampler.tokenizer, text, sampler.bos_id), stops

    def settings(self, request) -> tuple[list[int], Settings]:
        """The request's prompt ids and Settings; a request that does not fit the context is
        refused (the sample library would slide its window instead)."""
        ids, stops = self.prompt(request)
        where = "messages" if request.chat else "prompt"
        if not ids:
            raise ApiError(400, f"{where} is empty and the checkpoint has no token to start a text with", where)
        asked = request.settings["max_new_tokens"]
        max_tokens = self.context - len(ids) if asked is None else asked
        if max_tokens < 1 or len(ids) + max_tokens > self.context:
            full = len(ids) >= self.context or asked is None  # the prompt is what to shorten
            more = "no room for a reply" if asked is None else f"max_tokens asks for {asked} more"
            raise ApiError(400, f"this model's context is {self.context} tokens: the {where} has {len(ids)} and {more}",
                           where if full else "max_tokens", "context_length_exceeded")
        return ids, Settings(**{**request.settings, "max_new_tokens": max_tokens,
                                "stops": (*stops, *request.settings["stops"])})

    @contextlib.contextmanager
    def samples(self, request):
        """(samples, prompt tokens) for the request, holding the model until the block ends."""
        ids, settings = self.settings(request)
        with self.lock:
            try:
                yield self.sampler.sample_ids(ids, settings), len(ids)
            except SettingError as e:  # the memory check before any work (Sampler.sample)
                raise ApiError(400, e.problem, "n", "out_of_memory") from None
            except (RuntimeError, MemoryError) as e:
                if not out_of_memory(e):
                    raise
                raise ApiError(400, f"out of memory on {self.sampler.device.type}: ask for fewer n or max_tokens",
                               "n", "out_of_memory") from None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: whole answers have a length, streams are chunked
    server_version = "gptkit"
    timeout = 120  # seconds a stalled client may hold its thread (and, while streaming, the model)

    # -- routing --

    def do_GET(self):
        self._route({"/": self._page, "/index.html": self._page, "/v1/models": self._models})

    def do_POST(self):
        self._route({"/v1/completions": lambda: self._complete(False),
                     "/v1/chat/completions": lambda: self._complete(True)})

    def _route(self, routes):
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            self.body = self._read_body()
            if path not in routes:
                raise ApiError(404, f"no such endpoint: {self.command} {path}", code="not_found")
            if path.startswith("/v1/"):
                self._authorize()
            routes[path]()
        except ApiError as e:
            self._json(e.status, e.body())
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; the model is free again
        except Exception as e:  # a bug of ours: one line in the log and a 500, and the server goes on
            log.error(f"{self.command} {path}: {type(e).__name__}: {e}")
            self._json(500, ApiError(500, f"internal error: {type(e).__name__}: {e}", kind="server_error").body())

    def _read_body(self) -> bytes:
        if self.command != "POST":
            return b""
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            self.close_connection = True
            raise ApiError(411, "the request needs a Content-Length")
        if int(length) > MAX_BODY:
            self.close_connection = True  # its body stays unread
            raise ApiError(413, f"the request body has {int(length):,} bytes, more than {MAX_BODY:,}")
        return self.rfile.read(int(length))

    def _authorize(self):
        key = self.server.api_key
        given = self.headers.get("Authorization", "")
        if key is not None and not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'",
                           code="invalid_api_key")

    # -- endpoints --

    def _page(self):
        self._send(200, "text/html; charset=utf-8", PAGE.read_bytes())

    def _models(self):
        engine = self.server.engine
        self._json(200, {"object": "list", "data": [{"id": engine.name, "object": "model", "created": 0,
                                                     "owned_by": "gptkit", "context_length": engine.context}]})

    def _complete(self, chat):
        request = parse(self.body, chat)
        engine = self.server.engine
        reply = Reply(request, engine.name)
        with engine.samples(request) as (samples, prompt_tokens):
            if request.stream:
                self._stream(request, reply, samples, prompt_tokens)
            else:
                texts = samples.texts()
                texts = [text.lstrip() for text in texts] if chat else texts
                self._json(200, reply.whole(texts, samples.finish_reasons, usage(prompt_tokens, sum(samples.tokens)),
                                            samples.seed))

    def _stream(self, request, reply, samples, prompt_tokens):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with_usage = request.include_usage
        n = len(samples.tokens)
        started = [not request.chat] * n  # a chat reply starts at its first non-space (after "Assistant:")
        try:
            if request.chat:
                for i in range(n):
                    self._event(reply.chunk(i, first=True, usage=with_usage))
            for i, piece in samples:
                if not started[i]:
                    piece = piece.lstrip()
                    started[i] = bool(piece)
                if piece:
                    self._event(reply.chunk(i, piece, usage=with_usage))
            for i in range(n):
                self._event(reply.chunk(i, finish_reason=samples.finish_reasons[i], usage=with_usage))
            if with_usage:
                self._event(reply.usage_chunk(usage(prompt_tokens, sum(samples.tokens))))
        except (BrokenPipeError, ConnectionResetError):
            raise
        except Exception as e:  # after the headers: the error is the stream's last event (the client raises it)
            if isinstance(e, (RuntimeError, MemoryError)) and out_of_memory(e):
                e = ApiError(400, f"out of memory on {self.server.engine.sampler.device.type}: ask for fewer n or "
                                  "max_tokens", "n", "out_of_memory")
            elif not isinstance(e, ApiError):
                log.error(f"{self.path}: {type(e).__name__}: {e}")
                e = ApiError(500, f"internal error: {type(e).__name__}: {e}", kind="server_error")
            self._event(e.body())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    # -- writing --

    def _event(self, obj):
        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _chunk(self, data: bytes):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _json(self, status, obj):
        self._send(status, "application/json", json.dumps(obj).encode())

    def _send(self, status, content_type, data):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format, *args):
        log.debug(format % args)  # no line per request on standard error


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled client never holds up the process's exit

    def handle_error(self, request, client_address):
        """What escapes a request's handler (Handler._route answers the rest), instead of
        socketserver's traceback on stderr: a client that hung up while its request was read (a
        browser dropping a kept-alive connection) is no error, anything else one line in the log."""
        error = sys.exc_info()[1]
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
            log.error(f"a request from {client_address[0]}: {type(error).__name__}: {error}")


def make_server(host="127.0.0.1", port=8000, *, engine=None, api_key=None) -> Server:
    """A server listening on host:port (0: a free port, server.server_port); set `server.engine`
    before serving."""
    server = Server((host, port), Handler)
    server.engine, server.api_key = engine, api_key
    return server
