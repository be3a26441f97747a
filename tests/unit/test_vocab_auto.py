"""`--vocab-size auto` (tokenizer/vocab.py): 512, 1,024 or 4,096 tokens for the corpus, and why."""
import random
import string

from click.testing import CliRunner

from gptkit.shared.corpus import Corpus
from gptkit.tokenizer.cli import cli
from gptkit.tokenizer import train_bpe
from gptkit.tokenizer.vocab import (LARGE, MIN_BYTES_PER_TOKEN, SMALL, TINY, auto_vocab_size, first_tokens,
                                     repeated_span_share)

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

    return "\n".join(f"def {name()}_{name()}(self, {name()}):\n    return self.{name()} + {name()}\n" for _ in range(n_functions))


def test_text_that_repeats_itself_gets_the_larger_vocabulary(tmp_path):
    (tmp_path / "code.py").write_text(code_like(15_000))  # about 900 KB: text enough for 4,096 tokens
    (tmp_path / "prose.txt").write_text(english_like(40_000, seed=2))
    assert auto_vocab_size(Corpus([tmp_path / "code.py"]))[0] == LARGE
    assert auto_vocab_size(Corpus([tmp_path / "prose.txt"]))[0] == SMALL


def test_a_large_corpus_gets_the_larger_vocabulary(tmp_path, monkeypatch):
    monkeypatch.setattr("gptkit.tokenizer.vocab.LARGE_CORPUS_BYTES", 1_000)
    (tmp_path / "prose.txt").write_text(english_like(2_000, seed=2))
    size, why = auto_vocab_size(Corpus([tmp_path / "prose.txt"]))
    assert size == LARGE and "at least" in why


def test_a_small_corpus_gets_no_more_tokens_than_it_has_text_for(tmp_path):
    """At least MIN_BYTES_PER_TOKEN bytes of text a token: 100 KB of code takes 512 tokens, not the 4,096
    its repeats ask for (4.716 held-out bits per byte against 2.639 with 512), and says why."""
    (tmp_path / "code.py").write_text(code_like(1_700))
    size, why = auto_vocab_size(Corpus([tmp_path / "code.py"]))
    assert size == TINY and why.startswith("512, not 4,096: the corpus has 108,364 bytes") and "too little text" in why
    total = Corpus([tmp_path / "code.py"]).total_bytes
    assert TINY * MIN_BYTES_PER_TOKEN <= total < SMALL * MIN_BYTES_PER_TOKEN
    (tmp_path / "prose.txt").write_text(english_like(40_000, seed=2))  # 206 KB: 1,024 fits, and prose asks for no more
    assert auto_vocab_size(Corpus([tmp_path / "prose.txt"]))[0] == SMALL


def test_the_command_line_says_what_it_chose_and_why(tmp_path):
    (tmp_path / "code.py").write_text(code_like(15_000))
    res = CliRunner().invoke(cli, ["train", "--input", str(tmp_path / "code.py"), "--vocab-size", "auto",
                                   "--out", str(tmp_path / "tok.json"), "-q"])
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("vocab size 4,096: ") and "of the positions begin a 16-byte span" in res.stderr


def numbers_table(rows):
    """Tab-separated numbers, a header line every 5 rows: it repeats itself (the header, the
    small numbers), but no token of a larger vocabulary spans much more of it."""
    rng = random.Random(3)
    header = "\t".join(f"'col{i}'" for i in range(10)) + "\n"
    return "".join((header if i % 5 == 0 else "") + "\t".join(str(rng.choice([rng.randrange(10), rng.randrange(1000)]))
                                                                 for _ in range(10)) + "\n" for i in range(rows))


def test_the_larger_vocabulary_is_kept_only_where_it_makes_longer_tokens(tmp_path):
    """A table of numbers repeats itself as code does, but 4,096 tokens hardly shorten it: 1,024, and why."""
    (tmp_path / "table.tsv").write_text(numbers_table(30_000))
    assert auto_vocab_size(Corpus([tmp_path / "table.tsv"]))[0] == LARGE  # its repeats ask for it
    res = CliRunner().invoke(cli, ["train", "--input", str(tmp_path / "table.tsv"), "--vocab-size", "auto",
                                   "--out", str(tmp_path / "tok.json"), "-q"])
    assert res.exit_code == 0, res.output
    assert res.stderr.startswith("vocab size 1,024, not 4,096: 4,096 tokens are 1.") and "of the positions begin" in res.stderr
    assert f"wrote {tmp_path / 'tok.json'}: 1,024 tokens" in res.output


def test_the_cut_tokenizer_is_the_one_training_at_its_size_makes(tmp_path):
    (tmp_path / "code.py").write_text(code_like(4_000))
    corpus = Corpus([tmp_path / "code.py"])
    cut = first_tokens(train_bpe(corpus, 1_500, ["<|endoftext|>", "<|end|>"], quiet=True), 700)
    trained = train_bpe(corpus, 700, ["<|endoftext|>", "<|end|>"], quiet=True)
    assert (cut.vocab, cut.merges, cut.special_tokens) == (trained.vocab, trained.merges, trained.special_tokens)
