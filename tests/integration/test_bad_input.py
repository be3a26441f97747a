"""Damaged and bad input, stage by stage, as a user meets it: each case runs the real command and
expects its exit status, one `Error:` line naming the file or flag (no traceback), and nothing
left behind under a final name.

A run directory is damaged in each of the ways a full disk, a kill or an editor can damage it;
`--resume` must say what is damaged and which earlier checkpoint is intact.
"""

import dataclasses
import errno
import json
import os
import re
import shutil
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest
import safetensors.torch
import torch
from click.testing import CliRunner
from safetensors import SafetensorError

from gptkit.eval.cli import cli as eval_cli
from gptkit.model.checkpoint import load_model
from gptkit.model.cli import cli as model_cli
from gptkit.model.config import ModelConfig
from gptkit.model.info import describe, model_cost, training_memory
from gptkit.runtime import device
from gptkit.runtime.device import size
from gptkit.sample.cli import cli as sample_cli
from gptkit.shared.shards import HEADER_BYTES, ShardHeader
from gptkit.train import parallel, trainer
from gptkit.train.cli import cli as train_cli
from tests.conftest import assert_input_error, english_like
from tests.training import MODEL, flags, python_train, records, write_model


def invoke(cli, *args, **kwargs):
    return CliRunner().invoke(cli, [str(a) for a in args], **kwargs)


def run_args(data, out, model, **kw):
    return flags(
        **{
            **dict(
                data=data,
                out=out,
                model=model,
                device="cpu",
                batch_size=4,
                context_length=32,
                warmup_steps=1,
                eval_interval=0,
                eval_tokens=256,
                log_interval=1,
            ),
            **kw,
        }
    )


