"""`gptkit sample`: text from a checkpoint. Run `gptkit sample --help`."""

import logging
import sys
from typing import BinaryIO

import click

from gptkit.shared.cli import CONTEXT, Command, checkpoint_option, device_option, threads_option, version_option
from gptkit.shared.errors import InputError
from gptkit.shared.text import decode_utf8, without_surrogates

from .settings import Settings

log = logging.getLogger(__name__)


@click.command(cls=Command, context_settings=CONTEXT)
@version_option
@checkpoint_option
@click.option("--prompt", metavar="TEXT", help="The text to continue.  [default: standard input, or --prompt-file]")
@click.option(
    "--prompt-file", type=click.File("rb"), metavar="FILE", help="Read the prompt from FILE ('-': standard input)."
)
@click.option(
    "--max-new-tokens",
    type=click.IntRange(min=1),
    default=256,
    show_default=True,
    metavar="N",
    help="Tokens to generate at most, for each sample (the end-of-text token or a --stop ends one sooner).",
)
@click.option("--temperature", type=float, default=0.8, show_default=True, help="0: greedy.")
@click.option(
    "--top-p",
    type=float,
    default=0.9,
    show_default=True,
    help="Nucleus sampling: keep the most likely tokens up to this probability mass.",
)
@click.option("--top-k", type=int, help="Keep only the K most likely tokens.")
@click.option(
    "--num-samples",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Continuations of the prompt, generated as one batch.",
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**63 - 1),
    help="Random seed; the same seed gives the same text.  [default: random, printed]",
)
@device_option
@click.option(
    "--chat",
    is_flag=True,
    help="Answer the prompt as a user's message, rendered with the checkpoint's chat template; the reply ends at its end of turn.",
)
@click.option("--system", metavar="TEXT", help="With --chat: a system message before the prompt.")
@click.option(
    "--stop",
    "stops",
    multiple=True,
    metavar="STR",
    help="Stop a sample when it produces STR (repeatable). The end-of-text token always stops it.",
)
@threads_option("Threads of torch's CPU kernels.", measured=True)
def cli(
    checkpoint: str,
    prompt: str | None,
    prompt_file: BinaryIO | None,
    max_new_tokens: int,
    temperature: float,
    top_p: float,
    top_k: int | None,
    num_samples: int,
    seed: int | None,
    device: str,
    chat: bool,
    system: str | None,
    stops: tuple[str, ...],
    threads: int | None,
) -> None:
    """Continue a prompt with a trained model, streaming the text to standard output (--chat: answer it)."""
    if system is not None and not chat:
        raise InputError("--system: a system message is for --chat; give --chat too")
    settings = Settings(
        max_new_tokens=max_new_tokens,
        num_samples=num_samples,
        temperature=temperature,
        top_p=top_p,
        top_k=top_k,
        seed=seed,
        stops=[without_surrogates(stop)[0] for stop in stops],
    )
    if prompt is not None and prompt_file is not None:
        raise InputError("--prompt and --prompt-file: give one or the other")
    if prompt is None:
        where = "standard input" if prompt_file is None else f"--prompt-file {getattr(prompt_file, 'name', '-')}"
        prompt, replaced = decode_utf8((prompt_file or sys.stdin.buffer).read())
    else:
        prompt, replaced = without_surrogates(prompt)  # bytes of the command line that are not UTF-8
        where = "--prompt"
    if replaced:
        log.warning(f"{where}: {replaced} byte(s) that are not UTF-8 replaced by U+FFFD")

    from .sampling import chat as chat_with  # torch's import cost (2-3 s) is paid only once the arguments are checked
    from .sampling import sample

    if chat:
        messages = ([{"role": "system", "content": without_surrogates(system)[0]}] if system is not None else []) + [
            {"role": "user", "content": prompt}
        ]
        samples = chat_with(checkpoint, messages, settings, device=device, threads=threads)
        prompt = ""  # a reply is printed alone
    else:
        samples = sample(checkpoint, prompt, settings, device=device, threads=threads)
    if num_samples == 1:  # one sample is printed as it grows; several, each when complete
        _write(prompt)
        for _, piece in samples:
            _write(piece)
        _write("\n")
    else:
        for i, text in enumerate(samples.texts()):
            _write(f"{'' if i == 0 else chr(10)}--- sample {i + 1} ---\n{prompt}{text}\n")
    if seed is None:  # after the text, which ends its line: a line of its own, never inside the text
        click.echo(f"seed: {samples.seed}", err=True)


def _write(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def main() -> None:
    cli(prog_name="gptkit sample")
