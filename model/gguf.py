"""The export to GGUF: a checkpoint as one file that llama.cpp (llama-cli, llama-server), Ollama and
LM Studio run, written with the `gguf` package, the writer llama.cpp maintains. The file holds the
weights, the tokenizer and the chat template.

gptkit's "llama" architecture is llama.cpp's `llama`, or its `qwen3` with QK-norm; "gpt2" is its
`gpt2`. llama.cpp's `llama` rotates the pairs (2i, 2i + 1) of a head where our RoPE rotates
(i, i + d/2), so the rows of wq and wk (and of their biases) are reordered in each head as
llama.cpp's own converter reorders a Hugging Face Llama's; `qwen3` rotates as we do. Llama 3's RoPE
scaling travels as llama.cpp's `rope_freqs` tensor: how much each frequency is divided by.

The tokenizer is llama.cpp's byte-level BPE ("gpt2"): the tokens in GPT-2's byte alphabet, the
merges, and the name of the pre-tokenizer that cuts text as our pattern does. What llama.cpp would
compute or tokenize otherwise is refused in one line.

Norms, biases, RoPE factors and learned positions stay float32, as llama.cpp's converter keeps them.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from gptkit.shared.errors import InputError, SettingError
from gptkit.shared.files import StrPath, atomic_path, check_output, regular_file
from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.files import token_text

from .checkpoint import (
    CONFIG_FILE,
    TOKENIZER_FILE,
    CheckpointError,
    checkpoint_directory,
    inputs_of,
    load_model,
    model_tensors,
)
from .checkpoint import bos_id as checkpoint_bos_id
from .checkpoint import eot_id as checkpoint_eot_id
from .config import ModelConfig
from .hf.chat import checkpoint_template
from .model import rope_frequencies

# --dtype: the GGML type of the weight matrices and the file type llama.cpp reports, by their gguf names.
DTYPES = {
    "f32": ("F32", "ALL_F32"),
    "f16": ("F16", "MOSTLY_F16"),
    "bf16": ("BF16", "MOSTLY_BF16"),
    "q8_0": ("Q8_0", "MOSTLY_Q8_0"),
}
# Q8_0 quantizes 32 values of a row at a time; a matrix whose rows are not whole blocks stays f16, as the
# converter keeps it.
Q8_BLOCK = 32

# The key that marks a file as an export of ours, which a later export replaces: the CRC-32 of the
# tensor data, so that a file made from one of ours (llama-quantize copies the keys) is not ours.
EXPORT_KEY = "gptkit.export.tensors_crc32"

# llama.cpp's pre-tokenizer that cuts text as a tokenizer's (pattern, ignore_merges) does. Each
# splits with its own copy of the pattern (Llama 3's and Qwen2's with the case-insensitive group
# spelled out), and "llama-bpe" takes a pre-token that is a token whole, as ignore_merges does.
PRE_TOKENIZERS = {
    (split.GPT2_PATTERN, False): "gpt-2",
    (split.LLAMA3_PATTERN, True): "llama-bpe",
    (split.QWEN2_PATTERN, False): "qwen2",
}

# Our modules -> llama.cpp's tensors ("{}": the layer's number); .weight and .bias keep their suffix.
NAMES = {
    "embedding": "token_embd",
    "position_embedding": "position_embd",
    "norm": "output_norm",
    "lm_head": "output",
    "layers.{}.attention_norm": "blk.{}.attn_norm",
    "layers.{}.attention.wq": "blk.{}.attn_q",
    "layers.{}.attention.wk": "blk.{}.attn_k",
    "layers.{}.attention.wv": "blk.{}.attn_v",
    "layers.{}.attention.wo": "blk.{}.attn_output",
    "layers.{}.attention.q_norm": "blk.{}.attn_q_norm",
    "layers.{}.attention.k_norm": "blk.{}.attn_k_norm",
    "layers.{}.ffn_norm": "blk.{}.ffn_norm",
    "layers.{}.ffn.w1": "blk.{}.ffn_gate",
    "layers.{}.ffn.w3": "blk.{}.ffn_up",
    "layers.{}.ffn.w2": "blk.{}.ffn_down",
}
# GPT-2's attention holds wq, wk and wv in one matrix: they land under one name, joined in that
# order. Its MLP has no gate: the first layer is the up projection.
GPT2_NAMES = {
    **NAMES,
    "layers.{}.attention.wq": "blk.{}.attn_qkv",
    "layers.{}.attention.wk": "blk.{}.attn_qkv",
    "layers.{}.attention.wv": "blk.{}.attn_qkv",
    "layers.{}.ffn.w1": "blk.{}.ffn_up",
}
_LAYER = re.compile(r"layers\.(\d+)\.")


@dataclass(frozen=True)
class Exported:
    """What export_gguf wrote: the file, llama.cpp's architecture, the file's size in bytes, and the model's
    context in tokens (what llama.cpp's context should be set to)."""

    path: Path
    architecture: str
    size: int
    context: int


def export_gguf(checkpoint: StrPath, out: StrPath, dtype: str = "f16", overwrite: bool = False) -> Exported:
    """Write the checkpoint as the GGUF file `out`, atomically; an existing `out` that is not an
    earlier export as it wrote it only with `overwrite`, and never the checkpoint, nor one inside it
    or inside the checkpoint a LoRA run's adapters adapt.
    `dtype`: the type of the weight matrices (DTYPES)."""
    gguf = _import_gguf()
    if dtype not in DTYPES:
        raise SettingError("dtype", f"{dtype!r}: expected one of {', '.join(DTYPES)}")
    out = Path(out)
    check_output(out, _is_export, "an earlier export", overwrite, inputs=inputs_of(checkpoint))
    model, tokenizer = load_model(checkpoint)
    config, directory = model.config, checkpoint_directory(checkpoint)
    architecture = _architecture(config, directory)
    bos_id, eot_id = checkpoint_bos_id(checkpoint, tokenizer), checkpoint_eot_id(checkpoint, tokenizer)
    if eot_id is None:
        raise CheckpointError(
            f"{directory / CONFIG_FILE}: no end-of-text token; llama.cpp would end a text at its default, "
            "token 11, instead"
        )
    template = checkpoint_template(checkpoint, tokenizer)
    with torch.no_grad():
        tensors = gguf_tensors(config, model_tensors(model))

    with atomic_path(out) as tmp:
        writer = gguf.GGUFWriter(tmp, architecture)
        weight_type, file_type = DTYPES[dtype]
        crc = 0
        for name, tensor in tensors.items():
            data = tensor.float().numpy()
            kind = _stored_type(name, data.shape, weight_type)
            data = gguf.quants.quantize(data, gguf.GGMLQuantizationType[kind])
            crc = zlib.crc32(data, crc)
            writer.add_tensor(name, data, raw_dtype=gguf.GGMLQuantizationType[kind])
        writer.add_name(Path(checkpoint).resolve().name)
        writer.add_file_type(gguf.LlamaFileType[file_type])
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        _add_hparams(writer, config, architecture)
        _add_tokenizer(writer, gguf, tokenizer, directory / TOKENIZER_FILE, bos_id, eot_id)
        if template is not None:
            writer.add_chat_template(template.source)
            if len(template.stop_ids) == 1:  # the token that ends a reply (gptkit's <|end|>): llama.cpp stops there
                writer.add_eot_token_id(next(iter(template.stop_ids)))
        writer.add_uint32(EXPORT_KEY, crc)
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
    return Exported(out, architecture, out.stat().st_size, config.context_length)


def gguf_tensors(config: ModelConfig, tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """model_tensors(model) under llama.cpp's names and in its layout (see the module's docstring)."""
    gpt2 = config.architecture == "gpt2"
    names = GPT2_NAMES if gpt2 else NAMES
    interleave = not gpt2 and not config.qk_norm  # llama.cpp's `llama` rotates adjacent pairs
    parts: dict[str, list[torch.Tensor]] = {}
    for name, tensor in tensors.items():
        module, kind = name.rsplit(".", 1)
        layer = _LAYER.match(module)
        theirs = names[_LAYER.sub("layers.{}.", module, count=1)].format(layer[1] if layer else "")
        if interleave and module.endswith(("wq", "wk")):
            tensor = _pairs_adjacent(tensor, config.head_dim)
        parts.setdefault(f"{theirs}.{kind}", []).append(tensor)
    result = {name: torch.cat(part) if len(part) > 1 else part[0] for name, part in parts.items()}
    if config.rope_scaling is not None:
        scaled = rope_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        result["rope_freqs.weight"] = (rope_frequencies(config.head_dim, config.rope_theta) / scaled).float()
    return result


def _pairs_adjacent(tensor, head_dim):
    """The rows of each head reordered from (0, 1, ..., d - 1) to (0, d/2, 1, d/2 + 1, ...): the
    pair our RoPE rotates, (i, i + d/2), becomes rows 2i and 2i + 1, the pair llama.cpp rotates."""
    heads = tensor.shape[0] // head_dim
    return tensor.reshape(heads, 2, head_dim // 2, *tensor.shape[1:]).transpose(1, 2).reshape(tensor.shape)


def _stored_type(name, shape, weight_type):
    """The GGML type of a tensor: float32 for the vectors (norms, biases, RoPE factors) and GPT-2's
    learned positions, as llama.cpp's converter keeps them; the weight type for the matrices, but
    f16 for a Q8_0 matrix whose rows are not whole blocks."""
    if len(shape) == 1 or name == "position_embd.weight":
        return "F32"
    if weight_type == "Q8_0" and shape[-1] % Q8_BLOCK:
        return "F16"
    return weight_type


def _architecture(config, directory):
    """llama.cpp's architecture that computes what `config` does, or a one-line refusal."""
    if config.architecture == "gpt2":
        return "gpt2"
    if not config.qk_norm:
        return "llama"
    if config.rope_scaling is not None:
        raise CheckpointError(
            f"{directory / CONFIG_FILE}: qk_norm with Llama 3's rope_scaling: llama.cpp's qwen3 architecture, "
            "the one with QK-norm, has no RoPE scaling; not supported"
        )
    return "qwen3"


def _add_hparams(writer, config, architecture):
    """The architecture's settings, under llama.cpp's keys."""
    writer.add_context_length(config.context_length)
    writer.add_embedding_length(config.d_model)
    writer.add_block_count(config.n_layers)
    writer.add_feed_forward_length(config.d_ff)
    writer.add_head_count(config.n_heads)
    writer.add_vocab_size(config.vocab_size)
    if architecture == "gpt2":
        writer.add_layer_norm_eps(config.norm_eps)
        return
    writer.add_head_count_kv(config.n_kv_heads)
    writer.add_key_length(config.head_dim)
    writer.add_value_length(config.head_dim)
    writer.add_rope_dimension_count(config.head_dim)
    writer.add_rope_freq_base(config.rope_theta)
    writer.add_layer_norm_rms_eps(config.norm_eps)


def _add_tokenizer(writer, gguf, tokenizer: Tokenizer, path: Path, bos_id: int | None, eot_id: int) -> None:
    """The tokenizer as llama.cpp's byte-level BPE, or a one-line refusal naming its file `path`
    where llama.cpp would cut or change text otherwise."""
    if tokenizer.normalizer:
        raise CheckpointError(
            f"{path}: a normalizer ({', '.join(tokenizer.normalizer)}), which llama.cpp's BPE tokenizer does not "
            "apply; not supported"
        )
    pre = PRE_TOKENIZERS.get((tokenizer.pattern, tokenizer.ignore_merges))
    if pre is None:
        raise CheckpointError(
            f"{path}: pre-tokenizer pattern {tokenizer.pattern!r}"
            f"{' with ignore_merges' if tokenizer.ignore_merges else ''}: llama.cpp cuts text with patterns of its "
            "own, and none of them is this one (supported: GPT-2's; Llama 3's with ignore_merges; Qwen2's)"
        )
    special = {i: text for text, i in tokenizer.special_tokens.items()}
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre(pre)
    writer.add_token_list(
        [special[i] if i in special else token_text(token) for i, token in enumerate(tokenizer.vocab)]
    )
    writer.add_token_types(
        [gguf.TokenType.CONTROL if i in special else gguf.TokenType.NORMAL for i in range(tokenizer.vocab_size)]
    )
    writer.add_token_merges(
        [f"{token_text(tokenizer.vocab[a])} {token_text(tokenizer.vocab[b])}" for a, b in tokenizer.merges]
    )
    writer.add_eos_token_id(eot_id)
    if bos_id is not None:
        writer.add_bos_token_id(bos_id)
    writer.add_add_bos_token(bos_id is not None)


def _is_export(path):
    """Whether `path` is a GGUF file as export_gguf wrote it: its key, and the tensor data it
    records the CRC-32 of."""
    gguf = _import_gguf()
    try:
        reader = gguf.GGUFReader(regular_file(path))
        field = reader.fields[EXPORT_KEY]
        crc = 0
        for tensor in reader.tensors:
            crc = zlib.crc32(tensor.data, crc)
        return int(field.parts[field.data[0]][0]) == crc
    except (OSError, ValueError, KeyError, IndexError, TypeError):  # unreadable, not GGUF, or not ours
        return False


def _import_gguf() -> Any:
    """The gguf package, imported where an export needs it: an optional dependency."""
    try:
        import gguf
    except ImportError:
        raise InputError("export-gguf needs the gguf package: pip install 'gptkit[gguf]'") from None
    return gguf
