"""The training configuration: one dataclass, the source of every setting's flag and help,
checked when it is made; the one precedence of the layers a config is made of (from_layers); the
model resolved for the data (resolve_model); presets as JSON."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from dataclasses import MISSING, dataclass, field
from pathlib import Path

from gptkit.model.config import ModelConfig, load_config
from gptkit.shared import config as config_files
from gptkit.shared.cli import flag
from gptkit.shared.errors import SettingError

from .trackers import tracker_names

PRESETS_DIR = Path(__file__).parent / "presets"

DEFAULT_BUDGET = "5m"  # the recipe's length where none is given: long enough to learn something, short enough to wait for

# Where a run's model is given (--model, a preset) the recipe does not run; the settings it would
# choose and the user left unset take these values (min_lr: a tenth of lr).
WITHOUT_RECIPE = {"batch_size": 8, "lr": 1e-3, "eval_interval": 200, "max_steps": 1000}

RECIPE = "the recipe's for the data, the budget and the device"  # what --help shows where the recipe decides


def setting(default, help, *, shown=None, metavar=None):
    """A TrainConfig field with what `gptkit train run --help` says of its flag: `help`; `shown`,
    the default it shows where that is not `default` (the recipe decides, or another setting, or
    the setting is required); `metavar`, where the type's name says too little."""
    return field(default=default, metadata={"help": help, "shown": shown, "metavar": metavar})


