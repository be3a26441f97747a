"""`gptkit eval`: score a checkpoint on text or on multiple-choice items. Run `gptkit eval --help`."""
import contextlib
import json
import logging
import math
import time
from pathlib import Path

import click
from click.core import ParameterSource

from gptkit.shared.cli import CONTEXT, Group, overwrite_option, threads_option, version_option
from gptkit.shared.errors import InputError
from gptkit.shared.files import atomic_write, check_apart, check_output, looked_up, resolved
from gptkit.shared.jsonfile import read_json
from gptkit.shared.progress import Progress
from gptkit.shared.text import decode_utf8

from .tasks import HELLASWAG_FILE, download_hellaswag, read_choice, read_hellaswag

log = logging.getLogger(__name__)

RESULTS_FORMAT = "gptkit-eval"  # in every --out: how a result of ours tells itself from a user's file
# The share of the scored tokens in long spans of --copy-from's training split above which the
# result is said to measure recall: see docs/eval.md for why this much.
VERBATIM_WARNING = 0.1


@click.group(cls=Group, context_settings=CONTEXT)
@version_option
def cli():
    """Score a checkpoint: its loss on any text (`text`), its accuracy on HellaSwag (`hellaswag`,
    after `download hellaswag`) or on multiple-choice items of your own (`choice`)."""


def _scoring_options(command):
    """The options of every command that scores a checkpoint, in the order --help lists them."""
    options = [
        click.option("--checkpoint", required=True, metavar="DIR",
                     help="A checkpoint directory (a run's latest, or any of its checkpoints)."),
        click.option("--batch-size", type=click.IntRange(min=1), default=32, show_default=True, metavar="N",
                     help="Sequences a forward pass (windows of text, or an item's rows: its context and one choice)."),
        click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True),
        threads_option("Threads of torch's CPU kernels.", measured=True),
        click.option("--out", metavar="FILE",
                     help="Also write the scores, with the checkpoint and the input, to this JSON file."),
        overwrite_option("an earlier result of gptkit eval"),
        click.option("--quiet", "-q", is_flag=True, help="No progress display."),
    ]
    for option in reversed(options):  # the option decorated last is listed first
        command = option(command)
    return command


limit_option = click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Score the first N items only.")


@cli.command()
@click.option("--input", "inputs", multiple=True, metavar="FILE", help="A UTF-8 text file, scored as a training document "
              "(after the token the checkpoint puts before a text: its end-of-text id). Repeatable; extra paths may "
              "follow it.")
@click.argument("more_inputs", nargs=-1, metavar="[FILE]...")
@click.option("--data", metavar="DIR", help="Instead: the validation split of a pretokenize directory (encoded with the "
              "checkpoint's tokenizer), in the windows training validation reads.")
@click.option("--eval-tokens", type=click.IntRange(min=1), metavar="N",
              help="With --data: its first N tokens, as `train --eval-tokens N` scores them.  [default: all of the split]")
@click.option("--copy-from", metavar="DIR", help="Mix the model with an unbounded n-gram over the training split of this "
              "pretokenize directory (the checkpoint's tokenizer's) and the text scored before each token, as compressors "
              "copy: the model alone is reported beside it.")
@click.option("--adapt", is_flag=True, help="Let the model learn from the text as it scores it, as a compressor adapts "
              "(dynamic evaluation): after each window, copies of it take a step of SGD on it, and each token's probability "
              "is their mixture with the model as trained, weighted by how each predicted the text before it. One window at "
              "a time: not with --batch-size. The model alone is reported beside it.")
