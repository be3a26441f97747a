"""The model's shape as a dataclass that round-trips to JSON, and the presets shipped with it (the
low-rank adapters a run may train on it are model/lora/'s)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

from gptkit.shared import config as config_files
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath

PRESETS_DIR = Path(__file__).parent / "presets"
ARCHITECTURES = ("llama", "gpt2")
LLAMA3_SCALING = ("rope_type", "factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings")


@dataclass
class ModelConfig:
    vocab_size: int
    context_length: int = 256
    d_model: int = 512
    n_layers: int = 4
    n_heads: int = 16
    # Grouped-query attention; None: as many as n_heads. After __post_init__ an int (typed so for its readers).
    n_kv_heads: int = None  # type: ignore[assignment]  # None is filled in by __post_init__
    d_ff: int = 1344  # hidden size of the feed-forward (SwiGLU; GPT-2's GELU MLP)
    rope_theta: float = 10000.0  # llama only: GPT-2 learns its positions
    norm_eps: float = 1e-5
    tie_embeddings: bool = False  # the LM head reuses the token embedding
    qk_norm: bool = False  # RMSNorm on each head's queries and keys, before RoPE (Qwen3)
    init_std: float = 0.02
    # "llama": RoPE, RMSNorm, SwiGLU, no biases; "gpt2": GPT-2's learned positions, LayerNorm, GELU MLP, biases (model.py)
    architecture: str = "llama"
    qkv_bias: bool = False  # biases on the query, key and value projections alone (Qwen2); llama only
    # Each head's size; None: d_model / n_heads (Qwen3 sets its own). After __post_init__ an int.
    head_dim: int = None  # type: ignore[assignment]  # None is filled in by __post_init__
    rope_scaling: dict | None = None  # Llama 3's: {"rope_type": "llama3", factor, low_freq_factor, high_freq_factor,
    #                                   original_max_position_embeddings}, as Hugging Face writes it
    # The probability of zeroing an activation in training (the embeddings and each residual branch's
    # output); none at inference. A regularizer for many epochs over a small corpus.
    dropout: float = 0.0
    # The same on the attention weights (HF's attention_dropout, GPT-2's attn_pdrop); None: dropout's, as
    # nanoGPT's. On a CPU it costs more than the rest of the dropout together: SDPA falls back to its math path.
    attention_dropout: float = None  # type: ignore[assignment]  # None is filled in by __post_init__

    def __post_init__(self) -> None:
        """Each value checked as TrainConfig checks its own: a SettingError naming the field
        (from_dict adds the file it came from)."""
        if self.architecture not in ARCHITECTURES:
            raise SettingError(
                "architecture", f"{self.architecture!r}: expected one of {', '.join(map(repr, ARCHITECTURES))}"
            )
        if self.n_kv_heads is None:
            self.n_kv_heads = self.n_heads
        head_dim_given = self.head_dim is not None
        sizes = ("vocab_size", "context_length", "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff")
        for name in sizes + (("head_dim",) if head_dim_given else ()):
            value = getattr(self, name)
            if not _is_count(value):
                raise SettingError(name, f"{value!r}: expected a whole number, 1 or more")
        for name in ("rope_theta", "norm_eps", "init_std"):
            value = getattr(self, name)
            if not _is_positive(value):
                raise SettingError(name, f"{value!r}: expected a number above 0")
        if self.attention_dropout is None:
            self.attention_dropout = self.dropout
        for name in ("dropout", "attention_dropout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < 1:
                raise SettingError(name, f"{value!r}: expected a number from 0 up to, not including, 1")
        for name in ("tie_embeddings", "qk_norm", "qkv_bias"):
            if not isinstance(getattr(self, name), bool):
                raise SettingError(name, f"{getattr(self, name)!r}: expected true or false")
        if not head_dim_given:
            if self.d_model % self.n_heads:
                raise SettingError("d_model", f"{self.d_model}: not a multiple of n_heads {self.n_heads}")
            self.head_dim = self.d_model // self.n_heads
        if self.n_heads % self.n_kv_heads:
            raise SettingError("n_heads", f"{self.n_heads}: not a multiple of n_kv_heads {self.n_kv_heads}")
        if self.rope_scaling is not None:
            _check_rope_scaling(self.rope_scaling)
        if self.architecture == "gpt2":
            self._check_gpt2()
        elif self.head_dim % 2:
            if head_dim_given:
                raise SettingError("head_dim", f"{self.head_dim}: odd; RoPE needs it even")
            raise SettingError(
                "d_model",
                f"{self.d_model}: its head size d_model / n_heads = {self.head_dim} is odd; RoPE needs it even",
            )
        if self.qkv_bias and self.qk_norm:
            # Qwen3's attention_bias biases the output projection too: no Hugging Face model is exactly both.
            raise SettingError(
                "qkv_bias",
                "true with qk_norm true: not supported (no Hugging Face architecture has both, "
                "so the model could not be exported)",
            )

    def _check_gpt2(self):
        """GPT-2 exactly, which GPT2LMHeadModel holds: the llama options are refused."""
        if self.n_kv_heads != self.n_heads:
            raise SettingError(
                "n_kv_heads", f"{self.n_kv_heads}: architecture 'gpt2' has as many as n_heads ({self.n_heads})"
            )
        if self.head_dim * self.n_heads != self.d_model:
            raise SettingError("head_dim", f"{self.head_dim}: architecture 'gpt2' has heads of d_model / n_heads")
        for name in ("qk_norm", "qkv_bias", "rope_scaling"):
            if getattr(self, name) not in (False, None):
                raise SettingError(
                    name, f"{json.dumps(getattr(self, name))}: a llama option, which architecture 'gpt2' does not have"
                )

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict, source: str = "config") -> ModelConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise InputError(f"{source}: unknown model config key {unknown[0]!r} (known: {', '.join(sorted(known))})")
        try:
            return cls(**data)
        except (TypeError, SettingError) as e:  # TypeError: a field missing (vocab_size)
            raise InputError(f"{source}: {e}") from None


def _is_count(value):
    return not isinstance(value, bool) and isinstance(value, int) and value >= 1


def _is_positive(value):
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 < value < math.inf


def _check_rope_scaling(scaling):
    """Llama 3's RoPE scaling, the one this model applies (model.py, rope_frequencies)."""
    expected = f'null or {{{", ".join(map(json.dumps, LLAMA3_SCALING))}}} with rope_type "llama3"'
    if not isinstance(scaling, dict) or sorted(scaling) != sorted(LLAMA3_SCALING) or scaling["rope_type"] != "llama3":
        raise SettingError("rope_scaling", f"{json.dumps(scaling, default=repr)}: expected {expected}")
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    if not (_is_positive(factor) and factor >= 1):
        raise SettingError("rope_scaling", f"factor {factor!r}: expected a number, 1 or more")
    if not (_is_positive(low) and _is_positive(high) and high > low):
        raise SettingError(
            "rope_scaling",
            f"low_freq_factor {low!r}, high_freq_factor {high!r}: expected numbers above 0, "
            "high_freq_factor the larger",
        )
    if not _is_count(scaling["original_max_position_embeddings"]):
        raise SettingError(
            "rope_scaling",
            f"original_max_position_embeddings {scaling['original_max_position_embeddings']!r}: "
            "expected a whole number, 1 or more",
        )


def preset_names() -> list[str]:
    return config_files.preset_names(PRESETS_DIR)


def load_config(name_or_path: StrPath, vocab_size: int | None = None) -> ModelConfig:
    """A preset by name (see `preset_names()`) or a JSON file: a model config, or a file with
    one under the key "model" (as checkpoints have). `vocab_size`, where given, is the data's:
    it replaces the file's, which may then leave it out."""
    settings, path = config_files.read_settings(name_or_path, PRESETS_DIR, "model settings")
    if isinstance(settings.get("model"), dict):  # a checkpoint's config.json, or a training run's
        settings = settings["model"]
    if vocab_size is not None:
        settings = {**settings, "vocab_size": vocab_size}
    return ModelConfig.from_dict(settings, source=str(path))
