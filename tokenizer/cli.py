"""`gptkit tokenizer`: train a byte-level BPE, encode, decode, inspect. Run `gptkit tokenizer --help`."""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any, BinaryIO

import click

from gptkit.shared.cli import CONTEXT, Group, overwrite_option, threads_option, version_option
from gptkit.shared.corpus import DEFAULT_SEPARATOR, Corpus
from gptkit.shared.errors import InputError
from gptkit.shared.files import Input, cause, check_output
from gptkit.shared.jsonfile import read_json
from gptkit.shared.text import EOT, Utf8Decoder, without_surrogates

from .bpe import Tokenizer
from .chat import SPECIAL_TOKENS as CHAT_TOKENS
from .split import GPT2_PATTERN
from .train import TIE_BREAKS, train_bpe
from .vocab import auto_tokenizer

log = logging.getLogger(__name__)
DEFAULT_PATH = "tokenizer.json"
tokenizer_option = click.option(
    "--tokenizer",
    "-t",
    "path",
    default=DEFAULT_PATH,
    show_default=True,
    metavar="PATH",
    help="A tokenizer.json (HF tokenizers format).",
)


class VocabSize(click.ParamType):
    """A whole number (train_bpe checks its range), or 'auto'."""

    name = "N|auto"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int | str:
        if isinstance(value, int) or value == "auto":
            return value
        try:
            return int(value)
        except ValueError:
            self.fail(f"{value!r}: expected a whole number of tokens, or 'auto'", param, ctx)


VOCAB_SIZE = VocabSize()


@click.group(cls=Group, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """Byte-level BPE tokenizers in the format of HF `tokenizers` (tokenizer.json)."""


@cli.command()
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="PATH",
    help="A text, .jsonl or .parquet file (text and .jsonl also .gz/.xz/.bz2/.zst), a directory (its .txt/.jsonl/.parquet files) or a glob. Repeatable; extra paths may follow it.",
)
@click.argument("more_inputs", nargs=-1, metavar="[PATH]...")
@click.option(
    "--vocab-size",
    type=VOCAB_SIZE,
    required=True,
    help="Tokens in all: 256 bytes + merges + special tokens; 'auto': 512, 1,024 or 4,096, chosen for the corpus (its size, how often it repeats itself, and how long the tokens of each size are).",
)
@click.option("--special-token", "special_tokens", multiple=True, default=[EOT], show_default=True, help="Repeatable.")
@click.option(
    "--chat",
    is_flag=True,
    help=f"Add gptkit's chat tokens ({', '.join(CHAT_TOKENS)}) to the special tokens: its chat template applies (pretokenize --chat).",
)
@click.option(
    "--tie-break",
    type=click.Choice(TIE_BREAKS),
    default=TIE_BREAKS[0],
    show_default=True,
    help="Which of the most frequent pairs to merge: the lexicographically greatest pair of byte strings (Stanford CS336's rule), or the one HF tokenizers' trainer takes (its merges exactly).",
)
@click.option("--out", default=DEFAULT_PATH, show_default=True, metavar="PATH", help="Where to write tokenizer.json.")
@overwrite_option("a tokenizer.json")
@threads_option("Processes counting pre-tokens (one thread each).")
@click.option(
    "--max-bytes",
    type=click.IntRange(min=1),
    metavar="B",
    help="Train on the first B bytes of the corpus (whole documents).",
)
@click.option(
    "--separator", default=DEFAULT_SEPARATOR, show_default=True, help="What separates documents in .txt files."
)
@click.option(
    "--text-field",
    default="text",
    show_default=True,
    help="The text field of .jsonl records / column of .parquet files.",
)
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def train(
    inputs: tuple[str, ...],
    more_inputs: tuple[str, ...],
    vocab_size: int | str,
    special_tokens: tuple[str, ...],
    chat: bool,
    tie_break: str,
    out: str,
    overwrite: bool,
    threads: int,
    max_bytes: int | None,
    separator: str,
    text_field: str,
    quiet: bool,
) -> None:
    """Learn a byte-level BPE from text corpora (GPT-2 pre-tokenization)."""
    inputs = inputs + more_inputs
    if not inputs:
        raise InputError("--input: give at least one corpus file, directory or glob")
    corpus = Corpus(inputs, separator=separator or None, text_field=text_field)
    read = [Input.given("input", path) for path in [*map(Path, inputs), *corpus.paths]]  # and what globs name
    check_output(out, _is_tokenizer_file, "a tokenizer.json", overwrite, inputs=read)
    if chat:
        special_tokens = (*special_tokens, *(t for t in CHAT_TOKENS if t not in special_tokens))
    start = time.perf_counter()

    def trained(size: int) -> Tokenizer:
        return train_bpe(
            corpus, size, special_tokens, tie_break=tie_break, workers=threads, max_bytes=max_bytes, quiet=quiet
        )

    if isinstance(vocab_size, str):  # "auto", the one text VocabSize takes
        tokenizer, vocab_size, why = auto_tokenizer(corpus, trained)
        click.echo(f"vocab size {why}", err=True)
    else:
        tokenizer = trained(vocab_size)
    _save(tokenizer, out)
    click.echo(
        f"wrote {out}: {tokenizer.vocab_size:,} tokens ({len(tokenizer.merges):,} merges, "
        f"{len(tokenizer.special_tokens)} special), fingerprint {tokenizer.fingerprint}, {time.perf_counter() - start:.1f} s"
    )
    assert isinstance(vocab_size, int)  # "auto" became the size chosen
    if tokenizer.vocab_size < vocab_size:
        click.echo(f"note: the corpus has too few distinct pairs for {vocab_size:,} tokens", err=True)