@_scoring_options
def text(inputs, more_inputs, data, eval_tokens, copy_from, adapt, checkpoint, batch_size, device, threads, out, overwrite,
         quiet):
    """Loss (nats per token) and bits per byte of text, read in consecutive windows of the model's
    context as training validation reads its split; with --copy-from, of the model and what it
    copies together (eval/copy.py); with --adapt, of the model learning as it reads (eval/adapt.py)."""
    inputs += more_inputs
    if bool(inputs) == bool(data):
        raise InputError("--input and --data: give one or the other" if data else "--input or --data: give one")
    if eval_tokens is not None and not data:
        raise InputError("--eval-tokens: only with --data (the text of --input is scored whole)")
    if adapt and click.get_current_context().get_parameter_source("batch_size") is ParameterSource.COMMANDLINE:
        raise InputError("--batch-size: not with --adapt, which reads one window at a time (it learns from each before "
                         "scoring the next)")
    for path in inputs:
        if not looked_up(path, "input").is_file():
            raise InputError(f"--input {path}: no such file")
    if data is not None:
        looked_up(data, "data")
    if copy_from is not None and not looked_up(copy_from, "copy_from").is_dir():
        raise InputError(f"--copy-from {copy_from}: no such directory")
    _check_out(out, overwrite, [("--input", path) for path in inputs] + [("--data", data), ("--copy-from", copy_from),
                                                                          ("--checkpoint", checkpoint)])
    # imports torch: here, once the arguments are checked, so --help and a bad flag answer at once (torch takes 2-3 s)
    from .adapt import LEARNING_RATES
    from .copy import MAX_N
    from .loss import eval_sequences, summary, text_windows

    scorer = _Scorer(checkpoint, device, threads)
    context = scorer.model.config.context_length
    if data:
        sequences, mask = eval_sequences(_val_split(data, scorer), context, eval_tokens or 2**62)
        if mask is not None and not mask[:, 1:].any():
            raise InputError(f"--data {data}: its first {mask.size - len(mask) + 1:,} validation tokens hold no token the mask "
                             "counts (the assistant's): score more with --eval-tokens")
        windows, masks = [sequences], [mask]
        source = {"data": str(resolved(data, "data")), "eval_tokens": eval_tokens}
    else:
        windows = [w for w in text_windows(_framed_text(inputs, scorer), context) if w is not None and len(w)]
        masks = [None] * len(windows)
        source = {"input": [str(resolved(path, "input")) for path in inputs]}
    copy_tokens = None if copy_from is None else \
        _copy_tokens(copy_from, scorer, scored=sum(part[:, 1:].size for part in windows) + 1)
    progress = Progress("scoring", "windows", total=sum(map(len, windows)), quiet=quiet)
    if copy_from is None and not adapt:
        loss = summary(_model_sums(scorer, windows, masks, batch_size, progress))
    else:
        loss, model_alone, verbatim = _token_scores(scorer, windows, masks, batch_size, progress, adapt, copy_tokens)
        source |= {"model_loss": model_alone.loss, "model_bpb": model_alone.bpb}
        if copy_from:
            source |= {"copy_from": str(resolved(copy_from, "copy_from")), "copy_tokens": len(copy_tokens),
                       "verbatim_share": verbatim}
        if adapt:
            source["adapt_learning_rates"] = list(LEARNING_RATES)
    progress.close()
    if not math.isfinite(loss.loss):
        raise InputError(f"--checkpoint {checkpoint}: its loss is {loss.loss} (its weights hold NaN or infinite values, or "
                         "its computation overflows): nothing to score")
    beside = ["adapting"] if adapt else []
    if copy_from:
        beside.append(f"copying from {len(copy_tokens):,} training tokens; {verbatim:.1%} of the scored tokens in spans of "
                      f"{MAX_N}+ found there verbatim")
        if verbatim >= VERBATIM_WARNING:
            log.warning(f"--copy-from {copy_from}: {verbatim:.1%} of the scored tokens lie in spans of {MAX_N}+ tokens found "
                        "verbatim in its training split, which the n-gram copies at almost no cost: the result measures "
                        "recall of the training text, not prediction; score text held out from it (its val split)")
    _report(out, {"task": "text", "checkpoint": str(resolved(checkpoint, "checkpoint")), **source, **loss._asdict()},
            f"loss {loss.loss:.4f} nats/token, {loss.bpb:.4f} bits/byte ({loss.tokens:,} tokens, {loss.bytes:,} bytes of text)"
            + (f"; the model alone {source['model_loss']:.4f}, {source['model_bpb']:.4f} ({' and '.join(beside)})"
               if beside else ""))


def _model_sums(scorer, windows, masks, batch_size, progress):
    """loss_sums over each part of the windows, with its masks, added up."""
    import torch

    from .loss import loss_sums, token_bytes

    nbytes = torch.tensor(token_bytes(scorer.tokenizer), device=scorer.device)
    sums, done = torch.zeros(4, dtype=torch.float64, device=scorer.device), 0
    for part, mask in zip(windows, masks):
        sums += loss_sums(scorer.model, part, nbytes, batch_size, scorer.autocast, scorer.each_batch(progress, done), mask)
        done += len(part)
    return sums


