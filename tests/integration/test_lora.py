"""LoRA fine-tuning through the CLI: `train --init-from CKPT --lora-rank R` trains adapters on frozen
weights (one process, FSDP in two, a time budget), its checkpoints hold the adapters alone and name
their base by place and digest, a resume is exact, and sample, eval and serve take the run directly.
The adapters' peft export is proven by peft itself, the merged export by merge_and_unload()."""

import hashlib
import importlib.util
import json
import shutil

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from gptkit.eval.cli import cli as eval_cli
from gptkit.model.checkpoint import CheckpointReader, config_digest, load_model, model_tensors, save_model
from gptkit.model.cli import cli as model_cli
from gptkit.model.config import ModelConfig
from gptkit.model.lora import LoraConfig, add_adapters, is_adapter
from gptkit.model.model import TransformerLM
from gptkit.sample.cli import cli as sample_cli
from gptkit.sample.sampling import Sampler
from tests.conftest import assert_input_error
from tests.integration.test_launch import train_in_two
from tests.serving import running
from tests.training import comparable, invoke, records, run_flags, same_files, stopped_after

LORA = ("--lora-rank", 2, "--lora-alpha", 4)


def lora_flags(data, out, base, **kw):
    return [*run_flags(data, out, None, lr=1e-2, **kw), "--init-from", base, *LORA]


@pytest.fixture(scope="module")
def base(data, model_json, tmp_path_factory):
    """A 4-step run of the tiny Llama-style model: the checkpoint the adapters adapt."""
    run = tmp_path_factory.mktemp("lora") / "base"
    res = invoke(*run_flags(data, run, model_json, max_steps=4, lr=3e-3))
    assert res.exit_code == 0, res.output
    return run


@pytest.fixture(scope="module")
def lora_run(data, base, tmp_path_factory):
    """6 steps of adapters on `base` (its run directory: its latest checkpoint), checkpoints at 3 and 6."""
    run = tmp_path_factory.mktemp("lora") / "run"
    res = invoke(*lora_flags(data, run, base, max_steps=6, checkpoint_interval=3), "--deterministic")
    assert res.exit_code == 0, res.output
    return run, res.output


def test_a_lora_checkpoint_holds_the_adapters_and_names_its_base(base, lora_run):
    run, output = lora_run
    # the data's one special token, its end-of-text, has its rows trained
    assert (
        "adapter parameters (LoRA rank 2, alpha 4, on wq,wk,wv,wo,w1,w2,w3; the rows of 1 token: <|endoftext|>) on"
        in output
    )
    latest = run / "latest"
    assert sorted(p.name for p in latest.iterdir()) == [
        "adapters.safetensors",
        "config.json",
        "optimizer.safetensors",
        "tokenizer.json",
        "trainer_state.json",
    ]
    record = json.loads((latest / "config.json").read_text())["lora"]
    base_dir = (base / "latest").resolve()
    assert record["base"] == str(base_dir) and record["rank"] == 2 and record["alpha"] == 4
    eot = json.loads((latest / "config.json").read_text())["tokenizer"]["eot_id"]
    assert record["tokens"] == [eot]
    assert record["base_digest"] == hashlib.sha256((base_dir / "config.json").read_bytes()).hexdigest()
    adapters = load_file(latest / "adapters.safetensors")
    assert set(adapters) and all(is_adapter(name) for name in adapters)
    assert all(t.abs().max() > 0 for name, t in adapters.items() if name.endswith("lora_b"))  # they trained
    assert adapters["embedding.token_rows"].shape == adapters["lm_head.token_rows"].shape == (1, 32)  # one row each
    optimizer = load_file(latest / "optimizer.safetensors")
    assert {name.split("/")[1].rsplit(".", 1)[0] for name in optimizer} == set(adapters)  # AdamW's of the adapters