@dataclass
class TrainConfig:
    """A run's settings. Each field is a flag of `gptkit train run`, made from the field alone
    (train/cli.py): its type, its help and the default --help shows. A default of None means unset:
    a lower layer of from_layers decides (the recipe, WITHOUT_RECIPE, another setting)."""

    # What to train on and where to write.
    data: str = setting(MISSING, "A pretokenize output directory (shards + tokenizer.json).",
                        shown="required; with --resume, the run's", metavar="DIR")
    out: str = setting(MISSING, "The run directory (config.json, metrics.jsonl, checkpoints/, latest).", shown="required",
                       metavar="DIR")
    # a preset name or a model config file; resolve_model makes it the model config itself
    model: str | dict | None = setting(None, "A model preset name or a model config file (the run records the model "
                                             "itself).", shown=RECIPE, metavar="PRESET|FILE")
    init_from: str | None = setting(None, "Start from this checkpoint's weights and model: a new run, with a fresh "
                                          "optimizer and schedule, on data encoded with the checkpoint's tokenizer.",
                                    metavar="DIR")
    seed: int = setting(1337, "Seed of the model's initialization, the random loader and the samples.")
    device: str = setting("auto", "auto | cpu | cuda.")
    parallel: str = setting("ddp", "ddp (each process holds the whole model, its gradients and optimizer state) | fsdp "
                                   "(FSDP2: each of N processes holds a 1/N shard of them, N = 1 included).")
    activation_checkpointing: bool = setting(False, "Keep each block's input only and recompute its activations in the "
                                                    "backward pass: far less activation memory for about a third more "
                                                    "compute.")
    compile: bool | None = setting(None, "Compile the model with torch.compile (costs 30-40 s on CPU and gains nothing "
                                         "there).", shown="on CUDA")
    deterministic: bool = setting(False, "Deterministic algorithms only (torch.use_deterministic_algorithms, cuBLAS's "
                                         "fixed workspace, Inductor's kernels chosen without timing them): a CUDA run, "
                                         "compiled or not, repeats itself bit for bit, a resume included, somewhat "
                                         "slower. On the CPU it fixes torch's threads (one per physical core unless "
                                         "--threads is given), and a resume goes on with the count the run recorded.")
    # Batch: each optimizer step sees batch_size x grad_accum sequences of context_length tokens;
    # batch_size counts the sequences of all processes together (each takes batch_size / processes).
    batch_size: int | None = setting(None, "Sequences per micro-step, all processes together.",
                                     shown=f"{RECIPE}; with --model, {WITHOUT_RECIPE['batch_size']}")
    grad_accum: int = setting(1, "Micro-steps per optimizer step.")
    context_length: int | None = setting(None, "Tokens per sequence (at most the model's context).", shown="the model's")
    loader: str = setting("random", "random (uniform offsets) | sequential (the token stream in order).")
    verify_data: bool = setting(True, "Read every shard once before training: its CRC-32 and that every id fits the "
                                      "vocabulary (about 0.5 s per GiB from the page cache; --no-verify-data skips it for "
                                      "large data you trust).")
    # Length: one of max_steps, max_tokens and max_time (LENGTH).
    max_steps: int | None = setting(None, "Optimizer steps (with --resume: extend or shorten the run to this many).",
                                    shown=f"with --model, {WITHOUT_RECIPE['max_steps']}; else --max-time")
    max_tokens: int | None = setting(None, "Train on this many tokens instead (sets the number of steps).")
    max_time: str | None = setting(None, "Train for this long instead (e.g. 2m, 90s, 1h30m): the steps are planned from "
                                         "the measured throughput so that the schedule ends on time.",
                                   shown=f"{DEFAULT_BUDGET} with the recipe, unless --max-steps or --max-tokens",
                                   metavar="DURATION")
    # Optimizer.
    optimizer: str = setting("adamw", "adamw | muon (Muon for hidden matrices, AdamW for embeddings, head and gains).")
    lr: float | None = setting(None, "Peak learning rate (AdamW).", shown=f"{RECIPE}; with --model, {WITHOUT_RECIPE['lr']}")
    min_lr: float | None = setting(None, "Learning rate at the end of the schedule.", shown="a tenth of --lr")
    beta1: float = setting(0.9, "AdamW's first-moment decay.")
    beta2: float = setting(0.95, "AdamW's second-moment decay.")
    eps: float = setting(1e-8, "AdamW's epsilon.")
    weight_decay: float = setting(0.1, "Decoupled weight decay, on matrices only.")
    decay_embeddings: bool = setting(False, "Also decay the embedding (and a separate LM head).")
    muon_lr: float = setting(0.02, "Peak learning rate of Muon.")
    muon_momentum: float = setting(0.95, "Muon's momentum (Nesterov).")
    grad_clip: float = setting(1.0, "Clip the global gradient L2 norm to this (0: no clipping).")
    # Schedule.
    schedule: str = setting("cosine", "cosine (warmup, cosine to min_lr) | wsd (warmup, stable, linear cool-down).")
    # its default, WARMUP_FRACTION of the steps, is train/optim.py's
    warmup_steps: int | None = setting(None, "Steps of linear warmup, as given (a run shorter than it ends warming up).",
                                       shown="a twentieth of the run's steps")
    decay_steps: int | None = setting(None, "cosine: the step where min_lr is reached.", shown="the last")
    cooldown_fraction: float = setting(0.2, "wsd: the final fraction of the steps spent decaying to min_lr.")
    # Evaluation, logging, samples, checkpoints.
    eval_interval: int | None = setting(None, "Steps between validation losses (0: only at the end).",
                                        shown=f"{RECIPE} (5 evaluations); with --model, {WITHOUT_RECIPE['eval_interval']}")
    eval_tokens: int = setting(65536, "Validation tokens (the first of the val split; the same every time).")
    eval_hellaswag: str | None = setting(None, "Also score this HellaSwag jsonl at every evaluation: acc and acc_norm, as "
                                               "`gptkit eval hellaswag` scores them.", metavar="FILE")
    log_interval: int = setting(10, "Steps between log lines.")
    sample_interval: int = setting(0, "Steps between generated samples (0: never).")
    sample_prompt: str = setting("Once upon a time", "The prompt of the samples.")
    sample_tokens: int = setting(48, "Tokens generated per sample.")
    checkpoint_interval: int = setting(500, "Steps between checkpoints (0: only at the end).")
    checkpoint_tokens: int | None = setting(None, "Also a checkpoint every this many tokens.")
    keep_last: int = setting(3, "Checkpoints kept.")
    log_to: str | list | None = setting(None, "Also send metrics.jsonl's records to these trackers: tensorboard, wandb "
                                              "(comma-separated; docs/train.md, Trackers).", metavar="NAMES")

    def __post_init__(self):
        """Every value is checked here, however the config is made (flags, a preset, a run's
        config.json, a library call): one that cannot work is a SettingError naming its field."""
        for name in (*PATHS, "init_from", "eval_hellaswag"):  # a pathlib.Path is welcome; the config keeps the string, as its JSON does
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        for name, expected in {**PATHS, "sample_prompt": "text"}.items():
            if not isinstance(getattr(self, name), str) or (name in PATHS and not getattr(self, name)):
                raise SettingError(name, f"{getattr(self, name)!r}: expected {expected}")
        if self.init_from is not None and not (isinstance(self.init_from, str) and self.init_from):
            raise SettingError("init_from", f"{self.init_from!r}: expected a checkpoint directory")
        if self.eval_hellaswag is not None and not (isinstance(self.eval_hellaswag, str) and self.eval_hellaswag):
            raise SettingError("eval_hellaswag", f"{self.eval_hellaswag!r}: expected a HellaSwag jsonl file")
        if self.model is not None and not isinstance(self.model, (str, dict)):
            raise SettingError("model", f"{self.model!r}: expected a preset name, a model config file or a model config")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise SettingError(name, f"{getattr(self, name)!r}: expected one of {', '.join(allowed)}")
        if self.parallel == "fsdp" and self.optimizer == "muon":
            raise SettingError("parallel", "fsdp: Muon orthogonalizes whole matrices and fsdp shards them; train with "
                                           "--optimizer adamw, or --parallel ddp")
        for name in SWITCHES:
            value = getattr(self, name)
            if not isinstance(value, bool) and not (value is None and FIELDS[name].default is None):
                raise SettingError(name, f"{value!r}: expected true or false")
        for name, least in WHOLE.items():
            value = getattr(self, name)
            if value is None and FIELDS[name].default is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**63:
                bound = "below 2^63" if isinstance(value, int) and value >= 2**63 else f"{least} or more"
                raise SettingError(name, f"{value!r}: expected a whole number, {bound}")
        for name, (expected, within) in REAL.items():
            value = getattr(self, name)
            if value is None and FIELDS[name].default is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not within(value):
                raise SettingError(name, f"{value!r}: expected a finite number {expected}")
        self.log_to = tracker_names(self.log_to)  # kept as a list of names
        if self.max_time is not None:
            parse_duration(self.max_time)
        lengths = [name for name in LENGTH if getattr(self, name) is not None]
        if len(lengths) > 1:  # from_layers keeps the highest layer's length: two are given together
            first, second = lengths[:2]
            raise SettingError(first, f"{getattr(self, first)} and {flag(second)} {getattr(self, second)}: give one "
                                      "(each sets the length of the run)")
        if self.min_lr is not None and self.lr is not None and self.min_lr > self.lr:
            raise SettingError("min_lr", f"{self.min_lr}: above the peak --lr {self.lr} (the schedule decays from --lr "
                                         "to --min-lr)")
        refuse_unused(self, [name for name in ONLY_WITH if FIELDS[name].default is None and getattr(self, name) is not None])

    def to_dict(self):
        return dataclasses.asdict(self)

    def digest(self, data_path=None):
        """A hash of the settings that must not change when a run is resumed (RESUME_FIXED). The
        data is compared by its content instead (shared/shard_dir.py, ShardDir.identity); `data_path`: hashed
        too, as checkpoints written before that hashed the path the run recorded."""
        fixed = {k: v for k, v in self.to_dict().items() if k in RESUME_FIXED}
        if data_path is not None:
            fixed["data"] = data_path
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}

