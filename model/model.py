"""A Llama-style decoder-only transformer.

    tokens -> embedding -> N x [x + Attention(RMSNorm(x)); x + SwiGLU(RMSNorm(x))] -> RMSNorm -> LM head

Attention is causal multi-head self-attention with rotary position embeddings (RoPE, in the
"rotate half" layout of Hugging Face's Llama, so weights export without permutation),
optional grouped-query attention (fewer key/value heads) and optional QK-norm. No biases.

Initialization: every weight matrix and the embedding ~ N(0, init_std) (0.02 by default),
except the two projections that write into the residual stream (attention output and
feed-forward down projection), which get init_std / sqrt(2 * n_layers) as in GPT-2, so the
residual stream's variance does not grow with depth. Norm gains start at 1.
"""
from __future__ import annotations

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

from .config import ModelConfig

LOSS_BLOCK_LOGITS = 1 << 24  # logits per block in token_losses: 64 MB in float32


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        # In float32, whatever the activations' dtype, as Llama does.
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rope_tables(head_dim, length, theta):
    """cos and sin of position * frequency, each (length, head_dim), for `apply_rope`."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)
    angles = torch.outer(torch.arange(length, dtype=torch.float64), inv_freq)
    angles = torch.cat([angles, angles], dim=-1)
    return angles.cos().float(), angles.sin().float()


def apply_rope(x, cos, sin):
    """Rotate each pair (x[i], x[i + d/2]) of every head by its position's angle; x is (B, H, T, d)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return (x * cos + rotated * sin).type_as(x)


class KVCache:
    """The keys and values of every layer for the tokens seen so far (incremental decoding)."""

    def __init__(self, config: ModelConfig, batch_size, device=None, dtype=torch.float32):
        shape = (config.n_layers, batch_size, config.n_kv_heads, config.context_length, config.head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0  # positions filled

    def expand(self, batch_size):
        """The cache of a batch of one, repeated: many samples share one prompt's prefill."""
        self.keys = self.keys.expand(-1, batch_size, -1, -1, -1).contiguous()
        self.values = self.values.expand(-1, batch_size, -1, -1, -1).contiguous()
        return self


class Attention(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.layer, self.n_heads, self.n_kv_heads, self.head_dim = layer, config.n_heads, config.n_kv_heads, config.head_dim
        self.wq = nn.Linear(config.d_model, config.n_heads * config.head_dim, bias=False)
        self.wk = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.wv = nn.Linear(config.d_model, config.n_kv_heads * config.head_dim, bias=False)
        self.wo = nn.Linear(config.n_heads * config.head_dim, config.d_model, bias=False)
        self.q_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None
        self.k_norm = RMSNorm(config.head_dim, config.norm_eps) if config.qk_norm else None

    def forward(self, x, cos, sin, cache=None):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(B, T, self.n_kv_heads, self.head_dim).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        mask, causal = None, True
        if cache is not None:
            start = cache.length
            cache.keys[self.layer, :, :, start : start + T] = k
            cache.values[self.layer, :, :, start : start + T] = v
            k, v = cache.keys[self.layer, :, :, : start + T], cache.values[self.layer, :, :, : start + T]
            if start > 0:  # new queries see every cached position and the new ones up to their own
                causal = False
                if T > 1:
                    mask = torch.ones(T, start + T, dtype=torch.bool, device=x.device).tril(start)
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and T > 1,
                                           enable_gqa=self.n_kv_heads != self.n_heads)
        return self.wo(y.transpose(1, 2).reshape(B, T, -1))


class FeedForward(nn.Module):
    """SwiGLU: W2(SiLU(W1 x) * W3 x)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        self.w1 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.w3 = nn.Linear(config.d_model, config.d_ff, bias=False)
        self.w2 = nn.Linear(config.d_ff, config.d_model, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.attention_norm = RMSNorm(config.d_model, config.norm_eps)
        self.attention = Attention(config, layer)
        self.ffn_norm = RMSNorm(config.d_model, config.norm_eps)
        self.ffn = FeedForward(config)

    def forward(self, x, cos, sin, cache=None):
        x = x + self.attention(self.attention_norm(x), cos, sin, cache)
        return x + self.ffn(self.ffn_norm(x))


class TransformerLM(nn.Module):
    def __init__(self, config: ModelConfig):
        super().__init__()
        self.config = config
        self.embedding = nn.Embedding(config.vocab_size, config.d_model)
        self.layers = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm = RMSNorm(config.d_model, config.norm_eps)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.embedding.weight
        cos, sin = rope_tables(config.head_dim, config.context_length, config.rope_theta)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        self.reset_parameters()

    def reset_parameters(self):
        std = self.config.init_std
        residual_std = std / math.sqrt(2 * self.config.n_layers)
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)  # norm gains
            else:
                nn.init.normal_(p, 0.0, residual_std if name.endswith(("wo.weight", "w2.weight")) else std)

    def num_params(self, embedding=True):
        """Parameters (tied weights counted once); without the token embedding if embedding=False
        (the LM head still counts unless it is the embedding)."""
        total = sum(p.numel() for p in self.parameters())
        return total if embedding else total - self.embedding.weight.numel()

    def forward(self, idx, targets=None, cache: KVCache | None = None, last_only=False):
        """Logits (B, T, vocab) for token ids `idx` (B, T), and with `targets` (B, T; -1 ignored)
        the mean cross-entropy in float32. With a `cache`, `idx` continues the cached tokens.
        `last_only`: the logits of the last position alone (B, 1, vocab), all that decoding needs."""
        x = self.hidden(idx, cache)
        logits = self.lm_head(x[:, -1:] if last_only else x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1), ignore_index=-1)
        return logits, loss

    def hidden(self, idx, cache: KVCache | None = None):
        """The final normalized hidden states (B, T, d_model): what the LM head reads."""
        T = idx.shape[1]
        start = cache.length if cache is not None else 0
        if start + T > self.config.context_length:
            raise ValueError(f"{start + T} positions, more than the context length {self.config.context_length}")
        cos, sin = self.rope_cos[start : start + T], self.rope_sin[start : start + T]
        x = self.embedding(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, cache)
        if cache is not None:
            cache.length += T
        return self.norm(x)

    @torch.no_grad()
    def token_losses(self, idx, targets):
        """The cross-entropy of every position (B, T) in float32, without gradients. The logits are
        made a block of rows at a time, so neither they nor their float32 copy exist whole: for
        GPT-2's vocabulary and a batch of 32 x 1024 that would be 10 GB."""
        x = self.hidden(idx).flatten(0, 1)
        flat_targets = targets.reshape(-1)
        losses = torch.empty(flat_targets.shape, dtype=torch.float32, device=x.device)
        rows = max(1, LOSS_BLOCK_LOGITS // self.config.vocab_size)
        for i in range(0, len(x), rows):
            logits = self.lm_head(x[i : i + rows]).float()
            losses[i : i + rows] = F.cross_entropy(logits, flat_targets[i : i + rows], ignore_index=-1, reduction="none")
        return losses.view(targets.shape)
