"""`gptkit serve`: a checkpoint behind an OpenAI-compatible HTTP API, and a chat page. Run
`gptkit serve --help`."""
from pathlib import Path

import click

from gptkit.shared.cli import CONTEXT, Command, threads_option, version_option
from gptkit.shared.errors import InputError


@click.command(cls=Command, context_settings=CONTEXT)
@version_option
@click.option("--checkpoint", required=True, metavar="DIR", help="A checkpoint directory (model.safetensors, config.json, tokenizer.json).")
@click.option("--host", metavar="ADDR", default="127.0.0.1", show_default=True, help="The address to listen on (0.0.0.0: every interface, for other machines).")
@click.option("--port", type=click.IntRange(0, 65535), metavar="PORT", default=8000, show_default=True, help="0: a free port (printed).")
@click.option("--api-key", envvar="GPTKIT_API_KEY", metavar="KEY", help="Require 'Authorization: Bearer KEY' on /v1/ (or set GPTKIT_API_KEY, which ps does not show).")
@click.option("--name", metavar="NAME", help="The model's id in /v1/models and in replies.  [default: the checkpoint's directory name]")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@threads_option("Threads of torch's CPU kernels.", measured=True)
def cli(checkpoint, host, port, api_key, name, device, threads):
    """Serve a checkpoint with the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions,
    streamed or whole) and a chat page at /. One request decodes at a time; the others wait."""
    if api_key is not None and not api_key.strip():
        raise InputError("--api-key is empty")
    from .server import make_server  # torch's import cost (2-3 s) is paid only once the arguments are checked

    try:
        server = make_server(host, port, api_key=api_key)  # before the model loads: a busy port is said at once
    except OSError as e:
        raise InputError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
    from gptkit.sample.sampling import Sampler

    from .server import Engine

    with server:
        server.engine = Engine(Sampler(checkpoint, device=device, threads=threads), name or Path(checkpoint).resolve().name)
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"serving {server.engine.name} at http://{shown}:{server.server_port}/ (chat with "
                   f"{server.engine.template}; Ctrl-C stops)", err=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main():
    cli(prog_name="gptkit serve")

