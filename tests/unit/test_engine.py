"""The encoding engine (tiktoken, engine.py) where it computes HF `tokenizers`' ids, and only there:
imported tokenizers in Llama 3's and Qwen2's shapes (and GPT-4o's pattern), id for id against HF and
our own encoder on English, code, German, Chinese, emoji and whitespace runs."""

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.files import BYTE_TO_CHAR, token_text
from tests.conftest import SHARED_DATA, english_like

tokenizers = pytest.importorskip("tokenizers")
tiktoken = pytest.importorskip("tiktoken")
from bench.imported_tokenizers import KINDS, hf_bpe, with_every_split  # noqa: E402 (needs tokenizers)

EOT = "<|endoftext|>"
ROOT = Path(__file__).resolve().parents[2]

SAMPLES = {
    "english": english_like(400, seed=11),
    "code": "".join(p.read_text(encoding="utf-8") for p in sorted((ROOT / "tokenizer").glob("*.py")))[:60_000],
    "german": (
        "Größere Übungen für Äpfel und Öl: Fischers Fritz fischt frische Fische. Das Mädchen läuft "
        "über die Straße, weil's regnet – „Grüß Gott!“ sagte der Bürgermeister 1999 zum 3. Mal.\n"
    ),
    "chinese": "自然语言处理是人工智能的一个重要方向。我们今天去北京，明天回上海！“引号”与（括号）、数字１２３和123。\n",
    "emoji": "👨\u200d👩\u200d👧\u200d👦 👍🏽 🏳️\u200d🌈 😀😀😀 🇩🇪🇨🇳 ❤️\u200d🔥 ✅✨\n",
    "whitespace": "  \t\t \n\n\n   \r\n \u3000\u00a0 x    y\n    \n\t\n" + " " * 40 + "z\n\n  ",
}
# Where the patterns' engines could part: case folding in (?i:'s|...) ("ſ" folds to "s", the Kelvin
# sign to "k"), whitespace that only some call whitespace, digits of other scripts, the special token.
TRICKY = ["'s", "'S", "'ſ", "'ll", "'LL", "\u212a", "İ", "\x1c", "\x85", "\u2028", "١٢٣٤", "①", "e\u0301", EOT]


def snippet(sample):
    return st.tuples(st.integers(0, len(sample)), st.integers(0, 60)).map(lambda t: sample[t[0] : t[0] + t[1]])


mixed_text = st.lists(
    st.one_of(
        *map(snippet, SAMPLES.values()),
        st.sampled_from(TRICKY),
        st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=4),
    ),
    max_size=12,
).map("".join)


def training_texts():
    rng = random.Random(0)
    texts = [text[i : i + 200] for text in SAMPLES.values() for i in range(0, len(text), 50)]
    return texts + ["".join(rng.choice(TRICKY + texts[:50]) for _ in range(20)) for _ in range(200)]


KIND_OPTIONS = {
    **KINDS,
    "llama3-one-merge-each": {**KINDS["llama3"], "every_split": False},  # as HF's trainer makes it
    "o200k": {"pattern": split.O200K_PATTERN, "normalizer": (), "ignore_merges": False, "every_split": False},
}


@pytest.fixture(scope="module", params=list(KIND_OPTIONS))
def kind(request, tmp_path_factory):
    """(HF's tokenizer, ours from its file with the engine, ours with our own encoder)."""
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    hf_bpe(training_texts(), 1200, **KIND_OPTIONS[request.param]).save(str(path))
    ours = Tokenizer.from_file(path)
    assert ours._engine is not None
    # Llama 3's shape: several merges make a token (every split of it), and the engine still applies.
    assert (len(ours.merges) > len(set(ours._merged_ids.tolist()))) == KIND_OPTIONS[request.param]["every_split"]
    return tokenizers.Tokenizer.from_file(str(path)), ours, own_encoder(ours)


def own_encoder(tokenizer):
    t = tokenizer
    return Tokenizer(
        t.vocab,
        t.merges,
        t.special_tokens,
        pattern=t.pattern,
        normalizer=t.normalizer,
        ignore_merges=t.ignore_merges,
        engine=False,
    )


