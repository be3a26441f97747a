"""A decoder-only transformer in two architectures (ModelConfig.architecture), in the spirit of
nanoGPT's model.py.

"llama" (the default), Llama's:

    tokens -> embedding -> N x [x + Attention(RMSNorm(x)); x + SwiGLU(RMSNorm(x))] -> RMSNorm -> LM head

Attention is causal multi-head self-attention with rotary position embeddings (RoPE, in the
"rotate half" layout of Hugging Face's Llama, so weights export without permutation; optionally
with Llama 3's frequency scaling), optional grouped-query attention (fewer key/value heads),
QK-norm (Qwen3), a head size of its own (Qwen3) and biases on the query, key and value
projections (Qwen2). No other biases.

"gpt2", GPT-2's (GPT2LMHeadModel, nanoGPT):

    tokens -> embedding + learned position embedding
           -> N x [x + Attention(LayerNorm(x)); x + MLP(LayerNorm(x))] -> LayerNorm -> LM head

with LayerNorms that have a bias, an MLP W2(GELU(W1 x)) (GELU's tanh approximation, HF's
"gelu_new"), and a bias on every linear layer but the LM head.

Dropout (ModelConfig.dropout, 0 by default), in training only, where nanoGPT puts it: on the
embeddings and the output of each residual branch, and on the attention weights
(ModelConfig.attention_dropout, the same by default).

Initialization: every weight matrix and embedding ~ N(0, init_std) (0.02 by default),
except the two projections that write into the residual stream (attention output and
feed-forward down projection), which get init_std / sqrt(2 * n_layers) as in GPT-2, so the
residual stream's variance does not grow with depth. Norm gains start at 1, biases at 0.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from .config import ModelConfig

LOSS_BLOCK_LOGITS = 1 << 24  # logits per block in token_losses: 64 MB in float32


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # In float32, whatever the activations' dtype, as Llama does.
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(
    head_dim: int, length: int, theta: float, scaling: dict | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and sin of position * frequency, each (length, head_dim), for `apply_rope`. Computed in
    float64, rounded to float32 once."""
    angles = torch.outer(torch.arange(length, dtype=torch.float64), rope_frequencies(head_dim, theta, scaling))
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def rope_frequencies(head_dim: int, theta: float, scaling: dict | None = None) -> torch.Tensor:
    """The inverse frequency of each pair of a head, theta^(-2i/d); with Llama 3's `scaling`
    (ModelConfig.rope_scaling) rescaled as transformers' `_compute_llama3_parameters` does: the
    frequencies whose wavelength is longer than original_max_position_embeddings / low_freq_factor
    are divided by `factor`, those shorter than original_max_position_embeddings / high_freq_factor
    kept, and those between interpolated smoothly from one to the other."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    if scaling is None:
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    original = scaling["original_max_position_embeddings"]
    wavelength = 2 * math.pi / inv_freq
    smooth = (original / wavelength - low) / (high - low)
    between = (1 - smooth) * inv_freq / factor + smooth * inv_freq
    return torch.where(
        wavelength < original / high, inv_freq, torch.where(wavelength > original / low, inv_freq / factor, between)
    )


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate each pair (x[i], x[i + d/2]) of every head by its position's angle; x is (B, H, T, d)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated * sin).type_as(x)


class KVCache:
    """The keys and values of every layer for the tokens seen so far (incremental decoding), room
    for `capacity` positions (None: the whole context). A generation needs its prompt's and new
    tokens' positions alone: a model imported with a long context (Llama 3's 131,072) would
    otherwise hold gigabytes of cache it never fills.

    Made at the first write, on the keys' device and in the dtype attention computes in: the
    autocast dtype where autocast is on (its attention casts to it), else the keys' own (bf16
    under FSDP's mixed precision). A float32 cache beside bf16 queries fails in attention.

    Inside `at(position)` a step of one token takes its position from `position`, a tensor on the
    cache's device: (1,) for the whole batch, or (B,) a position per row (rows at different
    lengths: a server's batch of requests, serve/batching.py). It attends over the whole capacity
    with the positions after it masked: the step has the same shapes, addresses and kernels at
    every position, so a CUDA graph captured once replays it anywhere (generate.py), and a row's
    result does not depend on the other rows. `at(position, span)` attends over the first `span`
    positions alone (the longest row's): less work, at shapes that change with the rows' lengths.
    `length` is then the caller's to advance. `rows(first, last, length)` is some of the rows as a
    cache of their own, in the same memory: a server's step computes the rows in use alone."""

    def __init__(self, config: ModelConfig, batch_size: int, capacity: int | None = None) -> None:
        capacity = config.context_length if capacity is None else min(capacity, config.context_length)
        self.shape = (config.n_layers, batch_size, config.n_kv_heads, capacity, config.head_dim)
        self.keys: torch.Tensor | None = None
        self.values: torch.Tensor | None = None
        self.length = 0  # positions filled
        self.position: torch.Tensor | None = None  # inside at(): the step's position
        self.span = self.capacity  # inside at(): the positions it attends over, the first `span`
        self.visible: torch.Tensor | None = None  # inside at(): the positions it sees

    @property
    def capacity(self) -> int:
        """The positions it has room for."""
        return self.shape[3]

    def write(self, layer: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Store a layer's `k` and `v` (B, n_kv_heads, T, head_dim) after the `length` positions
        filled; the layer's keys and values of every position up to them."""
        if self.keys is None or self.values is None:  # both or neither
            kind = k.device.type
            dtype = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else k.dtype
            self.keys = torch.zeros(self.shape, device=k.device, dtype=dtype)
            self.values = torch.zeros(self.shape, device=k.device, dtype=dtype)
        if self.position is not None:
            if len(self.position) == 1:
                self.keys[layer].index_copy_(2, self.position, k)
                self.values[layer].index_copy_(2, self.position, v)
            else:  # a position per row
                rows = torch.arange(k.shape[0], device=k.device)
                self.keys[layer][rows, :, self.position] = k[:, :, 0]
                self.values[layer][rows, :, self.position] = v[:, :, 0]
            return self.keys[layer, :, :, : self.span], self.values[layer, :, :, : self.span]
        end = self.length + k.shape[2]
        self.keys[layer, :, :, self.length : end] = k
        self.values[layer, :, :, self.length : end] = v
        return self.keys[layer, :, :, :end], self.values[layer, :, :, :end]

    @contextlib.contextmanager
    def at(self, position: torch.Tensor, span: int | None = None) -> Iterator[KVCache]:
        """One-token steps at `position` (a (1,) or (B,) long tensor on the cache's device) inside,
        attending over the first `span` positions (None: the whole capacity), which must hold them."""
        self.position, self.span = position, self.capacity if span is None else span
        try:
            yield self
        finally:
            self.position, self.span, self.visible = None, self.capacity, None

    def rows(self, first: int, last: int, length: int) -> KVCache:
        """Rows `first` to `last` - 1 as a cache of their own with `length` positions filled,
        sharing this one's memory: what a step writes into it is written here."""
        assert self.keys is not None and self.values is not None, "rows() follows a write"
        view = copy.copy(self)
        view.shape = (self.shape[0], last - first, *self.shape[2:])
        view.keys, view.values, view.length = self.keys[:, first:last], self.values[:, first:last], length
        return view

    def put(self, row: int, other: KVCache) -> None:
        """Copy the positions that `other`, a batch of one, holds into row `row` (a request joining
        a server's batch after its prefill, serve/batching.py); the row's later positions stay
        what they were, masked by `at`."""
        assert other.keys is not None and other.values is not None, "put() follows the other's prefill"
        if self.keys is None or self.values is None:
            self.keys = torch.zeros(self.shape, device=other.keys.device, dtype=other.keys.dtype)
            self.values = torch.zeros(self.shape, device=other.keys.device, dtype=other.keys.dtype)
        self.keys[:, row, :, : other.length] = other.keys[:, 0, :, : other.length]
        self.values[:, row, :, : other.length] = other.values[:, 0, :, : other.length]

    def fill(self, other: KVCache) -> None:
        """Copy the positions that `other`, a batch of one, holds into every row, in place: many
        samples share one prompt's prefill (generate.py), and a cache kept for the next generation
        keeps its addresses. Its later positions stay what they were, masked or never read."""
        assert other.keys is not None and other.values is not None, "fill() follows the other's prefill"
        if self.keys is None or self.values is None:
            self.keys = torch.zeros(self.shape, device=other.keys.device, dtype=other.keys.dtype)
            self.values = torch.zeros(self.shape, device=other.keys.device, dtype=other.keys.dtype)
        self.keys[:, :, :, : other.length] = other.keys[:, :1, :, : other.length]
        self.values[:, :, :, : other.length] = other.values[:, :1, :, : other.length]
        self.length = other.length


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.layer, self.n_heads, self.n_kv_heads, self.head_dim = (
            layer,
            config.n_heads,
            config.n_kv_heads,
            config.head_dim,
        )
        self.dropout, self.attention_dropout = config.dropout, config.attention_dropout
        gpt2 = config.architecture == "gpt2"
        qkv_bias = config.qkv_bias or gpt2
        self.wq = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=qkv_bias)
        self.wk = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=qkv_bias)
        self.wv = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=qkv_bias)
        self.wo = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=gpt2)
        self.q_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        """`cos`, `sin`: RoPE's tables at the positions of x (None: no RoPE, GPT-2's learned positions)."""
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None and self.k_norm is not None:  # both or neither
            q, k = self.q_norm(q), self.k_norm(k)
        if cos is not None and sin is not None:  # both or neither
            q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        mask: torch.Tensor | None = None
        causal = True
        if cache is not None:
            start = cache.length
            k, v = cache.write(self.layer, k, v)
            if cache.position is not None:  # one token, its position on the device (inside cache.at)
                mask, causal = cache.visible, False
            elif start > 0:  # new queries see every cached position and the new ones up to their own
                causal = False
                if T > 1:
                    mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(start)
        y = F.scaled_dot_product_attention(
            q,
            k,
            v,
            attn_mask=mask,
            is_causal=causal and T > 1,
            dropout_p=self.attention_dropout if self.training else 0.0,
            enable_gqa=self.n_kv_heads != self.n_heads,
        )
        return F.dropout(self.wo(y.transpose(1, 2).reshape(B, T, -1)), self.dropout, self.training)


