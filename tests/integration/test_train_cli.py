"""`gptkit train` through click's runner: warmups and --max-time as the log records them, non-finite
losses, lengths given twice, bad input, and the CLI end to end (train, log, checkpoint, sample)."""

import json
import re
import shutil

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import load_model
from gptkit.model.model import TransformerLM
from gptkit.shared.errors import SettingError
from gptkit.shared.shards import ShardHeader
from gptkit.train.config import TrainConfig
from gptkit.train.processes import Dist
from gptkit.train.run import train
from gptkit.train.settle import load_train_config, settle
from tests.conftest import assert_input_error, english_like
from tests.training import MODEL, comparable, config, flags, invoke, latest_step, records, same_files


def test_a_given_warmup_is_obeyed_however_long_the_run(data, model_json, tmp_path):
    """The lr a log line records is the one its step trained with: step s (from 1) is at (s - 1) / warmup of the peak."""
    for steps, warmup in ((8, 4), (4, 8)):
        run = tmp_path / f"{steps}-{warmup}"
        res = invoke(
            *flags(
                data=data,
                out=run,
                model=model_json,
                device="cpu",
                batch_size=4,
                context_length=32,
                lr=1e-3,
                max_steps=steps,
                warmup_steps=warmup,
                eval_interval=0,
                eval_tokens=256,
                log_interval=1,
            )
        )
        assert res.exit_code == 0, res.output
        lrs = [r["lr"] for r in records(run)]
        assert len(lrs) == steps and lrs[: min(steps, warmup)] == pytest.approx(
            [1e-3 * s / warmup for s in range(min(steps, warmup))]
        )
    assert lrs[-1] == pytest.approx(1e-3 * 3 / 8)  # a run shorter than its warmup ends warming up
    assert records(tmp_path / "8-4")[4]["lr"] == pytest.approx(1e-3)  # the peak where the warmup ends


def test_max_time_plans_the_steps_to_end_on_time(data, model_json, tmp_path, monkeypatch):
    monkeypatch.setattr(
        "gptkit.train.budget.UNPLANNED", 50_000
    )  # a planning bug ends the test instead of running forever
    run = tmp_path / "run"
    res = invoke(
        *flags(
            data=data,
            out=run,
            model=model_json,
            device="cpu",
            batch_size=4,
            context_length=32,
            max_time="2s",
            warmup_steps=2,
            eval_interval=0,
            eval_tokens=256,
            log_interval=5,
            checkpoint_interval=0,
        )
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert "steps 0 -> 2s of training" in res.stdout and "/? (timing the steps)" in res.stdout
    replans = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "replan" in r]
    assert replans and all("--max-time 2s" in r["replan"]["reason"] for r in replans)
    logs = records(run)
    assert logs[-1]["step"] == replans[-1]["replan"]["total_steps"] < 50_000  # the last plan was carried out
    assert logs[-1]["lr"] == pytest.approx(1e-4)  # and the schedule ended with it (min_lr, a tenth of lr)
    assert json.loads((run / "latest/trainer_state.json").read_text())["step"] == logs[-1]["step"]
    assert_input_error(
        invoke(*flags(data=data, out=tmp_path / "r2", model=model_json, max_time="soon")), "--max-time", "soon"
    )


@pytest.fixture
def nan_run(data, model_json, tmp_path, monkeypatch):
    """A CLI run whose 4th step has a NaN loss (checkpoints every step): (result, run directory)."""
    forward, calls = TransformerLM.forward, []

    def poisoned(self, idx, targets=None, cache=None):
        logits, loss = forward(self, idx, targets, cache)
        if self.training:
            calls.append(1)
            if len(calls) == 4:
                loss = loss * float("nan")
        return logits, loss

    monkeypatch.setattr(TransformerLM, "forward", poisoned)
    run = tmp_path / "run"
    res = invoke(
        *flags(
            data=data,
            out=run,
            model=model_json,
            device="cpu",
            batch_size=4,
            context_length=32,
            max_steps=10,
            warmup_steps=1,
            eval_interval=0,
            eval_tokens=256,
            checkpoint_interval=1,
            log_interval=1,
        )
    )
    return res, run


