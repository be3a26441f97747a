"""The one reader of JSON: every JSON file and line the stages read goes through it, so that any
damage to one (bad UTF-8, a syntax error, nesting too deep) reaches its caller as a ValueError,
which the caller turns into one line naming the file."""
import json
from pathlib import Path


def parse_json(text):
    """The value of a JSON text; ValueError for a text that is none, nesting too deep for the
    decoder (which recurses once per level: 200,000 levels raised RecursionError) included."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deeply to read") from None


def read_json(path):
    """The value of a UTF-8 JSON file: OSError where it cannot be read, ValueError where it is not
    JSON."""
    return parse_json(Path(path).read_text(encoding="utf-8"))