# Settings that do something only where another setting has a value (why, as the refusal says).
ONLY_WITH = {"decay_steps": ("schedule", "cosine", "wsd cools down over --cooldown-fraction of the steps"),
             "cooldown_fraction": ("schedule", "wsd", "cosine decays over --decay-steps"),
             "muon_lr": ("optimizer", "muon", "AdamW's is --lr"),
             "muon_momentum": ("optimizer", "muon", "AdamW's are --beta1 and --beta2")}


def refuse_unused(config: TrainConfig, given) -> None:
    """Refuse a setting among `given` (the names a user set) that `config` would not use, naming it:
    one of ONLY_WITH where the setting it goes with has another value. TrainConfig refuses those
    whose default is None when they are set; the others keep a default for the runs that use them
    (and in their checkpoints' digests), so only the command line knows they were given: it calls
    this with its flags and a --config file's settings."""
    for name in given:
        if name in ONLY_WITH:
            other, value, why = ONLY_WITH[name]
            if getattr(config, other) != value:
                raise SettingError(name, f"{getattr(config, name)}: only with {flag(other)} {value} ({why})")


def from_layers(*layers: dict) -> TrainConfig:
    """The config of `layers` of settings, highest first: every config of a run is made here, in
    one precedence. A flag, then the --config preset or file (with --resume, the run's
    config.json), then the recipe (where the model is not given: train/recipe.py), then
    WITHOUT_RECIPE and the settings that follow from others (completed), then TrainConfig's
    defaults. A setting takes its value from the highest layer that gives it one; None is unset,
    no value, where a setting may be unset (its default is None), and elsewhere a value
    TrainConfig refuses (a file's "seed": null). A layer that gives a length (LENGTH) sets the
    length alone, the lengths below it are dropped: `--config gpt2-small --max-steps 12` runs 12
    steps, and config.json records the one length that applies (two in one layer: TrainConfig
    refuses them). The recipe and WITHOUT_RECIPE give only settings that default to None, so a
    config already made is the layers above them as they stand."""
    settings = {}
    for layer in layers:
        given = {k: v for k, v in layer.items() if k not in settings and not (v is None and _may_be_unset(k))}
        if any(k in settings for k in LENGTH):
            given = {k: v for k, v in given.items() if k not in LENGTH}
        settings.update(given)
    missing = [name for name in PATHS if name not in settings]
    if missing:
        raise SettingError(missing[0], f"is needed: {PATHS[missing[0]]}")
    return TrainConfig(**settings)


