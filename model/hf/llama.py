"""The Llama family's adapter: model.py's "llama" architecture is `LlamaForCausalLM`,
`Qwen3ForCausalLM` with QK-norm (Llama lacks it), `Qwen2ForCausalLM` with biases on q/k/v; the
import also reads `MistralForCausalLM` (Llama's computation, with a sliding window that must not
bind). Our RoPE uses Llama's "rotate half" layout, so the weights are only renamed."""

from __future__ import annotations

from typing import Any

import torch

from gptkit.runtime.device import available_memory, size
from gptkit.shared.errors import InputError

from ..config import LLAMA3_SCALING, ModelConfig
from .family import Family, Theirs
from .files import HFConfig

ROPE_THETA_DEFAULT = 10000.0  # transformers' default_theta, where config.json gives none
# Bytes per position and per head dimension that model.py's RoPE tables take while they are built
# (rope_tables: two float32 tables, computed through float64 ones).
ROPE_TABLE_BYTES = 24


class Llama(Family):
    names = {
        ours: Theirs(theirs)
        for ours, theirs in {
            "embedding": "model.embed_tokens",
            "norm": "model.norm",
            "lm_head": "lm_head",
            "layers.{}.attention_norm": "model.layers.{}.input_layernorm",
            "layers.{}.attention.wq": "model.layers.{}.self_attn.q_proj",
            "layers.{}.attention.wk": "model.layers.{}.self_attn.k_proj",
            "layers.{}.attention.wv": "model.layers.{}.self_attn.v_proj",
            "layers.{}.attention.wo": "model.layers.{}.self_attn.o_proj",
            "layers.{}.attention.q_norm": "model.layers.{}.self_attn.q_norm",
            "layers.{}.attention.k_norm": "model.layers.{}.self_attn.k_norm",
            "layers.{}.ffn_norm": "model.layers.{}.post_attention_layernorm",
            "layers.{}.ffn.w1": "model.layers.{}.mlp.gate_proj",
            "layers.{}.ffn.w3": "model.layers.{}.mlp.up_proj",
            "layers.{}.ffn.w2": "model.layers.{}.mlp.down_proj",
        }.items()
    }
    # None for num_key_value_heads: as many as the heads; for head_dim: hidden_size / num_attention_heads.
    architectures = {
        "LlamaForCausalLM": (
            "llama",
            {
                "num_key_value_heads": None,
                "head_dim": None,
                "max_position_embeddings": 2048,
                "rms_norm_eps": 1e-6,
                "tie_word_embeddings": False,
                "hidden_act": "silu",
                "attention_bias": False,
                "mlp_bias": False,
            },
        ),
        "MistralForCausalLM": (
            "mistral",
            {
                "num_key_value_heads": 8,
                "head_dim": None,
                "max_position_embeddings": 131072,
                "rms_norm_eps": 1e-6,
                "tie_word_embeddings": False,
                "hidden_act": "silu",
                "sliding_window": 4096,
            },
        ),
        "Qwen2ForCausalLM": (
            "qwen2",
            {
                "num_key_value_heads": 32,
                "head_dim": None,
                "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-6,
                "tie_word_embeddings": False,
                "hidden_act": "silu",
                "use_sliding_window": False,
            },
        ),
        "Qwen3ForCausalLM": (
            "qwen3",
            {
                "num_key_value_heads": 32,
                "head_dim": 128,
                "max_position_embeddings": 32768,
                "rms_norm_eps": 1e-6,
                "tie_word_embeddings": False,
                "hidden_act": "silu",
                "attention_bias": False,
                "use_sliding_window": False,
            },
        ),
    }
    config_names = {
        "context_length": "max_position_embeddings",
        "d_model": "hidden_size",
        "n_layers": "num_hidden_layers",
        "n_heads": "num_attention_heads",
        "n_kv_heads": "num_key_value_heads",
        "d_ff": "intermediate_size",
        "init_std": "initializer_range",
    }
    ignored = (".rotary_emb.inv_freq",)  # an old Llama's RoPE frequencies, recomputed from the config

    def architecture(self, config: ModelConfig) -> str:
        return "Qwen3ForCausalLM" if config.qk_norm else "Qwen2ForCausalLM" if config.qkv_bias else "LlamaForCausalLM"

    def hf_config(self, config: ModelConfig, model_type: str) -> dict[str, Any]:
        rope = {"rope_type": "default"} if config.rope_scaling is None else dict(config.rope_scaling)
        return {
            "hidden_size": config.d_model,
            "intermediate_size": config.d_ff,
            "num_hidden_layers": config.n_layers,
            "num_attention_heads": config.n_heads,
            "num_key_value_heads": config.n_kv_heads,
            "head_dim": config.head_dim,
            "max_position_embeddings": config.context_length,
            "rms_norm_eps": config.norm_eps,
            "hidden_act": "silu",
            "attention_dropout": config.attention_dropout,
            # transformers 5 reads rope_parameters; 4.x, rope_theta and rope_scaling
            "rope_theta": config.rope_theta,
            "rope_parameters": {**rope, "rope_theta": config.rope_theta},
            **({"rope_scaling": dict(config.rope_scaling)} if config.rope_scaling is not None else {}),
            **({"use_sliding_window": False} if model_type in ("qwen2", "qwen3") else {}),
            **({"attention_bias": False} if model_type in ("llama", "qwen3") else {}),
            **({"mlp_bias": False} if model_type == "llama" else {}),
        }

    def fields(self, hf: HFConfig, architecture: str) -> dict[str, Any]:
        hf.require("hidden_act", "silu")
        for field in ("attention_bias", "mlp_bias"):
            if field in hf.defaults:  # Llama's and Qwen3's attention_bias biases the output projection too
                hf.require(field, False)
        _check_sliding_window(hf, architecture)
        heads = hf.get("num_attention_heads", int)
        return {
            "context_length": hf.get("max_position_embeddings", int),
            "d_model": hf.get("hidden_size", int),
            "n_layers": hf.get("num_hidden_layers", int),
            "n_heads": heads,
            "n_kv_heads": hf.get("num_key_value_heads", int, nullable=True) or heads,
            "head_dim": hf.get("head_dim", int, nullable=True),
            "d_ff": hf.get("intermediate_size", int),
            "norm_eps": hf.get("rms_norm_eps", float),
            "qk_norm": architecture == "Qwen3ForCausalLM",
            "qkv_bias": architecture == "Qwen2ForCausalLM",
            **_rope(hf),
        }

    def config_names_of(self, hf: HFConfig) -> dict:
        return {**self.config_names, "rope_scaling": _rope_field(hf.data)}

    def model_config(self, hf: HFConfig, architecture: str) -> ModelConfig:
        """Also refused: a context whose RoPE tables cannot be built in this machine's memory.
        model.py builds them for the whole context whenever it loads the model, and no tensor
        depends on the context, so the weights cannot tell."""
        config = super().model_config(hf, architecture)
        available = available_memory(torch.device("cpu"))
        tables = ROPE_TABLE_BYTES * config.context_length * config.head_dim
        if available is not None and tables > available:
            raise InputError(
                f"{hf.path}: max_position_embeddings {config.context_length:,} takes RoPE tables of "
                f"{size(tables)}, more than the {size(available)} of memory available; expected a context "
                "this machine can hold"
            )
        return config