@pytest.fixture(scope="module")
def finished_run(data, model_json, tmp_path_factory):
    """A 4-step run with checkpoints at steps 2 and 4."""
    run = tmp_path_factory.mktemp("finished") / "run"
    res = invoke(train_cli, *run_args(data, run, model_json, max_steps=4, checkpoint_interval=2))
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture
def run(finished_run, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(finished_run, copy, symlinks=True)
    return copy


def latest(run, name=""):
    return (run / "latest").resolve() / name


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


# (what is done to the run, what the one error line must name)
DAMAGE = {
    "trainer_state.json missing": (
        lambda run: latest(run, "trainer_state.json").unlink(),
        ["trainer_state.json: missing"],
    ),
    "trainer_state.json garbled": (
        lambda run: latest(run, "trainer_state.json").write_text('{"step": 4, '),
        ["trainer_state.json"],
    ),
    "trainer_state.json empty object": (
        lambda run: latest(run, "trainer_state.json").write_text("{}"),
        ["trainer_state.json"],
    ),
    "optimizer.safetensors truncated": (
        lambda run: truncate(latest(run, "optimizer.safetensors")),
        ["optimizer.safetensors: corrupted"],
    ),
    "optimizer.safetensors missing": (
        lambda run: latest(run, "optimizer.safetensors").unlink(),
        ["optimizer.safetensors: missing"],
    ),
    "model.safetensors flipped bit": (
        lambda run: flip_a_byte(latest(run, "model.safetensors")),
        ["model.safetensors: corrupted"],
    ),
    # edited with care: each file's CRC-32 recorded anew, so that the file's own checks pass
    "model.safetensors NaN": (
        lambda run: rewritten(latest(run), "model.safetensors", lambda t: t["layers.0.ffn.w1.weight"].fill_(torch.nan)),
        ["model.safetensors: tensor 'layers.0.ffn.w1.weight' holds NaN or infinite values"],
    ),
    "optimizer.safetensors infinite": (
        lambda run: rewritten(latest(run), "optimizer.safetensors", lambda t: next(iter(t.values())).fill_(torch.inf)),
        ["optimizer.safetensors: tensor", "holds NaN or infinite values"],
    ),
    "trainer_state.json 100000 threads": (  # died of SIGSEGV in torch's kernels
        lambda run: rewritten(latest(run), "trainer_state.json", lambda s: s.update(threads={"count": 100000})),
        ["trainer_state.json: damaged ('threads' is {'count': 100000}, not a thread count from 1 to 1,024)"],
    ),
}


def rewritten(checkpoint, name, change):
    """The checkpoint's file `name` (safetensors or JSON) changed by `change` (given its tensors or
    object), and its CRC-32 recorded anew in config.json."""
    from gptkit.model.checkpoint import file_crc32

    path = checkpoint / name
    if name.endswith(".json"):
        content = json.loads(path.read_text())
        change(content)
        path.write_text(json.dumps(content))
    else:
        tensors = safetensors.torch.load_file(path)
        change(tensors)
        safetensors.torch.save_file(tensors, path)
    config = json.loads((checkpoint / "config.json").read_text())
    config["crc32"][name] = file_crc32(path)
    (checkpoint / "config.json").write_text(json.dumps(config))


def flip_a_byte(path, at=None):
    data = bytearray(path.read_bytes())
    at = len(data) // 2 if at is None else at
    data[at] ^= 0x10
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("case", DAMAGE)
def test_a_damaged_latest_checkpoint_is_named_with_the_intact_one(run, case):
    damage, needles = DAMAGE[case]
    damage(run)
    res = invoke(train_cli, "--out", run, "--resume", "--max-steps", 6)
    assert_input_error(res, *needles, "step-000002_tokens-256 is intact", "--from-checkpoint")
    earlier = run / "checkpoints" / "step-000002_tokens-256"
    res = invoke(train_cli, "--out", run, "--resume", "--from-checkpoint", earlier, "--max-steps", 6)
    assert res.exit_code == 0, res.output
    assert [r["step"] for r in records(run)] == [1, 2, 3, 4, 5, 6]  # from step 2 on, the old steps 3-4 replaced
    load_model(run / "latest")


@pytest.mark.parametrize(
    "content, needle",
    [
        ("{oops", "not JSON"),
        ('{"lr": 0.1, "colour": "red"}', "unknown setting 'colour'"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_damaged_run_config_is_named(run, content, needle):
    (run / "config.json").write_text(content)
    assert_input_error(invoke(train_cli, "--out", run, "--resume"), f"{run / 'config.json'}", needle)


def test_a_partial_last_metrics_line_does_not_stop_a_resume(run):
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"step": 5, "loss": 3.1')  # a full disk cut the line short
    res = invoke(train_cli, "--out", run, "--resume", "--max-steps", 5)
    assert res.exit_code == 0, res.output
    assert [r["step"] for r in records(run)] == [1, 2, 3, 4, 5]
    pytest.importorskip("matplotlib")
    assert invoke(train_cli, "plot", run).exit_code == 0


def copy_data(data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    return copy, sorted(copy.glob("*_train_*.bin"))[0]


def test_a_flipped_byte_in_a_shard_stops_training_before_it_starts(data, model_json, tmp_path):
    copy, shard = copy_data(data, tmp_path)
    flip_a_byte(shard, HEADER_BYTES + 10)
    res = invoke(train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2))
    assert_input_error(res, shard.name, "corrupted")
    assert not (tmp_path / "r" / "latest").exists()
    res = invoke(
        train_cli, *run_args(copy, tmp_path / "r2", model_json, max_steps=2), "--no-verify-data"
    )  # trusted: skipped
    assert res.exit_code == 0, res.output


def test_a_token_id_past_the_vocabulary_is_refused(data, model_json, tmp_path):
    copy, shard = copy_data(data, tmp_path)
    header = ShardHeader.from_bytes(shard.read_bytes()[:HEADER_BYTES], shard)
    tokens = np.fromfile(shard, header.dtype, offset=HEADER_BYTES)
    tokens[7] = header.vocab_size + 3
    header = dataclasses.replace(header, checksum=zlib.crc32(tokens.tobytes()))  # consistent, but out of range
    shard.write_bytes(header.to_bytes() + tokens.tobytes())
    set_manifest_crc32(shard, header.checksum)
    res = invoke(train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2))
    assert_input_error(res, shard.name, f"token 7 is id {header.vocab_size + 3}", "vocabulary size")


def test_out_that_is_not_a_run_directory(data, model_json, tmp_path):
    (tmp_path / "file").write_text("mine")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "todo.txt").write_text("mine too")
    for out, needle in (
        (tmp_path / "file", "is a file"),
        (tmp_path / "notes", "todo.txt"),
        (tmp_path / "file" / "run", "cannot write there"),
    ):
        assert_input_error(invoke(train_cli, *run_args(data, out, model_json, max_steps=1)), f"--out {out}", needle)
    assert (tmp_path / "file").read_text() == "mine" and sorted(p.name for p in (tmp_path / "notes").iterdir()) == [
        "todo.txt"
    ]


@pytest.mark.parametrize(
    "flag, value",
    [
        ("lr", "nan"),
        ("beta1", "1.5"),
        ("eps", "-1"),
        ("checkpoint-tokens", "-1"),
        ("max-tokens", "-5"),
        ("seed", str(2**70)),
        ("context-length", "-5"),
        ("beta2", "inf"),
        ("muon-momentum", "1"),
        ("max-time", "soon"),
        ("max-time", "99999999999h"),  # a year at most: refused before the recipe's timing
    ],
)
def test_numbers_are_checked_at_the_boundary(data, model_json, tmp_path, flag, value):
    res = invoke(train_cli, *run_args(data, tmp_path / "r", model_json, max_steps=1), f"--{flag}", value)
    assert_input_error(res, f"--{flag}")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize(
    "given, needles",
    [
        (["--cooldown-fraction", "0.3"], ["--cooldown-fraction 0.3: only with --schedule wsd"]),
        (["--muon-lr", "0.01"], ["--muon-lr 0.01: only with --optimizer muon"]),
        (
            ["--optimizer", "muon", "--muon-momentum", "0.9", "--optimizer", "adamw"],
            ["--muon-momentum 0.9: only with --optimizer muon"],
        ),
        (["--decay-steps", "5", "--schedule", "wsd"], ["--decay-steps 5: only with --schedule cosine"]),
    ],
)
def test_a_setting_the_run_would_not_use_is_refused_not_ignored(data, model_json, tmp_path, given, needles):
    res = invoke(train_cli, *run_args(data, tmp_path / "r", model_json, max_steps=1), *given)
    assert_input_error(res, *needles)
    assert not (tmp_path / "r").exists()


def test_a_config_file_setting_the_run_would_not_use_is_refused_naming_the_file(data, model_json, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"cooldown_fraction": 0.3}))
    res = invoke(train_cli, *run_args(data, tmp_path / "r", model_json, max_steps=1), "--config", settings)
    assert_input_error(res, "--config", str(settings), "cooldown_fraction 0.3: only with schedule wsd")
    res = invoke(
        train_cli, *run_args(data, tmp_path / "r", model_json, max_steps=1), "--config", settings, "--schedule", "wsd"
    )
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "r/config.json").read_text())["cooldown_fraction"] == 0.3


# -- sample -------------------------------------------------------------------------------------


def test_prompts_that_are_not_utf8_are_replaced_and_said(finished_run, tmp_path):
    ckpt = finished_run / "latest"
    (tmp_path / "prompt.txt").write_bytes(b"the caf\xe9 ")
    base = ["--checkpoint", ckpt, "--max-new-tokens", 3, "--seed", 1, "--device", "cpu"]
    for extra, kwargs, where in (
        (["--prompt-file", tmp_path / "prompt.txt"], {}, "--prompt-file"),
        ([], {"input": b"the caf\xe9 "}, "standard input"),
        (["--prompt", "the caf\udce9 "], {}, "--prompt"),
    ):  # how Python hands over argv bytes
        res = invoke(sample_cli, *base, *extra, **kwargs)
        assert res.exit_code == 0, (res.output, res.exception)
        assert res.stdout.startswith("the caf\ufffd ")
        assert f"warning: {where}" in res.stderr and "1 byte(s)" in res.stderr


