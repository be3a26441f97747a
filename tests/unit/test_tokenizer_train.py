"""BPE training (gptkit.tokenizer.train): exact merges by hand, against a from-scratch reference, against
Stanford CS336's reference merges (the default tie-break) and HF tokenizers' trainer (tie_break="hf"),
determinism, bad input; the compiled counting and merge loop against the pattern and the Python fallback."""

import contextlib
import json
import random
import re
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gptkit.shared.corpus import Corpus
from gptkit.shared.errors import InputError
from gptkit.shared.text import EOT
from gptkit.tokenizer import split, train, train_bpe
from gptkit.tokenizer.files import BYTE_TO_CHAR, CHAR_TO_BYTE
from gptkit.tokenizer.train import learn_merges
from tests.conftest import english_like, shared_file


@contextlib.contextmanager
def trainer(kind):
    """ "compiled": counting and the merge loop in C, as pip builds them; "python": the fallback where they
    could not be built."""
    with pytest.MonkeyPatch.context() as patch:
        if kind == "python":
            patch.setattr(train, "_pretokens", None)
            patch.setattr(train, "_merge_loop", None)
        yield


KINDS = ["compiled", "python"]


def reference_merges(pretoken_counts, n_merges, tie_break):
    """Recount every pair from scratch before each merge; the most frequent wins. "lexicographic":
    a tie goes to the greatest (bytes, bytes). "hf": to the smallest (rank, rank), ranks numbering
    the bytes by their byte-level characters and each merged token after them, as HF `tokenizers`
    numbers its tokens."""
    rank = {bytes([b]): sorted(BYTE_TO_CHAR).index(BYTE_TO_CHAR[b]) for b in range(256)}

    def best_of(pairs):
        if tie_break == "lexicographic":
            return max(pairs, key=lambda pair: (pairs[pair], pair))
        return min(pairs, key=lambda pair: (-pairs[pair], rank[pair[0]], rank[pair[1]]))

    words = {tuple(bytes([b]) for b in p.encode()): n for p, n in pretoken_counts.items()}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for word, n in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += n
        if not pairs:
            break
        best = best_of(pairs)
        merges.append(best)
        rank[best[0] + best[1]] = 256 + len(merges) - 1
        merged = {}
        for word, n in words.items():
            out, i = [], 0
            while i < len(word):
                if word[i : i + 2] == best:
                    out.append(best[0] + best[1])
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] = merged.get(tuple(out), 0) + n
        words = merged
    return merges


def hf_merges(texts, vocab_size):
    """The merges HF `tokenizers`' trainer learns, as pairs of byte strings."""
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer(tokenizers.models.BPE())
    hf.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOT],
        show_progress=False,
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    hf.train_from_iterator(texts, trainer=trainer)
    merges = json.loads(hf.to_str())["model"]["merges"]
    return [tuple(bytes(CHAR_TO_BYTE[c] for c in token) for token in merge) for merge in merges]


def train_text(tmp_path, text, vocab_size, **kwargs):
    path = tmp_path / "corpus.txt"
    path.write_text(text, encoding="utf-8")
    return train_bpe(Corpus([path]), vocab_size, quiet=True, **kwargs)


def named_merges(tokenizer):
    return [(tokenizer.vocab[a], tokenizer.vocab[b]) for a, b in tokenizer.merges]


@pytest.mark.parametrize("kind", KINDS)
def test_default_merges_are_the_cs336_reference_merges(kind):
    # Read in GPT-2's byte-level characters, one merge a line; the default tie-break must give them all.
    lines = shared_file("corpus.en.merges-500.txt").read_text(encoding="utf-8").splitlines()
    expected = [tuple(bytes(CHAR_TO_BYTE[c] for c in token) for token in line.split(" ")) for line in lines]
    with trainer(kind):
        tokenizer = train_bpe(Corpus([shared_file("corpus.en")]), 500, [EOT], quiet=True)
    assert len(expected) == 500 - 256 - 1
    assert named_merges(tokenizer) == expected


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "tie_break, expected",
    [
        # Pre-tokens: "ab" x1, " ab" x2, " cd" x3. Pair counts: (a,b) 3, (c,d) 3, (" ",c) 3, (" ",a) 2.
        # Greatest bytes: (c,d), then (a,b) 3 ties with (" ",cd) 3 and a is greater than a space.
        ("lexicographic", [(b"c", b"d"), (b"a", b"b"), (b" ", b"cd"), (b" ", b"ab")]),
        # HF: (a,b) first, a ranking before c and a space (a byte without a printable character of its
        # own, shown as "Ġ") after every letter; then (c,d) 3 ties with (" ",c) 3, and c ranks first.
        ("hf", [(b"a", b"b"), (b"c", b"d"), (b" ", b"cd"), (b" ", b"ab")]),
    ],
)
def test_hand_checked_merges_with_ties(tmp_path, kind, tie_break, expected):
    with trainer(kind):
        tokenizer = train_text(tmp_path, "ab ab ab cd cd cd", 256 + 4 + 1, tie_break=tie_break)
    assert named_merges(tokenizer) == expected
    assert tokenizer.special_tokens == {"<|endoftext|>": 260}
    assert tokenizer.encode("ab cd<|endoftext|>") == [256 + expected.index((b"a", b"b")), 258, 260]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "tie_break, second",
    [
        ("lexicographic", (b"a", b"bc")),  # b"bc" > b"b": of two byte strings, the longer one its prefix is smaller
        ("hf", (b"a", b"b")),  # b, a byte, ranks before bc, the first merge: the older token wins
    ],
)
def test_a_tie_between_a_token_and_its_extension(tmp_path, kind, tie_break, second):
    # Documents abc x2, ab x2, bc x3. Merge 1: (b,c) 5 beats (a,b) 4. Then (a,bc) and (a,b) both count 2.
    text = "<|endoftext|>".join(["abc", "abc", "ab", "ab", "bc", "bc", "bc"])
    with trainer(kind):
        merges = named_merges(train_text(tmp_path, text, 256 + 2 + 1, tie_break=tie_break))
    assert merges == [(b"b", b"c"), second]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
