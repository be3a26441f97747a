"""`gptkit`: one command, a subcommand per stage. Run `gptkit --help`.

Each stage also runs alone as `python -m gptkit.STAGE` (the same command)."""

import click

from gptkit.eval.cli import cli as eval_
from gptkit.model.cli import cli as model
from gptkit.pretokenize.cli import cli as pretokenize
from gptkit.sample.cli import cli as sample
from gptkit.serve.cli import cli as serve
from gptkit.shared.cli import CONTEXT, Group, version_option
from gptkit.stories.cli import cli as stories
from gptkit.tokenizer.cli import cli as tokenizer
from gptkit.train.cli import cli as train


@click.group(cls=Group, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """From raw text to a trained GPT-style language model and back to text: the stages below,
    in pipeline order, each passing files to the next (`gptkit STAGE --help`)."""


for name, command in (
    ("stories", stories),
    ("tokenizer", tokenizer),
    ("pretokenize", pretokenize),
    ("model", model),
    ("train", train),
    ("sample", sample),
    ("serve", serve),
    ("eval", eval_),
):
    cli.add_command(command, name)


def main() -> None:
    cli(prog_name="gptkit")
