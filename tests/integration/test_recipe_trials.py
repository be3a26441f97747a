"""The recipe's trials through `gptkit train`: the cuts of the data's tokenizer tried on the data, what
they scored in the run's first line and in metrics.jsonl, the winner trained on; --merges fixes the cut,
with the recipe or with a model, and a run on a cut samples, evaluates and resumes as any run."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from gptkit.eval.cli import cli as eval_cli
from gptkit.sample.cli import cli as sample_cli
from gptkit.shared.shard_dir import ShardDir
from gptkit.tokenizer import Tokenizer
from gptkit.tokenizer.cut import Unmerge
from gptkit.train.data import data_tokenizer
from tests.conftest import assert_input_error
from tests.training import comparable, invoke, records, run_flags, stopped_after, weights


def test_the_recipe_tries_bytes_and_the_data_s_tokenizer_and_trains_the_winner(data, tmp_path):
    run = tmp_path / "run"
    res = invoke(
        *["--data", data, "--out", run, "--device", "cpu", "--max-time", "6s", "--threads", "1"],
        *["--eval-tokens", "2048", "--eval-interval", "0"],
    )
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith("recipe for ") and "vocabulary " in lines[0] and "the recipe took " in lines[0]
    line = next(line for line in lines if line.startswith("  vocabulary "))  # why, in a line of its own
    assert "by trial, held-out bits per byte: " in line and "bytes (d " in line and "450 (d " in line
    # what it did, on standard error as it went: its plan, each vocabulary's shapes timed, each round scored
    progress = res.stderr.splitlines()
    assert progress[0].startswith("recipe: choosing the model for ") and "2 vocabularies, then trials" in progress[0]
    assert [line.split(",")[0] for line in progress[1:3]] == ["recipe: vocabulary bytes", "recipe: vocabulary 450"]
    assert progress[3].startswith("recipe: trials, round 1 of 1, held-out bits per byte: ") and "s each)" in progress[3]
    recipe = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])["recipe"]
    (first,) = recipe["trials"]  # two candidates: one round
    assert sorted(c["candidate"].split(" ")[0] for c in first) == ["450", "bytes"]
    assert all(c["bpb"] > 0 and c["steps"] >= 2 for c in first) and 0 < recipe["spent_s"] < 6
    winner = min(first, key=lambda c: c["bpb"])["candidate"]
    saved = json.loads((run / "config.json").read_text())
    vocab = 257 if winner.startswith("bytes") else 450
    assert saved["model"]["vocab_size"] == recipe["vocab_size"] == vocab
    assert saved["merges"] == (0 if vocab == 257 else None)
    assert Tokenizer.from_file(run / "latest" / "tokenizer.json").vocab_size == vocab
    assert records(run, "val_bpb")  # and it trained on, to its final evaluation


def test_a_run_of_fixed_length_tries_nothing(data, tmp_path):
    res = invoke(*["--data", data, "--out", tmp_path / "run", "--device", "cpu", "--max-steps", "2"])
    assert res.exit_code == 0, res.output
    assert "  vocabulary 450: no trials, the run's length is given in steps or tokens" in res.stdout


@pytest.fixture(scope="module")
def byte_run(data, model_json, tmp_path_factory):
    """A byte model (--merges 0) of the `data` fixture, 6 steps with checkpoints at 3 and 6."""
    run = tmp_path_factory.mktemp("bytes") / "run"
    args = run_flags(data, run, model_json, merges=0, max_steps=6, checkpoint_interval=3, threads=1)
    res = invoke(*args, "--deterministic")
    assert res.exit_code == 0, res.output
    return run


def test_merges_0_trains_a_byte_model_of_the_same_text(byte_run, data):
    saved = json.loads((byte_run / "config.json").read_text())
    assert saved["merges"] == 0 and saved["model"]["vocab_size"] == 257
    cut = Tokenizer.from_file(byte_run / "latest" / "tokenizer.json")
    assert cut.vocab_size == 257 and cut.merges == [] and cut.special_tokens == {"<|endoftext|>": 256}
    # the run trained on the data's ids mapped to the cut's: the same text, a byte a token
    tokenizer = data_tokenizer(ShardDir(data))
    text = "the cat sat on 12 mats.<|endoftext|>"
    assert Unmerge(tokenizer, 0)(np.array(tokenizer.encode(text)), np.uint16).tolist() == cut.encode(text)


def test_a_byte_model_samples_and_evaluates_as_it_trained(byte_run, tmp_path):
    res = CliRunner().invoke(
        sample_cli,
        ["--checkpoint", str(byte_run / "latest"), "--prompt", "the", "--max-new-tokens", "8", "--device", "cpu"],
    )
    assert res.exit_code == 0, res.output
    (tmp_path / "t.txt").write_text("the cat sat on the mat. " * 20)
    out = tmp_path / "eval.json"
    res = CliRunner().invoke(
        eval_cli,
        ["text", "--checkpoint", str(byte_run / "latest"), "--input", str(tmp_path / "t.txt"), "--out", str(out), "-q"],
    )
    assert res.exit_code == 0, res.output
    scored = json.loads(out.read_text())
    assert scored["tokens"] == scored["bytes"]  # a byte a token


def test_a_run_on_a_cut_resumes_exactly(byte_run, data, model_json, tmp_path):
    stopped = tmp_path / "stopped"
    args = run_flags(data, stopped, model_json, merges=0, max_steps=6, checkpoint_interval=3, threads=1)
    res = invoke(*args, "--deterministic")
    assert res.exit_code == 0, res.output
    stopped_after(stopped, 3)
    res = invoke("--out", stopped, "--resume")
    assert res.exit_code == 0, res.output
    for name, tensor in weights(byte_run / "latest").items():
        assert weights(stopped / "latest")[name].equal(tensor), name
    assert comparable(stopped) == comparable(byte_run)


def test_a_resume_with_other_merges_names_merges_not_the_data(byte_run, tmp_path):
    """The cut changes the checkpoint's tokenizer: the resume blamed the data ("encoded with tokenizer ...")."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(byte_run, run, symlinks=True)
    assert_input_error(
        invoke("--out", run, "--resume", "--merges", 60, "--max-steps", 8),
        f"--merges 60: the run in {run} trained on the data's tokenizer cut to 0 merges",
        "resume without --merges",
    )


