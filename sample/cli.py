"""`gptkit sample`: text from a checkpoint. Run `gptkit sample --help`."""
import logging
import random
import sys
import time

import click

from gptkit.model.info import describe, sampling_memory
from gptkit.shared.cli import CONTEXT, Command, threads_option, version_option
from gptkit.shared.errors import InputError
from gptkit.shared.text import decode_utf8, without_surrogates

from .stream import TextStream

log = logging.getLogger(__name__)


@click.command(cls=Command, context_settings=CONTEXT)
@version_option
@click.option("--checkpoint", required=True, metavar="DIR", help="A checkpoint directory (model.safetensors, config.json, tokenizer.json).")
@click.option("--prompt", metavar="TEXT", help="The text to continue.  [default: standard input, or --prompt-file]")
@click.option("--prompt-file", type=click.File("rb"), metavar="FILE", help="Read the prompt from FILE ('-': standard input).")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=256, show_default=True)
@click.option("--temperature", type=float, default=0.8, show_default=True, help="0: greedy.")
@click.option("--top-p", type=float, default=0.9, show_default=True, help="Nucleus sampling: keep the most likely tokens up to this probability mass.")
@click.option("--top-k", type=int, help="Keep only the K most likely tokens.")
@click.option("--num-samples", type=click.IntRange(min=1), default=1, show_default=True, help="Continuations of the prompt, generated as one batch.")
@click.option("--seed", type=click.IntRange(0, 2**63 - 1), help="Random seed; the same seed gives the same text.  [default: random, printed]")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--stop", "stops", multiple=True, metavar="STR", help="Stop a sample when it produces STR (repeatable). The end-of-text token always stops it.")
@threads_option("Threads of torch's CPU kernels.", measured=True)
def cli(checkpoint, prompt, prompt_file, max_new_tokens, temperature, top_p, top_k, num_samples, seed, device, stops, threads):
    """Continue a prompt with a trained model, streaming the text to standard output."""
    if not temperature >= 0:  # NaN too
        raise InputError(f"--temperature {temperature}: expected 0 (greedy) or more")
    if not 0 < top_p <= 1:
        raise InputError(f"--top-p {top_p}: expected a probability in (0, 1]")
    if top_k is not None and top_k < 1:
        raise InputError(f"--top-k {top_k}: expected 1 or more")
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
    stops = [without_surrogates(stop)[0] for stop in stops]

    # torch's import cost (2-3 s) is paid only once the arguments are checked: --help and a bad flag answer at once
    from gptkit.model import load_model
    from gptkit.model.checkpoint import bos_id as checkpoint_bos_id, eot_id as checkpoint_eot_id
    from gptkit.model.generate import generate, prompt_ids
    from gptkit.runtime.device import Memory, resolve_device
    from gptkit.runtime.threads import torch_threads

    device = resolve_device(device)
    threads = torch_threads(threads, device)
    model, tokenizer = load_model(checkpoint, device)
    model.eval()
    eot_id = checkpoint_eot_id(checkpoint, tokenizer)  # the token that stops a sample
    ids = prompt_ids(tokenizer, prompt, checkpoint_bos_id(checkpoint, tokenizer))
    if not ids:
        raise InputError(f"--prompt is empty and {checkpoint} records no token to start a text with "
                         "(no end-of-text token, no bos_id)")
    context = model.config.context_length
    if len(ids) > context:
        log.warning(f"the prompt has {len(ids):,} tokens, more than the context of {context:,}: keeping the last {context:,}")
        ids = ids[-context:]
    # Checked before any work: a batch of samples too large for the memory left beside the weights.
    memory = Memory(sampling_memory(model.config, num_samples, len(ids) + max_new_tokens), device, "num_samples",
                    f"{num_samples:,} samples of {describe(model.config)}", "ask for fewer --num-samples")
    memory.check()
    if seed is None:
        seed = random.randrange(2**31)
        click.echo(f"seed: {seed}", err=True)

    streams = [TextStream(tokenizer, stops) for _ in range(num_samples)]
    finished = [False] * num_samples
    live = num_samples == 1  # one sample is printed as it grows; several, each when complete
    texts = [[] for _ in range(num_samples)]
    if live:
        _write(prompt)
    started = time.perf_counter()
    for step in generate(model, ids, max_new_tokens=max_new_tokens, num_samples=num_samples,
                         temperature=temperature, top_p=top_p, top_k=top_k, seed=seed):
        threads.record(time.perf_counter() - started)  # a token's time: the count for the next
        for i, token in enumerate(step.tolist()):
            if finished[i]:
                continue
            if token == eot_id:
                finished[i] = True
                continue
            text = streams[i].add(token)
            finished[i] = streams[i].done
            if live:
                _write(text)
            else:
                texts[i].append(text)
        if all(finished):
            break
        started = time.perf_counter()
    for i, stream in enumerate(streams):
        tail = "" if stream.done else stream.finish()
        if live:
            _write(tail + "\n")
        else:
            _write(f"{'' if i == 0 else chr(10)}--- sample {i + 1} ---\n{prompt}{''.join(texts[i])}{tail}\n")


def _write(text):
    sys.stdout.write(text)
    sys.stdout.flush()


def main():
    cli(prog_name="gptkit sample")
