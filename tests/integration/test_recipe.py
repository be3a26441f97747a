"""The default recipe (train/recipe/): its choices for corpus sizes, budgets and machines, the
timing it chooses by, and how a run uses it (flags win, --config and --model bypass it, one line
names the choice)."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gptkit.model.config import ModelConfig, load_config
from gptkit.model.info import model_cost, training_memory
from gptkit.runtime.threads import Threads
from gptkit.shared.shard_data import ShardData
from gptkit.shared.shard_dir import ShardDir
from gptkit.train.cli import cli
from gptkit.train.config import TrainConfig
from gptkit.train.data import data_tokenizer
from gptkit.train.processes import Dist
from gptkit.train.recipe.ladder import LADDER, TOKENS_PER_PARAM, choose, dropout_for
from gptkit.train.recipe.repeats import REPEAT_CONTEXT, Repeats
from gptkit.train.recipe.report import line
from gptkit.train.recipe.settings import Recipe, recipe_settings
from gptkit.train.recipe.timing import step_timer
from gptkit.train.sections import DEFAULT_BUDGET, WITHOUT_RECIPE
from gptkit.train.settle import completed, from_layers
from tests.unit.test_shards import U16, write_llmc

MINUTE = 60
CORPORA = (50_000, 400_000, 4_000_000, 400_000_000)  # training tokens: ~100 KB to ~1 GB of text
BUDGETS = (30, 2 * MINUTE, 10 * MINUTE, 60 * MINUTE, 24 * 60 * MINUTE)
CPU, GPU = 60e9, 300e12  # training FLOP/s of a 2-core CPU and of a GPU at these shapes


def flop_rate(rate, vocab_size=1024):
    """A step timer for a machine doing `rate` training FLOP/s at every shape, a step with dropout
    1.7 times as long (nanoGPT's on a CPU: the most it costs)."""

    def seconds_per_step(shape, dropout=0.0):
        seconds = (
            model_cost(ModelConfig(**shape.model(vocab_size))).flops_per_token * shape.batch * shape.context / rate
        )
        return seconds * (1.7 if dropout else 1)

    return seconds_per_step


@pytest.mark.parametrize("tokens", CORPORA)
@pytest.mark.parametrize("rate", (CPU, GPU))
def test_more_time_never_buys_a_smaller_model(tokens, rate):
    sizes = [choose(tokens, 1024, seconds, flop_rate(rate)).params for seconds in BUDGETS]
    assert sizes == sorted(sizes)


@pytest.mark.parametrize("seconds", BUDGETS)
def test_more_data_never_buys_a_smaller_model(seconds):
    sizes = [choose(tokens, 1024, seconds, flop_rate(CPU)).params for tokens in CORPORA]
    assert sizes == sorted(sizes)


def test_the_embedding_does_not_count_against_a_larger_vocabulary():
    """The tokens per parameter count the parameters outside the embedding, whose rows cost a
    lookup: with the step times timed on the 2-core machine for 4,096 tokens, 2 minutes of 1 MB
    buy d 96, as for 1,024 tokens (counting the embedding, d 64, which scored worse)."""
    timed = {LADDER[0]: 0.075, LADDER[1]: 0.107, LADDER[2]: 0.2}
    chosen = choose(250_000, 4096, 2 * MINUTE, lambda shape, dropout=0.0: timed.get(shape))
    assert chosen.shape == LADDER[1]


def repeating(tmp_path, tokens):
    tmp_path.mkdir(exist_ok=True)
    write_llmc(tmp_path / "r_train.bin", tokens, U16)
    write_llmc(tmp_path / "r_val.bin", tokens[:10], U16)
    return Repeats.of(ShardData(ShardDir(tmp_path), "train", 1 << 16, "", 1, verify=False))


def test_repeats_measure_how_far_back_each_span_was_last_seen(tmp_path):
    """120 random tokens twice, then 120 others: each span of the second copy was seen 120 tokens
    before, no other was."""
    rng = np.random.default_rng(0)
    block = list(rng.integers(0, 60_000, 120))
    repeats = repeating(tmp_path, block + block + list(rng.integers(0, 60_000, 120)))
    seen = repeats.distances < 10**9
    assert seen.nonzero()[0].tolist() == list(range(120, 233)) and (repeats.distances[seen] == 120).all()
    assert repeats.share(64) == pytest.approx(113 / len(repeats.distances)) and repeats.share(128) == 0


def test_text_that_repeats_itself_within_256_tokens_gets_256_of_context(tmp_path):
    """The smallest rung (64 tokens) takes 256 at the same tokens a step, timed so; a rung whose
    context already holds the repeats, and a corpus that does not repeat itself, keep the ladder's."""
    rng = np.random.default_rng(0)
    block = list(rng.integers(0, 60_000, 120))
    repeats = repeating(tmp_path, (block * 2 + list(rng.integers(0, 60_000, 240))) * 20)
    assert repeats.fit(LADDER[0]).context == REPEAT_CONTEXT and repeats.fit(LADDER[0]).batch == LADDER[0].batch // 4
    assert repeats.fit(LADDER[1]) == LADDER[1] and repeats.fit(LADDER[4]) == LADDER[4]
    assert repeating(tmp_path / "random", list(rng.integers(0, 60_000, 10_000))).fit(LADDER[0]) == LADDER[0]
    timed = []
    chosen = choose(34_000, 1024, 2 * MINUTE, lambda shape, dropout=0.0: timed.append(shape) or 0.05, repeats)
    assert (
        timed[0] == repeats.fit(LADDER[0])
        and chosen.shape == timed[0]
        and chosen.settings()["model"]["context_length"] == 256
    )
    assert chosen.repeat_share == repeats.share(64) >= 0.03


def test_a_faster_machine_never_buys_a_smaller_model():
    sizes = [choose(4_000_000, 4096, 10 * MINUTE, flop_rate(rate, 4096)).params for rate in (10e9, CPU, 1e12, GPU)]
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


@pytest.mark.parametrize("tokens", CORPORA)
@pytest.mark.parametrize("seconds", BUDGETS)
def test_each_choice_is_a_sound_config(tokens, seconds):
    r = choose(tokens, 4096, seconds, flop_rate(CPU, 4096))
    model = ModelConfig(**r.settings()["model"])
    config = completed(TrainConfig.of(data="d", out="o", max_time="1m", **r.settings()))
    assert config.batch.context_length is None  # the model's own context
    assert model.vocab_size == 4096 and model.head_dim % 2 == 0
    schedule = config.lr_schedule
    assert schedule.warmup_steps is None and schedule.min_lr == config.optim.lr / 10  # the schedule's defaults
    tokens = r.steps * config.batch.batch_size * model.context_length
    assert (
        tokens >= TOKENS_PER_PARAM * model_cost(model).non_embedding_params or r.shape == LADDER[0]
    )  # only the smallest trains short
    activations = training_memory(model, config.batch.batch_size, activation_bytes=4)["activations"]
    assert activations < 8 * 2**30 or r.shape == LADDER[-1]  # a step of a CPU's rung fits a laptop's memory


def described(choice, **settings):
    """The recipe's line for a run of 2 minutes on a CPU with `settings`."""
    config = completed(TrainConfig.of(data="d", out="o", max_time="2m", **settings))
    return line(
        Recipe(choice, budget="2m", where="cpu"), ModelConfig(**config.job.model), config.batch, config.optim.lr
    )


def test_dropout_where_the_passes_and_the_parameters_could_memorize_the_corpus_and_recorded_in_the_model():
    """Chinese at 27 passes memorized by a 0.36M model (2.20 bits per byte without dropout, 2.09 with
    0.2), Urdu at 27 passes not by a 0.17M one (0.990, 1.010); and no dropout within a few passes,
    however big the model (a GPU's pretraining run)."""
    assert dropout_for(27, 0.36e6) == 0.2 and dropout_for(27, 0.17e6) == 0.0
    assert dropout_for(3.9, 1e9) == 0.0 and dropout_for(4, 1e9) == 0.2
    assert [dropout_for(e, 1e6) for e in (5.9, 6)] == [0.0, 0.2]
    once = choose(400_000_000, 1024, 10 * MINUTE, flop_rate(CPU))
    assert once.epochs() < 1 and "dropout" not in once.settings()["model"]
    many = choose(34_000, 1024, 2 * MINUTE, flop_rate(CPU))
    model = ModelConfig(**many.settings()["model"])
    assert many.epochs() > 64 and model.dropout == 0.2 and model.attention_dropout == 0.0
    assert many.seconds_per_step == flop_rate(CPU)(many.shape, 0.2)  # its steps are those of the model it trains
    line = described(many, **many.settings())
    assert (
        f"dropout 0.2: {many.epochs():.0f} passes x {many.params / 1e6:.2f}M parameters = " in line
        and "past the 6M" in line
    )
    # a length in steps sets the passes the dropout is chosen for
    assert "dropout" not in many.settings(steps=1)["model"]
    gpu_hour = choose(10**10, 50_304, 60 * MINUTE, flop_rate(GPU, 50_304))
    assert gpu_hour.params > 100e6 and "dropout" not in gpu_hour.settings()["model"]


def test_no_dropout_where_its_slower_steps_would_not_make_the_passes_that_call_for_it():
    """2 minutes of 50 ms steps make 1.2x the parameter-passes that call for dropout; with dropout's
    85 ms they would make 0.7x: no dropout, and the line says why."""
    params = model_cost(ModelConfig(**LADDER[0].model(1024))).params
    tokens = int(2400 * LADDER[0].batch * LADDER[0].context * params / (1.2 * 6e6))
    r = choose(
        tokens,
        1024,
        2 * MINUTE,
        lambda shape, dropout=0.0: (0.085 if dropout else 0.05) if shape == LADDER[0] else None,
    )
    assert r.steps == 2400 and dropout_for(r.epochs(), r.params) and "dropout" not in r.settings()["model"]
    line = described(r, **r.settings())
    assert "dropout 0: " in line and "past the 6M" in line
    assert "but at the 85 ms a step dropout takes it would make 25 passes, 4.2M\n" in line


def test_a_small_corpus_caps_the_model_and_a_gpu_hour_buys_a_big_one():
    small, big = (
        choose(50_000, 1024, 24 * 60 * MINUTE, flop_rate(CPU)),
        choose(400_000_000, 1024, 24 * 60 * MINUTE, flop_rate(CPU)),
    )
    assert small.params < big.params
    gpu_hour = choose(10**10, 50_304, 60 * MINUTE, flop_rate(GPU, 50_304))
    assert gpu_hour.params > 100e6 and gpu_hour.shape.context >= 512


def test_the_climb_stops_where_a_shape_cannot_be_timed():
    timed = []

    def out_of_memory_from_the_third(shape, dropout=0.0):
        timed.extend([] if dropout else [shape])
        return None if len(timed) >= 3 else 0.001

    r = choose(400_000_000, 1024, 24 * 60 * MINUTE, out_of_memory_from_the_third)
    assert r.shape == LADDER[1] and timed == list(LADDER[:3])


def test_step_timer_times_real_steps_within_its_share_of_the_budget():
    threads = Threads(1)
    seconds = step_timer(512, Dist(), threads, budget_seconds=600)(LADDER[0])
    assert 0 < seconds < 5
    spent = step_timer(512, Dist(), threads, budget_seconds=0.001)
    assert spent(LADDER[0]) > 0 and spent(LADDER[1]) is None  # the smallest shape is always timed
    spent = step_timer(512, Dist(), threads, budget_seconds=0.001)
    assert spent(LADDER[0]) > 0 and spent(LADDER[0], 0.2) > 0  # and timed again with dropout


# -- a run without --config --------------------------------------------------------------------


@pytest.fixture(scope="module")
def data(small_text, small_tokenizer, tmp_path_factory):
    """A shard directory of `small_text` (a few hundred KB) with the 450-token tokenizer."""
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    tmp = tmp_path_factory.mktemp("recipe")
    corpus = tmp / "corpus.txt"
    corpus.write_text(small_text)
    out = tmp / "data"
    res = CliRunner().invoke(
        pretokenize_cli,
        [
            "--tokenizer",
            str(small_tokenizer[1]),
            "--input",
            str(corpus),
            "--out",
            str(out),
            "--val-tokens",
            "2000",
            "--quiet",
        ],
    )
    assert res.exit_code == 0, res.output
    return out


def chosen(data, **settings):
    """The config of a run with the recipe's settings under `settings`; prints the recipe's line. The
    data's tokenizer whole, unless `settings` give its merges: no trials."""
    shards = ShardDir(str(data))
    tokenizer = data_tokenizer(shards)
    config = TrainConfig.of(data=str(data), out="run", device="cpu", **{"merges": len(tokenizer.merges), **settings})
    layer, recipe = recipe_settings(config.length, config.batch, config.job.seed, shards, tokenizer, Dist(), Threads(1))
    config = from_layers(config.to_dict(), layer)
    settled = completed(config)
    print(line(recipe, ModelConfig(**config.job.model), settled.batch, settled.optim.lr))
    return config


def test_without_config_the_recipe_sizes_the_run(data, capsys):
    config = chosen(data)
    line = capsys.readouterr().out
    assert line.startswith("recipe for ") and f"{DEFAULT_BUDGET} (the default budget) on cpu (1 thread)" in line
    model = config.job.model
    assert isinstance(model, dict) and f"d {model['d_model']}," in line and "ms a step as timed here" in line
    assert f"batch {config.batch.batch_size} x {model['context_length']}" in line
    assert config.length.max_time == DEFAULT_BUDGET and config.length.max_steps is None  # only the length that applies
    if model["context_length"] < REPEAT_CONTEXT:  # the corpus's repeats were measured, and said
        assert f"context {model['context_length']}, the ladder's: " in line and "3% asks for 256" in line, line


def test_flags_beat_the_recipe(data, capsys):
    base = chosen(data)
    config = chosen(data, batch_size=3, lr=0.5, warmup_steps=7, max_time="1m")
    assert (config.batch.batch_size, config.optim.lr, config.lr_schedule.warmup_steps, config.length.max_time) == (
        3,
        0.5,
        7,
        "1m",
    )

    # the same shape; the dropout (and with it the attention's, recorded) is that of the epochs each budget makes
    def shape(model):
        return {k: v for k, v in model.items() if "dropout" not in k}

    assert shape(config.job.model) == shape(base.job.model) and completed(config).lr_schedule.min_lr == 0.05
    fixed = chosen(data, max_steps=40)  # a length flag replaces the default budget; the evaluations fit it
    assert fixed.length.max_time is None and fixed.length.max_steps == 40 and fixed.evaluation.eval_interval == 8
    assert "and 1m on cpu" in capsys.readouterr().out
    assert chosen(data, context_length=32, batch_size=5).batch.context_length == 32
    assert "batch 5 x 32," in capsys.readouterr().out
    # the evaluations fit the steps of the tokens at the flags' batch, context and accumulation: 48,000 / (5 x 32 x 3)
    assert (
        chosen(data, max_tokens=48_000, context_length=32, batch_size=5, grad_accum=3).evaluation.eval_interval
        == 100 // 5
    )


def test_a_run_given_its_model_takes_the_plain_defaults():
    config = completed(TrainConfig.of(data="d", out="o", model="tiny"))
    assert {
        k: config.get(k) for k in WITHOUT_RECIPE
    } == WITHOUT_RECIPE and config.lr_schedule.min_lr == config.optim.lr / 10
    timed = completed(TrainConfig.of(data="d", out="o", model="tiny", max_time="1m"))
    assert timed.length.max_steps is None and timed.length.max_time == "1m"


def test_the_run_logs_the_recipe_and_records_it(data, tmp_path):
    run = tmp_path / "run"
    res = CliRunner().invoke(
        cli,
        [
            "--data",
            str(data),
            "--out",
            str(run),
            "--device",
            "cpu",
            "--max-steps",
            "2",
            "--batch-size",
            "2",
            "--threads",
            "1",
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    first, *why = lines[: next(i for i, line in enumerate(lines) if line.startswith("training "))]
    # the choice in its first line, short; why in the lines after it, a reason a line
    assert first.startswith("recipe for ") and "on cpu (1 thread)" in first and len(first) < 250, first
    assert why and all(line.startswith("  ") for line in why)
    assert any(
        line.startswith("  dropout 0: ") and "passes over the corpus, fewer than the 4 it takes to memorize it" in line
        for line in why
    )  # the 2 steps'
    saved = json.loads((run / "config.json").read_text())
    assert f"d {saved['model']['d_model']}, {saved['model']['n_layers']} layers" in first
    # meanwhile, on standard error from its start, what the recipe does: no trials here, one vocabulary timed
    progress = res.stderr.splitlines()
    assert progress[0].startswith("recipe: choosing the model for ") and "no trials: the run's length" in progress[0]
    assert progress[1].startswith("recipe: vocabulary 450, ms a step: d 64 x 2 ") and "; takes d " in progress[1]
    assert saved["max_steps"] == 2 and saved["max_time"] is None and saved["batch_size"] == 2
    assert saved["lr"] is not None and saved["min_lr"] == saved["lr"] / 10


def test_config_bypasses_the_recipe(data, tmp_path):
    res = CliRunner().invoke(
        cli,
        [
            "--config",
            "tiny",
            "--data",
            str(data),
            "--out",
            str(tmp_path / "run"),
            "--device",
            "cpu",
            "--max-steps",
            "1",
            "--batch-size",
            "1",
            "--context-length",
            "16",
            "--eval-tokens",
            "16",
        ],
    )
    assert res.exit_code == 0, res.output
    assert "recipe" not in res.output
    tiny = {**load_config("tiny").to_dict(), "vocab_size": 450}  # the preset, resolved for the data's tokenizer
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"] == tiny


def test_a_run_far_slower_than_timed_lets_the_recipe_choose_again(data, tmp_path, monkeypatch):
    """The machine gets busy after the recipe timed it: the run stops before its first checkpoint
    and the recipe chooses again for the time left, once. The first run's model is freed before
    the second's is built. (A run with the data's merges given, so without trials: one that goes
    on from the trials' winner keeps it.)"""
    import time
    import weakref

    from gptkit.train.trainer import Trainer

    step, init, models, freed = Trainer.train_step, Trainer.__init__, [], []

    def slow_step(self):
        time.sleep(
            0.3
        )  # many times the recipe's steps of the smallest shape (~10 ms idle, a few times that under load)
        return step(self)

    def recorded_init(self, *args, **kwargs):
        freed.append([model() is None for model in models])  # the earlier runs' models, as this one is built
        init(self, *args, **kwargs)
        models.append(weakref.ref(self.model))

    monkeypatch.setattr(Trainer, "train_step", slow_step)
    monkeypatch.setattr(Trainer, "__init__", recorded_init)
    run = tmp_path / "run"
    res = CliRunner().invoke(
        cli,
        [
            "--data",
            str(data),
            "--out",
            str(run),
            "--device",
            "cpu",
            "--max-time",
            "12s",
            "--threads",
            "1",
            "--eval-tokens",
            "256",
            "--merges",
            str(len(data_tokenizer(ShardDir(str(data))).merges)),
        ],
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    again = next(
        i for i, line in enumerate(lines) if "what the recipe timed: the machine got slower; choosing again" in line
    )
    assert lines[again + 1].startswith("recipe for ") and sum(line.startswith("recipe for ") for line in lines) == 2
    saved = json.loads((run / "config.json").read_text())
    assert saved["max_time"].endswith("s") and float(saved["max_time"][:-1]) < 12  # the time that was left
    assert (run / "latest").exists() and freed == [[], [True]]


def test_help_shows_what_a_run_uses():
    """No default in --help that a run would not use: the recipe's settings say so, paths are paths,
    required options are marked."""
    text = " ".join(CliRunner().invoke(cli, ["run", "--help"], terminal_width=400).output.split())
    assert "--data DIR" in text and "--out DIR" in text and "[required]" in text
    for setting in ("--model PRESET|FILE", "--batch-size INTEGER", "--lr FLOAT", "--eval-interval INTEGER"):
        option = text[text.index(setting) :]
        assert "[default: the recipe's for the data, the budget and the device" in option[: option.index("]") + 1]
    assert "[default: 1000]" not in text and "[default: 0.001]" not in text and "[default: tiny]" not in text
    assert f"[default: {DEFAULT_BUDGET} with the recipe" in text and "--nproc-per-node" in text
    assert "gptkit train --nproc-per-node" in text and "gptkit.train ..." not in text
