"""The story generator: determinism, sizes, separators, vocabulary, grammar spot checks, the CLI."""

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gptkit.shared.errors import InputError
from gptkit.stories import conversations, story, write_conversations, write_corpus
from gptkit.stories.cli import cli, parse_size
from gptkit.stories.doing import ACTIVITIES
from gptkit.stories.generate import SEPARATOR, distinct_words
from gptkit.stories.teller import ING, PAST, a, plural
from tests.conftest import assert_input_error

# Words that start with a vowel letter but take "a" (a unicorn): the only ones allowed after "a".
A_BEFORE_VOWEL = {"unicorn", "ukulele", "uniform", "useful", "usual"}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """About 1 MB of stories (seed 0) and what write_corpus returned."""
    path = tmp_path_factory.mktemp("stories") / "corpus.txt"
    words = set()
    n_stories, n_bytes = write_corpus(path, 1_000_000, seed=0, words=words)
    return path.read_bytes().decode("utf-8"), n_stories, n_bytes, words


@pytest.fixture(scope="module")
def story_list(corpus):
    return corpus[0].split(SEPARATOR)


# -- the corpus ----------------------------------------------------------------------------------


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for path, seed in zip(paths, (7, 7, 8)):
        write_corpus(path, 100_000, seed=seed)
    assert paths[0].read_bytes() == paths[1].read_bytes()
    assert paths[0].read_bytes() != paths[2].read_bytes()
    assert story(random.Random(3)) == story(random.Random(3)) != story(random.Random(4))


def test_story_uses_only_the_rng_given():
    random.seed(1)
    first = story(random.Random(0))
    random.seed(2)
    assert story(random.Random(0)) == first


def test_conversations_ask_about_their_story_and_answer_in_one_format():
    chats = conversations(200, seed=3)
    assert chats == conversations(200, seed=3) and chats != conversations(200, seed=4)
    name = r"[A-Z][a-z]+(?: and [A-Z][a-z]+)?"
    asked = set()
    for user, assistant in chats:
        assert (user["role"], assistant["role"]) == ("user", "assistant")
        text, question = user["content"].rsplit("\n\n", 1)
        who = re.fullmatch(rf"The story is about ({name}), (?:an?|two) [a-z -]+\.", assistant["content"])
        where = re.fullmatch(rf"({name}) lives? ((?:in|on|by|under) [a-z -]+)\.", assistant["content"])
        if question == "Who is the story about?":
            assert who and who[1] in text
        else:
            assert where and question == f"Where {'do' if ' and ' in where[1] else 'does'} {where[1]} live?"
            assert where[1] in text and where[2] in text
        asked.add(question.split()[0])
    assert asked == {"Who", "Where"}


@pytest.mark.parametrize("size", [1, 1000, 30_000])
def test_size_reached_by_the_last_story(tmp_path, size):
    path = tmp_path / "c.txt"
    n_stories, n_bytes = write_corpus(path, size, seed=1)
    data = path.read_bytes()
    assert n_bytes == len(data) >= size
    parts = data.split(SEPARATOR.encode())
    assert len(parts) == n_stories
    assert len(data) - len(parts[-1]) - len(SEPARATOR) < size  # without the last story it was short


def test_a_smaller_corpus_is_a_prefix_of_a_larger_one(tmp_path):
    write_corpus(tmp_path / "small.txt", 20_000, seed=2)
    write_corpus(tmp_path / "large.txt", 60_000, seed=2)
    assert (tmp_path / "large.txt").read_bytes().startswith((tmp_path / "small.txt").read_bytes())


def test_size_below_one_byte_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="at least 1 byte"):
        write_corpus(tmp_path / "c.txt", 0)
    assert not (tmp_path / "c.txt").exists()


def test_write_is_atomic(tmp_path, monkeypatch):
    import gptkit.stories.generate

    path = tmp_path / "c.txt"
    path.write_text("old")
    calls = []

    def failing(rng):
        calls.append(1)
        if len(calls) > 5:
            raise KeyboardInterrupt
        return "A story."

    monkeypatch.setattr(gptkit.stories.generate, "story", failing)
    with pytest.raises(KeyboardInterrupt):
        write_corpus(path, 1_000_000)
    assert path.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["c.txt"]


def test_stories_are_separated_and_none_is_empty(corpus, story_list):
    text, n_stories, n_bytes, _ = corpus
    assert len(story_list) == n_stories > 500 and len(text) == n_bytes
    assert text.isascii() and "\r" not in text
    for s in story_list:
        assert s.strip() == s and s, repr(s)
        assert 80 <= len(s.split()) <= 350, s  # about 100 to 300 words


def test_vocabulary_is_in_the_thousands(corpus):
    text, _, _, words = corpus
    assert words == distinct_words(text.replace(SEPARATOR, " "))
    assert 2000 <= len(words) <= 6000, len(words)


# -- grammar spot checks -------------------------------------------------------------------------


def test_a_and_an(corpus):
    text = corpus[0].lower()
    a_vowel = {w for w in re.findall(r"\ba ([aeiou][a-z]*)", text)}
    an_consonant = set(re.findall(r"\ban ([^aeiou\W][a-z]*)", text))
    assert a_vowel <= A_BEFORE_VOWEL, a_vowel - A_BEFORE_VOWEL
    assert not an_consonant, an_consonant
    assert re.search(r"\ban [aeiou]", text) and re.search(r"\ba [b-df-hj-np-tv-z]", text)


