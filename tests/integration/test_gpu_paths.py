"""The GPU paths of issue 31, checked where they can be without a GPU: FSDP's bf16 mixed precision
(the policy CUDA gets) on one gloo process, sampling from it and its RoPE tables; the KV cache's
dtype; evaluation's copies to the device; the FLOPs and peak behind MFU. What needs CUDA itself is
in tests/gpu/test_gpu.py."""

import copy

import numpy as np
import pytest
import torch
import torch.distributed as dist

from gptkit.eval.loss import on_device
from gptkit.model import model as model_module
from gptkit.model.config import ModelConfig
from gptkit.model.generate import generate
from gptkit.model.info import model_cost
from gptkit.model.model import KVCache, TransformerLM
from gptkit.train import fsdp
from gptkit.train.report import peak_bf16_flops
from tests.training import MODEL, invoke, records, run_flags

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
    monkeypatch.setattr(
        model_module, "apply_rope", lambda x, cos, sin: seen.append((cos.dtype, sin.dtype)) or apply_rope(x, cos, sin)
    )
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
            pieces = [model(idx[:, :8], cache=cache)[0]] + [
                model(idx[:, i : i + 1], cache=cache)[0] for i in range(8, 12)
            ]
            full = model(idx)[0]
    assert cache.keys.dtype == cache.values.dtype == torch.bfloat16
    torch.testing.assert_close(torch.cat(pieces, 1).float(), full.float(), atol=0.05, rtol=0)


def test_evaluation_batches_reach_a_cpu_as_they_are():
    """On a CPU the copy is no copy (pinning is for CUDA: tests/gpu/test_gpu.py)."""
    array = np.arange(12, dtype=np.uint16).reshape(3, 4)
    tensor = on_device(array, torch.device("cpu"))
    assert tensor.data_ptr() == array.ctypes.data and torch.equal(tensor, torch.from_numpy(array))


def test_attention_flops_are_counted_at_the_trained_context():
    """A Llama 3-like context of 131,072 trained at 2,048: its attention is 64 times cheaper than
    at the model's context, its matrix products the same."""
    config = ModelConfig(
        vocab_size=1000, context_length=131072, d_model=64, n_layers=3, n_heads=4, n_kv_heads=2, d_ff=128
    )
    full, trained = model_cost(config), model_cost(config, 2048)
    assert trained.matmul_params == full.matmul_params and trained.params == full.params
    assert trained.attention_flops_per_token == 12 * 3 * 64 * 2048 == full.attention_flops_per_token // 64
    assert trained.flops_per_token == 6 * full.matmul_params + 12 * 3 * 64 * 2048


def test_mfu_counts_the_attention_of_the_trained_context(data, model_json, tmp_path, monkeypatch):  # noqa: F811
    """A run at context 32 of a model of context 64, with a peak given to the CPU so that MFU is
    reported: the FLOPs behind it are those of context 32."""
    monkeypatch.setattr("gptkit.train.report._peak_flops", lambda device: 1e12)
    res = invoke(*run_flags(data, tmp_path / "run", model_json, max_steps=2, threads=1))
    assert res.exit_code == 0, res.output
    trained, whole = (
        model_cost(ModelConfig(**MODEL), 32).flops_per_token,
        model_cost(ModelConfig(**MODEL)).flops_per_token,
    )
    logged = records(tmp_path / "run")
    assert len(logged) == 2 and trained < whole
    for r in logged:
        assert r["mfu"] == pytest.approx(trained * r["tokens_per_s"] / 1e12, rel=1e-9)


@pytest.mark.parametrize(
    "name, peak",
    [
        ("NVIDIA H100 80GB HBM3", 989e12),  # SXM
        ("NVIDIA H100 PCIe", 756e12),
        ("NVIDIA H100 NVL", 835e12),
        ("NVIDIA H200", 989e12),
        ("NVIDIA H200 NVL", 835e12),
        ("NVIDIA A100-SXM4-80GB", 312e12),
        ("NVIDIA A100 80GB PCIe", 312e12),
        ("NVIDIA GeForce RTX 4090", None),  # not listed: no MFU
    ],
)
def test_peak_flops_by_device_name(name, peak):
    assert peak_bf16_flops(name) == peak
