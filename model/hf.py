"""The Hugging Face layout, both ways: `export_hf` writes a checkpoint as a Hugging Face model
directory (loadable by `transformers`, vLLM, llama.cpp's converter and the Hub), `import_hf`
reads one into a checkpoint, exactly or not at all.

Architectures, ours -> theirs: "gpt2" is `GPT2LMHeadModel`; "llama" is `Qwen3ForCausalLM` with
QK-norm (Llama lacks it), `Qwen2ForCausalLM` with biases on q/k/v, else `LlamaForCausalLM`.
Import reads those and `MistralForCausalLM` (Llama's computation, with a sliding window that must
not bind); it refuses in one line, naming the file and the field, anything that would compute
otherwise here: another architecture, a binding sliding window, a RoPE scaling other than
Llama 3's, mixture-of-experts fields, another activation, quantized weights, missing, extra or
non-finite tensors, a tokenizer that gptkit's reader cannot encode exactly (tokenizer/files.py:
SentencePiece-style ones, Llama 2's, Mistral's, are refused there). It reads the weights
transformers reads: model.safetensors before model.safetensors.index.json.

Weights: our RoPE uses Llama's "rotate half" layout, so llama weights are only renamed; GPT-2's
Conv1D layers hold a Linear's weight transposed, and its c_attn holds wq, wk and wv in one.
Imported weights keep their dtype in the checkpoint's file (bf16 stays bf16); load_model widens
them to float32, and export writes them back in the dtype the file holds. Embedding and LM head
rows beyond the tokenizer's vocabulary (Qwen pads it to a multiple of 128) are dropped, with a
note: a checkpoint's vocabulary is its tokenizer's.

Framing: a checkpoint records the token put before a text and the token that ends one
(checkpoint.py: bos_id, eot_id), which `sample` uses. The export's tokenizer.json puts that first
token before a text (a TemplateProcessing post-processor: `AutoTokenizer(text)` gives [bos] + the
ids of text, what `sample` starts from), and config.json and generation_config.json name both.
The import takes the end-of-text token from generation_config.json's eos_token_id (else
config.json's), and the first token from the tokenizer.json's post-processor, what
`AutoTokenizer(text)` puts before a text (Llama 3: <|begin_of_text|>; Qwen2/3: none); GPT-2's
adds none, but GPT-2 separated its training documents with <|endoftext|>, its bos_token_id, so a
text starts after one, as in gptkit's own data. The tokenizer.json of a checkpoint has no
post-processor: there the ids of a text are the text's alone, and the code that frames a text adds
the first token itself.
"""
from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from gptkit.runtime.device import available_memory, size
from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import atomic_directory, check_apart, check_output, regular_file
from gptkit.shared.jsonfile import read_json
from gptkit.tokenizer import Tokenizer

from .checkpoint import (bos_id as checkpoint_bos_id, check_target, eot_id as checkpoint_eot_id, file_crc32, load_model,
                         model_tensors, save_model, save_tensors, stored_dtypes)
from .config import LLAMA3_SCALING, ModelConfig
from .model import TransformerLM