def _may_be_unset(name):
    return name in FIELDS and FIELDS[name].default is None


def completed(config: TrainConfig) -> TrainConfig:
    """`config` over WITHOUT_RECIPE's values, then min_lr a tenth of lr where it is unset: every
    setting a run uses then has a value, and config.json records it."""
    config = from_layers(config.to_dict(), WITHOUT_RECIPE)
    return from_layers(config.to_dict(), {"min_lr": config.lr / 10})


def resolve_model(config: TrainConfig, vocab_size: int) -> tuple[TrainConfig, ModelConfig]:
    """The model a run trains, made in this one place: config.model (a preset name, a model config
    file or the model config itself) with the data's `vocab_size`, which replaces any the model
    gives (a model file may leave it out); and `config` holding that model itself, every field of
    its config, not the name of the preset or file it came from: a file edited later cannot change
    a resumed run's model."""
    try:
        if isinstance(config.model, dict):
            resolved = ModelConfig.from_dict({**config.model, "vocab_size": vocab_size}, "model")
        else:
            resolved = load_config(config.model, vocab_size)
    except SettingError as e:  # load_config names the file as the setting `config`; here it is `model`
        raise SettingError("model", e.problem) from None
    if config.context_length is not None and config.context_length > resolved.context_length:
        raise SettingError("context_length", f"{config.context_length}: longer than the model's context of "
                                             f"{resolved.context_length}")
    return dataclasses.replace(config, model=resolved.to_dict()), resolved


# What __post_init__ checks, field by field.
PATHS = {"data": "a pretokenize output directory", "out": "a run directory"}
CHOICES = {"device": ("auto", "cpu", "cuda"), "parallel": ("ddp", "fsdp"), "loader": ("random", "sequential"),
           "optimizer": ("adamw", "muon"), "schedule": ("cosine", "wsd")}
