"""`--vocab-size auto` (tokenizer/vocab.py): 512, 1,024 or 4,096 tokens for the corpus, and why."""
import random

from click.testing import CliRunner

from gptkit.shared.corpus import Corpus
from gptkit.tokenizer.cli import cli
from gptkit.tokenizer.vocab import LARGE, MIN_BYTES_PER_TOKEN, SMALL, TINY, auto_vocab_size, repeated_span_share

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
    rng = random.Random(1)
    names = ["value", "count", "items", "result", "index", "total"]
    return "\n".join(f"def compute_{i}(self, {rng.choice(names)}):\n    return self.{rng.choice(names)} + {rng.choice(names)}\n"
                     for i in range(n_functions))


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
    assert size == TINY and why.startswith("512, not 4,096: the corpus has 105,129 bytes") and "too little text" in why
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
