"""Decoding (gptkit.model.generate: filter_probs, next_tokens, generate with its KV cache and
sliding window) and the sample stage (TextStream, the `sample` CLI)."""
import itertools
import json
import shutil

import pytest
import torch
from click.testing import CliRunner

from gptkit.model.checkpoint import eot_id as checkpoint_eot_id, load_model, save_model
from gptkit.model.config import ModelConfig
from gptkit.model.generate import filter_probs, generate, next_tokens
from gptkit.model.model import TransformerLM
from gptkit.sample.cli import cli
from gptkit.sample.sampling import Sampler, Settings, sample
from gptkit.sample.stream import TextStream
from gptkit.shared.errors import SettingError
from tests.conftest import assert_input_error
from gptkit.tokenizer.bpe import Tokenizer

EOT = "<|endoftext|>"
CONTEXT = 32
P = [0.5, 0.3, 0.1, 0.05, 0.05]
PROMPT = "the little cat sat on the"


def tiny_model(vocab_size, seed=0):
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=vocab_size, context_length=CONTEXT, d_model=32, n_layers=2, n_heads=4, d_ff=64, init_std=0.1)
    return TransformerLM(config).eval()


@pytest.fixture(scope="module")
def tok(small_tokenizer):
    return small_tokenizer[0]


@pytest.fixture(scope="module")
def model(tok):
    return tiny_model(tok.vocab_size)


@pytest.fixture(scope="module")
def checkpoint(model, tok, tmp_path_factory):
    path = tmp_path_factory.mktemp("sample") / "ckpt"
    save_model(model, tok, path, eot_id=tok.special_tokens[EOT])
    return path


def greedy_ids(model, ids, n):
    return [int(t) for t in generate(model, ids, max_new_tokens=n, temperature=0)]


# -- filter_probs -----------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, expected", [
    (dict(top_p=0.8), [0.625, 0.375, 0, 0, 0]),
    (dict(top_p=1.0), P),
    (dict(top_p=1e-6), [1, 0, 0, 0, 0]),  # never fewer than one token: the argmax
    (dict(top_p=0.0), [1, 0, 0, 0, 0]),
    (dict(top_k=2), [0.625, 0.375, 0, 0, 0]),
    (dict(top_k=1), [1, 0, 0, 0, 0]),
    (dict(top_k=50), P),
    (dict(top_k=3, top_p=0.85), [0.625, 0.375, 0, 0, 0]),  # top_p is of the mass top_k left (0.9)
    (dict(top_k=3, top_p=0.95), [5 / 9, 3 / 9, 1 / 9, 0, 0]),
    (dict(top_k=2, top_p=0.5), [1, 0, 0, 0, 0]),
])
def test_filter_probs_hand_made(kwargs, expected):
    out = filter_probs(torch.tensor(P), **kwargs)
    assert torch.allclose(out, torch.tensor(expected, dtype=out.dtype), atol=1e-6), out


@pytest.mark.parametrize("kwargs", [dict(top_p=0.8), dict(top_k=2), dict(top_k=3, top_p=0.85), dict(top_p=0.5)])
def test_filter_probs_rows_independent_and_order_preserved(kwargs):
    """All 120 orders of P as one batch: each row is P's result, permuted the same way."""
    perms = torch.tensor(list(itertools.permutations(range(5))))
    out = filter_probs(torch.tensor(P)[perms], **kwargs)
    assert torch.allclose(out, filter_probs(torch.tensor(P), **kwargs)[perms], atol=1e-6)
    rows = torch.tensor([P, [0.1, 0.2, 0.7, 0.0, 0.0], [0.05, 0.05, 0.1, 0.3, 0.5]])
    assert torch.allclose(filter_probs(rows, **kwargs)[1], filter_probs(rows[1], **kwargs), atol=1e-6)