@settings(max_examples=60, deadline=None)
@given(
    words=st.lists(
        st.sampled_from(["a", "b", "ab", "ba", "c", "é", " a", " b", " aa", "aaa", " ", "ÿ", "\x7f"]), max_size=40
    ),
    n_merges=st.integers(1, 30),
)
def test_incremental_merges_equal_from_scratch_recount(kind, tie_break, words, n_merges):
    counts = Counter(split.PRETOKEN.findall("".join(words)))
    with trainer(kind):
        vocab, merges = learn_merges(counts, n_merges, tie_break=tie_break, quiet=True)
    assert [(vocab[a], vocab[b]) for a, b in merges] == reference_merges(counts, n_merges, tie_break)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("tie_break", ["lexicographic", "hf"])
def test_real_text_merges_equal_from_scratch_recount(kind, tie_break):
    counts = Counter(split.PRETOKEN.findall(english_like(3000, seed=3)))
    with trainer(kind):
        vocab, merges = learn_merges(counts, 120, tie_break=tie_break, quiet=True)
    assert [(vocab[a], vocab[b]) for a, b in merges] == reference_merges(counts, 120, tie_break)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alphabet", ["ACGT", "ab", "a"])
def test_a_long_line_without_spaces_against_from_scratch_recount(kind, alphabet):
    # Tokens of many lengths sharing prefixes: the lexicographic key's hard case (one pre-token).
    counts = {"".join(random.Random(0).choices(alphabet, k=2_000)): 1}
    with trainer(kind):
        vocab, merges = learn_merges(counts, 60, quiet=True)
    assert [(vocab[a], vocab[b]) for a, b in merges] == reference_merges(counts, 60, "lexicographic")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "ab", "ba", "é", " a", " b", " aa", "aaa", " ", "\n", "1", "~"]), max_size=40)
)
def test_merges_equal_hf_tokenizers_trainer(tmp_path_factory, words):
    text = "".join(words)
    if not text:
        return
    tokenizer = train_text(tmp_path_factory.mktemp("c"), text, 256 + 20 + 1, tie_break="hf")
    assert named_merges(tokenizer) == hf_merges([text], 256 + 20 + 1)


@pytest.mark.parametrize("alphabet", ["ACGT", "ab", "a"])
def test_a_long_line_without_spaces_trains_as_hf_tokenizers_does(tmp_path, alphabet):
    # One pre-token of 20,000 characters (bench/tokenizer_long_lines.py times this shape up to 10 MB).
    text = "".join(random.Random(0).choices(alphabet, k=20_000))
    assert named_merges(train_text(tmp_path, text, 256 + 200 + 1, tie_break="hf")) == hf_merges([text], 256 + 200 + 1)


@pytest.mark.parametrize("kind", KINDS)
def test_real_text_merges_equal_hf_tokenizers_trainer(tmp_path, kind):
    text = english_like(20_000, seed=4)
    with trainer(kind):
        merges = named_merges(train_text(tmp_path, text, 256 + 300 + 1, tie_break="hf"))
    assert merges == hf_merges([text], 256 + 300 + 1)


def test_special_tokens_are_never_counted(tmp_path):
    tokenizer = train_text(
        tmp_path, "xy<|endoftext|>xy<|endoftext|>xy<|sep|>xy", 256 + 5 + 2, special_tokens=["<|endoftext|>", "<|sep|>"]
    )
    assert not any(set(pair) & {b"<", b"|", b">"} for pair in named_merges(tokenizer))
    assert named_merges(tokenizer) == [(b"x", b"y")]  # nothing else to merge: the vocabulary stays small
    assert tokenizer.vocab_size == 256 + 1 + 2