class FeedForward(nn.Module):
    """SwiGLU: W2(SiLU(W1 x) * W3 x)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.w3 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.w2 = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class MLP(nn.Module):
    """GPT-2's feed-forward: W2(GELU(W1 x)), biases included, GELU's tanh approximation."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.w1 = nn.Linear(config.d_model, config.d_ff)
        self.w2 = nn.Linear(config.d_ff, config.d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


def norm(config: ModelConfig, dim: int) -> nn.Module:
    """The architecture's normalization: GPT-2's LayerNorm (with a bias), or Llama's RMSNorm."""
    return nn.LayerNorm(dim, eps=config.norm_eps) if config.architecture == "gpt2" else RMSNorm(dim, config.norm_eps)


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int) -> None:
        super().__init__()
        self.attention_norm = norm(config, config.d_model)
        self.attention = Attention(config, layer)
        self.ffn_norm = norm(config, config.d_model)
        self.ffn = MLP(config) if config.architecture == "gpt2" else FeedForward(config)
        self.dropout = config.dropout
        # Training with gradients keeps the block's input alone and recomputes the rest of its
        # activations in the backward pass (the trainer's --activation-checkpointing). Inside the
        # block, within FSDP's hooks on it, so that torch.compile traces the recomputation with
        # the block; around the block, the hooks inside the checkpoint make dynamo run it eager.
        self.activation_checkpointing = False

    def forward(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        if self.activation_checkpointing and cache is None and torch.is_grad_enabled():
            return checkpoint(self.residual, x, cos, sin, use_reentrant=False)
        return self.residual(x, cos, sin, cache)

    def residual(
        self, x: torch.Tensor, cos: torch.Tensor | None, sin: torch.Tensor | None, cache: KVCache | None = None
    ) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin, cache)
        return x + F.dropout(self.ffn(self.ffn_norm(x)), self.dropout, self.training)


