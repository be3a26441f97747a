"""The end-of-text token; text that came from outside (a file, standard input, the command
line) made valid Unicode; counts in words, as messages say them (counted).

Python decodes command-line arguments and, by default, standard input with `surrogateescape`,
so bytes that are not UTF-8 arrive as lone surrogates, which no encoder accepts. As corpora
do, invalid bytes become U+FFFD and the caller says how many were replaced.
"""

from __future__ import annotations

import codecs
import re
import threading

# The end-of-text token: what separates documents in a text corpus, the special token a tokenizer
# is trained with, and what pretokenize writes after every document (the data's manifest, and a
# checkpoint's config, record its id: readers take the id from there).
EOT = "<|endoftext|>"

_SURROGATE = re.compile("[\ud800-\udfff]")


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """`n` `noun`s in words: counted(1, "document") is "1 document", counted(1200, "document") "1,200 documents"."""
    return f"{n:,} {noun if n == 1 else plural or noun + 's'}"


def decode_utf8(data: bytes) -> tuple[str, int]:
    """(text, number of invalid sequences replaced by U+FFFD)."""
    decoder = Utf8Decoder()
    return decoder.decode(data, final=True), decoder.replaced


def without_surrogates(text: str) -> tuple[str, int]:
    """(text with every lone surrogate replaced by U+FFFD, how many there were)."""
    return _SURROGATE.subn("\ufffd", text)


class _Replaced(threading.local):
    count = 0  # per thread, so two threads decoding at once don't mix their counts


_replaced = _Replaced()


def _replace_and_count(exc: UnicodeError) -> tuple[str, int]:
    _replaced.count += 1
    # Exactly what errors="replace" does. A codec passes a UnicodeDecodeError, which has .end (typeshed's base lacks it).
    return "\ufffd", exc.end  # type: ignore[attr-defined]


codecs.register_error("gptkit-replace-and-count", _replace_and_count)


class Utf8Decoder:
    """UTF-8 decoded a block at a time, invalid bytes replaced by U+FFFD and counted in `replaced`."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("gptkit-replace-and-count")
        self.replaced = 0

    def decode(self, data: bytes, final: bool = False) -> str:
        before = _replaced.count
        text = self._decoder.decode(data, final)
        self.replaced += _replaced.count - before
        return text
