"""One setting, declared once: `setting(...)` makes the field of a section (train/sections.py) with
everything about it, and `Setting` reads that back with the field's type.

    device: Literal["auto", "cpu", "cuda"] = setting("auto", "Where to train; ...")
    lr: float | None = setting(None, "Peak learning rate (AdamW).", least=0, fixed_on_resume=True)

The type gives the flag's type and the choices (a Literal); `least`, `above`, `below` and `most`
the range of a number; `only_with` the setting it goes with; `fixed_on_resume` whether a resume may
change it; `recorded_after` where config.json lists it. A default of None means unset: train/settle.py
decides it. A section (train/sections.py) checks each of its values when it is made, however it is made.
"""

from __future__ import annotations

import dataclasses
import math
import typing
from collections.abc import Callable
from dataclasses import MISSING, dataclass
from typing import Any, Literal


class OnlyWith(typing.NamedTuple):
    """A setting that does something only where `setting` is `value` (`why`: said when it is refused)."""

    setting: str
    value: str
    why: str


def setting(
    default: Any,
    help: str,
    *,
    shown: str | None = None,
    metavar: str | None = None,
    expected: str | None = None,
    path: bool = False,
    least: float | None = None,
    above: float | None = None,
    below: float | None = None,
    most: float | None = None,
    check: Callable[[Any], object] | None = None,
    convert: Callable[[Any], Any] | None = None,
    only_with: OnlyWith | None = None,
    fixed_on_resume: bool = False,
    recorded_after: str | None = None,
) -> Any:
    """A field and all that is said of its setting.

    help, shown, metavar: what `gptkit train run --help` says of its flag (`shown`: the default it
        shows where that is not `default`; `metavar`: where the type's name says too little).
    expected: what a text value must be, as a refusal says it (default: text); `path`: the value is
        a path, not empty.
    least, above, below, most: a number's range (least <= v, above < v, v < below, v <= most).
    check: a function that raises SettingError for a value its type and range do not refuse.
    convert: the value as the section keeps it (a list of names, from the flag's comma-separated
        text), refusing what it cannot read; the value it gives is checked as any other.
    only_with: the setting and value it goes with; given otherwise, it is refused.
    fixed_on_resume: a resume may not change it (the checkpoints' digest holds it).
    recorded_after: config.json lists it after that setting, not in the order of the fields (where
        runs of earlier versions wrote it).
    """
    about = {
        "help": help,
        "shown": shown,
        "metavar": metavar,
        "expected": expected,
        "path": path,
        "bounds": (least, above, below, most),
        "check": check,
        "convert": convert,
        "only_with": only_with,
        "fixed_on_resume": fixed_on_resume,
        "recorded_after": recorded_after,
    }
    return dataclasses.field(default=default, metadata=about)


@dataclass(frozen=True)
class Setting:
    """A field of a section read back: its name, its type and what setting() said of it."""

    name: str
    kind: type  # bool, int, float or str: the flag's type (a union's first type but None)
    types: tuple[type, ...]  # what a value may be (None aside)
    choices: tuple[str, ...] | None  # a Literal's values
    default: Any  # MISSING: the setting is needed
    help: str
    shown: str | None
    metavar: str | None
    expected: str
    path: bool
    bounds: tuple[float | None, float | None, float | None, float | None]
    check: Callable[[Any], object] | None
    convert: Callable[[Any], Any] | None
    only_with: OnlyWith | None
    fixed_on_resume: bool
    recorded_after: str | None

    @classmethod
    def of(cls, field: dataclasses.Field, hint: Any) -> Setting:
        """The setting of `field`, a section's field of the type `hint`."""
        args = typing.get_args(hint) if typing.get_origin(hint) is not Literal else (hint,)
        types = tuple(t for t in args or (hint,) if t is not type(None))
        choices = tuple(typing.get_args(types[0])) if typing.get_origin(types[0]) is Literal else None
        types = (str,) if choices else tuple(typing.get_origin(t) or t for t in types)
        about = field.metadata
        setting = cls(
            field.name,
            types[0],
            types,
            choices,
            field.default,
            about["help"],
            about["shown"],
            about["metavar"],
            about["expected"] or "text",
            about["path"],
            about["bounds"],
            about["check"],
            about["convert"],
            about["only_with"],
            about["fixed_on_resume"],
            about["recorded_after"],
        )
        if setting.kind in (int, float) and setting.bounds[:2] == (None, None):
            raise TypeError(f"{field.name}: a number's setting needs its range (least or above)")
        return setting

    @property
    def may_be_unset(self) -> bool:
        """Whether None is a value: unset, for train/settle.py to decide."""
        return self.default is None

    @property
    def required(self) -> bool:
        return self.default is MISSING

    def problem(self, value: Any) -> str | None:
        """Why `value` cannot be this setting's, as a refusal says it after the name; None where it can."""
        if value is None and self.may_be_unset:
            return None
        if self.choices is not None:
            return None if value in self.choices else f"{value!r}: expected one of {', '.join(self.choices)}"
        if self.kind is bool:
            return None if isinstance(value, bool) else f"{value!r}: expected true or false"
        if self.kind is int:
            if not isinstance(value, bool) and isinstance(value, int) and self.within(value) and value < 2**63:
                return None
            bound = "below 2^63" if isinstance(value, int) and value >= 2**63 else self.range()
            return f"{value!r}: expected a whole number, {bound}"
        if self.kind is float:
            number = not isinstance(value, bool) and isinstance(value, (int, float))
            if number and math.isfinite(value) and self.within(value):
                return None
            return f"{value!r}: expected a finite number {self.range()}"
        if self.check is not None:  # it judges the value whole (it raises)
            self.check(value)
            return None
        if not isinstance(value, self.types) or (self.path and not value):
            return f"{value!r}: expected {self.expected}"
        return None

    def within(self, value: float) -> bool:
        least, above, below, most = self.bounds
        return (
            (least is None or least <= value)
            and (above is None or above < value)
            and (below is None or value < below)
            and (most is None or value <= most)
        )

    def range(self) -> str:
        """The range as messages say it: `1 or more`, `above 0`, `in [0, 1)`."""
        least, above, below, most = self.bounds
        if below is None and most is None:
            return f"{least:g} or more" if least is not None else f"above {above:g}"
        low = f"[{least:g}" if least is not None else f"({above:g}"
        return f"in {low}, {below:g})" if below is not None else f"in {low}, {most:g}]"


_READ: dict[type, dict[str, Setting]] = {}  # each section's, read once


def settings_of(section: type) -> dict[str, Setting]:
    """The settings of a section (a dataclass of setting() fields) by name, in the order of its fields."""
    if section not in _READ:
        hints = typing.get_type_hints(section)
        _READ[section] = {f.name: Setting.of(f, hints[f.name]) for f in dataclasses.fields(section)}
    return _READ[section]