def test_the_base_stays_frozen_and_the_merge_is_what_was_trained(base, lora_run, data):
    run, _ = lora_run
    merged, _ = load_model(run)
    plain, _ = load_model(base)
    merged_state, plain_state = merged.state_dict(), plain.state_dict()
    adapted = {name for name in plain_state if name.endswith(tuple(f".{t}.weight" for t in ("wq", "wo", "w1", "w3")))}
    eot = CheckpointReader(run).lora.tokens[0]
    for name, tensor in plain_state.items():
        if name in adapted:
            assert not torch.equal(merged_state[name], tensor), name
        elif name in ("embedding.weight", "lm_head.weight"):  # the end-of-text row trained, the others not
            assert not torch.equal(merged_state[name][eot], tensor[eot]), name
            assert torch.equal(merged_state[name][:eot], tensor[:eot]), name
            assert torch.equal(merged_state[name][eot + 1 :], tensor[eot + 1 :]), name
        elif not name.endswith((".wk.weight", ".wv.weight", ".w2.weight")):
            assert torch.equal(merged_state[name], tensor), name  # norms: untouched
    # the merged model computes what the model with its adapters apart computes
    reader = CheckpointReader(run)
    apart = TransformerLM(merged.config)
    add_adapters(apart, reader.lora)
    apart.load_state_dict(reader.weights(apart, merged_in=False), strict=False)
    ids = torch.randint(0, merged.config.vocab_size, (2, 32))
    with torch.no_grad():
        assert (apart.eval()(ids)[0] - merged(ids)[0]).abs().max() < 1e-5
    # eval takes the run, and scores it apart from its base
    scores = []
    for checkpoint in (run, base):
        res = CliRunner().invoke(
            eval_cli, ["text", "--checkpoint", str(checkpoint), "--data", str(data), "--device", "cpu"]
        )
        assert res.exit_code == 0, res.output
        scores.append(float(res.output.split("loss ")[-1].split(" nats")[0]))
    assert scores[0] < scores[1]


def test_sample_and_serve_take_a_lora_run(lora_run):
    run, _ = lora_run
    res = CliRunner().invoke(
        sample_cli,
        ["--checkpoint", str(run), "--prompt", "the cat", "--temperature", "0", "--max-new-tokens", "12"]
        + ["--device", "cpu", "--num-samples", "1"],
    )
    assert res.exit_code == 0, res.output
    sampler = Sampler(str(run), device="cpu")
    openai = pytest.importorskip("openai")
    with running(sampler) as url, openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0) as client:
        out = client.completions.create(model="tiny", prompt="the cat", max_tokens=12, temperature=0)
    assert out.choices[0].text and out.choices[0].text in res.output  # greedy: the same text both ways


def test_a_resume_of_a_lora_run_is_exact(data, base, lora_run, tmp_path):
    run, _ = lora_run
    resumed = tmp_path / "resumed"
    shutil.copytree(run, resumed, symlinks=True)
    stopped_after(resumed, 3)
    res = invoke("--out", resumed, "--resume", "--lora-rank", 3)
    assert_input_error(res, "its adapters are rank 2, alpha 4 on wq,wk,", "a resume keeps the run's adapters")
    eot = CheckpointReader(run).lora.tokens[0]
    res = invoke("--out", resumed, "--resume", "--lora-train-tokens", "none")
    assert_input_error(
        res,
        f"with the rows of tokens {eot}, and the settings ask for",
        "with no token rows; a resume keeps the run's",
        f"(resume with --lora-train-tokens {eot})",
    )
    res = invoke("--out", resumed, "--resume")
    assert res.exit_code == 0, res.output
    assert comparable(resumed) == comparable(run)
    assert (
        load_file(resumed / "latest" / "adapters.safetensors").keys()
        == load_file(run / "latest" / "adapters.safetensors").keys()
    )
    for name, tensor in load_file(run / "latest" / "adapters.safetensors").items():
        assert torch.equal(load_file(resumed / "latest" / "adapters.safetensors")[name], tensor), name


