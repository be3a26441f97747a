"""A LoRA run's record in its checkpoints' config.json, "lora": the adapters' settings
(LoraConfig.to_dict()) and the checkpoint they adapt, by its real place ("base", a directory) and
the SHA-256 of its config.json ("base_digest"), which lists the CRC-32 of its weights.
The trainer makes it (record_of), model/checkpoint.py writes it and reads it back checked
(read_record, base_of)."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gptkit.shared.errors import InputError
from gptkit.shared.jsonfile import is_count

from ..config import ModelConfig
from ..tensor_checks import CheckpointError
from .config import LoraConfig, target_names

SHA256 = re.compile(r"[0-9a-f]{64}")  # config_digest's form (model/checkpoint.py), which a LoRA run records of its base


def record_of(lora: LoraConfig, base: str, base_digest: str) -> dict[str, Any]:
    """A LoRA run's record of its adapters: their settings, and the checkpoint they adapt by its real
    place `base` and `base_digest`, the SHA-256 of its config.json."""
    return {**lora.to_dict(), "base": base, "base_digest": base_digest}


def read_record(config: Mapping[str, Any], path: Path) -> LoraConfig | None:
    """The adapters a checkpoint's config.json (`config`, read from `path`) records (None: a checkpoint
    of the weights), checked against its model."""
    found = config.get("lora")
    if found is None:
        return None
    try:
        model = ModelConfig.from_dict(config["model"], str(path))
        rank, alpha, targets = found["rank"], found["alpha"], target_names(found["targets"])
        if not (is_count(rank) and rank > 0 and type(alpha) in (int, float) and 0 < alpha < math.inf):
            raise TypeError(f"rank {rank!r}, alpha {alpha!r}: expected a whole number and a number, both above 0")
        tokens = found.get("tokens", [])  # none in a checkpoint written before rows trained
        if not (isinstance(tokens, list) and all(is_count(t) for t in tokens) and tokens == sorted(set(tokens))):
            raise TypeError(f"tokens {tokens!r}: expected token ids in ascending order")
        return LoraConfig.of(model, rank, alpha, targets, tokens)
    except (KeyError, TypeError, InputError) as e:
        raise CheckpointError(f"{path}: lora is damaged ({e})") from None


def base_of(found: object, path: Path) -> tuple[str, str]:
    """(base, base_digest) of a LoRA run's record `found` (config.json's "lora", read from `path`),
    each checked to be of its form: a record that cannot name its base is damaged, whatever the
    base is now."""
    base, digest = (found.get(key) if isinstance(found, dict) else None for key in ("base", "base_digest"))
    if not isinstance(base, str):
        raise _damaged(path, "base", base, "the directory of the checkpoint its adapters adapt")
    if not (isinstance(digest, str) and SHA256.fullmatch(digest)):
        raise _damaged(path, "base_digest", digest, "the SHA-256 of that checkpoint's config.json, 64 hex digits")
    return base, digest


def _damaged(path: Path, key: str, value: object, expected: str) -> CheckpointError:
    """The error of a LoRA record (in the config.json `path`) whose `key` is missing or not what it should be."""
    found = f"no {key}" if value is None else f"{key} is {value!r}"
    return CheckpointError(f"{path}: lora is damaged ({found}; expected {expected})")
