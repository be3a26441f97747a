"""An HTTP server speaking the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions,
whole or streamed as server-sent events), a health check at /health and the chat page at /, from
the standard library.

Chat messages are rendered with the checkpoint's chat template where it has one (Sampler.chat_ids),
the reply ending at the template's end of turn; else with serve/api.py's plain-text template.

Requests are answered by threads and decode together, continuously batched (serve/batching.py):
a request joins the running batch at its next turn and leaves when done; alone, its text for a
seed is `gptkit sample`'s, and with --batch-invariant the same in any company. At most
--max-batch samples decode at once, a few times as many wait, and a request beyond that gets a
429. Once the server drains (serve/shutdown.py), new requests get a 503.

A client's mistake is a 4xx naming what was wrong; a 500 is the server's own fault, answered with
a generic line (its details, which may name files of this machine, go to the log).
"""

from __future__ import annotations

import contextlib
import hmac
import importlib.resources
import json
import logging
import re
import socket
import sys
from collections.abc import Callable, Iterable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from gptkit.model.checkpoint import checkpoint_directory
from gptkit.model.generate import prompt_ids
from gptkit.model.info import describe, sampling_memory
from gptkit.runtime.device import Memory, out_of_memory
from gptkit.sample.settings import Settings
from gptkit.shared.errors import InputError
from gptkit.shared.files import CHECKPOINTS, StrPath, resolved
from gptkit.tokenizer.chat import ChatError

from .api import ApiError, Reply, Request, parse, render_chat, shown, usage
from .batching import Batcher, Busy, Stopped
from .shutdown import InFlight, shutting_down

if TYPE_CHECKING:
    from gptkit.sample.sampling import Sampler, Samples

log = logging.getLogger(__name__)

MAX_BODY = 16 * 2**20  # bytes of a request body: far more than any context's text
PAGE = importlib.resources.files(__package__).joinpath("chat.html")
INTERNAL_ERROR = "internal error: the server failed on this request (its log says why)"


def default_name(checkpoint: StrPath) -> str:
    """The model's name where --name is not given: a training run's name for any checkpoint of it
    (runs/NAME, runs/NAME/latest, runs/NAME/checkpoints/step-...), the name its user knows it by;
    else the checkpoint directory's name."""
    directory = resolved(checkpoint_directory(checkpoint), "checkpoint")
    return directory.parent.parent.name if directory.parent.name == CHECKPOINTS else directory.name


