"""The Jinja environment chat templates render in: jinja2's immutable sandbox, as transformers
compiles them, in which every operation that can make a value is measured against the rendering's
budget (chat_bounds.py) before it makes it, with the sizes of chat_sizes.py, and counted after:
however a template combines its operations, a value larger than the budget is never made.

- Operators: `*` and `**` refuse a result too large from their operands (a number by its
  digits), `%` from its format's widths and its values' text, `+` of lists from their lengths;
  `+` and `~` of strings make at most twice what is left, counted once made.
- The text of a list or a dict (`{{ x }}`, `~`, `|string`, `%s`, a format's field) is measured
  before it is made: a list can hold one big value many times over.
- Filters and methods that take a size are measured from it: center, ljust, rjust, zfill,
  indent, wordwrap's and join's separators, replace, translate, expandtabs, tojson's indent,
  batch, slice, round, to_bytes, a format spec's width and precision.
- Whatever a filter, a method, a call's arguments, a slice or a block (a macro's, a set block's
  text) makes is counted.
- Nothing of the template runs while it compiles: jinja's optimizer folds constants (it made
  `'x'|center(10**9)` while compiling, in a branch never taken, outside any bound), so the
  environment is not optimized, and its filters take the context, which keeps jinja from
  running them ahead; what it still writes ahead is the template's own literal text.

Each check is a length or a comparison, in the process, at each operation: rendering in a child
process under memory limits would cost a process's round trip per rendering, where a server
renders one per request and pretokenize several per conversation.
"""

from __future__ import annotations

import json
import pprint
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from itertools import chain
from typing import Any, NoReturn

import jinja2
import jinja2.ext
from jinja2 import nodes
from jinja2.compiler import CodeGenerator
from jinja2.environment import Environment
from jinja2.filters import FILTERS, make_attrgetter
from jinja2.nodes import EvalContext
from jinja2.runtime import Context, Macro, markup_join, str_join
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEscapeFormatter, SandboxedFormatter
from jinja2.utils import _PassArg, pass_context, pass_environment, pass_eval_context
from markupsafe import Markup

from .chat_bounds import NotJinja, allow, left, make, number, spend
from .chat_sizes import (
    FILTER_SIZES,
    LOG10_2,
    TEXT,
    field_size,
    length,
    method_size,
    percent_size,
    text_size,
    texts_size,
    whole,
)

_SEQUENCE = (str, bytes, list, tuple)
_SCALAR = (str, int, float, type(None))  # text of a few characters at most (ints are bounded in digits)


class _Measured:
    """A format's fields, each measured before it is made and counted after."""

    def format_field(self, value: Any, format_spec: str) -> Any:
        allow(field_size(value, format_spec))
        text = super().format_field(value, format_spec)  # type: ignore[misc]
        spend(len(text))
        return text


class _Formatter(_Measured, SandboxedFormatter):
    pass


class _EscapeFormatter(_Measured, SandboxedEscapeFormatter):
    pass


# Filters that write their arguments as text, and filters that compare their items (a comparison
# of two strings reads them: a list of one long string many times over is read as many times).
_WRITES_TEXT = frozenset(
    "capitalize center e escape forceescape format indent lower replace safe string striptags "
    "title trim truncate upper urlencode urlize wordcount wordwrap xmlattr".split()
)
_COMPARES = frozenset("dictsort groupby max min sort unique".split())


def _counted(items: Iterator) -> Iterator:
    """A filter's items as they come, each counted (batch and slice make lists)."""
    for item in items:
        spend(length(item))
        yield item


def _measured(name: str, function: Callable) -> Callable:
    """Filter `name` (jinja's `function`), refused before it runs where it would make more than
    the rendering has left, and what it makes counted. It takes the context: jinja evaluates no
    such filter while compiling."""
    takes = _PassArg.from_obj(function)
    size = FILTER_SIZES.get(name)
    writes, compares = name in _WRITES_TEXT, name in _COMPARES

    @pass_context
    def measured(context: Context, value: Any, *args: Any, **kwargs: Any) -> Any:  # a template's values
        if writes and not all(isinstance(a, _SCALAR) for a in chain((value,), args, kwargs.values())):
            allow(texts_size(a for a in chain((value,), args, kwargs.values()) if not isinstance(a, str)))
        elif compares and not isinstance(value, str):
            allow(text_size(value, left()))
        if size is not None:
            allow(*size(value, *args, **kwargs))
        passed: dict[_PassArg | None, tuple[object, ...]] = {
            _PassArg.context: (context,),
            _PassArg.eval_context: (context.eval_ctx,),
            _PassArg.environment: (context.environment,),
        }
        result = function(*passed.get(takes, ()), value, *args, **kwargs)
        spend(len(args) + len(kwargs) + length(result))
        return _counted(result) if isinstance(result, Iterator) else result

    return measured


