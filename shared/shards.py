"""Token shards: llm.c's `.bin` files, with our own facts in header slots its readers ignore.

A shard is a header of 256 little-endian int32 (1024 bytes), then the tokens:

    slot  field
    0     magic: 20240520 for uint16 tokens, 20240801 for uint32 tokens
    1     version: 1 for uint16, 7 for uint32
    2     number of tokens
    3     EXTENSION_MARKER, "gptk" in ASCII (absent from plain llm.c shards: all slots 3+ are 0)
    4     extension version (1)
    5     vocabulary size
    6     end-of-text id, or -1 for none
    7     number of documents ending in the shard
    8     CRC-32 of the token bytes (as an unsigned 32-bit pattern)
    9-10  tokenizer fingerprint (16 hex digits as 8 bytes)
    11+   0

llm.c and modded-nanogpt read slots 0-2 and check the file size, so they read our shards;
we read theirs (no extension: no vocabulary check, no checksum). A directory of shards is
`NAME_val_000000.bin`, `NAME_train_000001.bin`, ... plus `manifest.json`, which lists them.
The manifest alone says which shards are the dataset: a new run into the directory writes its
shards under numbers no file there has and replaces the manifest last, so readers go through it.
"""
from __future__ import annotations

import json
import re
import zlib
from bisect import bisect_right
from dataclasses import dataclass
from itertools import count
from pathlib import Path

import numpy as np

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import AtomicFile, atomic_write, remove_stale_temporaries, sync_directory
from gptkit.shared.jsonfile import read_json

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
FORMATS = {20240520: (1, np.dtype("<u2")), 20240801: (7, np.dtype("<u4"))}  # magic: (version, dtype)
MAGIC = {dtype: magic for magic, (_, dtype) in FORMATS.items()}
EXTENSION_MARKER = int.from_bytes(b"gptk", "little")
EXTENSION_VERSION = 1
MAX_TOKENS = 2**31 - 1  # the count is an int32
MANIFEST = "manifest.json"
SHARD_NAME = re.compile(r"_(train|val)_(\d{6})\.bin$")  # ours
# llm.c's: tiny_shakespeare_val.bin, TinyStories_train.bin, fineweb_train_000001.bin, ...
LLMC_SHARD_NAME = re.compile(r"_(train|val)(?:_\d+)?\.bin$")
VERIFY_STEP = 1 << 24  # tokens checked at a time: bounds the memory of verify_shard


class ShardError(InputError):
    """A shard that is not what its header or manifest says."""


def dtype_for(vocab_size: int) -> np.dtype:
    """uint16 whenever the ids fit, as llm.c does; uint32 otherwise."""
    return np.dtype("<u2") if vocab_size <= 1 << 16 else np.dtype("<u4")


