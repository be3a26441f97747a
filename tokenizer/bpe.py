"""The byte-level BPE tokenizer: text to ids and back.

Encoding follows GPT-2 and HF `tokenizers`: special tokens split the text first (longest
match wins); the rest is normalized if the tokenizer has normalizers (NFC, Lowercase, ...),
then cut into pre-tokens by its pattern (GPT-2's unless it came from a file with another);
the UTF-8 bytes of each pre-token are merged pair by pair, the pair with the lowest merge
rank first (with `ignore_merges`, a pre-token that is itself a token is that token).

Speed comes from caches and bulk operations rather than a faster inner loop: chunks of
text seen before (see `split.chunks`) map straight to their ids, packed as bytes, through
`map` and `bytes.join`, which run no Python bytecode per chunk; the chunks not seen before
are pre-tokenized together, and their new pre-tokens merged together in numpy (`_bpe_many`).
"""

from __future__ import annotations

import functools
import hashlib
import heapq
import json
import operator
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import accumulate, chain, compress, islice, repeat
from typing import Any, Literal, TypeVar

import numpy as np
import regex

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath
from gptkit.shared.workers import process_pool

from . import split
from .engine import Engine, engine_for
from .files import hf_json, read_gpt2_files, read_hf_json, write_json
from .pair_ranks import NO_RANK, PairRanks

_CACHE_LIMIT = 1 << 19  # entries per cache: bounds its memory at roughly 100 MB
_LONG = 256  # characters: longer pre-tokens are merged by _bpe_long

# The special tokens that encoding takes as themselves: "all", or their strings (others are plain text).
AllowedSpecial = Literal["all"] | Iterable[str]
_T = TypeVar("_T")


