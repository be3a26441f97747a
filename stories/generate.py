"""Simple English stories from word lists and a handful of plot templates.

A stand-in for TinyStories that needs no download: a hero (a child, an animal, a princess,
two friends), a place, a problem, an attempt, a resolution and a moral, with dialogue in
quotes. The structure repeats (so a small model can learn it) and the words vary (a few
thousand of them). Every choice comes from one `random.Random`, so a seed gives the same
text on any machine (and no global state, hashing or float formatting is involved).

    story(rng) -> str                                  one story
    conversation(rng) -> [message, ...]                a question about a story's opening, answered in one format
    conversations(n, seed=0) -> [[message, ...], ...]
    write_conversations(path, size_bytes, seed=0) -> (n_chats, n_bytes)   as .jsonl, for pretokenize --chat
    write_corpus(path, size_bytes, seed=0) -> (n_stories, n_bytes)
"""

import json
import random
import re

from gptkit.shared.errors import InputError
from gptkit.shared.files import StrPath, atomic_write
from gptkit.shared.text import EOT

from .plots import PLOTS
from .teller import Teller, happy_end, make_hero, opening

SEPARATOR = EOT
WORD = re.compile(r"[a-z]+(?:['-][a-z]+)*")  # what `distinct_words` counts, on lowercased text


def story(rng: random.Random) -> str:
    """One story (about 100 to 300 words), every choice drawn from `rng`."""
    return _told(rng)[0]


def _told(rng):
    """(a story, its hero)."""
    t = Teller(rng)
    hero = t.hero = make_hero(t)
    opening(t, hero)
    t.pick(PLOTS)(t, hero)
    if t.chance(0.4):
        happy_end(t, hero)
    return t.text(), hero


WHO, WHERE = "Who is the story about?", "Where {does} {name} live?"


def conversation(rng: random.Random) -> list[dict]:
    """A chat of OpenAI's shape ({"role", "content"} messages): a story's opening (its first
    paragraph, which introduces its hero: short, so that a tiny model fine-tunes on it in
    seconds) and a question about it from the user, and the assistant's answer in one fixed format,
    taken from the story's own choices (chat fine-tuning's data, docs/train.md):

        Who is the story about?   -> The story is about Elsie, a clumsy princess.
        Where does Elsie live?    -> Elsie lives in a busy town near the river.

    The second is asked only of an opening that says where its hero lives."""
    text, hero = _told(rng)
    text = text.split("\n\n")[0]
    if hero.home in text and rng.random() < 0.5:
        group = hero.gender == "p"  # two of them
        question = WHERE.format(does="do" if group else "does", name=hero.name)
        answer = f"{hero.name} {'live' if group else 'lives'} {hero.home}."
    else:
        question, answer = WHO, f"The story is about {hero.name}, {hero.desc}."
    return [{"role": "user", "content": f"{text}\n\n{question}"}, {"role": "assistant", "content": answer}]


def conversations(n: int, seed: int = 0) -> list[list[dict]]:
    """`n` chats (conversation), the same for a seed."""
    rng = random.Random(seed)
    return [conversation(rng) for _ in range(n)]


def write_conversations(path: StrPath, size_bytes: int, seed: int = 0) -> tuple[int, int]:
    """Write chats (conversation) as the lines of a .jsonl file, {"messages": [...]} each (what
    `pretokenize --chat` reads), until the file reaches `size_bytes`; return (chats, bytes
    written). Written atomically; the same seed and size give the same bytes."""
    if size_bytes < 1:
        raise InputError(f"size {size_bytes}: expected at least 1 byte")
    rng = random.Random(seed)
    n_chats = n_bytes = 0
    with atomic_write(path, encoding="utf-8", newline="\n") as f:
        while n_bytes < size_bytes:
            line = json.dumps({"messages": conversation(rng)}) + "\n"  # ASCII: 1 byte a character
            f.write(line)
            n_chats, n_bytes = n_chats + 1, n_bytes + len(line)
    return n_chats, n_bytes


def write_corpus(path: StrPath, size_bytes: int, seed: int = 0, words: set[str] | None = None) -> tuple[int, int]:
    """Write stories separated by SEPARATOR (none after the last) until the file reaches
    `size_bytes`, and return (stories, bytes written).

    The story that reaches `size_bytes` is the last one, so the file is at least
    `size_bytes` long and less than one story plus a separator longer. The text is ASCII.
    Written atomically (a temporary file renamed over `path`); `words`, a set, gets the
    corpus's distinct words (lowercased, as `WORD` finds them).
    """
    if size_bytes < 1:
        raise InputError(f"size {size_bytes}: expected at least 1 byte")
    rng = random.Random(seed)
    n_stories = n_bytes = 0
    with atomic_write(path, encoding="utf-8", newline="\n") as f:  # "\n" on Windows too
        while n_bytes < size_bytes:
            batch: list[str] = []  # up to 1000 stories per write
            while n_bytes < size_bytes and len(batch) < 1000:
                batch.append(story(rng))
                n_bytes += len(batch[-1]) + (len(SEPARATOR) if n_stories else 0)  # ASCII: 1 byte a character
                n_stories += 1
            f.write((SEPARATOR if n_stories > len(batch) else "") + SEPARATOR.join(batch))
            if words is not None:
                words |= distinct_words(" ".join(batch))
    return n_stories, n_bytes


def distinct_words(text: str) -> set[str]:
    return set(WORD.findall(text.lower()))