def test_tokenizer_input_that_is_not_utf8_is_replaced(small_tokenizer):
    from gptkit.tokenizer.cli import cli as tokenizer_cli

    tok, path = small_tokenizer
    expected = " ".join(map(str, tok.encode("the caf\ufffd", "all")))
    res = invoke(tokenizer_cli, "encode", "-t", path, "the caf\udce9")  # how Python hands over argv bytes
    assert res.exit_code == 0 and res.stdout.strip() == expected and "1 byte(s)" in res.stderr, res.output
    res = invoke(tokenizer_cli, "encode", "-t", path, input=b"the caf\xe9")
    assert res.exit_code == 0 and res.stdout.strip() == expected, res.output
    assert "warning: standard input: 1 invalid UTF-8 sequence(s) replaced by U+FFFD" in res.stderr
    (path.parent / "latin1.txt").write_bytes(b"the caf\xe9")
    res = invoke(tokenizer_cli, "encode", "-t", path, "--file", path.parent / "latin1.txt")
    assert res.exit_code == 0 and res.stdout.strip() == expected, res.output
    assert f"warning: --file {path.parent / 'latin1.txt'}: 1 invalid UTF-8 sequence(s)" in res.stderr
    res = invoke(tokenizer_cli, "encode", "-t", path, input="the café \ufffd".encode())  # U+FFFD of the text's own
    assert res.exit_code == 0 and "warning" not in res.stderr, res.output


def test_a_temperature_near_zero_samples_greedily(finished_run):
    base = ["--checkpoint", finished_run / "latest", "--prompt", "the cat", "--max-new-tokens", 6, "--device", "cpu"]
    greedy = invoke(sample_cli, *base, "--temperature", 0).stdout
    assert invoke(sample_cli, *base, "--temperature", "1e-39", "--seed", 1).stdout == greedy != "the cat\n"


# -- never replace what we did not write ---------------------------------------------------------


def test_tokenizer_and_export_outputs_never_replace_other_files(finished_run, small_text, tmp_path):
    from gptkit.model.cli import cli as model_cli
    from gptkit.tokenizer.cli import cli as tokenizer_cli

    corpus = tmp_path / "corpus.txt"
    corpus.write_text(small_text[:20000])
    notes = tmp_path / "notes.json"
    notes.write_text('{"mine": true}')
    assert_input_error(
        invoke(tokenizer_cli, "train", "--input", corpus, "--vocab-size", 300, "--out", notes), str(notes)
    )
    assert notes.read_text() == '{"mine": true}'
    ok = invoke(
        tokenizer_cli, "train", "--input", corpus, "--vocab-size", 300, "--out", tmp_path / "tok.json", "--quiet"
    )
    assert (
        ok.exit_code == 0
        and invoke(
            tokenizer_cli, "train", "--input", corpus, "--vocab-size", 290, "--out", tmp_path / "tok.json", "--quiet"
        ).exit_code
        == 0
    )  # ours: replaced

    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "README.md").write_text("mine")
    assert_input_error(
        invoke(model_cli, "export-hf", "--checkpoint", finished_run / "latest", "--out", tmp_path / "hf"), "README.md"
    )
    assert sorted(p.name for p in (tmp_path / "hf").iterdir()) == ["README.md"]
    for _ in range(2):  # an export replaces an export
        assert (
            invoke(
                model_cli, "export-hf", "--checkpoint", finished_run / "latest", "--out", tmp_path / "export"
            ).exit_code
            == 0
        )


def test_a_training_checkpoint_is_replaced_by_no_model_command(run, model_json, small_tokenizer, tmp_path):
    """`model init` and `model import-hf` write a model alone: over a training checkpoint they would
    lose its optimizer and trainer state."""
    step = (run / "latest").resolve()
    before = {path.name: path.read_bytes() for path in step.iterdir()}
    assert invoke(model_cli, "export-hf", "--checkpoint", step, "--out", tmp_path / "hf").exit_code == 0
    for args in (["import-hf", "--from", tmp_path / "hf"], ["init", "--config", model_json, "-t", small_tokenizer[1]]):
        for out in (step, run / "latest"):
            assert_input_error(
                invoke(model_cli, *args, "--out", out),
                f"--out {out}: exists",
                "not a checkpoint of a model alone (without training state)",
                "--overwrite",
            )
    assert {path.name: path.read_bytes() for path in step.iterdir()} == before


# -- usage errors, every stage ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "module, args, needle",
    [
        ("gptkit.tokenizer", ["train", "--vocab-size", "many"], "--vocab-size"),
        ("gptkit.tokenizer", ["trian"], "No such command 'trian'"),
        ("gptkit.pretokenize", ["--val-fraction", "abc"], "--val-fraction"),
        ("gptkit.model", ["info", "--batch-size", "-"], "--batch-size"),
        ("gptkit.train", ["--lr-x", "3"], "--lr-x"),
        ("gptkit.train", ["plot"], "RUN"),
        ("gptkit.sample", ["--temperature", "warm", "--checkpoint", "c"], "--temperature"),
        ("gptkit.eval", ["hellaswag", "--limit", "0", "--checkpoint", "c"], "--limit"),
        ("gptkit.stories", ["--size"], "--size"),
    ],
)
def test_usage_errors_are_one_line(module, args, needle):
    """Click's own usage errors (unknown option, bad value, missing argument) are one line too,
    with the help command to run, exit status 2 (as a user meets them: the installed module)."""
    import subprocess
    import sys

    res = subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert res.returncode == 2 and res.stdout == "", res
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and needle in lines[0], res.stderr


# -- a step taken before the one that makes its input names that step -----------------------------

NO_DATA = "no such directory; `gptkit pretokenize` (make encode) writes one"
NO_CHECKPOINT = "no such checkpoint directory; `gptkit train` (make train) writes one"


@pytest.mark.parametrize("args", [["--config", "tiny"], []])  # []: the recipe reads the data first
def test_training_on_data_that_is_not_there_names_the_step_that_writes_it(tmp_path, args):
    missing = tmp_path / "out/stories"
    res = invoke(train_cli, "--data", missing, "--out", tmp_path / "run", *args)
    assert_input_error(res, f"--data {missing}: {NO_DATA}")
    assert not (tmp_path / "run").exists()


def test_scoring_data_that_is_not_there_names_the_step_that_writes_it(finished_run, tmp_path):
    missing = tmp_path / "out/stories"
    res = invoke(eval_cli, "text", "--data", missing, "--checkpoint", latest(finished_run), "--device", "cpu")
    assert_input_error(res, f"--data {missing}: {NO_DATA}")


