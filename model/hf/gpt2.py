"""GPT-2's adapter: `GPT2LMHeadModel` is model.py's "gpt2" architecture. Its Conv1D layers hold a
Linear's weight transposed, and its c_attn holds wq, wk and wv in one."""

from __future__ import annotations

from typing import Any

from ..config import ModelConfig
from .family import Family, Theirs
from .files import HFConfig

DEFAULTS = {
    "n_positions": 1024,
    "n_inner": None,
    "activation_function": "gelu_new",
    "layer_norm_epsilon": 1e-5,
    "tie_word_embeddings": True,
    "scale_attn_weights": True,
    "scale_attn_by_inverse_layer_idx": False,
    "reorder_and_upcast_attn": False,
    "add_cross_attention": False,
}


class GPT2(Family):
    names = {
        "embedding": Theirs("transformer.wte"),
        "position_embedding": Theirs("transformer.wpe"),
        "norm": Theirs("transformer.ln_f"),
        "lm_head": Theirs("lm_head"),
        "layers.{}.attention_norm": Theirs("transformer.h.{}.ln_1"),
        "layers.{}.attention.wq": Theirs("transformer.h.{}.attn.c_attn", conv1d=True, third=0),
        "layers.{}.attention.wk": Theirs("transformer.h.{}.attn.c_attn", conv1d=True, third=1),
        "layers.{}.attention.wv": Theirs("transformer.h.{}.attn.c_attn", conv1d=True, third=2),
        "layers.{}.attention.wo": Theirs("transformer.h.{}.attn.c_proj", conv1d=True),
        "layers.{}.ffn_norm": Theirs("transformer.h.{}.ln_2"),
        "layers.{}.ffn.w1": Theirs("transformer.h.{}.mlp.c_fc", conv1d=True),
        "layers.{}.ffn.w2": Theirs("transformer.h.{}.mlp.c_proj", conv1d=True),
    }
    architectures = {"GPT2LMHeadModel": ("gpt2", DEFAULTS)}
    config_names = {
        "context_length": "n_positions",
        "d_model": "n_embd",
        "n_layers": "n_layer",
        "n_heads": "n_head",
        "d_ff": "n_inner",
        "init_std": "initializer_range",
    }
    ignored = (".attn.bias", ".attn.masked_bias")  # causal masks
    vocab_files = True
    bos_token_starts = True

    def architecture(self, config: ModelConfig) -> str:
        return "GPT2LMHeadModel"

    def hf_config(self, config: ModelConfig, model_type: str) -> dict[str, Any]:
        return {
            "n_positions": config.context_length,
            "n_embd": config.d_model,
            "n_layer": config.n_layers,
            "n_head": config.n_heads,
            "n_inner": config.d_ff,
            "activation_function": "gelu_new",
            "layer_norm_epsilon": config.norm_eps,
            "scale_attn_weights": True,
            "scale_attn_by_inverse_layer_idx": False,
            "reorder_and_upcast_attn": False,
            # GPT-2 drops where nanoGPT and model.py do; the Llama family only on the attention weights
            "resid_pdrop": config.dropout,
            "embd_pdrop": config.dropout,
            "attn_pdrop": config.attention_dropout,
        }

    def fields(self, hf: HFConfig, architecture: str) -> dict[str, Any]:
        for field, why in (
            ("activation_function", ""),
            ("scale_attn_weights", ""),
            ("scale_attn_by_inverse_layer_idx", ""),
            ("reorder_and_upcast_attn", " (it upcasts the attention scores, computed otherwise)"),
            ("add_cross_attention", ""),
        ):
            hf.require(field, hf.defaults[field], why)
        d_model = hf.get("n_embd", int)
        return {
            "architecture": "gpt2",
            "context_length": hf.get("n_positions", int),
            "d_model": d_model,
            "n_layers": hf.get("n_layer", int),
            "n_heads": hf.get("n_head", int),
            "d_ff": hf.get("n_inner", int, nullable=True) or 4 * d_model,
            "norm_eps": hf.get("layer_norm_epsilon", float),
        }

    def stored_name(self, name: str) -> str:
        # GPT-2's own file holds GPT2Model's names, without the prefix
        return name if name.startswith(("transformer.", "lm_head.")) else f"transformer.{name}"
