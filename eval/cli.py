"""`gptkit eval`: score a checkpoint on text or on multiple-choice items. Run `gptkit eval --help`.

Each command is a shell over a library function whose arguments are its flags (text.py:
text_loss, val_loss; choice.py: hellaswag_accuracy, choice_accuracy; tasks.py:
download_hellaswag): it checks what only the command line can get wrong (flags that go together),
calls the function, which writes --out, and prints its one line. The function's errors name its
arguments; the command shows them as flags (shared/cli.py)."""

from typing import Any

import click
from click.core import ParameterSource

from gptkit.shared.cli import (
    CONTEXT,
    Group,
    checkpoint_option,
    device_option,
    overwrite_option,
    threads_option,
    version_option,
)
from gptkit.shared.errors import InputError

from .tasks import HELLASWAG_FILE, download_hellaswag


@click.group(cls=Group, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """Score a checkpoint: its loss on any text (`text`), its accuracy on HellaSwag (`hellaswag`,
    after `download hellaswag`) or on multiple-choice items of your own (`choice`)."""


def _scoring_options(command):
    """The options of every command that scores a checkpoint, in the order --help lists them."""
    options = [
        checkpoint_option,
        click.option(
            "--batch-size",
            type=click.IntRange(min=1),
            default=32,
            show_default=True,
            metavar="N",
            help="Sequences a forward pass (windows of text, or an item's rows: its context and one choice).",
        ),
        device_option,
        threads_option("Threads of torch's CPU kernels.", measured=True),
        click.option(
            "--out", metavar="FILE", help="Also write the scores, with the checkpoint and the input, to this JSON file."
        ),
        overwrite_option("an earlier result of gptkit eval"),
        click.option("--quiet", "-q", is_flag=True, help="No progress display."),
    ]
    for option in reversed(options):  # the option decorated last is listed first
        command = option(command)
    return command


limit_option = click.option("--limit", type=click.IntRange(min=1), metavar="N", help="Score the first N items only.")


@cli.command()
@click.option(
    "--input",
    "inputs",
    multiple=True,
    metavar="FILE",
    help="A UTF-8 text file, scored as a training document "
    "(after the token the checkpoint puts before a text: its end-of-text id). Repeatable; extra paths may "
    "follow it.",
)
@click.argument("more_inputs", nargs=-1, metavar="[FILE]...")
@click.option(
    "--data",
    metavar="DIR",
    help="Instead: the validation split of a pretokenize directory (encoded with the "
    "checkpoint's tokenizer), in the windows training validation reads.",
)
@click.option(
    "--eval-tokens",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --data: its first N tokens, as `train --eval-tokens N` scores them.  [default: all of the split]",
)
@click.option(
    "--copy-from",
    metavar="DIR",
    help="Mix the model with an unbounded n-gram over the training split of this "
    "pretokenize directory (the checkpoint's tokenizer's) and the text scored before each token, as compressors "
    "copy: the model alone is reported beside it.",
)
@click.option(
    "--adapt",
    is_flag=True,
    help="Let the model learn from the text as it scores it, as a compressor adapts "
    "(dynamic evaluation): after each window, copies of it take a step of SGD on it, and each token's probability "
    "is their mixture with the model as trained, weighted by how each predicted the text before it. One window at "
    "a time: not with --batch-size. The model alone is reported beside it.",
)
@_scoring_options
def text(
    inputs: tuple[str, ...],
    more_inputs: tuple[str, ...],
    data: str | None,
    eval_tokens: int | None,
    copy_from: str | None,
    adapt: bool,
    checkpoint: str,
    batch_size: int,
    device: str,
    threads: int | None,
    out: str | None,
    overwrite: bool,
    quiet: bool,
) -> None:
    """Loss (nats per token) and bits per byte of text, read in consecutive windows of the model's
    context as training validation reads its split; with --copy-from, of the model and what it
    copies together (eval/copy.py); with --adapt, of the model learning as it reads (eval/adapt.py)."""
    inputs += more_inputs
    if bool(inputs) == bool(data):
        raise InputError("--input and --data: give one or the other" if data else "--input or --data: give one")
    if eval_tokens is not None and not data:
        raise InputError("--eval-tokens: only with --data (the text of --input is scored whole)")
    if adapt and click.get_current_context().get_parameter_source("batch_size") is ParameterSource.COMMANDLINE:
        raise InputError(
            "--batch-size: not with --adapt, which reads one window at a time (it learns from each before "
            "scoring the next)"
        )
    from .copy import MAX_N
    from .text import text_loss, val_loss  # imports torch: here, once the flags are checked (see _multiple_choice)

    scoring: dict[str, Any] = {  # keyword arguments of either function, each of its own type
        "copy_from": copy_from,
        "adapt": adapt,
        "batch_size": None if adapt else batch_size,
        "device": device,
        "threads": threads,
        "out": out,
        "overwrite": overwrite,
        "quiet": quiet,
    }
    if data:
        result = val_loss(checkpoint, data, eval_tokens=eval_tokens, **scoring)
    else:
        result = text_loss(checkpoint, inputs, **scoring)
    line = (
        f"loss {result.loss:.4f} nats/token, {result.bpb:.4f} bits/byte ({result.tokens:,} tokens, "
        f"{result.bytes:,} bytes of text)"
    )
    beside = ["adapting"] if adapt else []
    if copy_from is not None:
        beside.append(
            f"copying from {result.copy_tokens:,} training tokens; {result.verbatim_share:.1%} of the scored "
            f"tokens in spans of {MAX_N}+ found there verbatim"
        )
    if beside:
        line += f"; the model alone {result.model_loss:.4f}, {result.model_bpb:.4f} ({' and '.join(beside)})"
    click.echo(line)


@cli.command()
@click.option(
    "--file",
    default=HELLASWAG_FILE,
    show_default=True,
    metavar="FILE",
    help="HellaSwag's jsonl (the validation set: `gptkit eval download hellaswag` puts it at the default).",
)
@limit_option
@_scoring_options
def hellaswag(file: str, limit: int | None, **scoring: object) -> None:
    """Accuracy on HellaSwag, scored as llm.c scores it: acc picks the ending of the lowest summed
    loss, acc_norm the lowest mean loss per ending token."""
    _multiple_choice("hellaswag", file, limit, **scoring)


@cli.command()
@click.option(
    "--file",
    required=True,
    metavar="FILE",
    help='A jsonl file, an item a line: {"context": TEXT, "choices": [TEXT, ...], "label": INDEX}.',
)
@limit_option
@_scoring_options
def choice(file: str, limit: int | None, **scoring: object) -> None:
    """Accuracy on multiple-choice items of your own, scored as `hellaswag` scores HellaSwag's
    (each choice follows its context as written: put a space before it where one belongs)."""
    _multiple_choice("choice", file, limit, **scoring)


def _multiple_choice(task, file, limit, checkpoint, batch_size, device, threads, out, overwrite, quiet):
    """Score the items of `file` with the library function of `task`; its line."""
    # imports torch: here, once the flags are checked, so --help and a bad flag answer at once (torch takes 2-3 s)
    from .choice import choice_accuracy, hellaswag_accuracy

    accuracy = {"hellaswag": hellaswag_accuracy, "choice": choice_accuracy}[task]
    result = accuracy(
        checkpoint,
        file,
        limit=limit,
        batch_size=batch_size,
        device=device,
        threads=threads,
        out=out,
        overwrite=overwrite,
        quiet=quiet,
    )
    cut = f"; {result.cut:,} context{'s' if result.cut > 1 else ''} cut on the left to fit" if result.cut else ""
    click.echo(f"{task}: acc {result.acc:.4f}, acc_norm {result.acc_norm:.4f} ({result.items:,} items{cut})")


@cli.command()
@click.argument("dataset", type=click.Choice(["hellaswag"]))
@click.option("--out", default=HELLASWAG_FILE, show_default=True, metavar="FILE", help="The file to write.")
@overwrite_option("a file this downloaded")
@click.option("--quiet", "-q", is_flag=True, help="No progress display.")
def download(dataset: str, out: str, overwrite: bool, quiet: bool) -> None:
    """Download HellaSwag's validation set from its repository (rowanz/hellaswag), resumable, and
    check its format: every line an item, 10,042 of them."""
    click.echo(f"{download_hellaswag(out, quiet, overwrite)}: HellaSwag's validation set, checked")


def main() -> None:
    cli(prog_name="gptkit eval")
