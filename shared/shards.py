"""Token shards: llm.c's `.bin` files, with our own facts in header slots its readers ignore.

A shard is a header of 256 little-endian int32 (1024 bytes), then the tokens (uint16, or uint32
for a vocabulary of more than 65,536), then, in a shard of chat data, the mask of the tokens the
loss counts (one uint8 per token). The format, slot by slot: docs/formats.md#shards.
A directory of shards, with its manifest and tokenizer, is shared/shard_dir.py's.
"""

from __future__ import annotations

import tempfile
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from gptkit.shared.errors import InputError
from gptkit.shared.files import AtomicFile, StrPath

HEADER_INTS = 256
HEADER_BYTES = HEADER_INTS * 4
FORMATS: dict[int, tuple[int, np.dtype]] = {
    20240520: (1, np.dtype("<u2")),
    20240801: (7, np.dtype("<u4")),
}  # magic: (version, dtype)
MAGIC = {dtype: magic for magic, (_, dtype) in FORMATS.items()}
EXTENSION_MARKER = int.from_bytes(b"gptk", "little")
EXTENSION_VERSION = 1
# A shard with a mask says so in slot 11 and writes the extension's version 2, which gptkit
# versions that know no mask refuse by name; a shard without one is version 1, as before.
MASK_EXTENSION_VERSION = 2
MASK_DTYPE = np.dtype("u1")  # 1: the loss counts the token (the assistant's, in chat data), 0: it does not
MAX_TOKENS = 2**31 - 1  # the count is an int32
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
    has_mask: bool = False  # a mask of one uint8 per token follows the tokens

    @property
    def extended(self) -> bool:
        return self.vocab_size is not None

    @property
    def magic(self) -> int:
        return MAGIC[self.dtype]

    @property
    def version(self) -> int:
        return FORMATS[self.magic][0]

    @property
    def data_bytes(self) -> int:
        """The bytes after the header: the tokens and their mask."""
        return self.num_tokens * (self.dtype.itemsize + (MASK_DTYPE.itemsize if self.has_mask else 0))

    def to_bytes(self) -> bytes:
        ints = np.zeros(HEADER_INTS, "<i4")
        ints[:3] = self.magic, self.version, self.num_tokens
        if self.extended:
            version = MASK_EXTENSION_VERSION if self.has_mask else EXTENSION_VERSION
            ints[3:8] = (
                EXTENSION_MARKER,
                version,
                self.vocab_size,
                -1 if self.eot_id is None else self.eot_id,
                self.num_docs,
            )
            ints[8:9].view("<u4")[0] = self.checksum
            assert self.fingerprint is not None  # an extended header has one (from_bytes, ShardWriter)
            ints[9:11] = np.frombuffer(bytes.fromhex(self.fingerprint), "<i4")
            ints[11] = self.has_mask
        return ints.tobytes()

    @classmethod
    def from_bytes(cls, raw: bytes, path: StrPath) -> ShardHeader:
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
        if ints[4] not in (EXTENSION_VERSION, MASK_EXTENSION_VERSION):
            raise ShardError(
                f"{path}: header extension version {ints[4]}, this reader knows versions {EXTENSION_VERSION} "
                f"and {MASK_EXTENSION_VERSION}"
            )
        if ints[11] != (ints[4] == MASK_EXTENSION_VERSION):
            raise ShardError(
                f"{path}: header extension version {ints[4]} with mask flag {ints[11]} (slot 11), expected "
                f"{int(ints[4] == MASK_EXTENSION_VERSION)}"
            )
        eot_id = int(ints[6])
        return cls(
            dtype,
            num_tokens,
            vocab_size=int(ints[5]),
            eot_id=None if eot_id < 0 else eot_id,
            num_docs=int(ints[7]),
            checksum=int(ints[8:9].view("<u4")[0]),
            fingerprint=ints[9:11].tobytes().hex(),
            has_mask=bool(ints[11]),
        )


@dataclass(frozen=True)
class Shard:
    path: Path
    header: ShardHeader
    tokens: np.ndarray  # a read-only numpy.memmap of the tokens (zero-copy)
    mask: np.ndarray | None = None  # likewise of the mask (uint8, 1: the loss counts the token); None: no mask


def read_header(path: StrPath) -> ShardHeader:
    """The header of a shard, checked against the file's size."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            header = ShardHeader.from_bytes(f.read(HEADER_BYTES), path)
        size = path.stat().st_size
    except OSError as e:
        raise ShardError(f"{path}: cannot read ({e.strerror})") from None
    expected = HEADER_BYTES + header.data_bytes
    mask = " and their mask" if header.has_mask else ""
    if size < expected:
        raise ShardError(
            f"{path}: truncated: {expected - size:,} bytes missing (the header says {header.num_tokens:,} "
            f"{header.dtype.name} tokens{mask}, {expected:,} bytes with the header; the file has {size:,})"
        )
    if size > expected:
        raise ShardError(
            f"{path}: {size - expected:,} bytes more than the header's {header.num_tokens:,} tokens{mask} account for"
        )
    return header


def open_shard(path: StrPath, vocab_size: int | None = None) -> Shard:
    """Map a shard's tokens after checking its header, its size and (if both are known) its vocabulary size."""
    path = Path(path)
    header = read_header(path)
    if vocab_size is not None and header.extended and header.vocab_size != vocab_size:
        raise ShardError(f"{path}: written for a vocabulary of {header.vocab_size:,} tokens, expected {vocab_size:,}")
    n = header.num_tokens
    if n == 0:  # mmap refuses a zero-length map
        return Shard(path, header, np.empty(0, header.dtype), np.empty(0, MASK_DTYPE) if header.has_mask else None)
    tokens = np.memmap(path, header.dtype, "r", offset=HEADER_BYTES, shape=(n,))
    mask = (
        np.memmap(path, MASK_DTYPE, "r", offset=HEADER_BYTES + n * header.dtype.itemsize, shape=(n,))
        if header.has_mask
        else None
    )
    return Shard(path, header, tokens, mask)


