"""LoRA's pieces (model/lora/): adapters and trained token rows
start as the base model exactly, merging them computes what they compute apart, the rows get
their tokens' gradients alone, their count, and what they spare of a step's memory estimate."""

import pytest
import torch

from gptkit.model.checkpoint import model_tensors
from gptkit.model.config import ModelConfig
from gptkit.model.info import training_memory
from gptkit.model.lora import LoraConfig, add_adapters, is_adapter, merged, train_token_names
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import SettingError

LLAMA = dict(vocab_size=97, context_length=32, d_model=32, n_layers=2, n_heads=4, n_kv_heads=2, d_ff=48)


@pytest.mark.parametrize("architecture, tied", [("llama", False), ("llama", True), ("gpt2", False)])
def test_adapters_start_as_the_base_and_merge_into_what_they_compute(architecture, tied):
    config = ModelConfig(
        **{**LLAMA, "n_kv_heads": 4 if architecture == "gpt2" else 2}, architecture=architecture, tie_embeddings=tied
    )
    torch.manual_seed(0)
    model = TransformerLM(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 16))
    ids[0, :3] = torch.tensor([5, 90, 5])  # two of the trained tokens' rows in the input
    with torch.no_grad():
        before = model(ids)[0]
        lora = LoraConfig.of(config, 4, None, None, [90, 5, 96])
        add_adapters(model, lora)
        assert (model(ids)[0] - before).abs().max() < 1e-6  # B starts at zero, the rows as the weights' own
        saved = model_tensors(model)
        assert {n for n, p in model.named_parameters() if p.requires_grad} == {n for n in saved if is_adapter(n)}
        rows = {n for n in saved if n.endswith(".token_rows")}
        assert rows == ({"embedding.token_rows"} if tied else {"embedding.token_rows", "lm_head.token_rows"})
        for name, p in model.named_parameters():
            if name.endswith(("lora_b", "token_rows")):
                p.add_(torch.randn_like(p) * 0.1)
        adapted = model(ids)[0]
        plain = TransformerLM(config).eval()
        plain.load_state_dict(merged(saved, lora), strict=False)  # a tied head is the embedding
        assert (plain(ids)[0] - adapted).abs().max() < 1e-5
        assert not torch.allclose(adapted, before)
        # the rows of the other tokens are the base's
        others = [i for i in range(config.vocab_size) if i not in lora.tokens]
        assert torch.equal(plain.embedding.weight[others], model.embedding.weight[others])
        assert torch.equal(plain.lm_head.weight[others], model.lm_head.weight[others])
        assert not torch.equal(plain.lm_head.weight[[5, 90, 96]], model.lm_head.weight[[5, 90, 96]])
    assert lora.params(config) == sum(t.numel() for n, t in saved.items() if is_adapter(n))


def test_the_trained_rows_get_the_gradients_of_their_tokens_alone():
    config = ModelConfig(**LLAMA, tie_embeddings=False)
    torch.manual_seed(0)
    model = TransformerLM(config)
    add_adapters(model, LoraConfig.of(config, 2, None, ["wq"], [3, 7]))
    ids = torch.tensor([[3, 1, 2, 4, 3]])
    model(ids[:, :-1], ids[:, 1:])[1].backward()
    embedding, head = model.embedding.token_rows.grad, model.lm_head.token_rows.grad
    assert embedding[0].abs().sum() > 0 and torch.equal(embedding[1], torch.zeros_like(embedding[1]))  # 7 not read
    assert head.abs().min(dim=1).values.gt(0).all()  # a softmax moves every logit's row, 3's up, 7's down
    assert model.embedding.weight.grad is None and model.lm_head.weight.grad is None


def test_lora_config_defaults_and_refusals():
    llama, gpt2 = ModelConfig(**LLAMA), ModelConfig(**{**LLAMA, "n_kv_heads": 4}, architecture="gpt2")
    assert LoraConfig.of(llama, 8, None, None) == LoraConfig(8, 16.0, ("wq", "wk", "wv", "wo", "w1", "w2", "w3"))
    assert LoraConfig.of(gpt2, 8, 8, ["all"]).targets == ("wq", "wk", "wv", "wo", "w1", "w2")
    assert LoraConfig.of(llama, 16, None, ["wk"]).scale == 2.0  # wk is 32 x 16 (two key-value heads)
    with pytest.raises(SettingError, match="17: larger than the projection wk \\(32 x 16\\) it adapts; at most 16"):
        LoraConfig.of(llama, 17, None, None)
    with pytest.raises(SettingError, match="w3: architecture 'gpt2' has no such projection"):
        LoraConfig.of(gpt2, 2, None, ["wq", "w3"])
    assert LoraConfig.of(llama, 2, None, None, [9, 3, 9]).tokens == (3, 9)
    with pytest.raises(SettingError, match="97: not a token id of the model's vocabulary \\(0 to 96\\)"):
        LoraConfig.of(llama, 2, None, None, [3, 97])
    assert train_token_names("special, 12,special") == ["special", 12] and train_token_names("none") == ["none"]
    for bad in ("none,3", "<|end|>", "", "-1"):
        with pytest.raises(SettingError, match="expected none \\(alone\\), or special and token ids"):
            train_token_names(bad)


def test_the_memory_estimate_counts_gradients_and_adamw_of_the_adapters_alone():
    config = ModelConfig(**LLAMA)
    full = training_memory(config, 4, 4)
    adapters = LoraConfig.of(config, 4, None, None).params(config)
    lora = training_memory(config, 4, 4, adapters=adapters)
    assert lora["gradients"] == 4 * adapters and lora["adamw"] == 8 * adapters
    assert lora["weights"] == full["weights"] + 4 * adapters and lora["activations"] == full["activations"]
