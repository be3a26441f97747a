"""The Hugging Face layout, both ways: `export_hf` writes a checkpoint as a Hugging Face model
directory (loadable by `transformers`, vLLM, llama.cpp's converter and the Hub), `import_hf`
reads one into a checkpoint, exactly or not at all.

One adapter per model family (family.py), each around one table of names: the Llama family
(llama.py: Llama, Mistral, Qwen2, Qwen3) and GPT-2 (gpt2.py). files.py reads a Hugging Face
directory's config.json and weights, framing.py its tokenizer and how it frames a text.

The import refuses in one line, naming the file and the field, anything that would compute
otherwise here: another architecture, a binding sliding window, a RoPE scaling other than
Llama 3's, mixture-of-experts fields, another activation, quantized weights, missing, extra or
non-finite tensors, a tokenizer that gptkit's reader cannot encode exactly (tokenizer/files.py:
SentencePiece-style ones, Llama 2's, Mistral's, are refused there).

A chat template comes along both ways (chat.py): the import writes the model's beside the
checkpoint's tokenizer.json, the export writes the checkpoint's into tokenizer_config.json.

Imported weights keep their dtype in the checkpoint's file (bf16 stays bf16); load_model widens
them to float32, and export writes them back in the dtype the file holds. Embedding and LM head
rows beyond the tokenizer's vocabulary (Qwen pads it to a multiple of 128) are dropped, with a
note: a checkpoint's vocabulary is its tokenizer's.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from gptkit.shared.errors import InputError
from gptkit.shared.files import atomic_directory, check_apart, check_output, regular_file
from gptkit.shared.jsonfile import read_json
from gptkit.tokenizer import Tokenizer

from ..checkpoint import (bos_id as checkpoint_bos_id, check_target, check_tensors, eot_id as checkpoint_eot_id, file_crc32,
                          load_model, model_tensors, save_model, save_tensors, stored_dtypes)
from ..config import ModelConfig
from ..model import TransformerLM
from .chat import CHECKPOINT_FILES, checkpoint_files, checkpoint_template, read_chat_template
from .files import HFConfig, count_tensors, read_json_object, read_weights, weight_files
from .framing import hf_tokenizer_json, read_framing, read_tokenizer
from .gpt2 import GPT2
from .llama import Llama

FAMILIES = {"llama": Llama(), "gpt2": GPT2()}  # by our architecture
# The Hugging Face architectures read -> (model_type, defaults), and their family.
ARCHITECTURES = {name: spec for family in FAMILIES.values() for name, spec in family.architectures.items()}
FAMILY_OF = {name: family for family in FAMILIES.values() for name in family.architectures}
# Fields of other models' configs that would make these compute something else than they do here.
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


def _dtype_name(dtype) -> str:
    """config.json's name of a dtype: torch.bfloat16 -> bfloat16."""
    return str(dtype).removeprefix("torch.")