def verify_shard(path: StrPath, vocab_size: int | None = None) -> Shard:
    """`open_shard`, then read every token (and mask value): the checksum must match, every id be
    below the vocabulary size (the header's, or `vocab_size` for a plain llm.c shard) and every
    mask value 0 or 1."""
    shard = open_shard(path, vocab_size)
    header, tokens = shard.header, shard.tokens
    limit = header.vocab_size or vocab_size
    crc = 0
    for start in range(0, len(tokens), VERIFY_STEP):
        block = np.ascontiguousarray(tokens[start : start + VERIFY_STEP])
        crc = zlib.crc32(block, crc)  # type: ignore[arg-type]  # an ndarray is a buffer; numpy types __buffer__ from 3.12
        if limit is not None and int(block.max()) >= limit:
            at = start + int(np.argmax(block >= limit))
            raise ShardError(f"{path}: token {at:,} is id {int(tokens[at]):,}, not below the vocabulary size {limit:,}")
    mask = shard.mask if shard.mask is not None else ()
    for start in range(0, len(mask), VERIFY_STEP):
        block = np.ascontiguousarray(mask[start : start + VERIFY_STEP])
        crc = zlib.crc32(block, crc)  # type: ignore[arg-type]  # an ndarray is a buffer; numpy types __buffer__ from 3.12
        if int(block.max()) > 1:
            at = start + int(np.argmax(block > 1))
            raise ShardError(f"{path}: the mask of token {at:,} is {int(mask[at])}, not 0 or 1")
    if header.extended and crc != header.checksum:
        what = "tokens' and mask's" if header.has_mask else "tokens'"
        raise ShardError(f"{path}: corrupted: the {what} CRC-32 is {crc:08x}, the header says {header.checksum:08x}")
    return shard


class ShardWriter:
    """One shard written as its tokens arrive, to a temporary file: `close()` fills in the
    header, `commit()` renames the file into place, `discard()` leaves nothing behind.
    Committing is separate so that a run can put all its shards in place at once, at the end.
    With `mask`, each write brings the tokens' mask too, kept in an anonymous temporary file (no
    memory grows with the shard, nothing stays behind a killed run) until `close()` appends it."""

    def __init__(
        self,
        path: StrPath,
        dtype: npt.DTypeLike,
        *,
        vocab_size: int,
        eot_id: int | None,
        fingerprint: str,
        mask: bool = False,
    ) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self._facts: dict[str, Any] = dict(vocab_size=vocab_size, eot_id=eot_id, fingerprint=fingerprint, has_mask=mask)
        self.num_tokens = self.num_docs = self._crc = 0
        self.committed = False
        self._file = AtomicFile(self.path)
        self._file.file.write(bytes(HEADER_BYTES))  # a placeholder until the counts are known
        self._mask = tempfile.TemporaryFile(dir=self.path.parent) if mask else None

    def write(
        self, tokens: np.ndarray | bytes, docs_ended: int = 0, mask: Sequence[int] | np.ndarray | None = None
    ) -> None:
        """Append tokens (an array or bytes of this shard's dtype) in which `docs_ended` documents
        end, and in a shard with a mask, their mask (an array of 0/1 values, one per token)."""
        data = memoryview(tokens).cast("B")  # type: ignore[arg-type]  # an ndarray is a buffer; numpy types __buffer__ from 3.12
        if (mask is None) != (self._mask is None) or (
            mask is not None and len(mask) * self.dtype.itemsize != len(data)
        ):
            raise ValueError(
                f"{self.path}: a mask {'of one value per token ' if self._mask else 'in a shard without one'}"
            )
        self._file.file.write(data)
        self._crc = zlib.crc32(data, self._crc)
        self.num_tokens += len(data) // self.dtype.itemsize
        self.num_docs += docs_ended
        if self._mask is not None:
            self._mask.write(np.asarray(mask, MASK_DTYPE).tobytes())

    def close(self) -> ShardHeader:
        if self._mask is not None:  # after the tokens, the checksum going on over it
            self._mask.seek(0)
            while block := self._mask.read(1 << 24):
                self._file.file.write(block)
                self._crc = zlib.crc32(block, self._crc)
            self._mask.close()
        header = ShardHeader(self.dtype, self.num_tokens, num_docs=self.num_docs, checksum=self._crc, **self._facts)
        self._file.file.seek(0)
        self._file.file.write(header.to_bytes())
        self._file.close()
        return header

    def commit(self) -> None:
        self._file.commit()
        self.committed = True

    def discard(self) -> None:
        """Remove the temporary file, or the shard if it was committed already."""
        if self._mask is not None:
            self._mask.close()
        self._file.discard()
        if self.committed:
            self.path.unlink(missing_ok=True)
