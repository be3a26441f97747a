"""llama.cpp itself runs the GGUF export (through llama-cpp-python, which `make llama-cpp` builds):
it loads the file, computes our logits, tokenizes as we do, continues a prompt greedily as
`gptkit sample --temperature 0` does and renders the checkpoint's chat template. Skipped where
llama_cpp is not installed (CI: its build takes longer than CI's budget)."""

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import save_model
from gptkit.model.generate import generate, prompt_ids
from gptkit.model.gguf import export_gguf
from gptkit.sample.cli import cli as sample_cli
from gptkit.sample.sampling import chat as chat_with
from gptkit.sample.settings import Settings
from gptkit.sample.stream import TextStream
from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.chat import SPECIAL_TOKENS, ChatTemplate
from tests.unit.test_export import PROMPTS, random_model
from tests.unit.test_gguf import EOT, VARIANTS

llama_cpp = pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")
# The largest difference allowed between llama.cpp's logits and ours, by --dtype, for (llama and qwen3,
# gpt2): about twice the largest measured on these models, whose logits span about +-10, with a float32
# KV cache (llama.cpp's default f16 cache adds about 1e-2). GPT-2's float32 error is llama.cpp's GELU,
# computed from a table of float16 values. These random models magnify rounding: q8_0's weights alone,
# dequantized into our model, move its logits by 0.86 (docs/model.md#gguf-llamacpp-and-ollama).
TOLERANCE = {"f32": (1e-4, 4e-3), "f16": (6e-2, 1.5e-2), "bf16": (4e-1, 1e-1), "q8_0": (2.5, 3e-1)}
TEXTS = PROMPTS + [
    "don't  stop\n\n\n  the 12345 cats'  toys!!\t",
    f"one story.{EOT}Another one, 3.14159  ",
    "Ünïcödé — 東京 🙂 mixed\r\nlines",
]


@pytest.fixture(scope="module")
def checkpoints(small_tokenizer, tmp_path_factory):
    """{variant: (model, checkpoint directory)}."""
    tok, _ = small_tokenizer
    root = tmp_path_factory.mktemp("gguf")
    made = {}
    for name, kw in VARIANTS.items():
        model = random_model(tok, **kw)
        save_model(model, tok, root / name, eot_id=tok.special_tokens[EOT])
        made[name] = model, root / name
    return made


def load(path, **kw):
    """llama.cpp with a float32 KV cache (its default, f16, rounds every key and value): the
    differences left are the export's."""
    f32 = llama_cpp.GGML_TYPE_F32
    return llama_cpp.Llama(model_path=str(path), n_ctx=64, n_threads=2, verbose=False, type_k=f32, type_v=f32, **kw)


@pytest.mark.parametrize("dtype", TOLERANCE)
@pytest.mark.parametrize("variant", VARIANTS)
def test_llama_cpp_computes_our_logits(tmp_path, checkpoints, small_tokenizer, variant, dtype):
    tok, _ = small_tokenizer
    model, ckpt = checkpoints[variant]
    export_gguf(ckpt, tmp_path / "m.gguf", dtype)
    llm = load(tmp_path / "m.gguf", logits_all=True)
    ids = prompt_ids(tok, " ".join(PROMPTS), tok.special_tokens[EOT])
    llm.eval(ids)
    theirs = np.array(llm.scores[: len(ids)])
    with torch.no_grad():
        ours = model(torch.tensor([ids]))[0][0].numpy()
    error = np.abs(theirs - ours).max()
    print(f"{variant} {dtype}: max |logit difference| {error:.2e} (logits within +-{np.abs(ours).max():.1f})")
    assert error < TOLERANCE[dtype][variant == "gpt2"]


