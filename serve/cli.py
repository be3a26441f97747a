"""`gptkit serve`: a checkpoint behind an OpenAI-compatible HTTP API, and a chat page. Run
`gptkit serve --help`."""

import ipaddress
import logging
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

import click

from gptkit.shared.cli import CONTEXT, Command, checkpoint_option, device_option, threads_option, version_option
from gptkit.shared.errors import InputError

log = logging.getLogger(__name__)


@click.command(cls=Command, context_settings=CONTEXT)
@version_option
@checkpoint_option
@click.option(
    "--host",
    metavar="ADDR",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on (0.0.0.0: every interface, for other machines; without --api-key a warning).",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    metavar="PORT",
    default=8000,
    show_default=True,
    help="0: a free port (printed).",
)
@click.option(
    "--api-key",
    envvar="GPTKIT_API_KEY",
    metavar="KEY",
    help="Require 'Authorization: Bearer KEY' on /v1/ (or set GPTKIT_API_KEY, which ps does not show).",
)
@click.option(
    "--name",
    metavar="NAME",
    help="The model's id in /v1/models and in replies.  [default: the training run's name, else the checkpoint directory's]",
)
@click.option(
    "--allow-special-tokens",
    is_flag=True,
    help="/v1/completions prompts may spell special tokens (<|endoftext|>, ...) as those tokens; chat messages never do.  [default: their spellings are text]",
)
@click.option(
    "--cors-origin",
    "cors_origins",
    multiple=True,
    metavar="ORIGIN",
    help="Let pages of ORIGIN (https://app.example:8080, or * for any) call the API from a browser; repeatable.  [default: none]",
)
@click.option(
    "--max-batch",
    type=click.IntRange(1),
    metavar="N",
    default=8,
    show_default=True,
    help="Samples decoded together (continuous batching); up to 4N more wait, and a request beyond that gets a 429.",
)
@click.option(
    "--batch-invariant",
    is_flag=True,
    help="Every step computes all --max-batch rows over the whole context, so that a request's tokens for a seed "
    "are the same alone as in company; one client alone then decodes slower (docs/serve.md gives the cost).  "
    "[default: steps of the requests running, over the positions in use]",
)
@click.option(
    "--shutdown-timeout",
    type=click.IntRange(0),
    metavar="SECONDS",
    default=5,
    show_default=True,
    help="On Ctrl-C or SIGTERM, new requests get a 503 and those in flight up to SECONDS to finish; then "
    "they end (finish_reason abort) and the server exits. 0: at once.",
)
@device_option
@threads_option("Threads of torch's CPU kernels.", measured=True)
def cli(
    checkpoint: str,
    host: str,
    port: int,
    api_key: str | None,
    name: str | None,
    allow_special_tokens: bool,
    cors_origins: Sequence[str],
    max_batch: int,
    batch_invariant: bool,
    shutdown_timeout: int,
    device: str,
    threads: int | None,
) -> None:
    """Serve a checkpoint with the OpenAI API (/v1/models, /v1/completions, /v1/chat/completions,
    streamed or whole), a health check at /health and a chat page at /. Requests decode together,
    up to --max-batch samples at once."""
    if api_key is not None and not api_key.strip():
        raise InputError("--api-key is empty")
    cors_origins = [origin_of(value) for value in cors_origins]
    from .server import make_server  # torch's import cost (2-3 s) is paid only once the arguments are checked

    try:
        # Before the model loads: a busy port is said at once.
        server = make_server(host, port, api_key=api_key, cors_origins=cors_origins)
    except OSError as e:
        raise InputError(f"--host {host} --port {port}: cannot listen there ({e.strerror or e})") from None
    if (
        api_key is None and not ipaddress.ip_address(str(server.server_address[0])).is_loopback
    ):  # str: for mypy, a TCP host is one
        # As Jupyter warns: other machines can reach the port, and nothing asks them for a key.
        log.warning(
            f"--host {host} listens beyond this machine without --api-key: anyone who can reach port "
            f"{server.server_port} can use the model; set --api-key (or GPTKIT_API_KEY)"
        )
    from gptkit.sample.sampling import Sampler

    from .server import Engine, default_name
    from .shutdown import serve

    with server:
        server.engine = Engine(
            Sampler(checkpoint, device=device, threads=threads),
            name or default_name(checkpoint),
            allow_special_tokens,
            max_batch,
            batch_invariant,
        )
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"serving {server.engine.name} at http://{shown}:{server.server_port}/ (chat with "
            f"{server.engine.template}; Ctrl-C stops)",
            err=True,
        )
        serve(server, shutdown_timeout)


# What a browser's Origin header holds after the scheme: a host name (its labels letters, digits,
# - and _; a name with other letters goes as its xn-- form), an IPv4 address or an IPv6 one in
# brackets, then a port where it is not the scheme's default.
NETLOC = re.compile(r"(?P<host>\[[0-9a-f:.]+\]|[^:\[\]]+)(:(?P<port>[0-9]+))?")
NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*")
DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(value: str) -> str:
    """A --cors-origin value as browsers send their Origin header: * or scheme://host[:port],
    lower case, without a path (a trailing / is dropped) or the scheme's default port (browsers
    leave it out); anything a browser never sends is refused (InputError naming --cors-origin)."""
    if value == "*":
        return value
    try:
        parts = urlsplit(value.strip().lower())
    except ValueError:  # a [ without its ]
        parts = urlsplit("")
    netloc = NETLOC.fullmatch(parts.netloc)
    if (
        parts.scheme not in DEFAULT_PORTS
        or netloc is None
        or parts.path not in ("", "/")
        or parts.query
        or parts.fragment
    ):
        raise InputError(
            f"--cors-origin {value}: expected * or an origin, http(s)://host[:port] (no path), as the "
            "page's address bar starts"
        )
    host, port = netloc["host"], netloc["port"]
    if "*" in host:
        raise InputError(
            f"--cors-origin {value}: a * in the host matches no page (a browser sends its one origin); give "
            "each origin, --cors-origin again for the next, or * alone for any"
        )
    if port is not None and not (len(port) <= 5 and 1 <= int(port) <= 65535):
        raise InputError(f"--cors-origin {value}: port {port}, expected 1 to 65535")
    host = _host(host)
    if host is None:
        raise InputError(
            f"--cors-origin {value}: {netloc['host']} is no host name or IP address (a name with letters "
            "beyond a-z is given in its xn-- form, as browsers send it)"
        )
    shown_port = "" if port is None or int(port) == DEFAULT_PORTS[parts.scheme] else f":{int(port)}"
    return f"{parts.scheme}://{host}{shown_port}"


def _host(host: str) -> str | None:
    """A host as browsers write it in an origin (an IPv6 address compressed), or None where it is none."""
    try:
        if host.startswith("["):
            return f"[{ipaddress.IPv6Address(host[1:-1]).compressed}]"
        if host.replace(".", "").isdigit():  # a browser reads a name of digits as an IPv4 address
            return str(ipaddress.IPv4Address(host))
    except ValueError:
        return None
    return host if NAME.fullmatch(host) else None


def main() -> None:
    cli(prog_name="gptkit serve")
