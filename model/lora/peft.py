"""A LoRA run's adapters in peft's format (adapter_config.json, adapter_model.safetensors), for the
Hugging Face export of the checkpoint they adapt: `PeftModel.from_pretrained(base, DIR)` computes
what the run's checkpoint computes, and its merge_and_unload() is the merged export. peft_files
makes the two files' contents; model/hf/export.py's export_peft writes them.

peft names an adapter after the Hugging Face module it adapts (`base_model.model.<module>.lora_A.weight`,
shaped as ours: A (r, in), B (out, r)). GPT-2 holds the queries, keys and values in one module
(c_attn), so their adapters become one: the A matrices stacked, the B matrices on the diagonal of a
larger B, of rank r times the number of them, its alpha scaled with it so that alpha / r stays.

The rows a run trained of the embedding and LM head (layer.py) are peft's trainable tokens
(`trainable_token_indices`): `<module>.token_adapter.trainable_tokens_delta`, the rows themselves
(not a difference, despite the name), which replace those of the module's weight. A tied head
follows the embedding's (peft ties them as transformers does), so they are given for the embedding
alone; a separate head's are given for each module by name.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import torch

from ..config import ModelConfig
from .config import LoraConfig
from .weights import ROWS

if TYPE_CHECKING:  # the Hugging Face names of a family's modules (model/hf/), given by the exporter
    from ..hf.family import Family

PREFIX = "base_model.model."  # where peft puts the model it wraps
_LAYER = re.compile(r"layers\.\d+\.")


def peft_files(
    model: ModelConfig, family: Family, adapters: dict[str, torch.Tensor], lora: LoraConfig
) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """(adapter_model.safetensors' tensors, adapter_config.json) of a LoRA run's `adapters` (by our
    state names; `lora`: their settings) on `model`, whose Hugging Face module names `family` gives."""
    tensors, ranks = _peft_tensors(family, adapters, lora)
    rows = {family.names[module].name: f"{module}.token_rows" for module in ROWS if f"{module}.token_rows" in adapters}
    for theirs, ours in rows.items():
        tensors[f"{PREFIX}{theirs}.token_adapter.trainable_tokens_delta"] = adapters[ours].float().contiguous()
    tokens = list(lora.tokens)
    config: dict[str, Any] = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "base_model_name_or_path": None,  # the Hugging Face export of the checkpoint named in the run's config.json
        "r": lora.rank,
        "lora_alpha": lora.alpha,
        "target_modules": sorted({module for module, _ in ranks}),
        "rank_pattern": {module: rank for module, rank in ranks if rank != lora.rank},
        "alpha_pattern": {module: lora.alpha * rank / lora.rank for module, rank in ranks if rank != lora.rank},
        "lora_dropout": 0.0,
        "bias": "none",
        "fan_in_fan_out": model.architecture == "gpt2",  # GPT-2's Conv1D holds its weights transposed
        "inference_mode": True,
        "init_lora_weights": True,
        "use_rslora": False,
        "use_dora": False,
        "modules_to_save": None,
    }
    if tokens:  # a key peft before trainable tokens does not know: only where there are rows
        config["trainable_token_indices"] = tokens if model.tie_embeddings else dict.fromkeys(rows, tokens)
    return tensors, config


def _peft_tensors(
    family: Family, adapters: dict[str, torch.Tensor], lora: LoraConfig
) -> tuple[dict[str, torch.Tensor], set[tuple[str, int]]]:
    """(peft's tensors, {(the module as target_modules names it, its rank)}) of our `adapters`."""
    parts: dict[str, dict[int | None, tuple[torch.Tensor, torch.Tensor]]] = {}
    targets: dict[str, str] = {}
    for name in adapters:
        if name.endswith(".lora_a"):
            module = name[: -len(".lora_a")]
            theirs, third, _ = family.locate(f"{module}.weight")
            parts.setdefault(theirs[: -len(".weight")], {})[third] = (adapters[name], adapters[f"{module}.lora_b"])
            # target_modules and rank_pattern match a module from the layer's number on (self_attn.q_proj;
            # GPT-2's c_proj is in attn and in mlp)
            targets[theirs[: -len(".weight")]] = family.names[_LAYER.sub("layers.{}.", module, 1)].name.split("{}.")[1]
    tensors, ranks = {}, set()
    for module, pieces in parts.items():
        a, b = pieces[None] if None in pieces else _fused(pieces)
        tensors[f"{PREFIX}{module}.lora_A.weight"] = a.float().contiguous()
        tensors[f"{PREFIX}{module}.lora_B.weight"] = b.float().contiguous()
        ranks.add((targets[module], a.shape[0]))
    return tensors, ranks


def _fused(pieces: dict[Any, tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """One adapter of a module holding three (GPT-2's c_attn) from those of its thirds."""
    thirds = sorted(pieces)
    width, rank = pieces[thirds[0]][1].shape
    a = torch.cat([pieces[t][0] for t in thirds])
    b = torch.zeros(3 * width, rank * len(thirds))
    for j, t in enumerate(thirds):
        b[t * width : (t + 1) * width, j * rank : (j + 1) * rank] = pieces[t][1]
    return a, b
