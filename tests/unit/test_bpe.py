"""Encoding and decoding: exact against HF `tokenizers` and tiktoken, and by properties."""

import json
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptkit.shared.errors import InputError
from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.bpe import _LONG, _groups
from gptkit.tokenizer.files import BYTE_TO_CHAR
from tests.conftest import SHARED_DATA, english_like, shared_file

# Text rich in what makes pre-tokenization subtle: runs and kinds of whitespace,
# apostrophes, digits, punctuation, non-Latin letters, and the characters U+001C..U+001F
# that Python's `re` calls whitespace and the GPT-2 pattern does not.
tricky_text = st.lists(
    st.sampled_from(
        [
            " ",
            " ",
            "  ",
            "\n",
            "\t",
            "\r\n",
            "\xa0",
            "\u3000",
            "\x1c",
            "\x85",
            "a",
            "B",
            "é",
            "東",
            "'",
            "'s",
            "'ll",
            "7",
            "42",
            ".",
            "!?",
            "-",
            "<",
            "|",
            "\U0001f600",
        ]
    ),
    max_size=40,
).map("".join)


@pytest.fixture(params=["engine", "own"], scope="module")
def encoder(request, small_tokenizer):
    """The small tokenizer encoding with tiktoken (engine.py), and with our own encoder, the reference."""
    tokenizer, _ = small_tokenizer
    if request.param == "own":
        tokenizer = Tokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, engine=False)
    assert (tokenizer._engine is not None) == (request.param == "engine")
    return tokenizer


def reference_bpe(tokenizer, pretoken):
    """The textbook algorithm, one merge at a time: repeatedly merge the lowest-ranked pair."""
    ids = {b: i for i, b in enumerate(tokenizer.vocab)}
    rank = {pair: r for r, pair in enumerate(tokenizer.merges)}
    parts = [ids[bytes([b])] for b in pretoken.encode()]
    while True:
        pairs = [(rank[p], i) for i, p in enumerate(zip(parts, parts[1:])) if p in rank]
        if not pairs:
            return parts
        _, i = min(pairs)
        parts[i : i + 2] = [ids[tokenizer.vocab[parts[i]] + tokenizer.vocab[parts[i + 1]]]]


def reference_encode(tokenizer, text):
    return [i for pretoken in split.PRETOKEN.findall(text) for i in reference_bpe(tokenizer, pretoken)]


@settings(max_examples=300, deadline=None)
@given(tricky_text)
def test_chunks_preserve_pretokens(text):
    first, *rest = split.chunks(text)
    pretokens = split.PRETOKEN.findall(first)
    for chunk in rest:
        pretokens += split.PRETOKEN.findall(" " + chunk)
    assert pretokens == split.PRETOKEN.findall(text)


@settings(max_examples=300, deadline=None)
@given(tricky_text, st.integers(0, 40))
def test_safe_cut_preserves_pretokens(text, end):
    cut = split.safe_cut(text, end)
    assert 0 <= cut <= max(end, 0)
    assert split.PRETOKEN.findall(text[:cut]) + split.PRETOKEN.findall(text[cut:]) == split.PRETOKEN.findall(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(tricky_text, max_size=8))
def test_pieces_join_in_any_order_and_keep_their_pretokens(texts):
    """The trainer counts the pre-tokens of all pieces but each text's first, joined in any order."""
    pieces = [split.pieces(text) for text in texts]
    for text, cut in zip(texts, pieces):
        assert "".join(cut) == text and [p for piece in cut for p in split.PRETOKEN.findall(piece)] == (
            split.PRETOKEN.findall(text)
        )
    rest = [piece for cut in pieces for piece in cut[1:]]
    random.Random(len(rest)).shuffle(rest)
    assert split.PRETOKEN.findall("".join(rest)) == [p for piece in rest for p in split.PRETOKEN.findall(piece)]


@settings(max_examples=300, deadline=None)
@given(tricky_text.map(lambda text: "".join(c for c in text if c.isascii())))
def test_ascii_pattern_is_gpt2s_on_ascii(text):
    assert split.ASCII_PRETOKEN.findall(text) == split.PRETOKEN.findall(text)


@settings(max_examples=200, deadline=None)
@given(st.lists(tricky_text, max_size=30))
def test_pretokens_of_chunks_groups_each_chunk(texts):
    chunks = [c for t in texts for c in split.chunks(t)[1:]]
    pretokens, sizes = split.pretokens_of_chunks(chunks)
    assert [list(g) for g in _groups(pretokens, sizes)] == [split.PRETOKEN.findall(" " + c) for c in chunks]