def test_a_lora_runs_own_config_json_runs_it_again(lora_run, tmp_path):
    """config.json records the checkpoint's model beside --init-from: run again from it (--config), that
    model is no second one, and the adapters train as they did, byte for byte."""
    run, _ = lora_run
    again = tmp_path / "again"
    res = invoke("--config", run / "config.json", "--out", again)
    assert res.exit_code == 0, res.output
    assert comparable(again) == comparable(run)
    assert same_files(run / "latest", again / "latest")


def test_adapters_whose_base_changed_or_went_are_refused_in_one_line(base, lora_run, tmp_path):
    run, _ = lora_run
    moved_base = tmp_path / "base"
    shutil.copytree((base / "latest").resolve(), moved_base)
    copy = tmp_path / "run"
    shutil.copytree(run, copy, symlinks=True)
    config_path = copy / "latest" / "config.json"
    config = json.loads(config_path.read_text())
    config["lora"]["base"] = str(moved_base)
    config_path.write_text(json.dumps(config))
    assert load_model(copy)  # the same base, elsewhere
    base_config = json.loads((moved_base / "config.json").read_text())
    base_config["model"]["init_std"] = 0.5  # another checkpoint there now
    (moved_base / "config.json").write_text(json.dumps(base_config))
    for res in (
        CliRunner().invoke(sample_cli, ["--checkpoint", str(copy), "--prompt", "a", "--device", "cpu"]),
        invoke("--out", copy, "--resume", "--max-steps", 8),
    ):
        assert_input_error(res, "its adapters were trained on the checkpoint", str(moved_base), "put that one back")
    shutil.rmtree(moved_base)
    res = CliRunner().invoke(sample_cli, ["--checkpoint", str(copy), "--prompt", "a", "--device", "cpu"])
    assert_input_error(res, "its adapters need the checkpoint they adapt", str(moved_base))


def test_bad_lora_settings_are_one_line_and_write_nothing(data, base, tmp_path, small_tokenizer):
    out = tmp_path / "run"
    cases = [
        (("--lora-rank", 40), "--lora-rank", "40: larger than the projection wq (32 x 32) it adapts; at most 32"),
        (("--lora-rank", 2, "--lora-targets", "wq,gate"), "--lora-targets", "'gate': expected all (alone), or some of"),
        (("--lora-rank", 2, "--optimizer", "muon"), "--optimizer", "adapters train with adamw"),
        (("--lora-rank", 2, "--lora-train-tokens", "<|end|>"), "--lora-train-tokens", "expected none (alone), or"),
        (("--lora-rank", 2, "--lora-train-tokens", "special,450"), "--lora-train-tokens", "450: not a token id of"),
    ]
    for extra, *needles in cases:
        res = invoke(*run_flags(data, out, None, max_steps=2), "--init-from", base, *map(str, extra))
        assert_input_error(res, *needles)
        assert not out.exists()
    res = invoke(*run_flags(data, out, None, max_steps=2), "--lora-rank", 2)
    assert_input_error(res, "--lora-rank", "give it with --init-from")
    res = invoke(*run_flags(data, out, None, max_steps=2), "--init-from", base, "--lora-alpha", 3)
    assert_input_error(res, "--lora-alpha", "only with --lora-rank")
    res = invoke(*run_flags(data, out, None, max_steps=2), "--init-from", base, "--lora-train-tokens", "none")
    assert_input_error(res, "--lora-train-tokens none: only with --lora-rank")
    # a GPT-2 checkpoint has no w3
    tok, _ = small_tokenizer
    gpt2 = ModelConfig(
        tok.vocab_size, context_length=64, d_model=32, n_layers=1, n_heads=2, d_ff=64, architecture="gpt2"
    )
    save_model(TransformerLM(gpt2), tok, tmp_path / "gpt2")
    res = invoke(*run_flags(data, out, None, max_steps=2), "--init-from", tmp_path / "gpt2", *LORA)
    assert res.exit_code == 0, res.output  # all of GPT-2's projections
    shutil.rmtree(out)
    res = invoke(
        *run_flags(data, out, None, max_steps=2), "--init-from", tmp_path / "gpt2", *LORA, "--lora-targets", "w3"
    )
    assert_input_error(
        res, "--lora-targets", "w3: architecture 'gpt2' has no such projection (it has wq, wk, wv, wo, w1, w2)"
    )
    assert not out.exists()


