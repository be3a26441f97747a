"""The model stage: components against reference formulas, init, loss, KV cache, config, checkpoints, HF export
(the `model` CLI: tests/integration/test_model_cli.py)."""

import json
import math
import os

import pytest
import torch
import torch.nn.functional as F

from gptkit.model.checkpoint import load_model, model_tensors, save_model
from gptkit.model.config import ModelConfig, load_config, preset_names
from gptkit.model.generate import generate
from gptkit.model.info import model_cost, sampling_memory
from gptkit.model.model import (
    MLP,
    Attention,
    FeedForward,
    KVCache,
    RMSNorm,
    TransformerLM,
    apply_rope,
    rope_frequencies,
    rope_tables,
)
from gptkit.shared.errors import InputError
from gptkit.tokenizer.bpe import Tokenizer

EOT = "<|endoftext|>"


def cfg(**kw):
    base = dict(vocab_size=64, context_length=32, d_model=32, n_layers=2, n_heads=4, d_ff=64)
    return ModelConfig(**{**base, **kw})


def build(config, seed=0, random_norms=False):
    torch.manual_seed(seed)
    model = TransformerLM(config).eval()
    if random_norms:  # gains other than 1, so a misplaced norm weight shows
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() == 1:
                    p.uniform_(0.5, 1.5)
    return model


def tokens(config, *shape, seed=1):
    return torch.randint(config.vocab_size, shape, generator=torch.Generator().manual_seed(seed))


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 4.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8,
}


def byte_tokenizer(special=EOT):
    return Tokenizer(
        vocab=[bytes([i]) for i in range(256)] + [special.encode()], merges=[], special_tokens={special: 256}
    )


# -- reference formulas ----------------------------------------------------------------------


def ref_rmsnorm(x, w, eps):
    return x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def ref_rope(x, positions, theta):
    """Rotate each pair (x[i], x[i + d/2]) by position * theta^(-2i/d), written out pair by pair."""
    d = x.shape[-1]
    out = x.clone()
    for i in range(d // 2):
        angle = positions.double() * theta ** (-2 * i / d)
        c, s = angle.cos().float(), angle.sin().float()  # (T,), against x[..., i] of (..., T)
        a, b = x[..., i], x[..., i + d // 2]
        out[..., i] = a * c - b * s
        out[..., i + d // 2] = a * s + b * c
    return out


def ref_linear(x, linear):
    return x @ linear.weight.T + (linear.bias if linear.bias is not None else 0)


def ref_attention(att, x, theta, eps):
    """Causal softmax attention by hand, key/value heads repeated for grouped-query attention;
    theta None: no RoPE (GPT-2)."""
    B, T, _ = x.shape
    H, KV, d = att.n_heads, att.n_kv_heads, att.head_dim
    q = ref_linear(x, att.wq).view(B, T, H, d).transpose(1, 2)
    k = ref_linear(x, att.wk).view(B, T, KV, d).transpose(1, 2)
    v = ref_linear(x, att.wv).view(B, T, KV, d).transpose(1, 2)
    if att.q_norm is not None:
        q, k = ref_rmsnorm(q, att.q_norm.weight, eps), ref_rmsnorm(k, att.k_norm.weight, eps)
    pos = torch.arange(T)
    if theta is not None:
        q, k = ref_rope(q, pos, theta), ref_rope(k, pos, theta)
    k, v = k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(d)
    scores = scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float("-inf"))
    y = scores.softmax(-1) @ v
    return ref_linear(y.transpose(1, 2).reshape(B, T, H * d), att.wo)


# -- components ------------------------------------------------------------------------------


def test_rmsnorm_matches_formula():
    torch.manual_seed(0)
    norm = RMSNorm(48, eps=1e-3)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 2.0)
    x = torch.randn(3, 5, 48) * 3
    torch.testing.assert_close(norm(x), ref_rmsnorm(x, norm.weight, 1e-3))
    half = norm.bfloat16()(x.bfloat16())  # normalized in float32, returned in the activations' dtype
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(
        half.float(), ref_rmsnorm(x.bfloat16().float(), norm.weight.float(), 1e-3), atol=0.05, rtol=0.02
    )


def test_swiglu_matches_formula():
    torch.manual_seed(0)
    ffn = FeedForward(cfg())
    x = torch.randn(2, 7, 32)
    expected = F.silu(x @ ffn.w1.weight.T) * (x @ ffn.w3.weight.T) @ ffn.w2.weight.T
    torch.testing.assert_close(ffn(x), expected)


def test_rope_matches_pairwise_rotation_and_preserves_norms():
    torch.manual_seed(0)
    d, T, theta = 16, 20, 500.0
    cos, sin = rope_tables(d, T, theta)
    x = torch.randn(2, 3, T, d)
    y = apply_rope(x, cos, sin)
    torch.testing.assert_close(y, ref_rope(x, torch.arange(T), theta))
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[..., 0, :], x[..., 0, :])  # position 0 is not rotated


def test_rope_dot_product_depends_only_on_relative_position():
    torch.manual_seed(0)
    d = 16
    cos, sin = rope_tables(d, 64, 10000.0)
    q, k = torch.randn(d), torch.randn(d)

    def score(m, n):
        return apply_rope(q, cos[m], sin[m]) @ apply_rope(k, cos[n], sin[n])

    for m, n in [(5, 2), (3, 9), (0, 0), (7, 7)]:
        for s in (1, 13, 40):
            torch.testing.assert_close(score(m, n), score(m + s, n + s), atol=1e-5, rtol=1e-5)
    assert abs(score(5, 2) - score(5, 3)) > 1e-3  # but it does depend on the offset