@dataclass(frozen=True)
class ShardHeader:
    dtype: np.dtype
    num_tokens: int
    # Our extension; all None in a plain llm.c shard.
    vocab_size: int | None = None
    eot_id: int | None = None
    num_docs: int | None = None
    checksum: int | None = None
    fingerprint: str | None = None

    @property
    def extended(self) -> bool:
        return self.vocab_size is not None

    @property
    def magic(self) -> int:
        return MAGIC[self.dtype]

    @property
    def version(self) -> int:
        return FORMATS[self.magic][0]

    def to_bytes(self) -> bytes:
        ints = np.zeros(HEADER_INTS, "<i4")
        ints[:3] = self.magic, self.version, self.num_tokens
        if self.extended:
            ints[3:8] = EXTENSION_MARKER, EXTENSION_VERSION, self.vocab_size, -1 if self.eot_id is None else self.eot_id, self.num_docs
            ints[8:9].view("<u4")[0] = self.checksum
            ints[9:11] = np.frombuffer(bytes.fromhex(self.fingerprint), "<i4")
        return ints.tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes, path) -> ShardHeader:
        if len(raw) < HEADER_BYTES:
            raise ShardError(f"{path}: {len(raw)} bytes, too short for the {HEADER_BYTES}-byte shard header")
        ints = np.frombuffer(raw[:HEADER_BYTES], "<i4")
        magic, version, num_tokens = map(int, ints[:3])
        if magic not in FORMATS:
            raise ShardError(f"{path}: not a token shard (magic {magic}, expected 20240520 or 20240801)")
        if version != FORMATS[magic][0]:
            raise ShardError(f"{path}: magic {magic} with version {version}, expected version {FORMATS[magic][0]}")
        if num_tokens < 0:
            raise ShardError(f"{path}: negative token count {num_tokens} in the header")
        dtype = FORMATS[magic][1]
        if ints[3] != EXTENSION_MARKER:
            return cls(dtype, num_tokens)
        if ints[4] != EXTENSION_VERSION:
            raise ShardError(f"{path}: header extension version {ints[4]}, this reader knows version {EXTENSION_VERSION}")
        eot_id = int(ints[6])
        return cls(
            dtype,
            num_tokens,
            vocab_size=int(ints[5]),
            eot_id=None if eot_id < 0 else eot_id,
            num_docs=int(ints[7]),
            checksum=int(ints[8:9].view("<u4")[0]),
            fingerprint=ints[9:11].tobytes().hex(),
        )


@dataclass(frozen=True)
class Shard:
    path: Path
    header: ShardHeader
    tokens: np.ndarray  # a read-only numpy.memmap of the tokens (zero-copy)


def read_header(path) -> ShardHeader:
    """The header of a shard, checked against the file's size."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            header = ShardHeader.from_bytes(f.read(HEADER_BYTES), path)
        size = path.stat().st_size
    except OSError as e:
        raise ShardError(f"{path}: cannot read ({e.strerror})") from None
    expected = HEADER_BYTES + header.num_tokens * header.dtype.itemsize
    if size < expected:
        raise ShardError(
            f"{path}: truncated: {expected - size:,} bytes missing (the header says {header.num_tokens:,} "
            f"{header.dtype.name} tokens, {expected:,} bytes with the header; the file has {size:,})"
        )
    if size > expected:
        raise ShardError(f"{path}: {size - expected:,} bytes more than the header's {header.num_tokens:,} tokens account for")
    return header


def open_shard(path, vocab_size: int | None = None) -> Shard:
    """Map a shard's tokens after checking its header, its size and (if both are known) its vocabulary size."""
    path = Path(path)
    header = read_header(path)
    if vocab_size is not None and header.extended and header.vocab_size != vocab_size:
        raise ShardError(f"{path}: written for a vocabulary of {header.vocab_size:,} tokens, expected {vocab_size:,}")
    if header.num_tokens == 0:
        tokens = np.empty(0, header.dtype)  # mmap refuses a zero-length map
    else:
        tokens = np.memmap(path, header.dtype, "r", offset=HEADER_BYTES, shape=(header.num_tokens,))
    return Shard(path, header, tokens)


def verify_shard(path, vocab_size: int | None = None) -> Shard:
    """`open_shard`, then read every token: the checksum must match and every id be below the
    vocabulary size (the header's, or `vocab_size` for a plain llm.c shard)."""
    shard = open_shard(path, vocab_size)
    header, tokens = shard.header, shard.tokens
    limit = header.vocab_size or vocab_size
    crc = 0
    for start in range(0, len(tokens), VERIFY_STEP):
        block = np.ascontiguousarray(tokens[start : start + VERIFY_STEP])
        crc = zlib.crc32(block, crc)
        if limit is not None and int(block.max()) >= limit:
            at = start + int(np.argmax(block >= limit))
            raise ShardError(f"{path}: token {at:,} is id {int(tokens[at]):,}, not below the vocabulary size {limit:,}")
    if header.extended and crc != header.checksum:
        raise ShardError(f"{path}: corrupted: the tokens' CRC-32 is {crc:08x}, the header says {header.checksum:08x}")
    return shard