def test_filter_probs_top_p_matches_reference_on_random_rows():
    torch.manual_seed(0)
    probs = torch.distributions.Dirichlet(torch.full((40,), 0.3)).sample((64,)).double()
    for top_p in (0.3, 0.7, 0.95):
        out = filter_probs(probs, top_p=top_p)
        for row, got in zip(probs, out):
            order = row.argsort(descending=True)
            m = int((row[order].cumsum(0) < top_p).sum()) + 1  # smallest prefix reaching top_p
            expected = torch.zeros_like(row)
            expected[order[:m]] = row[order[:m]] / row[order[:m]].sum()
            assert torch.allclose(got, expected)


# -- next_tokens ------------------------------------------------------------------------------

def test_temperature_zero_is_argmax():
    logits = torch.randn(6, 50, generator=torch.Generator().manual_seed(1))
    assert torch.equal(next_tokens(logits, 0, 0.5, 3, None), logits.argmax(-1))


@pytest.mark.parametrize("temperature", [0.5, 2.0])
def test_sampling_frequencies_follow_tempered_softmax(temperature):
    n, logits = 40_000, torch.tensor([2.0, 1.0, 0.0, -1.0])
    gen = torch.Generator().manual_seed(0)
    tokens = next_tokens(logits.expand(n, -1), temperature, 1.0, None, gen)
    freq = torch.bincount(tokens, minlength=4).double() / n
    expected = torch.softmax(logits.double() / temperature, -1)
    assert (freq - expected).abs().max() < 0.012, (freq, expected)
    assert (freq - torch.softmax(logits.double(), -1)).abs().max() > 0.05  # T matters
    top2 = next_tokens(logits.expand(n, -1), temperature, 1.0, 2, gen)
    assert set(top2.tolist()) == {0, 1}


# -- generate ---------------------------------------------------------------------------------

def reference_greedy(model, prompt, n):
    """No cache: each token is the argmax of a full forward over the tokens the cache would
    hold: all of them until the context is full, then (slide) the last context//2, growing again."""
    seq, start, out = list(prompt), 0, []
    for _ in range(n):
        window = seq[start:]
        token = int(model(torch.tensor([window]))[0][0, -1].argmax())
        out.append(token)
        seq.append(token)
        if len(window) == CONTEXT:
            start = len(seq) - CONTEXT // 2
    return out


@torch.inference_mode()
def test_greedy_equals_no_cache_loop_within_context(model, tok):
    prompt = [tok.special_tokens[EOT]] + tok.encode(PROMPT)
    n = CONTEXT - len(prompt)
    seq = list(prompt)
    for _ in range(n):
        seq.append(int(model(torch.tensor([seq]))[0][0, -1].argmax()))
    assert greedy_ids(model, prompt, n) == seq[len(prompt):]


