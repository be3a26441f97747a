"""Tokenizers in the shapes of the published Llama 3 and Qwen2 files, built with HF `tokenizers`:
what `gptkit model import-hf` and `gptkit tokenizer convert` bring in, for bench/encode_imported.py,
bench/encode.py --tokenizer and tests/unit/test_engine.py (no model's own file is downloaded).

Each is a byte-level BPE that HF's trainer learns from the texts given, with the published split
pattern (a Split pre-tokenizer, then ByteLevel without its own regex, as the files have it):

  llama3  Llama 3's pattern and `ignore_merges`; its merges rebuilt from the token ranks as
          transformers' TikTokenConverter rebuilt Meta's tiktoken encoding into tokenizer.json:
          every split of a token into two tokens is a merge, ordered by the token's rank, then by
          the ranks of its two parts
  qwen2   Qwen2's pattern and NFC normalizer; the trainer's merges, one per token
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import tokenizers
from tokenizers import Regex, decoders, normalizers, pre_tokenizers, trainers

from bench.common import iter_docs
from gptkit.shared.text import EOT
from gptkit.tokenizer import split

KINDS = {
    "llama3": {"pattern": split.LLAMA3_PATTERN, "normalizer": (), "ignore_merges": True, "every_split": True},
    "qwen2": {"pattern": split.QWEN2_PATTERN, "normalizer": ("NFC",), "ignore_merges": False, "every_split": False},
}


def hf_bpe(
    texts: Iterable[str],
    vocab_size: int,
    pattern: str,
    normalizer: tuple[str, ...] = (),
    ignore_merges: bool = False,
    every_split: bool = False,
) -> tokenizers.Tokenizer:
    """A byte-level BPE trained by HF `tokenizers` on `texts`, with `EOT` as its special token."""
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(ignore_merges=ignore_merges))
    if normalizer:
        hf.normalizer = normalizers.Sequence([getattr(normalizers, name)() for name in normalizer])
    hf.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.decoder = decoders.ByteLevel()
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=[EOT], initial_alphabet=alphabet, show_progress=False
    )
    hf.train_from_iterator(texts, trainer=trainer)
    if every_split:
        hf = tokenizers.Tokenizer.from_str(json.dumps(with_every_split(json.loads(hf.to_str()))))
    return hf


def with_every_split(data: dict) -> dict:
    """A tokenizer.json whose merges are every split of each token into two tokens, as
    transformers' TikTokenConverter writes them: by the token's rank (its id), then its parts'."""
    special = {added["content"] for added in data["added_tokens"]}
    vocab = {token: rank for token, rank in data["model"]["vocab"].items() if token not in special}
    merges = []
    for token, rank in vocab.items():
        splits = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in vocab and token[i:] in vocab]
        merges += [(rank, vocab[a], vocab[b], a, b) for a, b in splits]
    data["model"]["merges"] = [[a, b] for *_, a, b in sorted(merges)]
    return data


def build_file(kind: str, corpus: Path, vocab_size: int, out: Path, train_mb: float = 10) -> None:
    """Write a tokenizer.json of `kind` (KINDS) that HF's trainer builds from the corpus's first
    `train_mb` MB of documents; say what it is on stderr."""
    texts, size = [], 0
    for doc in iter_docs(corpus):
        texts.append(doc)
        size += len(doc.encode("utf-8"))
        if size >= train_mb * 1e6:
            break
    start = time.perf_counter()
    hf_bpe(texts, vocab_size, **KINDS[kind]).save(str(out))
    model = json.loads(out.read_text(encoding="utf-8"))["model"]
    print(
        f"tokenizer: {kind}'s shape, {len(model['vocab']):,} tokens, {len(model['merges']):,} merges, built by HF "
        f"from the first {size / 1e6:.1f} MB of {corpus.name} in {time.perf_counter() - start:.1f} s (not measured)",
        file=sys.stderr,
    )
