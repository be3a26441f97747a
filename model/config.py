"""The model's shape as a dataclass that round-trips to JSON, and the presets shipped with it."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from gptkit.shared import config as config_files
from gptkit.shared.errors import InputError, SettingError

PRESETS_DIR = Path(__file__).parent / "presets"


@dataclass
class ModelConfig:
    vocab_size: int
    context_length: int = 256
    d_model: int = 512
    n_layers: int = 4
    n_heads: int = 16
    n_kv_heads: int | None = None  # grouped-query attention; None: as many as n_heads
    d_ff: int = 1344  # hidden size of the SwiGLU feed-forward
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    tie_embeddings: bool = False  # the LM head reuses the token embedding
    qk_norm: bool = False  # RMSNorm on each head's queries and keys, before RoPE
    init_std: float = 0.02

    def __post_init__(self):
        """Each value checked as TrainConfig checks its own: a SettingError naming the field
        (from_dict adds the file it came from)."""
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        sizes = ("vocab_size", "context_length", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff")
        for name in sizes:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise SettingError(name, f"{value!r}: expected a whole number, 1 or more")
        for name in ("rope_theta", "norm_eps", "init_std"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
                raise SettingError(name, f"{value!r}: expected a number above 0")
        for name in ("tie_embeddings", "qk_norm"):
            if not isinstance(getattr(self, name), bool):
                raise SettingError(name, f"{getattr(self, name)!r}: expected true or false")
        if self.d_model % self.n_heads:
            raise SettingError("d_model", f"{self.d_model}: not a multiple of n_heads {self.n_heads}")
        if self.n_heads % self.n_kv_heads:
            raise SettingError("n_heads", f"{self.n_heads}: not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.head_dim % 2:
            raise SettingError("d_model", f"{self.d_model}: its head size d_model / n_heads = {self.head_dim} is odd; "
                                          "RoPE needs it even")

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source="config") -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"{source}: unknown model config key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        try:
            return cls(**data)
        except (TypeError, SettingError) as e:  # TypeError: a field missing (vocab_size)
            raise InputError(f"{source}: {e}") from None


def preset_names() -> list[str]:
    return config_files.preset_names(PRESETS_DIR)


def load_config(name_or_path, vocab_size=None) -> ModelConfig:
    """A preset by name (see `preset_names()`) or a JSON file: a model config, or a file with
    one under the key "model" (as checkpoints have). `vocab_size`, where given, is the data's:
    it replaces the file's, which may then leave it out."""
    settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "model settings")
    if isinstance(settings.get("model"), dict):  # a checkpoint's config.json, or a training run's
        settings = settings["model"]
    if vocab_size is not None:
        settings = {**settings, "vocab_size": vocab_size}
    return ModelConfig.from_dict(settings, source=str(path))
