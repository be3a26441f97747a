"""Corpora to token shards.

The parent reads documents and cuts them into jobs that worker processes encode (jobs.py); it
sends each document to the train or validation split (split.py says which) and appends it to
that split's current shard (write.py).

A corpus with too few documents for the split rule (one book in one .txt file) is split as
text instead: validation is its tail. The documents are counted first, only up to the number
the rule needs (all of them when they are fewer), so that costs a read of the text only for
such a corpus.

The tokens a split holds are known only once it is written: one that holds fewer than half the
validation tokens asked, or leaves training fewer than half of the rest (documents of very
uneven sizes), is written again as a tail of the tokens asked; if no tail can be cut, the first
split stays, with a warning.

The manifest is the commit point (shared/shard_set.py's ShardSet writes the directory, output.py commits it). Shards
are written under temporary names, and only when the whole corpus is done are they renamed to
names no file of the directory has (the old dataset stays whole beside them), then the manifest
that lists them replaces the old one (renamed over it, atomically), then the shards it does not
list are removed. A run stopped at any instant, `kill -9` included, leaves the old dataset or
the new one; what a killed run left (temporary files, shards no manifest lists) the next run
removes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import StrPath
from gptkit.shared.text import EOT
from gptkit.tokenizer import Tokenizer

from .output import Encoding, Output, first_of, how_made
from .split import Split, TailSplit, sizes, tail_instead, too_far
from .write import Counts, LeadingSplitTakesAll, NoTailCut, write_splits

log = logging.getLogger(__name__)

DEFAULT_SHARD_TOKENS = 100_000_000


def encode_corpus(
    corpus: Corpus,
    tokenizer: Tokenizer,
    out_dir: StrPath,
    *,
    split: Split = Split(val_fraction=0.01),
    val_corpus: Corpus | None = None,
    shard_tokens: int = DEFAULT_SHARD_TOKENS,
    workers: int = 1,
    eot_token: str | None = EOT,
    tokenizer_source: StrPath | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> dict[str, Any]:
    """Encode every document of `corpus` into shards in `out_dir`; returns the manifest.

    With `val_corpus`, all of it is the validation split and all of `corpus` the training one;
    otherwise `split` says which documents are held out, or the tail of the text is (`TailSplit`)
    when there are too few documents for it."""
    output = Output(
        out_dir,
        tokenizer,
        eot_token=eot_token,
        tokenizer_source=tokenizer_source,
        shard_tokens=shard_tokens,
        overwrite=overwrite,
    )
    first: Split | TailSplit = split  # the rule encoded first: a TailSplit where the documents are too few for it
    if val_corpus is not None:
        for setting, each in (("val_input", val_corpus), ("input", corpus)):
            if each.count(1)[0] == 0:
                raise SettingError(setting, f"{', '.join(map(str, each.paths))}: no documents (every file is empty)")
    else:
        documents, characters = corpus.count(split.fewest_documents())
        if documents == 0:
            raise InputError(f"{', '.join(map(str, corpus.paths))}: no documents (every file is empty)")
        if documents < split.fewest_documents():
            first = TailSplit.of(split, documents, characters)

    def encode_by(rule: Split | TailSplit) -> Counts:
        return write_splits(
            output.shards(),
            rule,
            corpus=corpus,
            val_corpus=val_corpus,
            tokenizer=tokenizer,
            eot_id=output.eot_id,
            workers=workers,
            quiet=quiet,
        )

    def encode() -> Encoding:
        rule = first
        try:
            try:
                counts = encode_by(rule)
            except LeadingSplitTakesAll as e:  # documents few or short for --val-tokens: encode again, as text
                rule = TailSplit.of(split, e.documents, characters=None)
                counts = encode_by(rule)
        except NoTailCut:
            raise _no_tail_error(rule, corpus) from None
        if val_corpus is None:
            if (tail := tail_instead(rule, counts)) is not None:
                try:
                    counts, rule = encode_by(tail), tail
                except NoTailCut:
                    counts = encode_by(rule)  # the first split after all; the warning below says why
            _warn_if_off(rule, counts, corpus)
        made = (
            how_made(rule, corpus.paths, []) if val_corpus is None else how_made(None, corpus.paths, val_corpus.paths)
        )
        made["invalid_utf8_replaced"] = sum(c.invalid_utf8 for c in (corpus, val_corpus) if c is not None)
        return counts, made

    return output.write(encode)


def _warn_if_off(split: Split | TailSplit, counts: Mapping[str, Sequence[int]], corpus: Corpus) -> None:
    val, total, asked = sizes(split, counts)
    if too_far(val, total, asked):
        log.warning(
            f"{first_of(corpus.paths)}: the validation split holds {val:,} of {total:,} tokens, {asked:,} asked: no "
            f"document start or line end begins a tail nearer that size; give --val-input"
        )


def _no_tail_error(split: Split | TailSplit, corpus: Corpus) -> SettingError:
    assert isinstance(split, TailSplit)  # only a tail can find no place to begin
    setting = "val_tokens" if split.rule.val_tokens is not None else "val_fraction"
    return SettingError(
        setting,
        f"{getattr(split.rule, setting)}: {first_of(corpus.paths)} has {split.why}, and no line end before the last "
        f"{split.target:,} {split.unit} to cut a validation tail at; give more text, more documents or "
        f"{named('val_input')}",
    )
