"""`--vocab-size auto` (tokenizer/vocab.py): 512, 1,024 or 4,096 tokens for the corpus, and why."""

import random
import string

from click.testing import CliRunner

from gptkit.shared.corpus import Corpus
from gptkit.tokenizer import train_bpe
from gptkit.tokenizer.cli import cli
from gptkit.tokenizer.vocab import (
    LARGE,
    MIN_BYTES_PER_TOKEN,
    SMALL,
    TINY,
    auto_tokenizer,
    first_tokens,
    repeated_span_share,
)
from tests.conftest import english_like


def test_the_repeated_span_share_counts_positions_that_repeat_within_a_kib():
    rng = random.Random(0)
    noise = bytes(rng.randrange(256) for _ in range(20_000))
    assert repeated_span_share(noise) == 0
    assert repeated_span_share(b"abcdefgh" * 2_000) > 0.99  # every span but the first few repeats 8 bytes back
    far = noise[:5_000] * 2  # repeats 5,000 bytes back: beyond the KiB
    assert repeated_span_share(far) == 0
    near = noise[:500] * 20  # repeats 500 bytes back
    assert 0.9 < repeated_span_share(near) < 1


def code_like(n_functions):
    """Functions of names drawn from 3,000 made-up words, the first 30 often: code repeats itself,
    and its names are longer tokens in a larger vocabulary."""
    rng = random.Random(1)
    words = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randrange(3, 9))) for _ in range(3_000)]

    def name():
        return rng.choice(words[: rng.choice([30, 300, 3_000])])

    return "\n".join(
        f"def {name()}_{name()}(self, {name()}):\n    return self.{name()} + {name()}\n" for _ in range(n_functions)
    )


def auto(path):
    """auto_tokenizer of one file, trained for real: (the tokenizer, its size, why)."""
    corpus = Corpus([path])
    return auto_tokenizer(corpus, lambda size: train_bpe(corpus, size, ["<|endoftext|>"], quiet=True))


def sized(path):
    """auto_tokenizer's (size, why) where it trains no tokenizer (by the corpus's size alone)."""
    trained, size, why = auto_tokenizer(Corpus([path]), lambda size: size)
    assert trained == size
    return size, why


def test_text_that_repeats_itself_gets_the_larger_vocabulary(tmp_path):
    (tmp_path / "code.py").write_text(code_like(15_000))  # about 900 KB: text enough for 4,096 tokens
    (tmp_path / "prose.txt").write_text(english_like(160_000, seed=2))
    code, size, why = auto(tmp_path / "code.py")
    assert code.vocab_size == size == LARGE and "text that repeats itself" in why
    prose, size, why = auto(tmp_path / "prose.txt")
    assert size == SMALL and why.startswith("1,024, not 4,096: ") and "rarely repeats itself" in why


def test_a_large_corpus_gets_the_larger_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setattr("gptkit.tokenizer.vocab.LARGE_CORPUS_BYTES", 1_000)
    (tmp_path / "prose.txt").write_text(english_like(2_000, seed=2))
    size, why = sized(tmp_path / "prose.txt")
    assert size == LARGE and "at least" in why


def test_a_small_corpus_gets_no_more_tokens_than_it_has_text_for(tmp_path):
    """At least MIN_BYTES_PER_TOKEN bytes of text a token: 100 KB of code takes 512 tokens, not the 4,096
    its repeats ask for (4.716 held-out bits per byte against 2.639 with 512), and says why."""
    (tmp_path / "code.py").write_text(code_like(1_700))
    size, why = sized(tmp_path / "code.py")
    assert size == TINY and why.startswith("512, not 4,096: the corpus has 108,364 bytes") and "too little text" in why
    total = Corpus([tmp_path / "code.py"]).total_bytes
    assert TINY * MIN_BYTES_PER_TOKEN <= total < SMALL * MIN_BYTES_PER_TOKEN
    (tmp_path / "prose.txt").write_text(english_like(40_000, seed=2))  # 206 KB: 1,024 fits, 4,096 does not
    assert sized(tmp_path / "prose.txt") == (
        SMALL,
        "1,024, not 4,096: the corpus has 206,010 bytes, too little text to "
        "learn 4,096 tokens from (at least 192 bytes a token)",
    )


