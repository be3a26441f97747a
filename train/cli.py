"""`gptkit train`: train a TransformerLM on token shards. Run `gptkit train run --help`.

Every setting of train.config.TrainConfig has a flag (`--batch-size`, `--lr`, ...); a flag
overrides the --config preset or file, which overrides the defaults. Without --config (and
without --model) on the CPU, train.recipe sizes the model, batch and schedule for the corpus
and the time budget instead of a preset; flags override it as they would a preset.
"""
import dataclasses

import click

from gptkit.shared.cli import CONTEXT, DefaultGroup, flag, threads_option, use_threads, version_option
from gptkit.shared.errors import InputError

from .config import FIELDS, LENGTH, load_train_config, preset_names, with_overrides
from .recipe import recipe_config

# One flag per TrainConfig field: (field, click type, help). bool fields are --x/--no-x switches.
# The types stay plain: TrainConfig checks every value, so a bad one reads the same from a flag,
# a preset, a run's config.json or a library call.
SETTINGS = (
    ("data", str, "A pretokenize output directory (shards + tokenizer.json)."),
    ("out", str, "The run directory (config.json, metrics.jsonl, checkpoints/, latest)."),
    ("model", str, "A model preset name or a model config file (the run records the model itself)."),
    ("seed", int, "Seed of the model's initialization, the random loader and the samples."),
    ("device", str, "auto | cpu | cuda."),
    ("compile", bool, "Compile the model with torch.compile; default: on CUDA (costs 30-40 s on CPU and gains nothing there)."),
    ("batch_size", int, "Sequences per micro-step, all processes together."),
    ("grad_accum", int, "Micro-steps per optimizer step."),
    ("context_length", int, "Tokens per sequence (at most the model's context; default: the model's)."),
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
    ("warmup_steps", int, "Steps of linear warmup."),
    ("decay_steps", int, "cosine: the step where min_lr is reached (default: the last)."),
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


def _setting_options(command):
    for name, kind, help in reversed(SETTINGS):
        default = FIELDS[name].default
        shown = "" if default in (None, dataclasses.MISSING) else f"  [default: {default}]"
        decls = [f"{flag(name)}/--no-{name.replace('_', '-')}"] if kind is bool else [flag(name)]
        command = click.option(*decls, name, type=kind, default=None, help=help + shown)(command)
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
    metrics go to --out. Multi-GPU: torchrun --nproc_per_node=N -m gptkit.train ..."""
    from .run_dir import load_run_config
    from .trainer import train

    use_threads(threads)
    overrides = {k: v for k, v in settings.items() if v is not None}
    lengths = [k for k in LENGTH if k in overrides]
    if len(lengths) > 1:
        raise InputError(f"{' and '.join(map(flag, lengths))}: give one (each sets the length of the run)")
    if from_checkpoint and not resume:
        raise InputError("--from-checkpoint: only with --resume")
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
    else:  # no preset: the model, batch and schedule are sized for the corpus and the time budget
        config = recipe_config(overrides)
    train(config, resume=from_checkpoint or resume)


@cli.command()
@click.argument("run_dir", metavar="RUN", type=click.Path(exists=True, file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), help="The PNG to write.  [default: RUN/loss.png]")
def plot(run_dir, out):
    """Plot training and validation loss against tokens, with the learning rate, from RUN/metrics.jsonl."""
    from .plot import plot_run

    click.echo(f"wrote {plot_run(run_dir, out)}")


def main():
    cli(prog_name="gptkit train")