@pytest.mark.parametrize(
    "cli, args",
    [
        (sample_cli, ["--prompt", "Once"]),
        (model_cli, ["export-hf", "--out", "hf"]),
        (eval_cli, ["text", "--device", "cpu", "text.txt"]),
    ],
)
def test_a_checkpoint_that_is_not_there_names_the_step_that_writes_it(tmp_path, monkeypatch, cli, args):
    monkeypatch.chdir(tmp_path)
    Path("text.txt").write_text("Once upon a time\n")
    res = invoke(cli, *args, "--checkpoint", "runs/stories/latest")
    assert_input_error(res, f"runs/stories/latest: {NO_CHECKPOINT}")


# -- kills: workers die with their parent, temporaries are cleaned --------------------------------


def test_workers_die_with_a_killed_parent_and_its_temporaries_are_cleaned(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("<|endoftext|>".join(english_like(3000, seed=i) for i in range(300)))
    out = tmp_path / "tok.json"
    (tmp_path / ".tok.json.tmp-999999999").write_text("left by a writer killed long ago")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gptkit.tokenizer",
            "train",
            "--input",
            str(corpus),
            "--vocab-size",
            "4000",
            "--out",
            str(out),
            "--threads",
            "2",
            "--quiet",
        ],
        cwd=Path(__file__).resolve().parents[2],
    )

    def children():
        try:
            return [int(pid) for pid in Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()]
        except OSError:
            return []

    deadline = time.monotonic() + 60
    while len(children()) < 2 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    workers = children()
    assert len(workers) >= 2, "the workers never started"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 10
    while (
        any(
            Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
            for pid in workers
        )
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    alive = [
        pid
        for pid in workers
        if Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    ]
    for pid in alive:
        os.kill(pid, signal.SIGKILL)
    assert not alive, "workers outlived their killed parent"

    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "gptkit.tokenizer",
            "train",
            "--input",
            str(corpus),
            "--vocab-size",
            "300",
            "--out",
            str(out),
            "--quiet",
        ],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus.txt", "tok.json"]  # the stale temporary is gone


# -- pretokenize, corpora and tokenizer train: manifests, numbers, deep JSON -------------------


def a_corpus(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text("<|endoftext|>".join(english_like(100, seed=i) for i in range(20)))
    return path


@pytest.mark.parametrize("command", ["verify", "inspect", "train"])
@pytest.mark.parametrize(
    "content, needle",
    [
        ("{}", "format is missing"),
        ('{"format": "gptkit-shards", "version": 1, "name": "data", "shards": 3}', "tokenizer is missing"),
        ('{"format": "gptkit-shards", "version": 2}', "version 2 of the manifest, newer"),
        ("[" * 100_000 + "]" * 100_000, "not a readable manifest"),
    ],
)
def test_a_manifest_of_the_wrong_shape_is_named(data, model_json, tmp_path, command, content, needle):
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    copy, _ = copy_data(data, tmp_path)
    (copy / "manifest.json").write_text(content)
    if command == "train":
        res = invoke(train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=1))
        assert not (tmp_path / "r" / "latest").exists()
    else:
        res = invoke(pretokenize_cli, command, copy)
    assert_input_error(res, f"{copy / 'manifest.json'}: ", needle)


def test_encoding_into_a_directory_with_a_damaged_manifest_says_how_to_replace_it(data, tmp_path, small_tokenizer):
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    copy, _ = copy_data(data, tmp_path)
    (copy / "manifest.json").write_text("{}")
    before = sorted(p.name for p in copy.iterdir())
    base = ["--tokenizer", small_tokenizer[1], "--input", a_corpus(tmp_path), "--out", copy, "--quiet", "--threads", 1]
    assert_input_error(invoke(pretokenize_cli, *base), "manifest.json: format is missing", "--overwrite")
    assert sorted(p.name for p in copy.iterdir()) == before
    res = invoke(pretokenize_cli, *base, "--overwrite")
    assert res.exit_code == 0, res.output
    assert invoke(pretokenize_cli, "verify", copy).exit_code == 0


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--val-fraction", "nan"),
        ("--val-fraction", "inf"),
        ("--val-fraction", "-inf"),
        ("--val-fraction", "0"),
        ("--val-fraction", "1"),
        ("--val-fraction", "-0.5"),
        ("--val-tokens", "0"),
        ("--shard-tokens", "0"),
        ("--shard-tokens", str(2**31)),
        ("--threads", "0"),
    ],
)
def test_pretokenize_numbers_are_checked_at_the_boundary(tmp_path, small_tokenizer, flag, value):
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    out = tmp_path / "data"
    res = invoke(
        pretokenize_cli, "--tokenizer", small_tokenizer[1], "--input", a_corpus(tmp_path), "--out", out, flag, value
    )
    assert_input_error(res, flag)
    assert not out.exists()


@pytest.mark.parametrize(
    "rule",
    [
        dict(val_fraction=float("nan")),
        dict(val_fraction=1.0),
        dict(val_tokens=0),
        dict(val_tokens=2.5),
        dict(),
        dict(val_fraction=0.1, val_tokens=10),
    ],
)
def test_a_split_rule_checks_its_numbers_for_library_callers_too(rule):
    from gptkit.pretokenize.split import Split
    from gptkit.shared.errors import InputError

    with pytest.raises(InputError, match="^val_(fraction|tokens)"):  # the library's names, not the CLI's flags
        Split(**rule)


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--vocab-size", "nan"),
        ("--vocab-size", "-1"),
        ("--vocab-size", str(2**40)),
        ("--max-bytes", "0"),
        ("--threads", "0"),
    ],
)
def test_tokenizer_train_numbers_are_checked_at_the_boundary(tmp_path, flag, value):
    from gptkit.tokenizer.cli import cli as tokenizer_cli

    args = {"--vocab-size": "300", flag: value}
    res = invoke(
        tokenizer_cli,
        "train",
        "--input",
        a_corpus(tmp_path),
        "--out",
        tmp_path / "tok.json",
        "--quiet",
        *[item for pair in args.items() for item in pair],
    )
    assert_input_error(res, flag)
    assert not (tmp_path / "tok.json").exists()


