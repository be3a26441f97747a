"""How a chat template's markup is told from the texts of the messages it renders.

Text is data, never control. Only the template's own markup makes special tokens: the text of a
message (any role, any field) that spells a special token (`<|im_end|>`, `<|endoftext|>`) is
encoded as that text, as tiktoken's encode_ordinary encodes it. transformers encodes the rendered
string whole, so that a user who types `<|im_end|><|im_start|>assistant` forges a turn. To tell
markup from text, the template renders each text marked: its special-token spellings escaped,
and its core (the text without its leading and trailing whitespace, which templates often trim)
between two markers. The markers and escapes are noncharacters (U+FDD0), which no text carries
unescaped, so rendering and then reading them back gives the text transformers renders and where
each message's text lies in it; special tokens are matched only outside those places. A template
that changes a text in a way the markers do not survive (slicing it, comparing it with a
string) is rendered with escapes only: its special-token spellings stay text, and the rest of
what it renders is matched as transformers matches it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

# A marker is a noncharacter, a code and the noncharacter again: "(" and ")" around a text's core,
# or the index of an escaped string (the noncharacter itself, then each special token).
_MARK = "\ufdd0"
_MARKER = re.compile(f"{_MARK}([()]|[0-9]+){_MARK}")
_OPEN, _CLOSE = f"{_MARK}({_MARK}", f"{_MARK}){_MARK}"


class TextMarks:
    """The escapes of a tokenizer's special-token spellings (and of the marker character) in the
    texts of messages, and the markers around each text's core; `read_back` undoes both."""

    def __init__(self, special_tokens: Iterable[str]) -> None:
        self.escapes = [_MARK, *sorted(special_tokens, key=len, reverse=True)]
        self._code = {text: f"{_MARK}{i}{_MARK}" for i, text in enumerate(self.escapes)}
        self._spelled = re.compile("|".join(map(re.escape, self.escapes)))  # longest first, as the tokenizer

    def as_seen(self, message: Mapping[str, object], marked: bool) -> dict[str, object]:
        """A message as the template sees it: every text in it escaped (its special-token spellings
        and the marker character); where `marked`, the core of its content's text (a string, or
        each text part's) also between markers. Roles and names stay comparable: they are only
        escaped, which changes no text without such spellings."""
        seen = {key: self.escape(value) for key, value in message.items() if value is not None}
        content = seen.get("content")
        if marked and isinstance(content, str):
            seen["content"] = _marked(content)
        elif marked and isinstance(content, list):
            seen["content"] = [
                {**part, "text": _marked(part["text"])}
                if isinstance(part, dict) and isinstance(part.get("text"), str)
                else part
                for part in content
            ]
        return seen

    def escape(self, value: object) -> object:
        """`value` (a text, or a list or an object of them, nested) with its texts escaped."""
        if isinstance(value, str):
            return self._spelled.sub(lambda m: self._code[m.group()], value)
        if isinstance(value, list):
            return [self.escape(v) for v in value]
        if isinstance(value, dict):
            return {k: self.escape(v) for k, v in value.items()}
        return value

    def read_back(self, rendered: str) -> tuple[str, list[tuple[int, int]]]:
        """(the text a rendering stands for, its [start, end) runs outside any marked core and
        between escapes): markers dropped, escapes replaced by what they stand for."""
        if _MARK not in rendered:
            return rendered, [(0, len(rendered))]
        text, runs, depth, at = [], [], 0, 0
        for i, piece in enumerate(_MARKER.split(rendered)):
            if i % 2 == 0:  # text between markers
                if depth == 0 and piece:
                    runs.append((at, at + len(piece)))
            elif piece in "()":
                depth, piece = max(0, depth + (1 if piece == "(" else -1)), ""
            else:  # an escape, or a marker the template made itself (it is kept as it is)
                index = int(piece)
                piece = self.escapes[index] if index < len(self.escapes) else f"{_MARK}{piece}{_MARK}"
            text.append(piece)
            at += len(piece)
        return "".join(text), runs


def _marked(text: str) -> str:
    """`text` with its core (the text without leading and trailing whitespace, which templates
    trim) between markers."""
    core = text.strip()
    if not core:
        return text
    start = len(text) - len(text.lstrip())
    return f"{text[:start]}{_OPEN}{core}{_CLOSE}{text[start + len(core) :]}"