def test_non_finite_loss_stops_with_an_error_and_keeps_the_last_checkpoint(nan_run):
    """A training failure, not bad input: exit status 1."""
    res, run = nan_run
    assert res.exit_code == 1 and isinstance(res.exception, SystemExit), (res.output, res.exception)
    lines = res.stderr.splitlines()
    assert (
        len(lines) == 1
        and re.match(r"Error: step \d+: the loss is nan; stopping", lines[0])
        and "Traceback" not in res.output
    )
    assert str(run) in lines[0]
    assert [r["step"] for r in records(run)] == [1, 2, 3] and latest_step(run) == 3
    model, _ = load_model(run / "latest")
    assert all(torch.isfinite(p).all() for p in model.parameters())


def test_non_finite_loss_error_names_the_step_as_the_logs_do(nan_run):
    assert nan_run[0].stderr.startswith("Error: step 4: the loss is nan")


def test_two_lengths_are_refused_from_flags_a_settings_file_and_a_library_call(data, tmp_path):
    """Each names where the two came from: the flags, the file, the fields."""
    out, two = tmp_path / "r", tmp_path / "two.json"
    refused = "--max-steps 3 and --max-tokens 999: give one (each sets the length of the run)"
    assert_input_error(
        invoke("--config", "tiny", "--data", data, "--out", out, "--max-steps", 3, "--max-tokens", 999), refused
    )
    two.write_text(json.dumps({"model": "tiny", "max_steps": 3, "max_tokens": 999}))
    assert_input_error(
        invoke("--config", two, "--data", data, "--out", out),
        f"{two}: max_steps 3 and max_tokens 999: give one (each sets the length of the run)",
    )
    assert (
        load_train_config(two, {"data": "d", "out": "o", "max_time": "1m"}).length.max_steps is None
    )  # a flag's length: the file's go
    with pytest.raises(SettingError, match="^max_steps 3 and max_tokens 999: give one"):
        train(TrainConfig.of(data=str(data), out=str(out), max_steps=3, max_tokens=999))
    assert not out.exists()


# -- bad input ------------------------------------------------------------------------------------------


def base_flags(data, out, model, **kw):
    return flags(
        **{
            **dict(
                data=data,
                out=out,
                model=model,
                device="cpu",
                batch_size=4,
                context_length=32,
                max_steps=1,
                warmup_steps=1,
                eval_interval=0,
                eval_tokens=256,
            ),
            **kw,
        }
    )


