"""`gptkit train`: train a TransformerLM on token shards. Run `gptkit train run --help`.

Every setting of train.config.TrainConfig has a flag (`--batch-size`, `--lr`, ...). One
precedence: a flag overrides the --config preset or file, which overrides the recipe (without
--config and --model, train.recipe sizes the model, batch and schedule for the corpus, the time
budget and the device when the run starts), which overrides the defaults.
"""
import functools

import click

from gptkit.shared.cli import CONTEXT, DefaultGroup, flag, overwrite_option, threads_option, version_option
from gptkit.shared.errors import InputError

from .config import FIELDS, LENGTH, PATHS, WITHOUT_RECIPE, load_train_config, preset_names, with_overrides
from .recipe import DEFAULT_BUDGET

# One flag per TrainConfig field: (field, click type, help). bool fields are --x/--no-x switches.
# The types stay plain: TrainConfig checks every value, so a bad one reads the same from a flag,
# a preset, a run's config.json or a library call.
SETTINGS = (
    ("data", click.Path(), "A pretokenize output directory (shards + tokenizer.json)."),
    ("out", click.Path(), "The run directory (config.json, metrics.jsonl, checkpoints/, latest)."),
    ("model", str, "A model preset name or a model config file (the run records the model itself)."),
    ("seed", int, "Seed of the model's initialization, the random loader and the samples."),
    ("device", str, "auto | cpu | cuda."),
    ("compile", bool, "Compile the model with torch.compile (costs 30-40 s on CPU and gains nothing there)."),
    ("batch_size", int, "Sequences per micro-step, all processes together."),
    ("grad_accum", int, "Micro-steps per optimizer step."),
    ("context_length", int, "Tokens per sequence (at most the model's context)."),
    ("loader", str, "random (uniform offsets) | sequential (the token stream in order)."),
    ("verify_data", bool, "Read every shard once before training: its CRC-32 and that every id fits the vocabulary "
                          "(about 0.5 s per GiB from the page cache; --no-verify-data skips it for large data you trust)."),
    ("max_steps", int, "Optimizer steps (with --resume: extend or shorten the run to this many)."),
    ("max_tokens", int, "Train on this many tokens instead (sets the number of steps)."),
    ("max_time", str, "Train for this long instead (e.g. 2m, 90s, 1h30m): the steps are planned from the measured "
                      "throughput so that the schedule ends on time."),
    ("optimizer", str, "adamw | muon (Muon for hidden matrices, AdamW for embeddings, head and gains)."),
    ("lr", float, "Peak learning rate (AdamW)."),
    ("min_lr", float, "Learning rate at the end of the schedule."),
    ("beta1", float, "AdamW's first-moment decay."),
    ("beta2", float, "AdamW's second-moment decay."),
    ("eps", float, "AdamW's epsilon."),
    ("weight_decay", float, "Decoupled weight decay, on matrices only."),
    ("decay_embeddings", bool, "Also decay the embedding (and a separate LM head)."),
    ("muon_lr", float, "Peak learning rate of Muon."),
    ("muon_momentum", float, "Muon's momentum (Nesterov)."),
    ("grad_clip", float, "Clip the global gradient L2 norm to this (0: no clipping)."),
    ("schedule", str, "cosine (warmup, cosine to min_lr) | wsd (warmup, stable, linear cool-down)."),
    ("warmup_steps", int, "Steps of linear warmup, at most a tenth of the run's steps."),
    ("decay_steps", int, "cosine: the step where min_lr is reached.  [default: the last]"),
    ("cooldown_fraction", float, "wsd: the final fraction of the steps spent decaying to min_lr."),
    ("eval_interval", int, "Steps between validation losses (0: only at the end)."),
    ("eval_tokens", int, "Validation tokens (the first of the val split; the same every time)."),
    ("log_interval", int, "Steps between log lines."),
    ("sample_interval", int, "Steps between generated samples (0: never)."),
    ("sample_prompt", str, "The prompt of the samples."),
    ("sample_tokens", int, "Tokens generated per sample."),
    ("checkpoint_interval", int, "Steps between checkpoints (0: only at the end)."),
    ("checkpoint_tokens", int, "Also a checkpoint every this many tokens."),
    ("keep_last", int, "Checkpoints kept."),
)


# What --help shows as the default where it is not TrainConfig's own value: the recipe decides it
# (without --config and --model), or it depends on another setting. A --config preset's values
# come before all of these.
RECIPE = "the recipe's for the data, the budget and the device"
SHOWN_DEFAULTS = {
    "data": "required; with --resume, the run's",
    "out": "required",
    "model": RECIPE,
    "batch_size": f"{RECIPE}; with --model, {WITHOUT_RECIPE['batch_size']}",
    "lr": f"{RECIPE}; with --model, {WITHOUT_RECIPE['lr']}",
    "min_lr": "a tenth of --lr",
    "eval_interval": f"{RECIPE} (5 evaluations); with --model, {WITHOUT_RECIPE['eval_interval']}",
    "max_steps": f"with --model, {WITHOUT_RECIPE['max_steps']}; else --max-time",
    "max_time": f"{DEFAULT_BUDGET} with the recipe, unless --max-steps or --max-tokens",
    "warmup_steps": "a twentieth of the run's steps",
    "context_length": "the model's",
    "compile": "on CUDA",
}


