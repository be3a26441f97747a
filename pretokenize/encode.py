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

The manifest is the commit point (shared/shard_dir.py's ShardSet writes the directory). Shards
are written under temporary names, and only when the whole corpus is done are they renamed to
names no file of the directory has (the old dataset stays whole beside them), then the manifest
that lists them replaces the old one (renamed over it, atomically), then the shards it does not
list are removed. A run stopped at any instant, `kill -9` included, leaves the old dataset or
the new one; what a killed run left (temporary files, shards no manifest lists) the next run
removes.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError, SettingError, named
from gptkit.shared.files import StrPath, cause
from gptkit.shared.shard_set import ShardSet, check_shard_directory
from gptkit.shared.text import EOT
from gptkit.tokenizer import Tokenizer

from .split import Split, TailSplit, sizes, tail_instead, too_far
from .write import LeadingSplitTakesAll, NoTailCut, write_splits

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
    out_dir = Path(out_dir)
    eot_id = eot_id_of(tokenizer, eot_token, tokenizer_source)
    check_shard_directory(out_dir, tokenizer.fingerprint, overwrite)
    if val_corpus is not None:
        for setting, each in (("val_input", val_corpus), ("input", corpus)):
            if each.count(1)[0] == 0:
                raise SettingError(setting, f"{', '.join(map(str, each.paths))}: no documents (every file is empty)")
    else:
        documents, characters = corpus.count(split.fewest_documents())
        if documents == 0:
            raise InputError(f"{', '.join(map(str, corpus.paths))}: no documents (every file is empty)")
        if documents < split.fewest_documents():
            split = TailSplit.of(split, documents, characters)  # type: ignore[assignment]  # see below
    start = time.perf_counter()
    written: list[ShardSet] = []  # the shards of the latest encoding; an encoding again discards the earlier one's

    def encode(rule):
        if written:
            written.pop().discard()
        written.append(ShardSet(out_dir, tokenizer, eot_id, shard_tokens))
        return write_splits(
            written[-1],
            rule,
            corpus=corpus,
            val_corpus=val_corpus,
            tokenizer=tokenizer,
            eot_id=eot_id,
            workers=workers,
            quiet=quiet,
        )

    try:
        try:
            try:
                counts = encode(split)
            except LeadingSplitTakesAll as e:  # documents few or short for --val-tokens: encode again, as text
                # `split`, the rule asked, becomes the TailSplit encoded instead (as above and below)
                split = TailSplit.of(split, e.documents, characters=None)  # type: ignore[assignment]
                counts = encode(split)
        except NoTailCut:
            raise _no_tail_error(split, corpus) from None
        if val_corpus is None:
            if (tail := tail_instead(split, counts)) is not None:
                try:
                    counts, split = encode(tail), tail  # type: ignore[assignment]
                except NoTailCut:
                    counts = encode(split)  # the first split after all; the warning below says why
            _warn_if_off(split, counts, corpus)
        shards = written[-1]
        manifest = shards.manifest(
            counts, _how_made(corpus, val_corpus, split), eot_token=eot_token, tokenizer_source=tokenizer_source
        )
        manifest["seconds"] = round(time.perf_counter() - start, 3)
        shards.commit(manifest)
    except BaseException as e:
        if written:
            written[-1].discard()
        if not isinstance(e, OSError):
            raise
        detail = f"{e.filename}: {cause(e)}" if e.filename else cause(e)
        raise SettingError("out", f"{out_dir}: cannot write ({detail})") from None
    return manifest


def eot_id_of(tokenizer: Tokenizer, eot_token: str | None, tokenizer_source: StrPath | None = None) -> int | None:
    """The id of `eot_token`, a special token of the tokenizer (None: no end-of-text token)."""
    if eot_token is None:
        return None
    eot_id = tokenizer.special_tokens.get(eot_token)
    if eot_id is None:
        raise SettingError(
            "eot_token",
            f"{eot_token!r}: not a special token of {tokenizer_source or 'the tokenizer'} "
            f"(it has: {', '.join(tokenizer.special_tokens) or 'none'}); name one it has, "
            "or none (--no-eot)",
        )
    return eot_id


def _warn_if_off(split, counts, corpus):
    val, total, asked = sizes(split, counts)
    if too_far(val, total, asked):
        log.warning(
            f"{_paths(corpus)}: the validation split holds {val:,} of {total:,} tokens, {asked:,} asked: no "
            f"document start or line end begins a tail nearer that size; give --val-input"
        )


def _paths(corpus):
    return f"{corpus.paths[0]}{' ...' if len(corpus.paths) > 1 else ''}"


def _no_tail_error(split, corpus):
    setting = "val_tokens" if split.rule.val_tokens is not None else "val_fraction"
    return SettingError(
        setting,
        f"{getattr(split.rule, setting)}: {_paths(corpus)} has {split.why}, and no line end before the last "
        f"{split.target:,} {split.unit} to cut a validation tail at; give more text, more documents or "
        f"{named('val_input')}",
    )


def _how_made(corpus, val_corpus, split):
    """What the manifest records of how the shards were made: the split rule and the sources."""
    if val_corpus is not None:
        split = {"rule": "given", "text": "validation is all of --val-input, training all of --input"}
    else:
        split = split.describe()
    corpora = [corpus] if val_corpus is None else [corpus, val_corpus]
    return {
        "split": split,
        "sources": [{"path": str(p), "bytes": p.stat().st_size} for p in corpus.paths],
        **(
            {"val_sources": [{"path": str(p), "bytes": p.stat().st_size} for p in val_corpus.paths]}
            if val_corpus
            else {}
        ),
        "invalid_utf8_replaced": sum(c.invalid_utf8 for c in corpora),
    }
