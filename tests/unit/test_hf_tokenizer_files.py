"""HF tokenizer.json files read exactly or refused: the normalizers and the pre-tokenizer
patterns of modern byte-level BPE files (Llama 3, Qwen2, GPT-4o) give the ids of HF
`tokenizers` itself; every option we do not apply is refused in one line."""

import json
import random

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gptkit.tokenizer import Tokenizer, split
from gptkit.tokenizer.cli import cli
from tests.conftest import SHARED_DATA, assert_input_error, english_like

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import Regex, decoders, normalizers, pre_tokenizers, trainers  # noqa: E402 (after the skip)

EOT = "<|endoftext|>"

# What makes Unicode text hard to cut and normalize: scripts without spaces, emoji joined by
# ZWJ and skin tones, combining marks (composed by NFC, reordered by NFD), right-to-left
# scripts, Devanagari conjuncts, digit runs (Llama 3 cuts them by three, Qwen2 by one),
# whitespace runs and newlines of every kind, case pairs with odd lowercases (İ, final Σ,
# ǅ, the Kelvin sign), compatibility characters (ﬁ, ①, full width, ¨, ͺ) and contractions.
UNICODE_PIECES = [
    "東京",
    "日本語のテキスト。",
    "中文，标点！",
    "한국어",
    "\u1100\u1161\u11a8",
    "ㄱ",
    "👨\u200d👩\u200d👧\u200d👦",
    "👍🏽",
    "🏳️\u200d🌈",
    "😀",
    "e\u0301",
    "a\u0308\u0301",
    "q\u0323\u0307",
    "Å",
    "ß",
    "مرحبا بالعالم",
    "١٢٣٤",
    "שָׁלוֹם",
    "नमस्ते",
    "क्षि",
    "1234567",
    "3.14159",
    "①②",
    "Ⅻ",
    " ",
    "   ",
    "\t",
    "\n",
    "\n\n",
    "\r\n",
    " \n ",
    "\u00a0",
    "\u3000",
    "\u2028",
    "\x85",
    "\x1c",
    "'s",
    "'S",
    "'ll",
    "'VE",
    "ſ",
    "\u212a",
    "İ",
    "ΣΑΣ ",
    "ὈΔΥΣΣΕΎΣ",
    "ς",
    "ǅ",
    "ﬁ",
    "ｆｕｌｌ",
    "¨",
    "ͺ",
    "Hello",
    " world",
    "HTTPServer",
    "don't",
    "!?",
    "...",
    "/",
    "//",
    "<",
    "|",
    " the",
    " cat",
    "x",
    EOT,
]
unicode_text = st.lists(
    st.one_of(st.sampled_from(UNICODE_PIECES), st.text(st.characters(exclude_categories=("Cs", "Cn")), max_size=3)),
    max_size=30,
).map("".join)

CONFIGS = {  # name: (pattern, or None for ByteLevel's own GPT-2 pattern; normalizers)
    "gpt2": (None, ()),
    "gpt2-nfkc-lowercase": (None, ("NFKC", "Lowercase")),
    "llama3": (split.LLAMA3_PATTERN, ()),
    "qwen2-nfc": (split.QWEN2_PATTERN, ("NFC",)),
    "o200k": (split.O200K_PATTERN, ()),
    "llama3-nfd": (split.LLAMA3_PATTERN, ("NFD",)),
    "o200k-nfkd-lowercase": (split.O200K_PATTERN, ("NFKD", "Lowercase")),
}


def training_texts():
    rng = random.Random(0)
    return ["".join(rng.choice(UNICODE_PIECES) for _ in range(40)) for _ in range(1500)] + [english_like(3000)]


def hf_tokenizer(pattern, normalizer_names, **bpe_options):
    """A byte-level BPE made and trained by HF `tokenizers`, in the shape Llama 3's and Qwen2's files have."""
    hf = tokenizers.Tokenizer(tokenizers.models.BPE(**bpe_options))
    if normalizer_names:
        hf.normalizer = normalizers.Sequence([getattr(normalizers, name)() for name in normalizer_names])
    if pattern is None:
        hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    else:
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=900, special_tokens=[EOT], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    hf.train_from_iterator(training_texts(), trainer=trainer)
    return hf


