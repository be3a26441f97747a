"""The Hugging Face export generates what `sample` generates: its tokenizer puts <|endoftext|>
before the text as `sample` does, and greedy decoding in `transformers` gives our ids."""

import json

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import save_model
from gptkit.model.cli import cli
from gptkit.model.config import ModelConfig
from gptkit.model.generate import generate, prompt_ids
from gptkit.model.hf import export_hf
from gptkit.model.model import TransformerLM
from gptkit.tokenizer import Tokenizer, split
from tests.conftest import assert_input_error

transformers = pytest.importorskip("transformers")

EOT = "<|endoftext|>"
PROMPTS = ["Once upon a time, the little cat", "東京 café: don't stop 42\n\n  ok"]


def random_model(tokenizer, seed=0, **kw):
    """A random model whose norm gains and biases are not 1 and 0 and whose weights are large enough
    for its logits to be far apart, so that greedy decoding has no near-ties to break differently."""
    config = ModelConfig(
        vocab_size=tokenizer.vocab_size,
        context_length=64,
        d_model=64,
        n_layers=2,
        n_heads=4,
        d_ff=128,
        init_std=0.2,
        **{"n_kv_heads": None if kw.get("architecture") == "gpt2" else 2, **kw},
    )
    torch.manual_seed(seed)
    model = TransformerLM(config).eval()
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 1:
                p.uniform_(0.5, 1.5)
    return model


def sample_prompt_ids(tokenizer, prompt):
    """The ids `sample` starts from: the checkpoint's end-of-text token, then the prompt."""
    return prompt_ids(tokenizer, prompt, tokenizer.special_tokens[EOT])


def exported(tmp_path, tokenizer, **kw):
    model = random_model(tokenizer, **kw)
    save_model(model, tokenizer, tmp_path / "ckpt", eot_id=tokenizer.special_tokens.get(EOT))
    export_hf(tmp_path / "ckpt", tmp_path / "hf")
    return model, tmp_path / "hf"


LLAMA3 = {
    "rope_type": "llama3",
    "factor": 4.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}


@pytest.mark.parametrize(
    "kw, arch",
    [
        ({}, "LlamaForCausalLM"),
        ({"qk_norm": True, "head_dim": 32}, "Qwen3ForCausalLM"),
        ({"qkv_bias": True}, "Qwen2ForCausalLM"),
        ({"rope_scaling": LLAMA3}, "LlamaForCausalLM"),
        ({"architecture": "gpt2"}, "GPT2LMHeadModel"),
    ],
    ids=["llama", "qwen3", "qwen2", "llama3-rope-scaling", "gpt2"],
)
def test_greedy_generate_matches_our_sampler(tmp_path, small_tokenizer, kw, arch):
    tok, _ = small_tokenizer
    model, hf_dir = exported(tmp_path, tok, **kw)
    # transformers 5's AutoTokenizer gives every qwen2 model Qwen's own pre-tokenizer, whatever its tokenizer.json says
    tokenizer_class = transformers.PreTrainedTokenizerFast if arch == "Qwen2ForCausalLM" else transformers.AutoTokenizer
    hf_tok = tokenizer_class.from_pretrained(hf_dir)
    hf_model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    assert type(hf_model).__name__ == arch
    eot_id = tok.special_tokens[EOT]
    compared = 0
    for prompt in PROMPTS:
        prompt_ids = sample_prompt_ids(tok, prompt)
        inputs = hf_tok(prompt, return_tensors="pt")
        assert inputs["input_ids"][0].tolist() == prompt_ids
        ours = [int(step[0]) for step in generate(model, prompt_ids, max_new_tokens=24, temperature=0)]
        theirs = hf_model.generate(**inputs, max_new_tokens=24, do_sample=False)[0, len(prompt_ids) :].tolist()
        until_eot = ours[: ours.index(eot_id) + 1] if eot_id in ours else ours  # transformers stops at the EOS
        assert theirs == until_eot
        compared += len(theirs)
    assert compared >= 24


