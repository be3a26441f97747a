"""tiktoken as the encoding engine, for the tokenizers whose ids it computes exactly.

tiktoken (OpenAI's encoder, with a Rust core) cuts text with the tokenizer's pattern, takes a
pre-token that is itself a token as that token, and otherwise merges its bytes rank by rank:
each step joins the adjacent pair whose bytes make the lowest-ranked token. Our encoder, as HF
`tokenizers`, joins the pair of the lowest-ranked merge. For a vocabulary that byte-pair merges
made, token by token, the two are the same rule once a token's rank is the rank of the merge
that made it: that is how tiktoken's own `gpt2` encoding gives GPT-2's ids.

So the engine takes a tokenizer whose every token besides the 256 bytes and the special
tokens is made by exactly one merge, with GPT-2's pattern (the one our trainer uses: `regex`
and tiktoken's fancy-regex read it alike), no normalizer and no `ignore_merges`. It ranks the
bytes 0..255 and merge k 256 + k, and maps ranks to the tokenizer's ids where they differ.
Every other tokenizer is encoded by our own encoder (bpe.py), which stays the reference the
tests compare the engine with. tiktoken keeps no cache, so its memory does not grow with the text.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import split

Engine = Callable[[str], bytes]  # text (no special tokens) -> its ids as native uint32 bytes


def engine_for(
    vocab: Sequence[bytes], n_special: int, byte_ids: np.ndarray, merged_ids: np.ndarray, *, pattern: str, plain: bool
) -> Engine | None:
    """A tiktoken encoder computing this tokenizer's ids, or None where it would not compute them
    exactly. `byte_ids`: the id of each byte; `merged_ids`: the id each merge makes, by rank;
    `plain`: no normalizer and no ignore_merges."""
    if pattern != split.GPT2_PATTERN or not plain:
        return None
    made = set(merged_ids.tolist())
    if len(made) != len(merged_ids) or made & set(byte_ids.tolist()) or len(vocab) - n_special != 256 + len(made):
        return None  # a token no merge makes, or one that two make: ranks would not follow merges
    import tiktoken  # here: 0.1 s of import that a tokenizer it cannot serve does not pay

    rank_to_id = np.concatenate([byte_ids, merged_ids]).astype(np.uint32)
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update((vocab[token_id], 256 + rank) for rank, token_id in enumerate(merged_ids.tolist()))
    encoding = tiktoken.Encoding("gptkit", pat_str=pattern, mergeable_ranks=ranks, special_tokens={})
    # The Rust core's encode_ordinary: tiktoken's own wrapper of it replaces a lone surrogate by U+FFFD,
    # where our encoder raises UnicodeEncodeError (a test holds the two alike); encode_to_numpy takes
    # its slower special-token path (8.5 MB/s against 13 on Python source).
    encode = encoding._core_bpe.encode_ordinary
    if np.array_equal(rank_to_id, np.arange(len(rank_to_id))):
        return lambda text: np.array(encode(text), np.uint32).tobytes()
    return lambda text: rank_to_id[encode(text)].tobytes()
