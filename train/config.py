"""The training configuration: one dataclass, checked when it is made; presets as JSON."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from gptkit.shared import config as config_files
from gptkit.shared.errors import SettingError

PRESETS_DIR = Path(__file__).parent / "presets"


@dataclass
class TrainConfig:
    # What to train on and where to write.
    data: str  # a pretokenize output directory
    out: str  # the run directory, runs/NAME
    model: str | dict | None = None  # a model preset name, a model config file, the model config itself; None: the recipe's
    seed: int = 1337
    device: str = "auto"  # auto | cpu | cuda
    compile: bool | None = None  # default: on CUDA yes, on CPU no
    # Batch: each optimizer step sees batch_size x grad_accum sequences of context_length tokens;
    # batch_size counts the sequences of all processes together (each takes batch_size / processes).
    batch_size: int | None = None  # None: the recipe's, or WITHOUT_RECIPE's
    grad_accum: int = 1
    context_length: int | None = None  # default: the model's
    loader: str = "random"  # random | sequential
    verify_data: bool = True  # read every shard once first: CRC-32 and id range
    # Length: max_tokens, when set, decides the number of steps; else max_time; else max_steps.
    # None of them: the recipe's DEFAULT_BUDGET, or WITHOUT_RECIPE's max_steps.
    max_steps: int | None = None
    max_tokens: int | None = None
    max_time: str | None = None  # a duration ("2m", "90s", "1h30m"): steps planned from the measured throughput
    # Optimizer.
    optimizer: str = "adamw"  # adamw | muon (Muon for hidden matrices, AdamW for the rest)
    lr: float | None = None
    min_lr: float | None = None  # None: lr / 10
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1  # on matrices of 2 or more dimensions only
    decay_embeddings: bool = False
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    grad_clip: float = 1.0  # global L2 norm; 0: no clipping
    # Schedule.
    schedule: str = "cosine"  # cosine | wsd
    warmup_steps: int | None = None  # default: WARMUP_FRACTION of the steps (train/optim.py)
    decay_steps: int | None = None  # cosine: the step where min_lr is reached (default: the last step)
    cooldown_fraction: float = 0.2  # wsd: the final fraction of the steps that decays linearly to min_lr
    # Evaluation, logging, samples, checkpoints.
    eval_interval: int | None = None
    eval_tokens: int = 65536
    log_interval: int = 10
    sample_interval: int = 0  # 0: never
    sample_prompt: str = "Once upon a time"
    sample_tokens: int = 48
    checkpoint_interval: int = 500  # steps; 0: only at the end
    checkpoint_tokens: int | None = None  # also every this many tokens
    keep_last: int = 3

    def __post_init__(self):
        """Every value is checked here, however the config is made (flags, a preset, a run's
        config.json, a library call): one that cannot work is a SettingError naming its field."""
        for name in PATHS:  # a pathlib.Path is welcome; the config keeps the string, as its JSON does
            if isinstance(getattr(self, name), os.PathLike):
                setattr(self, name, os.fspath(getattr(self, name)))
        for name, expected in {**PATHS, "sample_prompt": "text"}.items():
            if not isinstance(getattr(self, name), str) or (name in PATHS and not getattr(self, name)):
                raise SettingError(name, f"{getattr(self, name)!r}: expected {expected}")
        if self.model is not None and not isinstance(self.model, (str, dict)):
            raise SettingError("model", f"{self.model!r}: expected a preset name, a model config file or a model config")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise SettingError(name, f"{getattr(self, name)!r}: expected one of {', '.join(allowed)}")
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
        if self.max_time is not None:
            parse_duration(self.max_time)

    def to_dict(self):
        return dataclasses.asdict(self)

    def digest(self):
        """A hash of the settings that must not change when a run is resumed."""
        fixed = {k: v for k, v in self.to_dict().items() if k in RESUME_FIXED}
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}

# Where a run's model is given (--model, a preset) the recipe does not run; the settings it would
# choose and the user left unset take these values (min_lr: a tenth of lr).
WITHOUT_RECIPE = {"batch_size": 8, "lr": 1e-3, "eval_interval": 200, "max_steps": 1000}


def completed(config: TrainConfig) -> TrainConfig:
    """`config` with WITHOUT_RECIPE's values where it leaves them unset: every setting a run uses
    then has a value, and config.json records it."""
    unset = {k: v for k, v in WITHOUT_RECIPE.items() if getattr(config, k) is None}
    if any(getattr(config, k) is not None for k in LENGTH):
        unset.pop("max_steps", None)
    config = dataclasses.replace(config, **unset)
    return config if config.min_lr is not None else dataclasses.replace(config, min_lr=config.lr / 10)

# What __post_init__ checks, field by field.
PATHS = {"data": "a pretokenize output directory", "out": "a run directory"}
CHOICES = {"device": ("auto", "cpu", "cuda"), "loader": ("random", "sequential"), "optimizer": ("adamw", "muon"),
           "schedule": ("cosine", "wsd")}
SWITCHES = ("compile", "verify_data", "decay_embeddings")  # None stays allowed where the default is None
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
# (LENGTH) may change: the schedule is re-planned from the step where the run resumes.
RESUME_FIXED = ("data", "model", "seed", "batch_size", "grad_accum", "context_length", "loader", "optimizer", "lr",
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
    """A preset or JSON file of settings (unknown keys are errors), then `overrides` on top."""
    settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "training settings")
    unknown = sorted(set(settings) - set(FIELDS))
    if unknown:
        raise SettingError("config", f"{path}: unknown setting {unknown[0]!r} (known: {', '.join(FIELDS)})")
    return with_overrides(settings, overrides)


def with_overrides(settings, overrides) -> TrainConfig:
    """The config of `settings` (a preset's, a recipe's, a resumed run's) with `overrides` on top,
    None values left out. Where the overrides give a length, the length settings of `settings`
    are cleared: the command line's wins (`--config gpt2-small --max-steps 12` runs 12 steps)."""
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if any(k in overrides for k in LENGTH):
        settings = {**settings, **{k: None for k in ("max_tokens", "max_time") if k in settings}}
    missing = [name for name in PATHS if name not in {**settings, **overrides}]
    if missing:
        raise SettingError(missing[0], f"is needed: {PATHS[missing[0]]}")
    return TrainConfig(**{**settings, **overrides})


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text) -> float:
    """Seconds in a duration: "90" or "90s", "2m", "1.5h", "1h30m", "2m30s"."""
    match = DURATION.fullmatch(str(text).strip())
    seconds = match and sum(float(v) * unit for v, unit in zip(match.groups(), (3600, 60, 1)) if v)
    if not seconds:
        raise SettingError("max_time", f"{text!r}: expected a duration above 0 such as 90s, 2m or 1h30m")
    return seconds
