"""Which documents of a corpus go to the validation split, and which to training.

`Split` holds out whole documents: a fraction of them, evenly spaced, or the leading ones up to a
number of tokens. A corpus with too few documents for that rule (one book in one .txt file) is
split as text instead (`TailSplit`): validation is its tail.

The tokens a split holds are known only once it is written: `tail_instead` says when it is too far
from the one asked (documents of very uneven sizes), and the tail to write instead.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping, Sequence, Sized
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.text import counted


@dataclass(frozen=True)
class Split:
    """Which documents are held out for validation: a fraction of them, evenly spaced, or
    the leading documents up to a number of tokens (as llm.c's first shard)."""

    val_fraction: float | None = None
    val_tokens: int | None = None

    def __post_init__(self) -> None:
        if (self.val_fraction is None) == (self.val_tokens is None):
            raise InputError("val_fraction and val_tokens: give one or the other")
        # NaN fails every comparison, so this refuses it and the infinities too.
        if self.val_fraction is not None and not (
            isinstance(self.val_fraction, numbers.Real) and 0 < self.val_fraction < 1
        ):
            raise SettingError("val_fraction", f"{self.val_fraction}: expected a number between 0 and 1, both excluded")
        if self.val_tokens is not None and not (_is_whole(self.val_tokens) and self.val_tokens >= 1):
            raise SettingError("val_tokens", f"{self.val_tokens}: expected a whole number, 1 or more")

    def describe(self) -> dict[str, object]:
        if self.val_tokens is not None:
            return {
                "rule": "leading",
                "val_tokens": self.val_tokens,
                "text": f"the first documents in input order, until validation holds at least {self.val_tokens} tokens",
            }
        f = "{}/{}".format(*self._fraction)
        return {
            "rule": "fraction",
            "val_fraction": self.val_fraction,
            "text": f"document i (0-based, in input order) is validation iff floor((i+1)*{f}) > floor(i*{f})",
        }

    def is_val(self, doc_index: int, val_tokens_so_far: int) -> bool:
        if self.val_tokens is not None:
            return val_tokens_so_far < self.val_tokens
        num, den = self._fraction
        return (doc_index + 1) * num // den > doc_index * num // den

    def fewest_documents(self) -> int:
        """The fewest documents with which this rule can leave neither split empty."""
        if self.val_tokens is not None:
            return 2
        num, den = self._fraction
        return -(-den // num)

    def asked(self, total_tokens: int) -> int:
        """The validation tokens this rule asks for, of a text of `total_tokens`."""
        if self.val_tokens is not None:
            return self.val_tokens
        num, den = self._fraction
        return -(-total_tokens * num // den)

    @functools.cached_property
    def _fraction(self) -> tuple[int, int]:
        f = Fraction(str(self.val_fraction))  # exact, so the rule is the same on every machine
        return f.numerator, f.denominator


def all_to(name: str) -> Callable[[int], str]:
    """The split of each document (by its index) where a corpus goes whole to one (--val-input)."""
    return lambda index: name


def _is_whole(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


class Held(Protocol):
    """A text kept back while it may still belong to the validation tail (write.py's)."""

    @property
    def text(self) -> str: ...
    @property
    def tokens(self) -> Sized: ...


@dataclass(frozen=True)
class TailSplit:
    """For a corpus with too few documents for `Split`'s rule: validation is the tail of the
    text, as nanoGPT cuts its Shakespeare. It is the shortest tail that holds at least `target`
    characters (the --val-fraction of the text) or tokens (--val-tokens) and begins at a document
    start or at the newline ending a line where the tokenizer says a cut changes no token
    (Tokenizer.line_cuts; the newline goes to validation). A
    document cut in two is two documents, each followed by the end-of-text token. Also the split of
    a corpus whose first split held too few or too many tokens (`tail_instead`)."""

    rule: Split
    documents: int
    target: int
    unit: str  # "characters" or "tokens"
    why: str  # why not whole documents

    @classmethod
    def of(cls, rule: Split, documents: int, characters: int | None) -> TailSplit:
        """`characters`: of the text (None: not counted, for a rule of `val_tokens`, which needs none)."""
        why = f"{counted(documents, 'document')}, too few to hold out whole ones"
        if rule.val_tokens is not None:
            return cls(rule, documents, rule.val_tokens, "tokens", why)
        assert characters is not None
        return cls(rule, documents, rule.asked(characters), "characters", why)

    def describe(self) -> dict[str, object]:
        given = (
            {"val_tokens": self.rule.val_tokens}
            if self.rule.val_tokens is not None
            else {"val_fraction": self.rule.val_fraction}
        )
        return {
            "rule": "tail",
            **given,
            "documents": self.documents,
            "val_at_least": self.target,
            "unit": self.unit,
            "text": f"{self.why}: validation is the shortest tail of the text with at least {self.target:,} "
            f"{self.unit} that begins at a document start or at the newline ending a line",
        }

    def size(self, held: Held) -> int:
        return len(held.text) if self.unit == "characters" else len(held.tokens)


def sizes(split: Split | TailSplit, counts: Mapping[str, Sequence[int]]) -> tuple[int, int, int]:
    """(validation tokens, all tokens, validation tokens asked) of an encoding."""
    val, total = counts["val"][1], counts["val"][1] + counts["train"][1]
    return val, total, (split.rule if isinstance(split, TailSplit) else split).asked(total)


def too_far(val: int, total: int, asked: int) -> bool:
    """Whether a split is too far from the one asked: validation has fewer than half the tokens
    asked, or leaves training fewer than half of the rest."""
    return 2 * val < asked or 2 * (total - val) < total - asked


def tail_instead(split: Split | TailSplit, counts: Mapping[str, Sequence[int]]) -> TailSplit | None:
    """The split to encode again by when `split` is too far from the one asked (`too_far`): the
    shortest tail with the tokens asked. None: near enough, or such a tail already."""
    if isinstance(split, TailSplit) and split.unit == "tokens":
        return None
    val, total, asked = sizes(split, counts)
    if not too_far(val, total, asked):
        return None
    if isinstance(split, TailSplit):
        held, documents, rule = f"a tail of {split.target:,} characters", split.documents, split.rule
    else:
        held, documents, rule = "whole documents", counts["val"][0] + counts["train"][0], split
    too = f"under half of the {asked:,} asked" if 2 * val < asked else "leaving training under half of the rest"
    return TailSplit(rule, documents, asked, "tokens", f"{held} held {val:,} of the {total:,} tokens, {too}")