SWITCHES = ("compile", "deterministic", "activation_checkpointing", "verify_data", "decay_embeddings")  # None stays allowed where the default is None
# Whole numbers and their least value (None stays allowed where the default is None).
WHOLE = {"batch_size": 1, "grad_accum": 1, "max_steps": 1, "max_tokens": 1, "context_length": 1, "eval_tokens": 1,
         "log_interval": 1, "keep_last": 1, "sample_tokens": 1, "checkpoint_tokens": 1, "warmup_steps": 0,
         "decay_steps": 0, "eval_interval": 0, "sample_interval": 0, "checkpoint_interval": 0, "seed": 0}
# Real numbers: each finite and in its range.
AT_LEAST_0, ABOVE_0, BELOW_1, UP_TO_1 = ("0 or more", lambda v: v >= 0), ("above 0", lambda v: v > 0), \
    ("in [0, 1)", lambda v: 0 <= v < 1), ("in [0, 1]", lambda v: 0 <= v <= 1)
REAL = {"lr": AT_LEAST_0, "min_lr": AT_LEAST_0, "weight_decay": AT_LEAST_0, "grad_clip": AT_LEAST_0, "muon_lr": AT_LEAST_0,
        "eps": ABOVE_0, "beta1": BELOW_1, "beta2": BELOW_1, "muon_momentum": BELOW_1, "cooldown_fraction": UP_TO_1}

# Changing these would make a resumed run differ from an uninterrupted one. The length
# (LENGTH) may change: the schedule is re-planned from the step where the run resumes. So may the
# data's path: a resume checks its content (shared/shard_dir.py, ShardDir.identity).
RESUME_FIXED = ("model", "seed", "batch_size", "grad_accum", "context_length", "loader", "optimizer", "lr",
                "min_lr", "beta1", "beta2", "eps", "weight_decay", "decay_embeddings", "muon_lr", "muon_momentum",
                "grad_clip", "schedule", "warmup_steps", "decay_steps", "cooldown_fraction")
LENGTH = ("max_steps", "max_tokens", "max_time")


def fixed_difference(then: dict, now: TrainConfig) -> str:
    """The first fixed settings (RESUME_FIXED) that differ between a run's saved settings and
    `now`; the model aside, which a resume compares with the checkpoint's own."""
    changed = [k for k in RESUME_FIXED if k != "model" and then.get(k) != getattr(now, k)]
    return ", ".join(f"{k}: {then.get(k)!r} then, {getattr(now, k)!r} now" for k in changed[:2])


def preset_names():
    return config_files.preset_names(PRESETS_DIR)


def load_train_config(name_or_path, overrides) -> TrainConfig:
    """The config of a preset or JSON file of settings (unknown keys are errors) under `overrides`
    (from_layers)."""
    settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "training settings")
    unknown = sorted(set(settings) - set(FIELDS))
    if unknown:
        raise SettingError("config", f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(FIELDS)})")
    if settings.get("model") is not None and overrides.get("init_from") is not None and overrides.get("model") is None:
        raise SettingError("config", f"{name_or_path}: gives a model, and --init-from {overrides['init_from']} starts "
                                     "from the checkpoint's: give one of them")
    lengths = [name for name in LENGTH if settings.get(name) is not None]
    if len(lengths) > 1 and all(overrides.get(name) is None for name in LENGTH):  # a flag's length drops the file's
        first, second = lengths[:2]
        raise SettingError("config", f"{path}: {first} {settings[first]} and {second} {settings[second]}: give one "
                                     "(each sets the length of the run)")
    try:
        config = from_layers(overrides, settings)
        refuse_unused(config, settings)
        return config
    except SettingError as e:  # a value of the file's own: the file is named, not a flag
        if e.setting in settings and overrides.get(e.setting) is None:
            raise SettingError("config", f"{path}: {e.setting} {e.problem}") from None
        raise


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text) -> float:
    """Seconds in a duration: "90" or "90s", "2m", "1.5h", "1h30m", "2m30s"."""
    match = DURATION.fullmatch(str(text).strip())
    seconds = match and sum(float(v) * unit for v, unit in zip(match.groups(), (3600, 60, 1)) if v)
    if not seconds:
        raise SettingError("max_time", f"{text!r}: expected a duration above 0 such as 90s, 2m or 1h30m")
    return seconds