class TransformerLM(nn.Module):
    # RoPE's tables (llama only), registered as buffers: declared for the type checker, which reads a
    # module's attributes as parameters, buffers or modules alike.
    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        gpt2 = config.architecture == "gpt2"
        self.position_embedding = nn.Embedding(config.context_length, config.d_model) if gpt2 else None
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = norm(config, config.d_model)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embedding.weight
        if not gpt2:
            cos, sin = rope_tables(config.head_dim, config.context_length, config.rope_theta, config.rope_scaling)
            self.register_buffer("rope_cos", cos, persistent=False)
            self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.n_layers)
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 1:
                nn.init.ones_(p)  # norm gains
            else:
                nn.init.normal_(p, 0.0, residual_std if name.endswith(("wo.weight", "w2.weight")) else std)

    def num_params(self, embedding: bool = True) -> int:
        """Parameters (tied weights counted once); with embedding=False, without the token and
        position embeddings, which are lookups (the LM head still counts unless it is the embedding)."""
        total = sum(p.numel() for p in self.parameters())
        if embedding:
            return total
        lookups = [self.embedding] + ([self.position_embedding] if self.position_embedding is not None else [])
        return total - sum(m.weight.numel() for m in lookups)

    def forward(
        self,
        idx: torch.Tensor,
        targets: torch.Tensor | None = None,
        cache: KVCache | None = None,
        last_only: bool = False,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Logits (B, T, vocab) for token ids `idx` (B, T), and with `targets` (B, T; -1 ignored)
        the mean cross-entropy in float32. With a `cache`, `idx` continues the cached tokens.
        `last_only`: the logits of the last position alone (B, 1, vocab), all that decoding needs."""
        x = self.hidden(idx, cache)
        logits = self.lm_head(x[:, -1:] if last_only else x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def hidden(self, idx: torch.Tensor, cache: KVCache | None = None) -> torch.Tensor:
        """The final normalized hidden states (B, T, d_model): what the LM head reads."""
        T = idx.shape[1]
        stepping = cache is not None and cache.position is not None  # inside cache.at(position)
        positions: torch.Tensor | slice
        if stepping:
            assert cache is not None and cache.position is not None  # what `stepping` says
            if T != 1:
                raise ValueError(f"{T} tokens in a step at a position on the device; it takes one")
            positions = cache.position
            # Made in the step, from the positions' values then: a captured step reads them each replay.
            visible = torch.arange(cache.span, device=idx.device)[None] <= positions[:, None]
            cache.visible = visible[:, None, None]  # (1 or B, 1, 1, span): over heads and the query
        else:
            start = cache.length if cache is not None else 0
            if start + T > self.config.context_length:
                raise ValueError(f"{start + T} positions, more than the context length {self.config.context_length}")
            if cache is not None and start + T > cache.capacity:
                raise ValueError(f"{start + T} positions, more than the {cache.capacity} the cache holds")
            positions = slice(start, start + T)
        x = self.embedding(idx)
        if self.position_embedding is not None:
            x = x + (
                self.position_embedding(positions)[:, None]
                if stepping
                else self.position_embedding(torch.arange(start, start + T, device=idx.device))
            )
            cos = sin = None
        elif stepping:  # (1 or B, 1, 1, head_dim): a row's angles over its heads
            cos, sin = self.rope_cos[positions][:, None, None], self.rope_sin[positions][:, None, None]
        else:
            cos, sin = self.rope_cos[positions], self.rope_sin[positions]
        x = F.dropout(x, self.config.dropout, self.training)
        for layer in self.layers:
            x = layer(x, cos, sin, cache)
        if cache is not None and not stepping:
            cache.length += T
        return self.norm(x)

    @torch.no_grad()
    def token_losses(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """The cross-entropy of every position (B, T) in float32, without gradients. The logits are
        made a block of rows at a time, so neither they nor their float32 copy exist whole: for
        GPT-2's vocabulary and a batch of 32 x 1024 that would be 10 GB."""
        x = self.hidden(idx).flatten(0, 1)
        flat_targets = targets.reshape(-1)
        losses = torch.empty(flat_targets.shape, dtype=torch.float32, device=x.device)
        rows = max(1, LOSS_BLOCK_LOGITS // self.config.vocab_size)
        for i in range(0, len(x), rows):
            logits = self.lm_head(x[i : i + rows]).float()
            losses[i : i + rows] = F.cross_entropy(
                logits, flat_targets[i : i + rows], ignore_index=-1, reduction="none"
            )
        return losses.view(targets.shape)
