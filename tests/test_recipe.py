"""The default CPU recipe (train/recipe.py): its choices for corpus sizes and budgets, and how
the CLI uses it (flags win, --config and --model bypass it, one line names the choice)."""
import json

import pytest
from click.testing import CliRunner

from gptkit.model.config import ModelConfig, load_config
from gptkit.model.info import training_memory
from gptkit.shared.errors import SettingError
from gptkit.train.cli import cli
from gptkit.train.config import TrainConfig, load_train_config
from gptkit.train.recipe import DEFAULT_BUDGET, GPU_PRESET, LADDER, TOKENS_PER_PARAM, recipe, recipe_config

MINUTE = 60
CORPORA = (50_000, 400_000, 4_000_000, 400_000_000)  # training tokens: ~100 KB to ~1 GB of text
BUDGETS = (30, 2 * MINUTE, 10 * MINUTE, 60 * MINUTE, 24 * 60 * MINUTE)


@pytest.mark.parametrize("tokens", CORPORA)
def test_more_time_never_buys_a_smaller_model(tokens):
    sizes = [recipe(tokens, 1024, seconds, threads=2).params for seconds in BUDGETS]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("seconds", BUDGETS)
def test_more_data_never_buys_a_smaller_model(seconds):
    sizes = [recipe(tokens, 1024, seconds, threads=2).params for tokens in CORPORA]
    assert sizes == sorted(sizes)


def test_more_threads_never_buy_a_smaller_model():
    sizes = [recipe(4_000_000, 4096, 10 * MINUTE, threads).params for threads in (1, 2, 8, 32)]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("tokens", CORPORA)
@pytest.mark.parametrize("seconds", BUDGETS)
def test_each_choice_is_a_sound_config(tokens, seconds):
    r = recipe(tokens, 4096, seconds, threads=2)
    model = ModelConfig(**r.settings()["model"])
    config = TrainConfig(data="d", out="o", **r.settings())
    assert config.context_length is None  # the model's own context
    assert model.vocab_size == 4096 and model.head_dim % 2 == 0
    assert 1 <= config.warmup_steps < max(r.steps, 2) and config.min_lr < config.lr
    tokens = r.steps * config.batch_size * model.context_length
    assert tokens >= TOKENS_PER_PARAM * r.params or r.shape == LADDER[0]  # only the smallest shape trains short
    activations = training_memory(model, config.batch_size, activation_bytes=4)["activations"]
    assert activations < 8 * 2**30  # a step of any rung fits a laptop's memory


def test_the_choice_is_deterministic_and_grows_with_the_budget():
    assert recipe(400_000, 1024, 120, 2) == recipe(400_000, 1024, 120, 2)
    short, long = recipe(400_000, 1024, 120, 2), recipe(400_000_000, 1024, 24 * 60 * MINUTE, 2)
    assert short.shape.d_model < long.shape.d_model and short.shape.context <= long.shape.context


def test_a_small_corpus_caps_the_model():
    small, big = recipe(50_000, 1024, 24 * 60 * MINUTE, 2), recipe(400_000_000, 1024, 24 * 60 * MINUTE, 2)
    assert small.params < big.params


# -- the CLI ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def data(small_text, small_tokenizer, tmp_path_factory):
    """A shard directory of `small_text` (a few hundred KB) with the 450-token tokenizer."""
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    tmp = tmp_path_factory.mktemp("recipe")
    corpus = tmp / "corpus.txt"
    corpus.write_text(small_text)
    out = tmp / "data"
    res = CliRunner().invoke(pretokenize_cli, ["--tokenizer", str(small_tokenizer[1]), "--input", str(corpus), "--out",
                                               str(out), "--val-tokens", "2000", "--quiet"])
    assert res.exit_code == 0, res.output
    return out


def chosen(data, **flags):
    return recipe_config({"data": str(data), "out": "run", "device": "cpu", **flags})


def test_without_config_the_recipe_sizes_the_run(data, capsys):
    config = chosen(data)
    line = capsys.readouterr().out
    assert line.startswith("recipe for ") and f"{DEFAULT_BUDGET} (the default budget) on cpu" in line
    assert isinstance(config.model, dict) and f"d {config.model['d_model']}," in line
    assert f"batch {config.batch_size} x {config.model['context_length']}" in line
    assert config.max_time == DEFAULT_BUDGET and config.max_steps == TrainConfig.max_steps


def test_flags_beat_the_recipe(data, capsys):
    base = chosen(data)
    config = chosen(data, batch_size=3, lr=0.5, warmup_steps=7, max_time="1m")
    assert (config.batch_size, config.lr, config.warmup_steps, config.max_time) == (3, 0.5, 7, "1m")
    assert config.model == base.model and config.min_lr == base.min_lr
    fixed = chosen(data, max_steps=40)  # a length flag replaces the default budget; the warmup fits it
    assert fixed.max_time is None and fixed.warmup_steps == 2 and fixed.eval_interval == 8
    assert "and 1m on cpu" in capsys.readouterr().out
    assert chosen(data, context_length=32, batch_size=5).context_length == 32
    assert "batch 5 x 32," in capsys.readouterr().out


def test_a_model_flag_or_no_data_bypasses_the_recipe(data, capsys):
    assert chosen(data, model="tiny") == TrainConfig(data=str(data), out="run", device="cpu", model="tiny")
    with pytest.raises(SettingError, match="^data is needed"):  # the CLI shows it as --data
        recipe_config({"out": "run"})
    assert capsys.readouterr().out == ""


def test_cuda_takes_the_gpu_preset(data, capsys):
    config = chosen(data, device="cuda", lr=0.5)
    assert config == load_train_config(GPU_PRESET, {"data": str(data), "out": "run", "device": "cuda", "lr": 0.5})
    assert capsys.readouterr().out == f"no recipe on cuda: the {GPU_PRESET} preset (pass --config for another)\n"


def test_the_run_logs_the_recipe_and_records_it(data, tmp_path):
    """--threads sets torch's threads before the recipe measures the machine by them."""
    import torch

    run, before = tmp_path / "run", torch.get_num_threads()
    try:
        res = CliRunner().invoke(cli, ["--data", str(data), "--out", str(run), "--device", "cpu", "--max-steps", "2",
                                       "--batch-size", "2", "--threads", "1"])
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert res.exit_code == 0, res.output
    first, second = res.output.splitlines()[:2]
    assert first.startswith("recipe for ") and "on cpu (1 threads)" in first and second.startswith("training ")
    saved = json.loads((run / "config.json").read_text())
    assert f"d {saved['model']['d_model']}, {saved['model']['n_layers']} layers" in first


def test_config_bypasses_the_recipe(data, tmp_path):
    res = CliRunner().invoke(cli, ["--config", "tiny", "--data", str(data), "--out", str(tmp_path / "run"), "--device", "cpu",
                                   "--max-steps", "1", "--batch-size", "1", "--context-length", "16", "--eval-tokens", "16"])
    assert res.exit_code == 0, res.output
    assert "recipe" not in res.output
    tiny = {**load_config("tiny").to_dict(), "vocab_size": 450}  # the preset, resolved for the data's tokenizer
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"] == tiny
