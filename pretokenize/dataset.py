"""`encode_dataset`, what `gptkit pretokenize` does: its arguments are the command's flags. It
checks them, reads the tokenizer, takes the output directory's lock, and encodes documents
(encode.py's encode_corpus) or conversations (chat.py's encode_chat) into it. Its errors are
SettingErrors naming its arguments (`val_tokens`), which the command shows as flags (`--val-tokens`).

    from gptkit.pretokenize import encode_dataset

    encoded = encode_dataset(["data/stories"], "out/stories", tokenizer="out/tokenizer.json", val_tokens=100_000)
    print(encoded.manifest["totals"]["val"]["tokens"], encoded.seconds)
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gptkit.shared.corpus import DEFAULT_SEPARATOR, Corpus, expand_inputs
from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import Input, StrPath, check_apart, check_output, looked_up
from gptkit.shared.lock import output_lock
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.text import EOT
from gptkit.tokenizer import Tokenizer

from .chat import encode_chat
from .encode import DEFAULT_SHARD_TOKENS, encode_corpus
from .split import Split

DEFAULT_VAL_FRACTION = 0.01


@dataclass(frozen=True)
class Encoded:
    """What encode_dataset wrote: the dataset's manifest (manifest.json), and the seconds it took
    from taking the directory's lock."""

    manifest: dict[str, Any]
    seconds: float


def encode_dataset(
    inputs: Sequence[StrPath],
    out: StrPath,
    *,
    tokenizer: StrPath = "tokenizer.json",
    val_fraction: float | None = None,
    val_tokens: int | None = None,
    val_inputs: Sequence[StrPath] = (),
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    threads: int = 1,
    text_field: str | None = None,
    separator: str | None = None,
    eot_token: str | None = EOT,
    chat: bool = False,
    overwrite: bool = False,
    quiet: bool = False,
) -> Encoded:
    """Encode the documents of `inputs` (files, directories, globs) into train and validation
    shards in the directory `out`, with a copy of the `tokenizer` file beside them.

    The validation split: `val_fraction` of the documents (default 0.01), or the leading ones
    up to `val_tokens` tokens, or all of `val_inputs` (then all of `inputs` is training), one
    of the three; split.py and encode.py say what happens with too few documents. `shard_tokens`:
    tokens a shard at most; `threads`: encoding processes; `text_field`: of .jsonl records and
    .parquet files (None: "text"); `separator`: between documents in text files (None:
    DEFAULT_SEPARATOR; "": none); `eot_token`: the special token after each document (None:
    none). With `chat`, the inputs are conversations (chat.py), and a `text_field` or `separator`
    is refused. A dataset of another tokenizer in `out` is replaced only with `overwrite`;
    `quiet`: no progress display."""
    if not inputs:
        raise SettingError("input", "is needed: one or more corpus files, directories or globs")
    split = _split(val_fraction, val_tokens, val_inputs)
    if not looked_up(tokenizer, "tokenizer").is_file():
        raise SettingError("tokenizer", f"{tokenizer}: no such file (train one with `tokenizer train`)")
    if chat:
        for name, value in (("text_field", text_field), ("separator", separator)):
            if value is not None:  # given at all, even as the default: one line naming the flag, as the command's
                raise InputError(
                    f'--{name.replace("_", "-")}: not for --chat (a conversation is a .jsonl line with "messages")'
                )
    encoder = Tokenizer.from_file(tokenizer)
    corpus, val_corpus = None, None
    if not chat:
        between = (DEFAULT_SEPARATOR if separator is None else separator) or None
        field = "text" if text_field is None else text_field
        corpus = Corpus(inputs, separator=between, text_field=field)
        val_corpus = Corpus(val_inputs, separator=between, text_field=field) if val_inputs else None
    # what it reads, never written over or into: the tokenizer (a chat template lies beside it), the
    # inputs, and the files their globs and directories name
    found = (
        [*corpus.paths, *(val_corpus.paths if val_corpus else [])]
        if corpus is not None
        else [*expand_inputs(inputs), *expand_inputs(val_inputs)]
    )
    check_apart(
        out,
        [
            Input.given("tokenizer", tokenizer),
            *(Input.given("input", path) for path in [*map(Path, inputs), *found]),
            *(Input.given("val_input", path) for path in val_inputs),
        ],
    )
    start = time.perf_counter()
    with output_lock(out, "gptkit pretokenize"):
        # The dataset's copy of the tokenizer replaces a tokenizer.json that a dataset's manifest
        # governs (encode_corpus checks its shards) or one like it; not a user's other tokenizer.
        data = ShardDir(out)
        check_output(
            data.tokenizer,
            lambda path: data.manifest_path.exists() or _fingerprint(path) == encoder.fingerprint,
            f"tokenizer {encoder.fingerprint}",
            overwrite,
        )
        if corpus is None:
            manifest = encode_chat(
                inputs,
                encoder,
                tokenizer,
                out,
                split=split,
                val_inputs=val_inputs,
                shard_tokens=shard_tokens,
                workers=threads,
                eot_token=eot_token,
                overwrite=overwrite,
                quiet=quiet,
            )
        else:
            manifest = encode_corpus(
                corpus,
                encoder,
                out,
                split=split,
                val_corpus=val_corpus,
                shard_tokens=shard_tokens,
                workers=threads,
                eot_token=eot_token,
                tokenizer_source=tokenizer,
                overwrite=overwrite,
                quiet=quiet,
            )
    return Encoded(manifest, time.perf_counter() - start)


def _split(val_fraction: float | None, val_tokens: int | None, val_inputs: Sequence[StrPath]) -> Split:
    """The rule of the validation split, refusing two rules at once; with `val_inputs` the
    default rule, which encoding leaves unused."""
    if val_inputs and (val_fraction is not None or val_tokens is not None):
        given = "val_fraction" if val_fraction is not None else "val_tokens"
        raise SettingError(
            "val_input",
            f"and {named(given)}: give one or the other (all of {named('val_input')} is the validation split)",
        )
    if val_fraction is not None and val_tokens is not None:
        raise SettingError("val_fraction", f"and {named('val_tokens')}: give one or the other")
    if val_fraction is None and val_tokens is None:
        val_fraction = DEFAULT_VAL_FRACTION
    return Split(val_fraction, val_tokens)  # checks them


def _fingerprint(path: Path) -> str | None:
    """The fingerprint of the tokenizer.json at `path`; None if it is none."""
    try:
        return Tokenizer.from_file(path).fingerprint
    except InputError:
        return None