@pass_eval_context
def _join(eval_ctx: EvalContext, value: Iterable[Any], d: object = "", attribute: str | int | None = None) -> str:
    """jinja's join, its items measured as text first (one item may be there many times)."""
    items = list(value if attribute is None else map(make_attrgetter(eval_ctx.environment, attribute), value))
    allow(texts_size(items) + len(str(d)) * max(len(items) - 1, 0))
    return FILTERS["join"](eval_ctx, items, d)


@pass_environment
def _wordwrap(
    environment: Environment,
    s: str,
    width: int = 79,
    break_long_words: bool = True,
    wrapstring: str | None = None,
    break_on_hyphens: bool = True,
) -> str:
    """jinja's wordwrap, wrapped at newlines first: then the size with `wrapstring` is known."""
    wrapstring = environment.newline_sequence if wrapstring is None else wrapstring
    wrapped = FILTERS["wordwrap"](environment, s, width, break_long_words, "\n", break_on_hyphens)
    if wrapstring == "\n":
        return wrapped
    allow(len(wrapped) + wrapped.count("\n") * (len(wrapstring) - 1))
    return wrapped.replace("\n", wrapstring)


@pass_environment
def _sum(environment: Environment, iterable: Iterable[Any], attribute: str | int | None = None, start: Any = 0) -> Any:
    """jinja's sum; lists (or tuples) joined at once, in their size, where adding them one by one
    would take time in the square of it."""
    items = list(iterable if attribute is None else map(make_attrgetter(environment, attribute), iterable))
    if isinstance(start, (list, tuple)):
        same = next((i for i, x in enumerate(items) if not isinstance(x, type(start))), len(items))
        make(len(start) + sum(map(len, items[:same])))
        start, items = type(start)(chain(start, *items[:same])), items[same:]
    return FILTERS["sum"](environment, items, None, start)


def _round(value: float, precision: int = 0, method: str = "common") -> float:
    number(abs(precision) + 1 if isinstance(precision, int) else 0)  # rounding makes 10 ** precision
    return FILTERS["round"](value, precision, method)


def _tojson(
    value: Any,
    ensure_ascii: bool = False,
    indent: int | str | None = None,
    separators: tuple[str, str] | None = None,
    sort_keys: bool = False,
) -> str:
    """JSON as transformers writes it (not jinja's own tojson, which escapes HTML characters)."""
    step = len(indent) if isinstance(indent, str) else whole(indent)
    comma, colon = map(len, separators) if separators else (1 if indent is not None else 2, 2)
    allow(step + text_size(value, left(), item=comma + (indent is not None), key=colon, level=step))
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _pprint(value: object) -> str:
    allow(text_size(value, left(), item=3, level=1, deep=True), exact=False)
    return pprint.pformat(value)


def _strftime_now(format: str) -> str:
    allow(256 * len(format), exact=False)  # Python's strftime tries up to this many characters
    return datetime.now().strftime(format)


def _raise_exception(message: str) -> NoReturn:
    raise jinja2.exceptions.TemplateError(message)


def _finalize(value: Any) -> Any:  # whatever the template writes
    """What `{{ value }}` writes: a list's or a dict's text measured before it is made. (jinja
    writes a constant's text while compiling: a constant is the template's own text, bounded.)"""
    if not isinstance(value, str):
        allow(text_size(value, left()))
    return value


_FILTERS = {
    name: _measured(name, function)
    for name, function in {
        **FILTERS,
        "join": _join,
        "wordwrap": _wordwrap,
        "sum": _sum,
        "round": _round,
        "tojson": _tojson,
        "pprint": _pprint,
    }.items()
}


