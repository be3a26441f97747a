"""Decoding (gptkit.model.generate: filter_probs, next_tokens, generate with its KV cache and
sliding window) and the sample stage's TextStream (the `sample` CLI: tests/integration/test_sample_cli.py)."""

import itertools

import pytest
import torch

from gptkit.model.checkpoint import save_model
from gptkit.model.config import ModelConfig
from gptkit.model.generate import Decoder, decoding_weights, filter_probs, generate, next_tokens
from gptkit.model.model import TransformerLM
from gptkit.sample.stream import TextStream

EOT = "<|endoftext|>"
CONTEXT = 32
P = [0.5, 0.3, 0.1, 0.05, 0.05]
PROMPT = "the little cat sat on the"


def tiny_model(vocab_size, seed=0):
    torch.manual_seed(seed)
    config = ModelConfig(
        vocab_size=vocab_size, context_length=CONTEXT, d_model=32, n_layers=2, n_heads=4, d_ff=64, init_std=0.1
    )
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


@pytest.mark.parametrize(
    "kwargs, expected",
    [
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
    ],
)
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
    assert greedy_ids(model, prompt, n) == seq[len(prompt) :]


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


@pytest.mark.parametrize(
    "kw",
    [dict(temperature=0), dict(temperature=1.0, top_p=0.9, seed=3), dict(temperature=0.7, top_k=20, seed=4)],
    ids=["greedy", "top-p", "top-k"],
)
def test_the_steps_a_cuda_graph_replays_give_the_plain_steps_tokens(model, monkeypatch, kw):
    """What a CUDA graph captures (a step at a position on the device, over the whole capacity, the
    next tokens chosen with uniform numbers read from a buffer: Step's fixed shapes) run eagerly
    on the CPU: the plain steps' tokens, across two slides of the window and a generation that
    reuses the decoder's step."""
    import gptkit.model.generate as gen

    kw = dict(max_new_tokens=2 * CONTEXT + 5, num_samples=2) | kw
    plain = torch.stack(list(generate(model, [1, 2, 3], **kw)))
    monkeypatch.setattr(gen, "graphed", lambda model, device: True)
    decoder = gen.Decoder(model)
    fixed = [torch.stack(list(decoder.generate([1, 2, 3], **kw))) for _ in range(2)]
    assert decoder.last is not None and decoder.last[1].fixed_shapes and decoder.last[1].graph is None  # no CUDA
    assert torch.equal(fixed[0], plain) and torch.equal(fixed[1], plain)


def test_a_decoder_makes_a_new_step_for_other_shapes_or_settings_and_keeps_one(model):
    decoder, steps = Decoder(model), []
    for kw in (dict(num_samples=2), dict(num_samples=2), dict(num_samples=3), dict(num_samples=3, top_p=0.5)):
        list(decoder.generate([1, 2], max_new_tokens=4, **kw))
        steps.append(decoder.last[1])
    assert steps[0] is steps[1] and len({id(s) for s in steps}) == 3


def test_weights_cast_for_decoding_give_autocasts_logits_exactly(tok):
    """What a Sampler does on CUDA, checked under the CPU's bf16 autocast: the linear layers cast
    once give the logits that autocast gives casting them at each step, bit for bit."""
    config = ModelConfig(
        vocab_size=tok.vocab_size,
        context_length=CONTEXT,
        d_model=32,
        n_layers=2,
        n_heads=4,
        d_ff=64,
        tie_embeddings=True,
    )
    torch.manual_seed(1)
    model = TransformerLM(config).eval()
    reference = TransformerLM(config).eval()
    reference.load_state_dict(model.state_dict())
    decoding_weights(model)
    assert model.lm_head.weight is not model.embedding.weight and model.lm_head.weight.dtype == torch.bfloat16
    assert model.embedding.weight.dtype == torch.float32 and model.layers[0].attention.wq.weight.dtype == torch.bfloat16
    ids = torch.tensor([tok.encode(PROMPT)])
    with torch.inference_mode(), torch.autocast("cpu", torch.bfloat16):
        assert torch.equal(model(ids)[0], reference(ids)[0])


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
@pytest.mark.parametrize(
    "text, stops, expected",
    [
        ("Hello world, bye", ["o w"], "Hell"),
        ("Hello world, bye", ["o w", "bye"], "Hell"),
        ("Hello world, bye", ["bye", "o w"], "Hell"),  # the earliest wins, whatever the order given
        ("Hello world, bye", ["ld", "or"], "Hello w"),
        ("Hello world, bye", [" w", "o w"], "Hell"),  # both complete at "w": the one that starts first
        ("ab東京cd", ["東京"], "ab"),
        ("ab東京cd", ["京c"], "ab東"),
        ("Hello world, bye", ["", "xyz"], "Hello world, bye"),  # never found: all released in the end
        ("Hello wo", ["wor"], "Hello wo"),  # a prefix that never completes is released by finish()
    ],
)
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


@pytest.mark.parametrize(
    "text, stop, expected",
    [
        ("abcd", "abcd", ""),
        ("Hello world, bye", "world", "Hello "),
        ("the cat sat on the mat", "sat on", "the cat "),
    ],
)
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