@cli.command()
@click.option("--vocab", "vocab_path", required=True, metavar="PATH", help="GPT-2's vocab.json.")
@click.option("--merges", "merges_path", required=True, metavar="PATH", help="GPT-2's merges.txt.")
@click.option(
    "--special-token",
    "special_tokens",
    multiple=True,
    help=f"A token of the vocabulary that is special. Repeatable. [default: {EOT}, where the vocabulary has it]",
)
@click.option("--out", default=DEFAULT_PATH, show_default=True, metavar="PATH", help="Where to write tokenizer.json.")
@overwrite_option("a tokenizer.json")
def convert(vocab_path: str, merges_path: str, special_tokens: tuple[str, ...], out: str, overwrite: bool) -> None:
    """Turn GPT-2-style vocab.json + merges.txt into a tokenizer.json."""
    read = [Input.given("vocab", vocab_path), Input.given("merges", merges_path)]
    check_output(out, _is_tokenizer_file, "a tokenizer.json", overwrite, inputs=read)
    tokenizer = Tokenizer.from_gpt2_files(vocab_path, merges_path, special_tokens or None)
    _save(tokenizer, out)
    click.echo(f"wrote {out}: {tokenizer.vocab_size:,} tokens, fingerprint {tokenizer.fingerprint}")


@cli.command()
@tokenizer_option
@click.argument("text", required=False)
@click.option(
    "--file", "file_path", metavar="PATH", help="Encode this file (streamed) instead of TEXT; '-' for standard input."
)
@click.option("--specials-as-text", is_flag=True, help="Encode special-token strings as plain text.")
def encode(path: str, text: str | None, file_path: str | None, specials_as_text: bool) -> None:
    """Print the ids of TEXT (or of --file, or of standard input), separated by spaces."""
    tokenizer = _load(path)
    allowed = () if specials_as_text else "all"
    if text is not None and file_path is not None:
        raise InputError("give TEXT or --file, not both")
    if text is not None:
        text, replaced = without_surrogates(text)  # bytes of the command line that are not UTF-8
        if replaced:
            log.warning(f"TEXT: {replaced} byte(s) that are not UTF-8 replaced by U+FFFD")
        ids = iter(tokenizer.encode(text, allowed))
    else:
        name = "standard input" if file_path in (None, "-") else f"--file {file_path}"
        stream = sys.stdin.buffer if file_path in (None, "-") else _open_binary(file_path)
        decoder = Utf8Decoder()  # "\r\n" kept as the bytes say
        ids = tokenizer.encode_iterable(_decoded(stream, decoder), allowed)
    separator = ""
    while batch := list(islice(ids, 1 << 16)):
        sys.stdout.write(separator + " ".join(map(str, batch)))
        separator = " "
    sys.stdout.write("\n")
    if text is None and decoder.replaced:
        log.warning(f"{name}: {decoder.replaced} invalid UTF-8 sequence(s) replaced by U+FFFD")


@cli.command()
@tokenizer_option
@click.argument("ids", nargs=-1)
def decode(path: str, ids: tuple[str, ...]) -> None:
    """Print the text of token IDS (or of the ids on standard input)."""
    tokenizer = _load(path)
    words = ids or sys.stdin.read().split()
    try:
        numbers = [int(w) for w in words]
    except ValueError as e:
        raise InputError(f"IDS: expected integer token ids ({e})") from None
    try:
        sys.stdout.write(tokenizer.decode(numbers) + "\n")
    except InputError as e:
        raise InputError(f"IDS: {e}") from None


@cli.command()
@tokenizer_option
def info(path: str) -> None:
    """Vocabulary size, merges, special tokens, normalizer, pattern and fingerprint of a tokenizer.json."""
    tokenizer = _load(path)
    specials = ", ".join(f"{s} = {i}" for s, i in tokenizer.special_tokens.items()) or "none"
    click.echo(f"file: {path}")
    click.echo(f"vocab size: {tokenizer.vocab_size:,}")
    click.echo(f"merges: {len(tokenizer.merges):,}")
    click.echo(f"special tokens: {specials}")
    click.echo(f"normalizer: {' + '.join(tokenizer.normalizer) or 'none'}")
    click.echo(
        f"pre-tokenizer: {'GPT-2 pattern' if tokenizer.pattern == GPT2_PATTERN else 'pattern ' + tokenizer.pattern}"
    )
    if tokenizer.ignore_merges:
        click.echo("ignore_merges: a pre-token that is a token is taken whole")
    click.echo(f"fingerprint: {tokenizer.fingerprint}")


def _load(path: str) -> Tokenizer:
    return Tokenizer.from_file(path)


def _is_tokenizer_file(path: Path) -> bool:
    try:
        return isinstance(read_json(path).get("model"), dict)
    except (OSError, ValueError, AttributeError):
        return False


def _save(tokenizer: Tokenizer, out: str) -> None:
    try:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        tokenizer.save(out)
    except OSError as e:
        raise InputError(f"--out {out}: cannot write ({cause(e)})") from None


def _open_binary(path: str) -> BinaryIO:
    try:
        return open(path, "rb")
    except OSError as e:
        raise InputError(f"--file {path}: cannot read ({e.strerror})") from None


def _decoded(stream: BinaryIO, decoder: Utf8Decoder) -> Iterator[str]:
    while block := stream.read(1 << 20):
        yield decoder.decode(block)
    yield decoder.decode(b"", final=True)


def main() -> None:
    cli(prog_name="gptkit tokenizer")