_LLAMA_TOP = {"embedding": "model.embed_tokens", "norm": "model.norm", "lm_head": "lm_head"}
_LLAMA_LAYER = {
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
_GPT2_TOP = {"embedding": "transformer.wte", "position_embedding": "transformer.wpe", "norm": "transformer.ln_f",
             "lm_head": "lm_head"}
_GPT2_LAYER = {
    "attention_norm": "ln_1",
    "attention.wq": "attn.c_attn",  # c_attn's outputs: the queries, then the keys, then the values
    "attention.wk": "attn.c_attn",
    "attention.wv": "attn.c_attn",
    "attention.wo": "attn.c_proj",
    "ffn_norm": "ln_2",
    "ffn.w1": "mlp.c_fc",
    "ffn.w2": "mlp.c_proj",
}
_QKV = ("attention.wq", "attention.wk", "attention.wv")
_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def _location(config: ModelConfig, name: str):
    """Where our tensor `name` lies in the Hugging Face model: (its name there, which third of
    its last dimension it is (GPT-2's c_attn) or None for all of it, whether it is transposed)."""
    gpt2 = config.architecture == "gpt2"
    module, param = name.rsplit(".", 1)
    if not module.startswith("layers."):
        return f"{(_GPT2_TOP if gpt2 else _LLAMA_TOP)[module]}.{param}", None, False
    _, layer, rest = module.split(".", 2)
    if not gpt2:
        return f"model.layers.{layer}.{_LLAMA_LAYER[rest]}.{param}", None, False
    linear = rest not in ("attention_norm", "ffn_norm")
    return f"transformer.h.{layer}.{_GPT2_LAYER[rest]}.{param}", _QKV.index(rest) if rest in _QKV else None, \
        linear and param == "weight"  # Conv1D: weight (in, out), y = x @ W + b


def to_hf(config: ModelConfig, tensors: dict) -> dict:
    """Our tensors (model_tensors) under their Hugging Face names, in Hugging Face's layout."""
    parts = {}
    for name, tensor in tensors.items():
        hf, third, transposed = _location(config, name)
        parts.setdefault(hf, {})[third] = tensor.T if transposed else tensor
    return {hf: (pieces[None] if None in pieces else torch.cat([pieces[i] for i in range(3)], dim=-1)).contiguous()
            for hf, pieces in parts.items()}


def from_hf(config: ModelConfig, hf_tensors: dict, names) -> dict:
    """Our tensors `names` out of Hugging Face's (to_hf's inverse)."""
    tensors = {}
    for name in names:
        hf, third, transposed = _location(config, name)
        tensor = hf_tensors[hf] if third is None else hf_tensors[hf].chunk(3, dim=-1)[third]
        tensors[name] = (tensor.T if transposed else tensor).contiguous()
    return tensors


def hf_architecture(config: ModelConfig) -> tuple[str, str]:
    """(architecture, model_type) of the Hugging Face model that computes what `config` does."""
    if config.architecture == "gpt2":
        return "GPT2LMHeadModel", "gpt2"
    if config.qk_norm:
        return "Qwen3ForCausalLM", "qwen3"
    if config.qkv_bias:
        return "Qwen2ForCausalLM", "qwen2"
    return "LlamaForCausalLM", "llama"


def hf_config(config: ModelConfig, bos_id, eot_id, dtype="float32"):
    arch, kind = hf_architecture(config)
    common = {
        "architectures": [arch],
        "model_type": kind,
        "vocab_size": config.vocab_size,
        "tie_word_embeddings": config.tie_embeddings,
        "initializer_range": config.init_std,
        "bos_token_id": bos_id,
        "eos_token_id": eot_id,
        "pad_token_id": eot_id,
        "torch_dtype": dtype,
    }
    if kind == "gpt2":
        return {**common, "n_positions": config.context_length, "n_embd": config.d_model, "n_layer": config.n_layers,
                "n_head": config.n_heads, "n_inner": config.d_ff, "activation_function": "gelu_new",
                "layer_norm_epsilon": config.norm_eps, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                "reorder_and_upcast_attn": False,
                # GPT-2 drops where nanoGPT and model.py do; the Llama family has no residual dropout to say it with
                "resid_pdrop": config.dropout, "embd_pdrop": config.dropout, "attn_pdrop": config.dropout}
    rope = {"rope_type": "default"} if config.rope_scaling is None else dict(config.rope_scaling)
    return {
        **common,
        "hidden_size": config.d_model,
        "intermediate_size": config.d_ff,
        "num_hidden_layers": config.n_layers,
        "num_attention_heads": config.n_heads,
        "num_key_value_heads": config.n_kv_heads,
        "head_dim": config.head_dim,
        "max_position_embeddings": config.context_length,
        "rms_norm_eps": config.norm_eps,
        "hidden_act": "silu",
        # transformers 5 reads rope_parameters; 4.x, rope_theta and rope_scaling
        "rope_theta": config.rope_theta,
        "rope_parameters": {**rope, "rope_theta": config.rope_theta},
        **({"rope_scaling": dict(config.rope_scaling)} if config.rope_scaling is not None else {}),
        **({"use_sliding_window": False} if kind in ("qwen2", "qwen3") else {}),
        **({"attention_bias": False} if kind in ("llama", "qwen3") else {}),
        **({"mlp_bias": False} if kind == "llama" else {}),
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


# The file that tells an export of ours, which a later export replaces, from any other Hugging Face
# directory (what save_pretrained writes, a download, a checkpoint): it lists the files the export
# wrote with their CRC-32, so that one changed since (by save_pretrained into the same directory)
# is no longer ours. A file of its own, not a field of config.json, which transformers would carry
# into every save_pretrained of the loaded model.
EXPORT_MARKER, EXPORT_FORMAT = "gptkit-export.json", "gptkit-hf-export"


def export_hf(checkpoint, out_dir, overwrite=False):
    """Write config.json, model.safetensors, generation_config.json, the tokenizer files and
    EXPORT_MARKER into a new directory that replaces `out_dir` whole; an existing `out_dir` that is
    not an earlier export as it wrote it only with `overwrite`, and never the checkpoint, a
    directory that holds it or one inside it. The weights keep the dtype the checkpoint's file
    holds them in."""
    out_dir = Path(out_dir)
    check_apart(out_dir, checkpoint, "--checkpoint")
    check_output(out_dir, _is_export, "an earlier export", overwrite, directory=True)
    model, tokenizer = load_model(checkpoint)
    bos_id, eot_id = checkpoint_bos_id(checkpoint, tokenizer), checkpoint_eot_id(checkpoint, tokenizer)
    token_of = {i: token for token, i in tokenizer.special_tokens.items()}
    bos_token, eot_token = token_of.get(bos_id), token_of.get(eot_id)  # None: nothing there, in sample nor the export
    dtypes = stored_dtypes(checkpoint)
    tensors = to_hf(model.config, {name: t.to(dtypes[name]) for name, t in model_tensors(model).items()})
    names = {"bos_token": bos_token, "eos_token": eot_token, "pad_token": eot_token}
    files = {
        "config.json": hf_config(model.config, bos_id, eot_id, _DTYPES[dtypes["embedding.weight"]]),
        "generation_config.json": {"bos_token_id": bos_id, "eos_token_id": eot_id, "pad_token_id": eot_id},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": model.config.context_length,
            **{key: token for key, token in names.items() if token is not None},
        },
        "tokenizer.json": hf_tokenizer_json(tokenizer, bos_token),
    }
    with atomic_directory(out_dir) as tmp:
        save_tensors(tensors, tmp / "model.safetensors", metadata={"format": "pt"})
        for name, content in files.items():
            (tmp / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        marker = {"format": EXPORT_FORMAT, "crc32": {path.name: file_crc32(path) for path in sorted(tmp.iterdir())}}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker, indent=2) + "\n")
    return out_dir