@pytest.mark.parametrize(
    "kw",
    [
        dict(n_kv_heads=4),
        dict(n_kv_heads=2),
        dict(n_kv_heads=1),
        dict(n_kv_heads=2, qk_norm=True),
        dict(n_kv_heads=2, qkv_bias=True),
        dict(n_kv_heads=2, head_dim=16, qk_norm=True),
        dict(architecture="gpt2"),
    ],
    ids=["mha", "gqa2", "mqa", "gqa-qknorm", "qkv-bias", "head-dim-apart", "gpt2"],
)
def test_attention_matches_reference_with_repeated_kv_heads(kw):
    config = cfg(rope_theta=300.0, norm_eps=1e-6, **kw)
    torch.manual_seed(0)
    att = Attention(config, layer=0)
    with torch.no_grad():
        for p in att.parameters():
            if p.dim() == 1:  # QK-norm gains other than 1, biases other than 0
                p.uniform_(0.5, 1.5)
    assert att.wk.weight.shape == (config.n_kv_heads * config.head_dim, config.d_model)
    assert att.wo.weight.shape == (config.d_model, config.n_heads * config.head_dim)
    biases = {n for n, _ in att.named_parameters() if n.endswith("bias")}
    assert biases == (
        {"wq.bias", "wk.bias", "wv.bias", "wo.bias"}
        if config.architecture == "gpt2"
        else {"wq.bias", "wk.bias", "wv.bias"}
        if config.qkv_bias
        else set()
    )
    x = torch.randn(2, 12, config.d_model)
    theta = None if config.architecture == "gpt2" else config.rope_theta
    cos, sin = rope_tables(config.head_dim, 12, config.rope_theta) if theta else (None, None)
    torch.testing.assert_close(att(x, cos, sin), ref_attention(att, x, theta, config.norm_eps), atol=1e-5, rtol=1e-4)


def test_gpt2_mlp_is_gelu_new():
    """GPT-2's MLP: W2(GELU(W1 x + b1)) + b2, with transformers' gelu_new written out."""
    torch.manual_seed(0)
    mlp = MLP(cfg(architecture="gpt2"))
    x = torch.randn(2, 7, 32)
    h = x @ mlp.w1.weight.T + mlp.w1.bias
    gelu_new = 0.5 * h * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (h + 0.044715 * h.pow(3))))
    torch.testing.assert_close(mlp(x), gelu_new @ mlp.w2.weight.T + mlp.w2.bias)


def test_gpt2_model_is_gpt2():
    """LayerNorms with biases, learned positions added to the embedding, no RoPE tables."""
    config = cfg(architecture="gpt2", init_std=0.05, n_layers=3)
    model = build(config)
    assert isinstance(model.norm, torch.nn.LayerNorm) and model.norm.eps == config.norm_eps
    assert all(
        isinstance(layer.ffn, MLP) and isinstance(layer.attention_norm, torch.nn.LayerNorm) for layer in model.layers
    )
    assert not hasattr(model, "rope_cos") and model.position_embedding.weight.shape == (32, 32)
    for name, p in model.named_parameters():  # GPT-2's init, as nanoGPT's: biases 0, gains 1
        if name.endswith("bias"):
            assert torch.equal(p, torch.zeros_like(p)), name
        elif p.dim() == 1:
            assert torch.equal(p, torch.ones_like(p)), name
    residual = 0.05 / math.sqrt(2 * 3)
    assert model.layers[0].ffn.w2.weight.std().item() == pytest.approx(residual, rel=0.15)
    assert model.position_embedding.weight.std().item() == pytest.approx(0.05, rel=0.1)
    idx = tokens(config, 1, 8)
    with torch.no_grad():  # a position's own embedding is added: the same tokens later give other logits
        x = model.embedding(idx) + model.position_embedding(torch.arange(8))
        for layer in model.layers:
            x = layer(x, None, None)
        torch.testing.assert_close(model(idx)[0], model.lm_head(model.norm(x)))
        cache = KVCache(config, 1)
        model(tokens(config, 1, 5, seed=3), cache=cache)
        later = model(idx[:, :1], cache=cache)[0]
    assert not torch.allclose(later[0, 0], model(idx[:, :1])[0][0, 0])


def test_llama3_rope_scaling_by_hand():
    """Llama 3's rule, frequency by frequency: long wavelengths divided by the factor, short ones
    kept, those between interpolated."""
    scaling = {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 64,
    }
    plain, scaled = rope_frequencies(32, 10000.0), rope_frequencies(32, 10000.0, scaling)
    kinds = set()
    for f, g in zip(plain.tolist(), scaled.tolist()):
        wavelength = 2 * math.pi / f
        if wavelength < 64 / 4:
            expected, kind = f, "kept"
        elif wavelength > 64 / 1:
            expected, kind = f / 8, "divided"
        else:
            smooth = (64 / wavelength - 1) / (4 - 1)
            expected, kind = (1 - smooth) * f / 8 + smooth * f, "between"
        assert g == pytest.approx(expected, rel=1e-12)
        kinds.add(kind)
    assert kinds == {"kept", "divided", "between"}
    cos, _ = rope_tables(32, 10, 10000.0, scaling)
    assert not torch.allclose(cos, rope_tables(32, 10, 10000.0)[0])


def test_causal_mask_future_tokens_do_not_change_earlier_logits():
    config = cfg(n_kv_heads=2)
    model = build(config)
    idx = tokens(config, 2, 24)
    changed = idx.clone()
    changed[:, 10] = (changed[:, 10] + 1) % config.vocab_size
    with torch.no_grad():
        a, _ = model(idx)
        b, _ = model(changed)
    torch.testing.assert_close(a[:, :10], b[:, :10], atol=1e-6, rtol=0)
    assert ((a[:, 10:] - b[:, 10:]).abs().amax(-1) > 1e-4).all()


