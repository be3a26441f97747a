"""A run's settings: TrainConfig, the sections of train/sections.py together, one per concern, each
handed to the component that uses it.

    TrainConfig
      job           what to train on, where to write, the model, the seed
      lora          low-rank adapters on --init-from's frozen weights
      parallelism   the device, DDP or FSDP, compilation, determinism
      batch         sequences per step, their length, the loader
      length        max_steps, max_tokens or max_time
      optim         AdamW or Muon and their settings
      lr_schedule   cosine or wsd, warmup, min_lr
      evaluation    validation, HellaSwag, samples
      metrics       log lines and trackers
      checkpoint    when to save, how many to keep

Every field is also a flat setting: one flag of `gptkit train run` (train/cli.py), one key of a preset,
a settings file and a run's config.json. `TrainConfig.of(**settings)` builds a config from flat names,
`to_dict()` gives them back. Every value is checked when the config is made. A field whose default is
None is unset: train/settle.py, the one place that turns what a user gave into a run's final settings,
decides it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptkit.shared import config as config_files
from gptkit.shared.errors import SettingError, named

from .sections import Batch, Checkpoint, Evaluation, Job, Length, Lora, LRSchedule, Metrics, Optim, Parallelism

PRESETS_DIR = Path(__file__).parent / "presets"

SECTIONS = {
    "job": Job,
    "lora": Lora,
    "parallelism": Parallelism,
    "batch": Batch,
    "length": Length,
    "optim": Optim,
    "lr_schedule": LRSchedule,
    "evaluation": Evaluation,
    "metrics": Metrics,
    "checkpoint": Checkpoint,
}
FIELDS = {f.name: f for section in SECTIONS.values() for f in dataclasses.fields(section)}  # flat name -> field
SECTION_OF = {f.name: name for name, section in SECTIONS.items() for f in dataclasses.fields(section)}
# config.json lists the settings in the order that runs of every version have written them (one flat list,
# from before the sections); a setting added later follows them.
WRITTEN = (
    "data",
    "out",
    "model",
    "init_from",
    "seed",
    "device",
    "parallel",
    "activation_checkpointing",
    "compile",
    "deterministic",
    "batch_size",
    "grad_accum",
    "context_length",
    "loader",
    "verify_data",
    "max_steps",
    "max_tokens",
    "max_time",
    "optimizer",
    "lr",
    "min_lr",
    "beta1",
    "beta2",
    "eps",
    "weight_decay",
    "decay_embeddings",
    "muon_lr",
    "muon_momentum",
    "grad_clip",
    "schedule",
    "warmup_steps",
    "decay_steps",
    "cooldown_fraction",
    "eval_interval",
    "eval_tokens",
    "eval_hellaswag",
    "log_interval",
    "sample_interval",
    "sample_prompt",
    "sample_tokens",
    "checkpoint_interval",
    "checkpoint_tokens",
    "keep_last",
    "log_to",
)
RECORD_ORDER = (*WRITTEN, *(name for name in FIELDS if name not in WRITTEN))


@dataclass(frozen=True)
class TrainConfig:
    """A run's settings, by section. Made from flat settings with TrainConfig.of."""

    job: Job
    lora: Lora = field(default_factory=Lora)
    parallelism: Parallelism = field(default_factory=Parallelism)
    batch: Batch = field(default_factory=Batch)
    length: Length = field(default_factory=Length)
    optim: Optim = field(default_factory=Optim)
    lr_schedule: LRSchedule = field(default_factory=LRSchedule)
    evaluation: Evaluation = field(default_factory=Evaluation)
    metrics: Metrics = field(default_factory=Metrics)
    checkpoint: Checkpoint = field(default_factory=Checkpoint)

    @classmethod
    def of(cls, **settings: Any) -> TrainConfig:
        """The config of flat settings (`lr=3e-3`, ...); an unknown name is a TypeError, as for any call."""
        unknown = sorted(set(settings) - set(FIELDS))
        if unknown:
            raise TypeError(f"TrainConfig.of() got an unexpected setting {unknown[0]!r}")
        for name in ("data", "out"):
            if name not in settings:
                raise SettingError(name, f"is needed: {PATHS[name]}")
        return cls(
            **{
                name: section(**{k: v for k, v in settings.items() if SECTION_OF[k] == name})
                for name, section in SECTIONS.items()
            }
        )

    def get(self, name: str) -> Any:
        """The value of the flat setting `name`."""
        return getattr(getattr(self, SECTION_OF[name]), name)

    def to_dict(self) -> dict[str, Any]:
        """The flat settings: what config.json records, in RECORD_ORDER."""
        return {name: self.get(name) for name in RECORD_ORDER}

    def replace(self, **settings: Any) -> TrainConfig:
        """This config with some flat settings changed, checked again."""
        return TrainConfig.of(**{**self.to_dict(), **settings})

    def __post_init__(self) -> None:
        """Every value is checked here, however the config is made (flags, a preset, a run's config.json,
        a library call): one that cannot work is a SettingError naming its setting."""
        values = self.to_dict()
        for name, expected in {**PATHS, "sample_prompt": "text"}.items():
            if not isinstance(values[name], str) or (name in PATHS and not values[name]):
                raise SettingError(name, f"{values[name]!r}: expected {expected}")
        for name, expected in OPTIONAL_PATHS.items():
            if values[name] is not None and not (isinstance(values[name], str) and values[name]):
                raise SettingError(name, f"{values[name]!r}: expected {expected}")
        if values["model"] is not None and not isinstance(values["model"], (str, dict)):
            raise SettingError(
                "model", f"{values['model']!r}: expected a preset name, a model config file or a model config"
            )
        for name, allowed in CHOICES.items():
            if values[name] not in allowed:
                raise SettingError(name, f"{values[name]!r}: expected one of {', '.join(allowed)}")
        if values["parallel"] == "fsdp" and values["optimizer"] == "muon":
            raise SettingError(
                "parallel",
                "fsdp: Muon orthogonalizes whole matrices and fsdp shards them; train with "
                f"{named('optimizer')} adamw, or {named('parallel')} ddp",
            )
        for name in SWITCHES:
            if not isinstance(values[name], bool) and not (values[name] is None and _may_be_unset(name)):
                raise SettingError(name, f"{values[name]!r}: expected true or false")
        for name, least in WHOLE.items():
            value = values[name]
            if value is None and _may_be_unset(name):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or not least <= value < 2**63:
                bound = "below 2^63" if isinstance(value, int) and value >= 2**63 else f"{least} or more"
                raise SettingError(name, f"{value!r}: expected a whole number, {bound}")
        for name, (expected, within) in REAL.items():
            value = values[name]
            if value is None and _may_be_unset(name):
                continue
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or not within(value)
            ):
                raise SettingError(name, f"{value!r}: expected a finite number {expected}")
        if values["max_time"] is not None:
            parse_duration(values["max_time"])
        _check_lora(values)
        lengths = [name for name in LENGTH if values[name] is not None]
        if len(lengths) > 1:
            first, second = lengths[:2]
            raise SettingError(
                first,
                f"{values[first]} and {named(second)} {values[second]}: give one (each sets the length of the run)",
            )
        if values["min_lr"] is not None and values["lr"] is not None and values["min_lr"] > values["lr"]:
            raise SettingError(
                "min_lr",
                f"{values['min_lr']}: above the peak {named('lr')} {values['lr']} (the schedule "
                f"decays from {named('lr')} to {named('min_lr')})",
            )
        refuse_unused(self, [name for name in ONLY_WITH if _may_be_unset(name) and values[name] is not None])

    def digest(self, data_path: str | None = None) -> str:
        """A hash of the settings that must not change when a run is resumed (RESUME_FIXED). The data is
        compared by its content instead (ShardDir.identity); `data_path` is hashed too, as checkpoints
        written before that hashed the path the run recorded."""
        fixed: dict[str, Any] = {k: v for k, v in self.to_dict().items() if k in RESUME_FIXED}
        if data_path is not None:
            fixed["data"] = data_path
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


