"""`train`: train a TransformerLM on token shards. Run `train --help`.

Every setting of train.config.TrainConfig has a flag (`--batch-size`, `--lr`, ...); a flag
overrides the --config preset or file, which overrides the defaults. Without --config (and
without --model) on the CPU, train.recipe sizes the model, batch and schedule for the corpus
and the time budget instead of a preset; flags override it as they would a preset.
"""
import json
from pathlib import Path

import click

from gptkit.shared.cli import CONTEXT, DefaultGroup, threads_option, use_threads, version_option
from gptkit.shared.errors import InputError

from .config import HELP, TrainConfig, load_train_config, option_specs, preset_names, with_length
from .recipe import recipe_config


def _setting_options(command):
    for name, kind, default in reversed(option_specs()):
        flag = "--" + name.replace("_", "-")
        if kind is bool:
            decls, extra = [f"{flag}/--no-{name.replace('_', '-')}"], {}
        else:
            decls, extra = [flag], {"type": kind}
        shown = "" if default is None else f"  [default: {default}]"
        command = click.option(*decls, name, default=None, help=HELP.get(name, "") + shown, **extra)(command)
    return command


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@version_option
def cli():
    """Train a model on token shards (`run`, the default command), then `plot` its metrics."""


@cli.command("run")
@click.option("--config", "config_name", metavar="PRESET|FILE",
              help=f"Settings: a preset ({', '.join(preset_names())}) or a JSON file.  "
                   "[default: on CPU, a recipe for the corpus and --max-time (train/recipe.py)]")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its latest checkpoint, with its saved settings.")
@click.option("--from-checkpoint", metavar="DIR", help="With --resume: start from this checkpoint of the run instead of "
              "the latest (e.g. when the latest is damaged).")
@threads_option("Threads of torch's CPU kernels, per process.")
@_setting_options
def run(config_name, resume, from_checkpoint, threads, **settings):
    """Train a Llama-style model on the shards of a pretokenize directory; checkpoints and
    metrics go to --out. Multi-GPU: torchrun --nproc_per_node=N -m train ..."""
    from .trainer import load_run_config, train

    use_threads(threads)
    overrides = {k: v for k, v in settings.items() if v is not None}
    if resume:
        if "out" not in overrides:
            raise InputError("--resume: give the run directory with --out")
        saved = load_run_config(overrides["out"])
        if config_name:  # `make train ARGS=--resume` passes the Makefile's CONFIG whatever the run was made with
            click.echo(f"note: --resume continues with the settings saved in {overrides['out']}/config.json; "
                       f"--config {config_name} is not applied", err=True)
        config = TrainConfig(**{**saved, **with_length(saved, overrides)})
    elif config_name:
        config = load_train_config(config_name, overrides)
    else:  # no preset: the model, batch and schedule are sized for the corpus and the time budget
        config = recipe_config(overrides)
    if from_checkpoint and not resume:
        raise InputError("--from-checkpoint: only with --resume")
    train(config.check(), resume=from_checkpoint or resume)


@cli.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="The PNG to write.  [default: RUN/loss.png]")
def plot(run_dir, out):
    """Plot training and validation loss against tokens, with the learning rate, from RUN/metrics.jsonl."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("plot: matplotlib is not installed (pip install matplotlib, or pip install -e '.[plot]')") from None
    metrics = run_dir / "metrics.jsonl"
    if not metrics.is_file():
        raise InputError(f"{run_dir}: no metrics.jsonl (not a run directory?)")
    records = []
    for line in metrics.read_text(errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut short (a full disk, a kill) or garbled: the plot goes on without it
    train = [r for r in records if "loss" in r]
    val = [r for r in records if "val_loss" in r]
    if not train:
        raise InputError(f"{metrics}: no training records yet")
    fig, (loss_axis, bpb_axis) = plt.subplots(1, 2, figsize=(12, 5), width_ratios=(2, 1), layout="constrained")
    loss_axis.plot([r["tokens"] for r in train], [r["loss"] for r in train], label="train loss", color="tab:blue")
    if val:
        loss_axis.plot([r["tokens"] for r in val], [r["val_loss"] for r in val], "o-", label="validation loss", color="tab:orange")
    entropy = _unigram_entropy(run_dir)
    if entropy is not None:
        loss_axis.axhline(entropy, linestyle="--", color="tab:red", label=f"unigram entropy of the training tokens ({entropy:.2f})")
    loss_axis.set_xlabel("tokens")
    loss_axis.set_ylabel("loss (nats per token)")
    lr_axis = loss_axis.twinx()
    lr_axis.plot([r["tokens"] for r in train], [r["lr"] for r in train], label="learning rate", color="tab:gray", alpha=0.5)
    lr_axis.set_ylabel("learning rate")
    handles = loss_axis.get_lines() + lr_axis.get_lines()
    fig.legend(handles, [h.get_label() for h in handles], loc="outside lower center", ncols=len(handles))  # off the data
    bpb = [r for r in val if "val_bpb" in r]
    bpb_axis.plot([r["tokens"] for r in bpb], [r["val_bpb"] for r in bpb], "o-", color="tab:green")
    bpb_axis.set_xlabel("tokens")
    bpb_axis.set_ylabel("validation bits per byte of text")
    bpb_axis.set_title("tokenizer-independent" if bpb else "no bits per byte recorded")
    fig.suptitle(str(run_dir))
    out = out or run_dir / "loss.png"
    fig.savefig(out, dpi=120)
    click.echo(f"wrote {out}")


def _unigram_entropy(run_dir):
    """The unigram entropy of the run's training tokens, if its settings and data can be read."""
    from .data import unigram_entropy
    from .trainer import load_run_config

    try:
        return unigram_entropy(load_run_config(run_dir)["data"])
    except (InputError, KeyError, TypeError):
        return None


def main():
    cli(prog_name="gptkit train")
