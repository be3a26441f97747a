"""The one place that decides a run's settings.

`settle(config, resume, dist, threads)` turns what the user gave into a Run: the final, frozen settings,
the model resolved for the data, and the data and checkpoints they name, opened and checked. Components
get their own section of the settings afterwards and never change it.

A setting takes its value from the highest layer that gives it one:

    1. the command line's flags
    2. a settings file or preset (--config), or, on a resume, the run's config.json
    3. the model and settings that the run starts from: --init-from's checkpoint's model, or the recipe's
       choice for the data, the budget and the device (train/recipe/), where no model is given
    4. WITHOUT_RECIPE (train/sections.py), where the model is given and the recipe does not run
    5. settings that follow from others: min_lr, a tenth of lr
    6. the defaults of train/sections.py

Layers 1 and 2 make the TrainConfig the caller passes (from_layers, load_train_config, resume_config);
layers 3 to 5 are added here. A layer that gives a length (max_steps, max_tokens, max_time) sets the
length alone: the lengths below it are dropped. Paths are recorded absolute, so that a resume from
another directory finds them.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import numpy as np

from gptkit.model.config import ModelConfig, load_config
from gptkit.model.info import describe, training_memory
from gptkit.model.lora import LoraConfig, adapters_asked, wants_special
from gptkit.runtime.device import Memory
from gptkit.runtime.threads import Threads
from gptkit.shared import config as config_files
from gptkit.shared.errors import SettingError, named
from gptkit.shared.shard_data import ShardData, TooShort
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge, cut_split

from .checkpoint_read import initial_model
from .config import LENGTH, PRESETS_DIR, REQUIRED, SETTINGS, TrainConfig, is_unset, refuse_unused
from .data import Loader, cut_of, data_tokenizer, tokens_present
from .prepared import Run
from .processes import Dist
from .recipe import report as recipe_report
from .recipe.settings import recipe_settings
from .resume import check_resume
from .run_dir import load_run_config, recorded_paths
from .sections import WITHOUT_RECIPE


def settle(config: TrainConfig, resume: bool | str = False, dist: Dist = Dist(), threads: Threads | None = None) -> Run:
    """The Run that `config` (layers 1 and 2) describes, on this process's place `dist`. `resume`: False
    (a new run), True (from the run's latest checkpoint), or a checkpoint directory of the run. The recipe
    times its candidates with `threads`; a resume refuses a thread count other than the run's."""
    then = load_run_config(config.job.out) if resume else None  # the run's config.json, read once
    as_given = config.job  # its paths as the user spelled them, which messages name
    config = config.replace(**recorded_paths(config, then))
    data = ShardDir(config.job.data)
    tokenizer = data_tokenizer(data)
    recipe = start = None
    context_given = config.batch.context_length is not None  # else the recipe's, or the model's own
    if config.job.init_from and not resume:  # layer 3: the checkpoint's model
        recorded, start = initial_model(as_given, tokenizer)
        config = from_layers({**config.to_dict(), "model": None}, {"model": recorded})
    elif config.job.model is None and not resume:  # layer 3: the recipe's choice
        cut_of(config.batch.merges, data, tokenizer, None)  # merges given: refused before the recipe's timing
        assert threads is not None  # train() measures them
        settings, recipe = recipe_settings(config.length, config.batch, config.job.seed, data, tokenizer, dist, threads)
        config = from_layers(config.to_dict(), settings)
    given = config = completed(config)  # its model as given: a preset's name or a file's path, named in messages
    cut = cut_of(config.batch.merges, data, tokenizer, config.job.init_from)
    model = resolve_model(config, (cut.tokenizer if cut else tokenizer).vocab_size)
    config = config.replace(model=model.to_dict())
    section = config.lora  # the adapters' settings, checked against the model (model/lora/)
    lora = adapters_asked(model, section.lora_rank, section.lora_alpha, section.lora_targets, section.lora_train_tokens)
    if recipe is not None:
        assert config.optim.lr is not None  # completed
        _log(recipe_report.line(recipe, model, config.batch, config.optim.lr))
    context_from = "the recipe chose that context" if recipe is not None else "that is the model's context"
    loader, val_data = _splits(config, data, tokenizer, model, dist, cut, None if context_given else context_from)
    if lora is not None and wants_special(section.lora_train_tokens):
        # the special tokens the training data holds: chat markup the base may never have seen
        lora = lora.with_tokens(tokens_present(loader.data, tokenizer.special_tokens.values()))
    eot_id = data.eot_id(tokenizer)
    if cut is not None:
        tokenizer, eot_id = cut.tokenizer, None if eot_id is None else int(cut(np.array([eot_id]), np.int64)[0])
    run = Run(
        config,
        model,
        data,
        tokenizer,
        eot_id,
        data.identity(),
        loader,
        val_data,
        _memory(given, model, dist, lora),
        init_from=start,
        recipe=recipe,
        lora=lora,
        lora_base=start if lora else None,
    )
    if not resume:
        return run
    assert then is not None
    checked = check_resume(run, resume, given, then, threads)
    return dataclasses.replace(run, resume=checked, lora_base=checked.checkpoint.base() if lora else None)


def completed(config: TrainConfig) -> TrainConfig:
    """Layers 4 and 5 under `config`: WITHOUT_RECIPE's values for the settings still unset, then min_lr
    a tenth of lr where it is unset. Every setting a run uses then has a value."""
    config = from_layers(config.to_dict(), WITHOUT_RECIPE)
    assert config.optim.lr is not None
    return config if config.lr_schedule.min_lr is not None else config.replace(min_lr=config.optim.lr / 10)


def resolve_model(config: TrainConfig, vocab_size: int) -> ModelConfig:
    """The model a run trains: config's model (a preset name, a model config file or the model config
    itself) with the data's `vocab_size`, which replaces any the model gives (a model file may leave
    it out). The run records the model itself, so a file edited later cannot change a resumed run."""
    model = config.job.model
    try:
        if isinstance(model, dict):
            resolved = ModelConfig.from_dict({**model, "vocab_size": vocab_size}, "model")
        else:
            assert model is not None  # settled: the recipe's, the checkpoint's or the user's
            resolved = load_config(model, vocab_size)
    except SettingError as e:  # load_config names the file as the setting `config`; here it is `model`
        raise SettingError("model", e.marked) from None
    context = config.batch.context_length
    if context is not None and context > resolved.context_length:
        raise SettingError("context_length", f"{context}: longer than the model's context of {resolved.context_length}")
    return resolved


def from_layers(*layers: dict[str, Any]) -> TrainConfig:
    """The config of `layers` of flat settings, highest first (the order in this module's docstring).
    A setting takes its value from the highest layer that gives it one. None is unset where a setting
    may be unset (its default is None), and elsewhere a value TrainConfig refuses (a file's "seed":
    null). A layer that gives a length sets the length alone: `--config gpt2-small --max-steps 12` runs
    12 steps, and config.json records the one length that applies."""
    settings: dict[str, Any] = {}
    for layer in layers:
        given = {k: v for k, v in layer.items() if k not in settings and not is_unset(k, v)}
        if any(k in settings for k in LENGTH):
            given = {k: v for k, v in given.items() if k not in LENGTH}
        settings.update(given)
    missing = [name for name in REQUIRED if name not in settings]
    if missing:
        raise SettingError(missing[0], f"is needed: {SETTINGS[missing[0]].expected}")
    return TrainConfig.of(**settings)


def load_train_config(name_or_path: str, overrides: dict[str, Any]) -> TrainConfig:
    """Layers 1 and 2 of a new run: the flags `overrides` over a preset or JSON file of settings (an
    unknown key is an error)."""
    settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "training settings")
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise SettingError("config", f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(SETTINGS)})")
    if settings.get("model") is not None and overrides.get("init_from") is not None and overrides.get("model") is None:
        raise SettingError(
            "config",
            f"{name_or_path}: gives a model, and {named('init_from')} {overrides['init_from']} "
            "starts from the checkpoint's: give one of them",
        )
    lengths = [name for name in LENGTH if settings.get(name) is not None]
    if len(lengths) > 1 and all(overrides.get(name) is None for name in LENGTH):  # a flag's length drops the file's
        first, second = lengths[:2]
        raise SettingError(
            "config",
            f"{path}: {first} {settings[first]} and {second} {settings[second]}: give one "
            "(each sets the length of the run)",
        )
    try:
        config = from_layers(overrides, settings)
        # A file's setting at its default is not one the user gave: a run's config.json records every
        # setting, those that do not apply to it included, and runs again as it is.
        refuse_unused(config, [name for name, value in settings.items() if value != SETTINGS[name].default])
        return config
    except SettingError as e:  # a value of the file's own: the file is named, not a flag
        if e.setting in settings and overrides.get(e.setting) is None:
            raise SettingError("config", f"{path}: {e.setting} {e.problem}") from None
        raise