# -- init ------------------------------------------------------------------------------------


def test_init_stds_and_norm_gains():
    config = cfg(vocab_size=256, d_model=64, n_layers=3, d_ff=128, init_std=0.05)
    model = build(config)
    residual = 0.05 / math.sqrt(2 * 3)
    seen = set()
    for name, p in model.named_parameters():
        if p.dim() == 1:
            assert torch.equal(p, torch.ones_like(p)), name
            continue
        expected = residual if name.endswith(("attention.wo.weight", "ffn.w2.weight")) else 0.05
        seen.add(expected)
        assert p.std().item() == pytest.approx(expected, rel=0.1), name
        assert abs(p.mean().item()) < expected * 0.1, name
    assert seen == {residual, 0.05}


def test_tied_embeddings_share_storage_and_untied_do_not():
    tied, untied = build(cfg(tie_embeddings=True)), build(cfg(tie_embeddings=False))
    assert tied.lm_head.weight is tied.embedding.weight
    assert untied.lm_head.weight.data_ptr() != untied.embedding.weight.data_ptr()
    assert untied.num_params() - tied.num_params() == 64 * 32
    assert tied.num_params(embedding=False) == tied.num_params() - 64 * 32


# -- loss ------------------------------------------------------------------------------------


def test_loss_is_float32_cross_entropy_ignoring_minus_one():
    config = cfg()
    model = build(config)
    idx, targets = tokens(config, 3, 16, seed=1), tokens(config, 3, 16, seed=2)
    targets[0, :5] = -1
    targets[2, -3:] = -1
    with torch.no_grad():
        logits, loss = model(idx, targets)
        assert model(idx)[1] is None
    keep = targets != -1
    manual = -logits.float().log_softmax(-1)[keep].gather(-1, targets[keep][:, None]).mean()
    torch.testing.assert_close(loss, F.cross_entropy(logits.float().view(-1, 64), targets.view(-1), ignore_index=-1))
    torch.testing.assert_close(loss, manual)
    with torch.no_grad():
        logits16, loss16 = model.to(torch.bfloat16)(idx, targets)
    assert logits16.dtype == torch.bfloat16 and loss16.dtype == torch.float32
    torch.testing.assert_close(
        loss16, F.cross_entropy(logits16.float().view(-1, 64), targets.view(-1), ignore_index=-1)
    )


def test_token_losses_are_the_per_position_loss_a_block_of_rows_at_a_time(monkeypatch):
    config = cfg()
    model = build(config)
    idx, targets = tokens(config, 3, 16, seed=1), tokens(config, 3, 16, seed=2)
    targets[1, :4] = -1
    with torch.no_grad():
        logits, loss = model(idx, targets)
    expected = F.cross_entropy(logits.float().view(-1, 64), targets.view(-1), ignore_index=-1, reduction="none").view(
        3, 16
    )
    monkeypatch.setattr("gptkit.model.model.LOSS_BLOCK_LOGITS", 64 * 5)  # blocks of 5 rows: 48 rows end in a short one
    losses = model.token_losses(idx, targets)
    assert losses.shape == (3, 16) and losses.dtype == torch.float32 and not losses.requires_grad
    torch.testing.assert_close(losses, expected, atol=1e-6, rtol=0)
    assert (losses[1, :4] == 0).all()
    torch.testing.assert_close(losses.sum() / (targets != -1).sum(), loss)


def test_last_only_gives_the_last_positions_logits():
    config = cfg()
    model = build(config)
    idx = tokens(config, 2, 12)
    with torch.no_grad():
        full, _ = model(idx)
        last, _ = model(idx, last_only=True)
    assert last.shape == (2, 1, 64)
    torch.testing.assert_close(last, full[:, -1:], atol=1e-6, rtol=0)