class Engine:
    """A loaded Sampler whose requests decode together, `max_batch` samples at a time (Batcher).
    `allow_special_tokens`: a completion's prompt may spell the tokenizer's special tokens
    (`<|endoftext|>`) as those tokens; else, as for chat messages always, a prompt is text and
    its special-token spellings are text too. The batch's cache, a whole context for each row,
    is refused at the start where it cannot fit (SettingError naming max_batch). `batch_invariant`:
    every step computes all rows over the whole context (Batcher's `invariant`)."""

    def __init__(
        self,
        sampler: Sampler,
        name: str,
        allow_special_tokens: bool = False,
        max_batch: int = 8,
        batch_invariant: bool = False,
    ) -> None:
        self.sampler, self.name, self.allow_special_tokens = sampler, name, allow_special_tokens
        config = sampler.model.config
        self.context = config.context_length
        Memory(
            sampling_memory(config, max_batch),
            sampler.device,
            "max_batch",
            f"{max_batch} rows of the whole context ({config.context_length:,} tokens) for {describe(config)}",
            "serve fewer at once",
        ).check()
        self.batcher = Batcher(sampler.model, max_batch, batch_invariant)

    @property
    def template(self) -> str:
        """How chat messages become a prompt, for the start-up line."""
        if self.sampler.template is not None:
            return "its chat template"
        why: InputError | str = self.sampler.no_template
        if isinstance(why, ChatError):  # it has one, which failed on a probe conversation
            why = f"its chat template failed: {why}"
        return f"the plain-text template, User: and Assistant: lines, since {why}"

    def prompt(self, request: Request) -> tuple[list[int], tuple[str, ...]]:
        """The request's prompt as token ids, and the stops that end its reply."""
        sampler = self.sampler
        if not request.chat:
            assert request.prompt is not None  # a completion's (parse)
            if not self.allow_special_tokens:
                return prompt_ids(sampler.tokenizer, request.prompt, sampler.bos_id), ()
            bos = [] if sampler.bos_id is None else [sampler.bos_id]
            return bos + sampler.tokenizer.encode(request.prompt, allowed_special="all"), ()
        assert request.messages is not None  # a chat's (parse)
        if sampler.template is None:
            text, stops = render_chat(request.messages, request.continue_final)
            return prompt_ids(sampler.tokenizer, text, sampler.bos_id), stops
        # A reply to continue: the conversation before it up to the assistant's header, then its text.
        messages = request.messages[:-1] if request.continue_final else request.messages
        try:
            ids = sampler.chat_ids(messages)
        except ChatError as e:  # the template's own refusal (roles out of order, ...); e.reason names no file
            raise ApiError(400, f"messages: the chat template refused them: {e.reason}", "messages") from None
        if request.continue_final:
            ids += sampler.tokenizer.encode(request.messages[-1]["content"], allowed_special=())
        return ids, sampler.template.stops

    def settings(self, request: Request) -> tuple[list[int], Settings]:
        """The request's prompt ids and Settings; a request that does not fit the context is
        refused (the sample library would slide its window instead)."""
        ids, stops = self.prompt(request)
        where = "messages" if request.chat else "prompt"
        if not ids:
            raise ApiError(400, f"{where} is empty and the checkpoint has no token to start a text with", where)
        asked = request.settings["max_new_tokens"]
        max_tokens = self.context - len(ids) if asked is None else asked
        if max_tokens < 1 or len(ids) + max_tokens > self.context:
            raise self._too_long(request, where, len(ids), asked)
        return ids, Settings(
            **{**request.settings, "max_new_tokens": max_tokens, "stops": (*stops, *request.settings["stops"])}
        )

    def _too_long(self, request: Request, where: str, length: int, asked: int | None) -> ApiError:
        """The 400 for a prompt that leaves too little of the context for the reply: what to shorten."""
        has = f"the {where} {'have' if request.chat else 'has'} {length:,} tokens"
        shorten = f"shorten the {where}" + (" or start a new chat" if request.chat else "")
        if length >= self.context:  # the prompt is what to shorten (always so where max_tokens is the rest)
            return ApiError(
                400,
                f"this model's context is {self.context:,} tokens: {has}, no room for a reply; {shorten}",
                where,
                "context_length_exceeded",
            )
        field = request.max_tokens_field
        return ApiError(
            400,
            f"this model's context is {self.context:,} tokens: {has} and {field} asks for "
            f"{shown(asked)} more; ask for at most {self.context - length:,} or {shorten}",
            field,
            "context_length_exceeded",
        )

    @contextlib.contextmanager
    def samples(self, request: Request) -> Iterator[tuple[Samples, int]]:
        """(samples, prompt tokens) for the request, decoding in the batch until the block ends."""
        ids, settings = self.settings(request)
        n, rows = settings.num_samples, self.batcher.rows
        if n > rows:
            raise ApiError(
                400, f"n {shown(n)}: more samples than this server decodes at once ({rows}); ask for fewer", "n"
            )
        try:
            samples = self.sampler.sample_ids(ids, settings, self.batcher.submit)
        except Busy as e:
            raise ApiError(429, f"the server is busy ({e}); retry later", code="rate_limit_exceeded") from None
        except Stopped:  # it came as the drain's time ran out
            raise shutting_down() from None
        try:
            yield samples, len(ids)
        except (RuntimeError, MemoryError) as e:
            if not out_of_memory(e):
                raise
            raise self.out_of_memory() from None
        finally:
            samples.close()

    def out_of_memory(self) -> ApiError:
        return ApiError(
            400, f"out of memory on {self.sampler.device.type}: ask for fewer n or max_tokens", "n", "out_of_memory"
        )