def test_the_command_line_says_what_it_chose_and_why(tmp_path):
    (tmp_path / "code.py").write_text(code_like(15_000))
    res = CliRunner().invoke(
        cli,
        [
            "train",
            "--input",
            str(tmp_path / "code.py"),
            "--vocab-size",
            "auto",
            "--out",
            str(tmp_path / "tok.json"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("vocab size 4,096: ") and "of the positions begin a 16-byte span" in res.stderr
    assert "times as long as 1,024's" in res.stderr


def numbers_table(rows):
    """Tab-separated numbers, a header line every 5 rows: it repeats itself (the header, the
    small numbers), but no token of a larger vocabulary spans much more of it."""
    rng = random.Random(3)
    header = "\t".join(f"'col{i}'" for i in range(10)) + "\n"
    return "".join(
        (header if i % 5 == 0 else "")
        + "\t".join(str(rng.choice([rng.randrange(10), rng.randrange(1000)])) for _ in range(10))
        + "\n"
        for i in range(rows)
    )


def test_the_larger_vocabulary_is_kept_only_where_it_makes_longer_tokens(tmp_path):
    """A table of numbers repeats itself as code does, but 4,096 tokens hardly shorten it: 1,024, and why."""
    (tmp_path / "table.tsv").write_text(numbers_table(30_000))
    assert repeated_span_share((tmp_path / "table.tsv").read_bytes()[: 1 << 20]) >= 0.05  # its repeats ask for 4,096
    res = CliRunner().invoke(
        cli,
        [
            "train",
            "--input",
            str(tmp_path / "table.tsv"),
            "--vocab-size",
            "auto",
            "--out",
            str(tmp_path / "tok.json"),
            "-q",
        ],
    )
    assert res.exit_code == 0, res.output
    assert (
        res.stderr.startswith("vocab size 1,024, not 4,096: 4,096 tokens are 1.")
        and "of the positions begin" in res.stderr
    )
    assert f"wrote {tmp_path / 'tok.json'}: 1,024 tokens" in res.output


def test_the_cut_tokenizer_is_the_one_training_at_its_size_makes(tmp_path):
    (tmp_path / "code.py").write_text(code_like(4_000))
    corpus = Corpus([tmp_path / "code.py"])
    cut = first_tokens(train_bpe(corpus, 1_500, ["<|endoftext|>", "<|end|>"], quiet=True), 700)
    trained = train_bpe(corpus, 700, ["<|endoftext|>", "<|end|>"], quiet=True)
    assert (cut.vocab, cut.merges, cut.special_tokens) == (trained.vocab, trained.merges, trained.special_tokens)


def sentences_of(characters, n_sentences, seed):
    """Sentences of 4 to 20 characters of a Zipf-like draw from `characters`, each ended by a full
    stop, with no spaces, as Chinese is written."""
    rng = random.Random(seed)
    weights = [1 / (rank + 10) for rank in range(len(characters))]
    return "".join(
        "".join(rng.choices(characters, weights, k=rng.randrange(4, 21))) + "\u3002" for _ in range(n_sentences)
    )


def test_a_script_with_more_characters_than_the_smaller_vocabulary_holds_gets_the_larger(tmp_path, monkeypatch):
    """Text of 3,000 characters of three bytes each, which rarely repeats itself: 1,024 tokens cannot
    hold its characters whole (fewer than one character a token), so 4,096, and why. The same
    sentences in 60 characters of one byte each keep 1,024. (150 KB each, taken as text enough.)"""
    monkeypatch.setattr("gptkit.tokenizer.vocab.MIN_BYTES_PER_TOKEN", 32)
    cjk = [chr(0x4E00 + i) for i in range(3_000)]
    (tmp_path / "zh.txt").write_text(sentences_of(cjk, 4_000, seed=4))
    tokenizer, size, why = auto(tmp_path / "zh.txt")
    assert size == tokenizer.vocab_size == LARGE
    assert (
        why.startswith("4,096: 1,024 tokens are shorter than the text's characters (0.")
        and "distinct characters" in why
    )
    assert repeated_span_share((tmp_path / "zh.txt").read_bytes()) < 0.05
    latin = [chr(c) for c in range(0x21, 0x5D)]
    (tmp_path / "latin.txt").write_text(sentences_of(latin, 12_000, seed=4))
    assert auto(tmp_path / "latin.txt")[1] == SMALL


def test_a_corpus_out_of_pairs_keeps_the_tokenizer_it_has(tmp_path, monkeypatch):
    """Training stops where no pair is left to merge (286 tokens of a run of one letter): cutting
    it to 1,024 keeps it whole, and the command says the corpus had too few pairs."""
    monkeypatch.setattr("gptkit.tokenizer.vocab.MIN_BYTES_PER_TOKEN", 1)
    (tmp_path / "a.txt").write_text("a" * 5_000)
    tokenizer, size, why = auto(tmp_path / "a.txt")
    assert first_tokens(tokenizer, SMALL) is tokenizer and tokenizer.vocab_size < SMALL
    assert size == SMALL and why.startswith("1,024, not 4,096: 4,096 tokens are 1.00 times as long")
