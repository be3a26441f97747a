"""`train`: train a TransformerLM on token shards. Run `train --help`.

Every setting of train.config.TrainConfig has a flag (`--batch-size`, `--lr`, ...); a flag
overrides the --config preset or file, which overrides the defaults.
"""
import click

from shared.errors import InputError

from .config import HELP, TrainConfig, load_train_config, option_specs, preset_names


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


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110})
@click.option("--config", "config_name", metavar="PRESET|FILE", help=f"Settings: a preset ({', '.join(preset_names())}) or a JSON file.")
@click.option("--resume", is_flag=True, help="Continue the run in --out from its latest checkpoint, with its saved settings.")
@_setting_options
def cli(config_name, resume, **settings):
    """Train a Llama-style model on the shards of a pretokenize directory; checkpoints and
    metrics go to --out. Multi-GPU: torchrun --nproc_per_node=N -m train ..."""
    from .trainer import load_run_config, train

    overrides = {k: v for k, v in settings.items() if v is not None}
    if resume:
        if "out" not in overrides:
            raise InputError("--resume: give the run directory with --out")
        saved = load_run_config(overrides["out"])
        base = load_train_config(config_name).to_dict() if config_name else {}
        config = TrainConfig(**{**saved, **base, **overrides})
    else:
        config = load_train_config(config_name, overrides)
    train(config.check(), resume=resume)


def main():
    cli(prog_name="train")
