"""The multiple-choice files `gptkit eval` reads: HellaSwag's (the official jsonl, downloaded
here) and the user's own, one item a line. Each is read whole and checked before any scoring, a
bad line named by its number."""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from gptkit.shared.download import download
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import looked_up
from gptkit.shared.jsonfile import parse_json
from gptkit.shared.lock import output_lock

HELLASWAG_URL = "https://raw.githubusercontent.com/rowanz/hellaswag/master/data/hellaswag_val.jsonl"
HELLASWAG_FILE = (
    "data/hellaswag/hellaswag_val.jsonl"  # where `eval download hellaswag` puts it and `eval hellaswag` reads it
)
HELLASWAG_VAL_ITEMS = 10_042


@dataclass(frozen=True)
class Item:
    context: str
    choices: tuple[str, ...]  # each as it follows the context (HellaSwag's endings with a space before them)
    label: int  # the right choice
    line: int  # of its file, for messages


def read_hellaswag(path: str | PathLike[str], limit: int | None = None) -> list[Item]:
    """The items of a HellaSwag jsonl file (fields ctx, endings: 4 texts, label: 0 to 3, and others
    that are not read), the first `limit` of them. Each ending follows the context after a space,
    as llm.c's dev/data/hellaswag.py renders them."""

    def item(record, line):
        endings = record.get("endings")
        if not (
            isinstance(record.get("ctx"), str)
            and isinstance(endings, list)
            and len(endings) == 4
            and all(isinstance(e, str) for e in endings)
            and _is_label(record.get("label"), 4)
        ):
            return None
        return Item(record["ctx"], tuple(" " + e for e in endings), record["label"], line)

    return _read_jsonl(path, item, 'a JSON object with "ctx" (text), "endings" (4 texts) and "label" (0 to 3)', limit)


def read_choice(path: str | PathLike[str], limit: int | None = None) -> list[Item]:
    """The items of a multiple-choice jsonl file of the user's: {"context": text, "choices": [two
    or more texts], "label": the index of the right one}; each choice follows the context as
    written."""

    def item(record, line):
        choices = record.get("choices")
        if not (
            isinstance(record.get("context"), str)
            and isinstance(choices, list)
            and len(choices) >= 2
            and all(isinstance(c, str) and c for c in choices)
            and _is_label(record.get("label"), len(choices))
        ):
            return None
        return Item(record["context"], tuple(choices), record["label"], line)

    return _read_jsonl(
        path,
        item,
        'a JSON object with "context" (text), "choices" (2 or more texts, none empty) and '
        '"label" (the index of the right choice)',
        limit,
    )


def _is_label(value, choices):
    return type(value) is int and 0 <= value < choices


def _read_jsonl(path, item, expected, limit):
    """The items `item(record, line)` makes of the lines of `path` (None: the line is not one:
    InputError naming it and `expected`); blank lines are skipped."""
    try:
        data = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read ({e.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = data.count(b"\n", 0, e.start) + 1
        raise InputError(f"{path} line {bad}: not UTF-8") from None
    items: list[Item] = []
    for number, line in enumerate(text.split("\n"), 1):  # not splitlines: a JSON string may hold U+2028
        if limit is not None and len(items) == limit:
            break
        if not line.strip():
            continue
        try:
            record = parse_json(line)
        except ValueError as e:
            raise InputError(f"{path} line {number}: not JSON ({e})") from None
        made = item(record, number) if isinstance(record, dict) else None
        if made is None:
            raise InputError(f"{path} line {number}: expected {expected}")
        try:  # JSON's escapes can write a lone surrogate ("\ud800"), which no text encoding holds
            "".join((made.context, *made.choices)).encode("utf-8")
        except UnicodeEncodeError as e:
            raise InputError(
                f"{path} line {number}: a text holds {ascii(e.object[e.start])}, a lone surrogate, which is no "
                "character; expected Unicode text"
            ) from None
        items.append(made)
    if not items:
        raise InputError(f"{path}: no items (expected one a line: {expected})")
    return items


def download_hellaswag(out: str | PathLike[str] = HELLASWAG_FILE, quiet: bool = False, overwrite: bool = False) -> Path:
    """HellaSwag's validation set from its repository to `out`, resumable; a download that is not
    its 10,042 items is refused before it takes the name `out`."""
    out = looked_up(out, "out")
    if out.is_dir():
        raise SettingError("out", f"{out}: is a directory; expected the path of the file to write")

    def check(part):
        try:
            count = len(read_hellaswag(part))
        except InputError as e:
            raise InputError(
                f"{HELLASWAG_URL}: not HellaSwag's format ({str(e).removeprefix(str(part) + ' ')}); "
                "the download was removed"
            ) from None
        if count != HELLASWAG_VAL_ITEMS:
            raise InputError(
                f"{HELLASWAG_URL}: {count:,} items, HellaSwag's validation set has {HELLASWAG_VAL_ITEMS:,}; "
                "the download was removed"
            )

    with output_lock(out.parent, "gptkit eval download"):
        return download(HELLASWAG_URL, out, quiet, overwrite, check)
