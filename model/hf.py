"""Export a checkpoint to the Hugging Face layout: `LlamaForCausalLM` (or `Qwen3ForCausalLM`
when the model uses QK-norm, which Llama lacks), loadable by `transformers`, vLLM, llama.cpp's
converter and the Hub, with the tokenizer for `AutoTokenizer`.

Our RoPE already uses Llama's "rotate half" layout, so the weights are only renamed.

The exported model generates what `sample` generates: `sample` puts the end-of-text token the
checkpoint records before the prompt, since every training document starts after one, so the
exported tokenizer.json adds
it too (a TemplateProcessing post-processor: `AutoTokenizer(text)` gives [eot] + the ids
of text), and config.json and generation_config.json name it as BOS, EOS and padding. The
tokenizer.json of our own checkpoints and data directories has no post-processor: there the
ids of a text are the text's alone, and the code that frames documents adds the eot itself.
"""
from __future__ import annotations

import json
from pathlib import Path

from gptkit.shared.files import atomic_directory, check_output

from .checkpoint import eot_id as checkpoint_eot_id, load_model, model_tensors, save_tensors

_LAYER_NAMES = {
    "attention_norm": "input_layernorm",
    "attention.wq": "self_attn.q_proj",
    "attention.wk": "self_attn.k_proj",
    "attention.wv": "self_attn.v_proj",
    "attention.wo": "self_attn.o_proj",
    "attention.q_norm": "self_attn.q_norm",
    "attention.k_norm": "self_attn.k_norm",
    "ffn_norm": "post_attention_layernorm",
    "ffn.w1": "mlp.gate_proj",
    "ffn.w3": "mlp.up_proj",
    "ffn.w2": "mlp.down_proj",
}


def hf_name(name: str) -> str:
    """Our parameter name -> the Hugging Face Llama/Qwen3 one."""
    if name == "embedding.weight":
        return "model.embed_tokens.weight"
    if name == "norm.weight":
        return "model.norm.weight"
    if name == "lm_head.weight":
        return name
    _, layer, rest = name.split(".", 2)
    module, param = rest.rsplit(".", 1)
    return f"model.layers.{layer}.{_LAYER_NAMES[module]}.{param}"


def hf_config(config, eot_id):
    arch, kind = ("Qwen3ForCausalLM", "qwen3") if config.qk_norm else ("LlamaForCausalLM", "llama")
    return {
        "architectures": [arch],
        "model_type": kind,
        "vocab_size": config.vocab_size,
        "hidden_size": config.d_model,
        "intermediate_size": config.d_ff,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "max_position_embeddings": config.context_length,
        "rms_norm_eps": config.norm_eps,
        "rope_theta": config.rope_theta,
        "rope_parameters": {"rope_type": "default", "rope_theta": config.rope_theta},
        "hidden_act": "silu",
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": config.tie_embeddings,
        "initializer_range": config.init_std,
        "bos_token_id": eot_id,
        "eos_token_id": eot_id,
        "pad_token_id": eot_id,
        "torch_dtype": "float32",
    }


def hf_tokenizer_json(tokenizer, bos_token):
    """The tokenizer.json to export: ours, and a post-processor putting `bos_token` before each text
    (and between the two texts of a pair, as between documents in training)."""
    data = tokenizer.to_json()
    if bos_token is not None:
        bos = {"SpecialToken": {"id": bos_token, "type_id": 0}}
        text_a, text_b = ({"Sequence": {"id": name, "type_id": 0}} for name in "AB")
        data["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [bos, text_a],
            "pair": [bos, text_a, bos, text_b],
            "special_tokens": {bos_token: {"id": bos_token, "ids": [tokenizer.special_tokens[bos_token]], "tokens": [bos_token]}},
        }
    return data


# What an export writes: a directory holding only these is an earlier export to replace.
EXPORT_FILES = {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}


def export_hf(checkpoint, out_dir, overwrite=False):
    """Write config.json, model.safetensors, generation_config.json and the tokenizer files into a
    new directory that replaces `out_dir` whole; an existing `out_dir` that is not an earlier export
    only with `overwrite`."""
    model, tokenizer = load_model(checkpoint)
    eot_id = checkpoint_eot_id(checkpoint, tokenizer)  # None: sample puts nothing before the prompt, nor does the export
    eot_token = next((token for token, i in tokenizer.special_tokens.items() if i == eot_id), None)
    out_dir = Path(out_dir)
    check_output(out_dir, _is_export, "an earlier export", overwrite, directory=True)
    tensors = {hf_name(k): v.contiguous() for k, v in model_tensors(model).items()}
    files = {
        "config.json": hf_config(model.config, eot_id),
        "generation_config.json": {"bos_token_id": eot_id, "eos_token_id": eot_id, "pad_token_id": eot_id},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": model.config.context_length,
            **({"bos_token": eot_token, "eos_token": eot_token, "pad_token": eot_token} if eot_token else {}),
        },
        "tokenizer.json": hf_tokenizer_json(tokenizer, eot_token),
    }
    with atomic_directory(out_dir) as tmp:
        save_tensors(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        for name, content in files.items():
            (tmp / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return out_dir


def _is_export(directory):
    try:
        return directory.is_dir() and {p.name for p in directory.iterdir()} <= EXPORT_FILES
    except OSError:  # unreadable: not ours
        return False