def test_eval_reads_the_data_a_run_on_a_cut_trained_on_as_the_trainer_does(byte_run, data, tmp_path):
    """`eval text --copy-from DATA` (and `--data DATA`) on a run whose tokenizer is a cut of DATA's (the
    trials' choice, or --merges) refused the data the run trained on: its ids are mapped to the cut's,
    as the trainer maps them."""
    from gptkit.shared.shard_data import ShardData

    tokenizer = data_tokenizer(ShardDir(data))
    train = ShardData(ShardDir(data), "train", tokenizer.vocab_size, tokenizer.fingerprint, 1)
    (tmp_path / "val.txt").write_text("the cat sat on the mat. " * 20)
    at = ["text", "--checkpoint", str(byte_run / "latest"), "-q"]
    for source, out in ((["--data", str(data)], "val.json"), (["--input", str(tmp_path / "val.txt")], "text.json")):
        res = CliRunner().invoke(
            eval_cli, [*at, *source, "--copy-from", str(data), "--adapt", "--out", str(tmp_path / out)]
        )
        assert res.exit_code == 0, res.output
        scored = json.loads((tmp_path / out).read_text())
        assert scored["copy_tokens"] == Unmerge(tokenizer, 0).length(train.span(0, int(train.starts[-1])))
        assert scored["bpb"] < scored["model_bpb"]  # copied from the training text
    assert scored["tokens"] == scored["bytes"]  # of the text: a byte a token


def test_a_bad_cut_is_one_line(data, model_json, tmp_path, small_tokenizer):
    merges = len(small_tokenizer[0].merges)
    args = run_flags(data, tmp_path / "run", model_json, max_steps=1)
    assert_input_error(invoke(*args, "--merges", merges + 1), "--merges", f"{merges:,} merges")
    assert_input_error(invoke(*args, "--merges", "-1"), "--merges", "-1")
    assert not (tmp_path / "run").exists()