class Handler(BaseHTTPRequestHandler):
    server: Server  # the server that made it, with the engine and settings it answers with
    protocol_version = "HTTP/1.1"  # keep-alive: whole answers have a length, streams are chunked
    server_version = "gptkit"
    timeout = 120  # seconds a stalled client may hold its thread (and, while streaming, its rows)
    # TCP_NODELAY: an answer's headers and body are two writes, and with Nagle's algorithm the body
    # waits for the client's delayed ACK of the headers (40 ms on Linux), as a stream's chunks do.
    disable_nagle_algorithm = True

    # -- routing --

    def do_GET(self) -> None:
        self._route()

    do_HEAD = do_POST = do_PUT = do_PATCH = do_DELETE = do_GET  # the routes say which methods a path takes (405)

    def do_OPTIONS(self) -> None:
        """A browser's preflight before a request from another origin: answered on any path and
        without the key (a preflight never carries it); end_headers adds the CORS headers where
        the origin is allowed."""
        self.send_response(204)
        self.send_header("Allow", "GET, POST, OPTIONS")
        self.send_header("Access-Control-Max-Age", "600")
        self.end_headers()

    def _endpoints(self, path: str) -> dict[str, Callable[[], None]] | None:
        """{method: what answers it} for a path, or None where there is no such path."""
        if path.startswith("/v1/models/"):
            return {"GET": lambda: self._model(unquote(path.removeprefix("/v1/models/")))}
        return {
            "/": {"GET": self._page},
            "/index.html": {"GET": self._page},
            "/health": {"GET": self._health},
            "/v1/models": {"GET": self._models},
            "/v1/completions": {"POST": lambda: self._complete(False)},
            "/v1/chat/completions": {"POST": lambda: self._complete(True)},
        }.get(path)

    def _route(self) -> None:
        with self.server.requests.answering() as admitted:
            self._answer(admitted)

    def _answer(self, admitted: bool) -> None:
        path = urlsplit(self.path).path.rstrip("/") or "/"
        try:
            self.body = self._read_body()  # read first, also where it is refused: a socket closed unread resets
            if not admitted:
                raise shutting_down()
            endpoints = self._endpoints(path)
            if endpoints is None:
                raise ApiError(404, f"no such endpoint: {self.command} {shown(path)}", code="not_found")
            method = "GET" if self.command == "HEAD" else self.command  # a GET's answer without its body
            if method not in endpoints:
                allow = ", ".join(endpoints)
                error = ApiError(405, f"{shown(path)} takes {allow}, not {self.command}", code="method_not_allowed")
                return self._json(405, error.body(), {"Allow": allow})
            if path.startswith("/v1/"):
                self._authorize()
            endpoints[method]()
        except ApiError as e:
            self._json(e.status, e.body())
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            self.close_connection = True  # the client went away or stalled; the model is free again
        except Exception as e:  # a bug of ours: one line in the log, a 500 naming nothing of the machine
            log.error(f"{self.command} {path}: {type(e).__name__}: {e}")
            self._json(500, ApiError(500, INTERNAL_ERROR, kind="server_error").body())

    def _read_body(self) -> bytes:
        """The request's body, by its Content-Length (a POST must send one)."""
        length = self.headers.get("Content-Length")
        if length is None and self.command != "POST":
            return b""
        if length is None or not re.fullmatch(r"[0-9]+", length):
            self.close_connection = True
            raise ApiError(411, "the request needs a Content-Length, a number of bytes")
        if int(length) > MAX_BODY:
            self.close_connection = True  # its body stays unread
            raise ApiError(413, f"the request body has {int(length):,} bytes, more than {MAX_BODY:,}")
        body = self.rfile.read(int(length))
        if len(body) < int(length):
            self.close_connection = True
            raise ApiError(
                400, f"the request body ended after {len(body):,} of its Content-Length's {int(length):,} bytes"
            )
        return body

    def _authorize(self) -> None:
        key = self.server.api_key
        given = self.headers.get("Authorization", "")
        if key is not None and not hmac.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(
                401, "missing or wrong API key: send the header 'Authorization: Bearer KEY'", code="invalid_api_key"
            )

    # -- endpoints --

    def _page(self) -> None:
        self._send(200, "text/html; charset=utf-8", PAGE.read_bytes())

    def _health(self) -> None:
        self._json(200, {"status": "ok"})

    @property
    def engine(self) -> Engine:
        assert self.server.engine is not None  # set before serving (make_server)
        return self.server.engine

    def _model_object(self) -> dict[str, Any]:
        name, context = self.engine.name, self.engine.context
        return {"id": name, "object": "model", "created": 0, "owned_by": "gptkit", "context_length": context}

    def _models(self) -> None:
        self._json(200, {"object": "list", "data": [self._model_object()]})

    def _model(self, name: str) -> None:
        if name != self.engine.name:
            raise ApiError(
                404,
                f"model {shown(name)} does not exist: this server has one, {self.engine.name!r}",
                "model",
                "model_not_found",
            )
        self._json(200, self._model_object())

    def _complete(self, chat: bool) -> None:
        request = parse(self.body, chat)
        engine = self.engine
        reply = Reply(request, engine.name)
        with engine.samples(request) as (samples, prompt_tokens):
            if request.stream:
                self._stream(request, reply, samples, prompt_tokens)
            else:
                texts = samples.texts()
                # A chat reply starts at its first non-space (after "Assistant:"); a reply continued goes on as it is.
                texts = [text.lstrip() for text in texts] if chat and not request.continue_final else texts
                self._json(
                    200,
                    reply.whole(texts, samples.finish_reasons, usage(prompt_tokens, sum(samples.tokens)), samples.seed),
                )

    def _stream(self, request: Request, reply: Reply, samples: Samples, prompt_tokens: int) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        with_usage = request.include_usage
        n = len(samples.tokens)
        started = [not request.chat or request.continue_final] * n  # as _complete strips a whole reply
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
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            raise
        except Exception as e:  # after the headers: the error is the stream's last event (the client raises it)
            if isinstance(e, (RuntimeError, MemoryError)) and out_of_memory(e):
                e = self.engine.out_of_memory()
            elif not isinstance(e, ApiError):
                log.error(f"{self.command} {self.path}: {type(e).__name__}: {e}")
                e = ApiError(500, INTERNAL_ERROR, kind="server_error")
            self._event(e.body())
        self._chunk(b"data: [DONE]\n\n")
        self._chunk(b"")

    # -- writing --

    def _event(self, obj: dict[str, Any]) -> None:
        self._chunk(b"data: " + json.dumps(obj).encode() + b"\n\n")

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _json(self, status: int, obj: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        self._send(status, "application/json", json.dumps(obj).encode(), headers)

    def _send(self, status: int, content_type: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if self.server.requests.draining:
            self.close_connection = True  # no next request on this connection
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def end_headers(self) -> None:
        """Every answer, errors and streams included, with the CORS headers where the request's
        Origin is one --cors-origin allows (a browser shows a page of that origin nothing else)."""
        allowed = self.server.cors_origins
        headers = getattr(self, "headers", None)  # none yet where the request line itself was bad
        origin = headers.get("Origin") if headers is not None else None
        if origin is not None and ("*" in allowed or origin in allowed):
            self.send_header("Access-Control-Allow-Origin", "*" if "*" in allowed else origin)
            self.send_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS")
            # Named: a "*" here would not cover Authorization.
            self.send_header("Access-Control-Allow-Headers", "Authorization, Content-Type")
            if "*" not in allowed:
                self.send_header("Vary", "Origin")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        log.debug(format % args)  # no line per request on standard error


class Server(ThreadingHTTPServer):
    daemon_threads = True  # a stalled client never holds up the process's exit
    # The connections the kernel holds until the server takes them: a client beyond the batch and
    # its queue is told so (a 429) only once taken, and socketserver's 5 reset the rest. So the
    # system's most, as uvicorn and nginx ask for.
    request_queue_size = socket.SOMAXCONN
    # What the handlers answer with, set by make_server (the engine, by the caller before serving).
    engine: Engine | None
    api_key: str | None
    cors_origins: frozenset[str]

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        # The address family of the host (ThreadingHTTPServer's is IPv4 alone: --host ::1 could not bind).
        self.address_family = socket.getaddrinfo(*address, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0][0]
        super().__init__(address, handler)
        self.requests = InFlight()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """What escapes a request's handler (Handler._route answers the rest), instead of
        socketserver's traceback on stderr: a client that hung up while its request was read (a
        browser dropping a kept-alive connection) is no error, anything else one line in the log."""
        error = sys.exc_info()[1]
        if not isinstance(error, (BrokenPipeError, ConnectionResetError)):
            log.error(f"a request from {client_address[0]}: {type(error).__name__}: {error}")


def make_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    engine: Engine | None = None,
    api_key: str | None = None,
    cors_origins: Iterable[str] = (),
) -> Server:
    """A server listening on host:port (0: a free port, server.server_port); set `server.engine`
    before serving. `cors_origins`: the origins ("https://app.example", or "*": any) whose pages
    may call the API from a browser."""
    server = Server((host, port), Handler)
    server.engine, server.api_key, server.cors_origins = engine, api_key, frozenset(cors_origins)
    return server
