"""What a model costs: parameters, training FLOPs per token, training memory."""
from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


@dataclass
class ModelCost:
    params: int  # tied weights counted once
    non_embedding_params: int  # without the token embedding (a tied LM head is the embedding: not counted)
    matmul_params: int  # weights used in a matrix product per token: everything but the embedding lookup
    flops_per_token: int  # training (forward + backward)

    @property
    def attention_flops_per_token(self):
        return self.flops_per_token - 6 * self.matmul_params


def model_cost(config: ModelConfig) -> ModelCost:
    """Counts in closed form from the shape model.py builds (tests/test_model.py checks them against
    built models), so that `gptkit model info` answers without importing torch.

    Training FLOPs per token follow PaLM's accounting (as nanoGPT's MFU does): 6 per matmul
    weight (2 forward, 4 backward) plus 12 * layers * d_model * context for the attention
    scores and the weighted values.
    """
    d, q_width, kv_width = config.d_model, config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    attention = 2 * d * q_width + 2 * d * kv_width  # wq and wo; wk and wv
    qk_norms = 2 * config.head_dim if config.qk_norm else 0
    feed_forward = 3 * d * config.d_ff  # SwiGLU: w1, w3, w2
    layer = 2 * d + attention + qk_norms + feed_forward  # with its two RMSNorm gains
    embedding = config.vocab_size * d
    lm_head = 0 if config.tie_embeddings else embedding  # a tied head is the embedding
    non_embedding = config.n_layers * layer + d + lm_head  # d: the final RMSNorm
    # The token embedding is a lookup, no matmul, unless it is also the LM head.
    matmul = non_embedding + (embedding if config.tie_embeddings else 0)
    attention_scores = 12 * config.n_layers * config.d_model * config.context_length
    return ModelCost(embedding + non_embedding, non_embedding, matmul, 6 * matmul + attention_scores)


def training_memory(config: ModelConfig, batch_size: int, activation_bytes: int) -> dict:
    """Bytes of weights, gradients, AdamW state and activations for one training step of
    `batch_size` sequences of full context: an estimate (the tensors autograd keeps per
    token: per layer the block's inputs, norms, q/k/v, attention output and the four
    feed-forward intermediates; the logits in float32 twice for the loss).

    Weights, gradients and AdamW's two moments are float32 (4 bytes each per parameter);
    activations are `activation_bytes` per value (4 in float32, 2 under bf16 autocast).
    Attention is taken to be a fused kernel that keeps no T x T matrix (flash attention on GPU).
    """
    cost = model_cost(config)
    d, kv = config.d_model, config.n_kv_heads * config.head_dim
    tokens = batch_size * config.context_length
    per_token_per_layer = 6 * d + 2 * kv + 4 * config.d_ff
    activations = tokens * (config.n_layers * per_token_per_layer * activation_bytes
                            + config.vocab_size * (activation_bytes + 8) + 2 * d * 4)
    return {"weights": 4 * cost.params, "gradients": 4 * cost.params, "adamw": 8 * cost.params, "activations": activations}