@pytest.fixture(scope="module", params=list(CONFIGS))
def pair(request, tmp_path_factory):
    """(HF tokenizer, ours loaded from its tokenizer.json, the normalizer names, the file)."""
    pattern, names = CONFIGS[request.param]
    path = tmp_path_factory.mktemp(request.param) / "tokenizer.json"
    hf_tokenizer(pattern, names).save(str(path))
    return tokenizers.Tokenizer.from_file(str(path)), Tokenizer.from_file(path), names, path


def hf_ids(hf, text):
    return hf.encode(text, add_special_tokens=False).ids


FIXED_TEXTS = [
    "".join(UNICODE_PIECES),
    "".join(reversed(UNICODE_PIECES)),
    "Ünïcödé  \n\n\t 東京タワー 123456789 👩🏽\u200d💻 it's  'S\r\n\r\n  ",
    "  leading and trailing  ",
    "a" * 300 + " " + "東" * 300,  # long pre-tokens
    "",
]


def test_fixed_texts_match_hf(pair):
    hf, ours, _, _ = pair
    texts = FIXED_TEXTS + [english_like(2000, seed=3)]
    for name in ("tinyshakespeare.txt", "corpus.en", "german.txt"):
        if (SHARED_DATA / name).exists():
            texts.append((SHARED_DATA / name).read_text(encoding="utf-8")[:200_000])
    for text in texts:
        assert ours.encode(text) == hf_ids(hf, text)
    assert ours.encode_batch(texts, workers=2) == [hf_ids(hf, t) for t in texts]


@settings(max_examples=300, deadline=None)
@given(text=unicode_text)
def test_unicode_text_matches_hf(pair, text):
    hf, ours, names, _ = pair
    # HF's normalization tables are older than Python's (Unicode 14 with Python 3.11) and its
    # lowercase table newer: on the few characters they disagree about (README), ids differ.
    assume(not names or hf.normalizer.normalize_str(text) == split.normalize(names, text))
    ids = ours.encode(text)
    assert ids == hf_ids(hf, text)
    assert ours.decode(ids) == split.normalize(names, text)


@settings(max_examples=150, deadline=None)
@given(parts=st.lists(unicode_text, max_size=6), ends=st.lists(st.integers(0, 200), max_size=6))
def test_streamed_encoding_equals_whole(pair, parts, ends):
    """encode_iterable cuts only where its tokenizer's pattern and normalizers allow."""
    _, ours, _, _ = pair
    text = "".join(parts)
    bounds = sorted({0, len(text), *(e for e in ends if e < len(text))})
    assert list(ours.encode_iterable(text[a:b] for a, b in zip(bounds, bounds[1:]))) == ours.encode(text)


def test_streamed_encoding_keeps_the_whitespace_before_a_special_token_whole():
    """A piece cut before the last space of a run that a special token ends gave other ids
    (hypothesis found '   <|endoftext|>': [285, 221, 0] streamed, [498, 0] whole), and so did a
    cut asked for before the start of a short piece (a negative position counted from its end)."""
    tok = Tokenizer([bytes([b]) for b in range(256)] + [b"  ", b"   ", EOT.encode()], [(32, 32), (256, 32)], {EOT: 258})
    for text in ("   " + EOT, "x   " + EOT + " y", "  x " + EOT):
        assert list(tok.encode_iterable([text])) == tok.encode(text)
        assert list(tok.encode_iterable(text[i : i + 1] for i in range(len(text)))) == tok.encode(text)


@settings(max_examples=150, deadline=None)
@given(text=unicode_text)
def test_line_cuts_change_no_ids(pair, text):
    """Where pretokenize may begin the validation tail of a one-text corpus: the ids of the two
    parts, one after the other, are the ids of the whole."""
    _, ours, _, _ = pair
    whole = ours.encode(text, allowed_special=())
    for cut in ours.line_cuts(text):
        assert ours.encode(text[:cut], allowed_special=()) + ours.encode(text[cut:], allowed_special=()) == whole


