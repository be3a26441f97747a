"""tiktoken as the encoding engine, for the tokenizers whose ids it computes exactly.

tiktoken (OpenAI's encoder, with a Rust core) cuts text with the tokenizer's pattern, takes a
pre-token that is itself a token as that token, and otherwise merges its bytes one pair at a
time: the adjacent pair whose bytes make the lowest-ranked token, the leftmost of equals. HF
`tokenizers` (and our encoder, bpe.py) merges the pair of the lowest-ranked merge, the leftmost
of equals, and takes a pre-token whole only with `ignore_merges` (Llama 3 sets it). When are the
two the same? Take each token alone and merge its bytes as HF does:

- If that ends in the token itself, the merge that joins its last two parts is its "live" merge.
  In any text, a pair of adjacent parts whose bytes make a token T is exactly T's last two parts
  alone: the parts inside T's span were merged as they are alone, since the pairs crossing its
  edges were never the lowest (they would have been merged, and the span would not be T's). So
  that pair is T's live merge, the one HF would apply, and giving T the rank of its live merge
  makes tiktoken choose as HF chooses. Other merges that make T never apply; a vocabulary whose
  tokens several merges make (Llama 3's file lists every split of a token) is no obstacle.
- If it ends in two parts, tiktoken would join them (their bytes make a token) where HF cannot
  (no merge joins them): no engine.
- If it ends in three or more, no text ever holds T as two adjacent parts, so tiktoken never
  makes T by merging; it does take a pre-token that is T whole, as HF does only with
  `ignore_merges`. Without it: no engine.

Those are the vocabularies the engine takes (`engine_for` checks every token, 0.1 s per 50,000
tokens in numpy; none longer than 512 bytes, which real vocabularies do not have). A token's rank is its id where ids follow the live merges' order (tokenizers
trained by us or by HF, and files converted from a tiktoken encoding), else a rank is made and
mapped back to the id. The normalizer runs before the engine, as before our own encoder.

The pattern must cut text as `regex` (our encoder's, and HF's Oniguruma on these patterns) does
under tiktoken's regex engine (fancy-regex over Rust's regex). Their case folding (`(?i:'s)` and
"ſ"), anchors (`$` before a final newline), character-class operators (`&&`, `--`) and Unicode
tables differ, and tiktoken drops text that no match covers where HF keeps it as a pre-token. So
the engine takes the patterns proven alike by the tests (tests/unit/test_engine.py) against HF,
each of which matches every character: GPT-2's, Llama 3's, Qwen2's and GPT-4o's (SAFE_PATTERNS).
Every other tokenizer is encoded by our own encoder (bpe.py), the reference the tests compare the
engine with. tiktoken keeps no cache, so its memory does not grow with the text.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

import numpy as np

from . import split
from .pair_ranks import NO_RANK, PairRanks

# text (no special tokens) -> its ids as native uint32 bytes; None where tiktoken gives up on the text:
# its regex engine stops past a backtracking limit, which a long run of whitespace (a million
# spaces) reaches under the patterns' `\s+(?!\S)`. Our own encoder takes that text.
Engine = Callable[[str], bytes | None]

SAFE_PATTERNS = frozenset({split.GPT2_PATTERN, split.LLAMA3_PATTERN, split.QWEN2_PATTERN, split.O200K_PATTERN})
# Bytes: a vocabulary with a longer token stays on our encoder, so that checking it (one numpy round
# per merge of its longest token) costs at most this many passes over the vocabulary's bytes.
_LONGEST = 512


def engine_for(
    vocab: Sequence[bytes],
    special_ids: Collection[int],
    byte_ids: np.ndarray,
    pair_ranks: PairRanks,
    merged_ids: np.ndarray,
    *,
    pattern: str,
    ignore_merges: bool,
) -> Engine | None:
    """A tiktoken encoder computing this tokenizer's ids, or None where it would not compute them
    exactly. `byte_ids`: the id of each byte; `pair_ranks`: the rank of each merge (a pair of ids);
    `merged_ids`: the id each merge makes, by rank."""
    if pattern not in SAFE_PATTERNS:
        return None
    tokens = np.array([i for i in range(len(vocab)) if i not in special_ids and len(vocab[i]) > 1], np.int64)
    if len({vocab[i] for i in tokens.tolist()}) != len(tokens):
        return None  # two ids for the same bytes: tiktoken has one
    if any(len(vocab[i]) > _LONGEST for i in tokens.tolist()):
        return None
    parts, last = merged_alone([vocab[i] for i in tokens.tolist()], byte_ids, pair_ranks, merged_ids)
    if (parts == 2).any() or (not ignore_merges and (parts > 2).any()):
        return None
    import tiktoken  # here: 0.1 s of import that a tokenizer it cannot serve does not pay

    made = parts == 1
    by_live_merge = tokens[made][np.argsort(last[made])]
    ids = np.concatenate([byte_ids, tokens])
    if (np.diff(by_live_merge) > 0).all():  # ids in the live merges' order: the ids are the ranks
        ranks = ids
    else:  # bytes 0..255, a live merge k 256 + k, the tokens no merge makes after them (in any order)
        unmade = 256 + len(merged_ids) + np.cumsum(~made) - 1
        ranks = np.concatenate([np.arange(256), np.where(made, 256 + last, unmade)])
    mergeable = dict(zip([bytes([b]) for b in range(256)] + [vocab[i] for i in tokens.tolist()], ranks.tolist()))
    # The Rust core's buffer of native uint32s: no Python int per token. tiktoken's own wrappers
    # replace a lone surrogate by U+FFFD, where our encoder raises UnicodeEncodeError (a test holds
    # the two alike). The core looks for special tokens first; with none, its empty pattern matches
    # at every character (8.4 MB/s against 15.5 on Python source), so it gets one it never takes.
    never = {"<|gptkit: never taken|>": int(ranks.max()) + 1}
    encoding = tiktoken.Encoding("gptkit", pat_str=pattern, mergeable_ranks=mergeable, special_tokens=never)
    buffer, allowed = encoding._core_bpe.encode_to_tiktoken_buffer, set[str]()
    rank_to_id = None
    if ranks is not ids:
        rank_to_id = np.zeros(int(ranks.max()) + 1, np.uint32)
        rank_to_id[ranks] = ids

    def encode(text: str) -> bytes | None:
        try:
            ranked = buffer(text, allowed)
        except ValueError as e:
            if isinstance(e, UnicodeError):  # a lone surrogate: refused as our encoder refuses it
                raise
            return None
        return bytes(ranked) if rank_to_id is None else rank_to_id[np.frombuffer(ranked, np.uint32)].tobytes()

    return encode


def merged_alone(
    tokens: Sequence[bytes], byte_ids: np.ndarray, pair_ranks: PairRanks, merged_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Each token's bytes merged alone as HF `tokenizers` merges them: one merge at a time, the
    lowest-ranked pair first, the leftmost of equals. Returns how many parts each ends in and
    the rank of its last merge (-1: none). All tokens at once, one merge each per numpy round;
    bpe.py's rounds, which join every occurrence of the lowest pair at once, would differ where
    a merge makes a pair ranked below it."""
    ids = byte_ids[np.frombuffer(b"".join(tokens), np.uint8)]
    owner = np.repeat(np.arange(len(tokens)), [len(t) for t in tokens])  # the token of each part
    parts, last = np.zeros(len(tokens), np.int64), np.full(len(tokens), -1, np.int64)
    while len(ids):
        rank = np.full(len(ids), NO_RANK)  # the rank of the pair starting at each part
        same = owner[1:] == owner[:-1]
        rank[:-1] = np.where(same, pair_ranks.lookup(ids[:-1], ids[1:]), NO_RANK)
        starts = np.flatnonzero(np.r_[True, ~same])
        sizes = np.diff(np.r_[starts, len(ids)])
        lowest = np.minimum.reduceat(rank, starts)
        done = lowest == NO_RANK
        parts[owner[starts[done]]] = sizes[done]
        if done.all():
            break
        hits = np.flatnonzero(rank == np.repeat(np.where(done, -1, lowest), sizes))
        first = hits[np.r_[True, owner[hits[1:]] != owner[hits[:-1]]]]  # each token's leftmost lowest pair
        ids[first] = merged_ids[rank[first]]
        last[owner[first]] = rank[first]
        keep = ~np.repeat(done, sizes)
        keep[first + 1] = False
        ids, owner = ids[keep], owner[keep]
    return parts, last