def test_bad_data_directories(data, model_json, small_tokenizer, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert_input_error(invoke(*base_flags(empty, tmp_path / "r", model_json)), "--data", "tokenizer.json")
    shutil.copy(small_tokenizer[1], empty / "tokenizer.json")
    assert_input_error(invoke(*base_flags(empty, tmp_path / "r", model_json)), "--data", "no train shards")

    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    (tmp_path / "tiny.txt").write_text("the cat sat<|endoftext|>on the mat")
    encode_corpus(
        Corpus([tmp_path / "tiny.txt"]),
        small_tokenizer[0],
        tmp_path / "tiny",
        split=Split(val_fraction=0.5),
        quiet=True,
    )
    too_few = "--data", f"{tmp_path / 'tiny'}: the longest train shard has 4 tokens, too few for one sequence of 64 + 1"
    assert_input_error(
        invoke(*base_flags(tmp_path / "tiny", tmp_path / "r", model_json, context_length=64)),
        *too_few,
        "+ 1; give --context-length 3 or less",
    )
    # a context the user did not give is said to be the model's or the recipe's, with the flag that changes it
    given = ["--data", tmp_path / "tiny", "--out", tmp_path / "r", "--device", "cpu", "--max-steps", 1, "--threads", 1]
    assert_input_error(
        invoke(*given, "--model", model_json), *too_few, "+ 1; that is the model's context: give --context-length 3"
    )
    res = invoke(*given)  # the recipe's line comes first, on stdout: it says what the recipe chose
    assert res.exit_code == 2 and "context 64, the ladder's" in res.stdout
    *progress, error = res.stderr.splitlines()  # the recipe's progress on stderr, then the one error line
    assert all(line.startswith("recipe: ") for line in progress)
    assert error == f"Error: {' '.join(too_few)}; the recipe chose that context: give --context-length 3 or less"
    assert not (tmp_path / "r").exists()


def test_bad_settings(data, model_json, tmp_path):
    out = tmp_path / "r"
    assert_input_error(invoke(*base_flags(data, out, model_json, context_length=128)), "--context-length 128", "64")
    assert_input_error(
        invoke("--config", "no-such-preset", *base_flags(data, out, model_json)), "no-such-preset", "tiny"
    )
    (tmp_path / "c.json").write_text(json.dumps({"batch_size": 4, "learning_rate": 1e-3}))
    assert_input_error(invoke("--config", tmp_path / "c.json", *base_flags(data, out, model_json)), "learning_rate")
    (tmp_path / "bad.json").write_text(json.dumps({"batch_size": 4, "lr": -1}))  # the file's value: the file is named
    assert_input_error(
        invoke("--config", tmp_path / "bad.json", *flags(data=data, out=out, model=model_json, max_steps=1)),
        f"{tmp_path / 'bad.json'}: lr -1: expected a finite number 0 or more",
    )
    assert_input_error(invoke("--config", tmp_path / "bad.json", *base_flags(data, out, model_json, lr=-2)), "--lr -2")
    assert_input_error(invoke(*base_flags(data, out, model_json, loader="shuffled")), "--loader", "sequential")
    assert_input_error(invoke(*base_flags(data, out, model_json, grad_accum=0)), "--grad-accum")
    with pytest.raises(SettingError, match="^batch_size 3: not divisible among 2 processes"):
        settle(config(data, out, model_json, batch_size=3), dist=Dist(world=2))
    assert not out.exists()


def test_shards_of_another_tokenizer_are_refused(data, model_json, small_tokenizer, tmp_path):
    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import Tokenizer, train_bpe

    text = english_like(20_000, seed=5).replace("the", "thy")
    (tmp_path / "other.txt").write_text("<|endoftext|>".join(text[i : i + 5000] for i in range(0, len(text), 5000)))
    other = train_bpe(Corpus([tmp_path / "other.txt"]), 450, quiet=True)
    other.save(tmp_path / "other.json")
    other = Tokenizer.from_file(tmp_path / "other.json")
    ours = small_tokenizer[0]
    assert other.vocab_size == ours.vocab_size and other.fingerprint != ours.fingerprint
    encode_corpus(
        Corpus([tmp_path / "other.txt"]), other, tmp_path / "mixed", split=Split(val_fraction=0.1), quiet=True
    )
    shutil.copy(
        small_tokenizer[1], tmp_path / "mixed/tokenizer.json"
    )  # shards of one tokenizer, another's tokenizer.json
    assert_input_error(
        invoke(*base_flags(tmp_path / "mixed", tmp_path / "r", model_json)), other.fingerprint, ours.fingerprint
    )


def test_plain_llmc_shards_train_with_a_warning(data, model_json, tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    shutil.copy(data / "tokenizer.json", plain)
    for path in data.glob("*.bin"):
        raw = path.read_bytes()
        header = ShardHeader.from_bytes(raw, path)
        (plain / path.name).write_bytes(ShardHeader(header.dtype, header.num_tokens).to_bytes() + raw[1024:])
    res = invoke(*base_flags(plain, tmp_path / "r", model_json, max_steps=2))
    assert res.exit_code == 0, (res.output, res.exception)
    assert "warning:" in res.stderr and "plain llm.c shard" in res.stderr and "fingerprint" in res.stderr
    assert len(records(tmp_path / "r")) == 2


# -- the CLI end to end ---------------------------------------------------------------------------------


def test_cli_trains_logs_checkpoints_and_samples(data, model_json, tmp_path):
    from gptkit.sample.cli import cli as sample_cli

    run = tmp_path / "runs/NAME"
    res = invoke(
        *flags(
            data=data,
            out=run,
            model=model_json,
            device="cpu",
            batch_size=8,
            context_length=32,
            max_steps=30,
            lr=3e-3,
            warmup_steps=5,
            eval_interval=10,
            eval_tokens=512,
            log_interval=5,
            checkpoint_interval=10,
            keep_last=2,
            sample_interval=15,
            sample_tokens=8,
        )
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert "step 30/30" in res.stdout and f"saved {run}/checkpoints/step-000030_tokens-{30 * 8 * 32}" in res.stdout
    logs = records(run)
    assert [r["step"] for r in logs] == [1, 5, 10, 15, 20, 25, 30]
    assert all({"loss", "lr", "grad_norm", "tokens", "ppl"} <= r.keys() for r in logs)
    assert logs[-1]["tokens"] == 30 * 8 * 32 and logs[-1]["lr"] == pytest.approx(3e-4)
    assert logs[-1]["loss"] < logs[0]["loss"] - 0.5
    val = records(run, "val_loss")
    assert [r["step"] for r in val] == [10, 20, 30] and val[-1]["val_loss"] < val[0]["val_loss"]
    assert [r["step"] for r in records(run, "sample")] == [15, 30]
    assert sorted(p.name for p in (run / "checkpoints").iterdir()) == [
        "step-000020_tokens-5120",
        "step-000030_tokens-7680",
    ]
    assert json.loads((run / "config.json").read_text())["max_steps"] == 30
    model, tok = load_model(run / "latest")
    assert model.config.d_model == 32 and tok.vocab_size == 450
    res = CliRunner().invoke(
        sample_cli,
        [
            "--checkpoint",
            str(run / "latest"),
            "--prompt",
            "the cat",
            "--max-new-tokens",
            "8",
            "--seed",
            "1",
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert res.stdout.startswith("the cat") and len(res.stdout) > len("the cat\n")


def test_a_model_file_without_a_vocabulary_size_takes_the_datas(data, tmp_path):
    """The README's promise: the vocabulary size comes from the data (a file's own is replaced)."""
    model = {k: v for k, v in MODEL.items() if k != "vocab_size"} | {"context_length": 32}
    (tmp_path / "model.json").write_text(json.dumps(model))
    res = invoke(
        *flags(
            data=data,
            out=tmp_path / "run",
            model=tmp_path / "model.json",
            device="cpu",
            batch_size=2,
            context_length=32,
            max_steps=1,
            eval_interval=0,
        )
    )
    assert res.exit_code == 0, res.output
    saved = json.loads((tmp_path / "run" / "latest" / "config.json").read_text())
    assert saved["model"]["vocab_size"] == saved["tokenizer"]["vocab_size"] == 450


def test_a_runs_own_config_json_runs_it_again(data, model_json, tmp_path):
    """`--config RUN/config.json --out OTHER` trains the same run: the same losses, the same checkpoint
    bytes. config.json records every setting, muon_lr and cooldown_fraction of this AdamW run with a
    cosine schedule among them: a file's setting at its default is not refused where it does not
    apply, while one of its own value is (it would be ignored)."""
    first, again = tmp_path / "first", tmp_path / "again"
    res = invoke(*flags(data=data, out=first, model=model_json, device="cpu", batch_size=2, max_steps=2, threads=1))
    assert res.exit_code == 0, res.output
    recorded = json.loads((first / "config.json").read_text())
    assert (recorded["optimizer"], recorded["muon_lr"], recorded["schedule"]) == ("adamw", 0.02, "cosine")
    res = invoke("--config", first / "config.json", "--out", again, "--threads", 1)
    assert res.exit_code == 0, res.output
    assert comparable(again) == comparable(first) and len(records(again)) == 2
    assert same_files(first / "latest", again / "latest")
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps({**recorded, "muon_lr": 0.05}))
    assert_input_error(
        invoke("--config", edited, "--out", tmp_path / "edited"),
        f"--config {edited}: muon_lr 0.05: only with optimizer muon",
    )
