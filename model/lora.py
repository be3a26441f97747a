"""LoRA (Hu et al., 2021): a frozen linear layer W plus a trained low-rank update, y = W x + (alpha / r) B A x,
with A (r, in) and B (out, r). B starts at zero, so training starts from the base model exactly.

The adapters live inside the projections they adapt (LoraLinear is an nn.Linear that keeps the base
weight and bias under their own names), so a model with adapters has the base model's state names
plus `<projection>.lora_a` and `<projection>.lora_b`. A checkpoint of a LoRA run holds those alone
(model/checkpoint.py); merging puts alpha / r * B A into W and gives back the plain model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from .config import LoraConfig
from .model import TransformerLM

ADAPTER_SUFFIXES = (".lora_a", ".lora_b")


class LoraLinear(nn.Linear):
    """A linear layer with its base weight and bias (frozen by add_adapters) and an adapter: the
    output is the base's plus scale * B A x."""

    def __init__(self, base: nn.Linear, rank: int, scale: float) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features, self.scale = base.in_features, base.out_features, scale
        self.weight, self.bias = base.weight, base.bias
        device = base.weight.device
        self.lora_a = nn.Parameter(torch.empty(rank, self.in_features, device=device))
        self.lora_b = nn.Parameter(torch.zeros(self.out_features, rank, device=device))
        nn.init.kaiming_uniform_(self.lora_a, a=math.sqrt(5))  # as nn.Linear's init, and peft's

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x) + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale


def add_adapters(model: TransformerLM, lora: LoraConfig) -> None:
    """Freeze every weight of `model` and put an adapter on each target projection of each block,
    in place (drawn from torch's generator: seed it first for a repeatable start)."""
    model.requires_grad_(False)
    for block in model.layers:
        for part in (block.attention, block.ffn):
            for name in lora.targets:
                if isinstance(getattr(part, name, None), nn.Linear):
                    setattr(part, name, LoraLinear(getattr(part, name), lora.rank, lora.scale))


def is_adapter(name: str) -> bool:
    """Whether a state name is an adapter's."""
    return name.endswith(ADAPTER_SUFFIXES)


def merged(tensors: Mapping[str, torch.Tensor], lora: LoraConfig) -> dict[str, torch.Tensor]:
    """The base tensors of `tensors` (base weights and adapters, by state name) with each adapter's
    update added to its weight, in float32 (where a bf16 weight would round the update away)."""
    out = {name: t for name, t in tensors.items() if not is_adapter(name)}
    for name in tensors:
        if name.endswith(".lora_a"):
            module = name[: -len(".lora_a")]
            weight = out[f"{module}.weight"]
            delta = tensors[f"{module}.lora_b"].float() @ tensors[name].float() * lora.scale
            out[f"{module}.weight"] = weight.float() + delta
    return out
