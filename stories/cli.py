"""`gptkit stories`: write a corpus of generated stories. Run `gptkit stories --help`."""

import re
import shutil
import time
from decimal import Decimal
from pathlib import Path

import click
from click.core import ParameterSource

from gptkit.shared.cli import CONTEXT, Command, overwrite_option, version_option
from gptkit.shared.errors import InputError
from gptkit.shared.files import cause, check_output

from .generate import write_conversations, write_corpus

UNITS = {
    "": 1,
    "b": 1,
    "k": 10**3,
    "kb": 10**3,
    "m": 10**6,
    "mb": 10**6,
    "g": 10**9,
    "gb": 10**9,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
}
SIZE = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*([a-z]*)")


def parse_size(text: str) -> int:
    """'500KB' -> 500_000, '10MB' -> 10_000_000, '1GB', '1.5MiB', '12345' (bytes)."""
    m = SIZE.fullmatch(text.strip().lower())
    if m is None or m.group(2) not in UNITS:
        raise InputError(f"--size {text!r}: expected a number of bytes or a size like 500KB, 10MB, 1GB")
    size = int(Decimal(m.group(1)) * UNITS[m.group(2)])
    if size < 1:
        raise InputError(f"--size {text!r}: expected at least 1 byte")
    return size


@click.command(cls=Command, context_settings=CONTEXT)
@version_option
@click.option(
    "--out",
    default="data/stories.txt",
    show_default=True,
    metavar="PATH",
    help="The corpus file to write (its directory is created).",
)
@click.option(
    "--size",
    default="10MB",
    show_default=True,
    help="Stop at the first story that reaches this size: 500KB, 10MB, 1GB (powers of 1000; KiB/MiB/GiB: of 1024) or bytes.",
)
@click.option("--seed", type=int, default=0, show_default=True, help="The same seed and size give the same bytes.")
@click.option(
    "--chat",
    is_flag=True,
    help='Write chats instead, a .jsonl line each ({"messages": [...]}: a story\'s opening, a question about it and its answer in one format), for pretokenize --chat.',
)
@overwrite_option(None)
def cli(out: str, size: str, seed: int, chat: bool, overwrite: bool) -> None:
    """Write simple English stories separated by <|endoftext|>: the demo corpus (--chat: chats about them)."""
    size_bytes = parse_size(size)
    if chat and click.get_current_context().get_parameter_source("out") is ParameterSource.DEFAULT:
        raise InputError("--chat: give --out, the .jsonl file to write (the default is the stories' corpus)")
    if not Path(out).name:  # '' or '.': no file to write
        raise InputError(f"--out {out!r}: expected the path of a file to write")
    check_output(out, None, "a corpus", overwrite)  # a text file: nothing tells our corpus from the user's
    free = shutil.disk_usage(_existing_ancestor(Path(out).parent)).free
    if size_bytes > free:
        raise InputError(
            f"--size {size}: {size_bytes / 1e9:,.3g} GB, more than the {free / 1e9:,.3g} GB free where --out "
            f"{out} goes; expected a size the disk can hold"
        )
    start = time.perf_counter()
    words: set[str] = set()
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        if chat:
            n, n_bytes = write_conversations(out, size_bytes, seed=seed)
        else:
            n, n_bytes = write_corpus(out, size_bytes, seed=seed, words=words)
    except OSError as e:
        raise InputError(f"--out {out}: {cause(e)}") from None
    what = f"{n:,} chats" if chat else f"{n:,} stories"
    vocabulary = "" if chat else f", {len(words):,} distinct words"
    click.echo(f"wrote {out}: {what}, {n_bytes / 1e6:,.2f} MB{vocabulary}, in {time.perf_counter() - start:.1f} s")


def _existing_ancestor(path):
    """The directory that exists of `path` and its parents: where the file's bytes will go."""
    path = path.absolute()
    while not path.is_dir() and path != path.parent:
        path = path.parent
    return path


def main() -> None:
    cli(prog_name="gptkit stories")