def _is_export(directory):
    """Whether `directory` is an export as export_hf wrote it: its marker, and the files the marker
    lists, unchanged, and no other."""
    try:
        marker = read_json(directory / EXPORT_MARKER)
        crcs = marker["crc32"] if marker.get("format") == EXPORT_FORMAT else None
        return isinstance(crcs, dict) and {p.name for p in directory.iterdir()} == {*crcs, EXPORT_MARKER} and all(
            file_crc32(regular_file(directory / name)) == crc for name, crc in crcs.items())
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # unreadable or not a marker: not ours
        return False


# -- import ---------------------------------------------------------------------------------------

# What each accepted architecture's config class (transformers 5) takes for a field config.json
# leaves out, for the fields that change what the model computes (tests/test_import_hf.py checks
# them against transformers). None for num_key_value_heads: as many as the heads; for head_dim:
# hidden_size / num_attention_heads.
LLAMA_FAMILY = {
    "LlamaForCausalLM": ("llama", {"num_key_value_heads": None, "head_dim": None, "max_position_embeddings": 2048,
                                   "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
                                   "attention_bias": False, "mlp_bias": False}),
    "MistralForCausalLM": ("mistral", {"num_key_value_heads": 8, "head_dim": None, "max_position_embeddings": 131072,
                                       "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
                                       "sliding_window": 4096}),
    "Qwen2ForCausalLM": ("qwen2", {"num_key_value_heads": 32, "head_dim": None, "max_position_embeddings": 32768,
                                   "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
                                   "use_sliding_window": False}),
    "Qwen3ForCausalLM": ("qwen3", {"num_key_value_heads": 32, "head_dim": 128, "max_position_embeddings": 32768,
                                   "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "hidden_act": "silu",
                                   "attention_bias": False, "use_sliding_window": False}),
}
GPT2 = ("gpt2", {"n_positions": 1024, "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                 "tie_word_embeddings": True, "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False,
                 "reorder_and_upcast_attn": False, "add_cross_attention": False})