def _token_scores(scorer, windows, masks, batch_size, progress, adapt, copy_tokens):
    """The Loss of the model adapting as it reads (`adapt`) and mixed with the n-gram over
    `copy_tokens` and the scored stream before each target (None: not), the model's alone, and the
    share of the counted targets inside spans that `copy_tokens` holds verbatim (None: no copying)."""
    import numpy as np

    from . import copy
    from .adapt import adapted_losses
    from .loss import summary, target_sums, token_bytes, token_losses

    if adapt:
        losses, alone = adapted_losses(scorer.model, windows, scorer.autocast, scorer.device, scorer.each_batch(progress))
    else:
        parts, done = [], 0
        for part in windows:
            parts.append(token_losses(scorer.model, part, batch_size, scorer.autocast, scorer.device,
                                      scorer.each_batch(progress, done)))
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
    return (summary(target_sums(losses, targets, nbytes, counted)), summary(target_sums(alone, targets, nbytes, counted)),
            verbatim)


def _framed_text(inputs, scorer):
    """The ids of the inputs, each framed as a training document starts: after the token the
    checkpoint puts before a text (model/generate.py, prompt_ids; gptkit's: its end-of-text id)."""
    from gptkit.model.generate import prompt_ids

    ids = []
    for path in inputs:
        try:
            text, replaced = decode_utf8(Path(path).read_bytes())
        except OSError as e:
            raise InputError(f"--input {path}: cannot read ({e.strerror})") from None
        if replaced:
            log.warning(f"--input {path}: {replaced} byte(s) that are not UTF-8 replaced by U+FFFD")
        ids += prompt_ids(scorer.tokenizer, text, scorer.bos_id)
    if len(ids) < 2:
        raise InputError(f"--input {' '.join(inputs)}: {len(ids)} token(s), nothing to score (a token is predicted from "
                         "the one before it)")
    return ids


def _val_split(data, scorer):
    """The validation split of the data directory `data`, in windows of the model's context."""
    return _split(data, "data", "val", scorer, scorer.model.config.context_length)


def _copy_tokens(copy_from, scorer, scored):
    """All the tokens of the training split of --copy-from, in order: with the `scored` tokens after
    them, at most eval/copy.py's MAX_STREAM."""
    import numpy as np

    from . import copy

    train = _split(copy_from, "copy_from", "train", scorer, 1)
    if train.starts[-1] + scored > copy.MAX_STREAM:
        raise InputError(f"--copy-from {copy_from}: {int(train.starts[-1]):,} training tokens and {scored:,} to score, more "
                         f"than the {copy.MAX_STREAM:,} eval/copy.py counts")
    return np.asarray(train.span(0, int(train.starts[-1])), np.int64)


def _split(data, setting, split, scorer, context_length):
    """One split of the data directory `data` (the flag of `setting`), which must be the
    checkpoint's tokenizer's."""
    from gptkit.shared.errors import SettingError
    from gptkit.shared.shard_data import ShardData
    from gptkit.shared.shard_dir import ShardDir

    directory, tokenizer = ShardDir(data), scorer.tokenizer
    if directory.fingerprint not in (None, tokenizer.fingerprint):
        raise SettingError(setting, f"{data}: encoded with tokenizer {directory.fingerprint}, the checkpoint "
                                    f"{scorer.checkpoint} is for tokenizer {tokenizer.fingerprint}")
    try:
        return ShardData(directory, split, tokenizer.vocab_size, tokenizer.fingerprint, context_length)
    except SettingError as e:  # ShardData names the setting training's --data
        raise SettingError(setting, e.problem) from None


@cli.command()
@click.option("--file", default=HELLASWAG_FILE, show_default=True, metavar="FILE",
              help="HellaSwag's jsonl (the validation set: `gptkit eval download hellaswag` puts it at the default).")
@limit_option
@_scoring_options
def hellaswag(file, limit, **scoring):
    """Accuracy on HellaSwag, scored as llm.c scores it: acc picks the ending of the lowest summed
    loss, acc_norm the lowest mean loss per ending token."""
    if not looked_up(file, "file").is_file():
        hint = " (fetch it with `gptkit eval download hellaswag`)" if file == HELLASWAG_FILE else ""
        raise InputError(f"--file {file}: no such file{hint}")
    _multiple_choice("hellaswag", file, read_hellaswag(file, limit), **scoring)


@cli.command()
@click.option("--file", required=True, metavar="FILE",
              help='A jsonl file, an item a line: {"context": TEXT, "choices": [TEXT, ...], "label": INDEX}.')
