"""Byte-level BPE training.

Two phases. Counting: worker processes count the pre-tokens of document-aligned batches of
text (special tokens cut the text and are never counted). Merging: starting from the 256
bytes, repeatedly merge the most frequent adjacent pair. A tie goes, by default, to the
lexicographically greatest pair of byte strings, as in Stanford CS336's notes, which the
design follows; `tie_break="hf"` gives it instead to the pair HF `tokenizers`' trainer takes,
the smallest by its (rank, rank) (see `_ranks`), so that both learn the same merges from the
same text. Only the words that contain the merged pair are touched, the pair counts around
each merge are adjusted in place, and the next pair comes from a heap ordered by (count,
tie-break key), so a merge costs what it changes rather than a pass over the table.

Both phases run compiled where pip could build the C extensions (setup.py: _pretokens.c counts,
_merge_loop.c merges) and in Python below where it could not; the two give the same counts and
merges (tests/unit/test_tokenizer_train.py runs both).
"""

from __future__ import annotations

import functools
import heapq
import numbers
import re
from array import array
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from itertools import islice

import numpy as np
import regex

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.progress import Progress
from gptkit.shared.text import EOT
from gptkit.shared.workers import process_pool

from . import split
from .bpe import Tokenizer
from .files import BYTE_TO_CHAR

try:  # built at install where a C compiler is (setup.py)
    from . import _pretokens
except ImportError:
    _pretokens = None  # type: ignore[assignment]
try:
    from . import _merge_loop
except ImportError:
    _merge_loop = None  # type: ignore[assignment]

BATCH_CHARS = 1 << 17  # text per counting task: enough to amortize the hand-off, small enough to keep workers lean
MAX_VOCAB_SIZE = 2**31 - 1  # shard headers (shared/shards.py) hold the vocabulary size as an int32
TIE_BREAKS = ("lexicographic", "hf")  # the first is the default


def train_bpe(
    corpus: Corpus,
    vocab_size: int,
    special_tokens: Iterable[str] = (EOT,),
    *,
    tie_break: str = TIE_BREAKS[0],
    workers: int = 1,
    max_bytes: int | None = None,
    quiet: bool = False,
) -> Tokenizer:
    """Learn a byte-level BPE of `vocab_size` tokens (256 bytes + merges + special tokens) from a
    `Corpus`; `tie_break` picks the merge among equally frequent pairs (module docstring)."""
    special_tokens = list(special_tokens)
    if any(not s for s in special_tokens):
        raise SettingError("special_token", "'': a special token cannot be empty")
    if len(set(special_tokens)) != len(special_tokens):
        duplicate = next(s for s in special_tokens if special_tokens.count(s) > 1)
        raise SettingError("special_token", f"{duplicate!r}: given twice")
    if not isinstance(vocab_size, numbers.Integral) or isinstance(vocab_size, bool):
        raise SettingError("vocab_size", f"{vocab_size!r}: expected a whole number")
    if vocab_size < 256 + len(special_tokens):
        raise SettingError("vocab_size", f"{vocab_size}: must be at least 256 + {len(special_tokens)} special token(s)")
    if vocab_size > MAX_VOCAB_SIZE:
        raise SettingError(
            "vocab_size",
            f"{vocab_size}: at most {MAX_VOCAB_SIZE:,} (token shards hold the vocabulary size as an int32)",
        )
    if max_bytes is not None and not (isinstance(max_bytes, numbers.Integral) and max_bytes >= 1):
        raise SettingError("max_bytes", f"{max_bytes!r}: expected a whole number, 1 or more")
    _check_tie_break(tie_break)
    counts = count_pretokens(corpus, special_tokens, workers=workers, max_bytes=max_bytes, quiet=quiet)
    if not counts:
        raise InputError(f"{', '.join(map(str, corpus.paths))}: the corpus holds no text to train on")
    vocab, merges = learn_merges(counts, vocab_size - 256 - len(special_tokens), tie_break=tie_break, quiet=quiet)
    specials = {s: len(vocab) + i for i, s in enumerate(special_tokens)}
    return Tokenizer(vocab + [s.encode("utf-8") for s in special_tokens], merges, specials)


# -- counting ----------------------------------------------------------------------------------


