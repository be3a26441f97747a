"""What the serve tests share (tests/integration/test_serve.py, test_chat_page.py): a tiny
checkpoint with room for a chat, and a real server on a free port of 127.0.0.1."""
import contextlib
import threading

import torch

from gptkit.model.checkpoint import save_model
from gptkit.model.config import ModelConfig
from gptkit.model.model import TransformerLM

EOT = "<|endoftext|>"
CONTEXT = 128


def tiny_checkpoint(tokenizer, path):
    """An untrained model (random text, the same for a seed), context CONTEXT."""
    torch.manual_seed(0)
    config = ModelConfig(vocab_size=tokenizer.vocab_size, context_length=CONTEXT, d_model=32, n_layers=2, n_heads=4,
                         d_ff=64, init_std=0.1)
    save_model(TransformerLM(config).eval(), tokenizer, path, eot_id=tokenizer.special_tokens[EOT])
    return path


@contextlib.contextmanager
def running(sampler, api_key=None, name="tiny"):
    """A server for `sampler` in a thread; yields its base URL, and shuts it down after."""
    from gptkit.serve.server import Engine, make_server

    server = make_server("127.0.0.1", 0, engine=Engine(sampler, name), api_key=api_key)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