def hf_config(config: ModelConfig, bos_id, eot_id, dtype="float32"):
    """The config.json of the Hugging Face model that computes what `config` does."""
    family = FAMILIES[config.architecture]
    architecture = family.architecture(config)
    model_type = family.architectures[architecture][0]
    return {"architectures": [architecture], "model_type": model_type, "vocab_size": config.vocab_size,
            "tie_word_embeddings": config.tie_embeddings, "initializer_range": config.init_std, "bos_token_id": bos_id,
            "eos_token_id": eot_id, "pad_token_id": eot_id, "torch_dtype": dtype, **family.hf_config(config, model_type)}


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
    family = FAMILIES[model.config.architecture]
    tensors = family.to_hf({name: t.to(dtypes[name]) for name, t in model_tensors(model).items()})
    names = {"bos_token": bos_token, "eos_token": eot_token, "pad_token": eot_token}
    template = checkpoint_template(checkpoint, tokenizer)
    chat = {**template.variables, "chat_template": template.source} if template is not None else {}
    files = {
        "config.json": hf_config(model.config, bos_id, eot_id, _dtype_name(dtypes["embedding.weight"])),
        "generation_config.json": {"bos_token_id": bos_id, "eos_token_id": eot_id, "pad_token_id": eot_id},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": model.config.context_length,
            **{key: token for key, token in names.items() if token is not None},
            **chat,  # the names the template is rendered with, as the checkpoint renders it
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


@dataclass
class Imported:
    """What `import_hf` wrote, for its message."""

    architecture: str
    config: ModelConfig
    dtypes: list
    tokenizer: Tokenizer
    bos_id: int | None
    eot_id: int | None
    chat_template: bool  # carried into the checkpoint
    notes: list


def import_hf(hf_dir, out, overwrite=False) -> Imported:
    """Write the checkpoint `out` of the Hugging Face model directory `hf_dir` (config.json,
    model.safetensors or a sharded model.safetensors.index.json, tokenizer.json or GPT-2's
    vocab.json and merges.txt), or refuse it in one line before writing anything (see the module's
    docstring). An existing `out` that is not a checkpoint of a model alone is refused unless
    `overwrite`; `hf_dir` itself, a directory holding it and one inside it, always."""
    hf_dir = Path(hf_dir)
    check_apart(out, hf_dir, "--from")
    check_target(out, overwrite, CHECKPOINT_FILES, "a checkpoint of a model alone (without training state)")
    config_path = hf_dir / "config.json"
    data = read_json_object(config_path)
    architecture = _architecture(config_path, data)
    family = FAMILY_OF[architecture]
    hf = HFConfig(config_path, data, ARCHITECTURES[architecture][1])
    config = family.model_config(hf, architecture)
    tokenizer, post_processor = read_tokenizer(hf_dir, family.vocab_files)
    notes = []
    if tokenizer.vocab_size > config.vocab_size:
        raise InputError(f"{hf_dir}: the tokenizer has {tokenizer.vocab_size:,} tokens, more than config.json's "
                         f"vocab_size {config.vocab_size:,}; expected at most as many")
    source, files = weight_files(hf_dir, data)
    stored = count_tensors(source, files)
    if config.n_layers > stored:  # told by the headers before anything is built: 2**40 layers would be built for ever
        raise InputError(f"{config_path}: {family.config_names['n_layers']} {config.n_layers:,} is more layers than "
                         f"{source.name} has tensors ({stored:,}); expected the layers of the weights")
    with torch.device("meta"):  # the expected names and shapes, without memory
        ours = model_tensors(TransformerLM(config))
    tensors = family.from_hf(_read_weights(family, config, source, files, family.to_hf(ours)), ours)
    if tokenizer.vocab_size < config.vocab_size:
        # Rows no token uses (Qwen pads its vocabulary to a multiple of 128): dropped, so the
        # checkpoint's vocabulary is its tokenizer's, as every stage expects.
        notes.append(f"config.json's vocab_size is {config.vocab_size:,}, the tokenizer's {tokenizer.vocab_size:,}: the "
                     f"{config.vocab_size - tokenizer.vocab_size:,} embedding and LM head rows no token uses are dropped")
        for name in ("embedding.weight", "lm_head.weight"):
            if name in tensors:
                tensors[name] = tensors[name][: tokenizer.vocab_size]
        config = dataclasses.replace(config, vocab_size=tokenizer.vocab_size)
    bos_id, eot_id = read_framing(hf_dir, data, tokenizer, post_processor, family.bos_token_starts, notes)
    template, names = read_chat_template(hf_dir, notes)
    with torch.device("meta"):
        model = TransformerLM(config)
    model.load_state_dict(tensors, strict=False, assign=True)  # the tensors themselves, in their dtype
    save_model(model, tokenizer, out, eot_id=eot_id, bos_id=bos_id, overwrite=overwrite,
               extra_files=checkpoint_files(template, names))
    return Imported(architecture, config, sorted({_dtype_name(t.dtype) for t in tensors.values()}), tokenizer, bos_id,
                    eot_id, template is not None, notes)


def _architecture(path, data):
    names = data.get("architectures")
    if not (isinstance(names, list) and len(names) == 1 and names[0] in ARCHITECTURES):
        raise InputError(f"{path}: architectures {json.dumps(names)} is not supported; expected one of "
                         f"{', '.join(ARCHITECTURES)}")
    model_type = ARCHITECTURES[names[0]][0]
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


def _read_weights(family, config: ModelConfig, source, files: dict, expected: dict) -> dict:
    """The weights of `files` (weight_files), under Hugging Face's names, checked against those
    `expected` (to_hf of a model of `config`: meta tensors of the right shapes), finite."""
    tensors, file_of = read_weights(source, files, family.stored_name)
    for key in [key for key in tensors if key.endswith(family.ignored)]:
        del tensors[key]
    lm_head, embedding = tensors.get("lm_head.weight"), family.locate("embedding.weight")[0]
    if config.tie_embeddings and lm_head is not None:
        if not (embedding in tensors and torch.equal(lm_head, tensors[embedding])):
            raise InputError(f"{file_of['lm_head.weight']}: lm_head.weight differs from {embedding}, but config.json's "
                             "tie_word_embeddings is true")
        del tensors["lm_head.weight"]
    check_tensors(tensors, expected, source, file_of)
    for key, tensor in tensors.items():
        if not torch.isfinite(tensor).all():
            raise InputError(f"{file_of[key]}: tensor {key!r} holds NaN or infinite values; expected finite weights")
    return tensors
