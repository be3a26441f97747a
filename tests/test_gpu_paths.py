"""The GPU paths of issue 31, checked where they can be without a GPU: FSDP's bf16 mixed precision
(the policy CUDA gets) on one gloo process, sampling from it and its RoPE tables; the KV cache's
dtype. What needs CUDA itself is in tests/test_gpu.py."""
import copy

import pytest
import torch
import torch.distributed as dist

from gptkit.model import model as model_module
from gptkit.model.config import ModelConfig
from gptkit.model.generate import generate
from gptkit.model.model import KVCache, TransformerLM
from gptkit.train import fsdp

SHAPE = dict(vocab_size=97, context_length=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=64, init_std=0.2)
PROMPT = [3, 14, 15, 92, 65]


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    dist.init_process_group("gloo", rank=0, world_size=1, init_method=f"file://{tmp_path_factory.mktemp('pg')}/store")
    yield
    dist.destroy_process_group()


def bf16_sharded(monkeypatch, device=torch.device("cpu"), **overrides):
    """A tiny model sharded onto `device` as train/fsdp.py shards it for CUDA (bf16 weights in
    the forward, float32 gradient reduction), and the reference it must equal: the model unsharded
    with its weights rounded to bf16 as FSDP gathers them, its RoPE tables (buffers) left float32."""
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**{**SHAPE, **overrides})).eval()
    reference = copy.deepcopy(model).to(device)
    for p in reference.parameters():
        p.data = p.data.to(torch.bfloat16)
    cuda_policy = fsdp.precision(torch.device("cuda"))
    monkeypatch.setattr(fsdp, "precision", lambda device: cuda_policy)
    fsdp.shard(model, device)
    return model, reference


@pytest.mark.parametrize("kw", [dict(), dict(qk_norm=True, tie_embeddings=True)], ids=["gqa", "qknorm-tied"])
def test_fsdp_bf16_rotates_with_float32_rope_tables(process_group, monkeypatch, kw):
    """FSDP's cast_forward_inputs would round the tables a block receives to bf16; the rotation
    must see them float32, as DDP's autocast does, and the logits are the reference's."""
    model, reference = bf16_sharded(monkeypatch, **kw)
    seen, apply_rope = [], model_module.apply_rope
    monkeypatch.setattr(model_module, "apply_rope", lambda x, cos, sin: seen.append((cos.dtype, sin.dtype)) or apply_rope(x, cos, sin))
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(idx)[0]
        assert len(seen) == 2 * SHAPE["n_layers"] and set(seen) == {(torch.float32, torch.float32)}
        expected = reference(idx)[0]
    assert logits.dtype == torch.bfloat16
    torch.testing.assert_close(logits, expected, atol=0, rtol=0)


def test_sampling_from_an_fsdp_bf16_model_between_training_steps(process_group, monkeypatch):
    """The KV cache is made in the dtype the keys are computed in (bf16 here): a float32 cache
    beside bf16 queries stopped scaled_dot_product_attention ("Expected query, key, and value to
    have the same dtype"). Greedy and sampled tokens, past the context (the window slides), are
    the bf16 reference's; training goes on after."""
    model, reference = bf16_sharded(monkeypatch)
    idx = torch.randint(0, SHAPE["vocab_size"], (2, 17), generator=torch.Generator().manual_seed(2))

    def train_step():
        model.train()
        model(idx[:, :-1], idx[:, 1:])[1].backward()
        assert all(torch.isfinite(p.grad.full_tensor()).all() for p in model.parameters())
        model.zero_grad(set_to_none=True)
        model.eval()

    train_step()
    for kw in (dict(temperature=0), dict(temperature=0.8, top_p=0.9, top_k=40, num_samples=3, seed=2)):
        got = torch.stack(list(generate(model, PROMPT, max_new_tokens=2 * SHAPE["context_length"], **kw)))
        want = torch.stack(list(generate(reference, PROMPT, max_new_tokens=2 * SHAPE["context_length"], **kw)))
        assert torch.equal(got, want), kw
    cache = KVCache(model.config, 2)
    with torch.no_grad():
        model(idx, cache=cache)
    assert cache.keys.dtype == cache.values.dtype == torch.bfloat16
    train_step()


@pytest.mark.parametrize("kw", [dict(), dict(qk_norm=True)], ids=["plain", "qknorm"])
def test_the_kv_cache_is_made_in_the_dtype_attention_computes_in(kw):
    """float32 on a CPU (what generate keeps there); under autocast its dtype, even where the keys
    come out float32 (QK-norm's float32 gains), since attention casts to it; the decoding then
    matches the full forward under the same autocast."""
    torch.manual_seed(0)
    model = TransformerLM(ModelConfig(**{**SHAPE, **kw})).eval()
    idx = torch.randint(0, SHAPE["vocab_size"], (1, 12), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        cache = KVCache(model.config, 1)
        model(idx, cache=cache)
        assert cache.keys.dtype == cache.values.dtype == torch.float32
        with torch.autocast("cpu", torch.bfloat16):
            cache = KVCache(model.config, 1)
            pieces = [model(idx[:, :8], cache=cache)[0]] + [model(idx[:, i : i + 1], cache=cache)[0] for i in range(8, 12)]
            full = model(idx)[0]
    assert cache.keys.dtype == cache.values.dtype == torch.bfloat16
    torch.testing.assert_close(torch.cat(pieces, 1).float(), full.float(), atol=0.05, rtol=0)