@pytest.mark.parametrize("line", ['{"text": ' + "[" * 100_000 + "]" * 100_000 + "}", "[" * 100_000 + "]" * 100_000])
@pytest.mark.parametrize("command", ["pretokenize", "tokenizer train"])
def test_deeply_nested_json_is_one_line_naming_the_file_and_line(tmp_path, small_tokenizer, line, command):
    from gptkit.pretokenize.cli import cli as pretokenize_cli
    from gptkit.tokenizer.cli import cli as tokenizer_cli

    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "a first document"}\n' + line + "\n")
    if command == "pretokenize":
        out = tmp_path / "data"
        res = invoke(
            pretokenize_cli, "--tokenizer", small_tokenizer[1], "--input", corpus, "--out", out, "--threads", 1
        )
    else:
        out = tmp_path / "tok.json"
        res = invoke(tokenizer_cli, "train", "--input", corpus, "--vocab-size", 300, "--out", out, "--threads", 1)
    assert_input_error(res, f"{corpus}:2: JSON nested too deeply")
    assert not out.exists()


# -- JSON nested too deeply for the decoder, wherever a stage reads JSON ----------------------------

DEEP = "[" * 200_000 + "]" * 200_000


def deep_copy_of(run, name):
    """A copy of the finished run whose file `name` (run-relative) holds DEEP."""
    path = run / name
    if path.is_symlink() or not path.exists():
        path = path.resolve()
    path.write_text(DEEP)
    return run


@pytest.mark.parametrize(
    "where",
    [
        "tokenizer encode -t",
        "tokenizer convert --vocab",
        "train --config",
        "model info --config",
        "sample: the checkpoint's config.json",
        "train --resume: the run's config.json",
        "pretokenize: the data's manifest.json",
    ],
)
def test_json_nested_too_deeply_is_one_line_naming_the_file(where, run, data, model_json, tmp_path):
    from gptkit.cli import cli

    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    args = {
        "tokenizer encode -t": ["tokenizer", "encode", "-t", deep, "hello"],
        "tokenizer convert --vocab": [
            "tokenizer",
            "convert",
            "--vocab",
            deep,
            "--merges",
            deep,
            "--out",
            tmp_path / "t.json",
        ],
        "train --config": ["train", "--config", deep, "--data", data, "--out", tmp_path / "r"],
        "model info --config": ["model", "info", "--config", deep],
        "sample: the checkpoint's config.json": [
            "sample",
            "--checkpoint",
            deep_copy_of(run, "latest/config.json") / "latest",
            "--prompt",
            "a",
        ],
        "train --resume: the run's config.json": ["train", "--out", deep_copy_of(run, "config.json"), "--resume"],
        "pretokenize: the data's manifest.json": [
            "pretokenize",
            "inspect",
            deep_copy_of(_data_copy(data, tmp_path), "manifest.json"),
        ],
    }[where]
    res = invoke(cli, *args)
    assert "Traceback" not in res.output and "RecursionError" not in res.output
    assert_input_error(res, "nested too deeply")


def _data_copy(data, tmp_path):
    copy = tmp_path / "data"
    shutil.copytree(data, copy)
    return copy


@pytest.fixture
def pipe(tmp_path):
    """A named pipe nobody writes to, as the config.json of a directory. Were it read, the read
    would wait for ever: a writer ends the wait after 10 s, so that such a test fails instead of
    hanging."""
    path = tmp_path / "hf" / "config.json"
    path.parent.mkdir()
    os.mkfifo(path)

    def unblock():
        time.sleep(10)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)  # fails where no one reads it, as it should be
        except OSError:
            return
        os.write(fd, b"{}")
        os.close(fd)

    threading.Thread(target=unblock, daemon=True).start()
    return path


@pytest.mark.parametrize(
    "where", ["model info --config", "train --config", "tokenizer encode -t", "import-hf: config.json"]
)
def test_a_named_pipe_where_json_is_read_is_one_line_not_a_wait(where, pipe, data, tmp_path):
    from gptkit.cli import cli

    args = {
        "model info --config": ["model", "info", "--config", pipe],
        "train --config": ["train", "--config", pipe, "--data", data, "--out", tmp_path / "run"],
        "tokenizer encode -t": ["tokenizer", "encode", "-t", pipe, "hello"],
        "import-hf: config.json": ["model", "import-hf", "--from", pipe.parent, "--out", tmp_path / "ckpt"],
    }[where]
    assert_input_error(invoke(cli, *args), pipe, "not a regular file but a named pipe")


def test_a_metrics_line_nested_too_deeply_is_left_out_as_a_garbled_line(run):
    from gptkit.train.run_dir import read_metrics

    before = read_metrics(run)
    with open(run / "metrics.jsonl", "a") as f:
        f.write(DEEP + "\n")
    assert read_metrics(run) == before


def test_an_empty_stories_out_a_huge_threads_and_a_plot_out_under_a_file_are_one_line(run, tmp_path):
    from gptkit.cli import cli

    assert_input_error(invoke(cli, "stories", "--out", "", "--size", "1KB"), "--out ''")
    for stage in (
        ["tokenizer", "train", "--input", tmp_path, "--vocab-size", 300],
        ["pretokenize", "-t", tmp_path, tmp_path],
        ["train", "--out", tmp_path / "r"],
        ["sample", "--checkpoint", tmp_path, "--prompt", "a"],
    ):
        res = invoke(cli, *stage, "--threads", 2**70)
        assert res.exit_code == 2 and "--threads" in res.stderr and "Traceback" not in res.output, res.output
    (tmp_path / "file").write_text("mine")
    assert_input_error(invoke(cli, "train", "plot", run, "--out", tmp_path / "file" / "loss.png"), "cannot write there")
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.parametrize("value", ["abc", "100000"])
def test_an_omp_num_threads_that_cannot_work_is_one_line_in_every_stage_that_reads_it(tmp_path, monkeypatch, value):
    """Read where --threads is not given, by the stages of worker processes (click's default) and of
    torch's threads alike; 100000 crashed torch's kernels (SIGSEGV)."""
    from gptkit.cli import cli

    monkeypatch.setenv("OMP_NUM_THREADS", value)
    stages = (
        ["tokenizer", "train", "--input", tmp_path, "--vocab-size", 300],
        ["pretokenize", "-t", tmp_path, tmp_path, "--out", tmp_path / "out"],
        ["sample", "--checkpoint", tmp_path, "--prompt", "a"],
    )
    for stage in stages:
        assert_input_error(invoke(cli, *stage), f"OMP_NUM_THREADS={value}: ")
    for stage in stages:  # with --threads the environment is not read: the stage goes on to its input
        res = invoke(cli, *stage, "--threads", 1)
        assert res.exit_code == 2 and "OMP_NUM_THREADS" not in res.stderr, res.output