def resume_config(overrides: dict[str, Any]) -> TrainConfig:
    """Layers 1 and 2 of a resume: the flags `overrides` over the settings that the run in
    overrides["out"] saved."""
    if overrides.get("out") is None:
        raise SettingError("out", f"is needed with {named('resume')}: the run directory")
    return from_layers(overrides, load_run_config(overrides["out"]))


def _splits(
    config: TrainConfig,
    data: ShardDir,
    tokenizer: Tokenizer,
    model: ModelConfig,
    dist: Dist,
    cut: Unmerge | None,
    context_from: str | None,
) -> tuple[Loader, ShardData]:
    """This process's training batches and the validation split, both checked (verify_data), in the
    tokens of the data's `tokenizer`, or of its `cut`. `context_from`: where a context length the user
    did not give came from, said where the data is too short for it (None: the user gave it)."""
    batch = config.batch
    context = batch.context_length or model.context_length
    try:
        train, val = (
            ShardData(data, split, tokenizer.vocab_size, tokenizer.fingerprint, context, batch.verify_data)
            for split in ("train", "val")
        )
    except TooShort as e:
        if e.longest < 2:  # no context fits: the data is too short, whatever the setting
            raise
        chosen = "" if context_from is None else f"{context_from}: "
        raise SettingError(
            "data", f"{e.marked}; {chosen}give {named('context_length')} {e.longest - 1} or less"
        ) from None
    if cut is not None:
        train, val = (cut_split(split, cut, context) for split in (train, val))
    assert batch.batch_size is not None
    if batch.batch_size % dist.world:
        raise SettingError(
            "batch_size",
            f"{batch.batch_size}: not divisible among {dist.world} processes (it counts the sequences of all of them)",
        )
    return Loader(train, batch, config.job.seed, dist), val