@torch.inference_mode()
@pytest.mark.parametrize("prompt_len", [5, CONTEXT - 1, CONTEXT])
def test_greedy_past_the_context_slides_the_window(model, prompt_len):
    prompt = [(7 * i + 3) % model.config.vocab_size for i in range(prompt_len)]
    n = 2 * CONTEXT + 5
    got = greedy_ids(model, prompt, n)
    assert len(got) == n
    assert got == reference_greedy(model, prompt, n)
    # Right after the first slide: the window is the last CONTEXT // 2 tokens, new one included.
    seq = prompt + got
    k = CONTEXT - len(prompt) + 1  # tokens generated when the cache first fills
    last_half = seq[len(prompt) + k - CONTEXT // 2 : len(prompt) + k]
    assert got[k] == int(model(torch.tensor([last_half]))[0][0, -1].argmax())


def test_num_samples_greedy_rows_identical(model, tok):
    prompt = tok.encode(PROMPT)
    steps = list(generate(model, prompt, max_new_tokens=10, num_samples=3, temperature=0))
    assert all(s.shape == (3,) for s in steps)
    rows = torch.stack(steps, 1)
    assert (rows == rows[0]).all()
    assert rows[0].tolist() == greedy_ids(model, prompt, 10)


def test_seed_reproducible_and_samples_independent(model, tok):
    prompt = tok.encode(PROMPT)

    def run(seed, **kw):
        kw = dict(max_new_tokens=20, num_samples=2, temperature=1.0, top_p=1.0, seed=seed) | kw
        return torch.stack(list(generate(model, prompt, **kw)), 1)

    a = run(0)
    assert torch.equal(a, run(0))
    assert not torch.equal(a, run(1))
    assert not torch.equal(a[0], a[1])  # two samples of a batch are not copies
    assert a.min() >= 0 and a.max() < model.config.vocab_size
    # top_k=1 at any temperature is greedy
    assert run(5, top_k=1)[0].tolist() == greedy_ids(model, prompt, 20)


def test_sampling_past_the_context(model):
    steps = list(generate(model, [1, 2, 3], max_new_tokens=3 * CONTEXT + 1, num_samples=2, temperature=1.0, seed=3))
    assert len(steps) == 3 * CONTEXT + 1 and all(s.shape == (2,) for s in steps)


# -- TextStream -------------------------------------------------------------------------------

def feed(stream, ids):
    """What a caller prints: releases until `done` (then nothing more is added), else `finish()`."""
    out = []
    for i in ids:
        out.append(stream.add(i))
        if stream.done:
            return out
    return out + [stream.finish()]


def byte_ids(tok, text):
    assert all(tok.vocab[i] == bytes([i]) for i in range(256))
    return list(text.encode())


def test_stream_never_splits_a_character(tok):
    text = "é東😀a"
    releases = feed(TextStream(tok), byte_ids(tok, text))
    assert "".join(releases) == text
    assert not any("\ufffd" in r for r in releases)
    assert [r for r in releases if r] == ["é", "東", "😀", "a"]


def test_stream_invalid_and_truncated_utf8_become_replacement(tok):
    releases = feed(TextStream(tok), [ord("a"), 0xFF, ord("b"), 0xE6, 0x9D])  # 0xE6 0x9D: 東 cut short
    assert "".join(releases) == "a\ufffdb\ufffd"


@pytest.mark.parametrize("split", ["bytes", "tokens"])
@pytest.mark.parametrize("text, stops, expected", [
    ("Hello world, bye", ["o w"], "Hell"),
    ("Hello world, bye", ["o w", "bye"], "Hell"),
    ("Hello world, bye", ["bye", "o w"], "Hell"),  # the earliest wins, whatever the order given
    ("Hello world, bye", ["ld", "or"], "Hello w"),
    ("Hello world, bye", [" w", "o w"], "Hell"),  # both complete at "w": the one that starts first
    ("ab東京cd", ["東京"], "ab"),
    ("ab東京cd", ["京c"], "ab東"),
    ("Hello world, bye", ["", "xyz"], "Hello world, bye"),  # never found: all released in the end
    ("Hello wo", ["wor"], "Hello wo"),  # a prefix that never completes is released by finish()
])
def test_stream_stop_strings(tok, split, text, stops, expected):
    """Stop strings of up to 3 characters."""
    stream = TextStream(tok, stops)
    ids = byte_ids(tok, text) if split == "bytes" else tok.encode(text)
    shown = ""
    for release in feed(stream, ids):
        shown += release
        assert expected.startswith(shown), shown  # nothing of the stop string, ever
    assert shown == expected
    assert stream.done == (expected != text)


@pytest.mark.parametrize("text, stop, expected", [
    ("abcd", "abcd", ""),
    ("Hello world, bye", "world", "Hello "),
    ("the cat sat on the mat", "sat on", "the cat "),
])
def test_stream_long_stop_across_single_byte_tokens(tok, text, stop, expected):
    stream, shown = TextStream(tok, [stop]), ""
    for release in feed(stream, byte_ids(tok, text)):
        shown += release
        assert expected.startswith(shown), shown
    assert stream.done and shown == expected


def test_stream_long_stop_across_tokens(tok):
    """Tokens of 3+ characters keep enough pending that a 6-character stop is still found."""
    stream = TextStream(tok, ["sat on"])
    assert "".join(feed(stream, tok.encode("the cat sat on the mat"))) == "the cat "
    assert stream.done


# -- the `sample` CLI -------------------------------------------------------------------------

def run_cli(*args, **kwargs):
    """The CLI on the CPU, where the tests' reference ids are computed, unless a --device is given."""
    args = [str(a) for a in args]
    return CliRunner().invoke(cli, args if "--device" in args else [*args, "--device", "cpu"], **kwargs)


def ok(*args, **kwargs):
    res = run_cli(*args, **kwargs)
    assert res.exit_code == 0, (res.output, res.exception)
    assert "Traceback" not in res.output
    return res


def greedy_text(model, tok, prompt, n):
    ids = ([tok.special_tokens[EOT]] + tok.encode(prompt, allowed_special=()))[-CONTEXT:]
    out = greedy_ids(model, ids, n)
    out = out[: out.index(tok.special_tokens[EOT])] if tok.special_tokens[EOT] in out else out
    return tok.decode(out)


def test_cli_prompt_and_seed(checkpoint):
    base = ["--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12]
    first = ok(*base, "--device", "auto")  # CUDA where there is one (in bf16: its text is tests/test_gpu.py's)
    assert first.stdout.startswith(PROMPT) and first.stdout.endswith("\n")
    seed_line = first.stderr.strip()
    assert seed_line.startswith("seed: ")  # a random seed is printed so the text can be had again
    again = ok(*base, "--seed", seed_line.split()[1], "--device", "auto")
    assert again.stdout == first.stdout and again.stderr == ""


def test_cli_greedy_equals_generate(checkpoint, model, tok):
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 5, "--temperature", 0)
    assert res.stdout == PROMPT + greedy_text(model, tok, PROMPT, 5) + "\n"
    # the checkpoint round-trips the model
    loaded, _ = load_model(checkpoint)
    assert greedy_text(loaded, tok, PROMPT, 5) == greedy_text(model, tok, PROMPT, 5)


def test_cli_prompt_file_and_stdin(checkpoint, tmp_path):
    base = ["--checkpoint", checkpoint, "--max-new-tokens", 8, "--seed", 3]
    expected = ok(*base, "--prompt", PROMPT).stdout
    (tmp_path / "p.txt").write_text(PROMPT, encoding="utf-8")
    assert ok(*base, "--prompt-file", tmp_path / "p.txt").stdout == expected
    assert ok(*base, "--prompt-file", "-", input=PROMPT).stdout == expected
    assert ok(*base, input=PROMPT).stdout == expected


def test_cli_num_samples(checkpoint):
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 10, "--seed", 1, "--num-samples", 2)
    out = res.stdout
    assert out.startswith("--- sample 1 ---\n" + PROMPT)
    first, second = out.split("\n\n--- sample 2 ---\n")
    assert second.startswith(PROMPT) and second.endswith("\n") and "--- sample" not in second
    assert out.count("--- sample ") == 2


