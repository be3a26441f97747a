"""LoRA (Hu et al., 2021): a frozen linear layer W plus a trained low-rank update, y = W x + (alpha / r) B A x,
with A (r, in) and B (out, r). B starts at zero, so training starts from the base model exactly.

The adapters live inside the projections they adapt (LoraLinear is an nn.Linear that keeps the base
weight and bias under their own names), so a model with adapters has the base model's state names
plus `<projection>.lora_a` and `<projection>.lora_b`. A checkpoint of a LoRA run holds those alone;
merging puts alpha / r * B A into W and gives back the plain model (weights.py).

A frozen embedding and LM head cannot learn a token the base never trained: its rows are where
training left them (a tied model's unseen tokens all collapse to one vector, so a new end-of-turn
token cannot be told from an unseen byte). So the rows of the run's chosen tokens train too, as
peft's trainable tokens: `embedding.token_rows` (and, for a separate head, `lm_head.token_rows`),
one row per token, which replace those rows of the frozen weight (a tied head shares them), and
merging writes them into it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from ..model import TransformerLM
from .config import LoraConfig


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


class TokenRowsEmbedding(nn.Module):
    """An embedding whose rows of `tokens` are token_rows (trained; they start as the frozen weight's)
    and the others the frozen weight's."""

    slots: torch.Tensor  # a buffer, declared for the type checker

    def __init__(self, base: nn.Embedding, tokens: Sequence[int]) -> None:
        super().__init__()
        self.weight = base.weight
        self.token_rows = nn.Parameter(base.weight[list(tokens)].detach().clone())
        slots = torch.full((base.weight.shape[0],), -1, dtype=torch.long, device=base.weight.device)
        slots[list(tokens)] = torch.arange(len(tokens), device=base.weight.device)
        self.register_buffer("slots", slots, persistent=False)  # id -> its row of token_rows, or -1

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        slot = self.slots[idx]
        trained = F.embedding(slot.clamp(min=0), self.token_rows)
        return torch.where((slot >= 0)[..., None], trained, F.embedding(idx, self.weight))


class TokenRowsHead(nn.Module):
    """An LM head whose logits of `tokens` come from `rows` (trained: its own, or the embedding's
    where the head is tied to it) and the others from the frozen weight."""

    tokens: torch.Tensor  # a buffer, declared for the type checker

    def __init__(self, base: nn.Linear, tokens: Sequence[int], rows: nn.Parameter | None) -> None:
        super().__init__()
        self.weight = base.weight
        self.token_rows = nn.Parameter(base.weight[list(tokens)].detach().clone()) if rows is None else rows
        self.register_buffer("tokens", torch.tensor(list(tokens), device=base.weight.device), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # the frozen head's logits with the tokens' own replaced: a product with n rows, not a copy of the head
        return F.linear(x, self.weight).index_copy_(-1, self.tokens, F.linear(x, self.token_rows))


def add_adapters(model: TransformerLM, lora: LoraConfig) -> None:
    """Freeze every weight of `model` and put an adapter on each target projection of each block,
    and trained rows of lora.tokens on the embedding and LM head, in place (drawn from torch's
    generator: seed it first for a repeatable start)."""
    model.requires_grad_(False)
    for block in model.layers:
        for part in (block.attention, block.ffn):
            for name in lora.targets:
                if isinstance(getattr(part, name, None), nn.Linear):
                    setattr(part, name, LoraLinear(getattr(part, name), lora.rank, lora.scale))
    if lora.tokens:
        embedding = TokenRowsEmbedding(model.embedding, lora.tokens)
        tied = embedding.token_rows if model.config.tie_embeddings else None
        model.lm_head = TokenRowsHead(model.lm_head, lora.tokens, tied)  # type: ignore[assignment]
        model.embedding = embedding  # type: ignore[assignment]
