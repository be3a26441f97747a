"""How text is prepared and cut before byte-pair merges: normalizers, pre-tokens, and for
the GPT-2 pattern cheaper "chunks" made of them.

A pre-tokenization pattern is the specification. Running it over every byte of a corpus is
the slowest part of a Python encoder, so with the GPT-2 pattern (the one our trainer uses)
both the encoder and the trainer first cut text into chunks with `str.split(" ")`, which
runs at C speed, and apply the pattern only to chunks they have not seen before.

Why that is exact: a space followed by a non-whitespace character always starts a new
pre-token (` ?\\p{L}+`, ` ?\\p{N}+` and ` ?[^\\s\\p{L}\\p{N}]+` take it, and no pre-token
ends in a space that is followed by a non-space), and the pre-tokens on either side of
it do not depend on the text on the other side. So the pre-tokens of a text are the
pre-tokens of its chunks, one after the other. Only a space followed by whitespace or
the end of the text is not such a boundary; `chunks()` glues the piece after it back on.

That argument is about the GPT-2 pattern. A tokenizer.json may bring any other (Llama 3's,
Qwen2's, GPT-4o's, or one of its own, which could for instance match several words at
once), so other patterns are run over the whole text (`pretokens`).
"""

import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np
import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PRETOKEN = regex.compile(GPT2_PATTERN)

# The patterns of the tokenizer.json files of Llama 3 (tiktoken's first cl100k_base), Qwen2 and GPT-4o (o200k_base).
LLAMA3_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
QWEN2_PATTERN = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# A space that is not a chunk boundary. `regex`'s \s (the pattern's) differs from `re`'s
# only at U+001C..U+001F, which `re` calls whitespace; `re` scans this much faster.
_SPACE_NOT_BOUNDARY = re.compile(r" (?=[^\S\x1c-\x1f]|\Z)")

# The last place where a text can be cut without changing its pre-tokens: before a
# whitespace character that is followed by a non-whitespace one (see `safe_cut`).
_LAST_CUT = regex.compile(r"\s(?=\S)", flags=regex.REVERSE)


def chunks(text: str) -> list[str]:
    """Cut `text` into chunks whose pre-tokens, concatenated, are the pre-tokens of `text`.

    Returns a list whose first item is the text's first chunk and whose other items each
    stand for a space followed by the item: the spaces are left out so that the common
    case is a bare `str.split(" ")`, with no string built per chunk.
    """
    pieces = text.split(" ")
    if _SPACE_NOT_BOUNDARY.search(text) is None:
        return pieces
    # Rare in prose: runs of spaces, a space before a newline or at the end. The piece
    # after such a space is glued back onto the one before it.
    glued, spaces_before, last, copied = [], 0, 0, 0
    for m in _SPACE_NOT_BOUNDARY.finditer(text):
        spaces_before += text.count(" ", last, m.start())
        last = m.start()
        after = spaces_before + 1  # index of the piece that follows this space
        glued.extend(pieces[copied:after])
        glued[-1] += " " + pieces[after]
        copied = after + 1
    glued.extend(pieces[copied:])
    return glued


def safe_cut(text: str, end: int) -> int:
    """The largest position <= `end` at which `text` can be cut into two parts that pre-tokenize
    independently, or 0 if there is none.

    Before a whitespace character that is followed by a non-whitespace one, the pattern
    always ends a pre-token (the whitespace run before it is `\\s+(?!\\S)`, the character
    itself starts the next one), whatever comes before or after.
    """
    # endpos leaves room for the lookahead to see the character after `end`.
    m = _LAST_CUT.search(text, 0, min(end + 2, len(text)))
    return m.start() if m else 0


# GPT-2's pattern for ASCII text, written for `re`, which runs it about twice as fast as `regex`:
# on ASCII, \p{L} is [A-Za-z], \p{N} is [0-9], and `regex`'s \s is [\t\n\v\f\r ].
ASCII_PRETOKEN = re.compile(
    r"""'(?:[sdmt]|ll|ve|re)| ?[A-Za-z]+| ?[0-9]+| ?[^\t\n\x0b\x0c\r A-Za-z0-9]+"""
    r"""|[\t\n\x0b\x0c\r ]+(?![^\t\n\x0b\x0c\r ])|[\t\n\x0b\x0c\r ]+"""
)

