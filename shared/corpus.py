"""Stream documents out of text corpora: any text file, .jsonl and .parquet; text and .jsonl
also compressed (.gz, .xz, .bz2, .zst).

A file named as an input is read whatever its name: .jsonl and .parquet by their formats,
anything else as UTF-8 text (a file with a NUL byte in its first block is refused as binary).
A directory contributes only its .txt, .jsonl and .parquet files (compressed or not), hidden
ones and those in hidden directories left out, so that the checksums, partial downloads and
READMEs beside a corpus are not read as part of it.

Memory stays bounded by the block and piece sizes (or the longest .jsonl line / a
parquet batch), never by the file, so corpora far larger than RAM can be read.
"""

from __future__ import annotations

import bz2
import glob
import gzip
import io
import json
import logging
import lzma
import os
import zlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath, looked_up, resolved
from gptkit.shared.jsonfile import parse_json
from gptkit.shared.text import EOT, Utf8Decoder

try:
    from compression import zstd  # type: ignore[import-not-found]  # the standard library's from Python 3.14; mypy reads 3.10
except ImportError:
    try:
        import zstandard as zstd
    except ImportError:
        zstd = None  # only .zst files need it: they say so when opened

log = logging.getLogger(__name__)
DEFAULT_SEPARATOR = EOT
COMPRESSIONS = (".gz", ".xz", ".bz2", ".zst")
DIRECTORY_FORMATS = (".txt", ".jsonl", ".parquet")  # what a directory given as input contributes
BLOCK_BYTES = 1 << 20  # .txt read size; a module global so tests can make it tiny
SNIFF_BYTES = 1 << 16  # how much of a text file is checked for NUL bytes before reading it
PARQUET_BATCH_ROWS = 1024
ZSTD_WINDOW_LOG_MAX = 31  # large corpora are compressed with `zstd --long=31`; the default limit refuses them
READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError) + ((zstd.ZstdError,) if zstd else ())


def _compression(path: Path) -> str | None:
    return next((c for c in COMPRESSIONS if path.name.lower().endswith(c)), None)


def _format(path: Path) -> str:
    """ ".jsonl", ".parquet" or ".txt" (any other name is text), after a compression suffix."""
    name = path.name.lower().removesuffix(_compression(path) or "")
    return next((f for f in (".jsonl", ".parquet") if name.endswith(f)), ".txt")


def _in_directory(path: Path, directory: Path) -> bool:
    """Whether a file found in a directory given as input is part of the corpus."""
    hidden = any(part.startswith(".") for part in path.relative_to(directory).parts)
    name = path.name.lower().removesuffix(_compression(path) or "")
    return not hidden and name.endswith(DIRECTORY_FORMATS)


def decompressed(path: Path, raw: BinaryIO) -> BinaryIO | io.BufferedIOBase:
    """The bytes of an open file, decompressed as its name says."""
    compression = _compression(path)
    if compression == ".gz":
        return gzip.GzipFile(fileobj=raw)
    if compression == ".xz":
        return lzma.LZMAFile(raw)
    if compression == ".bz2":
        return bz2.BZ2File(raw)
    if compression == ".zst":
        if zstd is None:
            raise InputError(f"{path}: reading .zst files needs the zstandard package: pip install zstandard")
        if hasattr(zstd, "ZstdFile"):
            return zstd.ZstdFile(raw, options={zstd.DecompressionParameter.window_log_max: ZSTD_WINDOW_LOG_MAX})
        return io.BufferedReader(zstd.ZstdDecompressor(max_window_size=1 << ZSTD_WINDOW_LOG_MAX).stream_reader(raw))
    return raw


def _check_readable(path: Path) -> None:
    """Refuse, before any work, a file that cannot be opened, decompressed or read as text."""
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    if _format(path) == ".parquet":
        return  # its reader checks it
    try:
        with open(path, "rb") as raw, decompressed(path, raw) as f:
            start = f.read(SNIFF_BYTES)
    except READ_ERRORS as e:
        raise InputError(f"{path}: cannot read as {_format(path)}{_compression(path) or ''} ({e})") from e
    if b"\0" in start:
        raise InputError(f"{path}: a binary file (NUL bytes in it), not text")


def expand_inputs(inputs: Sequence[StrPath]) -> list[Path]:
    """Files, directories (searched recursively) and glob patterns -> readable corpus files.

    Order is kept (each directory and pattern sorted), duplicates dropped.
    """
    found: dict[Path, Path] = {}
    for item in (os.fspath(path) for path in inputs):
        # An existing path is taken literally, so a file named "a[1].txt" is not a pattern.
        matches = [item] if looked_up(item, "input").exists() else sorted(glob.glob(item, recursive=True))
        if not matches:
            raise SettingError("input", f"{item!r}: no such file or directory")
        files = []
        for match in map(Path, matches):
            if looked_up(match, "input").is_dir():
                files += sorted(f for f in match.rglob("*") if f.is_file() and _in_directory(f, match))
            else:
                files.append(match)
        if not files:
            raise InputError(f"{item}: no .txt, .jsonl or .parquet files in it (other files are read when named)")
        for f in files:
            key = resolved(f, "input")
            if key not in found:
                _check_readable(f)
                found[key] = f
    return list(found.values())


def _split(doc: str, piece_chars: int) -> Iterator[tuple[str, bool]]:
    """A whole document as pieces of at most piece_chars, the last marked as its end."""
    for i in range(0, len(doc), piece_chars):
        yield doc[i : i + piece_chars], i + piece_chars >= len(doc)


