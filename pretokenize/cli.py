"""`gptkit pretokenize`: encode corpora into token shards, inspect and verify them. Run
`gptkit pretokenize --help`.

`encode` is a shell over a library function whose arguments are its flags (dataset.py:
encode_dataset): it checks what only the command line can get wrong (no --input nor paths after
it), calls the function, which writes --out, and prints its summary. The function's errors name
its arguments; the command shows them as flags (shared/cli.py)."""

from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from gptkit.shared.cli import CONTEXT, DefaultGroup, overwrite_option, threads_option, version_option
from gptkit.shared.corpus import DEFAULT_SEPARATOR
from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, looked_up
from gptkit.shared.shard_dir import MANIFEST, TOKENIZER_FILE, ShardDir
from gptkit.shared.shards import MAX_TOKENS, ShardError, open_shard, read_header, verify_shard
from gptkit.shared.text import EOT, counted
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.chat import TEMPLATE_FILE

from .dataset import DEFAULT_VAL_FRACTION, Encoded, encode_dataset
from .encode import DEFAULT_SHARD_TOKENS

SHOWN_TOKENS = 32  # tokens decoded by `inspect`


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """Encode text corpora into llm.c-format token shards (`encode`, the default command),
    then `inspect` or `verify` them."""


@cli.command()
@click.option(
    "--tokenizer",
    "-t",
    default="tokenizer.json",
    show_default=True,
    metavar="PATH",
    help="A tokenizer.json.",
)
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="PATH",
    help="A text, .jsonl or .parquet file (text and .jsonl also .gz/.xz/.bz2/.zst), a directory (its .txt/.jsonl/.parquet files) or a glob. Repeatable; extra paths may follow it.",
)
@click.argument("more_inputs", nargs=-1, metavar="[PATH]...")
@click.option(
    "--out",
    required=True,
    metavar="DIR",
    help="Where the shards go; they are named after it: DIR/NAME_train_000001.bin ...",
)
@click.option(
    "--val-fraction",
    type=float,
    metavar="F",
    help="Hold out this fraction (0 < F < 1) of the documents, evenly spaced (of the text, its tail, when the documents are too few, or too uneven in size to hold about F of the tokens).  "
    f"[default: {DEFAULT_VAL_FRACTION}]",
)
@click.option(
    "--val-tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help="Hold out the leading documents, until N tokens (the last N tokens of the text when the documents are too few, or the leading ones take most of the text).",
)
@click.option(
    "--val-input",
    "val_inputs",
    multiple=True,
    metavar="PATH",
    help="The validation split is all of this corpus (file, directory or glob; repeatable), the training split all of --input.",
)
@click.option(
    "--shard-tokens",
    type=click.IntRange(1, MAX_TOKENS),
    default=DEFAULT_SHARD_TOKENS,
    show_default=True,
    metavar="N",
    help="Tokens per shard at most.",
)
@threads_option("Encoding processes (one thread each).")
@click.option(
    "--text-field",
    default="text",
    show_default=True,
    help="The text field of .jsonl records / column of .parquet files.",
)
@click.option(
    "--separator", default=DEFAULT_SEPARATOR, show_default=True, help="What separates documents in .txt files."
)
@click.option("--eot-token", default=EOT, show_default=True, help="The special token written after every document.")
@click.option("--no-eot", is_flag=True, help="Write no token between documents.")
@click.option(
    "--chat",
    is_flag=True,
    help=f'The inputs are conversations, a .jsonl line each ({{"messages": [{{"role": ..., "content": ...}}, ...]}}), rendered with the tokenizer\'s chat template ({TEMPLATE_FILE} beside it, else gptkit\'s own); the shards carry the mask of the assistant\'s tokens, which training counts alone.',
)
@overwrite_option("a dataset of this tokenizer")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
@click.pass_context
def encode(
    ctx: click.Context,
    inputs: tuple[str, ...],
    more_inputs: tuple[str, ...],
    out: str,
    text_field: str,
    separator: str,
    eot_token: str,
    no_eot: bool,
    chat: bool,
    **flags: Any,
) -> None:
    """Encode documents (or with --chat, conversations) into train/validation token shards, in
    parallel, in bounded memory."""
    inputs += more_inputs
    if not inputs:
        raise InputError("--input: give at least one corpus file, directory or glob")
    encoded = encode_dataset(
        inputs,
        out,
        text_field=_given(ctx, "text_field", text_field),
        separator=_given(ctx, "separator", separator),
        eot_token=None if no_eot else eot_token,
        chat=chat,
        **flags,  # tokenizer, val_fraction, val_tokens, val_inputs, shard_tokens, threads, overwrite, quiet
    )
    _summary(out, encoded, chat)


