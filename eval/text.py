"""`gptkit eval text` as a library: a checkpoint's loss (nats per token) and bits per byte on text
files (`text_loss`) or on a data directory's validation split (`val_loss`), read in the windows
eval/loss.py makes, as training validation reads its split. With `copy_from`, the model is mixed
with an n-gram over a training split and the text before each token (eval/copy.py); with `adapt`,
the model learns from the text as it reads it (eval/adapt.py). Either way the model alone is
reported beside the mixture.

    from gptkit.eval import text_loss, val_loss

    result = text_loss("runs/demo/latest", ["book.txt"], quiet=True)
    print(f"{result.loss:.4f} nats/token, {result.bpb:.4f} bits/byte")
    copied = val_loss("runs/demo/latest", "out/stories", copy_from="out/stories")
    print(copied.bpb, copied.model_bpb, copied.verbatim_share)
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

import numpy as np
import torch

from gptkit.model.generate import prompt_ids
from gptkit.shared.errors import SettingError, named
from gptkit.shared.files import looked_up
from gptkit.shared.progress import Progress
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.shared.text import decode_utf8
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import cut_split, cut_to

from . import copy
from .adapt import LEARNING_RATES, adapted_losses
from .loss import Loss, eval_sequences, loss_sums, summary, target_sums, text_windows, token_bytes, token_losses
from .results import check_out, recorded, write_results
from .scorer import Checkpoint, Scorer, StrPath, check_count, checkpoint_path, scorer_of

log = logging.getLogger(__name__)

BATCH_SIZE = 32  # windows a forward pass, unless given
# The share of the scored tokens in long spans of copy_from's training split above which the
# result is said to measure recall: see docs/eval.md for why this much.
VERBATIM_WARNING = 0.1


@dataclass(frozen=True)
class TextLoss:
    """The loss and bits per byte of the scored text: the model's, or with `copy_from` or `adapt`
    the mixture's, with the model's alone beside them (None without either)."""

    loss: float  # nats per predicted token
    bpb: float  # bits per byte of the text the predicted tokens stand for
    tokens: int  # predicted tokens (of chat data, those its mask counts: the assistant's)
    bytes: int  # their bytes of text (special tokens have none)
    model_loss: float | None = None  # the model alone, with copy_from or adapt
    model_bpb: float | None = None
    copy_tokens: int | None = None  # with copy_from: the tokens of its training split
    verbatim_share: float | None = None  # with copy_from: the share of the tokens in spans of copy.MAX_N+ found there
    adapt_learning_rates: tuple[float, ...] | None = None  # with adapt: the rates of the model's learning copies


def text_loss(
    checkpoint: Checkpoint,
    inputs: StrPath | Sequence[StrPath],
    *,
    copy_from: StrPath | None = None,
    adapt: bool = False,
    batch_size: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    out: StrPath | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> TextLoss:
    """The loss of `checkpoint` (a checkpoint directory, or a Scorer) on the UTF-8 text file
    `inputs` or files, each framed as a training document (after the token the checkpoint puts
    before a text) and all of it scored: its windows, the last one shorter. `batch_size` windows a
    forward pass (None: 32), not with `adapt`, which reads one window at a time; `device`,
    `threads`: as Scorer.load; `out`: a results file to write too (results.py), replacing only an
    earlier one unless `overwrite`; `quiet`: no progress line on stderr."""
    _check_batch(batch_size, adapt)
    if isinstance(inputs, (str, PathLike)):
        inputs = [inputs]
    if not inputs:
        raise SettingError("input", "is needed: one or more text files")
    for path in inputs:
        if not looked_up(path, "input").is_file():
            raise SettingError("input", f"{path}: no such file")
    _check_copy_from(copy_from)
    check_out(
        out,
        overwrite,
        [*(("input", path) for path in inputs), ("copy_from", copy_from), ("checkpoint", checkpoint_path(checkpoint))],
    )
    scorer = scorer_of(checkpoint, device, threads)
    windows = [w for w in text_windows(_framed_text(inputs, scorer), scorer.context_length) if w is not None and len(w)]
    result = _score(scorer, windows, [None] * len(windows), copy_from, adapt, batch_size, quiet)
    if out is not None:
        write_results(out, _record(scorer, {"input": [recorded(path, "input") for path in inputs]}, copy_from, result))
    return result


def val_loss(
    checkpoint: Checkpoint,
    data: StrPath,
    *,
    eval_tokens: int | None = None,
    copy_from: StrPath | None = None,
    adapt: bool = False,
    batch_size: int | None = None,
    device: str = "auto",
    threads: int | None = None,
    out: StrPath | None = None,
    overwrite: bool = False,
    quiet: bool = False,
) -> TextLoss:
    """The loss of `checkpoint` on the validation split of the pretokenize directory `data`
    (encoded with the checkpoint's tokenizer) in whole windows: all of it, or its first
    `eval_tokens` tokens, the loss `train --eval-tokens N` logs. Chat data is scored on the tokens
    its mask counts (the assistant's) alone, as training validates it. The other arguments: as
    text_loss."""
    _check_batch(batch_size, adapt)
    check_count("eval_tokens", eval_tokens)
    looked_up(data, "data")
    _check_copy_from(copy_from)
    check_out(out, overwrite, [("data", data), ("copy_from", copy_from), ("checkpoint", checkpoint_path(checkpoint))])
    scorer = scorer_of(checkpoint, device, threads)
    split = _split(data, "data", "val", scorer, scorer.context_length)
    sequences, mask = eval_sequences(split, scorer.context_length, eval_tokens or 2**62)
    if mask is not None and not mask[:, 1:].any():
        raise SettingError(
            "data",
            f"{data}: its first {mask.size - len(mask) + 1:,} validation tokens hold no token "
            f"the mask counts (the assistant's): score more with {named('eval_tokens')}",
        )
    result = _score(scorer, [sequences], [mask], copy_from, adapt, batch_size, quiet)
    if out is not None:
        write_results(
            out, _record(scorer, {"data": recorded(data, "data"), "eval_tokens": eval_tokens}, copy_from, result)
        )
    return result


def _check_batch(batch_size, adapt):
    check_count("batch_size", batch_size)
    if adapt and batch_size is not None:
        raise SettingError(
            "batch_size",
            f"{batch_size}: not with {named('adapt')}, which reads one window at a time "
            "(it learns from each before scoring the next)",
        )


def _check_copy_from(copy_from):
    if copy_from is not None and not looked_up(copy_from, "copy_from").is_dir():
        raise SettingError("copy_from", f"{copy_from}: no such directory")


def _score(scorer: Scorer, windows, masks, copy_from, adapt, batch_size, quiet) -> TextLoss:
    """The TextLoss of the windows (a list of (n, T + 1) arrays) and their masks (None: every
    target counts)."""
    copy_tokens = (
        None
        if copy_from is None
        else _copy_tokens(copy_from, scorer, scored=sum(part[:, 1:].size for part in windows) + 1)
    )
    progress = Progress("scoring", "windows", total=sum(map(len, windows)), quiet=quiet)
    if copy_from is None and not adapt:
        result = TextLoss(**summary(_model_sums(scorer, windows, masks, batch_size or BATCH_SIZE, progress))._asdict())
    else:
        loss, alone, verbatim = _token_scores(
            scorer, windows, masks, batch_size or BATCH_SIZE, progress, adapt, copy_tokens
        )
        result = TextLoss(
            **loss._asdict(),
            model_loss=alone.loss,
            model_bpb=alone.bpb,
            copy_tokens=None if copy_tokens is None else len(copy_tokens),
            verbatim_share=verbatim,
            adapt_learning_rates=LEARNING_RATES if adapt else None,
        )
    progress.close()
    if not math.isfinite(result.loss):
        raise scorer.refusal(
            f"its loss is {result.loss} (its weights hold NaN or infinite values, or its "
            "computation overflows): nothing to score"
        )
    if result.verbatim_share is not None and result.verbatim_share >= VERBATIM_WARNING:
        log.warning(
            f"--copy-from {copy_from}: {result.verbatim_share:.1%} of the scored tokens lie in spans of "
            f"{copy.MAX_N}+ tokens found verbatim in its training split, which the n-gram copies at almost no "
            "cost: the result measures recall of the training text, not prediction; score text held out from "
            "it (its val split)"
        )
    return result


def _record(scorer: Scorer, source, copy_from, result: TextLoss):
    """What a results file holds of `result`: the checkpoint, the text (`source`), the model alone,
    what it copied from and the rates it adapted at where it did, then the loss."""
    record = {"task": "text", "checkpoint": recorded(scorer.checkpoint, "checkpoint"), **source}
    if result.model_loss is not None:
        record |= {"model_loss": result.model_loss, "model_bpb": result.model_bpb}
    if copy_from is not None:
        record |= {
            "copy_from": recorded(copy_from, "copy_from"),
            "copy_tokens": result.copy_tokens,
            "verbatim_share": result.verbatim_share,
        }
    if result.adapt_learning_rates is not None:
        record["adapt_learning_rates"] = list(result.adapt_learning_rates)
    return record | {"loss": result.loss, "bpb": result.bpb, "tokens": result.tokens, "bytes": result.bytes}


def _model_sums(scorer: Scorer, windows, masks, batch_size, progress):
    """loss_sums over each part of the windows, with its masks, added up."""
    nbytes = torch.tensor(token_bytes(scorer.tokenizer), device=scorer.device)
    sums, done = torch.zeros(4, dtype=torch.float64, device=scorer.device), 0
    for part, mask in zip(windows, masks):
        sums += loss_sums(
            scorer.model, part, nbytes, batch_size, scorer.autocast, scorer.each_batch(progress, done), mask
        )
        done += len(part)
    return sums


def _token_scores(
    scorer: Scorer, windows, masks, batch_size, progress, adapt, copy_tokens
) -> tuple[Loss, Loss, float | None]:
    """The Loss of the model adapting as it reads (`adapt`) and mixed with the n-gram over
    `copy_tokens` and the scored stream before each target (None: not), the model's alone, and the
    share of the counted targets inside spans that `copy_tokens` holds verbatim (None: no copying)."""
    if adapt:
        losses, alone = adapted_losses(
            scorer.model, windows, scorer.autocast, scorer.device, scorer.each_batch(progress)
        )
    else:
        parts, done = [], 0
        for part in windows:
            parts.append(
                token_losses(
                    scorer.model, part, batch_size, scorer.autocast, scorer.device, scorer.each_batch(progress, done)
                )
            )
            done += len(part)
        losses = alone = np.concatenate(parts)
    targets = np.concatenate([part[:, 1:].ravel() for part in windows]).astype(np.int64)
    counted = None if masks[0] is None else np.concatenate([mask[:, 1:].ravel() for mask in masks]).astype(np.float64)
    verbatim = None
    if copy_tokens is not None:
        stream = np.concatenate([copy_tokens, windows[0][:1, 0], targets])
        p_model = np.exp(-losses)
        matches = copy.ngram(stream, len(copy_tokens) + 1, p_model)
        losses = -np.log(np.maximum(copy.mixed(p_model, matches), 1e-300))
        verbatim = float(np.average(matches.verbatim, weights=counted))
    nbytes = np.array(token_bytes(scorer.tokenizer))
    return (
        summary(target_sums(losses, targets, nbytes, counted)),
        summary(target_sums(alone, targets, nbytes, counted)),
        verbatim,
    )


def _framed_text(inputs, scorer: Scorer) -> list[int]:
    """The ids of the inputs, each framed as a training document starts: after the token the
    checkpoint puts before a text (model/generate.py, prompt_ids; gptkit's: its end-of-text id)."""
    ids = []
    for path in inputs:
        try:
            text, replaced = decode_utf8(Path(path).read_bytes())
        except OSError as e:
            raise SettingError("input", f"{path}: cannot read ({e.strerror})") from None
        if replaced:
            log.warning(f"--input {path}: {replaced} byte(s) that are not UTF-8 replaced by U+FFFD")
        ids += prompt_ids(scorer.tokenizer, text, scorer.bos_id)
    if len(ids) < 2:
        raise SettingError(
            "input",
            f"{' '.join(map(str, inputs))}: {len(ids)} token(s), nothing to score (a token is "
            "predicted from the one before it)",
        )
    return ids


def _copy_tokens(copy_from, scorer: Scorer, scored):
    """All the tokens of the training split of `copy_from`, in order: with the `scored` tokens
    after them, at most eval/copy.py's MAX_STREAM."""
    train = _split(copy_from, "copy_from", "train", scorer, 1)
    if train.starts[-1] + scored > copy.MAX_STREAM:
        raise SettingError(
            "copy_from",
            f"{copy_from}: {int(train.starts[-1]):,} training tokens and {scored:,} to "
            f"score, more than the {copy.MAX_STREAM:,} eval/copy.py counts",
        )
    return np.asarray(train.span(0, int(train.starts[-1])), np.int64)


def _split(data, setting, split, scorer: Scorer, context_length) -> ShardData:
    """One split of the data directory `data` (the value of `setting`), in the ids of the
    checkpoint's tokenizer: the data's own, or, where the checkpoint's tokenizer is a cut of the
    data's (a run trained with --merges, or the recipe's trials' choice), the data's mapped to the
    cut as the trainer maps them (tokenizer/cut.py)."""
    directory, tokenizer = ShardDir(data), scorer.tokenizer
    read, unmerge = tokenizer, None
    if directory.fingerprint not in (None, tokenizer.fingerprint):
        if directory.tokenizer.is_file() and not directory.has_mask:  # chat data's mask follows its own ids
            read = Tokenizer.from_file(directory.tokenizer)
            unmerge = cut_to(read, tokenizer)
        if unmerge is None:
            model = "the model" if scorer.checkpoint is None else f"the checkpoint {scorer.checkpoint}"
            raise SettingError(
                setting,
                f"{data}: encoded with tokenizer {directory.fingerprint}, {model} is for tokenizer "
                f"{tokenizer.fingerprint}",
            )
    try:
        shards = ShardData(directory, split, read.vocab_size, read.fingerprint, context_length)
    except SettingError as e:  # ShardData names the setting training's `data`
        raise SettingError(setting, e.marked) from None
    return shards if unmerge is None else cut_split(shards, unmerge, context_length)