@pytest.mark.parametrize(
    "pattern, ignore_merges",
    [(split.GPT2_PATTERN, False), (split.LLAMA3_PATTERN, True), (split.QWEN2_PATTERN, False)],
    ids=["gpt-2", "llama-bpe", "qwen2"],
)
def test_llama_cpp_tokenizes_as_we_do(tmp_path, small_tokenizer, pattern, ignore_merges):
    tok, _ = small_tokenizer
    ours = Tokenizer(tok.vocab, tok.merges, tok.special_tokens, pattern=pattern, ignore_merges=ignore_merges)
    save_model(random_model(ours), ours, tmp_path / "ckpt", eot_id=ours.special_tokens[EOT])
    export_gguf(tmp_path / "ckpt", tmp_path / "m.gguf", "q8_0")
    llm = load(tmp_path / "m.gguf", vocab_only=True)
    eot_id = ours.special_tokens[EOT]
    for text in TEXTS:
        assert llm.tokenize(text.encode(), add_bos=True, special=True) == [eot_id] + ours.encode(text), text
        assert llm.tokenize(text.encode(), add_bos=False, special=False) == ours.encode(text, allowed_special=()), text
        assert llm.detokenize(ours.encode(text)) == text.replace(EOT, "").encode()


@pytest.mark.parametrize("dtype", ["f32", "f16"])
@pytest.mark.parametrize("variant", ["llama", "gqa-qkv-bias", "gpt2"])
def test_llama_cpp_continues_greedily_as_gptkit_sample(tmp_path, checkpoints, small_tokenizer, variant, dtype):
    tok, _ = small_tokenizer
    model, ckpt = checkpoints[variant]
    export_gguf(ckpt, tmp_path / "m.gguf", dtype)
    llm = load(tmp_path / "m.gguf")
    eot_id, steps = tok.special_tokens[EOT], 24
    for prompt in PROMPTS:
        ids = prompt_ids(tok, prompt, eot_id)
        assert llm.tokenize(prompt.encode()) == ids
        theirs = []
        for token in llm.generate(ids, temp=0.0):
            theirs.append(token)
            if token == eot_id or len(theirs) == steps:
                break
        ours = [int(step[0]) for step in generate(model, ids, max_new_tokens=steps, temperature=0)]
        assert theirs == (ours[: ours.index(eot_id) + 1] if eot_id in ours else ours)
        # `gptkit sample` prints the prompt and the text of the same ids
        res = CliRunner().invoke(
            sample_cli,
            ["--checkpoint", str(ckpt), "--prompt", prompt, "--temperature", "0", "--max-new-tokens", str(steps)]
            + ["--device", "cpu"],
        )
        assert res.exit_code == 0, res.output
        stream = TextStream(tok)
        text = "".join(stream.add(t) for t in theirs if t != eot_id) + stream.finish()
        assert res.stdout == prompt + text + "\n"


def test_llama_cpp_chats_with_the_checkpoint_template(tmp_path, small_tokenizer):
    """gptkit's chat tokens: llama.cpp renders its template (llama-cpp-python with jinja2), and
    replies greedily as `gptkit sample --chat` does, ending at <|end|>."""
    tok, _ = small_tokenizer
    ids = {name: tok.vocab_size + i for i, name in enumerate(SPECIAL_TOKENS)}
    chat = Tokenizer(tok.vocab + [n.encode() for n in SPECIAL_TOKENS], tok.merges, {**tok.special_tokens, **ids})
    save_model(random_model(chat, seed=3), chat, tmp_path / "ckpt", eot_id=chat.special_tokens[EOT])
    export_gguf(tmp_path / "ckpt", tmp_path / "m.gguf", "f32")
    llm = load(tmp_path / "m.gguf")
    assert llm.chat_format == "chat_template.default"  # the file's template, not one llama-cpp-python guessed
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Once upon a time?"}]
    template = ChatTemplate.beside(tmp_path / "ckpt" / "tokenizer.json")
    reply = llm.create_chat_completion(messages=messages, max_tokens=16, temperature=0.0)
    assert reply["usage"]["prompt_tokens"] == len(template.prompt_ids(chat, messages))
    steps = reply["usage"]["completion_tokens"]  # llama-cpp-python may take one past max_tokens
    settings = Settings(temperature=0.0, max_new_tokens=steps)
    ours = chat_with(tmp_path / "ckpt", messages, settings, device="cpu").texts()[0]
    # llama-cpp-python drops the bytes of a reply that are not UTF-8; gptkit shows U+FFFD for them
    assert reply["choices"][0]["message"]["content"] == ours.replace("\ufffd", "")
