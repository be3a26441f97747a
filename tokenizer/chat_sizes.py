"""How large a value an operation of a chat template would make, computed from its operands
before it makes it (chat_sandbox.py refuses it where that is more than the rendering has left):
the text of a list or a dict, of a `%` or a str.format field, and what the filters and the
string methods that take a size make. Each size is the value's, or at least it (a width is a
floor: the text may be longer), or, where a pair says False, at most it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import chain
from typing import Any

from jinja2.utils import Namespace
from markupsafe import escape

from .chat_bounds import left

TEXT = (str, bytes)
SIZED = (str, bytes, list, tuple, dict, set, frozenset)
_VIEWS: Any = (list, tuple, set, frozenset, type({}.keys()), type({}.values()), type({}.items()))
LOG10_2 = 0.30103
_END = object()


def digits(n: int) -> int:
    """At least the decimal digits of `n`."""
    return int(abs(n).bit_length() * LOG10_2) + 1


def whole(value: Any) -> int:
    """A size given to a filter or a method, where it is an int (else the call itself refuses it)."""
    return max(value, 0) if isinstance(value, int) else 0


def length(value: Any) -> int:
    """What a value just made counts: its characters, or its items."""
    return len(value) if isinstance(value, SIZED) else 0


def text_size(value: Any, most: int, item: int = 2, key: int = 2, level: int = 0, deep: bool = False) -> int:
    """At least the characters of `value` as text (str(), repr(), JSON): its strings' characters,
    its numbers' digits, and for each item of a list or a dict `item` (a separator), `key` (after
    a dict's key) and `level` for each level it is nested at (an indent); `deep`: each string
    counted once for each container around it (pprint writes a container's text whole before it
    splits it). It stops counting past `most`: a list can hold one big value many times over."""
    size, stack = 0, [iter((value,))]
    while stack:
        value = next(stack[-1], _END)
        if value is _END:
            stack.pop()
            continue
        depth = len(stack)
        if isinstance(value, TEXT):
            size += len(value) * (depth if deep else 1)
        elif isinstance(value, bool) or value is None:
            size += 4
        elif isinstance(value, int):
            size += digits(value)
        elif isinstance(value, dict):
            size += 2 + len(value) * (item + key + level * depth)
            stack.append(chain.from_iterable(value.items()))
        elif isinstance(value, _VIEWS):
            size += 2 + len(value) * (item + level * depth)
            stack.append(iter(value))
        elif isinstance(value, Namespace):  # its text is its attributes'
            stack.append(iter((getattr(value, "_Namespace__attrs"),)))  # noqa: B009 (a private name)
        else:
            size += 1
        if size > most:
            break
    return size


def texts_size(values: Any) -> int:
    """At least the characters of `values` (an iterable) as text, each by itself."""
    most = left()
    return sum(len(v) if isinstance(v, str) else text_size(v, most) for v in values)


_PERCENT = re.compile(r"%(\([^)]*\))?[-#0 +]*(\*|\d*)(?:\.(\*|\d*))?[hlL]?(.)", re.S)
_SPEC = re.compile(r"(?:.?[<>=^])?[-+ ]?z?#?0?(\d*)[,_]?(?:\.(\d*))?[a-zA-Z%]?", re.S)


def _size_of(written: str) -> int:
    """A width or a precision as written (past 18 digits, too many for any value)."""
    return 0 if not written else int(written) if len(written) < 19 else 10**18


def _number_size(value: Any, kind: str, precision: int | None) -> int:
    """At least the characters of a number formatted as `kind` (f, e, d, ...) to `precision`."""
    if not isinstance(value, (int, float)) or value != value or value in (float("inf"), float("-inf")):
        return text_size(value, left())
    whole_part = digits(int(value))
    if kind in "fF%":
        return whole_part + 1 + (6 if precision is None else precision)
    return max(whole_part if kind in "diouxXc" else 1, precision or 0)


def percent_size(text: str | bytes, values: Any) -> int:
    """At least the characters of `text % values` (about: the format's own characters count once
    more), from each conversion's width, precision and value; what the format cannot take (a
    missing value, a wrong type) stops the count, and `%` itself then says what is wrong."""
    if isinstance(text, bytes):
        text = text.decode("latin-1")
    args = values if isinstance(values, tuple) else (values,)
    size, used = len(text), 0
    try:
        for conversion in _PERCENT.finditer(text):
            key, width, precision, kind = conversion.groups()
            if kind == "%":
                continue
            sizes = []
            for written in (width, precision):
                if written == "*":
                    written, used = str(whole(args[used])), used + 1
                sizes.append(None if written is None else _size_of(written))
            if key is None:
                value, used = args[used], used + 1
            else:
                value = values[key[1:-1]]
            body = text_size(value, left()) if kind in "sra" else _number_size(value, kind, sizes[1])
            size += max(sizes[0] or 0, body)
    except (LookupError, TypeError, ValueError):
        pass
    return size


def field_size(value: Any, spec: str) -> int:
    """At least the characters of `format(value, spec)`: its width, its precision (a number's
    digits; a string's precision cuts it), its value's text."""
    match = _SPEC.fullmatch(spec)
    if match:
        width, precision = _size_of(match[1]), _size_of(match[2] or "")
    else:  # a type's own format: any number in it may be a size
        width, precision = max(map(_size_of, re.findall(r"\d+", spec)), default=0), 0
    if isinstance(value, str):
        return max(width, len(value))
    return max(width, precision, text_size(value, left()))


def _replaced_size(text: Any, old: Any, new: Any, count: Any = -1) -> int:
    kind = str if isinstance(text, str) else bytes
    if not all(issubclass(type(x), kind) for x in (text, old, new)):
        return 0  # the call itself refuses it
    n = text.count(old) if old else len(text) + 1
    if isinstance(count, int) and count >= 0:
        n = min(n, count)
    return len(text) + n * (len(new) - len(old))


def method_size(owner: str | bytes | int, name: str, args: tuple, kwargs: dict) -> tuple[int, bool] | None:
    """(the characters, exact or at least; or with False, at most) that method `name` of the
    string or number `owner` makes when called with these arguments, where it can make far more
    than it is given; None where it cannot."""

    def arg(i: int, key: str, default: object = None) -> Any:  # an argument a template passed
        return args[i] if len(args) > i else kwargs.get(key, default)

    if isinstance(owner, int):
        return (whole(arg(0, "length", 1)), True) if name == "to_bytes" else None
    if name in ("center", "ljust", "rjust", "zfill"):
        return max(len(owner), whole(arg(0, "width"))), True
    if name == "replace":
        return _replaced_size(owner, arg(0, "old"), arg(1, "new"), arg(2, "count", -1)), True
    if name == "join":
        items = arg(0, "iterable", ())
        return sum(len(x) for x in items if isinstance(x, TEXT)) + len(owner) * max(len(items) - 1, 0), True
    if name == "expandtabs":
        tabs = owner.count("\t") if isinstance(owner, str) else owner.count(b"\t")
        return len(owner) + tabs * max(whole(arg(0, "tabsize", 8)) - 1, 0), False
    if name == "translate" and isinstance(table := arg(0, "table"), dict):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        return len(owner) * max(longest, 1), False
    return None


def _indent_size(s: Any, width: Any = 4, first: bool = False, blank: bool = False) -> tuple[int, bool]:
    """jinja's indent: the indentation made once, then put before each line but the first (and
    before it too if `first`), empty lines too if `blank`."""
    step = len(width) if isinstance(width, str) else whole(width)
    lines = (str(s) + "\n").splitlines()
    indented = len(lines) - 1 - (0 if blank else lines[1:].count("")) + bool(first)
    return step + len(str(s)) + step * indented, True


def _urlize_size(value: Any, trim_url_limit: Any = None, nofollow: bool = False, target: Any = None, rel: Any = None, extra_schemes: Any = None) -> tuple[int, bool]:  # fmt: skip
    """At most what jinja's urlize makes: the text escaped, and each link (a word with a dot, an
    @ or a scheme's colon) written twice with its attributes."""
    text = str(value)
    links = len(re.findall(r"\S*[.@:]\S*", text))
    attributes = 40 + len(escape(str(target or ""))) + len(escape(str(rel or "")))
    return 2 * len(escape(text)) + links * attributes, False


def _percent_filter_size(value: Any, *args: Any, **kwargs: Any) -> tuple[int, bool]:
    return percent_size(str(value), kwargs or args), True


# (at least, or with False at most, the characters a filter makes) from its arguments
FILTER_SIZES: dict[str, Callable[..., tuple[int, bool]]] = {
    "center": lambda value, width=80: (max(len(str(value)), whole(width)), True),
    "indent": _indent_size,
    "replace": lambda s, old, new, count=None: (_replaced_size(str(s), str(old), str(new), count), True),
    "format": _percent_filter_size,
    "urlize": _urlize_size,
    "batch": lambda value, linecount, fill_with=None: (whole(linecount) if fill_with is not None else 0, True),
    "slice": lambda value, slices, fill_with=None: (whole(slices), True),
}