def test_line_cuts_follow_the_pattern():
    """GPT-2's pattern cuts at a newline beside a non-space; Llama 3's (and Qwen2's, GPT-4o's) glue a
    newline to punctuation before it and take a run of newlines whole: only before a run after a
    letter or digit (the rule pretokenize used for every pattern cut '.\n' and '\n\n' apart)."""
    plain = Tokenizer([bytes([b]) for b in range(256)], [], {})
    text = "One.\nTwo\n\nthree 4\nfive"
    assert plain.line_cuts(text) == [4, 8, 9, 17]
    for pattern in (split.LLAMA3_PATTERN, split.QWEN2_PATTERN, split.O200K_PATTERN):
        assert Tokenizer(plain.vocab, [], {}, pattern=pattern).line_cuts(text) == [8, 17]
    assert Tokenizer(plain.vocab, [], {}, pattern=r"\S+|\s+").line_cuts(text) == []  # unknown: no cut is proven
    for pattern in (split.GPT2_PATTERN, split.LLAMA3_PATTERN, r"\S+|\s+"):  # the last one, searched from the end
        tok = Tokenizer(plain.vocab, [], {}, pattern=pattern)
        assert [tok.last_line_cut(text, end) for end in range(len(text))] == [
            max(tok.line_cuts(text, 1, end), default=0) for end in range(len(text))
        ]


def test_line_cuts_look_at_the_normalized_neighbours():
    """NFKC makes "¨" a space and a combining mark, "⑴" the text "(1)": a newline beside them is
    no line end to cut at, whatever it looks like before normalizing (hypothesis found the first)."""
    plain = Tokenizer([bytes([b]) for b in range(256)], [], {})
    text = "\n\n¨ a\nb ⑴\nx"
    assert plain.line_cuts(text) == [1, 5, 9]
    assert Tokenizer(plain.vocab, [], {}, normalizer=("NFKC",)).line_cuts(text) == [5, 9]
    llama = Tokenizer(plain.vocab, [], {}, pattern=split.LLAMA3_PATTERN)
    assert llama.line_cuts(text) == [5, 9]
    llama_nfkc = Tokenizer(plain.vocab, [], {}, pattern=split.LLAMA3_PATTERN, normalizer=("NFKC",))
    assert llama_nfkc.line_cuts(text) == [5]
    assert llama_nfkc.last_line_cut(text, len(text)) == 5
    for tok in (plain, llama, llama_nfkc):
        whole = tok.encode(text, allowed_special=())
        for cut in tok.line_cuts(text):
            assert tok.encode(text[:cut], allowed_special=()) + tok.encode(text[cut:], allowed_special=()) == whole


def test_safe_cut_is_used_where_proven():
    plain = Tokenizer([bytes([b]) for b in range(256)], [], {})
    text = "one two\tthree"
    assert plain.safe_cut(text, len(text)) == 7  # GPT-2: before any whitespace followed by a non-space
    for pattern in (split.LLAMA3_PATTERN, split.QWEN2_PATTERN, split.O200K_PATTERN):
        assert (
            Tokenizer(plain.vocab, [], {}, pattern=pattern).safe_cut(text, len(text)) == 3
        )  # only a space after ASCII
    assert Tokenizer(plain.vocab, [], {}, normalizer=("NFKC",)).safe_cut(text, len(text)) == 3
    assert Tokenizer(plain.vocab, [], {}, pattern=r"\w+(?: \w+)*|\s+").safe_cut(text, len(text)) == 0  # unknown: never


def test_save_round_trips_pattern_and_normalizer(pair, tmp_path):
    hf, ours, names, _ = pair
    ours.save(tmp_path / "again.json")
    again = Tokenizer.from_file(tmp_path / "again.json")
    assert (again.pattern, again.normalizer, again.fingerprint) == (ours.pattern, ours.normalizer, ours.fingerprint)
    hf_again = tokenizers.Tokenizer.from_file(str(tmp_path / "again.json"))
    for text in FIXED_TEXTS:
        assert hf_ids(hf_again, text) == hf_ids(hf, text) == ours.encode(text)


