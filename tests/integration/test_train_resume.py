"""Resuming and starting from checkpoints through `gptkit train` (click's runner): changed settings
refused, the run's own model, --init-from, old checkpoints, longer and shorter runs, a run that
moves, a deterministic CPU run's thread count, a checkpoint a killed writer left aside, and what an
earlier gptkit wrote."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from gptkit.model.checkpoint import file_crc32, load_model
from gptkit.model.config import ModelConfig, load_config
from gptkit.model.model import TransformerLM
from gptkit.shared.shard_dir import identity_difference
from gptkit.train.config import TrainConfig
from gptkit.train.run import train
from tests.conftest import assert_input_error, english_like
from tests.training import (
    MODEL,
    ROOT,
    comparable,
    config,
    flags,
    invoke,
    latest_step,
    records,
    run_flags,
    stopped_after,
    weights,
    write_model,
)


def test_resume_refuses_changed_settings_and_fresh_runs_refuse_a_used_dir(data, model_json, tmp_path):
    run = tmp_path / "run"
    base = flags(
        data=data,
        out=run,
        model=model_json,
        device="cpu",
        batch_size=4,
        context_length=32,
        max_steps=2,
        warmup_steps=1,
        eval_interval=0,
        eval_tokens=256,
    )
    res = invoke(*base)
    assert res.exit_code == 0, res.output
    assert_input_error(invoke(*base), "--out", "--resume")  # a fresh run into a run directory
    assert_input_error(invoke("--out", run, "--resume", "--lr", "0.5"), "lr", "0.5")
    assert_input_error(invoke("--out", run, "--resume", "--max-steps", "1"), "--max-steps", "has done 2 steps")
    assert_input_error(invoke("--out", tmp_path / "none", "--resume"), "config.json")
    res = invoke("--out", run, "--resume", "--log-interval", "5")  # not a fixed setting: resumes (nothing left to do)
    assert res.exit_code == 0, res.output


def test_a_run_keeps_its_model_when_the_model_file_is_edited(data, tmp_path):
    model_file, run = write_model(tmp_path / "model.json"), tmp_path / "run"
    train(config(data, run, model_file, max_steps=2))
    saved = json.loads((run / "config.json").read_text())
    assert saved["model"] == ModelConfig(**MODEL).to_dict()  # the model itself, not the file's name
    assert load_config(run / "config.json") == ModelConfig(**MODEL)  # a run's config.json serves as a model config
    write_model(tmp_path / "model.json", d_model=64, n_heads=4)
    res = invoke("--out", run, "--resume", "--max-steps", 4)
    assert res.exit_code == 0, (res.output, res.exception)
    assert latest_step(run) == 4 and load_model(run / "latest")[0].config == ModelConfig(**MODEL)


def test_a_checkpoint_of_another_model_is_refused(data, model_json, tmp_path):
    run, other = tmp_path / "run", tmp_path / "other"
    train(config(data, run, model_json, max_steps=2))
    train(config(data, other, write_model(tmp_path / "other.json", d_ff=96), max_steps=2))
    res = invoke("--out", run, "--resume", "--from-checkpoint", other / "latest", "--max-steps", 4)
    assert_input_error(res, "--resume", "its model has d_ff 96, the run's 64")
    saved = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**saved, "model": {**saved["model"], "d_ff": 96}}))
    assert_input_error(invoke("--out", run, "--resume", "--max-steps", 4), "its model has d_ff 64, the run's 96")
    assert latest_step(run) == 2


def test_init_from_starts_a_new_run_from_a_checkpoints_weights(data, model_json, tmp_path):
    source, copy, tuned, scratch = (tmp_path / name for name in ("source", "copy", "tuned", "scratch"))
    train(config(data, source, model_json, max_steps=40))
    start = weights(source / "latest")
    # with lr 0 a step changes nothing: the run holds the checkpoint's weights bit for bit, as float32
    res = invoke(
        *flags(
            data=data,
            out=copy,
            init_from=source / "latest",
            device="cpu",
            batch_size=4,
            context_length=32,
            max_steps=1,
            lr=0,
            eval_tokens=256,
        )
    )
    assert res.exit_code == 0, res.output
    saved = weights(copy / "latest")
    assert saved.keys() == start.keys() and all(torch.equal(saved[k], start[k]) for k in start)
    recorded = json.loads((copy / "config.json").read_text())
    assert (
        recorded["init_from"] == str((source / "latest").resolve())
        and recorded["model"] == ModelConfig(**MODEL).to_dict()
    )
    state = json.loads((copy / "latest/trainer_state.json").read_text())
    assert state["step"] == 1 and state["optimizer_steps"] == {
        "adamw": 1
    }  # a fresh optimizer, not the source's 40 steps
    # training on from the checkpoint starts where it ended, far below a random model's first loss
    train(config(data, tuned, None, init_from=source / "latest", max_steps=2))
    train(config(data, scratch, model_json, max_steps=2))
    assert records(tuned)[0]["loss"] < records(scratch)[0]["loss"] - 0.5


def test_a_run_from_init_from_resumes_exactly(data, model_json, tmp_path):
    source = tmp_path / "source"
    train(config(data, source, model_json, max_steps=3))
    run = dict(init_from=source / "latest", max_steps=6, checkpoint_interval=3)
    train(config(data, tmp_path / "straight", None, **run))
    shutil.copytree(tmp_path / "straight", tmp_path / "resumed", symlinks=True)
    stopped_after(tmp_path / "resumed", 3)
    shutil.rmtree(source)  # not needed: the run goes on from its own checkpoint
    res = invoke("--out", tmp_path / "resumed", "--resume")  # the run's model, recorded in full by the run
    assert res.exit_code == 0, res.output
    a, b = weights(tmp_path / "straight/latest"), weights(tmp_path / "resumed/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_init_from_refuses_another_tokenizer_a_model_and_a_missing_checkpoint(data, model_json, small_text, tmp_path):
    from gptkit.model.checkpoint import save_model
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import train_bpe

    (tmp_path / "corpus.txt").write_text(small_text[:20_000])
    other = train_bpe(Corpus([tmp_path / "corpus.txt"]), 300, quiet=True)
    torch.manual_seed(0)
    save_model(TransformerLM(ModelConfig(**{**MODEL, "vocab_size": 300})), other, tmp_path / "other", eot_id=None)
    base = flags(data=data, device="cpu", batch_size=4, context_length=32, max_steps=1, eval_tokens=256)
    res = invoke(*base, "--out", tmp_path / "a", "--init-from", tmp_path / "other")
    assert_input_error(
        res,
        f"{data}: encoded with tokenizer",
        "(450 tokens)",
        f"{other.fingerprint} (300 tokens)",
        "encode the data with",
    )
    res = invoke(*base, "--out", tmp_path / "b", "--init-from", tmp_path / "other", "--model", model_json)
    assert_input_error(res, "--init-from", "not both")
    res = invoke(*base, "--out", tmp_path / "c", "--init-from", tmp_path / "none")
    assert_input_error(res, "--init-from", "no such checkpoint directory")
    res = invoke(
        *base, "--out", tmp_path / "d", "--init-from", tmp_path / "other", "--config", "tiny"
    )  # a preset's model
    assert_input_error(res, "--config tiny: gives a model, and --init-from", "give one of them")
    assert not any((tmp_path / name / "checkpoints").exists() for name in "abcd")


def test_init_from_refuses_a_damaged_checkpoint_before_the_run_starts(data, model_json, tmp_path):
    """--init-from's checkpoint is opened once, while the run is prepared: a damaged tokenizer.json is
    refused there, before a model is built, damaged weights before any is put in; the run writes no
    checkpoint."""
    source = tmp_path / "source"
    train(config(data, source, model_json, max_steps=1))
    base = flags(data=data, device="cpu", batch_size=4, context_length=32, max_steps=1, eval_tokens=256)
    for name in ("tokenizer.json", "model.safetensors"):
        damaged = tmp_path / f"damaged-{name}"
        shutil.copytree(source / "latest", damaged)
        with open(damaged / name, "r+b") as f:  # the last byte changed: the file's CRC-32 no longer matches
            f.seek(-1, os.SEEK_END)
            last = f.read(1)
            f.seek(-1, os.SEEK_END)
            f.write(bytes([last[0] ^ 1]))
        assert_input_error(
            invoke(*base, "--out", tmp_path / f"run-{name}", "--init-from", damaged),
            f"{damaged.resolve() / name}: corrupted",
        )
        assert not (tmp_path / f"run-{name}" / "checkpoints").exists()


def test_a_resume_keeps_its_own_weights_and_refuses_another_init_from(data, model_json, tmp_path):
    source, run, scratch = tmp_path / "source", tmp_path / "run", tmp_path / "scratch"
    train(config(data, source, model_json, max_steps=2))
    train(config(data, run, None, init_from=source / "latest", max_steps=2))
    train(config(data, scratch, model_json, max_steps=2))
    res = invoke(
        "--out", run, "--resume", "--init-from", source / "latest", "--max-steps", 3
    )  # the run's own, given again
    assert res.exit_code == 0, res.output
    started = str((source / "latest").resolve())
    assert_input_error(
        invoke("--out", run, "--resume", "--init-from", run / "latest", "--max-steps", 4),
        f"--init-from {run / 'latest'}: a resumed run goes on from its own checkpoints",
        f"(it started from {started})",
    )
    assert_input_error(
        invoke("--out", scratch, "--resume", "--init-from", source / "latest", "--max-steps", 3),
        "--init-from",
        "(it started from a random initialization)",
    )
    assert latest_step(run) == 3 and latest_step(scratch) == 2
    assert json.loads((run / "config.json").read_text())["init_from"] == started
    assert json.loads((scratch / "config.json").read_text())["init_from"] is None


def test_checkpoints_keep_only_the_state_a_resume_restores_and_old_ones_resume_exactly(data, model_json, tmp_path):
    straight = tmp_path / "straight"
    # warmup 0: the warmup a checkpoint of before resumes on is the one it had (cut to a tenth of the steps)
    train(config(data, straight, model_json, max_steps=6, checkpoint_interval=3, warmup_steps=0))
    state = json.loads((straight / "latest/trainer_state.json").read_text())
    assert set(state) == {"step", "tokens", "config_digest", "data", "optimizer_steps", "schedule", "rng"}
    assert list(state["rng"]) == ["torch"]

    # A run of the format before: config.json names the model file; trainer_state.json holds the
    # loader's settings and the CUDA generators' state, which no resume ever read, a digest of the
    # settings with the data's path, and not the data's content nor the schedule's warmup.
    old = tmp_path / "old"
    shutil.copytree(straight, old, symlinks=True)
    stopped_after(old, 3)
    settings_then = {**json.loads((old / "config.json").read_text()), "model": model_json}
    (old / "config.json").write_text(json.dumps(settings_then))
    checkpoint = old / "checkpoints/step-000003_tokens-384"
    state = json.loads((checkpoint / "trainer_state.json").read_text())
    del state["data"], state["schedule"]["warmup"]
    state.update(
        config_digest=TrainConfig.of(**settings_then).digest(settings_then["data"]),
        rng={**state["rng"], "cuda": []},
        loader={
            "mode": "random",
            "seed": 1337,
            "batch_size": 4,
            "context_length": 32,
            "world_size": 1,
            "grad_accum": 1,
        },
    )
    (checkpoint / "trainer_state.json").write_text(json.dumps(state))
    checkpoint_config = json.loads((checkpoint / "config.json").read_text())
    checkpoint_config["crc32"]["trainer_state.json"] = file_crc32(checkpoint / "trainer_state.json")
    (checkpoint / "config.json").write_text(json.dumps(checkpoint_config))

    res = invoke("--out", old, "--resume")
    assert res.exit_code == 0, (res.output, res.exception)
    assert [{k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records(old)] == [
        {k: v for k, v in r.items() if k not in ("tokens_per_s", "elapsed_s")} for r in records(straight)
    ]
    a, b = weights(straight / "latest"), weights(old / "latest")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_resume_extends_or_shortens_a_run_from_where_it_stopped(data, model_json, tmp_path):
    common = dict(max_steps=8, checkpoint_interval=4, warmup_steps=2)
    train(config(data, tmp_path / "straight", model_json, **common))
    for name, steps in (("longer", 12), ("shorter", 6)):
        run = tmp_path / name
        shutil.copytree(tmp_path / "straight", run, symlinks=True)
        stopped_after(run, 4)
        res = invoke("--config", "tiny", "--out", run, "--resume", "--max-steps", steps)  # --config: the Makefile's
        assert res.exit_code == 0, (res.output, res.exception)
        assert "--config tiny is not applied" in res.stderr and f"re-planned: 8 -> {steps} steps" in res.stdout
        logs, straight = records(run), records(tmp_path / "straight")
        assert [r["step"] for r in logs] == list(range(1, steps + 1))
        assert [r["loss"] for r in logs[:5]] == [r["loss"] for r in straight[:5]]  # the first step after the resume too
        assert logs[4]["lr"] == straight[4]["lr"] and logs[-1]["lr"] == pytest.approx(
            3e-4
        )  # no jump; min_lr (lr / 10) at the end
        (replan,) = [r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines()) if "replan" in r]
        assert replan["step"] == 4 and replan["replan"]["total_steps"] == steps
        assert json.loads((run / "config.json").read_text())["max_steps"] == steps
        assert json.loads((run / "latest/trainer_state.json").read_text())["schedule"]["total_steps"] == steps


# -- the thread count (runtime/threads.py) ----------------------------------------------------------


@pytest.fixture
def cores(monkeypatch):
    """The physical cores of this process's share as the test sets them (`cores.count`), and no
    OMP_NUM_THREADS (tests/conftest.py sets 1): the run chooses torch's threads. torch's count
    comes back after the test."""
    import gptkit.runtime.threads as threads_module

    share = SimpleNamespace(count=2)
    monkeypatch.setattr(threads_module, "cores_per_process", lambda: share.count)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield share
    torch.set_num_threads(before)


def test_a_deterministic_cpu_run_resumes_bit_for_bit_on_the_thread_count_it_recorded(
    data, tmp_path, cores, monkeypatch
):
    """GPT-2's LayerNorm sums the gradients of its gains and biases in an order that depends on
    torch's thread count: a run whose count changes at the resume ends with other weights. With
    --deterministic the count is fixed and recorded: the first half runs where the process has
    one core (taskset -c 0, a container's share), the resume finds two, on which a new run would
    train, and goes on with the recorded one; a count given otherwise is refused."""
    model = write_model(tmp_path / "gpt2.json", architecture="gpt2")
    straight, resumed, other = (tmp_path / name for name in ("straight", "resumed", "other"))
    cores.count = 1
    res = invoke(*run_flags(data, straight, model, max_steps=8, checkpoint_interval=4), "--deterministic")
    assert res.exit_code == 0, (res.output, res.exception)
    assert "1 thread, fixed for --deterministic" in res.stdout
    assert json.loads((straight / "checkpoints/step-000004_tokens-512/trainer_state.json").read_text())["threads"] == {
        "count": 1
    }
    for run in (resumed, other):
        shutil.copytree(straight, run, symlinks=True)
        stopped_after(run, 4)
    cores.count = 2
    assert_input_error(
        invoke("--out", resumed, "--resume", "--threads", 2),
        "--threads 2: the run is --deterministic and trained on 1 thread",
        "resume without --threads",
    )
    for value in ("2", "2,1"):  # OpenMP's list: its first count is this process's, 2 either way
        monkeypatch.setenv("OMP_NUM_THREADS", value)
        assert_input_error(
            invoke("--out", resumed, "--resume"),
            "OMP_NUM_THREADS=2: the run is --deterministic",
            "resume with OMP_NUM_THREADS unset or 1",
        )
    monkeypatch.delenv("OMP_NUM_THREADS")
    res = invoke("--out", resumed, "--resume")
    assert res.exit_code == 0, (res.output, res.exception)
    assert "1 thread, fixed for --deterministic" in res.stdout and {r["threads"] for r in records(resumed)} == {1}
    assert comparable(resumed) == comparable(straight)
    a, b = weights(straight / "latest"), weights(resumed / "latest")
    assert all(torch.equal(a[k], b[k]) for k in a)
    # The same resume on two threads (--no-deterministic lets the count change) ends elsewhere.
    res = invoke("--out", other, "--resume", "--no-deterministic", "--threads", 2)
    assert res.exit_code == 0, (res.output, res.exception)
    assert {r["threads"] for r in records(other)[4:]} == {2} and "threads" not in json.loads(
        (other / "latest/trainer_state.json").read_text()
    )
    c = weights(other / "latest")
    assert not all(torch.equal(a[k], c[k]) for k in a)


# -- a run that moves --------------------------------------------------------------------------------


def test_a_run_and_its_data_copied_elsewhere_resume_exactly_given_the_datas_new_place(data, model_json, tmp_path):
    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(data, old / "data")
    run = dict(max_steps=8, checkpoint_interval=4, eval_interval=4)
    train(config(old / "data", tmp_path / "straight", model_json, **run))
    train(config(old / "data", old / "run", model_json, **run))
    stopped_after(old / "run", 4)
    shutil.copytree(old, new, symlinks=True)  # to another machine, say
    shutil.rmtree(old)
    assert_input_error(
        invoke("--out", new / "run", "--resume"),
        f"--data {(old / 'data').resolve()}: no such directory",
        "if it moved, give its new place with --data",
    )
    res = invoke("--out", new / "run", "--resume", "--data", new / "data")
    assert res.exit_code == 0, (res.output, res.exception)
    assert comparable(new / "run") == comparable(tmp_path / "straight")
    a, b = weights(tmp_path / "straight/latest"), weights(new / "run/latest")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads((new / "run/config.json").read_text())["data"] == str((new / "data").resolve())
    res = invoke("--out", new / "run", "--resume", "--max-steps", 9)  # the run's data is at its new place now
    assert res.exit_code == 0, (res.output, res.exception)


def test_a_resume_on_other_data_is_refused_naming_what_differs(data, model_json, small_tokenizer, tmp_path):
    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    (tmp_path / "other.txt").write_text("<|endoftext|>".join(english_like(200, seed=100 + i) for i in range(60)))
    encode_corpus(
        Corpus([tmp_path / "other.txt"]),
        small_tokenizer[0],
        tmp_path / "other",
        split=Split(val_fraction=0.1),
        shard_tokens=4000,
        workers=1,
        quiet=True,
    )
    run = tmp_path / "run"
    train(config(data, run, model_json, max_steps=2))
    res = invoke("--out", run, "--resume", "--data", tmp_path / "other", "--max-steps", 3)
    assert_input_error(
        res,
        f"--data {(tmp_path / 'other').resolve()}: not the data the run was trained on (",
        "give --data the run's data",
    )
    assert latest_step(run) == 2 and json.loads((run / "config.json").read_text())["data"] == str(Path(data).resolve())
    then, now = ({"train": [["d_train_000001.bin", 5, crc]], "val": []} for crc in ("0000aaaa", "0000bbbb"))
    assert identity_difference(then, now) == "train shard d_train_000001.bin: CRC-32 0000bbbb, the run's 0000aaaa"
    assert (
        identity_difference(now, {**now, "val": [["d_val_000000.bin", 5, "0000cccc"]]}) == "val shards: 1, the run's 0"
    )
    assert identity_difference(now, now) is None


def test_a_renamed_run_resumes_without_its_init_from_and_names_a_moved_file_it_needs(data, model_json, tmp_path):
    source, run, straight, moved = (tmp_path / name for name in ("source", "run", "straight", "moved"))
    train(config(data, source, model_json, max_steps=2))
    hellaswag = tmp_path / "hellaswag.jsonl"
    hellaswag.write_text(
        "".join(
            json.dumps(
                {
                    "ctx": english_like(8, seed=i),
                    "label": i % 4,
                    "endings": [english_like(3, seed=10 * i + j) for j in range(4)],
                }
            )
            + "\n"
            for i in range(4)
        )
    )
    train(
        config(
            data, run, None, init_from=source / "latest", eval_hellaswag=hellaswag, max_steps=4, checkpoint_interval=2
        )
    )
    shutil.copytree(run, straight, symlinks=True)
    stopped_after(run, 2)
    run.rename(moved)
    shutil.rmtree(source)  # not needed: the run goes on from its own checkpoints
    hellaswag.rename(tmp_path / "moved.jsonl")  # needed: scored at every evaluation
    assert_input_error(
        invoke("--out", moved, "--resume"),
        f"--eval-hellaswag {hellaswag.resolve()}: no such file",
        "if it moved, give its new place with --eval-hellaswag",
    )
    res = invoke("--out", moved, "--resume", "--eval-hellaswag", tmp_path / "moved.jsonl")
    assert res.exit_code == 0, (res.output, res.exception)
    assert comparable(moved) == comparable(straight) and "hellaswag_acc" in comparable(moved)[-1]
    assert json.loads((moved / "config.json").read_text())["eval_hellaswag"] == str(
        (tmp_path / "moved.jsonl").resolve()
    )


def test_a_checkpoint_a_killed_writer_left_aside_is_read_where_it_lies_and_put_back_by_the_next_save(
    data, model_json, tmp_path
):
    """A writer killed inside the swap of a checkpoint directory (shared/files.py, atomic_directory)
    leaves nothing under its name, the whole old one aside as .NAME.old-PID. Sampling the run's
    latest reads it there and changes nothing; a resume reads it there and goes on exactly; the
    resumed run, a writer, puts it back before it writes."""
    from gptkit.sample.cli import cli as sample_cli

    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run = dict(max_steps=8, checkpoint_interval=4)
    train(config(data, straight, model_json, **run))
    shutil.copytree(straight, resumed, symlinks=True)
    stopped_after(resumed, 4)
    pid = int(
        subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout
    )
    name = (resumed / "latest").resolve().name
    (resumed / "checkpoints" / name).rename(resumed / "checkpoints" / f".{name}.old-{pid}")
    left = sorted(os.listdir(resumed / "checkpoints"))
    res = CliRunner().invoke(
        sample_cli,
        [
            "--checkpoint",
            str(resumed / "latest"),
            "--prompt",
            "the",
            "--max-new-tokens",
            "4",
            "--seed",
            "1",
            "--device",
            "cpu",
        ],
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert sorted(os.listdir(resumed / "checkpoints")) == left == [f".{name}.old-{pid}"]
    train(config(data, resumed, model_json, **run), resume=True)
    assert comparable(resumed) == comparable(straight)
    a, b = weights(straight / "latest"), weights(resumed / "latest")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert sorted(os.listdir(resumed / "checkpoints")) == [name, "step-000008_tokens-1024"]


# -- what an earlier gptkit wrote -------------------------------------------------------------------------


def tree(directory):
    """Every path under `directory`, with a file's bytes and a link's target."""
    return {
        p.relative_to(directory): os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else None
        for p in sorted(Path(directory).rglob("*"))
    }


def test_a_data_directory_and_a_run_written_before_issue_30_sample_resume_and_train(tmp_path):
    """tests/fixtures/main-eb0d129 (made by tests/fixtures/make-main-eb0d129.sh with the code of
    eb0d129): a data directory and a run of 3 steps as if killed after its checkpoint of step 2,
    the uninterrupted run's records of step 3 left in metrics.jsonl. Sampling it changes nothing;
    the run resumes on the data at its new place and ends as the uninterrupted run did, writing
    files of the same format; and a new run trains on the data."""
    from gptkit.sample.cli import cli as sample_cli

    shutil.copytree(ROOT / "tests/fixtures/main-eb0d129", tmp_path, symlinks=True, dirs_exist_ok=True)
    run, data = tmp_path / "run", tmp_path / "data"
    before, then = tree(run), comparable(run)
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
    assert res.exit_code == 0 and res.stdout.startswith("the cat"), (res.output, res.exception)
    assert tree(run) == before

    res = invoke("--out", run, "--resume", "--data", data)
    assert res.exit_code == 0, (res.output, res.exception)
    now = comparable(run)
    assert [sorted(r) for r in now] == [sorted(r) for r in then] and [r["step"] for r in now] == [1, 2, 3, 3]
    assert now == [pytest.approx(r, rel=1e-5) for r in then]  # step 3 trained again, as the run of eb0d129 trained it
    old, new = (run / "checkpoints" / name for name in ("step-000002_tokens-64", "step-000003_tokens-96"))
    assert (
        json.loads((new / "trainer_state.json").read_text()).keys()
        == json.loads((old / "trainer_state.json").read_text()).keys()
    )
    assert json.loads((new / "config.json").read_text()).keys() == json.loads((old / "config.json").read_text()).keys()
    assert json.loads((run / "config.json").read_text())["data"] == str(data.resolve())
    assert load_file(new / "optimizer.safetensors").keys() == load_file(old / "optimizer.safetensors").keys()

    res = invoke(
        *flags(
            data=data,
            out=tmp_path / "new",
            model=run / "config.json",
            device="cpu",
            batch_size=2,
            context_length=16,
            max_steps=2,
            eval_tokens=32,
        )
    )
    assert res.exit_code == 0, (res.output, res.exception)
    assert latest_step(tmp_path / "new") == 2
