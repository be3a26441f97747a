"""The import: a Hugging Face model directory as a checkpoint, exactly or not at all.

It refuses in one line, naming the file and the field, anything that would compute otherwise
here: another architecture, a binding sliding window, a RoPE scaling other than Llama 3's,
mixture-of-experts fields, another activation, quantized weights, missing, extra or non-finite
tensors, a tokenizer that gptkit's reader cannot encode exactly (tokenizer/files.py:
SentencePiece-style ones, Llama 2's, Mistral's, are refused there).

Imported weights keep their dtype in the checkpoint's file (bf16 stays bf16); load_model widens
them to float32. Embedding and LM head rows beyond the tokenizer's vocabulary (Qwen pads it to a
multiple of 128) are dropped, with a note: a checkpoint's vocabulary is its tokenizer's.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import torch

from gptkit.shared.errors import InputError
from gptkit.shared.files import Input, StrPath
from gptkit.tokenizer import Tokenizer

from ..checkpoint import check_target, model_tensors, save_model
from ..config import ModelConfig
from ..model import TransformerLM
from ..tensor_checks import check_finite, check_tensors
from .chat import CHECKPOINT_FILES, checkpoint_files, read_chat_template
from .families import ARCHITECTURES, FAMILY_OF
from .files import HFConfig, count_tensors, dtype_name, read_json_object, read_weights, weight_files
from .framing import read_framing, read_tokenizer

# Fields of other models' configs that would make these compute something else than they do here.
MOE_FIELDS = ("num_experts", "num_local_experts", "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")


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


def import_hf(hf_dir: StrPath, out: StrPath, overwrite: bool = False) -> Imported:
    """Write the checkpoint `out` of the Hugging Face model directory `hf_dir` (config.json,
    model.safetensors or a sharded model.safetensors.index.json, tokenizer.json or GPT-2's
    vocab.json and merges.txt), or refuse it in one line before writing anything (see the module's
    docstring). An existing `out` that is not a checkpoint of a model alone is refused unless
    `overwrite`; `hf_dir` itself, a directory holding it and one inside it, always."""
    hf_dir = Path(hf_dir)
    what = "a checkpoint of a model alone (without training state)"
    check_target(out, overwrite, CHECKPOINT_FILES, what, [Input.given("from", hf_dir)])
    config_path = hf_dir / "config.json"
    data = read_json_object(config_path)
    architecture = _architecture(config_path, data)
    family = FAMILY_OF[architecture]
    hf = HFConfig(config_path, data, ARCHITECTURES[architecture][1])
    config = family.model_config(hf, architecture)
    tokenizer, post_processor = read_tokenizer(hf_dir, family.vocab_files)
    notes = []
    if tokenizer.vocab_size > config.vocab_size:
        raise InputError(
            f"{hf_dir}: the tokenizer has {tokenizer.vocab_size:,} tokens, more than config.json's "
            f"vocab_size {config.vocab_size:,}; expected at most as many"
        )
    source, files = weight_files(hf_dir, data)
    stored = count_tensors(source, files)
    if config.n_layers > stored:  # told by the headers before anything is built: 2**40 layers would be built for ever
        raise InputError(
            f"{config_path}: {family.config_names['n_layers']} {config.n_layers:,} is more layers than "
            f"{source.name} has tensors ({stored:,}); expected the layers of the weights"
        )
    with torch.device("meta"):  # the expected names and shapes, without memory
        ours = model_tensors(TransformerLM(config))
    tensors = family.from_hf(_read_weights(family, config, source, files, family.to_hf(ours)), ours)
    if tokenizer.vocab_size < config.vocab_size:
        # Rows no token uses (Qwen pads its vocabulary to a multiple of 128): dropped, so the
        # checkpoint's vocabulary is its tokenizer's, as every stage expects.
        notes.append(
            f"config.json's vocab_size is {config.vocab_size:,}, the tokenizer's {tokenizer.vocab_size:,}: the "
            f"{config.vocab_size - tokenizer.vocab_size:,} embedding and LM head rows no token uses are dropped"
        )
        for name in ("embedding.weight", "lm_head.weight"):
            if name in tensors:
                tensors[name] = tensors[name][: tokenizer.vocab_size]
        config = dataclasses.replace(config, vocab_size=tokenizer.vocab_size)
    bos_id, eot_id = read_framing(hf_dir, data, tokenizer, post_processor, family.bos_token_starts, notes)
    template, names = read_chat_template(hf_dir, notes)
    with torch.device("meta"):
        model = TransformerLM(config)
    model.load_state_dict(tensors, strict=False, assign=True)  # the tensors themselves, in their dtype
    save_model(
        model,
        tokenizer,
        out,
        eot_id=eot_id,
        bos_id=bos_id,
        overwrite=overwrite,
        extra_files=checkpoint_files(template, names),
    )
    return Imported(
        architecture,
        config,
        sorted({dtype_name(t.dtype) for t in tensors.values()}),
        tokenizer,
        bos_id,
        eot_id,
        template is not None,
        notes,
    )


def _architecture(path, data):
    names = data.get("architectures")
    if not (isinstance(names, list) and len(names) == 1 and names[0] in ARCHITECTURES):
        raise InputError(
            f"{path}: architectures {json.dumps(names)} is not supported; expected one of {', '.join(ARCHITECTURES)}"
        )
    model_type = ARCHITECTURES[names[0]][0]
    if data.get("model_type") != model_type:
        raise InputError(
            f"{path}: model_type {json.dumps(data.get('model_type'))} does not match architectures "
            f"{names[0]}; expected {json.dumps(model_type)}"
        )
    for field in MOE_FIELDS:
        if data.get(field):
            raise InputError(
                f"{path}: {field} {json.dumps(data[field])} is not supported (mixture of experts); expected "
                "no such field"
            )
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
            raise InputError(
                f"{file_of['lm_head.weight']}: lm_head.weight differs from {embedding}, but config.json's "
                "tie_word_embeddings is true"
            )
        del tensors["lm_head.weight"]
    check_tensors(tensors, expected, source, file_of)
    check_finite(tensors, source, file_of)
    return tensors