def _given(ctx: click.Context, name: str, value: str) -> str | None:
    """A flag's value where the user gave it, None where its default stands: --chat refuses
    --text-field and --separator given, even at their defaults."""
    return None if ctx.get_parameter_source(name) is ParameterSource.DEFAULT else value


def _summary(out: str, encoded: Encoded, chat: bool) -> None:
    """What was written: the shards, their size and speed, each split, and the mask or split rule
    where it needs saying."""
    manifest, seconds = encoded.manifest, encoded.seconds
    totals = manifest["totals"]
    total_bytes = sum(source["bytes"] for source in manifest["sources"] + manifest.get("val_sources", []))
    click.echo(
        f"wrote {out}: {counted(len(manifest['shards']), 'shard')}, {manifest['dtype']}, {total_bytes / 1e6:,.1f} MB "
        f"in {seconds:.1f} s ({total_bytes / 1e6 / seconds:,.1f} MB/s)"
    )
    for name in ("train", "val"):
        click.echo(
            f"  {name}: {counted(totals[name]['documents'], 'conversation' if chat else 'document')}, "
            f"{counted(totals[name]['tokens'], 'token')}"
        )
    if chat:
        template = manifest["chat"]["template"]
        click.echo(
            f"  mask: the assistant's tokens, by {'gptkit' + chr(39) + 's chat template' if template == 'gptkit' else template}"
            f" (a reply ends with {', '.join(manifest['chat']['stops']) or 'nothing'})"
        )
    if manifest["split"]["rule"] in ("tail", "given"):
        click.echo(f"  split: {manifest['split']['text']}")


@cli.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--tokenizer",
    "-t",
    "tokenizer_path",
    metavar="PATH",
    help="Decode with this tokenizer.json  [default: the one in the shards' directory]",
)
def inspect(path: Path, tokenizer_path: str | None) -> None:
    """Header fields and counts of a shard, or of every shard of a directory, and its first tokens decoded."""
    if path.is_dir():
        data = ShardDir(path)
        if manifest := data.manifest:
            click.echo(
                f"{data.manifest_path}: {manifest['name']}, {manifest['dtype']}, tokenizer {data.fingerprint} "
                f"(vocab {data.vocab_size:,}), eot {manifest['eot_token']!r} = {manifest['eot_id']}"
            )
            click.echo(f"split: {manifest['split']['text']}")
            for name, t in manifest["totals"].items():
                click.echo(f"{name}: {counted(t['documents'], 'document')}, {counted(t['tokens'], 'token')}")
        paths = data.shard_paths("val") + data.shard_paths("train")
        paths.sort(key=lambda p: p.name[-10:])
        if not paths:
            raise InputError(f"{path}: no shards (*_train*.bin, *_val*.bin)")
    else:
        paths = [path]
    for shard in paths:
        header = read_header(shard)
        line = f"{shard.name}: {header.dtype.name} (magic {header.magic}, version {header.version}), {header.num_tokens:,} tokens"
        if header.extended:
            line += (
                f", {header.num_docs:,} documents, vocab {header.vocab_size:,}, eot {header.eot_id}, "
                f"crc32 {header.checksum:08x}, tokenizer {header.fingerprint}{', mask' if header.has_mask else ''}"
            )
        else:
            line += " (plain llm.c header: no vocabulary, checksum or fingerprint)"
        click.echo(line)
    _show_first_tokens(paths[0], tokenizer_path)