def test_lora_with_fsdp_in_two_processes_trains_what_one_process_does(data, base, lora_run, tmp_path):
    run, _ = lora_run
    sharded = tmp_path / "fsdp"
    proc = train_in_two(*lora_flags(data, sharded, base, max_steps=6, checkpoint_interval=3, parallel="fsdp"))
    assert proc.returncode == 0, proc.stderr_text
    ours = [r["loss"] for r in records(sharded)]
    assert ours == pytest.approx([r["loss"] for r in records(run)], abs=2e-3)
    assert (
        load_file(sharded / "latest" / "adapters.safetensors").keys()
        == load_file(run / "latest" / "adapters.safetensors").keys()
    )


def test_a_lora_run_keeps_its_time_budget(data, base, tmp_path):
    run = tmp_path / "timed"
    res = invoke(*lora_flags(data, run, base, max_time="6s"))
    assert res.exit_code == 0, res.output
    config = json.loads((run / "config.json").read_text())
    assert config["max_time"] == "6s" and config["lora_rank"] == 2
    assert (run / "latest" / "adapters.safetensors").is_file()


# -- peft ------------------------------------------------------------------------------------------


def lora_checkpoint(tokenizer, root, architecture, targets, tokens=(), **model):
    """A base checkpoint and a LoRA checkpoint on it with random adapters (B and the rows of `tokens`
    too, so that they change what the model computes), as a run writes them."""
    torch.manual_seed(0)
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        context_length=64,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_ff=64,
        init_std=0.1,
        architecture=architecture,
        **model,
    )
    model_ = TransformerLM(config)
    eot = tokenizer.special_tokens["<|endoftext|>"]
    save_model(model_, tokenizer, root / "base", eot_id=eot)
    lora = LoraConfig.of(config, 3, 5.0, targets, tokens)
    add_adapters(model_, lora)
    with torch.no_grad():
        for name, p in model_.named_parameters():
            if name.endswith(("lora_b", "token_rows")):
                p.normal_(0, 0.2)
    adapters = {name: t for name, t in model_tensors(model_).items() if is_adapter(name)}
    record = {**lora.to_dict(), "base": str(root / "base"), "base_digest": config_digest(root / "base")}
    save_model(model_, tokenizer, root / "lora", eot_id=eot, tensors=adapters, lora=record)
    return root / "base", root / "lora"