def count_pretokens(
    corpus: Corpus,
    special_tokens: Iterable[str],
    *,
    workers: int = 1,
    max_bytes: int | None = None,
    quiet: bool = False,
) -> Counter[str]:
    """{pre-token: count} over the corpus, or over its first `max_bytes` bytes of whole documents."""
    special_re = (
        re.compile("|".join(map(re.escape, sorted(special_tokens, key=len, reverse=True)))) if special_tokens else None
    )
    progress = Progress("counting", "MB", total=corpus.total_bytes, scale=1e6, quiet=quiet)
    counts: Counter[str] = Counter()
    add = counts.update if _pretokens is None else functools.partial(_pretokens.add, counts)
    batches = _batches(corpus, max_bytes, progress)
    if _pretokens is not None:
        _classes()  # made once, before the workers fork
    if workers <= 1:
        for batch in batches:
            add(_count_batch(batch, special_re))
    else:
        with process_pool(workers) as pool:
            pending: deque[Future[dict[str, int]]] = deque()
            for batch in batches:
                pending.append(pool.submit(_count_batch, batch, special_re))
                if len(pending) > workers:  # bounded read-ahead: memory stays flat
                    add(pending.popleft().result())
            for future in pending:
                add(future.result())
    progress.update(corpus.bytes_read)
    progress.close()
    return counts


def _batches(corpus: Corpus, max_bytes: int | None, progress: Progress) -> Iterator[list[str]]:
    """Lists of texts of about BATCH_CHARS characters. A document cut into pieces by the reader
    is cut again only where that cannot change its pre-tokens (split.safe_cut)."""
    batch: list[str] = []
    size, taken, carry = 0, 0, ""
    for piece, ends_document in corpus.pieces():
        text = carry + piece
        cut = len(text) if ends_document else split.safe_cut(text, len(text) - 1)
        text, carry = text[:cut], text[cut:]
        batch.append(text)
        size += len(text)
        if max_bytes is not None:
            taken += len(text.encode("utf-8"))
        if size >= BATCH_CHARS:
            progress.update(corpus.bytes_read)
            yield batch
            batch, size = [], 0
        if ends_document and max_bytes is not None and taken >= max_bytes:
            break
    if batch:
        yield batch


def _count_batch(texts: list[str], special_re: re.Pattern[str] | None) -> dict[str, int]:
    """{pre-token: count} of the texts, special tokens cut out. Compiled: GPT-2's pattern matched by
    hand in C (_pretokens.c) with the character classes of `regex`. In Python: the texts are cut into
    `split.pieces`, which repeat (an indented keyword, a word after a space) and are counted by C
    code; then the pattern runs once over the distinct pieces that occur equally often, joined, and
    C code counts what it finds."""
    if _pretokens is not None:
        segments = [segment for text in texts for segment in special_re.split(text)] if special_re else texts
        return _pretokens.count(segments, _classes())
    piece_counts: Counter[str] = Counter()
    firsts = []  # a segment's first piece: joined to others, it could merge with the one before
    for text in texts:
        for segment in special_re.split(text) if special_re else (text,):
            pieces = split.pieces(segment)
            firsts.append(pieces[0])
            piece_counts.update(islice(pieces, 1, None))
    by_count: defaultdict[int, list[str]] = defaultdict(list)
    for piece, n in piece_counts.items():
        by_count[n].append(piece)
    del piece_counts
    counts = _pretoken_counts(by_count.pop(1, ()))
    for n, pieces in by_count.items():
        for pretoken, found in _pretoken_counts(pieces).items():
            counts[pretoken] += n * found
    counts.update(pretoken for piece in firsts for pretoken in split.PRETOKEN.findall(piece))
    return counts


@functools.cache
def _classes() -> bytes:
    """For _pretokens.count: a byte per code point, 1 for a letter (\\p{L}), 2 for a number (\\p{N}), 3
    for whitespace (\\s) and 0 for the rest, as `regex`, which runs the pattern in Python, has them."""
    every = np.arange(0x110000, dtype="<u4").tobytes().decode("utf-32-le", "surrogatepass")
    classes = bytearray(len(every))
    for value, run in enumerate((r"\p{L}+", r"\p{N}+", r"\s+"), 1):
        for m in regex.finditer(run, every):
            classes[m.start() : m.end()] = bytes([value]) * (m.end() - m.start())
    return bytes(classes)


def _pretoken_counts(pieces: Sequence[str]) -> Counter[str]:
    """{pre-token: count} of pieces that each start where the text may be cut (`split.pieces`)."""
    ascii_text = "".join(p for p in pieces if p.isascii())
    counts = Counter(split.ASCII_PRETOKEN.findall(ascii_text))
    if len(ascii_text) < sum(map(len, pieces)):
        counts.update(split.PRETOKEN.findall("".join(p for p in pieces if not p.isascii())))
    return counts


