"""The export: a checkpoint as a Hugging Face model directory (config.json, model.safetensors,
generation_config.json, the tokenizer files and the checkpoint's chat template), loadable by
`transformers`, vLLM, llama.cpp's converter and the Hub. The weights keep the dtype the
checkpoint's file holds them in. A LoRA run's adapters are exported apart too, in peft's format
(export_peft; model/lora/peft.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, atomic_directory, check_output, regular_file
from gptkit.shared.jsonfile import read_json

from ..checkpoint import (
    CONFIG_FILE,
    CheckpointReader,
    file_crc32,
    inputs_of,
    load_model,
    model_tensors,
    save_tensors,
    stored_dtypes,
)
from ..checkpoint import bos_id as checkpoint_bos_id
from ..checkpoint import eot_id as checkpoint_eot_id
from ..config import ModelConfig
from ..lora.peft import peft_files
from .chat import checkpoint_template
from .families import FAMILIES
from .files import dtype_name
from .framing import hf_tokenizer_json


def hf_config(config: ModelConfig, bos_id: int | None, eot_id: int | None, dtype: str = "float32") -> dict[str, Any]:
    """The config.json of the Hugging Face model that computes what `config` does."""
    family = FAMILIES[config.architecture]
    architecture = family.architecture(config)
    model_type = family.architectures[architecture][0]
    return {
        "architectures": [architecture],
        "model_type": model_type,
        "vocab_size": config.vocab_size,
        "tie_word_embeddings": config.tie_embeddings,
        "initializer_range": config.init_std,
        "bos_token_id": bos_id,
        "eos_token_id": eot_id,
        "pad_token_id": eot_id,
        "torch_dtype": dtype,
        **family.hf_config(config, model_type),
    }


# The file that tells an export of ours, which a later export replaces, from any other Hugging Face
# directory (what save_pretrained writes, a download, a checkpoint): it lists the files the export
# wrote with their CRC-32, so that one changed since (by save_pretrained into the same directory)
# is no longer ours. A file of its own, not a field of config.json, which transformers would carry
# into every save_pretrained of the loaded model.
EXPORT_MARKER, EXPORT_FORMAT = "gptkit-export.json", "gptkit-hf-export"


def export_hf(checkpoint: StrPath, out_dir: StrPath, overwrite: bool = False) -> Path:
    """Write config.json, model.safetensors, generation_config.json, the tokenizer files and
    EXPORT_MARKER into a new directory that replaces `out_dir` whole; an existing `out_dir` that is
    not an earlier export as it wrote it only with `overwrite`, and never the checkpoint (nor the
    one a LoRA run's adapters adapt), a directory that holds it or one inside it. The weights keep
    the dtype the checkpoint's file holds them in; a LoRA run's are its base's with the adapters
    merged in."""
    out_dir = Path(out_dir)
    check_export_target(out_dir, checkpoint, overwrite)
    model, tokenizer = load_model(checkpoint)
    bos_id, eot_id = checkpoint_bos_id(checkpoint, tokenizer), checkpoint_eot_id(checkpoint, tokenizer)
    token_of: dict[int | None, str] = {i: token for token, i in tokenizer.special_tokens.items()}
    bos_token, eot_token = token_of.get(bos_id), token_of.get(eot_id)  # None: nothing there, in sample nor the export
    dtypes = stored_dtypes(checkpoint)
    family = FAMILIES[model.config.architecture]
    tensors = family.to_hf({name: t.to(dtypes[name]) for name, t in model_tensors(model).items()})
    names = {"bos_token": bos_token, "eos_token": eot_token, "pad_token": eot_token}
    template = checkpoint_template(checkpoint, tokenizer)
    chat = {**template.variables, "chat_template": template.source} if template is not None else {}
    files = {
        "config.json": hf_config(model.config, bos_id, eot_id, dtype_name(dtypes["embedding.weight"])),
        "generation_config.json": {"bos_token_id": bos_id, "eos_token_id": eot_id, "pad_token_id": eot_id},
        "tokenizer_config.json": {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "model_max_length": model.config.context_length,
            **{key: token for key, token in names.items() if token is not None},
            **chat,  # the names the template is rendered with, as the checkpoint renders it
        },
        "tokenizer.json": hf_tokenizer_json(tokenizer, bos_token),
    }
    write_export(out_dir, {"model.safetensors": tensors}, files)
    return out_dir


def export_peft(checkpoint: StrPath, out_dir: StrPath, overwrite: bool = False) -> Path:
    """Write the adapters of the LoRA run's `checkpoint` in peft's format into a new directory that
    replaces `out_dir` whole (the same rules as export_hf's). A checkpoint without adapters is refused."""
    out_dir = Path(out_dir)
    check_export_target(out_dir, checkpoint, overwrite)
    reader = CheckpointReader(checkpoint)
    lora = reader.lora
    if lora is None:
        raise InputError(
            f"--checkpoint {checkpoint}: holds no adapters (not a checkpoint of a `train --lora-rank` run); "
            "export it without --peft"
        )
    model = ModelConfig.from_dict(reader.config["model"], str(reader.directory / CONFIG_FILE))
    tensors, config = peft_files(model, FAMILIES[model.architecture], reader.adapters(), lora)
    write_export(out_dir, {"adapter_model.safetensors": tensors}, {"adapter_config.json": config})
    return out_dir


def check_export_target(out_dir: Path, checkpoint: StrPath, overwrite: bool) -> None:
    """Refuse an `out_dir` that is the checkpoint (or a LoRA run's base), holds it or lies inside it,
    and one that is not an earlier export as it was written unless `overwrite`."""
    check_output(out_dir, _is_export, "an earlier export", overwrite, directory=True, inputs=inputs_of(checkpoint))


def write_export(out_dir: Path, tensor_files: dict[str, dict], json_files: dict[str, Any]) -> None:
    """Write the safetensors files `tensor_files` (name -> tensors), the JSON files `json_files`
    (name -> content) and EXPORT_MARKER into a new directory that replaces `out_dir` whole."""
    with atomic_directory(out_dir) as tmp:
        for name, tensors in tensor_files.items():
            save_tensors(tensors, tmp / name, metadata={"format": "pt"})
        for name, content in json_files.items():
            (tmp / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        marker = {"format": EXPORT_FORMAT, "crc32": {path.name: file_crc32(path) for path in sorted(tmp.iterdir())}}
        (tmp / EXPORT_MARKER).write_text(json.dumps(marker, indent=2) + "\n")


def _is_export(directory):
    """Whether `directory` is an export as export_hf wrote it: its marker, and the files the marker
    lists, unchanged, and no other."""
    try:
        marker = read_json(directory / EXPORT_MARKER)
        crcs = marker["crc32"] if marker.get("format") == EXPORT_FORMAT else None
        return (
            isinstance(crcs, dict)
            and {p.name for p in directory.iterdir()} == {*crcs, EXPORT_MARKER}
            and all(file_crc32(regular_file(directory / name)) == crc for name, crc in crcs.items())
        )
    except (OSError, ValueError, AttributeError, KeyError, TypeError):  # unreadable or not a marker: not ours
        return False