ARCHITECTURES = (*LLAMA_FAMILY, "GPT2LMHeadModel")
# Fields of other models' configs that would make these compute something else than they do here.
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
ROPE_THETA_DEFAULT = 10000.0  # transformers' default_theta, where config.json gives none
# Bytes per position and per head dimension that model.py's RoPE tables take while they are built
# (rope_tables: two float32 tables, computed through float64 ones).
ROPE_TABLE_BYTES = 24
# Buffers some files hold beside the weights, which transformers skips too: GPT-2's causal masks,
# an old Llama's RoPE frequencies (recomputed from the config).
IGNORED = (".attn.bias", ".attn.masked_bias", ".rotary_emb.inv_freq")


@dataclass
class Imported:
    """What `import_hf` wrote, for its message."""

    architecture: str
    config: ModelConfig
    dtypes: list
    tokenizer: Tokenizer
    bos_id: int | None
    eot_id: int | None
    notes: list


class _HFConfig:
    """config.json's fields, each read with the default its architecture's config class gives it,
    type-checked; an error names the file and the field."""

    def __init__(self, path, data, defaults):
        self.path, self.data, self.defaults = path, data, defaults

    def get(self, field, kind=None, nullable=False):
        """`nullable`: null is taken (the fields whose null transformers derives from others)."""
        if field not in self.data and field not in self.defaults:
            raise InputError(f"{self.path}: {field} is missing")
        value = self.data[field] if field in self.data else self.defaults[field]
        if kind is int and not ((value is None and nullable) or (type(value) is int and value >= 1)):
            raise self.refused(field, value, "a whole number, 1 or more")
        if kind is float and not (type(value) in (int, float) and 0 < value < math.inf):
            raise self.refused(field, value, "a number above 0")
        if kind is bool and type(value) is not bool:
            raise self.refused(field, value, "true or false")
        return value

    def require(self, field, expected, why=""):
        value = self.get(field)
        if value != expected:
            raise self.refused(field, value, f"{json.dumps(expected)}{why}")

    def refused(self, field, value, expected):
        return InputError(f"{self.path}: {field} {json.dumps(value, default=str)} is not supported; expected {expected}")


def import_hf(hf_dir, out, overwrite=False) -> Imported:
    """Write the checkpoint `out` of the Hugging Face model directory `hf_dir` (config.json,
    model.safetensors or a sharded model.safetensors.index.json, tokenizer.json or GPT-2's
    vocab.json and merges.txt), or refuse it in one line before writing anything (see the module's
    docstring). An existing `out` that is not a checkpoint of a model alone is refused unless
    `overwrite`; `hf_dir` itself, a directory holding it and one inside it, always."""
    hf_dir = Path(hf_dir)
    check_apart(out, hf_dir, "--from")
    check_target(out, overwrite)
    config_path = hf_dir / "config.json"
    data = _read_json_object(config_path)
    architecture = _architecture(config_path, data)
    hf = _HFConfig(config_path, data, (GPT2 if architecture == "GPT2LMHeadModel" else LLAMA_FAMILY[architecture])[1])
    config = _model_config(hf, architecture)
    tokenizer, post_processor = _tokenizer(hf_dir, config.architecture == "gpt2")
    notes = []
    if tokenizer.vocab_size > config.vocab_size:
        raise InputError(f"{hf_dir}: the tokenizer has {tokenizer.vocab_size:,} tokens, more than config.json's "
                         f"vocab_size {config.vocab_size:,}; expected at most as many")
    source, files = _weight_files(hf_dir, data)
    _check_size(hf, config, source, files)
    with torch.device("meta"):  # the expected names and shapes, without memory
        ours = model_tensors(TransformerLM(config))
    tensors = from_hf(config, _read_tensors(hf_dir, config, source, files, to_hf(config, ours)), ours)
    if tokenizer.vocab_size < config.vocab_size:
        # Rows no token uses (Qwen pads its vocabulary to a multiple of 128): dropped, so the
        # checkpoint's vocabulary is its tokenizer's, as every stage expects.
        notes.append(f"config.json's vocab_size is {config.vocab_size:,}, the tokenizer's {tokenizer.vocab_size:,}: the "
                     f"{config.vocab_size - tokenizer.vocab_size:,} embedding and LM head rows no token uses are dropped")
        for name in ("embedding.weight", "lm_head.weight"):
            if name in tensors:
                tensors[name] = tensors[name][: tokenizer.vocab_size]
        config = dataclasses.replace(config, vocab_size=tokenizer.vocab_size)
    bos_id, eot_id = _framing(hf_dir, data, tokenizer, post_processor, config.architecture == "gpt2", notes)
    with torch.device("meta"):
        model = TransformerLM(config)
    model.load_state_dict(tensors, strict=False, assign=True)  # the tensors themselves, in their dtype
    save_model(model, tokenizer, out, eot_id=eot_id, bos_id=bos_id, overwrite=overwrite)
    return Imported(architecture, config, sorted({_DTYPES[t.dtype] for t in tensors.values()}), tokenizer, bos_id, eot_id, notes)