class ShardWriter:
    """One shard written as its tokens arrive, to a temporary file: `close()` fills in the
    header, `commit()` renames the file into place, `discard()` leaves nothing behind.
    Committing is separate so that a run can put all its shards in place at once, at the end."""

    def __init__(self, path, dtype, *, vocab_size, eot_id, fingerprint):
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self._facts = dict(vocab_size=vocab_size, eot_id=eot_id, fingerprint=fingerprint)
        self.num_tokens = self.num_docs = self._crc = 0
        self.committed = False
        self._file = AtomicFile(self.path)
        self._file.file.write(bytes(HEADER_BYTES))  # a placeholder until the counts are known

    def write(self, tokens, docs_ended=0):
        """Append tokens (an array or bytes of this shard's dtype) in which `docs_ended` documents end."""
        data = memoryview(tokens).cast("B")
        self._file.file.write(data)
        self._crc = zlib.crc32(data, self._crc)
        self.num_tokens += len(data) // self.dtype.itemsize
        self.num_docs += docs_ended

    def close(self) -> ShardHeader:
        header = ShardHeader(self.dtype, self.num_tokens, num_docs=self.num_docs, checksum=self._crc, **self._facts)
        self._file.file.seek(0)
        self._file.file.write(header.to_bytes())
        self._file.close()
        return header

    def commit(self):
        self._file.commit()
        self.committed = True

    def discard(self):
        """Remove the temporary file, or the shard if it was committed already."""
        self._file.discard()
        if self.committed:
            self.path.unlink(missing_ok=True)