@pytest.mark.parametrize(
    "architecture, targets, tokens, model",
    [
        ("llama", None, (), dict(n_kv_heads=2, qkv_bias=True)),  # Qwen2ForCausalLM: GQA and q/k/v biases
        ("llama", ["wq", "w2"], (0, 17, 449), dict(tie_embeddings=True)),  # trained rows, one set for both
        ("gpt2", ["wq", "wv", "wo", "w2"], (3, 5), {}),  # two thirds of c_attn fused, both c_proj; rows of each
        ("gpt2", None, (), {}),
    ],
)
def test_peft_computes_what_the_lora_checkpoint_does(tmp_path, small_tokenizer, architecture, targets, tokens, model):
    transformers = pytest.importorskip("transformers")
    peft = pytest.importorskip("peft")
    tok, _ = small_tokenizer
    base, lora = lora_checkpoint(tok, tmp_path, architecture, targets, tokens, **model)
    runner = CliRunner()
    for args in (
        ["--checkpoint", base, "--out", tmp_path / "base-hf"],
        ["--checkpoint", lora, "--out", tmp_path / "peft", "--peft"],
        ["--checkpoint", lora, "--out", tmp_path / "merged"],
    ):
        res = runner.invoke(model_cli, ["export-hf", *map(str, args)])
        assert res.exit_code == 0, res.output
    rows = {k: t.shape for k, t in load_file(tmp_path / "peft" / "adapter_model.safetensors").items() if "token" in k}
    tied = model.get("tie_embeddings", False)
    assert list(rows.values()) == [(len(tokens), 32)] * ((1 if tied else 2) if tokens else 0)  # the rows alone
    ours, _ = load_model(lora)
    ids = torch.tensor([[*tokens, *tok.encode("the cat sat on the mat, and the dog ran over the hill."), *tokens]])
    with torch.no_grad():
        expected = ours(ids)[0]
        hf_base = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "base-hf")
        adapted = peft.PeftModel.from_pretrained(hf_base, tmp_path / "peft").eval()
        assert (adapted(ids).logits - expected).abs().max() < 1e-5
        merged = adapted.merge_and_unload()
        exported = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
        theirs, mine = merged.state_dict(), exported.state_dict()
        assert theirs.keys() == mine.keys()
        for name in theirs:
            assert torch.allclose(theirs[name], mine[name], atol=1e-6), name
        assert (exported(ids).logits - expected).abs().max() < 1e-5