@limit_option
@_scoring_options
def choice(file, limit, **scoring):
    """Accuracy on multiple-choice items of your own, scored as `hellaswag` scores HellaSwag's
    (each choice follows its context as written: put a space before it where one belongs)."""
    if not looked_up(file, "file").is_file():
        raise InputError(f"--file {file}: no such file")
    _multiple_choice("choice", file, read_choice(file, limit), **scoring)


def _multiple_choice(task, file, items, checkpoint, batch_size, device, threads, out, overwrite, quiet):
    """Score `items` (read from `file`, checked before the checkpoint loads) and report."""
    _check_out(out, overwrite, [("--file", file), ("--checkpoint", checkpoint)])
    from .choice import frame, score  # imports torch (see text)

    scorer = _Scorer(checkpoint, device, threads)
    framing = frame(items, scorer.tokenizer, scorer.bos_id, scorer.model.config.context_length, file)
    progress = Progress(task, "items", total=len(items), quiet=quiet)
    scores = score(scorer.model, framing.items, batch_size, scorer.autocast, scorer.each_batch(progress))
    progress.close()
    if not scores.finite():
        raise InputError(f"--checkpoint {checkpoint}: its losses on {file} are not all finite (its weights hold NaN or "
                         "infinite values, or its computation overflows): nothing to score")
    right, right_norm, count = scores.totals().tolist()
    acc, acc_norm, count = right / count, right_norm / count, int(count)
    cut = f"; {framing.cut:,} context{'s' if framing.cut > 1 else ''} cut on the left to fit" if framing.cut else ""
    _report(out, {"task": task, "checkpoint": str(resolved(checkpoint, "checkpoint")), "file": str(resolved(file, "file")),
                  "acc": acc, "acc_norm": acc_norm, "items": count, "cut": framing.cut},
            f"{task}: acc {acc:.4f}, acc_norm {acc_norm:.4f} ({count:,} items{cut})")


class _Scorer:
    """A checkpoint loaded to score on `device`, torch's threads, and what each batch reports."""

    def __init__(self, checkpoint, device, threads):
        import torch

        from gptkit.model import load_model
        from gptkit.model.checkpoint import bos_id
        from gptkit.runtime.device import resolve_device
        from gptkit.runtime.threads import torch_threads

        self.checkpoint, self.device = checkpoint, resolve_device(device)
        self.threads = torch_threads(threads, self.device)
        self.model, self.tokenizer = load_model(checkpoint, self.device)
        self.model.eval()
        self.bos_id = bos_id(checkpoint, self.tokenizer)  # what a text starts with
        # as training validation runs: its losses and these are then the same numbers
        self.autocast = torch.autocast("cuda", torch.bfloat16) if self.device.type == "cuda" else contextlib.nullcontext()

    def each_batch(self, progress, before=0):
        """What follows each batch: its time, to the thread count (runtime/threads.py), and the
        count done (`before` + the batch's own count), to the progress line."""
        last = time.perf_counter()

        def done(count):
            nonlocal last
            now = time.perf_counter()
            self.threads.record(now - last)
            last = now
            progress.update(before + count)

        return done


def _check_out(out, overwrite, inputs):
    """Refuse an --out that is not a result of ours, unless --overwrite, and one that is an input
    (`inputs`: (flag, path)), holds one or lies inside one, even with it: before any scoring."""
    if out is not None:
        for flag, path in inputs:
            if path is not None:
                check_apart(out, path, flag)
        check_output(out, _is_result, "a result of gptkit eval", overwrite)


def _is_result(path):
    try:
        return read_json(path).get("format") == RESULTS_FORMAT
    except (OSError, ValueError, AttributeError):
        return False


def _report(out, results, line):
    """The one-line summary on stdout; the results to --out, whole or not at all."""
    if out is not None:
        try:
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            with atomic_write(out) as f:
                f.write(json.dumps({"format": RESULTS_FORMAT, **results}, indent=2) + "\n")
        except OSError as e:
            raise InputError(f"--out {out}: cannot write there ({e.strerror or e})") from None
    click.echo(line)


@cli.command()
@click.argument("dataset", type=click.Choice(["hellaswag"]))
@click.option("--out", default=HELLASWAG_FILE, show_default=True, metavar="FILE", help="The file to write.")
@overwrite_option("a file this downloaded")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def download(dataset, out, overwrite, quiet):
    """Download HellaSwag's validation set from its repository (rowanz/hellaswag), resumable, and
    check its format: every line an item, 10,042 of them."""
    click.echo(f"{download_hellaswag(out, quiet, overwrite)}: HellaSwag's validation set, checked")


def main():
    cli(prog_name="gptkit eval")