# -- merging -----------------------------------------------------------------------------------


def _check_tie_break(tie_break: str) -> None:
    if tie_break not in TIE_BREAKS:
        raise SettingError("tie_break", f"{tie_break!r}: expected one of {', '.join(TIE_BREAKS)}")


def _ranks() -> list[int]:
    """The rank of each byte among the first 256 tokens, as HF's trainer numbers them: in the
    order of their byte-level characters (files.BYTE_TO_CHAR), so printable bytes first. The
    token made by merge k ranks 256 + k, as its id."""
    ranks = [0] * 256
    for rank, byte in enumerate(sorted(range(256), key=BYTE_TO_CHAR.__getitem__)):
        ranks[byte] = rank
    return ranks


_BYTE_RANKS = _ranks()
# Each byte to 255 - byte: a str compared with another of these compares as the byte strings do, reversed.
_REVERSED_BYTES = bytes(range(255, -1, -1))


def _descending(token: bytes) -> str:
    """A str that sorts byte strings in reverse, compared in C: among equal counts the heap, a
    min-heap, then gives the greatest pair first. The end mark chr(256) exceeds every reversed
    byte, which puts a string after its extensions, as b"a" < b"ab"; and since no key is a
    prefix of another, (key_a, key_b) orders pairs as (bytes_a, bytes_b) does, reversed."""
    return token.translate(_REVERSED_BYTES).decode("latin-1") + "\u0100"


def _tie_key(tie_break: str) -> Callable[[bytes, int], int | str]:
    """The heap's key of a token from its bytes and id: the pair whose (key, key) is smallest wins a tie."""
    if tie_break == "hf":
        return lambda token, token_id: _BYTE_RANKS[token_id] if token_id < 256 else token_id
    return lambda token, token_id: _descending(token)


def learn_merges(
    pretoken_counts: Mapping[str, int], n_merges: int, *, tie_break: str = TIE_BREAKS[0], quiet: bool = False
) -> tuple[list[bytes], list[tuple[int, int]]]:
    """The vocabulary (bytes of each token) and the merges, learned from {pre-token: count}."""
    _check_tie_break(tie_break)
    encoded = [p.encode("utf-8") for p in pretoken_counts]
    freqs = list(pretoken_counts.values())
    vocab = [bytes([b]) for b in range(256)]
    progress = Progress("merging", "merges", total=n_merges, quiet=quiet)
    if _merge_loop is not None:
        byte_ranks = bytes(_BYTE_RANKS) if tie_break == "hf" else None
        merges = _merge_loop.learn(encoded, freqs, n_merges, byte_ranks, progress.update)
        vocab += (vocab[a] + vocab[b] for a, b in merges)
    else:
        merges = _python_merges(encoded, freqs, vocab, n_merges, tie_break, progress)
    progress.update(len(merges))
    progress.close()
    return vocab, merges


def _python_merges(
    encoded: list[bytes], freqs: list[int], vocab: list[bytes], n_merges: int, tie_break: str, progress: Progress
) -> list[tuple[int, int]]:
    """learn_merges' loop in Python (where _merge_loop.c could not be built), adding the merged tokens to
    `vocab`. Each word is held as a str whose characters are token ids (chr(id)): finding and replacing
    a pair are then str methods that run in C, and a pair is a 2-character str."""
    words = [e.decode("latin-1") for e in encoded]  # byte b -> chr(b)
    tie_key = _tie_key(tie_break)
    keys = [tie_key(token, token_id) for token_id, token in enumerate(vocab)]
    # pair -> the words that contain it, or once did (checked on use), each listed once.
    pair_counts, containing = _byte_pairs(encoded, freqs)
    heap = [(-count, keys[ord(pair[0])], keys[ord(pair[1])], pair) for pair, count in pair_counts.items()]
    heapq.heapify(heap)

    merges: list[tuple[int, int]] = []
    while len(merges) < n_merges and heap:
        negative_count, key_a, key_b, pair = heapq.heappop(heap)
        count = pair_counts.get(pair, 0)
        if count != -negative_count:
            # A stale entry: the pair's count fell since (counts only fall: a pair's count
            # is final when it appears), so it goes back with its current count.
            if 0 < count < -negative_count:
                heapq.heappush(heap, (-count, key_a, key_b, pair))
            continue
        a, b = map(ord, pair)
        vocab.append(vocab[a] + vocab[b])
        keys.append(tie_key(vocab[-1], len(keys)))
        merges.append((a, b))
        for new_pair, count in _merge_pair(pair, chr(len(vocab) - 1), words, freqs, pair_counts, containing).items():
            heapq.heappush(heap, (-count, keys[ord(new_pair[0])], keys[ord(new_pair[1])], new_pair))
        del pair_counts[pair]
        if len(merges) % 100 == 0:
            progress.update(len(merges))
    return merges