@pytest.mark.parametrize("field, value", [("step", -5), ("tokens", -1), ("step", True), ("step", 2**70)])
def test_a_trainer_state_with_a_count_out_of_range_and_a_matching_crc_is_refused(run, field, value):
    """A trainer_state.json edited with care (its CRC-32 in config.json rewritten to match): the
    counts are checked too."""
    rewritten(latest(run), "trainer_state.json", lambda state: state.update({field: value}))
    res = invoke(train_cli, "--out", run, "--resume", "--max-steps", 8)
    assert_input_error(res, "trainer_state.json", f"{field!r} is {value!r}, not a count")


# -- train on a manifest that disagrees with its shards, on unverified ids past the vocabulary ----


@pytest.mark.parametrize("verify", [True, False])
def test_a_manifest_token_count_that_disagrees_with_the_header_stops_training_before_it_starts(
    data, model_json, tmp_path, verify
):
    copy, shard = copy_data(data, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    entry = next(e for e in manifest["shards"] if e["file"] == shard.name)
    entry["tokens"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    res = invoke(
        train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2), *([] if verify else ["--no-verify-data"])
    )
    assert_input_error(
        res, f"{shard}: token count {entry['tokens'] - 1:,} in the header, {entry['tokens']:,} in manifest.json"
    )
    assert not (tmp_path / "r").exists()


def set_manifest_crc32(shard, checksum):
    """The manifest lists each shard's CRC-32 too: train compares it with the header's."""
    path = shard.parent / "manifest.json"
    manifest = json.loads(path.read_text())
    next(e for e in manifest["shards"] if e["file"] == shard.name)["crc32"] = f"{checksum:08x}"
    path.write_text(json.dumps(manifest))


def test_a_manifest_vocabulary_size_that_disagrees_with_the_headers_stops_training_before_it_starts(
    data, model_json, tmp_path
):
    copy, shard = copy_data(data, tmp_path)
    manifest = json.loads((copy / "manifest.json").read_text())
    vocab_size = manifest["tokenizer"]["vocab_size"]
    manifest["tokenizer"]["vocab_size"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    res = invoke(train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2), "--no-verify-data")
    assert_input_error(res, f"{shard}: vocabulary size {vocab_size} in the header, {vocab_size + 1} in manifest.json")
    assert not (tmp_path / "r").exists()


def past_the_vocabulary(shard, where):
    """Put an id past the vocabulary at `where` (an index or a slice) of a shard's tokens, the
    CRC-32 rewritten to match in the header and the manifest: only a check of the ids can tell.
    Returns the id."""
    header = ShardHeader.from_bytes(shard.read_bytes()[:HEADER_BYTES], shard)
    tokens = np.fromfile(shard, header.dtype, offset=HEADER_BYTES)
    tokens[where] = header.vocab_size + 3
    checksum = zlib.crc32(tokens.tobytes())
    shard.write_bytes(dataclasses.replace(header, checksum=checksum).to_bytes() + tokens.tobytes())
    set_manifest_crc32(shard, checksum)
    return header.vocab_size + 3


@pytest.mark.parametrize("split, at", [("train", 7), ("val", 40)])
def test_an_unverified_id_past_the_vocabulary_is_one_line_naming_the_shard_and_token(
    data, model_json, tmp_path, split, at
):
    """--no-verify-data skips the read of every id, not the check of each batch's ids (the first
    batch, in order: tokens 0-128 of the first train shard) and of the validation set's."""
    copy, _ = copy_data(data, tmp_path)
    shard = sorted(copy.glob(f"*_{split}_*.bin"))[0]
    bad = past_the_vocabulary(shard, at)
    res = invoke(
        train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2, loader="sequential"), "--no-verify-data"
    )
    assert res.exit_code == 2 and "Traceback" not in res.output, (
        res.output
    )  # the train batch's: after the "training" line
    assert res.stderr.startswith(
        f"Error: {shard}: token {at} is id {bad}, not below the vocabulary size {bad - 3} (unverified data"
    )
    assert len(res.stderr.splitlines()) == 1


def test_an_unverified_id_past_the_vocabulary_in_a_random_batch_is_named_where_it_is(data, model_json, tmp_path):
    copy, _ = copy_data(data, tmp_path)
    for shard in copy.glob("*_train_*.bin"):
        bad = past_the_vocabulary(shard, slice(1000, None))
    res = invoke(train_cli, *run_args(copy, tmp_path / "r", model_json, max_steps=2), "--no-verify-data")
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    shard, at = re.fullmatch(
        rf"Error: (\S+): token ([\d,]+) is id {bad}, not below the vocabulary size .*\n", res.stderr
    ).groups()
    at = int(at.replace(",", ""))
    assert at >= 1000 and np.fromfile(shard, np.uint16, offset=HEADER_BYTES)[at] == bad


def test_a_resume_finds_the_data_from_another_working_directory_or_through_a_link(run, data, tmp_path, monkeypatch):
    """config.json records the data directory resolved; a resume given it in another spelling
    (relative to another directory, through a link) is the same run."""
    assert json.loads((run / "config.json").read_text())["data"] == str(data.resolve())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    res = invoke(train_cli, "--out", run, "--resume", "--data", os.path.relpath(data, elsewhere), "--max-steps", 5)
    assert res.exit_code == 0, res.output
    (tmp_path / "link").symlink_to(data)
    res = invoke(train_cli, "--out", run, "--resume", "--data", tmp_path / "link", "--max-steps", 6)
    assert res.exit_code == 0, res.output
    assert [r["step"] for r in records(run)] == [1, 2, 3, 4, 5, 6]