def read_manifest(directory):
    """The manifest of a shard directory, or None if it has none. Every field its readers use
    is checked first, so that a damaged or edited manifest is one line naming it."""
    path = Path(directory) / MANIFEST
    try:
        manifest = read_json(path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:
        raise ShardError(f"{path}: not a readable manifest ({e})") from None
    problem = _mismatch(manifest, MANIFEST_FIELDS, "")
    if problem:
        raise ShardError(f"{path}: {problem}: not a manifest as pretokenize writes it (damaged or edited?)")
    return manifest


def _is_count(value):
    return type(value) is int and value >= 0  # bool is an int too, and no count


# What the readers of a manifest use (pretokenize verify and inspect, train): a dict is an object
# with these keys, a list a list of such items, a pair (test, description) a value.
_COUNT = (_is_count, "a count (an integer, 0 or more)")
_TEXT = (lambda v: isinstance(v, str), "a string")
_TOTALS = {"documents": _COUNT, "tokens": _COUNT}
MANIFEST_FIELDS = {
    "name": _TEXT,
    "tokenizer": {"fingerprint": (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{16}", v) is not None,
                                  "16 hexadecimal digits"),
                  "vocab_size": (lambda v: _is_count(v) and v > 0, "a positive integer")},
    "eot_token": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "eot_id": (lambda v: v is None or _is_count(v), "a token id or null"),
    "dtype": (lambda v: v in ("uint16", "uint32"), '"uint16" or "uint32"'),
    "split": {"text": _TEXT},
    "totals": {"train": _TOTALS, "val": _TOTALS},
    "shards": [{
        # A bare name of ours: a reader opens it in the manifest's directory, never elsewhere.
        "file": (lambda v: isinstance(v, str) and "/" not in v and SHARD_NAME.search(v) is not None,
                 "a shard file name, NAME_train_NNNNNN.bin or NAME_val_NNNNNN.bin"),
        "split": (lambda v: v in ("train", "val"), '"train" or "val"'),
        "tokens": _COUNT,
        "documents": _COUNT,
        "crc32": (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{8}", v) is not None, "8 hexadecimal digits"),
    }],
}


def _mismatch(value, spec, where):
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


def _shown(value):
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def listing_problems(directory, manifest) -> list[str]:
    """What the manifest's list of shards says against itself: a shard listed twice (read twice
    per pass) or under the split its name does not say (training tokens in the validation set)."""
    problems, seen = [], set()
    for entry in manifest["shards"]:
        name, split = entry["file"], entry["split"]
        if name in seen:
            problems.append(f"{Path(directory) / name}: listed twice in {MANIFEST}")
        seen.add(name)
        named = SHARD_NAME.search(name)[1]
        if split != named:
            problems.append(f"{Path(directory) / name}: a {named} shard by its name, listed under {split!r} in {MANIFEST}")
    return problems


def header_problems(path, header: ShardHeader, manifest, entry) -> list[str]:
    """Where a shard's header and its manifest disagree, one line per field with both values:
    a reader relies on each (the token count, the end-of-text id, the tokenizer, ...)."""
    if not header.extended:
        return [f"{path}: a plain llm.c header (no vocabulary, checksum or fingerprint), listed in {MANIFEST} as one of ours"]
    fields = [
        ("token count", header.num_tokens, entry["tokens"]),
        ("document count", header.num_docs, entry["documents"]),
        ("CRC-32", f"{header.checksum:08x}", entry["crc32"]),
        ("end-of-text id", header.eot_id, manifest["eot_id"]),
        ("tokenizer fingerprint", header.fingerprint, manifest["tokenizer"]["fingerprint"]),
        ("vocabulary size", header.vocab_size, manifest["tokenizer"]["vocab_size"]),
        ("token type", header.dtype.name, manifest["dtype"]),
    ]
    return [f"{path}: {field} {_fact(ours)} in the header, {_fact(theirs)} in {MANIFEST}"
            for field, ours, theirs in fields if ours != theirs]


def _fact(value):
    return "none" if value is None else f"{value:,}" if type(value) is int else value


def shard_paths(directory, split: str) -> list[Path]:
    """The shards of one split ("train" or "val") of a directory, in order.

    Taken from manifest.json when there is one; a directory of plain llm.c shards (no
    manifest) is listed by name, in natural order (shard 2 before shard 10). Our shards
    without a manifest are an unfinished run.
    """
    directory = Path(directory)
    manifest = read_manifest(directory)
    if manifest is not None:
        return [directory / s["file"] for s in manifest["shards"] if s["split"] == split]
    paths = [p for p in directory.glob("*.bin") if (m := LLMC_SHARD_NAME.search(p.name)) and m[1] == split]
    paths.sort(key=lambda p: [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", p.name)])
    if any(read_header(p).extended for p in paths):
        raise ShardError(f"{directory}: shards but no {MANIFEST}: an unfinished pretokenize run? Run it again")
    return paths


# -- writing a shard directory ------------------------------------------------------------------


def check_shard_directory(out_dir, fingerprint, overwrite=False):
    """Refuse a directory that holds shards of another tokenizer (or of none we can tell)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise SettingError("out", f"{out_dir}: exists and is not a directory")
    if overwrite or not out_dir.exists():
        return
    try:
        manifest = read_manifest(out_dir)
    except ShardError as e:
        raise SettingError("out", f"{str(e)}; --overwrite replaces the directory's dataset") from None
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
        raise SettingError("out", f"{out_dir}: holds shards of another tokenizer ({theirs}; this one is {fingerprint}); "
                         "choose another directory or pass --overwrite")


class ShardSet:
    """The shards of one output directory, numbered in the order they are opened, written under
    temporary names and made the directory's dataset by `commit` (pretokenize writes its
    datasets with it, bench/encode.py its reference)."""

    def __init__(self, out_dir, tokenizer, eot_id, shard_tokens):
        if not (_is_count(shard_tokens) and 1 <= shard_tokens <= MAX_TOKENS):
            raise SettingError("shard_tokens", f"{shard_tokens}: expected a whole number from 1 to {MAX_TOKENS:,}")
        self.out_dir, self.tokenizer, self.shard_tokens = out_dir, tokenizer, shard_tokens
        self.name = out_dir.resolve().name
        self.dtype = dtype_for(tokenizer.vocab_size)
        self.facts = dict(vocab_size=tokenizer.vocab_size, eot_id=eot_id, fingerprint=tokenizer.fingerprint)
        self.open_writers, self.finished = {}, []  # finished: (split, writer, header)
        self.numbers = None  # the unused shard numbers, from `begin`
        self.committed = False
        self.created_dir = not out_dir.exists()
        self.unigrams = {split: np.zeros(tokenizer.vocab_size, np.int64) for split in ("val", "train")}  # token counts

    def begin(self):
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for tmp in self.out_dir.glob(".*.tmp-*"):  # killed runs' (a live writer's stay: see remove_stale_temporaries)
            final = self.out_dir / tmp.name[1:].rsplit(".tmp-", 1)[0]
            if SHARD_NAME.search(final.name) or final.name in (MANIFEST, "tokenizer.json"):
                remove_stale_temporaries(final)
        # Numbers that no shard of the directory has, temporary or not: the new shards go in beside
        # the old dataset and replace none of its files.
        taken = {int(m[2]) for path in self.out_dir.iterdir() if (m := SHARD_NAME.search(path.name.split(".tmp-")[0]))}
        self.numbers = (n for n in count() if n not in taken)
        for split in ("val", "train"):  # validation first, as in llm.c
            self._open(split)

    def write(self, split, tokens, doc_ends):
        """Append tokens to the split, starting new shards as they fill; `doc_ends` are the
        offsets (sorted) in `tokens` just after each document that ends there."""
        self.unigrams[split] += np.bincount(tokens, minlength=len(self.unigrams[split]))
        done = 0
        while done < len(tokens):
            writer = self.open_writers.get(split) or self._open(split)
            stop = min(len(tokens), done + self.shard_tokens - writer.num_tokens)
            writer.write(tokens[done:stop], bisect_right(doc_ends, stop) - bisect_right(doc_ends, done))
            done = stop
            if writer.num_tokens == self.shard_tokens:
                self._finish(split)

    def _open(self, split):
        path = self.out_dir / f"{self.name}_{split}_{next(self.numbers):06d}.bin"
        writer = self.open_writers[split] = ShardWriter(path, self.dtype, **self.facts)
        return writer

    def _finish(self, split):
        writer = self.open_writers.pop(split)
        self.finished.append((split, writer, writer.close()))

    def finish_all(self):
        for split in list(self.open_writers):
            self._finish(split)
        self.finished.sort(key=lambda f: f[1].path.name[-10:])  # by shard number

    def commit(self, manifest):
        """Make the new shards the directory's dataset; at every instant it is the old one or the new one.

        The shards go in first, under their new names: no manifest lists them yet, so no reader
        sees them. Then tokenizer.json, unchanged unless --overwrite brought another tokenizer (a
        kill right after that leaves the old shards beside it, which `verify` and `train` refuse:
        the fingerprints differ). Then the manifest, renamed over the old one: the commit point.
        Last, the shards it does not list (the old dataset's, killed runs') are removed."""
        for _, writer, _ in self.finished:
            writer.commit()
        self.tokenizer.save(self.out_dir / "tokenizer.json")
        sync_directory(self.out_dir)  # the renames reach the disk before the manifest that relies on them
        with atomic_write(self.out_dir / MANIFEST) as f:
            f.write(json.dumps(manifest, indent=2) + "\n")
        self.committed = True
        listed = {writer.path.name for _, writer, _ in self.finished}
        for path in self.out_dir.glob("*.bin"):
            if SHARD_NAME.search(path.name) and path.name not in listed:
                path.unlink()

    def discard(self):
        """Remove what this run wrote, unless its manifest is in: then the dataset is its own."""
        if self.committed:
            return
        for writer in [*self.open_writers.values(), *(w for _, w, _ in self.finished)]:
            writer.discard()
        if self.created_dir and self.out_dir.is_dir() and not any(self.out_dir.iterdir()):
            self.out_dir.rmdir()