def test_engine_only_where_tiktoken_computes_the_same_ids(small_tokenizer):
    """tiktoken takes a pre-token that is a token whole: not ours where merges never make that token
    and there is no ignore_merges (tests/unit/test_engine.py has the other cases)."""
    tokenizer, _ = small_tokenizer
    vocab, merges, specials = tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens
    assert Tokenizer(vocab, merges, specials)._engine is not None
    unmade = Tokenizer([*vocab, b"no merge makes this"], merges, specials)  # a token of no merge
    assert unmade._engine is None
    text = "no merge makes this, twice: no merge makes this"
    assert unmade.encode(text) == reference_encode(unmade, text)  # not the one token tiktoken would take


def test_both_encoders_refuse_a_lone_surrogate(encoder):
    with pytest.raises(UnicodeEncodeError):
        encoder.encode("a\ud800b")


def test_encode_matches_textbook_bpe(encoder, small_text):
    tokenizer = encoder
    text = small_text[:20_000] + english_like(3000, seed=7)  # unseen word combinations too
    assert tokenizer.encode(text) == reference_encode(tokenizer, text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=60))
def test_round_trip_any_unicode(encoder, text):
    tokenizer = encoder
    assert tokenizer.decode(tokenizer.encode(text)) == text


@settings(max_examples=100, deadline=None)
@given(tricky_text)
def test_tricky_text_matches_textbook_bpe(encoder, text):
    tokenizer = encoder
    assert tokenizer.encode(text, allowed_special=()) == reference_encode(tokenizer, text)


def test_long_pretokens_match_textbook_bpe(encoder):
    """Pre-tokens longer than _LONG characters take the heap path; it must agree with the rounds."""
    tokenizer = encoder
    rng = random.Random(0)
    texts = [" " + "".join(rng.choice("thesaoinrdlcu") for _ in range(n)) for n in (_LONG + 1, 3000)]
    texts += [" " * 700 + "x", "ab" * 400, "a" * 1001]
    for text in texts:
        assert len(split.PRETOKEN.findall(text)[0]) > _LONG
        assert tokenizer.encode(text) == reference_encode(tokenizer, text)
        assert tokenizer.encode("tea " + text + " tea") == reference_encode(tokenizer, "tea " + text + " tea")


def test_same_ids_as_hf_tokenizers(encoder, small_tokenizer, small_text):
    tokenizers = pytest.importorskip("tokenizers")
    tokenizer, (_, path) = encoder, small_tokenizer
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts = [small_text, "Hello<|endoftext|>world  \n\n  it's 2024!", "東京 café\u3000x\t\ty"]
    for name in ("tinyshakespeare.txt", "corpus.en", "german.txt", "address.txt", "tinystories_sample.txt"):
        if (path := SHARED_DATA / name).exists():
            texts.append(path.read_text(encoding="utf-8"))
    for text in texts:
        assert tokenizer.encode(text) == hf.encode(text).ids
    assert hf.decode(tokenizer.encode(small_text)) == small_text


def test_gpt2_files_give_tiktoken_ids():
    tiktoken = pytest.importorskip("tiktoken")
    tokenizer = Tokenizer.from_gpt2_files(shared_file("gpt2_vocab.json"), shared_file("gpt2_merges.txt"))
    own = Tokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, engine=False)
    assert tokenizer._engine is not None  # its bytes' ids are not 0..255; its ids follow its merges: they are the ranks
    assert tokenizer.vocab_size == 50257 and tokenizer.special_tokens == {"<|endoftext|>": 50256}
    ranks = {t: i for i, t in enumerate(tokenizer.vocab) if i != 50256}
    reference = tiktoken.Encoding(
        "gpt2-files", pat_str=split.GPT2_PATTERN, mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256}
    )
    for name in ("tinyshakespeare.txt", "corpus.en", "german.txt", "tinystories_sample.txt"):
        text = shared_file(name).read_text(encoding="utf-8")
        assert tokenizer.encode(text) == own.encode(text) == reference.encode(text, allowed_special="all")
    # GPT-2's ids for "Hello world" are well known.
    assert tokenizer.encode("Hello world") == [15496, 995]


