"""What encoding corpora (encode.py) and conversations (chat.py) share: the output directory
checked, the shards of each encoding, the manifest's common part (the split rule and the
sources), and the commit, or on any failure the shards discarded.

    output = Output(out_dir, tokenizer, eot_token=..., tokenizer_source=..., shard_tokens=..., overwrite=...)
    manifest = output.write(encode)  # encode() writes to output.shards(), returns (counts, made)
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from gptkit.shared.errors import SettingError
from gptkit.shared.files import StrPath, cause
from gptkit.shared.shard_set import ShardSet, check_shard_directory
from gptkit.tokenizer import Tokenizer

from .split import Split, TailSplit

# What encode() gives back: each split's [documents, tokens], and what the manifest records of how
# the shards were made (how_made's, and what is particular to the kind of data)
Encoding = tuple[Mapping[str, Sequence[int]], dict[str, Any]]

GIVEN = {"rule": "given", "text": "validation is all of --val-input, training all of --input"}


class Output:
    """A dataset to write into `out_dir`, refused up front if the directory holds another
    tokenizer's shards (unless `overwrite`) or the tokenizer has no `eot_token`. `mask`,
    `chat_files`: as ShardSet's."""

    def __init__(
        self,
        out_dir: StrPath,
        tokenizer: Tokenizer,
        *,
        eot_token: str | None,
        tokenizer_source: StrPath | None,
        shard_tokens: int,
        overwrite: bool,
        mask: bool = False,
        chat_files: Mapping[str, str] | None = None,
    ) -> None:
        self.out_dir = Path(out_dir)
        self.eot_id = eot_id_of(tokenizer, eot_token, tokenizer_source)
        check_shard_directory(self.out_dir, tokenizer.fingerprint, overwrite)
        self.eot_token, self.tokenizer_source = eot_token, tokenizer_source
        self._new_shards = functools.partial(
            ShardSet, self.out_dir, tokenizer, self.eot_id, shard_tokens, mask=mask, chat_files=chat_files
        )
        self._latest: ShardSet | None = None

    def shards(self) -> ShardSet:
        """The shards of an encoding; an encoding again (another split) discards the earlier one's."""
        earlier, self._latest = self._latest, None
        if earlier is not None:
            earlier.discard()
        self._latest = self._new_shards()
        return self._latest

    def write(self, encode: Callable[[], Encoding]) -> dict[str, Any]:
        """Run `encode`, then make its shards the directory's dataset; returns the manifest. On
        any failure the shards are discarded (the old dataset stays), and one the disk gives
        (full, read-only) is a SettingError of `out`."""
        start = time.perf_counter()
        try:
            counts, made = encode()
            assert self._latest is not None, "encode() wrote to no shards"
            manifest = self._latest.manifest(
                counts, made, eot_token=self.eot_token, tokenizer_source=self.tokenizer_source
            )
            manifest["seconds"] = round(time.perf_counter() - start, 3)
            self._latest.commit(manifest)
        except BaseException as e:
            if self._latest is not None:
                self._latest.discard()
            if not isinstance(e, OSError):
                raise
            detail = f"{e.filename}: {cause(e)}" if e.filename else cause(e)
            raise SettingError("out", f"{self.out_dir}: cannot write ({detail})") from None
        return manifest


def eot_id_of(tokenizer: Tokenizer, eot_token: str | None, tokenizer_source: StrPath | None = None) -> int | None:
    """The id of `eot_token`, a special token of the tokenizer (None: no end-of-text token)."""
    if eot_token is None:
        return None
    eot_id = tokenizer.special_tokens.get(eot_token)
    if eot_id is None:
        raise SettingError(
            "eot_token",
            f"{eot_token!r}: not a special token of {tokenizer_source or 'the tokenizer'} "
            f"(it has: {', '.join(tokenizer.special_tokens) or 'none'}); name one it has, "
            "or none (--no-eot)",
        )
    return eot_id


def how_made(split: Split | TailSplit | None, paths: Sequence[Path], val_paths: Sequence[Path]) -> dict[str, Any]:
    """What every manifest records of how its shards were made: the split rule (None: all of
    `val_paths` is the validation split) and the sources, with their sizes."""
    return {
        "split": GIVEN if split is None else split.describe(),
        "sources": _sources(paths),
        **({"val_sources": _sources(val_paths)} if val_paths else {}),
    }


def first_of(paths: Sequence[Path]) -> str:
    """Inputs as a message names them: the first, and ` ...` if there are more."""
    return f"{paths[0]}{' ...' if len(paths) > 1 else ''}"


def _sources(paths: Sequence[Path]) -> list[dict[str, Any]]:
    return [{"path": str(p), "bytes": p.stat().st_size} for p in paths]
