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
`to_dict()` gives them back. Each setting is declared once, at its field (train/setting.py); what this
module knows of them (SETTINGS, the order config.json records them in, those a resume may not change)
is read from there. Each section checks its own values when it is made; TrainConfig checks the
settings that go together. A field whose default is None is unset: train/settle.py, the one place
that turns what a user gave into a run's final settings, decides it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gptkit.model.lora import check_settings
from gptkit.shared import config as config_files
from gptkit.shared.errors import SettingError, named

from .sections import Batch, Checkpoint, Evaluation, Job, Length, Lora, LRSchedule, Metrics, Optim, Parallelism
from .setting import Setting, settings_of

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
SETTINGS: dict[str, Setting] = {name: s for section in SECTIONS.values() for name, s in settings_of(section).items()}
SECTION_OF = {name: section for section, cls in SECTIONS.items() for name in settings_of(cls)}
LENGTH = tuple(settings_of(Length))  # each sets the run's length: one at most
REQUIRED = tuple(name for name, s in SETTINGS.items() if s.required)  # data and out


def _record_order() -> tuple[str, ...]:
    """The settings in the order config.json lists them: the fields', each followed by those recorded
    after it (Setting.recorded_after), as runs of earlier versions wrote them."""
    order: list[str] = []

    def place(name: str) -> None:
        order.append(name)
        for follower in (n for n, s in SETTINGS.items() if s.recorded_after == name):
            place(follower)

    for name in (n for n, s in SETTINGS.items() if s.recorded_after is None):
        place(name)
    return tuple(order)


RECORD_ORDER = _record_order()
# Changing these would make a resumed run differ from an uninterrupted one (the checkpoints' digest).
RESUME_FIXED = tuple(name for name in RECORD_ORDER if SETTINGS[name].fixed_on_resume)


def is_unset(name: str, value: Any) -> bool:
    """Whether `value` leaves the setting `name` unset: None, where its default is None."""
    return value is None and name in SETTINGS and SETTINGS[name].may_be_unset


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
        _refuse_unknown("of", settings)
        for name in REQUIRED:
            if name not in settings:
                raise SettingError(name, f"is needed: {SETTINGS[name].expected}")
        return cls(**{name: section(**_of_section(name, settings)) for name, section in SECTIONS.items()})

    def get(self, name: str) -> Any:
        """The value of the flat setting `name`."""
        return getattr(getattr(self, SECTION_OF[name]), name)

    def to_dict(self) -> dict[str, Any]:
        """The flat settings: what config.json records, in RECORD_ORDER."""
        return {name: self.get(name) for name in RECORD_ORDER}

    def replace(self, **settings: Any) -> TrainConfig:
        """This config with some flat settings changed, the sections they are in made again (and checked)."""
        _refuse_unknown("replace", settings)
        changed = {
            name: dataclasses.replace(getattr(self, name), **_of_section(name, settings))
            for name in dict.fromkeys(SECTION_OF[k] for k in settings)
        }
        return dataclasses.replace(self, **changed)

    def __post_init__(self) -> None:
        """The settings that go together are checked here, however the config is made (flags, a preset,
        a run's config.json, a library call), once each section has checked its own: one that cannot
        work with another is a SettingError naming it."""
        values = self.to_dict()
        if values["parallel"] == "fsdp" and values["optimizer"] == "muon":
            raise SettingError(
                "parallel",
                "fsdp: Muon orthogonalizes whole matrices and fsdp shards them; train with "
                f"{named('optimizer')} adamw, or {named('parallel')} ddp",
            )
        check_settings(values)  # LoRA's rules (model/lora/)
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
        # a setting that may be unset is given where it has a value; of the others, only the caller knows
        refuse_unused(self, [n for n, s in SETTINGS.items() if s.may_be_unset and values[n] is not None])

    def digest(self, data_path: str | None = None) -> str:
        """A hash of the settings that must not change when a run is resumed (RESUME_FIXED). The data is
        compared by its content instead (ShardDir.identity); `data_path` is hashed too, as checkpoints
        written before that hashed the path the run recorded."""
        fixed: dict[str, Any] = {k: v for k, v in self.to_dict().items() if k in RESUME_FIXED}
        if data_path is not None:
            fixed["data"] = data_path
        return hashlib.sha256(json.dumps(fixed, sort_keys=True).encode()).hexdigest()[:16]


def _refuse_unknown(call: str, settings: dict[str, Any]) -> None:
    unknown = sorted(set(settings) - set(SETTINGS))
    if unknown:
        raise TypeError(f"TrainConfig.{call}() got an unexpected setting {unknown[0]!r}")


def _of_section(section: str, settings: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in settings.items() if SECTION_OF[k] == section}


def refuse_unused(config: TrainConfig, given: list[str] | dict[str, Any]) -> None:
    """Refuse a setting among `given` (the names a user set) that `config` would not use: one whose
    only_with setting has another value. TrainConfig refuses those that may be unset; the others keep
    a default for the runs that use them (and for their checkpoints' digests), so only the caller
    knows they were given."""
    for name in given:
        only = SETTINGS[name].only_with
        if only is not None and config.get(only.setting) != only.value:
            raise SettingError(name, f"{config.get(name)}: only with {named(only.setting)} {only.value} ({only.why})")


def fixed_difference(then: dict[str, Any], now: TrainConfig) -> str:
    """The first settings of RESUME_FIXED that differ between a run's saved settings and `now`; the model
    aside, which a resume compares with the checkpoint's own."""
    changed = [k for k in RESUME_FIXED if k != "model" and then.get(k) != now.get(k)]
    return ", ".join(f"{k}: {then.get(k)!r} then, {now.get(k)!r} now" for k in changed[:2])


def preset_names() -> list[str]:
    return config_files.preset_names(PRESETS_DIR)