def _may_be_unset(name: str) -> bool:
    return FIELDS[name].default is None


def _check_lora(values: dict[str, Any]) -> None:
    """The adapters' settings go with a rank, and a rank with the checkpoint it adapts; its AdamW state
    is the memory they save (Muon would orthogonalize matrices of rank r)."""
    if values["lora_rank"] is None:
        given = [name for name in ("lora_alpha", "lora_targets", "lora_train_tokens") if values[name] is not None]
        if given:
            value = values[given[0]]
            shown = ",".join(map(str, value)) if isinstance(value, list) else value  # as the flag takes it
            raise SettingError(given[0], f"{shown}: only with {named('lora_rank')} (the adapters' rank)")
        return
    if values["init_from"] is None:
        raise SettingError(
            "lora_rank",
            f"{values['lora_rank']}: adapters train on a checkpoint's frozen weights; give it with {named('init_from')}",
        )
    if values["optimizer"] != "adamw":
        raise SettingError(
            "optimizer", f"{values['optimizer']}: adapters train with adamw (not with {named('lora_rank')})"
        )


# What __post_init__ checks, setting by setting.
PATHS = {"data": "a pretokenize output directory", "out": "a run directory"}
OPTIONAL_PATHS = {"init_from": "a checkpoint directory", "eval_hellaswag": "a HellaSwag jsonl file"}
CHOICES = {
    "device": ("auto", "cpu", "cuda"),
    "parallel": ("ddp", "fsdp"),
    "loader": ("random", "sequential"),
    "optimizer": ("adamw", "muon"),
    "schedule": ("cosine", "wsd"),
}
SWITCHES = ("compile", "deterministic", "activation_checkpointing", "verify_data", "decay_embeddings")
# Whole numbers and their least value.
WHOLE = {
    "batch_size": 1,
    "grad_accum": 1,
    "max_steps": 1,
    "max_tokens": 1,
    "context_length": 1,
    "eval_tokens": 1,
    "log_interval": 1,
    "keep_last": 1,
    "sample_tokens": 1,
    "checkpoint_tokens": 1,
    "warmup_steps": 0,
    "decay_steps": 0,
    "eval_interval": 0,
    "sample_interval": 0,
    "checkpoint_interval": 0,
    "seed": 0,
    "merges": 0,
    "lora_rank": 1,
}
# Real numbers: each finite and in its range.
AT_LEAST_0, ABOVE_0, BELOW_1, UP_TO_1 = (
    ("0 or more", lambda v: v >= 0),
    ("above 0", lambda v: v > 0),
    ("in [0, 1)", lambda v: 0 <= v < 1),
    ("in [0, 1]", lambda v: 0 <= v <= 1),
)
REAL = {
    "lr": AT_LEAST_0,
    "lora_alpha": ABOVE_0,
    "min_lr": AT_LEAST_0,
    "weight_decay": AT_LEAST_0,
    "grad_clip": AT_LEAST_0,
    "muon_lr": AT_LEAST_0,
    "eps": ABOVE_0,
    "beta1": BELOW_1,
    "beta2": BELOW_1,
    "muon_momentum": BELOW_1,
    "cooldown_fraction": UP_TO_1,
}

