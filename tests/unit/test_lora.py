"""LoRA's pieces (model/lora.py, LoraConfig in model/config.py): adapters start as the base model
exactly, merging them computes what they compute apart, their count, and what they spare of a
step's memory estimate."""

import pytest
import torch

from gptkit.model.config import LoraConfig, ModelConfig
from gptkit.model.info import training_memory
from gptkit.model.lora import add_adapters, is_adapter, merged
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import SettingError

LLAMA = dict(vocab_size=97, context_length=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48)


@pytest.mark.parametrize("architecture", ["llama", "gpt2"])
def test_adapters_start_as_the_base_and_merge_into_what_they_compute(architecture):
    config = ModelConfig(**{**LLAMA, "n_kv_heads": 4 if architecture == "gpt2" else 2}, architecture=architecture)
    torch.manual_seed(0)
    model = TransformerLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    with torch.no_grad():
        before = model(ids)[0]
        lora = LoraConfig.of(config, 4, None, None)
        add_adapters(model, lora)
        assert torch.equal(model(ids)[0], before)  # B starts at zero
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {
            n for n in model.state_dict() if is_adapter(n)
        }
        for name, p in model.named_parameters():
            if name.endswith("lora_b"):
                p.normal_(0, 0.1)
        adapted = model(ids)[0]
        plain = TransformerLM(config).eval()
        plain.load_state_dict(merged(model.state_dict(), lora))
        assert (plain(ids)[0] - adapted).abs().max() < 1e-5
        assert not torch.allclose(adapted, before)
    assert lora.params(config) == sum(t.numel() for n, t in model.state_dict().items() if is_adapter(n))


def test_lora_config_defaults_and_refusals():
    llama, gpt2 = ModelConfig(**LLAMA), ModelConfig(**{**LLAMA, "n_kv_heads": 4}, architecture="gpt2")
    assert LoraConfig.of(llama, 8, None, None) == LoraConfig(8, 16.0, ("wq", "wk", "wv", "wo", "w1", "w2", "w3"))
    assert LoraConfig.of(gpt2, 8, 8, ["all"]).targets == ("wq", "wk", "wv", "wo", "w1", "w2")
    assert LoraConfig.of(llama, 16, None, ["wk"]).scale == 2.0  # wk is 32 x 16 (two key-value heads)
    with pytest.raises(SettingError, match="17: larger than the projection wk \\(32 x 16\\) it adapts; at most 16"):
        LoraConfig.of(llama, 17, None, None)
    with pytest.raises(SettingError, match="w3: architecture 'gpt2' has no such projection"):
        LoraConfig.of(gpt2, 2, None, ["wq", "w3"])


def test_the_memory_estimate_counts_gradients_and_adamw_of_the_adapters_alone():
    config = ModelConfig(**LLAMA)
    full = training_memory(config, 4, 4)
    adapters = LoraConfig.of(config, 4, None, None).params(config)
    lora = training_memory(config, 4, 4, adapters=adapters)
    assert lora["gradients"] == 4 * adapters and lora["adamw"] == 8 * adapters
    assert lora["weights"] == full["weights"] + 4 * adapters and lora["activations"] == full["activations"]
