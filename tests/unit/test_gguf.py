"""The GGUF export as `gguf`'s reader reads it back: llama.cpp's names, shapes and types, the
tokenizer, the framing; and the command's rules for its output. llama.cpp itself runs the files in
tests/integration/test_export_gguf.py."""

import os

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import model_tensors, save_model
from gptkit.model.cli import cli
from gptkit.model.gguf import EXPORT_KEY, export_gguf
from gptkit.model.model import rope_frequencies
from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.chat import SPECIAL_TOKENS
from gptkit.tokenizer.files import CHAR_TO_BYTE, token_text
from tests.conftest import assert_input_error
from tests.unit.test_export import LLAMA3, random_model

gguf = pytest.importorskip("gguf")

EOT = "<|endoftext|>"
VARIANTS = {
    "llama": {},
    "gqa-qkv-bias": {"qkv_bias": True},
    "qwen3": {"qk_norm": True, "head_dim": 32},
    "llama3-rope-scaling": {"rope_scaling": LLAMA3},
    "gpt2": {"architecture": "gpt2"},
    "tied": {"tie_embeddings": True},
}


def checkpoint(tmp_path, tokenizer, name="ckpt", eot=EOT, **kw):
    model = random_model(tokenizer, **kw)
    save_model(model, tokenizer, tmp_path / name, eot_id=tokenizer.special_tokens.get(eot))
    return model, tmp_path / name


def fields(path):
    """{key: value} of a GGUF file's metadata; arrays as lists."""
    reader = gguf.GGUFReader(path)
    values = {}
    for name, field in reader.fields.items():
        if name.startswith("GGUF."):
            continue
        parts = [field.parts[i] for i in field.data]
        decoded = [bytes(p).decode() if field.types[-1] == gguf.GGUFValueType.STRING else p.tolist()[0] for p in parts]
        values[name] = decoded if field.types[0] == gguf.GGUFValueType.ARRAY else decoded[0]
    return values


def tensors(path):
    """{name: (GGML type name, float32 array in our shape)} of a GGUF file."""
    reader = gguf.GGUFReader(path)
    return {
        t.name: (t.tensor_type.name, gguf.quants.dequantize(t.data, t.tensor_type).reshape(t.shape[::-1].tolist()))
        for t in reader.tensors
    }