class Corpus:
    """The documents of some input files, streamed as (text, ends_document) pieces.

    Inputs are expanded and checked up front, so bad paths fail before any work.
    `total_bytes` and `bytes_read` (on-disk bytes, compressed for compressed files) drive progress bars.
    """

    def __init__(
        self, inputs: Sequence[StrPath], *, separator: str | None = DEFAULT_SEPARATOR, text_field: str = "text"
    ) -> None:
        self.paths = expand_inputs(inputs)
        self.separator = separator or None  # "" would match everywhere; treat it as no separator
        self.text_field = text_field
        self.total_bytes = sum(p.stat().st_size for p in self.paths)
        self.bytes_read = 0
        self.invalid_utf8 = 0
        self._first_invalid: Path | None = None

    def pieces(self, piece_chars: int = 1 << 20) -> Iterator[tuple[str, bool]]:
        """Yield every non-empty document as pieces of at most piece_chars characters.

        A document's last piece is non-empty and the only one with ends_document=True;
        documents never span files and are never merged.
        """
        yield from self._pieces(piece_chars)
        if self.invalid_utf8:
            log.warning(
                f"{self.invalid_utf8} invalid UTF-8 sequence(s) replaced with U+FFFD (first in {self._first_invalid})"
            )

    def count(self, max_documents: int) -> tuple[int, int]:
        """(documents, characters) of the corpus, reading no further than `max_documents`
        documents (the characters are those of the documents read)."""
        documents = characters = 0
        for text, ends in self._pieces(1 << 20):
            characters += len(text)
            documents += ends
            if documents == max_documents:
                break
        return documents, characters

    def _pieces(self, piece_chars: int) -> Iterator[tuple[str, bool]]:
        self.bytes_read = self.invalid_utf8 = 0
        self._first_invalid = None
        for path in self.paths:
            start, kind = self.bytes_read, _format(path)
            read = self._parquet if kind == ".parquet" else self._jsonl if kind == ".jsonl" else self._txt
            try:
                yield from read(path, start, piece_chars)
            except READ_ERRORS as e:
                raise InputError(f"{path}: cannot read as {kind}{_compression(path) or ''} ({e})") from e
            self.bytes_read = start + path.stat().st_size

    def _decode(self, path: Path, decoder: Utf8Decoder, data: bytes, final: bool) -> str:
        before = decoder.replaced
        text = decoder.decode(data, final)
        if decoder.replaced != before:
            self.invalid_utf8 += decoder.replaced - before
            self._first_invalid = self._first_invalid or path
        return text

    def _txt(self, path: Path, start: int, piece_chars: int) -> Iterator[tuple[str, bool]]:
        sep = self.separator
        # Keep len(sep) chars back when cutting mid-document: a separator split across
        # blocks is never cut, and the document's last piece is never empty.
        hold = len(sep) if sep else 1
        decoder = Utf8Decoder()
        buf = ""
        with open(path, "rb") as raw, decompressed(path, raw) as f:
            while True:
                block = f.read(BLOCK_BYTES)
                self.bytes_read = start + raw.tell()
                buf += self._decode(path, decoder, block, final=not block)
                pos = 0
                while sep and (end := buf.find(sep, pos)) >= 0:
                    yield from _split(buf[pos:end], piece_chars)
                    pos = end + len(sep)
                if not block:
                    yield from _split(buf[pos:], piece_chars)
                    return
                while len(buf) - pos - hold >= piece_chars:
                    yield buf[pos : pos + piece_chars], False
                    pos += piece_chars
                buf = buf[pos:]

    def _jsonl(self, path: Path, start: int, piece_chars: int) -> Iterator[tuple[str, bool]]:
        field = self.text_field
        decoder = Utf8Decoder()
        with open(path, "rb") as raw, decompressed(path, raw) as f:
            for lineno, line in enumerate(f, 1):
                text = self._decode(path, decoder, line, final=True)
                if not text.strip():
                    continue
                try:
                    obj = parse_json(text)
                except json.JSONDecodeError as e:
                    raise InputError(f"{path}:{lineno}: invalid JSON ({e.msg} at column {e.colno})") from None
                except ValueError:  # nested too deeply for the decoder
                    raise InputError(
                        f"{path}:{lineno}: JSON nested too deeply to read (a record is an object "
                        f"with a string field {field!r})"
                    ) from None
                doc = obj.get(field) if isinstance(obj, dict) else None
                if not isinstance(doc, str):
                    raise SettingError("text_field", f"{field!r}: {path}:{lineno} has no string field of that name")
                self.bytes_read = start + raw.tell()
                yield from _split(doc, piece_chars)

    def _parquet(self, path: Path, start: int, piece_chars: int) -> Iterator[tuple[str, bool]]:

        import pyarrow as pa  # here, not above: it costs 35 MB of memory and 50 ms to import
        import pyarrow.parquet as pq

        field = self.text_field
        try:
            with pq.ParquetFile(path) as pf:
                schema = pf.schema_arrow
                if field not in schema.names:
                    raise SettingError(
                        "text_field",
                        f"{field!r}: {path} has no column of that name (columns: {', '.join(schema.names)})",
                    )
                kind = schema.field(field).type
                if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                    raise InputError(f"{path}: column {field!r} holds {kind}, expected strings")
                rows, total_rows, size = 0, max(pf.metadata.num_rows, 1), path.stat().st_size
                for batch in pf.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=[field]):
                    rows += batch.num_rows
                    self.bytes_read = start + size * rows // total_rows
                    for doc in batch.column(0).to_pylist():
                        if doc is not None:  # nulls are skipped, like empty documents
                            yield from _split(doc, piece_chars)
        except pa.ArrowException as e:
            raise InputError(f"{path}: cannot read as .parquet ({e})") from e
