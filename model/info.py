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
    """Counts from a model built on the meta device (no memory, no initialization).

    Training FLOPs per token follow PaLM's accounting (as nanoGPT's MFU does): 6 per matmul
    weight (2 forward, 4 backward) plus 12 * layers * d_model * context for the attention
    scores and the weighted values.
    """
    import torch

    from .model import TransformerLM

    with torch.device("meta"):
        model = TransformerLM(config)
    params = model.num_params()
    embedding = config.vocab_size * config.d_model
    matmul = params - embedding + (embedding if config.tie_embeddings else 0)
    attention = 12 * config.n_layers * config.d_model * config.context_length
    return ModelCost(params, params - embedding, matmul, 6 * matmul + attention)


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