def _show_first_tokens(path: Path, tokenizer_path: StrPath | None) -> None:
    shard = open_shard(path)
    ids = shard.tokens[:SHOWN_TOKENS].tolist()
    click.echo(f"first {len(ids)} tokens of {path.name}: {' '.join(map(str, ids))}")
    tokenizer_path = tokenizer_path or ShardDir(path.parent).tokenizer
    if not looked_up(tokenizer_path, "tokenizer").is_file():
        click.echo(f"(no {TOKENIZER_FILE} beside the shards: pass --tokenizer to decode)")
        return
    tokenizer = Tokenizer.from_file(tokenizer_path)
    if shard.header.extended and shard.header.fingerprint != tokenizer.fingerprint:
        click.echo(
            f"(not decoded: {tokenizer_path} is tokenizer {tokenizer.fingerprint}, the shard's is {shard.header.fingerprint})"
        )
        return
    click.echo(f"decoded: {tokenizer.decode(ids)!r}")


@cli.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
def verify(path: Path) -> None:
    """Read every token of a shard directory (or one shard): header, size, checksum, ids below the
    vocabulary size; every header field against manifest.json (counts, CRC-32, end-of-text id,
    tokenizer), its totals, splits and tokenizer against tokenizer.json. Exits 1 on any problem.
    Shards the manifest does not list are not part of the dataset: they are named, not verified."""
    data = ShardDir(path) if path.is_dir() else None
    # The directory where it has a manifest; None: one shard, or a directory of plain llm.c shards.
    listed = data if data is not None and data.manifest else None
    paths = (
        sorted({*data.shard_paths("val"), *data.shard_paths("train")}, key=lambda p: p.name[-10:]) if data else [path]
    )
    if not paths:
        raise InputError(f"{path}: no shards to verify")
    for p in listed.unlisted() if listed else []:
        click.echo(
            f"note: {p}: not listed in {MANIFEST}, so not part of the dataset (left by an interrupted run? "
            "the next pretokenize run into the directory removes it)",
            err=True,
        )
    problems = _tokenizer_problems(listed) + listed.listing_problems() if listed else []
    headers = {}
    for shard_path in paths:
        try:
            header = verify_shard(shard_path, listed.vocab_size if listed else None).header
        except ShardError as e:
            problems.append(str(e))
            continue
        disagreements = listed.header_problems(shard_path, header) if listed else []
        problems += disagreements
        headers[shard_path.name] = header
        if not disagreements:
            checked = "checksum and ids" if header.extended else "size only (plain llm.c shard)"
            click.echo(f"ok {shard_path.name}: {header.num_tokens:,} tokens, {checked}")
    if listed:
        problems += listed.totals_problems(headers)
    for problem in problems:
        click.echo(f"FAILED {problem}", err=True)
    if problems:
        raise click.ClickException(f"{len(problems)} problem(s) in {path}")
    click.echo(f"{path}: {counted(len(paths), 'shard')} verified")


def _tokenizer_problems(data: ShardDir) -> list[str]:
    """tokenizer.json beside the shards must be the manifest's tokenizer: training builds its model from it."""
    path = data.tokenizer
    if not path.is_file():
        return [f"{path}: missing (the manifest's tokenizer is {data.fingerprint})"]
    try:
        fingerprint = Tokenizer.from_file(path).fingerprint
    except InputError as e:
        return [str(e)]
    if fingerprint != data.fingerprint:
        return [f"{path}: tokenizer {fingerprint}, {MANIFEST} says {data.fingerprint}"]
    return []


@cli.command()
@click.argument("dataset", metavar="DATASET")
@click.option(
    "--out",
    "out_dir",
    metavar="DIR",
    help="Where the training files go; official validation files go to DIR-val.  [default: data/DATASET]",
)
@overwrite_option("a file this downloaded")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def download(dataset: str, out_dir: str | None, overwrite: bool, quiet: bool) -> None:
    """Download a public corpus (tinystories, fineweb-edu: a 10BT-sample parquet file), resumable,
    checked against the SHA-256 the server publishes. Encode it with `--input DIR`, and
    `--val-input DIR-val` where the dataset has an official validation file (tinystories)."""
    from .download import download_dataset

    for path in download_dataset(dataset, out_dir or f"data/{dataset}", quiet, overwrite):
        click.echo(f"{path}: {path.stat().st_size / 1e6:,.1f} MB")


def main() -> None:
    cli(prog_name="gptkit pretokenize")