def _memory(config: TrainConfig, model: ModelConfig, dist: Dist, lora: LoraConfig | None) -> Memory:
    """What one process needs for the model, its batch, optimizer and activations, checked against its
    device: a model too large is refused before it is built, not by the allocator. Activations are bf16
    under CUDA's autocast; a sharded model's state is split in `dist.world` shards; with `lora`, only
    the adapters have gradients and optimizer state."""
    batch_size = (config.batch.batch_size or 1) // dist.world
    context = config.batch.context_length or model.context_length
    needed = training_memory(
        model,
        batch_size,
        2 if dist.device.type == "cuda" else 4,
        context,
        muon=config.optim.optimizer == "muon",
        shards=dist.world if dist.sharded else 1,
        activation_checkpointing=config.parallelism.activation_checkpointing,
        adapters=lora.params(model) if lora else None,
    )
    name = f"{config.job.model}: " if isinstance(config.job.model, str) else ""
    memory = Memory(
        needed,
        dist.device,
        "model",
        f"{name}{describe(model)}, trained at batch {batch_size} x {context}",
        "choose a smaller --model or --batch-size",
    )
    memory.check()
    return memory


def _log(line: str) -> None:
    if os.environ.get("RANK", "0") == "0":  # under torchrun, one line, not one a process
        print(line, flush=True)
