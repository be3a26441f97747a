"""What the serve tests share (tests/integration/test_serve.py, test_serve_requests.py,
test_chat_page.py, test_chat_serve.py): a tiny checkpoint with room for a chat (and one with chat
tokens and a template), a real server on a free port of 127.0.0.1, and requests made without a
client."""

import contextlib
import http.client
import json
import threading

import torch

from gptkit.model.checkpoint import save_model
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import SPECIAL_TOKENS, TEMPLATE_FILE

EOT = "<|endoftext|>"
CONTEXT = 128


def tiny_checkpoint(tokenizer, path, extra_files=None, context=CONTEXT):
    """An untrained model (random text, the same for a seed), of `context` tokens."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        context_length=context,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_ff=64,
        init_std=0.1,
    )
    save_model(
        TransformerLM(config).eval(), tokenizer, path, eot_id=tokenizer.special_tokens[EOT], extra_files=extra_files
    )
    return path


def chat_checkpoint(tokenizer, path, template=None):
    """tiny_checkpoint with gptkit's chat tokens added to `tokenizer` (as `tokenizer train --chat`
    adds them), rendering with gptkit's own template, or with `template` (a chat_template.jinja
    it carries)."""
    specials = {**tokenizer.special_tokens, **{t: tokenizer.vocab_size + k for k, t in enumerate(SPECIAL_TOKENS)}}
    chat = Tokenizer(
        tokenizer.vocab + [t.encode() for t in SPECIAL_TOKENS],
        tokenizer.merges,
        specials,
        pattern=tokenizer.pattern,
        normalizer=tokenizer.normalizer,
    )
    extra = {TEMPLATE_FILE: lambda file: file.write_text(template, encoding="utf-8")} if template is not None else None
    return tiny_checkpoint(chat, path, extra)


@contextlib.contextmanager
def running(
    sampler,
    api_key=None,
    name="tiny",
    *,
    allow_special_tokens=False,
    cors_origins=(),
    bodies=None,
    max_batch=8,
    batch_invariant=False,
):
    """A server for `sampler` in a thread; yields its base URL, and shuts it down after. `bodies`:
    a list that gets (path, JSON value) of each request body the server reads, as it read it."""
    from gptkit.serve.server import Engine, Handler, make_server

    class Recording(Handler):
        def _read_body(self):
            body = super()._read_body()
            if body:
                bodies.append((self.path, json.loads(body)))
            return body

    server = make_server(
        "127.0.0.1",
        0,
        engine=Engine(sampler, name, allow_special_tokens, max_batch, batch_invariant),
        api_key=api_key,
        cors_origins=cors_origins,
    )
    if bodies is not None:
        server.RequestHandlerClass = Recording
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def send(url, method, path, body=b"", headers=None):
    """(status, headers, body) of a request made without the openai client: bodies it would never send."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.headers, response.read()
    finally:
        connection.close()


def raw(url, method, path, body=b"", headers=None):
    """(status, parsed JSON) of `send`."""
    status, _, data = send(url, method, path, body, headers)
    return status, json.loads(data)