# -- KV cache --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw",
    [
        dict(),
        dict(n_kv_heads=2),
        dict(n_kv_heads=1, qk_norm=True, tie_embeddings=True),
        dict(architecture="gpt2"),
        dict(n_kv_heads=2, qkv_bias=True, head_dim=16, rope_scaling=LLAMA3),
    ],
    ids=["mha", "gqa", "qknorm", "gpt2", "qwen2-head-dim-llama3"],
)
def test_kv_cache_decoding_matches_full_forward(kw):
    config = cfg(**kw)
    model = build(config, random_norms=True)
    idx = tokens(config, 2, 30)
    cache = KVCache(config, batch_size=2)
    pieces, pos = [], 0
    with torch.no_grad():
        full, _ = model(idx)
        for size in [8, 5, 3] + [1] * 12 + [2]:  # prefill, chunks, one token at a time, a last chunk
            pieces.append(model(idx[:, pos : pos + size], cache=cache)[0])
            pos += size
    assert pos == 30 and cache.length == 30
    torch.testing.assert_close(torch.cat(pieces, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    "kw", [dict(), dict(n_kv_heads=1, qk_norm=True), dict(architecture="gpt2")], ids=["mha", "gqa-qknorm", "gpt2"]
)
def test_a_step_at_a_position_on_the_device_is_the_step_at_the_cache_length(kw):
    """Inside cache.at(position) (what generate's CUDA graph replays) a one-token step attends over
    the whole capacity, the positions after its own masked: the logits of the step at the cache's
    length, also where those positions hold an earlier window's keys (the slide's refill)."""
    config = cfg(**kw)
    model = build(config, random_norms=True)
    idx = tokens(config, 2, 40)
    position = torch.zeros(1, dtype=torch.long)
    with torch.no_grad():
        plain, stepped = KVCache(config, 2, capacity=24), KVCache(config, 2, capacity=24)
        for start, prefill in ((0, 6), (20, 4)):  # then refilled in place from 0, shorter
            plain.length = stepped.length = 0
            model(idx[:, start : start + prefill], cache=plain)
            model(idx[:, start : start + prefill], cache=stepped)
            for pos in range(start + prefill, start + 20):
                want, _ = model(idx[:, pos : pos + 1], cache=plain)
                position.fill_(stepped.length)
                with stepped.at(position):
                    got, _ = model(idx[:, pos : pos + 1], cache=stepped, last_only=True)
                stepped.length += 1
                torch.testing.assert_close(got, want, atol=1e-5, rtol=0)
        assert stepped.position is None and stepped.visible is None  # outside at(): the plain steps
        with pytest.raises(ValueError, match="2 tokens in a step"), stepped.at(position):
            model(idx[:, :2], cache=stepped)


@pytest.mark.parametrize("kw", [dict(n_kv_heads=2), dict(architecture="gpt2")], ids=["gqa", "gpt2"])
def test_a_step_of_some_rows_at_their_own_positions_over_a_span_is_each_rows_own_step(kw):
    """KVCache.rows and at(positions, span), a server's step of the rows in use (serve/batching.py):
    rows of different lengths, each at its own position, attending over the longest row's positions
    alone, give each row the logits of its own step; the rows' later positions hold other keys."""
    config = cfg(**kw)
    model = build(config, random_norms=True)
    lengths, nxt = [5, 9, 3], tokens(config, 3, 1, seed=2)
    with torch.no_grad():
        batch = KVCache(config, 4)  # a row more than the step computes
        model(tokens(config, 4, 20, seed=3), cache=batch)  # earlier requests' keys, to be masked
        alone = []
        for row, length in enumerate(lengths):
            prompt, own, prefill = tokens(config, 1, length, seed=row), KVCache(config, 1), KVCache(config, 1)
            model(prompt, cache=own)
            model(prompt, cache=prefill)
            batch.put(row, prefill)
            alone.append(model(nxt[row : row + 1], cache=own)[0])
        view = batch.rows(0, 3, max(lengths))
        with view.at(torch.tensor(lengths), span=max(lengths) + 1):
            got, _ = model(nxt, cache=view, last_only=True)
    torch.testing.assert_close(got, torch.cat(alone), atol=1e-5, rtol=0)
    assert batch.length == 20 and view.length == max(lengths)  # the step advances neither: its caller does


def test_kv_cache_fill_gives_identical_continuations():
    config = cfg(n_kv_heads=2)
    model = build(config)
    prompt = tokens(config, 1, 6)
    with torch.no_grad():
        prefill, cache = KVCache(config, batch_size=1), KVCache(config, batch_size=3)
        model(prompt, cache=prefill)
        cache.fill(prefill)
        assert cache.length == 6
        # the same token in every row: the same logits and greedy tokens, step after step
        # (equal up to rounding: a GEMM may round rows of a batch differently)
        nxt = torch.full((3, 1), 7)
        for _ in range(6):
            logits, _ = model(nxt, cache=cache)
            torch.testing.assert_close(logits, logits[:1].expand(3, -1, -1), atol=1e-6, rtol=0)
            nxt = logits[:, -1].argmax(-1, keepdim=True)
            assert nxt.unique().numel() == 1
        # different tokens per row: each row is its own continuation of the prompt
        cache.fill(prefill)  # in place: the rows' later positions are written again
        nxt = torch.tensor([[1], [2], [3]])
        logits, _ = model(nxt, cache=cache)
        full, _ = model(torch.cat([prompt.expand(3, -1), nxt], dim=1))
    torch.testing.assert_close(logits[:, 0], full[:, -1], atol=1e-5, rtol=0)


def test_exceeding_context_raises():
    config = cfg(context_length=16)
    model = build(config)
    with torch.no_grad():
        model(tokens(config, 1, 16))  # exactly the context is fine
        with pytest.raises(ValueError, match="context length 16"):
            model(tokens(config, 1, 17))
        cache = KVCache(config, batch_size=1)
        model(tokens(config, 1, 14), cache=cache)
        with pytest.raises(ValueError, match="17 positions"):
            model(tokens(config, 1, 3), cache=cache)
        model(tokens(config, 1, 2), cache=cache)
        with pytest.raises(ValueError):
            model(tokens(config, 1, 1), cache=cache)
        small = KVCache(config, batch_size=1, capacity=6)  # a cache sized for a short generation
        assert small.capacity == 6 and KVCache(config, 1, capacity=99).capacity == 16
        model(tokens(config, 1, 6), cache=small)
        with pytest.raises(ValueError, match="7 positions, more than the 6 the cache holds"):
            model(tokens(config, 1, 1), cache=small)


def test_generate_sizes_the_cache_to_the_prompt_and_new_tokens(monkeypatch):
    """A model imported with a context of 131,072 must not get a cache of 131,072 positions."""
    config = cfg(context_length=64)
    model = build(config)
    capacities = []

    class Recorded(KVCache):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            capacities.append(self.capacity)

    monkeypatch.setattr("gptkit.model.generate.KVCache", Recorded)
    list(generate(model, [1, 2, 3], max_new_tokens=5, temperature=0))
    assert capacities == [3 + 5, 3]  # the batch's, then the prompt's prefill
    capacities.clear()
    list(generate(model, list(range(40)), max_new_tokens=60, temperature=0))  # past the context: the window slides
    assert capacities == [64, 40]  # the slide refills the same cache (a CUDA graph's step keeps its addresses)
    assert sampling_memory(config, 2, 8)["KV cache"] == sampling_memory(config, 2)["KV cache"] * 8 // 64


# -- config ----------------------------------------------------------------------------------


def test_config_json_round_trip(tmp_path):
    config = ModelConfig(
        vocab_size=300,
        context_length=64,
        d_model=48,
        n_layers=3,
        n_heads=6,
        n_kv_heads=2,
        d_ff=100,
        rope_theta=5e5,
        norm_eps=1e-6,
        tie_embeddings=True,
        qk_norm=True,
        init_std=0.01,
        head_dim=12,
        rope_scaling=LLAMA3,
    )
    assert ModelConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    for other in (
        ModelConfig(vocab_size=10, d_model=64, n_heads=4, architecture="gpt2"),
        ModelConfig(vocab_size=10, qkv_bias=True),
    ):
        assert ModelConfig.from_dict(json.loads(json.dumps(other.to_dict()))) == other
    # a config written before the architecture options: what it was, Llama with heads of d_model / n_heads
    old = {
        k: v for k, v in cfg().to_dict().items() if k not in ("architecture", "qkv_bias", "head_dim", "rope_scaling")
    }
    assert ModelConfig.from_dict(old) == cfg() and cfg().head_dim == 8 and cfg().architecture == "llama"
    assert ModelConfig(vocab_size=10, n_heads=8, d_model=64).n_kv_heads == 8
    (tmp_path / "c.json").write_text(json.dumps({"model": config.to_dict(), "train": {"lr": 1}}))
    assert load_config(tmp_path / "c.json") == config


def test_config_errors_name_the_problem(tmp_path):
    with pytest.raises(InputError, match="unknown model config key 'n_layer'"):
        ModelConfig.from_dict({"vocab_size": 10, "n_layer": 4})
    for bad, needle in [
        (dict(d_model=100, n_heads=16), "n_heads 16"),
        (dict(n_heads=16, n_kv_heads=3), "n_kv_heads 3"),
        (dict(d_model=48, n_heads=16), "even"),
        (dict(vocab_size=0), "vocab_size"),
        (dict(rope_theta="10000"), "rope_theta"),
        (dict(norm_eps=float("nan")), "norm_eps"),
        (dict(init_std=-0.02), "init_std"),
        (dict(n_layers=True), "n_layers"),
        (dict(n_layers=2.5), "n_layers"),
        (dict(tie_embeddings="yes"), "tie_embeddings"),
        (dict(architecture="gpt3"), "architecture 'gpt3'"),
        (dict(qkv_bias=1), "qkv_bias"),
        (dict(head_dim=0), "head_dim 0"),
        (dict(head_dim=7), "head_dim 7: odd"),
        (dict(qk_norm=True, qkv_bias=True), "qkv_bias true with qk_norm"),
        (dict(architecture="gpt2", qk_norm=True), "qk_norm true: a llama option"),
        (dict(architecture="gpt2", qkv_bias=True), "qkv_bias"),
        (dict(architecture="gpt2", n_heads=16, n_kv_heads=4), "n_kv_heads 4: architecture 'gpt2'"),
        (dict(architecture="gpt2", head_dim=16), "head_dim 16: architecture 'gpt2'"),
        (dict(architecture="gpt2", rope_scaling=LLAMA3), "rope_scaling"),
        (dict(rope_scaling={**LLAMA3, "rope_type": "yarn"}), "rope_scaling .*yarn"),
        (dict(rope_scaling={"rope_type": "llama3", "factor": 8.0}), "rope_scaling"),
        (dict(rope_scaling={**LLAMA3, "factor": 0.5}), "rope_scaling factor 0.5"),
        (dict(rope_scaling={**LLAMA3, "high_freq_factor": 1.0}), "high_freq_factor 1.0"),
        (dict(rope_scaling={**LLAMA3, "original_max_position_embeddings": 8.5}), "original_max_position"),
    ]:
        with pytest.raises(InputError, match=needle):
            ModelConfig.from_dict({"vocab_size": 10, **bad})
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"vocab_size": 10, "d_model": 100, "n_heads": 16}))
    with pytest.raises(InputError, match="bad.json"):
        load_config(path)
    path.write_text("{not json")
    with pytest.raises(InputError, match="not valid JSON"):
        load_config(path)
    with pytest.raises(InputError, match="no such preset"):
        load_config("gpt5")