# Every place where `safe_cut` may cut: before a whitespace character followed by a non-whitespace
# one. `re` finds them at C speed; its \s adds U+001C..U+001F to the pattern's, so a text that
# holds one of those is cut by the longer expression.
_CUTS = re.compile(r"(?=\s\S)")
_INFORMATION_SEPARATORS = re.compile("[\x1c-\x1f]")
_CUTS_WITH_SEPARATORS = re.compile(r"(?=[^\S\x1c-\x1f](?:\S|[\x1c-\x1f]))")


def pieces(text: str) -> list[str]:
    """`text` cut at every place `safe_cut` allows: their pre-tokens, one after the other, are the
    text's. Every piece but the first starts at such a place, so those can be joined in any
    order and keep their pre-tokens."""
    cuts = _CUTS_WITH_SEPARATORS if _INFORMATION_SEPARATORS.search(text) else _CUTS
    return cuts.split(text)


def pretokens_of_chunks(chunks: Sequence[str]) -> tuple[list[str], list[int]]:
    """The pre-tokens of many chunks (each standing for " " + chunk) with one pattern run.

    Joined by spaces they make one text whose pre-tokens are theirs in order, since each
    joining space is followed by a non-space and so is a chunk boundary. Returns the
    pre-tokens and how many belong to each chunk.
    """
    pretokens = PRETOKEN.findall(" " + " ".join(chunks))
    pretoken_ends = np.cumsum(np.fromiter(map(len, pretokens), np.int64, len(pretokens)))
    chunk_ends = np.cumsum(np.fromiter(map(len, chunks), np.int64, len(chunks)) + 1)
    return pretokens, np.diff(np.searchsorted(pretoken_ends, chunk_ends, side="right"), prepend=0).tolist()


# -- other patterns and normalizers (HF tokenizer.json files) ----------------------------------


def pretokens(pattern: regex.Pattern, text: str) -> list[str]:
    """The pre-tokens of `text` under a compiled `pattern`, as HF `tokenizers`' Split pre-tokenizer
    with the "Isolated" behaviour makes them: each match, and each stretch of text between
    matches, is a pre-token; empty ones are dropped."""
    pieces = pattern.findall(text) if not pattern.groups else [m.group() for m in pattern.finditer(text)]
    if sum(map(len, pieces)) != len(text):  # text between matches: a pattern that does not cover every character
        pieces, last = [], 0
        for m in pattern.finditer(text):
            pieces += text[last : m.start()], m.group()
            last = m.end()
        pieces.append(text[last:])
    return [p for p in pieces if p] if "" in pieces else pieces


def _lowercase(text: str) -> str:
    # HF lowercases each character alone (Rust's char::to_lowercase); Python's str.lower() also
    # applies the final-sigma rule, so a capital sigma is lowered on its own first.
    return text.replace("Σ", "σ").lower()


NORMALIZERS = {
    "NFC": lambda text: unicodedata.normalize("NFC", text),
    "NFD": lambda text: unicodedata.normalize("NFD", text),
    "NFKC": lambda text: unicodedata.normalize("NFKC", text),
    "NFKD": lambda text: unicodedata.normalize("NFKD", text),
    "Lowercase": _lowercase,
}


def normalize(names: Iterable[str], text: str) -> str:
    """`text` through the named normalizers (keys of NORMALIZERS), in order."""
    for name in names:
        text = NORMALIZERS[name](text)
    return text


# Patterns under which a space that follows a printable ASCII character always starts a
# pre-token, whatever the text around: no alternative of theirs takes a space except as the
# first character of its match or inside a run of whitespace, and none looks behind. The
# space is also a safe cut for every normalizer of NORMALIZERS (it composes with nothing,
# and stops the reordering of combining marks), so cutting there changes no id.
_ASCII_SPACE_CUT_PATTERNS = frozenset({GPT2_PATTERN, LLAMA3_PATTERN, QWEN2_PATTERN, O200K_PATTERN})
_LAST_ASCII_SPACE = regex.compile(r"(?<=[!-~]) ", flags=regex.REVERSE)