def test_cli_long_prompt_warns_and_keeps_the_last_context(checkpoint, model, tok):
    prompt = " ".join(["the big dog ran over the house"] * 10)
    assert len(tok.encode(prompt)) > CONTEXT
    res = ok("--checkpoint", checkpoint, "--prompt", prompt, "--max-new-tokens", 5, "--temperature", 0)
    assert res.stderr.startswith("warning:") and f"context of {CONTEXT}" in res.stderr
    assert res.stdout == prompt + greedy_text(model, tok, prompt, 5) + "\n"


def test_cli_stop(checkpoint, model, tok):
    continuation = greedy_text(model, tok, PROMPT, 20)
    assert len(continuation) >= 6, continuation
    stop = continuation[3:5]
    expected = continuation[: continuation.index(stop)]
    base = ["--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 20, "--temperature", 0, "--stop", stop]
    assert ok(*base).stdout == PROMPT + expected + "\n"
    many = ok(*base, "--num-samples", 2).stdout
    assert many == f"--- sample 1 ---\n{PROMPT}{expected}\n\n--- sample 2 ---\n{PROMPT}{expected}\n"


def test_cli_end_of_text_stops_each_sample(model, tok, tmp_path):
    """A model that often says <|endoftext|>: each sample ends there, the others go on."""
    eot = tok.special_tokens[EOT]
    chatty = tiny_model(tok.vocab_size)
    with torch.no_grad():
        chatty.lm_head.weight[eot] = 3 * chatty.lm_head.weight[296]
    save_model(chatty, tok, tmp_path / "ckpt", eot_id=eot)
    ids, n = [eot] + tok.encode(PROMPT), 30
    rows = torch.stack(list(generate(chatty, ids, max_new_tokens=n, num_samples=4, temperature=1.0, top_p=0.9, seed=5)), 1).tolist()
    ends = [row.index(eot) if eot in row else n for row in rows]
    assert len(set(ends)) > 1 and min(ends) < n, ends
    res = ok("--checkpoint", tmp_path / "ckpt", "--prompt", PROMPT, "--max-new-tokens", n, "--num-samples", 4, "--seed", 5, "--temperature", 1)
    assert res.stdout == "\n".join(f"--- sample {i + 1} ---\n{PROMPT}{tok.decode(row[:end])}\n" for i, (row, end) in enumerate(zip(rows, ends)))
    greedy = greedy_ids(chatty, ids, n)
    assert eot in greedy
    res = ok("--checkpoint", tmp_path / "ckpt", "--prompt", PROMPT, "--max-new-tokens", n, "--temperature", 0)
    assert res.stdout == PROMPT + tok.decode(greedy[: greedy.index(eot)]) + "\n"


def test_cli_long_stop(checkpoint, model, tok):
    continuation = greedy_text(model, tok, PROMPT, 20)
    stop = continuation[4:12]
    assert len(stop) == 8, continuation
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 20, "--temperature", 0, "--stop", stop)
    assert res.stdout == PROMPT + continuation[: continuation.index(stop)] + "\n"