@pytest.mark.parametrize("engine", [True, False])
def test_special_tokens_longest_match_and_as_text(engine):
    vocab = [bytes([b]) for b in range(256)]
    specials = {"<|endoftext|>": 256, "<|endoftext|><|endoftext|>": 257}
    tokenizer = Tokenizer(vocab + [s.encode() for s in specials], [], specials, engine=engine)
    eot = list(b"<|endoftext|>")
    assert tokenizer.encode("<|endoftext|>") == [256]
    assert tokenizer.encode("<|endoftext|><|endoftext|>") == [257]
    assert tokenizer.encode("a<|endoftext|><|endoftext|><|endoftext|>b") == [97, 257, 256, 98]
    assert tokenizer.encode("<|endoftext|>", allowed_special=()) == eot
    assert tokenizer.encode("<|endoftext|><|endoftext|>", allowed_special={"<|endoftext|>"}) == [256, 256]
    assert tokenizer.decode([97, 257, 98]) == "a<|endoftext|><|endoftext|>b"


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["<|endoftext|>", "<|endoftext|><|endoftext|>", "<|end", "oftext|>", " ", "  ", "\n", "ab", " cd", "'s"]
        ),
        max_size=25,
    ),
    st.lists(st.integers(0, 200), max_size=6),
    st.booleans(),
)
def test_encode_iterable_equals_encode(parts, cuts, engine):
    vocab = [bytes([b]) for b in range(256)] + [b"ab", b" c", b" cd"]
    specials = {"<|endoftext|>": 259, "<|endoftext|><|endoftext|>": 260}
    merges = [(97, 98), (32, 99), (257, 100)]
    tokenizer = Tokenizer(vocab + [s.encode() for s in specials], merges, specials, engine=engine)
    text = "".join(parts)
    bounds = sorted({0, len(text), *(c for c in cuts if c < len(text))})
    pieces = [text[a:b] for a, b in zip(bounds, bounds[1:])]
    assert list(tokenizer.encode_iterable(pieces)) == tokenizer.encode(text)
    assert list(tokenizer.encode_iterable(pieces, allowed_special=())) == tokenizer.encode(text, allowed_special=())


def test_encode_iterable_streams_a_file(encoder, small_text, tmp_path):
    tokenizer = encoder
    path = tmp_path / "big.txt"
    path.write_text(small_text * 3)
    with open(path) as f:
        streamed = list(tokenizer.encode_iterable(iter(lambda: f.read(4096), "")))
    assert streamed == tokenizer.encode(small_text * 3)


def test_encode_batch_in_processes_equals_encode(encoder, small_text):
    tokenizer = encoder
    docs = [small_text[i : i + 997] for i in range(0, 40_000, 997)] + ["", "<|endoftext|>"]
    assert tokenizer.encode_batch(docs, workers=2) == [tokenizer.encode(d) for d in docs]


def test_bounded_caches_stay_exact(small_tokenizer, small_text, monkeypatch):
    tokenizer, path = small_tokenizer
    monkeypatch.setattr("gptkit.tokenizer.bpe._CACHE_LIMIT", 50)
    fresh = Tokenizer(tokenizer.vocab, tokenizer.merges, tokenizer.special_tokens, engine=False)  # the caches are its
    for i in range(0, 30_000, 3000):
        assert fresh.encode(small_text[i : i + 3000]) == tokenizer.encode(small_text[i : i + 3000])
    assert len(fresh._chunk_ids) < 3000


def test_decode_replaces_invalid_utf8(small_tokenizer):
    tokenizer, _ = small_tokenizer
    lead_byte = tokenizer.vocab.index("é".encode()[:1])  # the first of its two bytes, alone: not UTF-8
    assert tokenizer.decode([lead_byte, tokenizer.encode("x")[0]]) == "\ufffdx"
    assert tokenizer.decode(tokenizer.encode("é")) == "é"
    with pytest.raises(InputError, match="not in the vocabulary"):
        tokenizer.decode([tokenizer.vocab_size])


def test_file_round_trip_and_fingerprint(small_tokenizer, tmp_path):
    tokenizer, path = small_tokenizer
    data = json.loads(path.read_text())
    assert data["model"]["type"] == "BPE" and data["pre_tokenizer"]["type"] == "ByteLevel"
    assert (
        data["added_tokens"][0]["content"] == "<|endoftext|>"
        and data["added_tokens"][0]["id"] == 449 == tokenizer.vocab_size - 1
    )
    assert data["model"]["vocab"][BYTE_TO_CHAR[ord(" ")]] == 32  # "Ġ", GPT-2's space
    tokenizer.save(tmp_path / "again.json")
    again = Tokenizer.from_file(tmp_path / "again.json")
    assert (again.vocab, again.merges, again.special_tokens) == (
        tokenizer.vocab,
        tokenizer.merges,
        tokenizer.special_tokens,
    )
    assert again.fingerprint == tokenizer.fingerprint and len(tokenizer.fingerprint) == 16
    other = Tokenizer(tokenizer.vocab, tokenizer.merges[:-1], tokenizer.special_tokens)
    assert other.fingerprint != tokenizer.fingerprint
