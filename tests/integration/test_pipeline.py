"""The whole pipeline through the CLIs on a small generated corpus: stories -> tokenizer -> shards ->
train (the loss falls) -> resume -> sample -> plot -> export-hf loaded by transformers."""

import json

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.cli import cli as model_cli
from gptkit.pretokenize.cli import cli as pretokenize_cli
from gptkit.sample.cli import cli as sample_cli
from gptkit.stories.generate import write_corpus
from gptkit.tokenizer.cli import cli as tokenizer_cli
from gptkit.train.cli import cli as train_cli
from tests.conftest import assert_input_error

MODEL = {
    "context_length": 64,
    "d_model": 64,
    "n_layers": 2,
    "n_heads": 4,
    "d_ff": 160,
    "tie_embeddings": True,
    "vocab_size": 1,
}


def ok(cli, *args):
    res = CliRunner().invoke(cli, [str(a) for a in args])
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def records(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]


def without_timings(records):
    return [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records]


def test_text_to_model_and_back(tmp_path):
    corpus = tmp_path / "stories.txt"
    write_corpus(corpus, 400_000, seed=1)
    ok(tokenizer_cli, "train", "--input", corpus, "--vocab-size", 512, "--out", tmp_path / "tokenizer.json", "--quiet")
    ok(
        pretokenize_cli,
        "--tokenizer",
        tmp_path / "tokenizer.json",
        "--input",
        corpus,
        "--out",
        tmp_path / "stories",
        "--threads",
        2,
        "--quiet",
    )
    (tmp_path / "model.json").write_text(json.dumps(MODEL))
    run = tmp_path / "run"
    common = [
        "--data",
        tmp_path / "stories",
        "--out",
        run,
        "--model",
        tmp_path / "model.json",
        "--batch-size",
        16,
        "--lr",
        0.01,
        "--min-lr",
        0.001,
        "--warmup-steps",
        5,
        "--max-steps",
        150,
        "--log-interval",
        10,
        "--eval-interval",
        50,
        "--eval-tokens",
        8192,
        "--checkpoint-interval",
        100,
        "--device",
        "cpu",
    ]
    res = ok(train_cli, *common)
    assert "unigram entropy" in res.output
    losses = [r["loss"] for r in records(run) if "loss" in r]
    assert losses[-1] < losses[0] - 1.0  # the loss falls by a nat per token or more
    unigram = json.loads((tmp_path / "stories" / "manifest.json").read_text())["totals"]["train"]["unigram_entropy"]
    assert records(run)[-1]["val_loss"] < unigram - 0.5  # it learned more than token frequencies

    # Resume from step 100: the same records as the uninterrupted run.
    uninterrupted = records(run)
    (run / "latest").unlink()
    (run / "latest").symlink_to("checkpoints/step-000100_tokens-102400")
    ok(train_cli, "--out", run, "--resume")
    assert without_timings(records(run)) == without_timings(uninterrupted)

    text = ok(
        sample_cli, "--checkpoint", run / "latest", "--prompt", "Once upon a time", "--max-new-tokens", 40, "--seed", 0
    ).output
    assert text.startswith("Once upon a time") and len(text.split()) > 8

    pytest.importorskip("matplotlib")
    ok(train_cli, "plot", run)
    assert (run / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    transformers = pytest.importorskip("transformers")
    ok(model_cli, "export-hf", "--checkpoint", run / "latest", "--out", tmp_path / "hf")
    hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf").eval()
    ids = torch.tensor([transformers.AutoTokenizer.from_pretrained(tmp_path / "hf").encode("Once upon a time, a cat")])
    from gptkit.model.checkpoint import load_model

    ours, _ = load_model(run / "latest")
    with torch.no_grad():
        assert torch.allclose(hf(ids).logits, ours.eval()(ids)[0], atol=1e-4)


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    res = CliRunner().invoke(train_cli, ["plot", str(tmp_path)])
    assert_input_error(res, "matplotlib is not installed", "pip install")