def adjacent_pairs_undone(t, head_dim):
    """llama.cpp's row order (pairs adjacent) back to ours (i, i + d/2)."""
    heads = t.shape[0] // head_dim
    return t.reshape(heads, head_dim // 2, 2, *t.shape[1:]).swapaxes(1, 2).reshape(t.shape)


@pytest.mark.parametrize("kw", VARIANTS.values(), ids=VARIANTS.keys())
def test_tensors_are_ours_under_llama_cpp_names(tmp_path, small_tokenizer, kw):
    tok, _ = small_tokenizer
    model, ckpt = checkpoint(tmp_path, tok, **kw)
    exported = export_gguf(ckpt, tmp_path / "m.gguf", "f32")
    config = model.config
    assert exported.architecture == (
        "gpt2" if config.architecture == "gpt2" else "qwen3" if config.qk_norm else "llama"
    )
    read = tensors(tmp_path / "m.gguf")
    ours = {k: v.numpy() for k, v in model_tensors(model).items()}
    gpt2, interleaved = config.architecture == "gpt2", config.architecture == "llama" and not config.qk_norm
    expected = {"token_embd.weight": ours["embedding.weight"], "output_norm.weight": ours["norm.weight"]}
    if not config.tie_embeddings:
        expected["output.weight"] = ours["lm_head.weight"]
    if gpt2:
        expected["position_embd.weight"] = ours["position_embedding.weight"]
        expected["output_norm.bias"] = ours["norm.bias"]
    for i in range(config.n_layers):
        layer = {k.removeprefix(f"layers.{i}."): v for k, v in ours.items() if k.startswith(f"layers.{i}.")}
        blk = {
            "attn_norm": "attention_norm",
            "attn_output": "attention.wo",
            "ffn_norm": "ffn_norm",
            "ffn_down": "ffn.w2",
            **({"ffn_up": "ffn.w1"} if gpt2 else {"ffn_gate": "ffn.w1", "ffn_up": "ffn.w3"}),
            **({} if gpt2 else {"attn_q": "attention.wq", "attn_k": "attention.wk", "attn_v": "attention.wv"}),
            **({"attn_q_norm": "attention.q_norm", "attn_k_norm": "attention.k_norm"} if config.qk_norm else {}),
        }
        for theirs, module in blk.items():
            for kind in ("weight", "bias"):
                if f"{module}.{kind}" in layer:
                    expected[f"blk.{i}.{theirs}.{kind}"] = layer[f"{module}.{kind}"]
        if gpt2:
            for kind in ("weight", "bias"):
                expected[f"blk.{i}.attn_qkv.{kind}"] = np.concatenate([layer[f"attention.w{x}.{kind}"] for x in "qkv"])
    if config.rope_scaling is not None:
        expected["rope_freqs.weight"] = (
            rope_frequencies(config.head_dim, config.rope_theta)
            / rope_frequencies(config.head_dim, config.rope_theta, config.rope_scaling)
        ).numpy()
    assert sorted(read) == sorted(expected)
    for name, array in expected.items():
        kind, theirs = read[name]
        assert kind == "F32", name
        if interleaved and name.split(".")[-2] in ("attn_q", "attn_k"):
            assert not np.array_equal(theirs, array), name  # reordered for llama.cpp's RoPE
            theirs = adjacent_pairs_undone(theirs, config.head_dim)
        np.testing.assert_allclose(theirs, array, rtol=1e-6, err_msg=name)


@pytest.mark.parametrize("dtype", ["f16", "bf16", "q8_0"])
def test_matrices_take_the_dtype_vectors_stay_f32(tmp_path, small_tokenizer, dtype):
    tok, _ = small_tokenizer
    model, ckpt = checkpoint(tmp_path, tok, architecture="gpt2")
    export_gguf(ckpt, tmp_path / "m.gguf", dtype)
    read = tensors(tmp_path / "m.gguf")
    for name, (kind, array) in read.items():
        assert kind == ("F32" if array.ndim == 1 or name == "position_embd.weight" else dtype.upper()), name
    embedding = model.embedding.weight.detach().numpy()
    error = np.abs(read["token_embd.weight"][1] - embedding).max()
    assert 0 < error < {"f16": 1e-3, "bf16": 1e-2, "q8_0": 1e-2}[dtype]
    assert fields(tmp_path / "m.gguf")["general.file_type"] == {"f16": 1, "bf16": 32, "q8_0": 7}[dtype]


def test_q8_0_leaves_rows_of_partial_blocks_f16(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    _, ckpt = checkpoint(tmp_path, tok, qk_norm=True, head_dim=20)  # wo's rows: 4 heads x 20, not whole blocks of 32
    export_gguf(ckpt, tmp_path / "m.gguf", "q8_0")
    kinds = {name: kind for name, (kind, _) in tensors(tmp_path / "m.gguf").items()}
    assert (kinds["blk.0.attn_output.weight"], kinds["blk.0.attn_q.weight"]) == ("F16", "Q8_0")


def test_tokenizer_and_hparams(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    model, ckpt = checkpoint(tmp_path, tok, qkv_bias=True)
    export_gguf(ckpt, tmp_path / "m.gguf")
    meta = fields(tmp_path / "m.gguf")
    eot_id = tok.special_tokens[EOT]
    assert meta["tokenizer.ggml.model"] == "gpt2" and meta["tokenizer.ggml.pre"] == "gpt-2"
    tokens = meta["tokenizer.ggml.tokens"]
    assert tokens[eot_id] == EOT and len(tokens) == tok.vocab_size
    assert all(bytes(CHAR_TO_BYTE[c] for c in t) == tok.vocab[i] for i, t in enumerate(tokens) if i != eot_id)
    assert meta["tokenizer.ggml.token_type"] == [3 if i == eot_id else 1 for i in range(tok.vocab_size)]
    assert meta["tokenizer.ggml.merges"] == [
        f"{token_text(tok.vocab[a])} {token_text(tok.vocab[b])}" for a, b in tok.merges
    ]
    assert (meta["tokenizer.ggml.bos_token_id"], meta["tokenizer.ggml.eos_token_id"]) == (eot_id, eot_id)
    assert meta["tokenizer.ggml.add_bos_token"] is True
    assert "tokenizer.chat_template" not in meta
    c = model.config
    assert {k.removeprefix("llama."): v for k, v in meta.items() if k.startswith("llama.")} == {
        "context_length": c.context_length,
        "embedding_length": c.d_model,
        "block_count": c.n_layers,
        "feed_forward_length": c.d_ff,
        "attention.head_count": c.n_heads,
        "attention.head_count_kv": 2,
        "attention.key_length": c.head_dim,
        "attention.value_length": c.head_dim,
        "rope.dimension_count": c.head_dim,
        "rope.freq_base": c.rope_theta,
        "attention.layer_norm_rms_epsilon": pytest.approx(c.norm_eps),
        "vocab_size": tok.vocab_size,
    }
    assert isinstance(meta[EXPORT_KEY], int)


def test_framing_and_chat_template(tmp_path, small_tokenizer):
    """No token before a text: add_bos_token false. gptkit's chat tokens: its template, and the end
    of a turn as llama.cpp's end-of-turn token."""
    tok, _ = small_tokenizer
    ids = {name: tok.vocab_size + i for i, name in enumerate(SPECIAL_TOKENS)}
    chat = Tokenizer(tok.vocab + [n.encode() for n in SPECIAL_TOKENS], tok.merges, {**tok.special_tokens, **ids})
    save_model(random_model(chat), chat, tmp_path / "ckpt", eot_id=chat.special_tokens[EOT], bos_id=None)
    export_gguf(tmp_path / "ckpt", tmp_path / "m.gguf")
    meta = fields(tmp_path / "m.gguf")
    assert meta["tokenizer.ggml.add_bos_token"] is False and "tokenizer.ggml.bos_token_id" not in meta
    assert meta["tokenizer.ggml.eot_token_id"] == ids["<|end|>"]
    assert "<|assistant|>" in meta["tokenizer.chat_template"]
    assert meta["tokenizer.ggml.token_type"][-4:] == [3, 3, 3, 3]


@pytest.mark.parametrize(
    "pattern, ignore_merges, pre",
    [(split.LLAMA3_PATTERN, True, "llama-bpe"), (split.QWEN2_PATTERN, False, "qwen2")],
    ids=["llama3", "qwen2"],
)
def test_pre_tokenizer_of_the_pattern(tmp_path, small_tokenizer, pattern, ignore_merges, pre):
    tok, _ = small_tokenizer
    other = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=pattern, ignore_merges=ignore_merges)
    _, ckpt = checkpoint(tmp_path, other)
    export_gguf(ckpt, tmp_path / "m.gguf")
    assert fields(tmp_path / "m.gguf")["tokenizer.ggml.pre"] == pre


def invoke(*args):
    return CliRunner().invoke(cli, ["export-gguf", *map(str, args)])


def test_refused_in_one_line_with_nothing_written(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    cases = {
        "normalizer": (Tokenizer(tok.vocab, tok.merges, tok.special_tokens, normalizer=("NFC",)), {}, "normalizer"),
        "pattern": (
            Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=split.O200K_PATTERN),
            {},
            "pre-tokenizer pattern",
        ),
        "merges": (
            Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=split.LLAMA3_PATTERN),
            {},
            "pre-tokenizer pattern",
        ),
        "qwen3-scaled": (tok, {"qk_norm": True, "rope_scaling": LLAMA3}, "no RoPE scaling"),
    }
    for name, (tokenizer, kw, needle) in cases.items():
        _, ckpt = checkpoint(tmp_path, tokenizer, name=name, **kw)
        file = "config.json" if name == "qwen3-scaled" else "tokenizer.json"
        assert_input_error(invoke("--checkpoint", ckpt, "--out", tmp_path / "m.gguf"), f"{ckpt}/{file}", needle)
    _, ckpt = checkpoint(tmp_path, Tokenizer([bytes([b]) for b in range(256)], [], {}), name="no-eot")
    assert_input_error(invoke("--checkpoint", ckpt, "--out", tmp_path / "m.gguf"), "no end-of-text token")
    assert_input_error(invoke("--checkpoint", tmp_path / "nowhere", "--out", tmp_path / "m.gguf"), "no such checkpoint")
    _, ckpt = checkpoint(tmp_path, tok, name="good")
    assert_input_error(invoke("--checkpoint", ckpt, "--out", tmp_path), "--out", "holds --checkpoint")
    assert_input_error(invoke("--checkpoint", ckpt, "--out", tmp_path / "pattern"), "--out", "is a directory")
    (tmp_path / "file").write_text("")
    assert_input_error(invoke("--checkpoint", ckpt, "--out", tmp_path / "file" / "m.gguf"), "--out", "cannot write")
    assert not (tmp_path / "m.gguf").exists() and not list(tmp_path.glob(".*"))


def test_replaces_only_an_earlier_export_as_it_wrote_it(tmp_path, small_tokenizer):
    tok, _ = small_tokenizer
    _, ckpt = checkpoint(tmp_path, tok)
    out = tmp_path / "m.gguf"
    res = invoke("--checkpoint", ckpt, "--out", out)
    assert res.exit_code == 0 and res.stdout.startswith(f"wrote {out}: llama, f16, ") and "llama-cli -m" in res.stdout
    assert invoke("--checkpoint", ckpt, "--out", out, "--dtype", "q8_0").exit_code == 0  # ours: replaced
    assert fields(out)["general.file_type"] == 7
    data = bytearray(out.read_bytes())
    data[-1000] ^= 1  # a tensor changed since (llama-quantize keeps the keys): no longer the export it was
    for other in (bytes(data), b"", b"my notes"):
        out.write_bytes(other)
        assert_input_error(invoke("--checkpoint", ckpt, "--out", out), f"--out {out}", "not an earlier export")
        assert out.read_bytes() == other
    assert invoke("--checkpoint", ckpt, "--out", out, "--overwrite").exit_code == 0
    assert fields(out)["general.file_type"] == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt", "m.gguf"]  # no temporary left beside it


def test_the_line_names_the_file_for_ollama_from_anywhere_and_the_context_to_run_it_with(
    tmp_path, small_tokenizer, monkeypatch
):
    """Ollama reads FROM from the Modelfile's directory: the path given relative to here is named whole. The
    context is the model's: llama.cpp and Ollama would otherwise run past it."""
    tok, _ = small_tokenizer
    model, ckpt = checkpoint(tmp_path, tok)
    monkeypatch.chdir(tmp_path)
    res = invoke("--checkpoint", "ckpt", "--out", "m.gguf")
    assert res.exit_code == 0, res.output
    context = model.config.context_length
    assert f"a context of {context} tokens; run it with `llama-cli -m m.gguf -c {context}`" in res.stdout
    assert f"`FROM {tmp_path / 'm.gguf'}` and `PARAMETER num_ctx {context}`" in res.stdout
    assert fields(tmp_path / "m.gguf")["llama.context_length"] == context


def test_without_the_gguf_package(tmp_path, small_tokenizer, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "gguf", None)
    assert_input_error(invoke("--checkpoint", tmp_path, "--out", tmp_path / "m.gguf"), "pip install 'gptkit[gguf]'")
    assert not os.listdir(tmp_path)


def test_bf16_keeps_the_checkpoint_bf16_weights_exactly(tmp_path, small_tokenizer):
    """A bf16 checkpoint (an import's) exported as bf16 loses nothing."""
    tok, _ = small_tokenizer
    model = random_model(tok)
    stored = {k: v.to(torch.bfloat16) for k, v in model_tensors(model).items()}
    save_model(model, tok, tmp_path / "ckpt", eot_id=tok.special_tokens[EOT], tensors=stored)
    export_gguf(tmp_path / "ckpt", tmp_path / "m.gguf", "bf16")
    kind, array = tensors(tmp_path / "m.gguf")["blk.0.attn_v.weight"]
    assert kind == "BF16" and np.array_equal(array, stored["layers.0.attention.wv.weight"].float().numpy())