def test_dropout_only_in_training_and_a_checkpoint_without_it_is_the_model_it_was(tmp_path, small_tokenizer):
    """A checkpoint written before dropout existed (no "dropout" in its config) loads as dropout 0
    with the same logits. A model with dropout drops in train mode only, in each residual branch's
    output too (not only the embeddings), following torch's seed; load_model gives it in eval mode."""
    tok, _ = small_tokenizer
    plain = build(ckpt_config(tok), random_norms=True)
    save_model(plain, tok, tmp_path / "old")
    config_path = tmp_path / "old" / "config.json"
    written = json.loads(config_path.read_text())
    assert written["model"]["dropout"] == 0.0
    del written["model"]["dropout"]
    config_path.write_text(json.dumps(written))
    idx = tokens(plain.config, 2, 20)
    with torch.no_grad():
        expected = plain(idx)[0]
        loaded, _ = load_model(tmp_path / "old")
        assert loaded.config.dropout == 0.0 and not loaded.training
        assert torch.equal(loaded(idx)[0], expected)

        dropped = TransformerLM(ckpt_config(tok, dropout=0.5))
        dropped.load_state_dict(plain.state_dict())
        assert torch.equal(dropped.eval()(idx)[0], expected)
        dropped.train()
        torch.manual_seed(0)
        first = dropped(idx)[0]
        torch.manual_seed(0)
        assert torch.equal(dropped(idx)[0], first) and not torch.allclose(first, expected)
        x = torch.randn(4, 16, dropped.config.d_model)
        block = dropped.layers[0]
        attention_out = block.attention(x, dropped.rope_cos[:16], dropped.rope_sin[:16])
        assert 0.3 < (attention_out == 0).float().mean() < 0.7
        block.attention.wo.weight.zero_()  # the block's output less its input is then the feed-forward branch's
        ffn_out = block(x, dropped.rope_cos[:16], dropped.rope_sin[:16]) - x
        assert 0.3 < (ffn_out == 0).float().mean() < 0.7
    save_model(dropped, tok, tmp_path / "dropout")
    again, _ = load_model(tmp_path / "dropout")
    assert again.config.dropout == 0.5 and not again.training
    with torch.no_grad():
        assert torch.equal(
            again.layers[1](x, again.rope_cos[:16], again.rope_sin[:16]),
            plain.layers[1](x, plain.rope_cos[:16], plain.rope_sin[:16]),
        )