def test_one_and_two_workers_compiled_or_not_give_identical_files(tmp_path, monkeypatch):
    monkeypatch.setattr("gptkit.tokenizer.train.BATCH_CHARS", 10_000)  # many batches, spread over workers
    docs = [english_like(400, seed=s) for s in range(60)]
    path = tmp_path / "corpus.txt"
    path.write_text("<|endoftext|>".join(docs))
    for kind in KINDS:
        for workers in (1, 2):
            with trainer(kind):
                train_bpe(Corpus([path]), 700, workers=workers, quiet=True).save(tmp_path / f"{kind}{workers}.json")
    files = [(tmp_path / f"{kind}{workers}.json").read_bytes() for kind in KINDS for workers in (1, 2)]
    assert files[1:] == files[:1] * 3


def test_documents_cut_into_pieces_train_the_same(tmp_path, monkeypatch):
    text = english_like(5000, seed=5)
    whole = train_text(tmp_path, text, 500)
    original = Corpus.pieces
    monkeypatch.setattr(Corpus, "pieces", lambda self: original(self, piece_chars=97))
    assert train_text(tmp_path, text, 500).merges == whole.merges


def test_max_bytes_takes_whole_leading_documents(tmp_path):
    docs = [english_like(300, seed=1), "zq " * 400]
    path = tmp_path / "corpus.txt"
    path.write_text("<|endoftext|>".join(docs))
    first_only = train_bpe(Corpus([path]), 300, max_bytes=10, quiet=True)
    everything = train_bpe(Corpus([path]), 300, quiet=True)
    assert (b"z", b"q") in named_merges(everything)
    assert not any(b"z" in a + b for a, b in named_merges(first_only))


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"vocab_size": 256}, "vocab_size 256: must be at least 256 + 1"),  # the library names its setting,
        ({"vocab_size": 300, "special_tokens": ["<a>", "<a>"]}, "special_token '<a>': given twice"),  # the CLI its flag
        ({"vocab_size": 300, "special_tokens": [""]}, "special_token '': a special token cannot be empty"),
        ({"vocab_size": 300, "tie_break": "HF"}, "tie_break 'HF': expected one of lexicographic, hf"),
    ],
)
def test_bad_settings(tmp_path, kwargs, message):
    (tmp_path / "c.txt").write_text("some text")
    with pytest.raises(InputError, match=re.escape(message)):
        train_bpe(Corpus([tmp_path / "c.txt"]), **kwargs)


def test_empty_corpus(tmp_path):
    (tmp_path / "c.txt").write_text("<|endoftext|><|endoftext|>")
    with pytest.raises(InputError, match="no text to train on"):
        train_bpe(Corpus([tmp_path / "c.txt"]), 300)


def test_the_compiled_parts_are_built():
    # pip builds them wherever a C compiler and Python's headers are (setup.py); a failed build is quiet
    # (the Python fallback then runs), so this is where one shows.
    assert train._pretokens is not None and train._merge_loop is not None


# What makes GPT-2's pattern subtle: kinds and runs of whitespace (U+001C..U+001F are whitespace to Python,
# not to the pattern), contractions and apostrophes that are none, letters, digits and numbers of other
# scripts, marks, symbols, emoji, a lone surrogate.
PATTERN_PIECES = [
    " ",
    "  ",
    "\n",
    "\t",
    "\r\n",
    "\x0b",
    "\x0c",
    "\xa0",
    "\u2028",
    "\u3000",
    "\x1c",
    "\x1f",
    "\x85",
    "a",
    "Zz",
    "é",
    "e\u0301",
    "東",
    "ß",
    "'",
    "'s",
    "'d",
    "'m",
    "'t",
    "'ll",
    "'ve",
    "'re",
    "'S",
    "'l",
    "'v",
    "7",
    "42",
    "½",
    "٣",
    "Ⅻ",
    ".",
    "!?",
    "-",
    "_",
    "\U0001f600",
    "\ud800",
    EOT,
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from(PATTERN_PIECES), max_size=30).map("".join), max_size=4))
def test_compiled_counting_counts_the_patterns_pretokens(texts):
    special_re = re.compile(re.escape(EOT))
    expected = Counter(p for text in texts for part in special_re.split(text) for p in split.PRETOKEN.findall(part))
    for kind in KINDS:
        with trainer(kind):
            assert train._count_batch(texts, special_re) == expected


def test_compiled_counting_classes_every_code_point_as_the_pattern_does():
    text = " ".join(map(chr, range(0x110000)))  # each character alone and after a space
    assert train._count_batch([text], None) == Counter(split.PRETOKEN.findall(text))
