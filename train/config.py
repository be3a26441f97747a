"""The training configuration: one dataclass, presets as JSON, overrides from flags."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from gptkit.shared import config as config_files
from gptkit.shared.errors import InputError

PRESETS_DIR = Path(__file__).parent / "presets"


@dataclass
class TrainConfig:
    # What to train on and where to write.
    data: str | None = None  # a pretokenize output directory
    out: str | None = None  # the run directory, runs/NAME
    model: str | dict = "tiny"  # a model preset name, a model config file, or the model config itself
    seed: int = 1337
    device: str = "auto"  # auto | cpu | cuda
    compile: bool | None = None  # default: on CUDA yes, on CPU no
    # Batch: each optimizer step sees batch_size x grad_accum sequences of context_length tokens;
    # batch_size counts the sequences of all processes together (each takes batch_size / processes).
    batch_size: int = 8
    grad_accum: int = 1
    context_length: int | None = None  # default: the model's
    loader: str = "random"  # random | sequential
    verify_data: bool = True  # read every shard once first: CRC-32 and id range
    # Length: max_tokens, when set, decides the number of steps; else max_time; else max_steps.
    max_steps: int = 1000
    max_tokens: int | None = None
    max_time: str | None = None  # a duration ("2m", "90s", "1h30m"): steps planned from the measured throughput
    # Optimizer.
    optimizer: str = "adamw"  # adamw | muon (Muon for hidden matrices, AdamW for the rest)
    lr: float = 1e-3
    min_lr: float = 1e-4
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
    warmup_steps: int = 100
    decay_steps: int | None = None  # cosine: the step where min_lr is reached (default: the last step)
    cooldown_fraction: float = 0.2  # wsd: the final fraction of the steps that decays linearly to min_lr
    # Evaluation, logging, samples, checkpoints.
    eval_interval: int = 200
    eval_tokens: int = 65536
    log_interval: int = 10
    sample_interval: int = 0  # 0: never
    sample_prompt: str = "Once upon a time"
    sample_tokens: int = 48
    checkpoint_interval: int = 500  # steps; 0: only at the end
    checkpoint_tokens: int | None = None  # also every this many tokens
    keep_last: int = 3

    CHOICES = {"device": ("auto", "cpu", "cuda"), "loader": ("random", "sequential"),
               "optimizer": ("adamw", "muon"), "schedule": ("cosine", "wsd")}
    # Whole numbers and their least value (None stays allowed where the default is None).
    WHOLE = {"batch_size": 1, "grad_accum": 1, "max_steps": 1, "max_tokens": 1, "context_length": 1, "eval_tokens": 1,
             "log_interval": 1, "keep_last": 1, "sample_tokens": 1, "checkpoint_tokens": 1, "warmup_steps": 0,
             "decay_steps": 0, "eval_interval": 0, "sample_interval": 0, "checkpoint_interval": 0, "seed": 0}
    # Real numbers: each finite and in its range.
    AT_LEAST_0, ABOVE_0, BELOW_1, UP_TO_1 = ("0 or more", lambda v: v >= 0), ("above 0", lambda v: v > 0), \
        ("in [0, 1)", lambda v: 0 <= v < 1), ("in [0, 1]", lambda v: 0 <= v <= 1)
    REAL = {"lr": AT_LEAST_0, "min_lr": AT_LEAST_0, "weight_decay": AT_LEAST_0, "grad_clip": AT_LEAST_0,
            "muon_lr": AT_LEAST_0, "eps": ABOVE_0, "beta1": BELOW_1, "beta2": BELOW_1, "muon_momentum": BELOW_1,
            "cooldown_fraction": UP_TO_1}

    def __post_init__(self):
        """Values that cannot work are an InputError naming the setting, for library users too."""
        for name, allowed in self.CHOICES.items():
            if getattr(self, name) not in allowed:
                raise InputError(f"{_flag(name)} {getattr(self, name)!r}: expected one of {', '.join(allowed)}")
        for name, least in self.WHOLE.items():
            value = getattr(self, name)
            if value is None and FIELDS[name].default is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**63:
                bound = "below 2^63" if isinstance(value, int) and value >= 2**63 else f"{least} or more"
                raise InputError(f"{_flag(name)} {value!r}: expected a whole number, {bound}")
        for name, (expected, within) in self.REAL.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not within(value):
                raise InputError(f"{_flag(name)} {value!r}: expected a finite number {expected}")
        if self.max_time is not None:
            parse_duration(self.max_time)

    def check(self):
        """What a run needs beyond valid values: where to read and where to write."""
        if self.data is None or self.out is None:
            raise InputError("--data and --out: both are needed (a pretokenize directory and a run directory)")
        return self

    def to_dict(self):
        return dataclasses.asdict(self)

    def digest(self):
        """A hash of the settings that must not change when a run is resumed."""
        fixed = {k: v for k, v in self.to_dict().items() if k in RESUME_FIXED}
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


# Changing these would make a resumed run differ from an uninterrupted one. The length
# (LENGTH) may change: the schedule is re-planned from the step where the run resumes.
RESUME_FIXED = ("data", "model", "seed", "batch_size", "grad_accum", "context_length", "loader", "optimizer", "lr",
                "min_lr", "beta1", "beta2", "eps", "weight_decay", "decay_embeddings", "muon_lr", "muon_momentum",
                "grad_clip", "schedule", "warmup_steps", "decay_steps", "cooldown_fraction")
LENGTH = ("max_steps", "max_tokens", "max_time")

FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


def _flag(name):
    return "--" + name.replace("_", "-")

HELP = {
    "data": "A pretokenize output directory (shards + tokenizer.json).",
    "out": "The run directory (config.json, metrics.jsonl, checkpoints/, latest).",
    "model": "A model preset name or a model config file.",
    "device": "auto | cpu | cuda.",
    "compile": "Compile the model with torch.compile; default: on CUDA (costs 30-40 s on CPU and gains nothing there).",
    "batch_size": "Sequences per micro-step, all processes together.",
    "grad_accum": "Micro-steps per optimizer step.",
    "context_length": "Tokens per sequence (at most the model's context; default: the model's).",
    "loader": "random (uniform offsets) | sequential (the token stream in order).",
    "verify_data": "Read every shard once before training: its CRC-32 and that every id fits the vocabulary "
                   "(about 0.5 s per GiB from the page cache; --no-verify-data skips it for large data you trust).",
    "max_steps": "Optimizer steps (with --resume: extend or shorten the run to this many).",
    "max_tokens": "Train on this many tokens instead (sets the number of steps).",
    "max_time": "Train for this long instead (e.g. 2m, 90s, 1h30m): the steps are planned from the measured "
                "throughput so that the schedule ends on time.",
    "optimizer": "adamw | muon (Muon for hidden matrices, AdamW for embeddings, head and gains).",
    "lr": "Peak learning rate (AdamW).",
    "min_lr": "Learning rate at the end of the schedule.",
    "weight_decay": "Decoupled weight decay, on matrices only.",
    "decay_embeddings": "Also decay the embedding (and a separate LM head).",
    "muon_lr": "Peak learning rate of Muon.",
    "grad_clip": "Clip the global gradient L2 norm to this (0: no clipping).",
    "schedule": "cosine (warmup, cosine to min_lr) | wsd (warmup, stable, linear cool-down).",
    "warmup_steps": "Steps of linear warmup.",
    "decay_steps": "cosine: the step where min_lr is reached (default: the last).",
    "cooldown_fraction": "wsd: the final fraction of the steps spent decaying to min_lr.",
    "eval_interval": "Steps between validation losses (0: only at the end).",
    "eval_tokens": "Validation tokens (the first of the val split; the same every time).",
    "log_interval": "Steps between log lines.",
    "sample_interval": "Steps between generated samples (0: never).",
    "checkpoint_interval": "Steps between checkpoints (0: only at the end).",
    "checkpoint_tokens": "Also a checkpoint every this many tokens.",
    "keep_last": "Checkpoints kept.",
}


def preset_names():
    return config_files.preset_names(PRESETS_DIR)


def load_train_config(name_or_path=None, overrides=None) -> TrainConfig:
    """A preset or JSON file of settings (unknown keys are errors), then `overrides` on top."""
    settings = {}
    if name_or_path is not None:
        settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "training settings")
        unknown = sorted(set(settings) - set(FIELDS))
        if unknown:
            raise InputError(f"--config {path}: unknown setting {unknown[0]!r} (known: {', '.join(FIELDS)})")
    return TrainConfig(**{**settings, **with_length(settings, overrides)})


def with_length(settings, overrides):
    """`overrides` without None values, and with the length settings of `settings` (a preset,
    or a resumed run's) cleared when the overrides give a length: the command line's wins."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    given = [k for k in LENGTH if k in overrides]
    if len(given) > 1:
        flags = " and ".join(f"--{k.replace('_', '-')}" for k in given)
        raise InputError(f"{flags}: give one (each sets the length of the run)")
    if given:
        return {**{k: None for k in ("max_tokens", "max_time") if k in settings}, **overrides}
    return overrides


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")


def parse_duration(text) -> float:
    """Seconds in a duration: "90" or "90s", "2m", "1.5h", "1h30m", "2m30s"."""
    match = DURATION.fullmatch(str(text).strip())
    seconds = match and sum(float(v) * unit for v, unit in zip(match.groups(), (3600, 60, 1)) if v)
    if not seconds:
        raise InputError(f"--max-time {text!r}: expected a duration above 0 such as 90s, 2m or 1h30m")
    return seconds


def option_specs():
    """(name, type, default) of every setting, so that the CLI has a flag for each."""
    return [(f.name, {"int": int, "float": float, "bool": bool}.get(f.type.split(" ")[0], str), f.default)
            for f in dataclasses.fields(TrainConfig)]