def _byte_pairs(encoded: list[bytes], freqs: list[int]) -> tuple[dict[str, int], dict[str, array[int]]]:
    """{pair: count} and {pair: [indices of the words holding it]} for the byte pairs of the
    words, computed in numpy (a pair of bytes has one of 65536 keys)."""
    data = np.frombuffer(b"".join(encoded), np.uint8).astype(np.int32)
    owner = np.repeat(np.arange(len(encoded), dtype=np.int32), [len(e) for e in encoded])
    inside = owner[1:] == owner[:-1]
    pair_keys, pair_owner = (data[:-1] * 256 + data[1:])[inside], owner[:-1][inside]
    del data, owner, inside
    totals = np.bincount(pair_keys, weights=np.asarray(freqs, np.float64)[pair_owner], minlength=65536)
    order = np.argsort(pair_keys, kind="stable")
    pair_keys, pair_owner = pair_keys[order], pair_owner[order]
    # Each word once per pair, however often it holds the pair: a long word listed once per
    # occurrence would be searched once per occurrence, quadratic in its length.
    first = np.ones(len(pair_keys), bool)
    first[1:] = (pair_keys[1:] != pair_keys[:-1]) | (pair_owner[1:] != pair_owner[:-1])
    pair_keys, pair_owner = pair_keys[first], pair_owner[first]
    starts = np.flatnonzero(np.diff(pair_keys, prepend=-1))
    ends = np.r_[starts[1:], len(pair_keys)]
    pair_counts: defaultdict[str, int] = defaultdict(int)
    containing: defaultdict[str, array[int]] = defaultdict(_word_list)
    for key, start, end in zip(pair_keys[starts].tolist(), starts.tolist(), ends.tolist()):
        pair = chr(key >> 8) + chr(key & 255)
        pair_counts[pair] = int(totals[key])
        containing[pair] = array("i", pair_owner[start:end].tobytes())
    return pair_counts, containing


def _word_list() -> array[int]:
    """Word indices as 4-byte machine ints: an eighth of the memory of a list of Python ints."""
    return array("i")


def _merge_pair(
    pair: str,
    new: str,
    words: list[str],
    freqs: list[int],
    pair_counts: dict[str, int],
    containing: dict[str, array[int]],
) -> dict[str, int]:
    """Replace `pair` by the token `new` in every word that holds it, adjusting the counts of
    the neighbouring pairs. Returns the pairs that appeared: those with `new` in them."""
    appeared: defaultdict[str, int] = defaultdict(int)
    appeared_in: defaultdict[str, array[int]] = defaultdict(_word_list)
    for index in containing.pop(pair):
        word = words[index]
        i = word.find(pair)
        if i < 0:
            continue  # the word lost the pair to an earlier merge
        freq = freqs[index]
        # The pairs around each occurrence disappear; str.replace below takes the same
        # occurrences: left to right, without overlap.
        previous_end, last = 0, len(word) - 2
        while i >= 0:
            if 0 < i != previous_end:  # a pair shared with the previous occurrence is counted there
                pair_counts[word[i - 1 : i + 1]] -= freq
            if i < last:
                pair_counts[word[i + 1 : i + 3]] -= freq
            previous_end = i + 2
            i = word.find(pair, previous_end)
        word = words[index] = word.replace(pair, new)
        # The pairs around each new token appear; (new, new) is counted as the second one's left pair.
        j, last = word.find(new), len(word) - 1
        while j >= 0:
            # A word is handled whole before the next, so one listed already for a pair is listed last.
            if j > 0:
                appeared[left := word[j - 1 : j + 1]] += freq
                if not (listed := appeared_in[left]) or listed[-1] != index:
                    listed.append(index)
            if j < last and word[j + 1] != new:
                appeared[right := word[j : j + 2]] += freq
                if not (listed := appeared_in[right]) or listed[-1] != index:
                    listed.append(index)
            j = word.find(new, j + 1)
    pair_counts.update(appeared)
    containing.update(appeared_in)
    return appeared