def data_of_another_tokenizer(tmp_path):
    """tmp_path/other: a pretokenize directory of a 400-token tokenizer; and that tokenizer."""
    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import train_bpe

    (tmp_path / "docs.txt").write_text("<|endoftext|>".join(english_like(200, seed=i) for i in range(40)))
    other = train_bpe(Corpus([tmp_path / "docs.txt"]), 400, quiet=True)
    encode_corpus(
        Corpus([tmp_path / "docs.txt"]), other, tmp_path / "other", split=Split(val_fraction=0.1), workers=1, quiet=True
    )
    return tmp_path / "other", other


def test_a_resume_on_data_of_another_tokenizer_blames_the_data(run, data, tmp_path):
    from gptkit.tokenizer import Tokenizer

    _, other = data_of_another_tokenizer(tmp_path)
    ours = Tokenizer.from_file(data / "tokenizer.json")
    res = invoke(train_cli, "--out", run, "--resume", "--data", tmp_path / "other", "--max-steps", 5)
    assert_input_error(
        res,
        f"--data {tmp_path / 'other'}: encoded with tokenizer {other.fingerprint} (400 tokens), "
        f"the run was trained on tokenizer {ours.fingerprint} ({ours.vocab_size:,} tokens)",
    )


def test_a_new_run_on_data_of_another_tokenizer_names_the_checkpoints_tokenizer_as_the_user_gave_it(
    run, tmp_path, monkeypatch
):
    """The tokenizer.json that is there (a run's is its latest checkpoint's), by the user's relative path."""
    data_of_another_tokenizer(tmp_path)
    monkeypatch.chdir(tmp_path)
    res = invoke(train_cli, "--init-from", "run", "--data", "other", "--out", "new", "--device", "cpu")
    assert_input_error(
        res, "--data other: encoded with tokenizer", " in run; encode the data with run/latest/tokenizer.json"
    )
    assert (tmp_path / "run" / "latest" / "tokenizer.json").is_file() and not (tmp_path / "new").exists()


# -- a model too large for the memory, a disk too full for a checkpoint ---------------------------


def make_model(command, model_file, data, small_tokenizer, out):
    """`gptkit train` (2 steps, batch 4 x 32) or `gptkit model init` of the model in `model_file`."""
    if command == "train":
        return invoke(train_cli, *run_args(data, out, model_file, max_steps=2))
    return invoke(model_cli, "init", "--config", model_file, "-t", small_tokenizer[1], "--out", out)


@pytest.mark.parametrize("command", ["train", "model init"])
def test_a_model_too_large_for_the_memory_is_refused_before_it_is_built(command, data, small_tokenizer, tmp_path):
    # 550B parameters; without the check its embedding (470 MB) is built, then its first matrix
    # (256 GiB) fails to allocate, in a traceback
    huge = write_model(tmp_path / "huge.json", d_model=2**18, n_heads=2**11)
    res = make_model(command, huge, data, small_tokenizer, tmp_path / "out")
    setting = "--model" if command == "train" else "--config"
    assert_input_error(
        res,
        f"{setting} {huge}: {describe(ModelConfig(**json.loads(Path(huge).read_text())))}",
        "TiB",
        "more than the",
        "available on cpu",
    )
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("command", ["train", "model init"])
def test_a_model_larger_than_the_memory_available_is_refused_with_model_infos_estimate(
    command, data, model_json, small_tokenizer, tmp_path, monkeypatch
):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:        1000 kB\nMemFree:          100 kB\nMemAvailable:     100 kB\n")
    monkeypatch.setattr(device, "MEMINFO", meminfo)
    config = ModelConfig(**MODEL)
    needed = training_memory(config, 4, 4, 32) if command == "train" else {"weights": 4 * model_cost(config).params}
    res = make_model(command, model_json, data, small_tokenizer, tmp_path / "out")
    assert_input_error(
        res,
        f"{model_json}: {describe(config)}",
        f"needs ~{size(sum(needed.values()))} ",
        f"more than the {size(100 * 1024)} available on cpu",
    )
    assert not (tmp_path / "out").exists()
    monkeypatch.setattr(device, "MEMINFO", tmp_path / "absent")  # not Linux: nothing to compare with, nothing refused
    res = make_model(command, model_json, data, small_tokenizer, tmp_path / "out")
    assert res.exit_code == 0, res.output


CPU_ALLOCATOR_FAILED = (
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
    "to allocate 1649267441664 bytes. Error code 12 (Cannot allocate memory)"
)


@pytest.mark.parametrize("where", ["train: building the model", "train: the first step", "model init"])
def test_running_out_of_memory_all_the_same_is_one_line_naming_the_estimate(
    where, data, model_json, small_tokenizer, tmp_path, monkeypatch
):
    def cpu_allocator_fails(*args, **kwargs):
        raise RuntimeError(CPU_ALLOCATOR_FAILED)

    def cuda_allocator_fails(*args, **kwargs):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")

    if where == "train: building the model":
        monkeypatch.setattr(parallel, "TransformerLM", cpu_allocator_fails)
    elif where == "train: the first step":
        monkeypatch.setattr(trainer.Trainer, "train_step", cuda_allocator_fails)
    else:
        monkeypatch.setattr("gptkit.model.model.TransformerLM", cpu_allocator_fails)
    res = make_model(where.split(":")[0], model_json, data, small_tokenizer, tmp_path / "out")
    config = ModelConfig(**MODEL)
    estimate = size(
        4 * model_cost(config).params if where == "model init" else sum(training_memory(config, 4, 4, 32).values())
    )
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    [line] = res.stderr.splitlines()  # what the run logged before goes to stdout
    assert line.startswith(
        f"Error: {'--config' if where == 'model init' else '--model'} {model_json}: {describe(config)}"
    )
    assert f": out of memory on cpu (the estimate is ~{estimate} " in line
    assert line.endswith(
        f"; no checkpoint was written to {tmp_path / 'out'}"
        if where == "train: the first step"
        else "choose a smaller model"
        if where == "model init"
        else "--batch-size"
    )


SAFETENSORS_DISK_FULL = (
    "Error while serializing: I/O error: No space left on device (os error 28)"  # as safetensors 0.8 says it
)