def hf_ids(hf, text):
    return hf.encode(text, add_special_tokens=False).ids


@settings(max_examples=120, deadline=None)
@given(text=mixed_text)
def test_engine_gives_hf_ids(kind, text):
    hf, ours, own = kind
    assert ours.encode(text) == hf_ids(hf, text) == own.encode(text)


def test_engine_gives_hf_ids_on_whole_texts(kind):
    hf, ours, own = kind
    texts = [*SAMPLES.values(), "".join(SAMPLES.values()), "a" * 3000 + " " + "東" * 700, " " * 1000 + "x", ""]
    for name in ("tinyshakespeare.txt", "german.txt", "corpus.en"):
        if (SHARED_DATA / name).exists():
            texts.append((SHARED_DATA / name).read_text(encoding="utf-8"))
    texts.append(EOT.join(texts[:6]))  # special tokens between the texts: split out first, as before
    texts.append("a <|gptkit: never taken|> b")  # the engine's own special token, which it never takes
    for text in texts:
        assert ours.encode(text) == hf_ids(hf, text) == own.encode(text)
    assert ours.encode_batch(texts, workers=2) == [hf_ids(hf, t) for t in texts]


# -- which tokenizers get the engine -------------------------------------------------------------


def test_patterns_tiktoken_may_read_otherwise_stay_on_our_encoder(small_tokenizer):
    tok, _ = small_tokenizer
    args = tok.vocab, tok.merges, tok.special_tokens
    for pattern in (split.GPT2_PATTERN, split.LLAMA3_PATTERN, split.QWEN2_PATTERN, split.O200K_PATTERN):
        assert Tokenizer(*args, pattern=pattern)._engine is not None
        assert (
            Tokenizer(*args, pattern=pattern, normalizer=["NFKC", "Lowercase"], ignore_merges=True)._engine is not None
        )
    # A pattern that leaves text between its matches (tiktoken drops it, HF keeps it), and one not proven alike.
    for pattern in (r"\p{L}+", r"\S+|\s+"):
        assert Tokenizer(*args, pattern=pattern)._engine is None


def test_a_vocabulary_with_a_token_longer_than_512_bytes_stays_on_our_encoder():
    """Checking a vocabulary costs a numpy round per merge of its longest token: bounded by refusing."""
    vocab = [bytes([b]) for b in range(256)] + [b"ab", b"a" * 513]
    assert Tokenizer(vocab[:-1], [(97, 98)], {})._engine is not None
    assert Tokenizer(vocab, [(97, 98)], {}, ignore_merges=True)._engine is None