def test_the_library_function_streams_what_the_cli_prints(checkpoint):
    """`sample` (sampling.py), of which the command is a shell: the same text for the same seed,
    as pieces of each sample while it is generated; a Sampler samples again with its model loaded."""
    one = sample(checkpoint, PROMPT, Settings(max_new_tokens=12, seed=4), device="cpu")
    pieces = list(one)
    assert len(pieces) > 1 and all(i == 0 and piece for i, piece in pieces)
    text = "".join(piece for _, piece in pieces)
    assert ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--seed", 4).stdout == PROMPT + text + "\n"
    assert one.texts() == [text] and one.seed == 4  # read once: nothing generated again

    settings = Settings(max_new_tokens=10, num_samples=3, temperature=1.0, seed=1, stops=["λλ"])
    several = sample(checkpoint, PROMPT, settings, device="cpu")
    pieces = list(several)
    assert len({i for i, _ in pieces}) == 3
    texts = ["".join(piece for j, piece in pieces if j == i) for i in range(3)]
    assert several.texts() == texts
    res = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 10, "--num-samples", 3, "--temperature", 1,
             "--seed", 1, "--stop", "λλ")
    assert res.stdout == "\n".join(f"--- sample {i + 1} ---\n{PROMPT}{text}\n" for i, text in enumerate(texts))

    sampler = Sampler(checkpoint, device="cpu")
    drawn = sampler.sample(PROMPT, Settings(max_new_tokens=8))  # a seed drawn, and told
    assert drawn.texts() == sampler.sample(PROMPT, Settings(max_new_tokens=8, seed=drawn.seed)).texts()
    for bad, setting in [({"top_p": 0}, "top_p"), ({"temperature": float("nan")}, "temperature"), ({"top_k": 0}, "top_k"),
                         ({"num_samples": 0}, "num_samples"), ({"seed": -1}, "seed"), ({"stops": "e "}, "stops")]:
        with pytest.raises(SettingError) as e:
            Settings(**bad)
        assert e.value.setting == setting