# Settings that do something only where another setting has a value (why, as the refusal says).
ONLY_WITH = {
    "decay_steps": ("schedule", "cosine", f"wsd cools down over {named('cooldown_fraction')} of the steps"),
    "cooldown_fraction": ("schedule", "wsd", f"cosine decays over {named('decay_steps')}"),
    "muon_lr": ("optimizer", "muon", f"AdamW's is {named('lr')}"),
    "muon_momentum": ("optimizer", "muon", f"AdamW's are {named('beta1')} and {named('beta2')}"),
}

# Changing these would make a resumed run differ from an uninterrupted one. The length may change:
# the schedule is planned again from the step where the run resumes. So may the data's path: a resume
# checks its content (ShardDir.identity).
RESUME_FIXED = (
    "model",
    "seed",
    "batch_size",
    "grad_accum",
    "context_length",
    "loader",
    "optimizer",
    "lr",
    "min_lr",
    "beta1",
    "beta2",
    "eps",
    "weight_decay",
    "decay_embeddings",
    "muon_lr",
    "muon_momentum",
    "grad_clip",
    "schedule",
    "warmup_steps",
    "decay_steps",
    "cooldown_fraction",
)
LENGTH = ("max_steps", "max_tokens", "max_time")


def refuse_unused(config: TrainConfig, given: list[str] | dict[str, Any]) -> None:
    """Refuse a setting among `given` (the names a user set) that `config` would not use: one of
    ONLY_WITH where the setting it goes with has another value. TrainConfig refuses those whose default
    is None; the others keep a default for the runs that use them (and for their checkpoints' digests),
    so only the caller knows they were given."""
    for name in given:
        if name in ONLY_WITH:
            other, value, why = ONLY_WITH[name]
            if config.get(other) != value:
                raise SettingError(name, f"{config.get(name)}: only with {named(other)} {value} ({why})")


def fixed_difference(then: dict[str, Any], now: TrainConfig) -> str:
    """The first settings of RESUME_FIXED that differ between a run's saved settings and `now`; the model
    aside, which a resume compares with the checkpoint's own."""
    changed = [k for k in RESUME_FIXED if k != "model" and then.get(k) != now.get(k)]
    return ", ".join(f"{k}: {then.get(k)!r} then, {now.get(k)!r} now" for k in changed[:2])


def preset_names() -> list[str]:
    return config_files.preset_names(PRESETS_DIR)


DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m)?(?:(\d+(?:\.\d+)?)s?)?")
# The longest budget: a year, longer than anyone runs one machine on one job; a longer one is a slip
# (99999999999h), and an infinite one (1e400h) would plan no length at all.
LONGEST_HOURS = 366 * 24


def parse_duration(text: str) -> float:
    """Seconds in a duration: "90" or "90s", "2m", "1.5h", "1h30m", "2m30s"; above 0, at most LONGEST_HOURS."""
    match = DURATION.fullmatch(str(text).strip())
    seconds = match and sum(float(v) * unit for v, unit in zip(match.groups(), (3600, 60, 1)) if v)
    if not seconds:
        raise SettingError("max_time", f"{text!r}: expected a duration above 0 such as 90s, 2m or 1h30m")
    if not seconds <= LONGEST_HOURS * 3600:
        raise SettingError("max_time", f"{text!r}: longer than a year; at most {LONGEST_HOURS}h")
    return seconds
