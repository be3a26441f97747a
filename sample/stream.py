"""A sample's text as its tokens arrive."""

from __future__ import annotations

import codecs
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gptkit.tokenizer import Tokenizer


class TextStream:
    """The text of one sample as its tokens arrive, ready to print: whole characters only, and
    held back while it could be the start of a stop string; `done` once a stop string appears."""

    def __init__(self, tokenizer: Tokenizer, stops: Iterable[str] = ()) -> None:
        self.tokenizer, self.stops = tokenizer, [s for s in stops if s]
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self.pending = ""
        self.done = False

    def add(self, token_id: int) -> str:
        """Text that is now safe to show after `token_id`."""
        self.pending += self.decoder.decode(self.tokenizer.decode_bytes([token_id]))
        return self._release(final=False)

    def finish(self) -> str:
        self.pending += self.decoder.decode(b"", final=True)
        return self._release(final=True)

    def _release(self, final):
        found = [self.pending.index(stop) for stop in self.stops if stop in self.pending]
        if found:
            self.done = True
            text, self.pending = self.pending[: min(found)], ""
            return text
        hold = 0 if final else max((len(s) - 1 for s in self.stops), default=0)
        cut = max(len(self.pending) - hold, 0)
        text, self.pending = self.pending[:cut], self.pending[cut:]
        return text
