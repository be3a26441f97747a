"""Data directories: a corpus's token shards, their manifest and their tokenizer, which pretokenize
writes and train reads. This module is the one place that knows the layout (DIR/NAME_val_000000.bin,
DIR/NAME_train_000001.bin, ..., DIR/manifest.json, DIR/tokenizer.json), specified with every
manifest field in docs/formats.md#data-directories.

The manifest alone says which shards are the dataset: a run writes its shards under numbers no file
of the directory has and replaces the manifest last (shard_set.py, `ShardSet.commit`), so readers go through it
(`ShardDir`). A directory of plain llm.c shards has no manifest: its shards are listed by name.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from gptkit.shared.errors import SettingError
from gptkit.shared.files import StrPath
from gptkit.shared.jsonfile import is_count, read_json
from gptkit.shared.shards import ShardError, ShardHeader, read_header
from gptkit.shared.text import EOT

FORMAT, VERSION = "gptkit-shards", 1
MANIFEST, TOKENIZER_FILE = "manifest.json", "tokenizer.json"
# Chat data's template and the token names it renders with, beside its tokenizer (gptkit.tokenizer.chat reads them).
CHAT_FILES = ("chat_template.jinja", "tokenizer_config.json")
SHARD_NAME = re.compile(r"_(train|val)_(\d{6})\.bin$")  # ours
# llm.c's: tiny_shakespeare_val.bin, TinyStories_train.bin, fineweb_train_000001.bin, ...
LLMC_SHARD_NAME = re.compile(r"_(train|val)(?:_\d+)?\.bin$")


class Tokenizer(Protocol):
    """What a data directory reads and writes of its tokenizer (gptkit.tokenizer.Tokenizer, a stage
    above this package)."""

    @property
    def vocab_size(self) -> int: ...

    @property
    def fingerprint(self) -> str: ...

    special_tokens: dict[str, int]

    def save(self, path: StrPath) -> None: ...


class ShardDir:
    """A data directory as its readers see it. The manifest is read and checked once, when first
    used (None: a directory of plain llm.c shards); the tokenizer is a path, which the tokenizer
    package loads (gptkit.tokenizer.Tokenizer.from_file)."""

    def __init__(self, path: StrPath) -> None:
        self.path = Path(path)
        self.manifest_path = self.path / MANIFEST
        self.tokenizer = self.path / TOKENIZER_FILE
        self.chat_files = [self.path / name for name in CHAT_FILES]

    @functools.cached_property
    def manifest(self) -> dict | None:
        """Every field its readers use is checked first, so that a damaged or edited manifest is
        one line naming it; so are its format and version, so that a newer one is refused as such."""
        path = self.manifest_path
        try:
            manifest = read_json(path)
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as e:
            raise ShardError(f"{path}: not a readable manifest ({e})") from None
        problem = _mismatch(manifest, MANIFEST_ID, "")
        if problem is None and manifest["version"] > VERSION:
            raise ShardError(
                f"{path}: version {manifest['version']} of the manifest, newer than this gptkit reads "
                f"({VERSION}): upgrade gptkit, or encode the corpus again with this one"
            )
        problem = problem or _mismatch(manifest, MANIFEST_FIELDS, "")
        if problem is None and manifest.get("mask", False) not in (True, False):  # optional: chat data's
            problem = f"mask is {_shown(manifest['mask'])}, expected true or false"
        if problem:
            raise ShardError(f"{path}: {problem}: not a manifest as pretokenize writes it (damaged or edited?)")
        return manifest

    @property
    def fingerprint(self) -> str | None:
        """The fingerprint of the tokenizer the manifest names (None: no manifest)."""
        return self.manifest["tokenizer"]["fingerprint"] if self.manifest else None

    @property
    def vocab_size(self) -> int | None:
        return self.manifest["tokenizer"]["vocab_size"] if self.manifest else None

    def eot_id(self, tokenizer: Tokenizer) -> int | None:
        """The end-of-text id that ends every document, as the manifest records it (None:
        pretokenize --no-eot); plain llm.c shards, which have no manifest, end documents with
        the tokenizer's <|endoftext|> (GPT-2's 50256)."""
        return self.manifest["eot_id"] if self.manifest is not None else tokenizer.special_tokens.get(EOT)

    @property
    def has_mask(self) -> bool:
        """Whether the shards carry a mask of the tokens the loss counts (chat data: the
        assistant's); plain llm.c shards have none."""
        return bool(self.manifest and self.manifest.get("mask"))

    @property
    def unigram_entropy(self) -> float | None:
        """The unigram entropy of the training tokens (the loss of a model that knows only token
        frequencies), as pretokenize records it; None without it."""
        return self.manifest["totals"]["train"].get("unigram_entropy") if self.manifest else None

    def check_exists(self) -> None:
        """A reader's first check: a data directory that is not there names the step that writes it."""
        if not self.path.exists():
            raise SettingError("data", f"{self.path}: no such directory; `gptkit pretokenize` (make encode) writes one")

    def shard_paths(self, split: str) -> list[Path]:
        """The shards of one split ("train" or "val"), in order: the manifest's, or without one
        (plain llm.c shards) the files named so, in natural order (shard 2 before shard 10). Our
        shards without a manifest are an unfinished run."""
        self.check_exists()
        if self.manifest is not None:
            return [self.path / s["file"] for s in self.manifest["shards"] if s["split"] == split]
        paths = [p for p in self.path.glob("*.bin") if (m := LLMC_SHARD_NAME.search(p.name)) and m[1] == split]
        paths.sort(key=lambda p: [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", p.name)])
        if any(read_header(p).extended for p in paths):
            raise ShardError(f"{self.path}: shards but no {MANIFEST}: an unfinished pretokenize run? Run it again")
        return paths

    def tokens(self, split: str) -> int:
        """The tokens of a split: the manifest's count, else the shards' own."""
        if self.manifest is not None:
            return self.manifest["totals"][split]["tokens"]
        return sum(read_header(path).num_tokens for path in self.shard_paths(split))

    def identity(self) -> dict:
        """What makes this directory the data a run trained on, wherever it lies: each split's shards
        in order, as [file, tokens, CRC-32] from the manifest (plain llm.c shards, which have none, by
        their token counts alone). Its tokenizer is the checkpoint's own check. A checkpoint records it
        and a resume compares it (identity_difference): the file names, which a copy keeps and another
        encoding of the same text may not, are there for the messages."""
        if self.manifest is not None:
            return {
                split: [[s["file"], s["tokens"], s["crc32"]] for s in self.manifest["shards"] if s["split"] == split]
                for split in ("train", "val")
            }
        return {
            split: [[p.name, read_header(p).num_tokens, None] for p in self.shard_paths(split)]
            for split in ("train", "val")
        }

    def unlisted(self) -> list[Path]:
        """Shards of ours that the manifest does not list: no part of the dataset (an interrupted
        run left them; the next run into the directory removes them)."""
        if self.manifest is None:
            return []
        return sorted(p for p in self.path.glob("*.bin") if SHARD_NAME.search(p.name) and p.name not in self._entries)

    @property
    def _listed(self) -> dict:
        """The manifest, where the caller has made sure there is one."""
        assert self.manifest is not None, f"{self.path}: no manifest"
        return self.manifest

    @functools.cached_property
    def _entries(self) -> dict[str, dict]:
        return {entry["file"]: entry for entry in self._listed["shards"]}

    def listing_problems(self) -> list[str]:
        """What the manifest's list of shards says against itself: a shard listed twice (read twice
        per pass) or under the split its name does not say (training tokens in the validation set)."""
        problems, seen = [], set()
        for entry in self._listed["shards"]:
            name, split = entry["file"], entry["split"]
            if name in seen:
                problems.append(f"{self.path / name}: listed twice in {MANIFEST}")
            seen.add(name)
            named = _split_of(name)
            if split != named:
                problems.append(
                    f"{self.path / name}: a {named} shard by its name, listed under {split!r} in {MANIFEST}"
                )
        return problems

    def header_problems(self, path: StrPath, header: ShardHeader) -> list[str]:
        """Where the header of a listed shard and the manifest disagree, one line per field with
        both values: a reader relies on each (the token count, the end-of-text id, the tokenizer, ...)."""
        if not header.extended:
            return [
                f"{path}: a plain llm.c header (no vocabulary, checksum or fingerprint), listed in {MANIFEST} as one of ours"
            ]
        entry, manifest = self._entries[Path(path).name], self._listed
        fields = [
            ("token count", header.num_tokens, entry["tokens"]),
            ("document count", header.num_docs, entry["documents"]),
            ("CRC-32", f"{header.checksum:08x}", entry["crc32"]),
            ("end-of-text id", header.eot_id, manifest["eot_id"]),
            ("tokenizer fingerprint", header.fingerprint, self.fingerprint),
            ("vocabulary size", header.vocab_size, self.vocab_size),
            ("token type", header.dtype.name, manifest["dtype"]),
            ("mask flag", int(header.has_mask), int(self.has_mask)),
        ]
        return [
            f"{path}: {field} {_fact(ours)} in the header, {_fact(theirs)} in {MANIFEST}"
            for field, ours, theirs in fields
            if ours != theirs
        ]

    def totals_problems(self, headers: Mapping[str, ShardHeader]) -> list[str]:
        """The manifest's totals against the sums of the headers (file name: header) of each
        split's shards, by their names (a shard listed under the other split is a problem of its
        own). A split with a shard missing from `headers` is left out: it could not be read, and
        that is reported already."""
        problems = []
        for split, totals in self._listed["totals"].items():
            names = {s["file"] for s in self._listed["shards"] if _split_of(s["file"]) == split}
            if not all(name in headers and headers[name].extended for name in names):
                continue
            found = {
                "tokens": sum(headers[n].num_tokens for n in names),
                "documents": sum(headers[n].num_docs or 0 for n in names),  # extended headers: never None
            }
            problems += [
                f"{self.manifest_path}: totals.{split}.{field} is {totals[field]:,}, the headers of its {split} "
                f"shards add up to {total:,}"
                for field, total in found.items()
                if totals[field] != total
            ]
        return problems


# What the readers of a manifest use (pretokenize verify and inspect, train): a dict is an object
# with these keys, a list a list of such items, a pair (test, description) a value. MANIFEST_ID
# first: a manifest of a newer version may have other fields.
_Spec = dict[str, "_Spec"] | list["_Spec"] | tuple[Callable[[Any], bool], str]
MANIFEST_ID: dict[str, _Spec] = {
    "format": (lambda v: v == FORMAT, json.dumps(FORMAT)),
    "version": (lambda v: is_count(v) and v > 0, "a positive integer"),
}
_COUNT = (is_count, "a count (an integer, 0 or more)")
_TEXT = (lambda v: isinstance(v, str), "a string")
_TOTALS: dict[str, _Spec] = {"documents": _COUNT, "tokens": _COUNT}
MANIFEST_FIELDS: dict[str, _Spec] = {
    "name": _TEXT,
    "tokenizer": {
        "fingerprint": (
            lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{16}", v) is not None,
            "16 hexadecimal digits",
        ),
        "vocab_size": (lambda v: is_count(v) and v > 0, "a positive integer"),
    },
    "eot_token": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "eot_id": (lambda v: v is None or is_count(v), "a token id or null"),
    "dtype": (lambda v: v in ("uint16", "uint32"), '"uint16" or "uint32"'),
    "split": {"text": _TEXT},
    "totals": {"train": _TOTALS, "val": _TOTALS},
    "shards": [
        {
            # A bare name of ours: a reader opens it in the manifest's directory, never elsewhere.
            "file": (
                lambda v: isinstance(v, str) and "/" not in v and SHARD_NAME.search(v) is not None,
                "a shard file name, NAME_train_NNNNNN.bin or NAME_val_NNNNNN.bin",
            ),
            "split": (lambda v: v in ("train", "val"), '"train" or "val"'),
            "tokens": _COUNT,
            "documents": _COUNT,
            "crc32": (
                lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{8}", v) is not None,
                "8 hexadecimal digits",
            ),
        }
    ],
}


def _split_of(name: str) -> str:
    """The split a shard file of the manifest is by its name (a name MANIFEST_FIELDS checked)."""
    match = SHARD_NAME.search(name)
    assert match is not None, name
    return match[1]


def identity_difference(then: dict, now: dict) -> str | None:
    """The first way the data `now` differs from the run's, `then` (ShardDir.identity), or None."""
    for split in ("train", "val"):
        if len(now[split]) != len(then[split]):
            return f"{split} shards: {len(now[split])}, the run's {len(then[split])}"
        for (_, tokens_then, crc_then), (file, tokens, crc) in zip(then[split], now[split]):
            if tokens != tokens_then:
                return f"{split} shard {file}: {tokens:,} tokens, the run's {tokens_then:,}"
            if crc != crc_then:
                return f"{split} shard {file}: CRC-32 {crc}, the run's {crc_then}"
    return None


def _mismatch(value: Any, spec: _Spec, where: str) -> str | None:
    """What in `value` (found at `where`) does not fit `spec` (see MANIFEST_FIELDS), or None."""
    if isinstance(spec, dict):
        if not isinstance(value, dict):
            return f"{where or 'the file'} is {_shown(value)}, expected an object"
        for key, field in spec.items():
            at = f"{where}.{key}" if where else key
            if key not in value:
                return f"{at} is missing"
            if problem := _mismatch(value[key], field, at):
                return problem
        return None
    if isinstance(spec, list):
        if not isinstance(value, list):
            return f"{where} is {_shown(value)}, expected a list"
        return next(filter(None, (_mismatch(item, spec[0], f"{where}[{i}]") for i, item in enumerate(value))), None)
    test, description = spec
    return None if test(value) else f"{where} is {_shown(value)}, expected {description}"


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _fact(value: object) -> object:
    return "none" if value is None else f"{value:,}" if type(value) is int else value


# -- writing a data directory -------------------------------------------------------------------