@pytest.mark.parametrize("args, needle", [
    (["--temperature", "-1"], "--temperature"),
    (["--top-p", "0"], "--top-p"),
    (["--top-p", "1.5"], "--top-p"),
    (["--top-k", "0"], "--top-k"),
    (["--temperature", "nan"], "--temperature"),
])
def test_cli_bad_values(checkpoint, args, needle):
    assert_input_error(run_cli("--checkpoint", checkpoint, "--prompt", "hi", *args), needle)


def test_cli_bad_checkpoints_and_prompts(checkpoint, tmp_path):
    assert_input_error(run_cli("--checkpoint", tmp_path / "nope", "--prompt", "hi"), "no such checkpoint")
    broken = tmp_path / "broken"
    shutil.copytree(checkpoint, broken)
    (broken / "model.safetensors").unlink()
    assert_input_error(run_cli("--checkpoint", broken, "--prompt", "hi"), "model.safetensors")
    (tmp_path / "p.txt").write_text("hi")
    assert_input_error(run_cli("--checkpoint", checkpoint, "--prompt", "hi", "--prompt-file", tmp_path / "p.txt"), "--prompt-file")


def test_cli_empty_prompt(checkpoint, tmp_path):
    res = ok("--checkpoint", checkpoint, "--prompt", "", "--max-new-tokens", 3, "--seed", 0)  # starts from <|endoftext|>
    assert res.stdout.endswith("\n")
    bytes_only = Tokenizer(vocab=[bytes([i]) for i in range(256)], merges=[], special_tokens={})
    save_model(tiny_model(256), bytes_only, tmp_path / "no-eot")
    assert_input_error(run_cli("--checkpoint", tmp_path / "no-eot", "--prompt", ""), "no end-of-text token")
    assert_input_error(run_cli("--checkpoint", tmp_path / "no-eot", input=""), "no end-of-text token")
    assert ok("--checkpoint", tmp_path / "no-eot", "--prompt", "x", "--max-new-tokens", 3).stdout.startswith("x")


def test_threads_sets_torchs_threads_and_changes_no_greedy_text(checkpoint):
    before = torch.get_num_threads()
    try:
        one = ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--temperature", 0, "--threads", 1)
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)
    assert one.stdout == ok("--checkpoint", checkpoint, "--prompt", PROMPT, "--max-new-tokens", 12, "--temperature", 0).stdout


def test_the_end_of_text_id_is_the_checkpoints(model, tok, tmp_path):
    """Decoding starts from, and stops at, the end-of-text id the checkpoint records (its data's),
    not a token found by name; a checkpoint from before the record takes the tokenizer's."""
    other = tok.special_tokens[EOT] - 1  # any id: what the data's manifest said
    save_model(model, tok, tmp_path / "ckpt", eot_id=other)
    assert checkpoint_eot_id(tmp_path / "ckpt", tok) == other
    want = greedy_ids(model, [other] + tok.encode(PROMPT), 8)
    want = want[: want.index(other)] if other in want else want
    res = ok("--checkpoint", tmp_path / "ckpt", "--prompt", PROMPT, "--max-new-tokens", 8, "--temperature", 0)
    assert res.stdout == PROMPT + tok.decode(want) + "\n"
    config = json.loads((tmp_path / "ckpt/config.json").read_text())
    del config["tokenizer"]["eot_id"]
    (tmp_path / "ckpt/config.json").write_text(json.dumps(config))
    assert checkpoint_eot_id(tmp_path / "ckpt", tok) == tok.special_tokens[EOT]


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_cli_cuda_without_cuda(checkpoint):
    assert_input_error(run_cli("--checkpoint", checkpoint, "--prompt", "hi", "--device", "cuda"), "--device cuda")