def _check_sliding_window(hf, architecture):
    """A sliding window that binds (attention limited to the last `sliding_window` positions) is
    refused; one at least as long as the context never does."""
    if architecture == "MistralForCausalLM":
        window, context = hf.get("sliding_window"), hf.get("max_position_embeddings", int)
        if window is not None and not (type(window) is int and window >= context):
            raise hf.refused(
                "sliding_window",
                window,
                f"null or at least max_position_embeddings ({context:,}): a window that binds is not supported",
            )
    if "use_sliding_window" in hf.defaults:
        hf.require("use_sliding_window", False, " (sliding-window attention)")
    layer_types = hf.data.get("layer_types")
    if layer_types is not None and (
        not isinstance(layer_types, list) or any(t != "full_attention" for t in layer_types)
    ):
        raise hf.refused("layer_types", layer_types, "full_attention for every layer")


def _rope_field(data):
    """Where config.json describes RoPE, as transformers reads it: a legacy rope_scaling object
    before rope_parameters."""
    return "rope_scaling" if data.get("rope_scaling") else "rope_parameters"


def _rope(hf) -> dict:
    """rope_theta and rope_scaling of config.json, read as transformers reads them (a rope_theta
    in the RoPE object before one beside it)."""
    field = _rope_field(hf.data)
    rope = hf.data.get(field) or {}
    if not isinstance(rope, dict):
        raise hf.refused(field, rope, "an object")
    theta = rope.get("rope_theta", hf.data.get("rope_theta", ROPE_THETA_DEFAULT))
    if not (type(theta) in (int, float) and theta > 0):
        raise hf.refused("rope_theta", theta, "a number above 0")
    partial = rope.get("partial_rotary_factor", hf.data.get("partial_rotary_factor"))
    if partial not in (None, 1.0):
        raise hf.refused("partial_rotary_factor", partial, "1 (RoPE on the whole head)")
    kind = rope.get("rope_type", rope.get("type", "default"))
    if kind == "default":
        return {"rope_theta": float(theta)}
    if kind != "llama3":
        raise hf.refused(
            field, rope, 'null, rope_type "default" or rope_type "llama3" (other scalings are not supported)'
        )
    scaling = {"original_max_position_embeddings": hf.get("max_position_embeddings"), **rope, "rope_type": "llama3"}
    missing = [key for key in LLAMA3_SCALING if key not in scaling]
    if missing:
        raise hf.refused(field, rope, f"a llama3 scaling with {', '.join(LLAMA3_SCALING[1:])}; {missing[0]} is missing")
    return {"rope_theta": float(theta), "rope_scaling": {key: scaling[key] for key in LLAMA3_SCALING}}