def on_the_second_checkpoint(path):
    return ".step-000004_" in str(path)


def safetensors_fills_the_disk(monkeypatch):
    real = safetensors.torch.save_file

    def save_file(tensors, filename, metadata=None):
        if not on_the_second_checkpoint(filename):
            return real(tensors, filename, metadata)
        Path(filename).write_bytes(bytes(1000))  # a part of it, then the disk is full
        raise SafetensorError(SAFETENSORS_DISK_FULL)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)


def our_write_fills_the_disk(monkeypatch):
    real = Path.write_text

    def write_text(self, text, *args, **kwargs):
        if self.name != "trainer_state.json" or not on_the_second_checkpoint(self):
            return real(self, text, *args, **kwargs)
        real(self, text[:10])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_text", write_text)


@pytest.mark.parametrize("fill_the_disk", [safetensors_fills_the_disk, our_write_fills_the_disk])
def test_a_checkpoint_that_cannot_be_written_is_one_line_and_latest_stays_on_the_last_one(
    fill_the_disk, data, model_json, tmp_path, monkeypatch
):
    fill_the_disk(monkeypatch)
    run = tmp_path / "run"
    res = invoke(train_cli, *run_args(data, run, model_json, max_steps=4, checkpoint_interval=2))
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    previous = run / "checkpoints" / "step-000002_tokens-256"
    assert res.stderr == (
        f"Error: {run}/checkpoints/step-000004_tokens-512: cannot write (No space left on device); the last "
        f"checkpoint, {previous.name} in {run}, is intact; make room, then resume with: "
        f"gptkit train --out {run} --resume\n"
    )
    assert os.listdir(run / "checkpoints") == [previous.name]  # no part of the new one, under any name
    assert (run / "latest").resolve() == previous
    monkeypatch.undo()  # room made
    res = invoke(train_cli, "--out", run, "--resume")
    assert res.exit_code == 0, res.output
    assert (run / "latest").resolve().name == "step-000004_tokens-512" and [r["step"] for r in records(run)] == [
        1,
        2,
        3,
        4,
    ]


@pytest.mark.parametrize("command", ["init", "export-hf"])
def test_a_full_disk_while_writing_a_model_is_one_line_and_leaves_out_as_it_was(
    command, finished_run, small_tokenizer, model_json, tmp_path, monkeypatch
):
    args = (
        ["init", "--config", model_json, "-t", small_tokenizer[1]]
        if command == "init"
        else ["export-hf", "--checkpoint", finished_run / "latest"]
    )
    out = tmp_path / "out"
    assert invoke(model_cli, *args, "--out", out).exit_code == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def save_file(*args, **kwargs):
        raise SafetensorError(SAFETENSORS_DISK_FULL)

    monkeypatch.setattr(safetensors.torch, "save_file", save_file)
    res = invoke(model_cli, *args, "--out", out)
    assert_input_error(res, f"--out {out}: cannot write (No space left on device); nothing was written there")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before and os.listdir(tmp_path) == ["out"]


def test_a_file_size_limit_met_while_writing_a_checkpoint_is_one_line(data, model_json, tmp_path):
    """A real failed write: RLIMIT_FSIZE makes the kernel refuse a file past 300 KB (EFBIG) as a
    full disk refuses one (ENOSPC): model.safetensors (198 KB) is written, optimizer.safetensors
    (396 KB) is not."""
    resource = pytest.importorskip("resource")

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))  # Python ignores SIGXFSZ: writes fail instead

    run = tmp_path / "run"
    process = python_train(*run_args(data, run, model_json, max_steps=2), preexec_fn=limited)
    _, stderr = process.communicate(timeout=300)
    assert process.returncode == 1 and stderr == (
        f"Error: {run}/checkpoints/step-000002_tokens-256: cannot write (File too large); no checkpoint was written to "
        f"{run}; make room, then run the same command again\n"
    )
    assert os.listdir(run / "checkpoints") == [] and not (run / "latest").exists()


def test_more_samples_than_the_memory_holds_are_refused_before_sampling(finished_run):
    res = invoke(
        sample_cli,
        "--checkpoint",
        latest(finished_run),
        "--prompt",
        "the",
        "--num-samples",
        10**9,
        "--device",
        "cpu",
        "--seed",
        0,
    )
    assert_input_error(res, "--num-samples 1,000,000,000 samples of d_model", "KV cache", "ask for fewer --num-samples")
    assert res.stdout == ""


def test_a_full_disk_while_appending_to_metrics_is_one_line_naming_the_intact_checkpoint(
    data, model_json, tmp_path, monkeypatch
):
    from gptkit.train.run_dir import RunDir

    real = RunDir.append

    def append(self, record):
        if record.get("step", 0) >= 3:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(self, record)

    monkeypatch.setattr(RunDir, "append", append)
    run = tmp_path / "run"
    res = invoke(train_cli, *run_args(data, run, model_json, max_steps=4, checkpoint_interval=2))
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    assert res.stderr == (
        f"Error: {run}/metrics.jsonl: cannot write (No space left on device); the last checkpoint, "
        f"step-000002_tokens-256 in {run}, is intact; make room, then resume with: "
        f"gptkit train --out {run} --resume\n"
    )
    monkeypatch.undo()
    assert invoke(train_cli, "--out", run, "--resume").exit_code == 0
    assert [r["step"] for r in records(run)] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--eot-token", "<x>"], "--eot-token '<x>': not a special token of"),
        (["--val-input", "EMPTY"], "--val-input"),
    ],
)
def test_pretokenize_names_the_flag_whose_value_cannot_work(tmp_path, small_tokenizer, flags, needle):
    from gptkit.pretokenize.cli import cli as pretokenize_cli

    (tmp_path / "empty.txt").write_text("")
    flags = [str(tmp_path / "empty.txt") if f == "EMPTY" else f for f in flags]
    res = invoke(
        pretokenize_cli,
        "--tokenizer",
        small_tokenizer[1],
        "--input",
        a_corpus(tmp_path),
        *flags,
        "--out",
        tmp_path / "data",
    )
    assert_input_error(res, needle)
    assert not (tmp_path / "data").exists()