def test_exported_tokenizer_adds_the_bos_and_names_it(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    _, hf_dir = exported(tmp_path, tok)
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    eot_id = tok.special_tokens[EOT]
    assert (hf_tok.bos_token, hf_tok.eos_token, hf_tok.pad_token) == (EOT, EOT, EOT)
    assert hf_tok.bos_token_id == hf_tok.eos_token_id == hf_tok.pad_token_id == eot_id
    for text in PROMPTS + [f"one story.{EOT}Another one", ""]:
        ids = tok.encode(text)
        assert hf_tok(text)["input_ids"] == [eot_id] + ids
        assert hf_tok(text, add_special_tokens=False)["input_ids"] == ids
        assert hf_tok.decode([eot_id] + ids, skip_special_tokens=True) == text.replace(EOT, "")
    for name in ("config.json", "generation_config.json"):
        config = json.loads((hf_dir / name).read_text())
        assert config["bos_token_id"] == config["eos_token_id"] == config["pad_token_id"] == eot_id
    # Our own checkpoint keeps the plain tokenizer: there the code framing documents adds the eot.
    assert json.loads((tmp_path / "ckpt" / "tokenizer.json").read_text(encoding="utf-8"))["post_processor"] is None
    assert Tokenizer.from_file(hf_dir / "tokenizer.json").fingerprint == tok.fingerprint


def test_export_keeps_pattern_and_normalizer(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    llama_like = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=split.LLAMA3_PATTERN, normalizer=("NFC",))
    _, hf_dir = exported(tmp_path, llama_like)
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    text = "Cafe\u0301 12345 東京\n\n\n  x"  # NFC composes é; Llama 3's pattern cuts the digits by three
    assert hf_tok(text)["input_ids"] == [tok.special_tokens[EOT]] + llama_like.encode(text)
    assert llama_like.encode(text) != tok.encode(text)


@pytest.mark.parametrize("bos", ["<|begin_of_text|>", None], ids=["llama3", "qwen"])
def test_export_frames_as_the_checkpoint_records(tmp_path, small_tokenizer, bos):
    """A checkpoint whose text starts with another token than the one that ends it (an import's):
    the export's tokenizer puts the first before a text, its configs name both."""
    tok, _ = small_tokenizer
    names = ("<|begin_of_text|>", "<|end_of_text|>")
    ids = {name: tok.vocab_size + i for i, name in enumerate(names)}
    framed = Tokenizer(tok.vocab + [n.encode() for n in names], tok.merges, {**tok.special_tokens, **ids})
    bos_id, eot_id = ids.get(bos), ids["<|end_of_text|>"]
    save_model(random_model(framed), framed, tmp_path / "ckpt", eot_id=eot_id, bos_id=bos_id)
    export_hf(tmp_path / "ckpt", tmp_path / "hf")
    hf_tok = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert hf_tok(PROMPTS[0])["input_ids"] == prompt_ids(framed, PROMPTS[0], bos_id)
    assert (hf_tok.bos_token, hf_tok.eos_token) == (bos, "<|end_of_text|>")
    for name in ("config.json", "generation_config.json"):
        config = json.loads((tmp_path / "hf" / name).read_text())
        assert (config["bos_token_id"], config["eos_token_id"], config["pad_token_id"]) == (bos_id, eot_id, eot_id)


def test_export_without_an_eot_adds_nothing(tmp_path):
    no_eot = Tokenizer([bytes([b]) for b in range(256)], [], {})
    _, hf_dir = exported(tmp_path, no_eot)
    hf_tok = transformers.AutoTokenizer.from_pretrained(hf_dir)
    assert hf_tok("hi")["input_ids"] == [104, 105]
    assert json.loads((hf_dir / "config.json").read_text())["pad_token_id"] is None


def files_of(directory):
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


def test_export_replaces_only_an_earlier_export_as_it_wrote_it(tmp_path, small_tokenizer):
    """What save_pretrained writes, what a download holds and what a checkpoint holds all look like
    an export (config.json, model.safetensors, tokenizer.json): only the export's own marker, and
    files unchanged since, make one ours."""
    tok, _ = small_tokenizer
    _, hf_dir = exported(tmp_path, tok)
    loaded = transformers.AutoModelForCausalLM.from_pretrained(hf_dir)
    users = tmp_path / "users"
    loaded.save_pretrained(users)
    (users / "tokenizer.json").write_bytes((hf_dir / "tokenizer.json").read_bytes())
    save_model(
        random_model(tok, seed=1), tok, tmp_path / "ckpt2", eot_id=tok.special_tokens[EOT]
    )  # as `model init` does

    def export(out, *flags):
        return CliRunner().invoke(cli, ["export-hf", "--checkpoint", str(tmp_path / "ckpt"), "--out", str(out), *flags])

    for out in (users, tmp_path / "ckpt2"):
        before = files_of(out)
        assert_input_error(export(out), f"--out {out}", "not an earlier export", "--overwrite")
        assert files_of(out) == before
    assert export(hf_dir).exit_code == 0  # an earlier export: replaced
    loaded.save_pretrained(hf_dir)  # the user's own weights into it: no longer the export it was
    before = files_of(hf_dir)
    assert_input_error(export(hf_dir), f"--out {hf_dir}", "not an earlier export")
    assert files_of(hf_dir) == before
    assert export(hf_dir, "--overwrite").exit_code == 0
    assert export(hf_dir).exit_code == 0  # ours again
    assert sorted(files_of(hf_dir)) == [
        "config.json",
        "generation_config.json",
        "gptkit-export.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ]
