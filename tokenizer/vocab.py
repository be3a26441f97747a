"""`--vocab-size auto`: a vocabulary size chosen for the corpus, with the reason in one line.

Measured with the default recipe (2 minutes of 2 CPU threads, bench/recipe.py, held-out bits per
byte; docs/benchmarks/2026-11-24-recipe-vocabulary.md), on four texts of 1.1 MB:

    text                     1,024 tokens   4,096 tokens   repeated spans (below)
    Tiny Shakespeare             2.153          2.166            1.1%
    King James Bible             1.565          1.560            8.3%
    Russian fortunes             1.394          1.378            8.6%
    Python's standard library    1.250          1.196           19.9%

Text that repeats itself at short range (source code, formulaic prose) gains from the longer
tokens of a larger vocabulary; verse that rarely does is best with the smaller one on a small
corpus, and every corpus of 4 MB or more takes the larger one. The measure: the share of the
positions of the corpus's first MiB that begin a 16-byte span already seen in the KiB before.

A vocabulary needs text to learn its tokens from: on 100 KB of each text (the recipe's smallest
shape, dropout 0.2, 2,000 steps of 1 thread), 512 / 1,024 / 4,096 tokens scored Shakespeare
2.163 / 2.213 / -, KJV 1.653 / 1.663 / -, Python 2.639 / 2.894 / 4.716: 195 bytes of text per
token were best, 98 worse, 24 far worse, while the 1.1 MB texts above (272 bytes a token at 4,096)
lost nothing. So no size with fewer than MIN_BYTES_PER_TOKEN bytes of corpus per token is taken.

The larger vocabulary must also make the tokens longer: its head costs a small model 4 times the
compute of the smaller's (d 64: 142 against 49 ms a step on one thread), which pays only where
the text takes fewer tokens. On text whose repeats are numbers and varied values, it hardly does.
Bytes a token at 1,024 / 4,096 tokens on the bench's 1.1 MB texts, and held-out bits per byte of
the recipe with each (2026-11-25, one thread for the char model's time, 103-112 s): CSV numbers
1.40 / 1.46, 0.663 / 1.139; key: value records 2.68 / 2.89, 0.574 / 0.602; HTML 3.01 / 3.46,
0.826 / 0.777; code and prose 1.27 to 1.54 times as long at 4,096. So 4,096 is kept only where
its tokens are LONGER_TOKENS times as long as 1,024's on the corpus's first MiB; else the
tokenizer is cut to 1,024 (first_tokens: what training at that size makes).

A script of thousands of characters is the exception to the repeats: 1,024 tokens cannot hold its
characters whole. Chinese news (1.7% repeated spans) takes 0.86 characters a 1,024 token (every
other kind of bench/corpora.py 1.40 or more), and 4,096 tokens are 1.53 times as long; the recipe
(one thread, 180 s, side by side) scored 2.260 with 1,024 and 2.130 with 4,096 tokens, while Tiny
Shakespeare (2.43 characters a token) scored 2.206 / 2.310 and Urdu (2.83) 0.950 / 0.969. So
4,096 is kept, whatever the repeats, where 1,024's tokens are shorter than WHOLE_CHARACTERS.
"""

from collections.abc import Callable

import numpy as np

from gptkit.shared.corpus import Corpus

from .bpe import Tokenizer
from .cut import first_merges

TINY, SMALL, LARGE = 512, 1024, 4096
MIN_BYTES_PER_TOKEN = 192
LARGE_CORPUS_BYTES = 4_000_000  # from here on the larger vocabulary, whatever the text
REPEATS_FOR_LARGE = 0.05  # between verse's 1% and the 8% of the texts that gained
SAMPLE_BYTES = 1 << 20
SPAN, WITHIN = 16, 1024
LONGER_TOKENS = 1.1  # LARGE's bytes a token over SMALL's, at least: between the records' 1.08 and HTML's 1.15
WHOLE_CHARACTERS = 1.0  # characters a SMALL token, at least: below it, SMALL cannot hold the script's characters