class _CodeGenerator(CodeGenerator):
    """jinja's code, with `~` and slices made by the environment, where they are counted."""

    def visit_Concat(self, node: nodes.Concat, frame: Any) -> None:
        self.write("environment.joined(context.eval_ctx.autoescape, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")

    def visit_Getitem(self, node: nodes.Getitem, frame: Any) -> None:
        if not isinstance(node.arg, nodes.Slice):
            return super().visit_Getitem(node, frame)
        self.write("environment.sliced(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for part in (node.arg.start, node.arg.stop, node.arg.step):
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
            self.write(", ")
        self.write("))")


class _Environment(ImmutableSandboxedEnvironment):
    """The sandbox with every operation that makes a value measured (see the module's docstring)."""

    intercepted_binops = frozenset(("+", "*", "**", "%"))
    code_generator_class = _CodeGenerator

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "+":
            if left.__class__ is str:  # the most common: at most twice what is left, counted once made
                value = left + right
                spend(len(value))
                return value
            if isinstance(left, (list, tuple)) and isinstance(right, (list, tuple)):
                make(len(left) + len(right))
            value = left + right
            if isinstance(value, TEXT):
                spend(len(value))
            return value
        if operator == "*":
            for sequence, times in ((left, right), (right, left)):
                if isinstance(sequence, _SEQUENCE) and isinstance(times, int):
                    make(len(sequence) * max(times, 0))
            if isinstance(left, int) and isinstance(right, int):
                number(int((left.bit_length() + right.bit_length()) * LOG10_2))
            return left * right
        if operator == "**":
            if isinstance(left, int) and isinstance(right, int) and right > 0:
                number(int(max(abs(left).bit_length() - 1, 0) * right * LOG10_2))
            return left**right
        if not isinstance(left, TEXT):  # %: a number's remainder
            return left % right
        allow(percent_size(left, right))
        text = left % right
        spend(len(text))
        return text

    def joined(self, autoescape: bool, values: tuple) -> str:
        """`~`: its operands as text, joined (strings at most what is left each: counted once made)."""
        if not all(isinstance(v, _SCALAR) for v in values):
            allow(texts_size(values))
        text = markup_join(values) if autoescape else str_join(values)
        spend(len(text))
        return text

    def sliced(self, value: Any, part: slice) -> Any:
        value = value[part]
        spend(length(value))
        return value

    def concat(self, pieces: Any) -> str:
        """A template's buffer joined: a macro's text, a set block's, a filter block's."""
        pieces = pieces if isinstance(pieces, list) else list(pieces)
        make(sum(map(len, pieces)))
        return "".join(pieces)

    def call(self, context: Any, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        # Its arguments are a tuple and a dict, which `f(*x)` and `f(**x)` make of any list or
        # dict, and which jinja copies on the way to a macro: about four times.
        make(4 * (len(args) + len(kwargs)))
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, (str, bytes, int)):
            if obj.__name__ == "join" and args and isinstance(owner, TEXT):
                args = (list(args[0]), *args[1:])  # its items, counted before they are joined
            size = method_size(owner, obj.__name__, args, kwargs)
            if size is not None:
                allow(*size)
        result = super().call(context, obj, *args, **kwargs)
        if not isinstance(obj, Macro):  # a macro's text was counted as its buffer was joined
            spend(length(result))
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        """A string's format and format_map, their fields measured (jinja's own, else the same)."""
        if super().wrap_str_format(value) is None:
            return None
        text = value.__self__
        formatter = _EscapeFormatter(self, escape=text.escape) if isinstance(text, Markup) else _Formatter(self)
        if value.__name__ == "format_map":
            return lambda mapping: type(text)(formatter.vformat(text, (), mapping))
        return lambda *args, **kwargs: type(text)(formatter.vformat(text, args, kwargs))


def compile_sandboxed(source: str) -> jinja2.Template:
    """`source` compiled as transformers compiles it (chat_template_utils._compile_jinja_template),
    in the measured environment, unoptimized: NotJinja if it does not compile."""
    env = _Environment(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[jinja2.ext.loopcontrols],
        optimized=False,
        finalize=_finalize,
    )
    env.filters = dict(_FILTERS)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    try:
        return env.from_string(source)
    except jinja2.exceptions.TemplateError as e:
        raise NotJinja(f"{type(e).__name__}: {e}") from None
