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
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gptkit.shared.errors import InputError
from gptkit.shared.files import AtomicFile

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
        manifest = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, RecursionError) as e:
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