def test_a_checkpoint_edited_beyond_memory_is_one_line(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    save_model(build(ckpt_config(tok)), tok, tmp_path / "ck")
    path = tmp_path / "ck" / "config.json"
    config = json.loads(path.read_text())
    config["model"]["context_length"] = 2**40
    path.write_text(json.dumps(config))
    with pytest.raises(InputError, match=r"ck/config.json: the model it describes cannot be built here \("):
        load_model(tmp_path / "ck")


@pytest.mark.parametrize("field", ["dropout", "attention_dropout"])
@pytest.mark.parametrize("bad", [1.0, -0.1, "0.1", True, float("nan")])
def test_dropout_is_a_probability_below_1(bad, field):
    with pytest.raises(InputError, match=f"config: {field} "):
        ModelConfig.from_dict({"vocab_size": 10, "d_model": 32, "n_heads": 4, field: bad})


def test_attention_dropout_is_dropout_unless_set_and_drops_only_the_attention_weights(small_tokenizer):
    """A config that names dropout alone (nanoGPT's, and every checkpoint written before the field)
    drops the attention weights too; attention_dropout 0 keeps them and the residual dropout, and
    attention_dropout alone drops inside the attention only."""
    tok, _ = small_tokenizer
    assert (
        ModelConfig.from_dict({"vocab_size": 10, "d_model": 32, "n_heads": 4, "dropout": 0.2}).attention_dropout == 0.2
    )
    x = torch.randn(4, 16, cfg().d_model)

    def attention(**kw):  # the attention's output before its own projection's dropout, in train mode
        torch.manual_seed(0)
        model = TransformerLM(ckpt_config(tok, **kw))
        model.layers[0].attention.dropout = 0.0
        torch.manual_seed(1)
        return model.layers[0].attention(x, model.rope_cos[:16], model.rope_sin[:16])

    plain = attention()
    assert torch.equal(attention(dropout=0.5, attention_dropout=0.0), plain)
    assert not torch.allclose(attention(attention_dropout=0.5), plain)
    assert not torch.allclose(attention(dropout=0.5), plain)


@pytest.mark.parametrize("bad", ["n_heads", "n_kv_heads", "n_layers", "context_length", "d_model"])
def test_config_rejects_zero_sizes(bad):
    with pytest.raises(InputError, match=bad):
        ModelConfig.from_dict({"vocab_size": 10, "d_model": 32, "n_heads": 4, bad: 0})


def test_presets_have_documented_shapes():
    assert {"tiny", "tinystories-17m", "gpt2-small", "gpt2-medium"} <= set(preset_names())
    for name in preset_names():
        load_config(name)
    ts = load_config("tinystories-17m")
    assert (ts.vocab_size, ts.context_length, ts.d_model, ts.n_layers, ts.n_heads, ts.d_ff, ts.rope_theta) == (
        10000,
        256,
        512,
        4,
        16,
        1344,
        10000.0,
    )
    assert model_cost(ts).params / 1e6 == pytest.approx(17.6, abs=0.05)
    assert model_cost(load_config("gpt2-small")).params / 1e6 == pytest.approx(124, abs=1)
    assert model_cost(load_config("gpt2-medium")).params / 1e6 == pytest.approx(355, abs=1)
    gpt2 = load_config(
        "gpt2-124m-arch"
    )  # GPT-2 small itself (tests/integration/test_import_hf.py: against transformers)
    assert (
        gpt2.architecture,
        gpt2.vocab_size,
        gpt2.context_length,
        gpt2.d_model,
        gpt2.n_layers,
        gpt2.n_heads,
        gpt2.d_ff,
        gpt2.tie_embeddings,
    ) == ("gpt2", 50257, 1024, 768, 12, 12, 3072, True)
    assert model_cost(gpt2).params == 124_439_808


ODD_CONFIGS = {
    "untied": cfg(tie_embeddings=False),
    "tied, GQA, QK-norm": cfg(vocab_size=100, n_layers=3, n_kv_heads=2, qk_norm=True, tie_embeddings=True),
    "untied, GQA, QK-norm": cfg(vocab_size=100, n_layers=3, n_kv_heads=2, qk_norm=True),
    "one KV head, odd sizes": cfg(vocab_size=101, d_model=48, n_heads=6, n_kv_heads=1, d_ff=77, n_layers=1),
    "gpt2, untied": cfg(architecture="gpt2", vocab_size=101, d_ff=128),
    "gpt2, tied, odd head size": cfg(architecture="gpt2", d_model=36, n_heads=4, tie_embeddings=True),
    "q/k/v biases, GQA": cfg(qkv_bias=True, n_kv_heads=2),
    "head_dim apart, QK-norm": cfg(head_dim=16, n_kv_heads=2, qk_norm=True),
    "Llama 3 RoPE scaling": cfg(rope_scaling=LLAMA3),
}


@pytest.mark.parametrize("name", [*preset_names(), *ODD_CONFIGS])
def test_model_cost_matches_built_model(name):
    """model_cost counts in closed form: it must follow every change to the model's shape."""
    config = ODD_CONFIGS[name] if name in ODD_CONFIGS else load_config(name)
    with torch.device("meta"):  # gpt2-medium's shapes without its memory
        model = TransformerLM(config)
    cost = model_cost(config)
    L, q_width, T = config.n_layers, config.n_heads * config.head_dim, config.context_length
    assert cost.params == model.num_params()
    assert cost.non_embedding_params == model.num_params(embedding=False)
    assert cost.flops_per_token == 6 * cost.matmul_params + 12 * L * q_width * T
    assert cost.attention_flops_per_token == 12 * L * q_width * T
    linear = sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))  # lm_head counted once
    gains_and_biases = sum(p.numel() for p in model.parameters() if p.dim() == 1)
    assert cost.matmul_params == linear + gains_and_biases
    embeddings = ("embedding.weight", "position_embedding.weight", "lm_head.weight")
    assert cost.block_matrix_params == sum(
        p.numel() for n, p in model.named_parameters() if p.dim() == 2 and n not in embeddings
    )