def test_peft_export_of_a_checkpoint_without_adapters_is_one_line(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    base, _ = lora_checkpoint(tok, tmp_path, "llama", None)
    res = CliRunner().invoke(
        model_cli, ["export-hf", "--checkpoint", str(base), "--out", str(tmp_path / "x"), "--peft"]
    )
    assert_input_error(res, f"--checkpoint {base}: holds no adapters")
    assert not (tmp_path / "x").exists()


def test_the_gguf_export_of_a_lora_checkpoint_is_the_merged_model(tmp_path, small_tokenizer):
    pytest.importorskip("gguf")
    from tests.unit.test_gguf import tensors

    tok, _ = small_tokenizer
    base, lora = lora_checkpoint(tok, tmp_path, "gpt2", ["wq", "w1"], (3, 5))
    res = CliRunner().invoke(
        model_cli, ["export-gguf", "--checkpoint", str(lora), "--out", str(tmp_path / "m.gguf"), "--dtype", "f32"]
    )
    assert res.exit_code == 0, res.output
    merged, _ = load_model(lora)
    state = merged.state_dict()
    read = tensors(tmp_path / "m.gguf")
    qkv = torch.cat([state[f"layers.1.attention.{w}.weight"] for w in ("wq", "wk", "wv")]).numpy()
    assert (read["blk.1.attn_qkv.weight"][1] == qkv).all()
    assert (read["blk.0.ffn_up.weight"][1] == state["layers.0.ffn.w1.weight"].numpy()).all()
    plain = load_model(base)[0].state_dict()
    for name, theirs in (("embedding.weight", "token_embd.weight"), ("lm_head.weight", "output.weight")):
        assert (read[theirs][1] == state[name].numpy()).all()
        assert not torch.equal(state[name][[3, 5]], plain[name][[3, 5]])  # the trained rows, carried


def test_an_adapters_file_that_is_not_the_records_adapters_is_refused(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    base, lora = lora_checkpoint(tok, tmp_path, "llama", ["wq"])
    model, _ = load_model(base)
    record = json.loads((lora / "config.json").read_text())["lora"]
    adapters = load_file(lora / "adapters.safetensors")
    eot = tok.special_tokens["<|endoftext|>"]
    for name, tensors, needle in (
        ("stray", {**adapters, "embedding.weight": torch.zeros_like(model.embedding.weight)}, "'embedding.weight'"),
        ("short", {k: v for k, v in adapters.items() if not k.startswith("layers.1.")}, "no tensor 'layers.1."),
    ):
        save_model(model, tok, tmp_path / name, eot_id=eot, tensors=tensors, lora=record)
        for res in (
            CliRunner().invoke(sample_cli, ["--checkpoint", str(tmp_path / name), "--prompt", "a", "--device", "cpu"]),
            CliRunner().invoke(
                model_cli, ["export-hf", "--checkpoint", str(tmp_path / name), "--out", str(tmp_path / "x"), "--peft"]
            ),
        ):
            assert_input_error(res, str(tmp_path / name / "adapters.safetensors"), needle)
        assert not (tmp_path / "x").exists()


# -- the checkpoint a LoRA run adapts is an input of every command that reads the run ---------------


def contents(directory):
    """Every path under `directory` and the bytes of its files: what a refused command leaves as it was."""
    return {p.relative_to(directory): p.read_bytes() if p.is_file() else None for p in directory.rglob("*")}


def test_no_command_writes_over_or_into_the_checkpoint_a_lora_run_adapts(data, model_json, tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    base, lora = lora_checkpoint(tok, tmp_path, "llama", ["wq"])
    before = contents(base)
    adapts = f"{base}, the checkpoint whose weights --checkpoint {lora} adapts"
    cases = [
        (model_cli, ["export-hf", "--checkpoint", lora, "--out", base, "--overwrite"], f"--out {base}: is {adapts}"),
        (model_cli, ["export-hf", "--checkpoint", lora, "--out", base, "--overwrite", "--peft"], f"is {adapts}"),
        (eval_cli, ["text", "--checkpoint", lora, "--data", data, "--out", base / "r.json"], f"lies inside {adapts}"),
    ]
    if importlib.util.find_spec("gguf") is not None:
        cases += [
            (
                model_cli,
                ["export-gguf", "--checkpoint", lora, "--out", base / "model.safetensors", "--overwrite"],
                adapts,
            ),
            (model_cli, ["export-gguf", "--checkpoint", lora, "--out", base / "x.gguf"], f"lies inside {adapts}"),
        ]
    for cli, args, needle in cases:
        assert_input_error(CliRunner().invoke(cli, [str(a) for a in args]), needle, "choose a path apart from it")
        assert contents(base) == before
    # training: inside its own frozen base, inside the base of the checkpoint it starts from, inside its data
    for extra, out, needle in (
        (
            ("--init-from", base, *LORA),
            base / "lora",
            f"--out {base / 'lora'}: lies inside --init-from {base}, the input",
        ),
        (("--init-from", base), base, f"--out {base}: is --init-from {base}, the input"),
        (
            ("--init-from", lora),
            base / "run",
            f"lies inside {base}, the checkpoint whose weights --init-from {lora} adapts",
        ),
        (("--model", model_json), data / "run", f"--out {data / 'run'}: lies inside --data {data}, the input"),
    ):
        data_before = contents(data)
        assert_input_error(invoke(*run_flags(data, out, None, max_steps=2), *extra), needle)
        assert contents(base) == before and contents(data) == data_before


# -- numbers and records checked where they are read -------------------------------------------------


def commands_that_read(checkpoint, tmp_path):
    """What reads a checkpoint's weights for use: sample, eval, serve and every export."""
    from gptkit.serve.cli import cli as serve_cli

    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat. " * 8)
    at = ["--checkpoint", str(checkpoint)]
    return {
        "sample": (sample_cli, [*at, "--prompt", "Once", "--temperature", "0", "--device", "cpu"]),
        "eval": (eval_cli, ["text", *at, "--input", str(text), "--device", "cpu", "-q"]),
        "serve": (serve_cli, [*at, "--port", "0", "--device", "cpu"]),
        "export-hf": (model_cli, ["export-hf", *at, "--out", str(tmp_path / "hf")]),
        "export-hf --peft": (model_cli, ["export-hf", *at, "--out", str(tmp_path / "peft"), "--peft"]),
        "export-gguf": (model_cli, ["export-gguf", *at, "--out", str(tmp_path / "m.gguf")]),
    }


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e30])  # 1e30: finite, merged past float32's range
def test_adapters_that_are_not_finite_are_refused_by_every_reader(tmp_path, small_tokenizer, value):
    """Adapters set to NaN with the file's CRC-32 recorded anew pass every check of the file's own: sample
    printed the token of id 0 (`Once\\x00\\x00...`) and the exports wrote them on. Each reader refuses them
    in one line naming the adapters' file; the adapters apart (the peft export) hold 1e30 as it is."""
    tok, _ = small_tokenizer
    base, lora = lora_checkpoint(tok, tmp_path, "llama", ["wq"])
    model, _ = load_model(base)
    record = json.loads((lora / "config.json").read_text())["lora"]
    adapters = load_file(lora / "adapters.safetensors")
    adapters["layers.1.attention.wq.lora_b"][0] = value
    if value == 1e30:
        adapters["layers.1.attention.wq.lora_a"][:, 0] = value
    save_model(model, tok, tmp_path / "bad", eot_id=tok.special_tokens["<|endoftext|>"], tensors=adapters, lora=record)
    for what, (cli, args) in commands_that_read(tmp_path / "bad", tmp_path).items():
        if what == "export-hf --peft" and value == 1e30:
            continue
        res = CliRunner().invoke(cli, args)
        assert_input_error(res, str(tmp_path / "bad" / "adapters.safetensors"), "holds NaN or infinite values")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "base", "lora", "text.txt"]  # nothing written


