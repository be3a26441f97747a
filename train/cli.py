"""`gptkit train`: train a TransformerLM on token shards. Run `gptkit train run --help`.

Every setting of train/config.py has a flag (`--batch-size`, `--lr`, ...), made from its declaration
(train/setting.py): the type, the choices, the help and the default --help shows. The flags are the
highest layer of the settings (train/settle.py).
"""

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from gptkit.shared.cli import CONTEXT, DefaultGroup, flag, overwrite_option, threads_option, version_option
from gptkit.shared.errors import InputError

from .config import SETTINGS, preset_names, refuse_unused
from .plot import plot_run
from .run_dir import RunDir

C = TypeVar("C", bound=Callable[..., Any])


def _setting_options(command: C) -> C:
    """One option per setting (config.SETTINGS), in the sections' order; bool settings are --x/--no-x
    switches. The types stay plain (a union's first type): the sections check every value, so a bad one
    reads the same from a flag, a preset, a run's config.json or a library call. A setting of a few
    choices shows them as its metavar."""
    for name, about in reversed(SETTINGS.items()):  # the option decorated last is listed first
        shown = about.shown or about.default  # a required setting's `shown` says what it needs
        shown = "" if shown is None else f"  [{shown}]" if about.required else f"  [default: {shown}]"
        decls = [f"{flag(name)}/--no-{name.replace('_', '-')}"] if about.kind is bool else [flag(name)]
        command = click.option(
            *decls,
            name,
            # the two required settings, data and out, are paths (click.Path: a shell completes them)
            type=click.Path() if about.required else about.kind,
            default=None,
            metavar=about.metavar or ("|".join(about.choices) if about.choices else None),
            help=about.help + shown,
        )(command)
    return command


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@version_option
def cli() -> None:
    """Train a model on token shards (`run`, the default command), then `plot` its metrics."""


@cli.command("run")
@click.option(
    "--config",
    "config_name",
    metavar="PRESET|FILE",
    help=f"Settings: a preset ({', '.join(preset_names())}) or a JSON file.  "
    "[default: the recipe: settings timed on the device for the data and the budget]",
)
@click.option(
    "--resume", is_flag=True, help="Continue the run in --out from its latest checkpoint, with its saved settings."
)
@click.option(
    "--from-checkpoint",
    metavar="DIR",
    help="With --resume: start from this checkpoint of the run instead of "
    "the latest (e.g. when the latest is damaged).",
)
@threads_option("Threads of torch's CPU kernels, per process.", measured=True)
@click.option(
    "--nproc-per-node",
    type=click.IntRange(min=1),
    metavar="N",
    help="Train in N processes on this machine (one per GPU), started by torch's launcher as torchrun "
    "starts them, once the settings and --out are checked.",
)
@click.option(
    "--nnodes",
    type=click.IntRange(min=1),
    metavar="N",
    help="With --nproc-per-node: the machines of the run; run the same command on each.  [default: 1]",
)
@click.option(
    "--node-rank",
    type=click.IntRange(min=0),
    metavar="R",
    help="With --nnodes: this machine's rank; machine 0 serves the rendezvous at --rdzv-endpoint. Give it "
    "on every machine or on none (then they are ranked as they join).",
)
@click.option("--rdzv-endpoint", metavar="HOST:PORT", help="With --nnodes: where the machines meet, the same on each.")
@click.option("--rdzv-id", metavar="ID", help="With --nnodes: the run's name at the rendezvous, the same on each.")
@_setting_options
def run(
    config_name: str | None,
    resume: bool,
    from_checkpoint: str | None,
    threads: int | None,
    nproc_per_node: int | None,
    nnodes: int | None,
    node_rank: int | None,
    rdzv_endpoint: str | None,
    rdzv_id: str | None,
    **settings: Any,
) -> None:
    """Train a Llama-style model on the shards of a pretokenize directory; checkpoints and
    metrics go to --out. Several processes (GPUs): gptkit train --nproc-per-node N ..., the same
    as torchrun --nproc-per-node N -m gptkit train ..."""
    # these import torch (2-3 s): not for --help, a bad flag or `plot`
    from .run import Stopped, check_apart_from_inputs, train
    from .settle import from_layers, load_train_config, resume_config

    overrides = {k: v for k, v in settings.items() if v is not None}
    if from_checkpoint and not resume:
        raise InputError("--from-checkpoint: only with --resume")
    launcher: dict[str, Any] = {
        "nnodes": nnodes,
        "node_rank": node_rank,
        "rdzv_endpoint": rdzv_endpoint,
        "rdzv_id": rdzv_id,
    }
    launcher = {k: v for k, v in launcher.items() if v is not None}
    if launcher and nproc_per_node is None:
        raise InputError(f"{flag(next(iter(launcher)))}: only with --nproc-per-node")
    if resume:
        config = resume_config(overrides)
        if config_name:  # `make train ARGS=--resume` passes the Makefile's CONFIG whatever the run was made with
            click.echo(
                f"note: --resume continues with the settings saved in {config.job.out}/config.json; "
                f"--config {config_name} is not applied",
                err=True,
            )
    elif config_name:
        config = load_train_config(config_name, overrides)
    else:  # no preset: without --model, the recipe sizes the model, batch and schedule when the run starts
        config = from_layers(overrides)
    refuse_unused(config, overrides)
    check_apart_from_inputs(config, resume)
    if not resume:  # before the recipe's timing or any worker starts (rank 0 writes the run when it starts)
        RunDir(config.job.out).check_new()
    one_process = functools.partial(train, config, resume=from_checkpoint or resume, threads=threads)
    if nproc_per_node is None:
        try:
            one_process()
        except Stopped as stopped:  # it said so in a line; the shell's status for the signal, not click's "Aborted!"
            click.get_current_context().exit(stopped.exit_code)
    else:
        from .launch import launch  # torch.distributed's launcher

        launch(one_process, nproc_per_node, **launcher)


@cli.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), help="The PNG to write.  [default: RUN/loss.png]")
@overwrite_option("a gptkit loss plot")
def plot(run_dir: str, out: str | None, overwrite: bool) -> None:
    """Plot training and validation loss against tokens, with the learning rate, from RUN/metrics.jsonl."""
    click.echo(f"wrote {plot_run(run_dir, out, overwrite)}")


def main() -> None:
    cli(prog_name="gptkit train")
