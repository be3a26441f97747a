"""What a model costs: parameters, training FLOPs per token, training memory."""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


@dataclass
class ModelCost:
    params: int  # tied weights counted once
    non_embedding_params: (
        int  # without the token and position embeddings (a tied LM head is the embedding: not counted)
    )
    matmul_params: int  # weights used in a matrix product per token: everything but the embedding lookups
    flops_per_token: int  # training (forward + backward)
    block_matrix_params: int  # the blocks' weight matrices: what Muon trains where it is used (train/optim.py)
    layer_params: int  # one block's: what FSDP gathers whole for the block's forward and backward

    @property
    def attention_flops_per_token(self) -> int:
        return self.flops_per_token - 6 * self.matmul_params


def model_cost(config: ModelConfig, context_length: int | None = None) -> ModelCost:
    """Counts in closed form from the shape model.py builds (tests/unit/test_model.py checks them against
    built models), so that `gptkit model info` answers without importing torch.

    Training FLOPs per token follow PaLM's accounting (as nanoGPT's MFU does): 6 per matmul
    weight (2 forward, 4 backward) plus 12 * layers * (n_heads * head_dim, d_model unless the
    head size is set apart) * context for the attention scores and the weighted values, at the
    `context_length` trained (None: the model's; an imported 131,072-context model trained at
    2,048 attends over 2,048 positions).
    """
    d, q_width, kv_width = config.d_model, config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    gpt2 = config.architecture == "gpt2"
    attention = 2 * d * q_width + 2 * d * kv_width  # wq and wo; wk and wv
    qk_norms = 2 * config.head_dim if config.qk_norm else 0
    feed_forward = (2 if gpt2 else 3) * d * config.d_ff  # GPT-2's MLP: w1, w2; SwiGLU: w1, w3, w2
    norm = 2 * d if gpt2 else d  # LayerNorm: a gain and a bias; RMSNorm: a gain
    if gpt2:  # a bias on every linear layer of the block
        biases = q_width + 2 * kv_width + d + config.d_ff + d
    else:
        biases = q_width + 2 * kv_width if config.qkv_bias else 0
    layer = 2 * norm + attention + qk_norms + feed_forward + biases
    embedding = config.vocab_size * d
    positions = config.context_length * d if gpt2 else 0  # GPT-2's learned position embedding
    lm_head = 0 if config.tie_embeddings else embedding  # a tied head is the embedding
    non_embedding = config.n_layers * layer + norm + lm_head  # norm: the final one
    # The token and position embeddings are lookups, no matmul, unless the token embedding is also the LM head.
    matmul = non_embedding + (embedding if config.tie_embeddings else 0)
    attention_scores = 12 * config.n_layers * q_width * (context_length or config.context_length)
    block_matrices = config.n_layers * (attention + feed_forward)
    return ModelCost(
        embedding + positions + non_embedding,
        non_embedding,
        matmul,
        6 * matmul + attention_scores,
        block_matrices,
        layer,
    )


def training_memory(
    config: ModelConfig,
    batch_size: int,
    activation_bytes: int,
    context_length: int | None = None,
    muon: bool = False,
    shards: int = 1,
    activation_checkpointing: bool = False,
    adapters: int | None = None,
) -> dict[str, int]:
    """Bytes of weights, gradients, optimizer state and activations for one training step of one
    process on `batch_size` sequences of `context_length` tokens (None: the model's context): an
    estimate (the tensors autograd keeps per token: per layer the block's inputs, norms, q/k/v,
    attention output and the feed-forward's intermediates, four for SwiGLU, two for GPT-2's MLP;
    the logits in float32 twice for the loss).

    Weights, gradients and AdamW's two moments are float32 (4 bytes each per parameter); with
    `muon`, the blocks' matrices have Muon's one momentum instead of AdamW's two. Activations
    are `activation_bytes` per value (4 in float32, 2 under bf16 autocast). Attention is taken
    to be a fused kernel that keeps no T x T matrix (flash attention on GPU).

    `shards`: the processes FSDP divides the weights, gradients and optimizer state among (1: a
    process holds them whole, as under DDP); a sharded process also holds, whole, the weights of
    what FSDP gathers at a time: two blocks (the one computing, the next one prefetched) and the
    root (embeddings, final norm, head), at `activation_bytes` a value (bf16 copies on CUDA).
    `activation_checkpointing`: of each block only its input is kept, and one block's
    activations while it is recomputed. `adapters`: the parameters of LoRA adapters where only they
    train: they alone have gradients and optimizer state, and the frozen weights none.
    """
    cost = model_cost(config)
    d, q_width, kv = config.d_model, config.n_heads * config.head_dim, config.n_kv_heads * config.head_dim
    tokens = batch_size * (context_length or config.context_length)
    feed_forward = (2 if config.architecture == "gpt2" else 4) * config.d_ff  # GELU: W1 x, its GELU; SwiGLU: four
    per_layer = (4 * d + 2 * q_width + 2 * kv + feed_forward) * activation_bytes
    layers = (
        config.n_layers * d * activation_bytes + per_layer if activation_checkpointing else config.n_layers * per_layer
    )
    activations = tokens * (layers + config.vocab_size * (activation_bytes + 8) + 2 * d * 4)
    muon_params = cost.block_matrix_params if muon else 0
    trained = cost.params if adapters is None else adapters
    optimizer = {"adamw": 8 * (trained - muon_params), **({"muon": 4 * muon_params} if muon else {})}
    state = {"weights": 4 * (cost.params + (adapters or 0)), "gradients": 4 * trained, **optimizer}
    memory = {name: -(-size // shards) for name, size in state.items()}
    if shards > 1:
        root = cost.params - config.n_layers * cost.layer_params
        memory["gathered weights"] = activation_bytes * (min(2, config.n_layers) * cost.layer_params + root)
    return {**memory, "activations": activations}


def sampling_memory(config: ModelConfig, num_samples: int, positions: int | None = None) -> dict[str, int]:
    """Bytes that sampling `num_samples` continuations at once takes beside the weights: the KV
    cache of `positions` positions (None: the whole context) for each (model.KVCache, which
    generate sizes to the prompt and new tokens), counted float32 (on CUDA it is bf16: half of
    this), and each step's float32 logits, probabilities and their sorted copy and cumulative sum
    for top-p."""
    positions = config.context_length if positions is None else min(positions, config.context_length)
    cache = 2 * 4 * config.n_layers * num_samples * config.n_kv_heads * positions * config.head_dim
    return {"KV cache": cache, "logits": 4 * 4 * num_samples * config.vocab_size}


def describe(config: ModelConfig) -> str:
    """The model's size in a few words, for a message: `d_model 512 x 4 layers, 17.6M parameters`."""
    return f"d_model {config.d_model} x {config.n_layers} layers, {count(model_cost(config).params)} parameters"


def count(n: int) -> str:
    """A count for a message: 17.6M, 1.6T."""
    for unit, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f}{unit}"
    return str(n)