def test_a_checkpoint_with_nan_weights_is_refused_by_every_reader(tmp_path, small_tokenizer, data):
    """A checkpoint whose norm weights are NaN exported to GGUF without a word; a run cannot train on from it."""
    tok, _ = small_tokenizer
    base, _ = lora_checkpoint(tok, tmp_path, "llama", ["wq"])
    model, _ = load_model(base)
    with torch.no_grad():
        model.layers[0].attention_norm.weight[3] = torch.nan
    save_model(model, tok, tmp_path / "nan", eot_id=tok.special_tokens["<|endoftext|>"])
    for what, (cli, args) in commands_that_read(tmp_path / "nan", tmp_path).items():
        if what == "export-hf --peft":  # holds no adapters: refused as such, before any weight is read
            continue
        res = CliRunner().invoke(cli, args)
        assert_input_error(res, f"{tmp_path / 'nan' / 'model.safetensors'}: tensor 'layers.0.attention_norm.weight'")
    for lora in ((), LORA):
        res = invoke(*run_flags(data, tmp_path / "run", None, max_steps=1), "--init-from", tmp_path / "nan", *lora)
        assert_input_error(res, f"{tmp_path / 'nan' / 'model.safetensors'}: tensor 'layers.0.attention_norm.weight'")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["base", "lora", "nan", "text.txt"]


@pytest.mark.parametrize(
    "change, needle",
    [
        (lambda r: r.pop("base_digest"), "lora is damaged (no base_digest; expected the SHA-256"),
        (lambda r: r.update(base_digest="3f2a"), "lora is damaged (base_digest is '3f2a'; expected the SHA-256"),
        (lambda r: r.pop("base"), "lora is damaged (no base; expected the directory of the checkpoint"),
    ],
)
def test_a_damaged_lora_record_is_named_as_damaged_not_as_another_base(tmp_path, small_tokenizer, change, needle):
    """A record without its base's digest said the base was "another checkpoint ... put that one back",
    though the base was the right one."""
    tok, _ = small_tokenizer
    _, lora = lora_checkpoint(tok, tmp_path, "llama", ["wq"])
    config = json.loads((lora / "config.json").read_text())
    change(config["lora"])
    (lora / "config.json").write_text(json.dumps(config))
    res = CliRunner().invoke(sample_cli, ["--checkpoint", str(lora), "--prompt", "a", "--device", "cpu"])
    assert_input_error(res, f"{lora / 'config.json'}: {needle}")
    assert "put that one back" not in res.stderr