class _Cache(dict):
    """A dict of bounded size: when new entries would not fit, the oldest half goes
    (dicts keep insertion order; frequent keys come back at once)."""

    def remember(self, entries: dict[str, bytes]) -> None:
        if len(self) + len(entries) > _CACHE_LIMIT:
            for old in list(islice(self, len(self) // 2)):
                del self[old]
        self.update(entries)


class Tokenizer:
    """A byte-level BPE vocabulary with its merges and special tokens.

    `vocab[i]` is the bytes of token i (for a special token, its UTF-8 text); `merges` lists
    the pairs of ids in rank order; every merge must make a token of the vocabulary, and
    every single byte must be a token. `pattern` cuts text into pre-tokens; `normalizer`
    names the steps of split.NORMALIZERS applied first, in order; `ignore_merges` is HF's
    option of that name. `engine`: encode with tiktoken where it computes the same ids (engine.py);
    False: always with our own encoder, the reference.
    """

    def __init__(
        self,
        vocab: Iterable[bytes],
        merges: Iterable[Sequence[int]],
        special_tokens: Mapping[str, int],
        *,
        pattern: str = split.GPT2_PATTERN,
        normalizer: Iterable[str] = (),
        ignore_merges: bool = False,
        engine: bool = True,
    ) -> None:
        self.vocab = list(vocab)
        self.merges = [tuple(m) for m in merges]
        self.special_tokens = dict(special_tokens)
        self.pattern, self.normalizer, self.ignore_merges = pattern, tuple(normalizer), ignore_merges
        self._normalize = functools.partial(split.normalize, self.normalizer) if self.normalizer else None
        self._cut = split.cutter(pattern, normalized=bool(self.normalizer))
        if pattern == split.GPT2_PATTERN:
            self._chunks_of, self._pretokens_of = split.chunks, split.PRETOKEN.findall
        else:  # the whole text is one chunk: see split.py for why chunks are GPT-2's
            compiled = regex.compile(pattern)
            self._chunks_of, self._pretokens_of = _one_chunk, functools.partial(split.pretokens, compiled)
        ids = {b: i for i, b in enumerate(self.vocab) if i not in self.special_tokens.values()}
        missing = [b for b in range(256) if bytes([b]) not in ids]
        if missing:
            raise InputError(f"not a byte-level vocabulary: no token for byte {missing[0]:#04x}")
        self._byte_ids = np.array([ids[bytes([b])] for b in range(256)], np.int64)
        self._whole_token_ids = (
            {b: np.array([i], np.uint32).tobytes() for b, i in ids.items()} if ignore_merges else None
        )
        merged = []
        for rank, (a, b) in enumerate(self.merges):
            if self.vocab[a] + self.vocab[b] not in ids:
                raise InputError(
                    f"merge {rank} ({self.vocab[a]!r}, {self.vocab[b]!r}) makes no token of the vocabulary"
                )
            merged.append(ids[self.vocab[a] + self.vocab[b]])
        self._ranks = PairRanks(self.merges, self.vocab_size)
        self._merged_ids = np.array(merged, np.int64)  # by rank
        self._pretoken_ids = _Cache()
        # A chunk other than the first of its text stands for " " + chunk (see split.chunks).
        self._chunk_ids = _Cache()
        self._special_bytes = {s: np.array([i], np.uint32).tobytes() for s, i in self.special_tokens.items()}
        self._special_res: dict[frozenset[str], re.Pattern[str] | None] = {}
        self._use_engine = engine

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    @functools.cached_property
    def fingerprint(self) -> str:
        """A short hash of what decides the ids: the vocabulary, the merges, the special tokens, and
        the pattern, normalizer and ignore_merges where they are not the defaults (which keeps the
        fingerprints of GPT-2-pattern tokenizers what they were before those options existed)."""
        decisive: dict[str, Any] = {
            "vocab": [t.hex() for t in self.vocab],
            "merges": self.merges,
            "special_tokens": sorted(self.special_tokens.items()),
        }
        if self.pattern != split.GPT2_PATTERN:
            decisive["pattern"] = self.pattern
        if self.normalizer:
            decisive["normalizer"] = self.normalizer
        if self.ignore_merges:
            decisive["ignore_merges"] = True
        canonical = json.dumps(decisive, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    # -- files -------------------------------------------------------------------------------

    @classmethod
    def from_file(cls, path: StrPath) -> Tokenizer:
        """Load a `tokenizer.json` in the format of HF `tokenizers` (byte-level BPE); a file with an
        option we do not apply is refused (InputError naming it) rather than encoded differently."""
        vocab, merges, special_tokens, options = read_hf_json(path)
        return cls._checked(path, vocab, merges, special_tokens, **options)

    @classmethod
    def from_gpt2_files(
        cls, vocab_path: StrPath, merges_path: StrPath, special_tokens: Iterable[str] | None = None
    ) -> Tokenizer:
        """Load GPT-2's `vocab.json` and `merges.txt`; the named tokens of the vocabulary are special
        (each must be in it), by default GPT-2's end of text where the vocabulary has it."""
        return cls._checked(merges_path, *read_gpt2_files(vocab_path, merges_path, special_tokens))

    @classmethod
    def _checked(
        cls,
        path: StrPath,
        vocab: list[bytes],
        merges: list[tuple[int, int]],
        special_tokens: dict[str, int],
        **options: Any,
    ) -> Tokenizer:
        try:
            return cls(vocab, merges, special_tokens, **options)
        except InputError as e:  # the tokenizer finds what is wrong, the file is named here
            raise InputError(f"{path}: {e}") from None

    def to_json(self) -> dict:
        """The content of this tokenizer's `tokenizer.json` (HF `tokenizers` format)."""
        return hf_json(self)

    def save(self, path: StrPath) -> None:
        """Write `tokenizer.json` (HF `tokenizers` format) atomically."""
        write_json(path, self.to_json())

    # -- encoding ----------------------------------------------------------------------------

    def safe_cut(self, text: str, end: int) -> int:
        """The largest position <= `end` at which `text` can be cut into two parts whose ids,
        one after the other, are the ids of `text`; 0 if there is none (or none this
        tokenizer's pattern and normalizer are known to allow). Special tokens aside."""
        return self._cut(text, end) if end > 0 else 0  # a negative end position would count from the end

    def line_cuts(self, text: str, start: int = 0, end: int | None = None) -> list[int]:
        """The positions in [start, end] (default: all of `text`) just before a newline where
        `text` can be cut into two parts whose ids, one after the other, are the ids of `text`
        (none for a pattern we know nothing about). Special tokens aside."""
        return split.line_cuts(self.pattern, self.normalizer, text, start, len(text) if end is None else end)

    def last_line_cut(self, text: str, end: int) -> int:
        """The last of `line_cuts(text, 1, end)`, or 0, found from `end` backwards."""
        return split.last_line_cut(self.pattern, self.normalizer, text, end)

    def encode(self, text: str, allowed_special: AllowedSpecial = "all") -> list[int]:
        """The ids of `text`. Special tokens in `allowed_special` ("all", or a set of their
        strings) are encoded as themselves; any others as plain text."""
        return self._encode_one(text, self._special_re(allowed_special))

    def encode_iterable(self, texts: Iterable[str], allowed_special: AllowedSpecial = "all") -> Iterator[int]:
        """Yield the ids of the concatenation of `texts` (e.g. a file object), in bounded memory.

        Each piece is cut where the cut cannot change the result (`safe_cut`), and never
        inside or just before a possible special token; the rest waits for the next piece.
        """
        special_re = self._special_re(allowed_special)
        longest_special = max(map(len, self.special_tokens), default=1) if special_re else 1
        carry = ""
        for text in texts:
            buffer = carry + text
            # Room after the cut for the character there and a whole special token after it (below).
            cut = self.safe_cut(buffer, len(buffer) - longest_special - 1)
            if special_re and cut:
                # A special token straddling the cut ends before the cut or starts after it.
                for m in special_re.finditer(buffer, max(0, cut - longest_special), cut + longest_special):
                    if m.start() < cut < m.end():
                        cut = m.start()
                # Nor just before whitespace that a special token follows: that whitespace ends its
                # text, where the pattern takes the whole run (`\s+(?!\S)`), not the part after the cut.
                while cut and special_re.match(buffer, cut + 1):
                    cut = self.safe_cut(buffer, cut - 1)
            yield from self._encode_one(buffer[:cut], special_re)
            carry = buffer[cut:]
        yield from self._encode_one(carry, special_re)

    def encode_batch(
        self, texts: Sequence[str], allowed_special: AllowedSpecial = "all", workers: int | None = None
    ) -> list[list[int]]:
        """The ids of each of `texts`, encoded together in `workers` processes (default: all cores)."""
        workers = workers or os.cpu_count() or 1
        special_re = self._special_re(allowed_special)
        if workers <= 1 or len(texts) < 2:
            packed: Iterable[bytes] = self._encode(texts, special_re)
        else:
            step = -(-len(texts) // workers)
            parts = [texts[i : i + step] for i in range(0, len(texts), step)]
            self.build_engine()
            with process_pool(workers, _set_worker_tokenizer, (self,)) as pool:
                packed = chain.from_iterable(pool.map(_encode_part, parts, repeat(special_re)))
        return [np.frombuffer(ids, np.uint32).tolist() for ids in packed]

    def encode_packed(self, texts: Sequence[str], allowed_special: AllowedSpecial = "all") -> list[bytes]:
        """The ids of each of `texts` as native uint32 bytes (`numpy.frombuffer` reads them):
        for writing token files without building a Python int per token."""
        return self._encode(texts, self._special_re(allowed_special))

    def _special_re(self, allowed_special: AllowedSpecial) -> re.Pattern[str] | None:
        allowed = self.special_tokens.keys() if allowed_special == "all" else frozenset(allowed_special)
        key = frozenset(allowed)
        if key not in self._special_res:
            # Longest first, so that a special token that starts another one never hides it.
            alternatives = sorted(allowed, key=len, reverse=True)
            self._special_res[key] = re.compile("|".join(map(re.escape, alternatives))) if alternatives else None
        return self._special_res[key]

    def build_engine(self) -> bool:
        """Build the tiktoken engine now where it applies (engine.py; else it is built by the first
        encode): before worker processes fork, so that they share it. True where it applies."""
        return self._engine is not None

    @functools.cached_property
    def _engine(self) -> Engine | None:
        if not self._use_engine:
            return None
        return engine_for(
            self.vocab,
            frozenset(self.special_tokens.values()),
            self._byte_ids,
            self._ranks,
            self._merged_ids,
            pattern=self.pattern,
            ignore_merges=self.ignore_merges,
        )

    def _encode_one(self, text: str, special_re: re.Pattern[str] | None) -> list[int]:
        return np.frombuffer(self._encode([text], special_re)[0], np.uint32).tolist()

    def _encode(self, texts: Sequence[str], special_re: re.Pattern[str] | None) -> list[bytes]:
        """The ids of each of `texts`, packed as native uint32 bytes."""
        if special_re:
            segments = [special_re.split(t) for t in texts]
            specials = [[*map(self._special_bytes.__getitem__, special_re.findall(t)), b""] for t in texts]
        else:
            segments, specials = [[t] for t in texts], [[b""]] * len(texts)
        if self._normalize:  # special tokens are matched in the text as given, the rest is normalized (as HF does)
            segments = [list(map(self._normalize, s)) for s in segments]
        if self._engine:  # each segment's ids, then the special token after it
            return [b"".join(chain.from_iterable(zip(map(self._engined, s), p))) for s, p in zip(segments, specials)]
        return self._encode_own(segments, specials)

    def _engined(self, segment: str) -> bytes:
        """A segment's ids by the engine, or by our own encoder where the engine gives up on it."""
        assert self._engine is not None
        ids = self._engine(segment)
        return ids if ids is not None else self._encode_own([[segment]], [[b""]])[0]

    def _encode_own(self, segments: list[list[str]], specials: list[list[bytes]]) -> list[bytes]:
        """Our own encoder: the ids of each text's `segments`, each followed by its special token's.
        The work is shared by all the texts: the chunks not seen before are learned together,
        whatever texts and special tokens separate them, and the ids are joined as bytes."""
        chunked = list(map(self._chunks_of, chain.from_iterable(segments)))
        heads = list(map(self._pretokens_of, (c[0] for c in chunked)))
        head_ids = map(b"".join, _groups(self._ids_of_pretokens(list(chain.from_iterable(heads))), map(len, heads)))
        tails = list(chain.from_iterable(islice(c, 1, None) for c in chunked))
        tail_ids = list(map(self._chunk_ids.get, tails))
        if None in tail_ids:
            learned = self._learn_chunks(set(compress(tails, map(operator.is_, tail_ids, repeat(None)))))
            tail_ids = list(map(learned.get, tails, tail_ids))
        pieces = zip(head_ids, _groups(tail_ids, [len(c) - 1 for c in chunked]), chain.from_iterable(specials))
        encoded = []
        for count in map(len, segments):
            parts: list[bytes] = []
            for head, tail, special in islice(pieces, count):
                parts += head, *tail, special  # type: ignore[arg-type]  # no tail id is None: learned filled them in
            encoded.append(b"".join(parts))
        return encoded

    def _learn_chunks(self, chunks: Iterable[str]) -> dict[str, bytes]:
        """The ids of many new chunks, computed at once and remembered."""
        chunks = list(chunks)
        pretokens, sizes = split.pretokens_of_chunks(chunks)
        learned = dict(zip(chunks, map(b"".join, _groups(self._ids_of_pretokens(pretokens), sizes))))
        self._chunk_ids.remember(learned)
        return learned

    def _ids_of_pretokens(self, pretokens: list[str]) -> list[bytes]:
        """The ids of each pre-token (packed bytes), merging the ones not in the cache."""
        ids = list(map(self._pretoken_ids.get, pretokens))
        if None in ids:
            unseen = list(set(compress(pretokens, map(operator.is_, ids, repeat(None)))))
            learned = dict(zip(unseen, self._merge_pretokens(unseen)))
            self._pretoken_ids.remember(learned)
            ids = list(map(learned.get, pretokens, ids))
        return ids  # type: ignore[return-value]  # no id is None: learned filled them in

    def _merge_pretokens(self, pretokens: list[str]) -> list[bytes]:
        """The ids of each pre-token, packed: with `ignore_merges` a pre-token that is a token is
        that token; the others merged, most together in numpy rounds, the long ones (whose
        rounds would be as many as their merges) one merge at a time."""
        if self.ignore_merges:
            assert self._whole_token_ids is not None  # made with ignore_merges
            whole = [self._whole_token_ids.get(p.encode("utf-8")) for p in pretokens]
            merged = iter(self._merge_pretokens_by_rank([p for p, w in zip(pretokens, whole) if w is None]))
            return [w if w is not None else next(merged) for w in whole]
        return self._merge_pretokens_by_rank(pretokens)

    def _merge_pretokens_by_rank(self, pretokens: list[str]) -> list[bytes]:
        short = iter(self._bpe_many([p for p in pretokens if len(p) <= _LONG]))
        return [self._bpe_long(p) if len(p) > _LONG else next(short) for p in pretokens]

    def _bpe_many(self, pretokens: list[str]) -> list[bytes]:
        """Merge the bytes of many pre-tokens at once, in numpy.

        Each round, every pre-token merges all occurrences of its lowest-ranked pair, left
        to right ("aaaa" with the pair "a a" gives "aa" "aa", as in HF `tokenizers`); the
        pre-tokens with nothing left to merge drop out.
        """
        if not pretokens:
            return []
        encoded = [p.encode("utf-8") for p in pretokens]
        ids = self._byte_ids[np.frombuffer(b"".join(encoded), np.uint8)]
        owner = np.repeat(np.arange(len(encoded)), [len(e) for e in encoded])  # the pre-token of each position
        finished_ids, finished_owner = [], []
        while len(ids):
            rank = np.full(len(ids), NO_RANK)  # the rank of the pair starting at each position
            rank[:-1] = np.where(owner[1:] == owner[:-1], self._ranks.lookup(ids[:-1], ids[1:]), NO_RANK)
            starts = np.flatnonzero(np.r_[True, owner[1:] != owner[:-1]])
            sizes = np.diff(np.r_[starts, len(ids)])
            lowest = np.repeat(np.minimum.reduceat(rank, starts), sizes)
            finished = lowest == NO_RANK
            finished_ids.append(ids[finished])
            finished_owner.append(owner[finished])
            # In a run of overlapping occurrences ("a a a" for "a a"), every other one, from the left.
            hit = (rank == lowest) & ~finished
            position = np.arange(len(ids))
            run_start = np.maximum.accumulate(np.where(hit & ~np.r_[False, hit[:-1]], position, 0))
            hit &= (position - run_start) % 2 == 0
            ids[hit] = self._merged_ids[rank[hit]]
            keep = ~finished & ~np.r_[False, hit[:-1]]
            ids, owner = ids[keep], owner[keep]
        ids, owner = np.concatenate(finished_ids), np.concatenate(finished_owner)
        order = np.argsort(owner, kind="stable")
        packed = ids[order].astype(np.uint32).tobytes()
        ends = np.cumsum(np.bincount(owner, minlength=len(encoded))) * 4
        return list(map(packed.__getitem__, map(slice, [0, *ends[:-1].tolist()], ends.tolist())))

    def _bpe_long(self, pretoken: str) -> bytes:
        """Merge one long pre-token a pair at a time, from a heap of (rank, position), as HF
        `tokenizers` does: n log n, where numpy rounds (one per merge step) would be near n^2."""
        ranks = self._rank_of_pair
        ids = self._byte_ids[np.frombuffer(pretoken.encode("utf-8"), np.uint8)].tolist()
        n = len(ids)
        before, after = list(range(-1, n - 1)), list(range(1, n + 1))  # the live neighbours; -1 or n: none
        heap = [(rank, i) for i, pair in enumerate(zip(ids, ids[1:])) if (rank := ranks.get(pair)) is not None]
        heapq.heapify(heap)
        while heap:
            rank, i = heapq.heappop(heap)
            j = after[i]
            if ids[i] is None or j == n or ranks.get((ids[i], ids[j])) != rank:
                continue  # a neighbour merged since this entry was pushed
            ids[i], ids[j] = int(self._merged_ids[rank]), None
            after[i] = after[j]
            if after[j] < n:
                before[after[j]] = i
            for k in (before[i], i):  # the two pairs the new token is part of
                if k >= 0 and after[k] < n and (new_rank := ranks.get((ids[k], ids[after[k]]))) is not None:
                    heapq.heappush(heap, (new_rank, k))
        return np.array([t for t in ids if t is not None], np.uint32).tobytes()

    @functools.cached_property
    def _rank_of_pair(self) -> dict[tuple[int, ...], int]:
        return {pair: rank for rank, pair in enumerate(self.merges)}

    # -- decoding ----------------------------------------------------------------------------

    def decode_bytes(self, ids: Iterable[int]) -> bytes:
        ids = list(ids)
        if ids and not (0 <= min(ids) and max(ids) < len(self.vocab)):
            bad = next(i for i in ids if not 0 <= i < len(self.vocab))
            raise InputError(f"token id {bad} is not in the vocabulary (0..{len(self.vocab) - 1})")
        return b"".join(map(self.vocab.__getitem__, ids))

    def decode(self, ids: Iterable[int]) -> str:
        """The text of `ids`; bytes that are not valid UTF-8 become U+FFFD."""
        return self.decode_bytes(ids).decode("utf-8", errors="replace")


def _one_chunk(text: str) -> list[str]:
    return [text]


def _groups(items: list[_T], sizes: Iterable[int]) -> Iterator[list[_T]]:
    """Consecutive slices of the list `items`, of the given sizes."""
    bounds = [0, *accumulate(sizes)]
    return map(items.__getitem__, map(slice, bounds, bounds[1:]))


_worker_tokenizer: Tokenizer | None = None


def _set_worker_tokenizer(tokenizer: Tokenizer) -> None:
    global _worker_tokenizer
    _worker_tokenizer = tokenizer


def _encode_part(texts: list[str], special_re: re.Pattern[str] | None) -> list[bytes]:
    assert _worker_tokenizer is not None  # set in each worker (process_pool's initializer)
    return _worker_tokenizer._encode(texts, special_re)  # packed bytes: cheap to send back
