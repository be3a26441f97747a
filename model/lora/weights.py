"""A LoRA model's tensors by state name: which are the adapters' (is_adapter, adapters_of), the trained
rows' starting values (initial_rows), and the base's weights with the adapters merged in (merged,
merge): what a checkpoint of a LoRA run holds, how a new run starts its rows, and what every reader
of such a checkpoint computes with."""

from __future__ import annotations

from collections.abc import Mapping

import torch

from gptkit.shared.files import StrPath

from ..tensor_checks import check_finite
from .config import LoraConfig

ADAPTER_SUFFIXES = (".lora_a", ".lora_b", ".token_rows")
ROWS = ("embedding", "lm_head")  # the modules whose rows of the chosen tokens train (layer.py)


def is_adapter(name: str) -> bool:
    """Whether a state name is an adapter's."""
    return name.endswith(ADAPTER_SUFFIXES)


def adapters_of(tensors: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The adapters' tensors among a model's `tensors` (by state name): what a LoRA run's checkpoint holds."""
    return {name: t for name, t in tensors.items() if is_adapter(name)}


def initial_rows(tensors: Mapping[str, torch.Tensor], lora: LoraConfig) -> dict[str, torch.Tensor]:
    """The trained rows' starting values: the rows of lora.tokens of the embedding and LM head in
    `tensors` (a model's weights by state name; a tied head is the embedding, absent)."""
    if not lora.tokens:
        return {}
    ids = torch.tensor(lora.tokens, dtype=torch.long)
    return {
        f"{module}.token_rows": tensors[f"{module}.weight"][ids] for module in ROWS if f"{module}.weight" in tensors
    }


def merged(tensors: Mapping[str, torch.Tensor], lora: LoraConfig) -> dict[str, torch.Tensor]:
    """The base tensors of `tensors` (base weights and adapters, by state name) with each adapter's
    update added to its weight, in float32 (where a bf16 weight would round the update away), and
    the trained rows in place of their tokens' rows of the embedding and head."""
    out = {name: t for name, t in tensors.items() if not is_adapter(name)}
    for name in tensors:
        if name.endswith(".lora_a"):
            module = name[: -len(".lora_a")]
            weight = out[f"{module}.weight"]
            delta = tensors[f"{module}.lora_b"].float() @ tensors[name].float() * lora.scale
            out[f"{module}.weight"] = weight.float() + delta
    ids = torch.tensor(lora.tokens, dtype=torch.long)
    for module in ROWS:
        if f"{module}.token_rows" in tensors:  # a tied head's are the embedding's
            rows = tensors[f"{module}.token_rows"].float()
            out[f"{module}.weight"] = out[f"{module}.weight"].float().index_copy(0, ids, rows)
    return out


def merge(
    base: Mapping[str, torch.Tensor], adapters: Mapping[str, torch.Tensor], lora: LoraConfig, path: StrPath
) -> dict[str, torch.Tensor]:
    """The `base` weights with `adapters` merged in (merged), each weight an adapter changed checked
    finite: finite adapters can still overflow float32 once merged into their weights (a
    CheckpointError naming `path`, the adapters' file)."""
    tensors = merged({**base, **adapters}, lora)
    adapted = [name.removesuffix(".lora_a") + ".weight" for name in adapters if name.endswith(".lora_a")]
    check_finite({name: tensors[name] for name in adapted}, path)
    return tensors