def auto_tokenizer(corpus: Corpus, train: Callable[[int], Tokenizer]) -> tuple[Tokenizer, int, str]:
    """(the tokenizer for `corpus`, the size it was chosen at, why in one line); `train(size)`
    trains a tokenizer of `size` tokens on it. Where the corpus has the text for LARGE tokens, the
    choice follows from what each size does to its first MiB."""
    if corpus.total_bytes >= LARGE_CORPUS_BYTES:
        return (
            train(LARGE),
            LARGE,
            (f"{LARGE:,}: the corpus has {corpus.total_bytes / 1e6:,.1f} MB, at least {LARGE_CORPUS_BYTES / 1e6:g} MB"),
        )
    fits = max((n for n in (TINY, SMALL, LARGE) if n * MIN_BYTES_PER_TOKEN <= corpus.total_bytes), default=TINY)
    if fits < LARGE:
        return (
            train(fits),
            fits,
            (
                f"{fits:,}, not {LARGE:,}: the corpus has {corpus.total_bytes:,} bytes, too little "
                f"text to learn {LARGE:,} tokens from (at least {MIN_BYTES_PER_TOKEN} bytes a token)"
            ),
        )
    data = _first_bytes(corpus, SAMPLE_BYTES)
    text = data.decode("utf-8", errors="ignore")
    share = repeated_span_share(data)
    # LARGE is trained only where the repeats may keep it; elsewhere SMALL, and LARGE after it only
    # for a script SMALL cannot hold (the cut of LARGE is what training SMALL makes: either way)
    large = train(LARGE) if share >= REPEATS_FOR_LARGE else None
    small = first_tokens(large, SMALL) if large is not None else train(SMALL)
    small_tokens = max(1, len(small.encode(text)))
    characters = len(text) / small_tokens
    if characters < WHOLE_CHARACTERS:
        return (
            large or train(LARGE),
            LARGE,
            (
                f"{LARGE:,}: {SMALL:,} tokens are shorter than the text's characters "
                f"({characters:.2f} characters a token, {len(set(text)):,} distinct "
                "characters): too few for its script"
            ),
        )
    repeats = (
        f"{100 * share:.1f}% of the positions begin a {SPAN}-byte span seen in the {WITHIN:,} bytes before "
        f"({'at least' if large else 'under'} {100 * REPEATS_FOR_LARGE:g}%: text that "
        f"{'repeats itself, as code and formulaic prose do' if large else 'rarely repeats itself'})"
    )
    if large is None:
        return small, SMALL, f"{SMALL:,}, not {LARGE:,}: {repeats}"
    large_tokens = max(1, len(large.encode(text)))
    longer = small_tokens / large_tokens
    lengths = (
        f"{LARGE:,} tokens are {longer:.2f} times as long as {SMALL:,}'s ({len(data) / large_tokens:.2f} against "
        f"{len(data) / small_tokens:.2f} bytes a token; at least {LONGER_TOKENS:g} pays for a head {LARGE // SMALL} "
        "times as large)"
    )
    if longer < LONGER_TOKENS:
        return small, SMALL, f"{SMALL:,}, not {LARGE:,}: {lengths}; {repeats}"
    return large, LARGE, f"{LARGE:,}: {repeats}; {lengths}"


def first_tokens(tokenizer: Tokenizer, size: int) -> Tokenizer:
    """The tokenizer of `size` tokens (special tokens included) that training on the same corpus makes:
    `tokenizer`'s cut to its first merges (cut.py); `tokenizer` itself where it has no more than `size`
    (its corpus ran out of pairs to merge)."""
    return first_merges(tokenizer, size - 256 - len(tokenizer.special_tokens))


def repeated_span_share(data: bytes) -> float:
    """The share of positions of `data` where a SPAN-byte span starts that also starts at most
    WITHIN bytes earlier (spans compared by a 64-bit hash)."""
    if len(data) <= SPAN:
        return 0.0
    values = np.frombuffer(data, np.uint8).astype(np.uint64)
    weights = np.uint64(1099511628211) ** np.arange(SPAN, dtype=np.uint64)  # FNV's prime: a polynomial hash, wrapping
    n = len(values) - SPAN + 1
    hashes = sum(values[k : k + n] * weights[k] for k in range(SPAN))  # a column at a time: 8 bytes a position
    order = np.argsort(hashes, kind="stable")  # equal spans together, each group in order of position
    grouped = hashes[order]
    same = grouped[1:] == grouped[:-1]
    distance = np.diff(order)
    return float(np.count_nonzero(same & (distance <= WITHIN))) / len(hashes)


def _first_bytes(corpus: Corpus, n: int) -> bytes:
    pieces: list[bytes] = []
    size = 0

    for piece, _ in corpus.pieces():
        pieces.append(piece.encode("utf-8"))
        size += len(pieces[-1])
        if size >= n:
            break
    return b"".join(pieces)[:n]