def test_fingerprint_covers_pattern_normalizer_and_ignore_merges(small_tokenizer):
    tok, _ = small_tokenizer
    args = tok.vocab, tok.merges, tok.special_tokens
    variants = [
        Tokenizer(*args),
        Tokenizer(*args, pattern=split.LLAMA3_PATTERN),
        Tokenizer(*args, pattern=split.QWEN2_PATTERN),
        Tokenizer(*args, normalizer=("NFC",)),
        Tokenizer(*args, normalizer=("NFKC",)),
        Tokenizer(*args, normalizer=("NFC", "Lowercase")),
        Tokenizer(*args, normalizer=("Lowercase", "NFC")),
        Tokenizer(*args, ignore_merges=True),
    ]
    assert len({v.fingerprint for v in variants}) == len(variants)
    assert variants[0].fingerprint == tok.fingerprint  # the defaults keep the fingerprints made before these options


def test_ignore_merges_takes_whole_tokens(tmp_path):
    """HF's ignore_merges (Llama 3 sets it): a pre-token that is a token is that token, even where
    the merges, applied in rank order, would not make it."""
    vocab = {**{c: i for i, c in enumerate(pre_tokenizers.ByteLevel.alphabet())}}
    for token in ("bc", "ab", "abc"):
        vocab[token] = len(vocab)
    merges = [("b", "c"), ("a", "b"), ("ab", "c")]  # "abc" merges to a + bc, never to abc
    for ignore in (False, True):
        hf = tokenizers.Tokenizer(tokenizers.models.BPE(vocab, merges, ignore_merges=ignore))
        hf.pre_tokenizer = pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(split.LLAMA3_PATTERN), behavior="isolated"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        )
        hf.save(str(tmp_path / "t.json"))
        ours = Tokenizer.from_file(tmp_path / "t.json")
        for text in ("abc", "abc abcabc", "xabc"):
            assert ours.encode(text) == hf_ids(hf, text)
        assert (ours.encode("abc") == [vocab["abc"]]) == ignore


def test_text_between_matches_is_a_pretoken(tmp_path):
    """A Split pattern need not match every character: HF keeps the text between matches."""
    hf = hf_tokenizer(r"\p{L}+", ())
    hf.save(str(tmp_path / "t.json"))
    ours = Tokenizer.from_file(tmp_path / "t.json")
    for text in FIXED_TEXTS + ["  12 ab!!cd  ", "no-gaps"]:
        assert ours.encode(text) == hf_ids(hf, text)


def test_sigma_lowercases_as_hf_does():
    hf = normalizers.Lowercase()
    for text in ("ΟΔΥΣΣΕΥΣ", "ΣΑΣ.", "Σ", "İSTANBUL", "ǅ", "\u212a"):
        assert split.normalize(("Lowercase",), text) == hf.normalize_str(text)


# -- refused files ---------------------------------------------------------------------------