def tiny(tmp_path, tokens, merges, ignore_merges):
    """(HF's tokenizer, ours) of the 256 bytes and `tokens` (byte-level text), Llama 3's pattern."""
    vocab = {c: b for b, c in enumerate(BYTE_TO_CHAR)}
    vocab.update((token, 256 + i) for i, token in enumerate(tokens))
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, merges, ignore_merges=ignore_merges))
    hf.pre_tokenizer = tokenizers.pre_tokenizers.Sequence(
        [
            tokenizers.pre_tokenizers.Split(tokenizers.Regex(split.LLAMA3_PATTERN), behavior="isolated"),
            tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    hf.save(str(tmp_path / "tiny.json"))
    return hf, Tokenizer.from_file(tmp_path / "tiny.json")


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_a_token_whose_bytes_merge_into_two_other_tokens_stays_on_our_encoder(tmp_path, ignore_merges):
    """ "abc" is a token, but merged alone its bytes end as "a" + "bc", which no merge joins: tiktoken
    would join them (their bytes make a token), HF does not, with ignore_merges or without."""
    hf, ours = tiny(tmp_path, ["bc", "ab", "abc"], [("b", "c"), ("a", "b"), ("ab", "c")], ignore_merges)
    assert ours._engine is None
    text = "xabc abc"
    naive = tiktoken.Encoding(
        "naive", pat_str=ours.pattern, mergeable_ranks={t: i for i, t in enumerate(ours.vocab)}, special_tokens={}
    )
    assert naive.encode_ordinary(text) != hf_ids(hf, text) == ours.encode(text)


def test_merged_alone_merges_one_pair_at_a_time(tmp_path):
    """Where a merge makes a pair ranked below it, HF merges that pair next: "aaaa" with the merges
    (aa, a), (a, a), (aa, aa) ends as aaa + a, not aa + aa (as rounds joining every (a, a) at once
    would, and then aaaa): a token of two parts, so no engine."""
    from gptkit.tokenizer.engine import merged_alone

    hf, ours = tiny(tmp_path, ["aaa", "aa", "aaaa"], [("aa", "a"), ("a", "a"), ("aa", "aa")], False)
    parts, last = merged_alone([b"aaaa", b"aaa", b"aa"], ours._byte_ids, ours._ranks, ours._merged_ids)
    assert parts.tolist() == [2, 1, 1] and last.tolist() == [0, 0, 1]
    assert hf_ids(hf, "aaaa") == [256, 97] and ours._engine is None


UNMADE = "\x01\x02\x03\x04"  # bytes no training text holds: no merge makes a token of them


@pytest.fixture(scope="module")
def llama3_json():
    return json.loads(hf_bpe(training_texts(), 600, **KINDS["llama3"]).to_str())


def with_unmade_token(data):
    data["model"]["vocab"][token_text(UNMADE.encode())] = len(data["model"]["vocab"])
    return data


def from_json(data, tmp_path):
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return tokenizers.Tokenizer.from_file(str(path)), Tokenizer.from_file(path)


def test_a_token_no_merge_makes_needs_ignore_merges(tmp_path, llama3_json):
    """A token whose bytes merged alone end in three or more parts is taken whole by tiktoken when a
    pre-token is that token: HF does the same only with ignore_merges."""
    data = with_unmade_token(json.loads(json.dumps(llama3_json)))
    unmade_id = len(data["model"]["vocab"]) - 1
    for ignore in (True, False):
        data["model"]["ignore_merges"] = ignore
        hf, ours = from_json(data, tmp_path)
        assert (ours._engine is not None) == ignore
        text = f"a{UNMADE} {UNMADE}b"
        assert ours.encode(text) == hf_ids(hf, text) == own_encoder(ours).encode(text)
        assert (unmade_id in ours.encode(text)) == ignore


@pytest.mark.parametrize("ignore_merges", [True, False])
def test_ids_in_another_order_than_the_merges_are_mapped_from_ranks(tmp_path, llama3_json, ignore_merges):
    """Token ids that do not follow the merges' order: the engine ranks each token by its live merge
    and maps the ranks back to ids (with ignore_merges, a token no merge makes too)."""
    data = with_every_split(json.loads(json.dumps(llama3_json)))
    data["model"]["ignore_merges"] = ignore_merges
    if ignore_merges:
        with_unmade_token(data)
    special = {added["id"] for added in data["added_tokens"]}
    ids = [i for i in data["model"]["vocab"].values() if i not in special]
    shuffled = dict(zip(ids, random.Random(0).sample(ids, len(ids))))
    data["model"]["vocab"] = {t: shuffled.get(i, i) for t, i in data["model"]["vocab"].items()}
    hf, ours = from_json(data, tmp_path)
    assert ours._engine is not None
    for text in [*SAMPLES.values(), f"a{UNMADE} {UNMADE}b"]:
        assert ours.encode(text) == hf_ids(hf, text) == own_encoder(ours).encode(text)


def test_a_whitespace_run_past_tiktokens_backtracking_limit_gets_hfs_ids_from_our_encoder(tmp_path, llama3_json):
    """tiktoken's regex engine gives up past a million steps of backtracking, which a run of a
    million spaces reaches: that text is encoded by our own encoder, the rest by the engine."""
    theirs, ours = from_json(llama3_json, tmp_path)
    text = "a" + " " * 1_000_000 + "b"
    assert ours.build_engine() and ours._engine is not None and ours._engine(text) is None
    assert ours.encode(text) == theirs.encode(text, add_special_tokens=False).ids