# -- checkpoints -----------------------------------------------------------------------------


def ckpt_config(tokenizer, **kw):
    return cfg(vocab_size=tokenizer.vocab_size, **kw)


@pytest.mark.parametrize("tie", [True, False])
def test_checkpoint_round_trip(tmp_path, small_tokenizer, tie):
    from safetensors import safe_open

    tok, _ = small_tokenizer
    model = build(ckpt_config(tok, tie_embeddings=tie, n_kv_heads=2), random_norms=True)
    save_model(model, tok, tmp_path / "ckpt", eot_id=7)
    assert sorted(os.listdir(tmp_path / "ckpt")) == ["config.json", "model.safetensors", "tokenizer.json"]
    with safe_open(str(tmp_path / "ckpt" / "model.safetensors"), framework="pt") as f:
        assert set(f.keys()) == set(model_tensors(model))
        assert ("lm_head.weight" in f.keys()) == (not tie)
    config = json.loads((tmp_path / "ckpt" / "config.json").read_text())
    assert config["model"] == model.config.to_dict()
    assert config["tokenizer"] == {"fingerprint": tok.fingerprint, "vocab_size": tok.vocab_size, "eot_id": 7}

    loaded, loaded_tok = load_model(tmp_path / "ckpt")
    assert loaded.config == model.config and loaded_tok.fingerprint == tok.fingerprint
    assert (loaded.lm_head.weight is loaded.embedding.weight) == tie
    idx = tokens(model.config, 2, 20)
    with torch.no_grad():
        assert torch.equal(loaded.eval()(idx)[0], model(idx)[0])


def test_a_reader_opened_on_latest_reads_that_checkpoint_while_latest_moves_on(tmp_path, small_tokenizer):
    """A sampler that opened a run while the trainer writes its next checkpoint: every file comes from
    the checkpoint LATEST named when the reader opened it, not some from the next one."""
    from gptkit.model.checkpoint import LATEST, CheckpointReader
    from gptkit.shared.files import atomic_symlink

    tok, _ = small_tokenizer
    first, second = (build(ckpt_config(tok), seed=seed) for seed in (1, 2))
    for name, model in (("step-1", first), ("step-2", second)):
        save_model(model, tok, tmp_path / "checkpoints" / name)
    atomic_symlink(tmp_path / LATEST, "checkpoints/step-1")
    reader = CheckpointReader(tmp_path)
    atomic_symlink(tmp_path / LATEST, "checkpoints/step-2")
    assert torch.equal(reader.tensors()["embedding.weight"], first.embedding.weight)


def test_checkpoint_records_the_framing(tmp_path, small_tokenizer):
    """eot_id stops decoding; bos_id, recorded only where it differs, is put before a text."""
    from gptkit.model.checkpoint import bos_id, eot_id
    from gptkit.model.generate import prompt_ids

    tok, _ = small_tokenizer
    model, eot = build(ckpt_config(tok)), tok.special_tokens[EOT]
    for name, kw, recorded, framing in [
        ("ours", {"eot_id": eot}, {"eot_id": eot}, (eot, eot)),
        ("same", {"eot_id": eot, "bos_id": eot}, {"eot_id": eot}, (eot, eot)),
        ("llama3", {"eot_id": 5, "bos_id": 7}, {"eot_id": 5, "bos_id": 7}, (7, 5)),
        ("qwen", {"eot_id": eot, "bos_id": None}, {"eot_id": eot, "bos_id": None}, (None, eot)),
    ]:
        save_model(model, tok, tmp_path / name, **kw)
        config = json.loads((tmp_path / name / "config.json").read_text())
        assert {k: v for k, v in config["tokenizer"].items() if k.endswith("_id")} == recorded
        assert (bos_id(tmp_path / name, tok), eot_id(tmp_path / name, tok)) == framing
    assert prompt_ids(tok, "the cat", bos_id(tmp_path / "qwen", tok)) == tok.encode("the cat")
    assert prompt_ids(tok, "the cat", bos_id(tmp_path / "llama3", tok)) == [7] + tok.encode("the cat")
    config["tokenizer"]["bos_id"] = 10**6
    (tmp_path / "qwen" / "config.json").write_text(json.dumps(config))
    with pytest.raises(InputError, match="tokenizer.bos_id is 1000000, expected a token id or null"):
        bos_id(tmp_path / "qwen", tok)