def _read_json_object(path):
    try:
        data = read_json(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such file (expected a Hugging Face model directory)") from None
    except (OSError, ValueError) as e:
        raise InputError(f"{path}: not a readable JSON file ({e})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a JSON object")
    return data


def _architecture(path, data):
    names = data.get("architectures")
    if not (isinstance(names, list) and len(names) == 1 and names[0] in ARCHITECTURES):
        raise InputError(f"{path}: architectures {json.dumps(names)} is not supported; expected one of "
                         f"{', '.join(ARCHITECTURES)}")
    model_type = (GPT2 if names[0] == "GPT2LMHeadModel" else LLAMA_FAMILY[names[0]])[0]
    if data.get("model_type") != model_type:
        raise InputError(f"{path}: model_type {json.dumps(data.get('model_type'))} does not match architectures "
                         f"{names[0]}; expected {json.dumps(model_type)}")
    for field in MOE_FIELDS:
        if data.get(field):
            raise InputError(f"{path}: {field} {json.dumps(data[field])} is not supported (mixture of experts); expected "
                             "no such field")
    if data.get("quantization_config") is not None:
        raise InputError(f"{path}: quantization_config is not supported (quantized weights); expected none")
    return names[0]


def _model_config(hf: _HFConfig, architecture) -> ModelConfig:
    """The ModelConfig of config.json, or the one-line refusal of what this model does not compute."""
    if architecture == "GPT2LMHeadModel":
        for field, why in (("activation_function", ""), ("scale_attn_weights", ""), ("scale_attn_by_inverse_layer_idx", ""),
                           ("reorder_and_upcast_attn", " (it upcasts the attention scores, computed otherwise)"),
                           ("add_cross_attention", "")):
            hf.require(field, hf.defaults[field], why)
        d_model = hf.get("n_embd", int)
        fields = {"architecture": "gpt2", "context_length": hf.get("n_positions", int), "d_model": d_model,
                  "n_layers": hf.get("n_layer", int), "n_heads": hf.get("n_head", int),
                  "d_ff": hf.get("n_inner", int, nullable=True) or 4 * d_model,
                  "norm_eps": hf.get("layer_norm_epsilon", float)}
        names = {"context_length": "n_positions", "d_model": "n_embd", "n_layers": "n_layer", "n_heads": "n_head",
                 "d_ff": "n_inner", "init_std": "initializer_range"}
    else:
        hf.require("hidden_act", "silu")
        for field in ("attention_bias", "mlp_bias"):
            if field in hf.defaults:  # Llama's and Qwen3's attention_bias biases the output projection too
                hf.require(field, False)
        _check_sliding_window(hf, architecture)
        heads = hf.get("num_attention_heads", int)
        fields = {"context_length": hf.get("max_position_embeddings", int), "d_model": hf.get("hidden_size", int),
                  "n_layers": hf.get("num_hidden_layers", int), "n_heads": heads,
                  "n_kv_heads": hf.get("num_key_value_heads", int, nullable=True) or heads,
                  "head_dim": hf.get("head_dim", int, nullable=True),
                  "d_ff": hf.get("intermediate_size", int), "norm_eps": hf.get("rms_norm_eps", float),
                  "qk_norm": architecture == "Qwen3ForCausalLM", "qkv_bias": architecture == "Qwen2ForCausalLM",
                  **_rope(hf)}
        names = {"context_length": "max_position_embeddings", "d_model": "hidden_size", "n_layers": "num_hidden_layers",
                 "n_heads": "num_attention_heads", "n_kv_heads": "num_key_value_heads", "d_ff": "intermediate_size",
                 "init_std": "initializer_range", "rope_scaling": _rope_field(hf.data)}
    try:
        return ModelConfig(vocab_size=hf.get("vocab_size", int), tie_embeddings=hf.get("tie_word_embeddings", bool),
                           init_std=hf.data.get("initializer_range") or 0.02, **fields)
    except SettingError as e:  # it names our fields: name config.json's
        problem = re.sub(rf"\b({'|'.join(names)})\b", lambda m: names[m[1]], e.problem)
        raise InputError(f"{hf.path}: {names.get(e.setting, e.setting)} {problem}") from None


def _check_sliding_window(hf: _HFConfig, architecture):
    """A sliding window that binds (attention limited to the last `sliding_window` positions) is
    refused; one at least as long as the context never does."""
    if architecture == "MistralForCausalLM":
        window, context = hf.get("sliding_window"), hf.get("max_position_embeddings", int)
        if window is not None and not (type(window) is int and window >= context):
            raise hf.refused("sliding_window", window, f"null or at least max_position_embeddings ({context:,}): a window "
                                                       "that binds is not supported")
    if "use_sliding_window" in hf.defaults:
        hf.require("use_sliding_window", False, " (sliding-window attention)")
    layer_types = hf.data.get("layer_types")
    if layer_types is not None and (not isinstance(layer_types, list) or any(t != "full_attention" for t in layer_types)):
        raise hf.refused("layer_types", layer_types, "full_attention for every layer")


def _rope_field(data):
    """Where config.json describes RoPE, as transformers reads it: a legacy rope_scaling object
    before rope_parameters."""
    return "rope_scaling" if data.get("rope_scaling") else "rope_parameters"


def _rope(hf: _HFConfig) -> dict:
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
        raise hf.refused(field, rope, 'null, rope_type "default" or rope_type "llama3" (other scalings are not supported)')
    scaling = {"original_max_position_embeddings": hf.get("max_position_embeddings"), **rope, "rope_type": "llama3"}
    missing = [key for key in LLAMA3_SCALING if key not in scaling]
    if missing:
        raise hf.refused(field, rope, f"a llama3 scaling with {', '.join(LLAMA3_SCALING[1:])}; {missing[0]} is missing")
    return {"rope_theta": float(theta), "rope_scaling": {key: scaling[key] for key in LLAMA3_SCALING}}


def _tokenizer(hf_dir, gpt2):
    """(Tokenizer, the tokenizer.json's post-processor) through gptkit's reader, which reads a
    tokenizer exactly or refuses it; its refusal refuses the import."""
    path = hf_dir / "tokenizer.json"
    try:
        if path.exists():  # a named pipe or a directory too, which the reader refuses
            tokenizer = Tokenizer.from_file(path)  # which read the file as JSON: a dict
            return tokenizer, read_json(path).get("post_processor")
        if gpt2 and (hf_dir / "vocab.json").is_file() and (hf_dir / "merges.txt").is_file():
            return Tokenizer.from_gpt2_files(hf_dir / "vocab.json", hf_dir / "merges.txt"), None
        raise InputError(f"{path}: no such file{' (nor vocab.json and merges.txt)' if gpt2 else ''}")
    except InputError as e:
        raise InputError(f"the import of {hf_dir} is refused because of its tokenizer: {e}") from None


def _weight_files(hf_dir, data):
    """(the file that names the weights, {file: the tensors the index places there, None: all}):
    model.safetensors, else the shards model.safetensors.index.json lists. transformers' order
    (modeling_utils, _get_resolved_checkpoint_files), so that a directory holding both is what it is
    there; a config.json naming another file (transformers_weights) is refused."""
    if "transformers_weights" in data:
        raise InputError(f"{hf_dir / 'config.json'}: transformers_weights {json.dumps(data['transformers_weights'])} is not "
                         "supported; expected no such field (the weights read are model.safetensors, else "
                         "model.safetensors.index.json)")
    index_path, single = hf_dir / "model.safetensors.index.json", hf_dir / "model.safetensors"
    if single.is_file():
        return single, {single.name: None}
    if index_path.is_file():
        weight_map = _read_json_object(index_path).get("weight_map")
        if not (isinstance(weight_map, dict) and all(isinstance(f, str) and "/" not in f for f in weight_map.values())):
            raise InputError(f"{index_path}: weight_map is not an object of tensor name -> file of this directory")
        return index_path, {name: [key for key, file in weight_map.items() if file == name]
                            for name in sorted(set(weight_map.values()))}
    raise InputError(f"{hf_dir}: no model.safetensors or model.safetensors.index.json (pickled .bin weights are not "
                     "read: unpickling can run code)")


def _check_size(hf: _HFConfig, config: ModelConfig, source, files):
    """Refuse, before anything of it is built, more layers than the weights hold tensors (the
    files' headers alone are read: 2**40 layers would be built for ever; a smaller count that is
    wrong is told by the tensor it misses), and a context whose RoPE tables cannot be built in this
    machine's memory: model.py builds them for the whole context whenever it loads the model, and no
    tensor depends on the context, so the weights cannot tell."""
    from safetensors import SafetensorError, safe_open

    tensors = 0
    for name in files:
        path = source.parent / name
        try:
            with safe_open(regular_file(path), framework="pt") as f:
                tensors += len(f.keys())
        except (SafetensorError, OSError) as e:
            raise InputError(f"{path}: not a readable safetensors file ({e})") from None
    if config.n_layers > tensors:
        field = "n_layer" if config.architecture == "gpt2" else "num_hidden_layers"
        raise InputError(f"{hf.path}: {field} {config.n_layers:,} is more layers than {source.name} has tensors "
                         f"({tensors:,}); expected the layers of the weights")
    available = available_memory(torch.device("cpu"))
    tables = ROPE_TABLE_BYTES * config.context_length * config.head_dim
    if config.architecture == "llama" and available is not None and tables > available:
        raise InputError(f"{hf.path}: max_position_embeddings {config.context_length:,} takes RoPE tables of "
                         f"{size(tables)}, more than the {size(available)} of memory available; expected a context this "
                         "machine can hold")


def _read_tensors(hf_dir, config: ModelConfig, source, files: dict, expected: dict) -> dict:
    """The weights of `files` (_weight_files), under Hugging Face's names, checked against those
    `expected` (to_hf of a model of `config`: meta tensors of the right shapes), finite."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    tensors, file_of = {}, {}
    for name, listed in files.items():
        try:
            loaded = load_file(regular_file(hf_dir / name))
        except (SafetensorError, OSError) as e:
            raise InputError(f"{hf_dir / name}: not a readable safetensors file ({e})") from None
        if set(listed or ()) - set(loaded):
            raise InputError(f"{hf_dir / name}: no tensor {sorted(set(listed) - set(loaded))[0]!r}, which "
                             f"{source.name} places there")
        for key, tensor in loaded.items():
            if config.architecture == "gpt2" and not key.startswith(("transformer.", "lm_head.")):
                key = f"transformer.{key}"  # GPT-2's own file holds GPT2Model's names, without the prefix
            tensors[key], file_of[key] = tensor, hf_dir / name
    for key in [key for key in tensors if key.endswith(IGNORED)]:
        del tensors[key]
    lm_head, embedding = tensors.get("lm_head.weight"), _location(config, "embedding.weight")[0]
    if config.tie_embeddings and lm_head is not None:
        if not (embedding in tensors and torch.equal(lm_head, tensors[embedding])):
            raise InputError(f"{file_of['lm_head.weight']}: lm_head.weight differs from {embedding}, but config.json's "
                             "tie_word_embeddings is true")
        del tensors["lm_head.weight"]
    for key, meta in expected.items():
        if key not in tensors:
            raise InputError(f"{source}: no tensor {key!r}, which config.json's model has")
        if tensors[key].shape != meta.shape:
            raise InputError(f"{file_of[key]}: tensor {key!r} has shape {tuple(tensors[key].shape)}, config.json makes it "
                             f"{tuple(meta.shape)}")
        if tensors[key].dtype not in _DTYPES:
            raise InputError(f"{file_of[key]}: tensor {key!r} is {tensors[key].dtype}; expected float32, bfloat16 or "
                             "float16 (quantized weights are not supported)")
        if not torch.isfinite(tensors[key]).all():
            raise InputError(f"{file_of[key]}: tensor {key!r} holds NaN or infinite values; expected finite weights")
    extra = sorted(set(tensors) - set(expected))
    if extra:
        raise InputError(f"{file_of[extra[0]]}: tensor {extra[0]!r} is not part of the model config.json describes")
    return tensors


def _framing(hf_dir, data, tokenizer, post_processor, gpt2, notes):
    """(bos_id, eot_id) of the import: see the module's docstring."""
    generation_path = hf_dir / "generation_config.json"
    generation = _read_json_object(generation_path) if generation_path.exists() else {}
    sources = [(generation_path, generation), (hf_dir / "config.json", data)]
    eot_path, eot = next(((path, d["eos_token_id"]) for path, d in sources if "eos_token_id" in d), (None, None))
    if isinstance(eot, list) and eot:
        if len(eot) > 1:
            names = ", ".join(_token_name(tokenizer, i) for i in eot[1:] if type(i) is int)
            notes.append(f"{eot_path.name}: eos_token_id {json.dumps(eot)}: sampling stops at the first alone; "
                         f"`gptkit sample --stop` stops at another ({names})")
        eot = eot[0]
    _check_id(eot_path, "eos_token_id", eot, tokenizer)
    bos = _bos_of_post_processor(hf_dir / "tokenizer.json", post_processor, tokenizer)
    if bos is None and gpt2:
        bos_path, bos = next(((path, d["bos_token_id"]) for path, d in sources if "bos_token_id" in d), (None, None))
        _check_id(bos_path, "bos_token_id", bos, tokenizer)
    return bos, eot


def _check_id(path, field, value, tokenizer):
    if value is not None and not (type(value) is int and 0 <= value < tokenizer.vocab_size):
        raise InputError(f"{path}: {field} {json.dumps(value)} is not a token of the tokenizer's {tokenizer.vocab_size:,}; "
                         "expected a token id or null")


def _token_name(tokenizer, token_id):
    names = {i: token for token, i in tokenizer.special_tokens.items()}
    return names.get(token_id, str(token_id))


def _bos_of_post_processor(path, node, tokenizer):
    """The id the tokenizer.json's post-processor puts before a single text (None: none). A
    ByteLevel post-processor only moves offsets; a template may put one special token before the
    text, nothing after it (a token after a prompt would end it)."""
    if not isinstance(node, dict):
        return None if node is None else _unsupported_template(path, node)
    if node.get("type") == "ByteLevel":
        return None
    if node.get("type") == "Sequence" and isinstance(node.get("processors"), list):
        found = [bos for step in node["processors"] if (bos := _bos_of_post_processor(path, step, tokenizer)) is not None]
        if len(found) > 1:
            _unsupported_template(path, node)
        return found[0] if found else None
    single = node.get("single") if node.get("type") == "TemplateProcessing" else None
    if not (isinstance(single, list) and single and all(isinstance(piece, dict) for piece in single)):
        _unsupported_template(path, node)
    if len(single) == 1 and "Sequence" in single[0]:
        return None
    if not (len(single) == 2 and "SpecialToken" in single[0] and "Sequence" in single[1]):
        _unsupported_template(path, node)
    token = single[0]["SpecialToken"].get("id") if isinstance(single[0]["SpecialToken"], dict) else None
    specials = node.get("special_tokens")
    entry = specials.get(token) if isinstance(specials, dict) and isinstance(token, str) else None
    if not (isinstance(entry, dict) and token in tokenizer.special_tokens
            and entry.get("ids") == [tokenizer.special_tokens[token]]):
        raise InputError(f"{path}: post_processor puts {json.dumps(token)} before a text, which is not a special token of "
                         "the tokenizer with those ids")
    return tokenizer.special_tokens[token]


def _unsupported_template(path, node):
    what = json.dumps(node if not isinstance(node, dict) else node.get("single") if node.get("type") == "TemplateProcessing"
                      else node.get("type"))
    raise InputError(f"{path}: post_processor {what} is not supported; expected none, ByteLevel, or a TemplateProcessing "
                     "that puts at most one special token before a text and none after it")