def _setting_options(command):
    for name, kind, help in reversed(SETTINGS):
        default = SHOWN_DEFAULTS.get(name, FIELDS[name].default)
        shown = "" if default is None else f"  [default: {default}]" if name not in PATHS else f"  [{default}]"
        decls = [f"{flag(name)}/--no-{name.replace('_', '-')}"] if kind is bool else [flag(name)]
        metavar = {"data": "DIR", "out": "DIR", "model": "PRESET|FILE", "max_time": "DURATION"}.get(name)
        command = click.option(*decls, name, type=kind, default=None, metavar=metavar, help=help + shown)(command)
    return command


@click.group(cls=DefaultGroup, context_settings=CONTEXT)
@version_option
def cli():
    """Train a model on token shards (`run`, the default command), then `plot` its metrics."""


@cli.command("run")
@click.option("--config", "config_name", metavar="PRESET|FILE",
              help=f"Settings: a preset ({', '.join(preset_names())}) or a JSON file.  "
                   "[default: the recipe: settings timed on the device for the data and the budget]")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its latest checkpoint, with its saved settings.")
@click.option("--from-checkpoint", metavar="DIR", help="With --resume: start from this checkpoint of the run instead of "
              "the latest (e.g. when the latest is damaged).")
@threads_option("Threads of torch's CPU kernels, per process.", measured=True)
@click.option("--nproc-per-node", type=click.IntRange(min=1), metavar="N",
              help="Train in N processes on this machine (one per GPU), started by torch's launcher as torchrun "
                   "starts them, once the settings and --out are checked.")
@click.option("--nnodes", type=click.IntRange(min=1), metavar="N",
              help="With --nproc-per-node: the machines of the run; run the same command on each.  [default: 1]")
@click.option("--node-rank", type=click.IntRange(min=0), metavar="R",
              help="With --nnodes: this machine's rank; machine 0 serves the rendezvous at --rdzv-endpoint. Give it "
                   "on every machine or on none (then they are ranked as they join).")
@click.option("--rdzv-endpoint", metavar="HOST:PORT", help="With --nnodes: where the machines meet, the same on each.")
@click.option("--rdzv-id", metavar="ID", help="With --nnodes: the run's name at the rendezvous, the same on each.")
@_setting_options
def run(config_name, resume, from_checkpoint, threads, nproc_per_node, nnodes, node_rank, rdzv_endpoint, rdzv_id,
        **settings):
    """Train a Llama-style model on the shards of a pretokenize directory; checkpoints and
    metrics go to --out. Several processes (GPUs): gptkit train --nproc-per-node N ..., the same
    as torchrun --nproc-per-node N -m gptkit train ..."""
    from .run_dir import RunDir, load_run_config
    from .trainer import train

    overrides = {k: v for k, v in settings.items() if v is not None}
    lengths = [k for k in LENGTH if k in overrides]
    if len(lengths) > 1:
        raise InputError(f"{' and '.join(map(flag, lengths))}: give one (each sets the length of the run)")
    if from_checkpoint and not resume:
        raise InputError("--from-checkpoint: only with --resume")
    launcher = {"nnodes": nnodes, "node_rank": node_rank, "rdzv_endpoint": rdzv_endpoint, "rdzv_id": rdzv_id}
    launcher = {k: v for k, v in launcher.items() if v is not None}
    if launcher and nproc_per_node is None:
        raise InputError(f"{flag(next(iter(launcher)))}: only with --nproc-per-node")
    if resume:
        if "out" not in overrides:
            raise InputError("--resume: give the run directory with --out")
        saved = load_run_config(overrides["out"])
        if config_name:  # `make train ARGS=--resume` passes the Makefile's CONFIG whatever the run was made with
            click.echo(f"note: --resume continues with the settings saved in {overrides['out']}/config.json; "
                       f"--config {config_name} is not applied", err=True)
        config = with_overrides(saved, overrides)
    elif config_name:
        config = load_train_config(config_name, overrides)
    else:  # no preset: without --model, the recipe sizes the model, batch and schedule when the run starts
        config = with_overrides({}, overrides)
    if not resume:
        # --out checked before the recipe's timing or any worker starts; master=False: nothing is
        # written yet (rank 0 writes the run when it starts)
        RunDir(config.out, master=False).start(config)
    one_process = functools.partial(train, config, resume=from_checkpoint or resume, threads=threads)
    if nproc_per_node is None:
        one_process()
    else:
        from .launch import launch

        launch(one_process, nproc_per_node, **launcher)


@cli.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), help="The PNG to write.  [default: RUN/loss.png]")
@overwrite_option("a gptkit loss plot")
def plot(run_dir, out, overwrite):
    """Plot training and validation loss against tokens, with the learning rate, from RUN/metrics.jsonl."""
    from .plot import plot_run

    click.echo(f"wrote {plot_run(run_dir, out, overwrite)}")


def main():
    cli(prog_name="gptkit train")
