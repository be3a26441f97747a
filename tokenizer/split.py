"""How text is cut before byte-pair merges: GPT-2 pre-tokens, and cheaper "chunks" made of them.

The GPT-2 pattern is the specification. Running it over every byte of a corpus is the
slowest part of a Python encoder, so both the encoder and the trainer first cut text into
chunks with `str.split(" ")`, which runs at C speed, and apply the pattern only to chunks
they have not seen before.

Why that is exact: a space followed by a non-whitespace character always starts a new
pre-token (` ?\\p{L}+`, ` ?\\p{N}+` and ` ?[^\\s\\p{L}\\p{N}]+` take it, and no pre-token
ends in a space that is followed by a non-space), and the pre-tokens on either side of
it do not depend on the text on the other side. So the pre-tokens of a text are the
pre-tokens of its chunks, one after the other. Only a space followed by whitespace or
the end of the text is not such a boundary; `chunks()` glues the piece after it back on.
"""
import re

import numpy as np
import regex

GPT2_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
PRETOKEN = regex.compile(GPT2_PATTERN)

# A space that is not a chunk boundary. `regex`'s \s (the pattern's) differs from `re`'s
# only at U+001C..U+001F, which `re` calls whitespace; `re` scans this much faster.
_SPACE_NOT_BOUNDARY = re.compile(r" (?=[^\S\x1c-\x1f]|\Z)")

# The last place where a text can be cut without changing its pre-tokens: before a
# whitespace character that is followed by a non-whitespace one (see `safe_cut`).
_LAST_CUT = regex.compile(r"\s(?=\S)", flags=regex.REVERSE)


def chunks(text):
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


def safe_cut(text, end):
    """The largest position <= `end` at which `text` can be cut into two parts that pre-tokenize
    independently, or 0 if there is none.

    Before a whitespace character that is followed by a non-whitespace one, the pattern
    always ends a pre-token (the whitespace run before it is `\\s+(?!\\S)`, the character
    itself starts the next one), whatever comes before or after.
    """
    # endpos leaves room for the lookahead to see the character after `end`.
    m = _LAST_CUT.search(text, 0, min(end + 2, len(text)))
    return m.start() if m else 0


def pretokens_of_chunks(chunks):
    """The pre-tokens of many chunks (each standing for " " + chunk) with one pattern run.

    Joined by spaces they make one text whose pre-tokens are theirs in order, since each
    joining space is followed by a non-space and so is a chunk boundary. Returns the
    pre-tokens and how many belong to each chunk.
    """
    pretokens = PRETOKEN.findall(" " + " ".join(chunks))
    pretoken_ends = np.cumsum(np.fromiter(map(len, pretokens), np.int64, len(pretokens)))
    chunk_ends = np.cumsum(np.fromiter(map(len, chunks), np.int64, len(chunks)) + 1)
    return pretokens, np.diff(np.searchsorted(pretoken_ends, chunk_ends, side="right"), prepend=0).tolist()
