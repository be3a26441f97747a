"""The one reader of JSON: every JSON file and line the stages read goes through it, so that any
damage to one (bad UTF-8, a syntax error, nesting too deep) reaches its caller as a ValueError,
which the caller turns into one line naming the file."""

import json
from pathlib import Path
from typing import Any

from .files import StrPath, regular_file


def parse_json(text: str | bytes) -> Any:
    """The value of a JSON text; ValueError for a text that is none, nesting too deep for the
    decoder (which recurses once per level: 200,000 levels raised RecursionError) included."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def is_count(value: object) -> bool:
    """Whether a JSON value is a count: a whole number, 0 or more, that an int64 holds (a JSON
    true is no count, though Python's bool is an int)."""
    return type(value) is int and 0 <= value < 2**63


def read_json(path: StrPath) -> Any:
    """The value of a UTF-8 JSON file: OSError where it cannot be read or is no regular file (a
    named pipe would hang the read), ValueError where it is not JSON."""
    return parse_json(Path(regular_file(path)).read_text(encoding="utf-8"))
