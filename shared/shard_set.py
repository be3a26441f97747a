"""Writing a data directory (shard_dir.py reads one): the shards of a run, under temporary names,
made the directory's dataset by replacing its manifest last (ShardSet.commit)."""

from __future__ import annotations

import json
from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np

from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import StrPath, atomic_write, remove_stale_temporaries, sync_directory
from gptkit.shared.jsonfile import is_count
from gptkit.shared.shard_dir import (
    CHAT_FILES,
    FORMAT,
    MANIFEST,
    SHARD_NAME,
    TOKENIZER_FILE,
    VERSION,
    ShardDir,
    Tokenizer,
)
from gptkit.shared.shards import HEADER_BYTES, MAX_TOKENS, ShardError, ShardHeader, ShardWriter, dtype_for


def check_shard_directory(out_dir: Path, fingerprint: str, overwrite: bool = False) -> None:
    """Refuse a directory that holds shards of another tokenizer (or of none we can tell)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SettingError("out", f"{out_dir}: exists and is not a directory")
    if overwrite or not out_dir.exists():
        return
    try:
        manifest = ShardDir(out_dir).manifest
    except ShardError as e:
        raise SettingError("out", f"{str(e)}; {named('overwrite')} replaces the directory's dataset") from None
    found = {manifest["tokenizer"]["fingerprint"]} if manifest else set()
    for path in out_dir.glob("*.bin"):
        if SHARD_NAME.search(path.name):
            with open(path, "rb") as f:
                raw = f.read(HEADER_BYTES)
            try:
                found.add(ShardHeader.from_bytes(raw, path).fingerprint)
            except InputError:
                found.add(None)
    others = found - {fingerprint}
    if others:
        theirs = ", ".join(sorted(fp or "unknown" for fp in others))
        raise SettingError(
            "out",
            f"{out_dir}: holds shards of another tokenizer ({theirs}; this one is {fingerprint}); "
            f"choose another directory or pass {named('overwrite')}",
        )


class ShardSet:
    """The shards of one output directory, numbered in the order they are opened, written under
    temporary names and made the directory's dataset by `commit` (pretokenize writes its
    datasets with it, bench/encode.py its reference)."""

    def __init__(
        self,
        out_dir: Path,
        tokenizer: Tokenizer,
        eot_id: int | None,
        shard_tokens: int,
        *,
        mask: bool = False,
        chat_files: Mapping[str, str] | None = None,
    ) -> None:
        """`mask`: every write brings the tokens' mask (chat data); `chat_files`: {name: text} of
        CHAT_FILES, the chat template the data was rendered with, written beside tokenizer.json."""
        if not (is_count(shard_tokens) and 1 <= shard_tokens <= MAX_TOKENS):
            raise SettingError("shard_tokens", f"{shard_tokens}: expected a whole number from 1 to {MAX_TOKENS:,}")
        self.out_dir, self.tokenizer, self.shard_tokens = out_dir, tokenizer, shard_tokens
        self.name = out_dir.resolve().name
        self.dtype = dtype_for(tokenizer.vocab_size)
        self.facts: dict[str, Any] = dict(
            vocab_size=tokenizer.vocab_size, eot_id=eot_id, fingerprint=tokenizer.fingerprint
        )
        self.mask, self.chat_files = mask, dict(chat_files or {})
        self.open_writers: dict[str, ShardWriter] = {}
        self.finished: list[tuple[str, ShardWriter, ShardHeader]] = []  # (split, writer, header)
        self.numbers: Iterator[int] | None = None  # the unused shard numbers, from `begin`
        self.committed = False
        self.created_dir = not out_dir.exists()
        self.unigrams = {split: np.zeros(tokenizer.vocab_size, np.int64) for split in ("val", "train")}  # token counts

    def begin(self) -> None:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.out_dir.glob(".*.tmp-*"):  # killed runs' (a live writer's stay: see remove_stale_temporaries)
            final = self.out_dir / tmp.name[1:].rsplit(".tmp-", 1)[0]
            if SHARD_NAME.search(final.name) or final.name in (MANIFEST, TOKENIZER_FILE, *CHAT_FILES):
                remove_stale_temporaries(final)
        # Numbers that no shard of the directory has, temporary or not: the new shards go in beside
        # the old dataset and replace none of its files.
        taken = {int(m[2]) for path in self.out_dir.iterdir() if (m := SHARD_NAME.search(path.name.split(".tmp-")[0]))}
        self.numbers = (n for n in count() if n not in taken)
        for split in ("val", "train"):  # validation first, as in llm.c
            self._open(split)

    def write(self, split: str, tokens: np.ndarray, doc_ends: Sequence[int], mask: np.ndarray | None = None) -> None:
        """Append tokens to the split, starting new shards as they fill; `doc_ends` are the
        offsets (sorted) in `tokens` just after each document that ends there; `mask`, one value
        per token, in a set with masks."""
        counted = tokens if mask is None else tokens[np.asarray(mask, bool)]  # chat data: the loss's tokens alone
        self.unigrams[split] += np.bincount(counted, minlength=len(self.unigrams[split]))
        done = 0
        while done < len(tokens):
            writer = self.open_writers.get(split) or self._open(split)
            stop = min(len(tokens), done + self.shard_tokens - writer.num_tokens)
            writer.write(
                tokens[done:stop],
                bisect_right(doc_ends, stop) - bisect_right(doc_ends, done),
                None if mask is None else mask[done:stop],
            )
            done = stop
            if writer.num_tokens == self.shard_tokens:
                self._finish(split)

    def _open(self, split: str) -> ShardWriter:
        assert self.numbers is not None  # set by begin, which opens the first writers
        path = self.out_dir / f"{self.name}_{split}_{next(self.numbers):06d}.bin"
        writer = self.open_writers[split] = ShardWriter(path, self.dtype, **self.facts, mask=self.mask)
        return writer

    def _finish(self, split: str) -> None:
        writer = self.open_writers.pop(split)
        self.finished.append((split, writer, writer.close()))

    def finish_all(self) -> None:
        for split in list(self.open_writers):
            self._finish(split)
        self.finished.sort(key=lambda f: f[1].path.name[-10:])  # by shard number

    def manifest(
        self,
        counts: Mapping[str, Sequence[int]],
        made: Mapping[str, Any],
        *,
        eot_token: str | None,
        tokenizer_source: StrPath | None,
    ) -> dict:
        """The manifest of the finished shards (see the module's docstring). `counts`: the
        [documents, tokens] of each split; `made`: how the shards were made (the split rule, the
        sources, ...), recorded as it is."""
        eot_id = self.facts["eot_id"]
        return {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "tokenizer": {
                "file": TOKENIZER_FILE,
                "source": str(tokenizer_source) if tokenizer_source else None,
                "fingerprint": self.tokenizer.fingerprint,
                "vocab_size": self.tokenizer.vocab_size,
            },
            "eot_token": eot_token if eot_id is not None else None,
            "eot_id": eot_id,
            "dtype": self.dtype.name,
            "shard_tokens": self.shard_tokens,
            **({"mask": True} if self.mask else {}),  # a plain dataset's manifest is as before
            **made,
            "totals": {
                name: {"documents": docs, "tokens": tokens, "unigram_entropy": _entropy(self.unigrams[name])}
                for name, (docs, tokens) in counts.items()
            },
            "shards": [
                {
                    "file": writer.path.name,
                    "split": name,
                    "tokens": header.num_tokens,
                    "documents": header.num_docs,
                    "crc32": f"{header.checksum:08x}",
                }
                for name, writer, header in self.finished
            ],
        }

    def commit(self, manifest: dict) -> None:
        """Make the new shards the directory's dataset; at every instant it is the old one or the new one.

        The shards go in first, under their new names: no manifest lists them yet, so no reader
        sees them. Then tokenizer.json, unchanged unless --overwrite brought another tokenizer (a
        kill right after that leaves the old shards beside it, which `verify` and `train` refuse:
        the fingerprints differ), and the chat files where there are some. Then the manifest, renamed
        over the old one: the commit point. Last, the shards it does not list (the old dataset's,
        killed runs') are removed, and old chat files the new dataset does not have."""
        for _, writer, _ in self.finished:
            writer.commit()
        self.tokenizer.save(self.out_dir / TOKENIZER_FILE)
        for name, text in self.chat_files.items():
            with atomic_write(self.out_dir / name, encoding="utf-8") as f:
                f.write(text)
        sync_directory(self.out_dir)  # the renames reach the disk before the manifest that relies on them
        with atomic_write(self.out_dir / MANIFEST) as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
        self.committed = True
        listed = {writer.path.name for _, writer, _ in self.finished}
        for path in self.out_dir.glob("*.bin"):
            if SHARD_NAME.search(path.name) and path.name not in listed:
                path.unlink()
        for name in set(CHAT_FILES) - set(self.chat_files):
            (self.out_dir / name).unlink(missing_ok=True)

    def discard(self) -> None:
        """Remove what this run wrote, unless its manifest is in: then the dataset is its own."""
        if self.committed:
            return
        for writer in [*self.open_writers.values(), *(w for _, w, _ in self.finished)]:
            writer.discard()
        if self.created_dir and self.out_dir.is_dir() and not any(self.out_dir.iterdir()):
            self.out_dir.rmdir()


def _entropy(counts: np.ndarray) -> float:
    """The entropy of the tokens' unigram distribution, in nats per token: the loss of a model
    that knows only token frequencies, the baseline a trained model's loss must beat."""
    p = counts[counts > 0] / counts.sum()
    return round(float(-(p * np.log(p)).sum()), 6)
