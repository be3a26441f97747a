"""The `model` CLI (click's runner and a subprocess): info, init (which never replaces what is not a
checkpoint), export, bad input."""

import json
import os
import re
import subprocess
import sys

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import load_model
from gptkit.model.cli import cli
from gptkit.model.config import load_config, preset_names
from gptkit.model.info import model_cost, training_memory
from tests.conftest import assert_input_error
from tests.unit.test_model import cfg  # noqa: F401 (fixtures)


def test_init_never_replaces_what_is_not_a_checkpoint(small_tokenizer, tmp_path):
    small_tokenizer[0].save(tmp_path / "tok.json")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("precious")
    (tmp_path / "file").write_text("precious too")
    base = ["init", "--config", "tiny", "--tokenizer", str(tmp_path / "tok.json")]
    for target in ("mine", "file"):
        res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / target)])
        assert_input_error(res, str(tmp_path / target), "--overwrite")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "precious" and (
        tmp_path / "file"
    ).read_text() == "precious too"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file", "mine", "tok.json"]  # nothing left beside them
    for args in (
        ["--out", str(tmp_path / "ckpt")],
        ["--out", str(tmp_path / "ckpt"), "--seed", "1"],  # ours: replaced
        ["--out", str(tmp_path / "file"), "--overwrite"],
    ):
        res = CliRunner().invoke(cli, [*base, *args])
        assert res.exit_code == 0, res.output
    load_model(tmp_path / "ckpt")
    load_model(tmp_path / "file")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "file", "mine", "tok.json"]


# -- command line ----------------------------------------------------------------------------


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def assert_ok(res):
    assert res.exit_code == 0, (res.output, res.exception)
    return res


def test_cli_info():
    res = assert_ok(invoke("info", "--config", "tiny"))
    cost = model_cost(load_config("tiny"))
    lines = res.stdout.splitlines()
    assert any(line.startswith("parameters: ") and f"{cost.params:,}" in line for line in lines)
    assert any(line.startswith("training FLOPs per token: ") and f"{cost.flops_per_token:,}" in line for line in lines)
    assert "GiB" in res.stdout


def test_cli_info_per_process_memory_with_fsdp_and_activation_checkpointing():
    """`model info --ranks N --parallel fsdp`: one process's share of the state, the weights FSDP
    gathers whole beside it, and activations with and without activation checkpointing."""
    config = load_config("gpt2-medium")
    res = assert_ok(invoke("info", "--config", "gpt2-medium", "--ranks", 8, "--parallel", "fsdp", "--batch-size", 64))
    lines = res.stdout.splitlines()
    assert "training memory in each of 8 processes (fsdp) at batch 8 x 1024 = 8,192 tokens (estimate):" in lines
    gib = {
        line.split(":")[0].strip(): dict(
            (k.strip(), float(v)) for k, v in re.findall(r"([a-z ]+) ([\d.]+)(?:,|\))", line.split("(", 1)[1])
        )
        for line in lines
        if line.startswith("  ") and "GiB" in line
    }
    plain, recomputed = gib["float32"], gib["float32 with activation checkpointing"]
    params = model_cost(config).params
    assert plain["weights"] == pytest.approx(4 * params / 8 / 2**30, abs=0.01) and plain["adamw"] == pytest.approx(
        8 * params / 8 / 2**30, abs=0.01
    )
    assert plain["gathered weights"] > 0 and recomputed["activations"] < plain["activations"] / 2
    whole = training_memory(config, 8, 4)  # DDP: every process holds the state whole, nothing gathered
    assert whole["weights"] == 4 * params and "gathered weights" not in whole
    sharded = training_memory(config, 8, 4, shards=8, activation_checkpointing=True)
    assert sharded["weights"] == -(-4 * params // 8)
    assert sharded["activations"] / 2**30 == pytest.approx(
        recomputed["activations"], abs=0.005
    )  # what the line printed
    assert_input_error(
        invoke("info", "--config", "tiny", "--ranks", 3, "--batch-size", 8), "--batch-size 8", "--ranks 3"
    )


def test_cli_info_does_not_import_torch(tmp_path):
    """`model info` is arithmetic on the config: importing torch would make it take seconds."""
    probe = (
        "import sys; from gptkit.cli import cli; cli(['model', 'info', '--config', 'tiny'], standalone_mode=False); "
        "print('torch' in sys.modules)"
    )
    res = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and res.stdout.startswith("config: tiny\n") and res.stdout.endswith("\nFalse\n"), res


def test_cli_init_and_export(tmp_path, small_tokenizer):
    tok, tok_path = small_tokenizer
    config_file = tmp_path / "m.json"
    config_file.write_text(json.dumps(cfg(vocab_size=64).to_dict()))
    res = assert_ok(
        invoke("init", "--config", config_file, "--tokenizer", tok_path, "--out", tmp_path / "a", "--seed", 3)
    )
    assert "vocab_size 64 -> 450" in res.stderr and "wrote" in res.stdout
    model, loaded_tok = load_model(tmp_path / "a")
    assert model.config.vocab_size == 450 and loaded_tok.fingerprint == tok.fingerprint
    assert_ok(invoke("init", "--config", config_file, "-t", tok_path, "--out", tmp_path / "b", "--seed", 3))
    assert_ok(invoke("init", "--config", config_file, "-t", tok_path, "--out", tmp_path / "c", "--seed", 4))
    assert torch.equal(load_model(tmp_path / "b")[0].embedding.weight, model.embedding.weight)
    assert not torch.equal(load_model(tmp_path / "c")[0].embedding.weight, model.embedding.weight)

    assert_ok(invoke("export-hf", "--checkpoint", tmp_path / "a", "--out", tmp_path / "hf"))
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= set(
        os.listdir(tmp_path / "hf")
    )
    assert json.loads((tmp_path / "hf" / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]


def test_cli_bad_input(tmp_path, small_tokenizer):
    _, tok_path = small_tokenizer
    assert_input_error(invoke("info", "--config", "nope"), "nope", *preset_names())
    assert_input_error(invoke("init", "--config", "nope", "-t", tok_path, "--out", tmp_path / "x"), "nope")
    assert_input_error(
        invoke("init", "--config", "tiny", "-t", tmp_path / "missing.json", "--out", tmp_path / "x"), "missing.json"
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"vocab_size": 10, "d_model": 100, "n_heads": 16}))
    assert_input_error(invoke("info", "--config", bad), "bad.json", "n_heads")
    (tmp_path / "empty").mkdir()
    assert_input_error(
        invoke("export-hf", "--checkpoint", tmp_path / "empty", "--out", tmp_path / "hf"), "incomplete checkpoint"
    )
    assert_input_error(
        invoke("export-hf", "--checkpoint", tmp_path / "nowhere", "--out", tmp_path / "hf"),
        "no such checkpoint directory",
    )
    assert sorted(os.listdir(tmp_path)) == ["bad.json", "empty"]