def refused_cases():
    """(what is changed in a Llama 3-shaped tokenizer.json, words the error must name)."""

    def model(**fields):
        return lambda d: d["model"].update(fields)

    def pre(index, **fields):
        return lambda d: d["pre_tokenizer"]["pretokenizers"][index].update(fields)

    def added(**fields):
        return lambda d: d["added_tokens"][0].update(fields)

    def setting(key, value):
        return lambda d: d.update({key: value})

    return {
        "dropout": (model(dropout=0.1), ["model.dropout", "0.1"]),
        "end_of_word_suffix": (model(end_of_word_suffix="</w>"), ["model.end_of_word_suffix", "</w>"]),
        "continuing_subword_prefix": (model(continuing_subword_prefix="##"), ["model.continuing_subword_prefix"]),
        "byte_fallback": (model(byte_fallback=True), ["model.byte_fallback"]),
        "unknown model field": (model(new_option=1), ["model.new_option"]),
        "not BPE": (model(type="Unigram"), ["BPE model"]),
        "strip normalizer": (
            setting("normalizer", {"type": "Strip", "strip_left": True, "strip_right": True}),
            ["normalizer", "Strip"],
        ),
        "replace in a sequence": (
            setting(
                "normalizer",
                {
                    "type": "Sequence",
                    "normalizers": [{"type": "NFC"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}],
                },
            ),
            ["normalizer", "Replace"],
        ),
        "prefix space": (pre(1, add_prefix_space=True), ["pre_tokenizer", "add_prefix_space"]),
        "byte-level regex after the split": (pre(1, use_regex=True), ["pre_tokenizer"]),
        "split removed": (pre(0, behavior="Removed"), ["pre_tokenizer", "Removed"]),
        "split inverted": (pre(0, invert=True), ["pre_tokenizer", "invert"]),
        "split on a string": (pre(0, pattern={"String": " "}), ["pre_tokenizer", "String"]),
        "bad regex": (pre(0, pattern={"Regex": "(?<unclosed"}), ["pattern", "(?<unclosed", "does not compile"]),
        "metaspace": (
            setting(
                "pre_tokenizer", {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "always", "split": True}
            ),
            ["pre_tokenizer", "Metaspace"],
        ),
        "byte level with prefix space": (
            setting(
                "pre_tokenizer",
                {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            ),
            ["pre_tokenizer", "add_prefix_space"],
        ),
        "no pre-tokenizer": (setting("pre_tokenizer", None), ["pre_tokenizer", "null"]),
        "truncation": (
            setting("truncation", {"direction": "Right", "max_length": 8, "strategy": "LongestFirst", "stride": 0}),
            ["truncation"],
        ),
        "padding": (
            setting(
                "padding",
                {"strategy": {"Fixed": 8}, "direction": "Right", "pad_id": 0, "pad_type_id": 0, "pad_token": EOT},
            ),
            ["padding"],
        ),
        "lstrip": (added(lstrip=True), [EOT, "lstrip"]),
        "single_word": (added(single_word=True), [EOT, "single_word"]),
    }


@pytest.fixture(scope="module")
def llama3_json(tmp_path_factory):
    path = tmp_path_factory.mktemp("llama3") / "tokenizer.json"
    hf_tokenizer(split.LLAMA3_PATTERN, ()).save(str(path))
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("case", list(refused_cases()))
def test_unapplied_options_are_refused_in_one_line(tmp_path, llama3_json, case):
    change, needles = refused_cases()[case]
    data = json.loads(json.dumps(llama3_json))
    change(data)
    path = tmp_path / "odd tokenizer.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    res = CliRunner().invoke(cli, ["info", "-t", str(path)])
    assert_input_error(res, "odd tokenizer.json", *needles)


def test_normalized_added_token_refused_only_with_a_normalizer(tmp_path, llama3_json):
    data = json.loads(json.dumps(llama3_json))
    data["added_tokens"][0]["normalized"] = True  # as GPT-2's own file has it: harmless without a normalizer
    (tmp_path / "a.json").write_text(json.dumps(data), encoding="utf-8")
    Tokenizer.from_file(tmp_path / "a.json")
    data["normalizer"] = {"type": "NFKC"}
    (tmp_path / "b.json").write_text(json.dumps(data), encoding="utf-8")
    assert_input_error(CliRunner().invoke(cli, ["info", "-t", str(tmp_path / "b.json")]), "b.json", "normalized")


def test_neutral_values_and_post_processors_are_accepted(tmp_path, llama3_json):
    """Fields that cannot change the ids of a text: dropout 0, an unused unk token, a decoder,
    and a post-processor (its template frames texts: ours are HF's ids without it)."""
    data = json.loads(json.dumps(llama3_json))
    data["model"].update(
        dropout=0.0, unk_token=None, fuse_unk=True, continuing_subword_prefix="", end_of_word_suffix=""
    )
    data["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": EOT, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {EOT: {"id": EOT, "ids": [0], "tokens": [EOT]}},
    }
    path = tmp_path / "t.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    ours, hf = Tokenizer.from_file(path), tokenizers.Tokenizer.from_file(str(path))
    assert ours.encode("Hello 東京") == hf_ids(hf, "Hello 東京")
    assert hf.encode("Hello 東京").ids == [0] + ours.encode("Hello 東京")


def test_cli_info_names_pattern_and_normalizer(pair):
    _, ours, names, path = pair
    res = CliRunner().invoke(cli, ["info", "-t", str(path)])
    assert res.exit_code == 0, res.output
    assert f"normalizer: {' + '.join(names) or 'none'}" in res.stdout
    assert ("pre-tokenizer: GPT-2 pattern" in res.stdout) == (ours.pattern == split.GPT2_PATTERN)