def test_a_and_plural_helpers():
    assert [a(w) for w in ("owl", "old kite", "kite", "unicorn", "umbrella")] == [
        "an owl",
        "an old kite",
        "a kite",
        "a unicorn",
        "an umbrella",
    ]
    assert [
        plural(w) for w in ("fox", "bunny", "monkey", "mouse", "teddy bear", "peach", "sheep", "gingerbread man")
    ] == ["foxes", "bunnies", "monkeys", "mice", "teddy bears", "peaches", "sheep", "gingerbread men"]


def test_every_activity_starts_with_a_verb_we_can_conjugate():
    for activity in ACTIVITIES:
        verb = activity.split()[0]
        assert verb in PAST and verb in ING, activity


def test_quotes_are_closed_within_each_paragraph(story_list):
    for s in story_list:
        for paragraph in s.split("\n\n"):
            assert paragraph.count('"') % 2 == 0, paragraph


def test_sentences_start_with_capitals_and_stories_end_with_a_stop(story_list):
    for s in story_list:
        assert re.search(r'[.!?]"?$', s), s[-80:]
        assert s[0].isupper(), s[:80]
        assert not re.search(r"[.!?] [a-z]", s), re.search(r"[.!?] [a-z].{0,40}", s).group(0)
        assert not re.search(r"\n\n\"?[a-z]", s)
        assert not re.search(r"  | [,.!?]|[{}]", s)


def test_pronouns_agree_with_their_verbs(corpus):
    text = corpus[0]
    assert not re.search(r"\b(?:[Tt]hey|[Ww]e|[Yy]ou) was\b", text)
    assert not re.search(r"\b(?:[Hh]e|[Ss]he|[Ii]t|I) were\b", text)
    assert not re.search(r"\b(?:[Hh]e|[Ss]he|[Ii]t) are\b", text)
    assert re.search(r"\bThey were\b", text) and re.search(r"\bShe was\b", text)  # both kinds of hero occur


# -- the CLI -------------------------------------------------------------------------------------


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_cli_writes_the_file_and_reports(tmp_path):
    out = tmp_path / "data" / "corpus.txt"  # the directory is created
    res = run("--out", out, "--size", "50KB", "--seed", 3)
    assert res.exit_code == 0, res.output
    m = re.fullmatch(r"wrote (.+): ([\d,]+) stories, ([\d.]+) MB, ([\d,]+) distinct words, in [\d.]+ s\n", res.stdout)
    assert m, res.stdout
    text = out.read_text()
    assert m.group(1) == str(out)
    assert int(m.group(2).replace(",", "")) == len(text.split(SEPARATOR))
    assert float(m.group(3)) == round(len(text) / 1e6, 2) and len(text) >= 50_000
    assert int(m.group(4).replace(",", "")) == len(distinct_words(text.replace(SEPARATOR, " ")))
    write_corpus(tmp_path / "same.txt", 50_000, seed=3)
    assert (tmp_path / "same.txt").read_bytes() == out.read_bytes()


def test_cli_chat_writes_conversations_as_jsonl(tmp_path):
    out = tmp_path / "chat.jsonl"
    res = run("--chat", "--out", out, "--size", "5KB", "--seed", 2)
    assert res.exit_code == 0, res.output
    lines = out.read_text().splitlines()
    assert res.stdout.startswith(f"wrote {out}: {len(lines)} chats, 0.01 MB, in ")
    assert [json.loads(line)["messages"] for line in lines] == conversations(len(lines), seed=2)
    assert out.stat().st_size >= 5000 > out.stat().st_size - len(lines[-1]) - 1  # the last line reaches the size
    assert write_conversations(tmp_path / "again.jsonl", 5000, seed=2) == (len(lines), out.stat().st_size)
    assert_input_error(run("--chat", "--size", "5KB"), "--chat", "--out")


def test_python_dash_m_stories(tmp_path):
    out = tmp_path / "c.txt"
    proc = subprocess.run(
        [sys.executable, "-m", "gptkit.stories", "--out", str(out), "--size", "3000", "--seed", "1"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}: ") and out.stat().st_size >= 3000


@pytest.mark.parametrize(
    "text, size",
    [
        ("500KB", 500_000),
        ("10MB", 10_000_000),
        ("1GB", 10**9),
        ("12345", 12345),
        ("2mb", 2_000_000),
        ("1.5MB", 1_500_000),
        ("1MiB", 2**20),
        ("64 KB", 64_000),
        ("7B", 7),
    ],
)
def test_parse_size(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("size", ["12x", "", "-5", "0", "MB", "ten", "1e6", "0.1B"])
def test_cli_bad_size_is_one_error_line(tmp_path, size):
    res = run("--out", tmp_path / "c.txt", "--size", size)
    assert_input_error(res, "--size")
    assert not (tmp_path / "c.txt").exists()


@pytest.mark.parametrize("size", ["1" + "0" * 29, "100000GB"])
def test_a_size_beyond_the_free_disk_is_refused_before_writing(tmp_path, size):
    res = run("--out", tmp_path / "new" / "c.txt", "--size", size)
    assert_input_error(res, f"--size {size}:", "GB free where --out")
    assert not (tmp_path / "new").exists()