# Line ends where a text can be cut without changing its pre-tokens: where pretokenize may begin
# the validation tail of a corpus that is one long text. GPT-2's pattern: a newline with a
# non-space character on one side (no pre-token runs from a non-space into a space, and a
# newline followed by a non-space ends its pre-token). Llama 3's, Qwen2's and GPT-4o's take a
# run of newlines whole (`\s*[\r\n]+`) and glue newlines to punctuation before them
# (`[^\s\p{L}\p{N}]+[\r\n]*`): the cut goes before a run of newlines that follows a letter
# or digit. A newline is a starter that composes with nothing, but a compatibility
# normalizer can change its neighbours' class (NFKC: "¨" to " \u0308", "⑴" to "(1)"): a cut
# of a normalized tokenizer holds only where the rule holds for the normalized neighbours too.
_LINE_CUTS = {
    GPT2_PATTERN: regex.compile(r"(?<=\S)\n|\n(?=\S)"),
    **dict.fromkeys((LLAMA3_PATTERN, QWEN2_PATTERN, O200K_PATTERN), regex.compile(r"(?<=[\p{L}\p{N}])\n")),
}


_LAST_LINE_CUTS = {pattern: regex.compile(cuts.pattern, flags=regex.REVERSE) for pattern, cuts in _LINE_CUTS.items()}


def line_cuts(pattern: str, normalizer: Sequence[str], text: str, start: int, end: int) -> list[int]:
    """Positions in [start, end] just before a newline where `text` can be cut without changing
    its pre-tokens under `pattern` and the `normalizer` names (see _LINE_CUTS); none for a
    pattern we know nothing about."""
    return list(_cuts_within(_LINE_CUTS.get(pattern), normalizer, text, start, end))


def last_line_cut(pattern: str, normalizer: Sequence[str], text: str, end: int) -> int:
    """The last of line_cuts(pattern, normalizer, text, 1, end), or 0; searched from `end`
    backwards, so it costs the distance to that line end, not the length of the text."""
    return next(_cuts_within(_LAST_LINE_CUTS.get(pattern), normalizer, text, 1, end), 0)


def _cuts_within(
    cuts: regex.Pattern | None, normalizer: Sequence[str], text: str, start: int, end: int
) -> Iterator[int]:
    if cuts is None:
        return iter(())
    # endpos leaves room for the lookahead to see the character after `end`.
    found = (m.start() for m in cuts.finditer(text, start, min(end + 2, len(text))) if m.start() <= end)
    if not normalizer:
        return found
    return (cut for cut in found if _holds_normalized(cuts, normalizer, text, cut))


def _holds_normalized(cuts: regex.Pattern, normalizer: Sequence[str], text: str, cut: int) -> bool:
    before = normalize(normalizer, text[cut - 1]) if cut else ""
    after = normalize(normalizer, text[cut + 1 : cut + 2])
    return cuts.search(before + "\n" + after, len(before), len(before) + 1 + len(after)) is not None


def cutter(pattern: str, normalized: bool) -> Callable[[str, int], int]:
    """The `safe_cut` for a tokenizer with this pattern, normalized or not: a function
    (text, end) -> the largest position <= `end` at which `text` can be cut without changing
    its ids, or 0. A pattern we know nothing about may look any distance ahead: no cut."""
    if pattern == GPT2_PATTERN and not normalized:
        return safe_cut
    return ascii_space_cut if pattern in _ASCII_SPACE_CUT_PATTERNS else no_cut


def ascii_space_cut(text: str, end: int) -> int:
    m = _LAST_ASCII_SPACE.search(text, 0, min(end + 1, len(text)))
    return m.start() if m else 0


def no_cut(text: str, end: int) -> int:
    return 0
