import os
import random
import signal
from pathlib import Path

# One thread for torch in every test, set before torch is imported: runs compared bit for bit must
# not differ by the thread count the default would measure (the order of float sums differs), and
# tests that run train and sample as a user does then see a fixed count. Tests of the measured
# count remove it (tests/unit/test_threads.py).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest

from tests.training import SIGNALS, write_model

# Reference material beside the checkout (never part of the repo): tests using it skip without it.
SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"

WORDS = (
    "the a little cat dog bird sat ran flew over under on in big small red blue happy sad "
    "and but then said asked she he they it was were is are had has saw found looked tree "
    "house river garden ball book friend mother father day night sun moon star very quite "
    "don't can't it's I'll we've they're 1 2 3 10 42 1999 3.14 café naïve über 東京 Ελλάδα"
).split()


def english_like(n_words, seed=0):
    """Deterministic sentences over a small vocabulary, with punctuation, newlines, numbers,
    contractions, runs of spaces and a little non-ASCII."""
    rng = random.Random(seed)
    out = []
    for _ in range(n_words):
        out.append(rng.choice(WORDS))
        r = rng.random()
        out.append(". " if r < 0.08 else ", " if r < 0.14 else ".\n" if r < 0.17 else "  " if r < 0.19 else " ")
    return "".join(out)


@pytest.fixture(scope="session")
def small_text():
    return english_like(20_000)


@pytest.fixture(scope="session")
def small_tokenizer(small_text, tmp_path_factory):
    """A 450-token tokenizer trained on `small_text`, saved to and loaded from tokenizer.json."""
    from gptkit.shared.corpus import Corpus
    from gptkit.tokenizer import Tokenizer, train_bpe

    corpus_path = tmp_path_factory.mktemp("corpus") / "corpus.txt"
    corpus_path.write_text("<|endoftext|>".join(small_text[i : i + 5000] for i in range(0, len(small_text), 5000)))
    path = corpus_path.parent / "tokenizer.json"
    train_bpe(Corpus([corpus_path]), 450, quiet=True).save(path)
    return Tokenizer.from_file(path), path


@pytest.fixture(scope="module")
def data(small_tokenizer, tmp_path_factory):
    """A pretokenize directory: 60 documents (54 train, 6 val) in several train shards (a module's own:
    the training tests of both tiers, eval, bad input, launch, FSDP, the GPU tier)."""
    from gptkit.pretokenize import Split, encode_corpus
    from gptkit.shared.corpus import Corpus

    tok, _ = small_tokenizer
    root = tmp_path_factory.mktemp("trainer-data")
    (root / "docs.txt").write_text("<|endoftext|>".join(english_like(200, seed=i) for i in range(60)))
    encode_corpus(
        Corpus([root / "docs.txt"]),
        tok,
        root / "data",
        split=Split(val_fraction=0.1),
        shard_tokens=4000,
        workers=1,
        quiet=True,
    )
    return root / "data"


@pytest.fixture(scope="module")
def model_json(tmp_path_factory):
    """tests/training.py's tiny MODEL as a model file."""
    return write_model(tmp_path_factory.mktemp("model") / "model.json")


@pytest.fixture(autouse=True)
def restore_signal_handlers():
    """train() installs SIGINT/SIGTERM handlers; keep pytest's own afterwards."""
    saved = {s: signal.getsignal(s) for s in SIGNALS}
    yield
    for s, handler in saved.items():
        signal.signal(s, handler)


def shared_file(name):
    path = SHARED_DATA / name
    if not path.exists():
        pytest.skip(f"{path} is absent (reference data beside the checkout)")
    return path


def assert_input_error(res, *needles):
    """Exit status 2, one `Error:` line naming what was wrong, no traceback. Only the progress of train's
    recipe may come before it: an error that follows from the recipe's choice comes after its timing."""
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output and res.stdout == ""
    lines = [line for line in res.stderr.splitlines() if not line.startswith("recipe: ")]
    assert len(lines) == 1 and lines[0].startswith("Error: ") and res.stderr.endswith(lines[0] + "\n"), res.stderr
    for needle in needles:
        assert str(needle) in lines[0]