def test_checkpoint_overwrite_is_atomic(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    config = ckpt_config(tok)
    first, second = build(config, seed=1), build(config, seed=2)
    save_model(first, tok, tmp_path / "ckpt")
    save_model(second, tok, tmp_path / "ckpt")
    assert os.listdir(tmp_path) == ["ckpt"]
    assert torch.equal(load_model(tmp_path / "ckpt")[0].embedding.weight, second.embedding.weight)

    def fail(path):
        raise OSError("disk full")

    with pytest.raises(OSError):  # a write that fails half-way leaves the old checkpoint whole
        save_model(first, tok, tmp_path / "ckpt", extra_files={"state.json": fail})
    assert os.listdir(tmp_path) == ["ckpt"]
    assert torch.equal(load_model(tmp_path / "ckpt")[0].embedding.weight, second.embedding.weight)


@pytest.fixture
def ckpt(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    path = tmp_path / "ckpt"
    save_model(build(ckpt_config(tok)), tok, path)
    return path


def recorded_anew(ckpt):
    """A checkpoint edited by hand with its checksums recorded again: consistent files whose
    content is wrong, which the checks after the checksum must catch."""
    from gptkit.model.checkpoint import file_crc32

    config = json.loads((ckpt / "config.json").read_text())
    config["crc32"] = {p.name: file_crc32(p) for p in ckpt.iterdir() if p.name != "config.json"}
    (ckpt / "config.json").write_text(json.dumps(config))
    return ckpt


def test_a_flipped_bit_in_any_checkpoint_file_is_caught(ckpt):
    for name in ("model.safetensors", "tokenizer.json"):
        path = ckpt / name
        original = path.read_bytes()
        damaged = bytearray(original)
        damaged[len(damaged) // 2] ^= 0x04
        path.write_bytes(bytes(damaged))
        with pytest.raises(InputError, match=f"{name}: corrupted"):
            load_model(ckpt)
        path.write_bytes(original)
    config = json.loads((ckpt / "config.json").read_text())
    assert set(config["crc32"]) == {"model.safetensors", "tokenizer.json"}
    del config["crc32"]  # a checkpoint from before checksums were recorded still loads
    (ckpt / "config.json").write_text(json.dumps(config))
    load_model(ckpt)


@pytest.mark.parametrize("name", ["model.safetensors", "config.json", "tokenizer.json"])
def test_checkpoint_missing_file(ckpt, name):
    (ckpt / name).unlink()
    with pytest.raises(InputError, match=f"incomplete checkpoint, no {name}"):
        load_model(ckpt)


def test_checkpoint_errors_name_the_problem(ckpt, tmp_path):
    from safetensors.torch import load_file, save_file

    with pytest.raises(InputError, match="no such checkpoint directory"):
        load_model(tmp_path / "nowhere")

    config_path = ckpt / "config.json"
    original = config_path.read_text()
    config = json.loads(original)
    config["model"]["d_ff"] = 80
    config_path.write_text(json.dumps(config))
    with pytest.raises(
        InputError, match=r"'layers\.0\.ffn\.w1\.weight' has shape \(64, 32\), the config needs \(80, 32\)"
    ):
        load_model(ckpt)
    config_path.write_text("{oops")
    with pytest.raises(InputError, match="not valid JSON"):
        load_model(ckpt)
    config_path.write_text(original)

    weights = ckpt / "model.safetensors"
    tensors = load_file(weights)
    save_file({**tensors, "layers.9.extra": torch.zeros(2)}, weights)
    with pytest.raises(InputError, match="'layers.9.extra' is not part of the model"):
        load_model(recorded_anew(ckpt))
    save_file({k: v for k, v in tensors.items() if k != "norm.weight"}, weights)
    with pytest.raises(InputError, match="no tensor 'norm.weight'"):
        load_model(recorded_anew(ckpt))
    save_file({**tensors, "norm.weight": tensors["norm.weight"].to(torch.int8)}, weights)  # import-hf's check too
    with pytest.raises(InputError, match=f"{weights}: tensor 'norm.weight' is torch.int8; expected float32"):
        load_model(recorded_anew(ckpt))
    weights.write_bytes(b"not safetensors at all")
    with pytest.raises(InputError, match="not a readable safetensors file"):
        load_model(recorded_anew(ckpt))


def test_checkpoint_tokenizer_mismatch(ckpt, tmp_path):
    byte_tokenizer().save(ckpt / "tokenizer.json")
    with pytest.raises(InputError, match=r"tokenizer\.json: 257 tokens, the model's vocabulary has 450"):
        load_model(recorded_anew(ckpt))
    # same size, different tokenizer: the fingerprint tells
    other = tmp_path / "bytes"
    save_model(build(cfg(vocab_size=257)), byte_tokenizer(), other)
    byte_tokenizer("<|end|>").save(other / "tokenizer.json")
    with pytest.raises(InputError, match="the model was made for"):
        load_model(recorded_anew(other))


# -- Hugging Face export ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "kw, arch",
    [
        (dict(tie_embeddings=False), "LlamaForCausalLM"),
        (dict(tie_embeddings=True), "LlamaForCausalLM"),
        (dict(qk_norm=True), "Qwen3ForCausalLM"),
    ],
    ids=["llama", "llama-tied", "qwen3"],
)
def test_hf_export_logits_match(tmp_path, small_tokenizer, kw, arch):
    transformers = pytest.importorskip("transformers")
    from gptkit.model.hf import export_hf

    tok, _ = small_tokenizer
    config = cfg(vocab_size=tok.vocab_size, context_length=64, n_kv_heads=2, rope_theta=500.0, norm_eps=1e-4, **kw)
    model = build(config, random_norms=True)
    save_model(model, tok, tmp_path / "ckpt")
    export_hf(tmp_path / "ckpt", tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    assert type(hf).__name__ == arch
    idx = tokens(config, 2, 40)
    with torch.no_grad():
        torch.testing.assert_close(hf(idx).logits, model(idx)[0], atol=1e-4, rtol=0)
