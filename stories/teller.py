"""The storyteller of stories/generate.py: grammar (articles, plurals, verb forms), the
characters, the `Teller` that draws every choice from one `random.Random` and writes the
sentences, and how a story begins and ends. The plots are in stories/plots.py."""

import random
import re
from collections.abc import Sequence
from typing import TypeVar

from .doing import ACTIVITIES, ADVERBS, DRINKS, EYES, MORALS, SMILES, VERB_FORMS
from .words import (
    ANIMAL_SOUNDS,
    ANIMALS,
    BAD_FEELINGS,
    BOY_NAMES,
    COLORS,
    FAMILY,
    FANTASY_KINDS,
    FLOWERS,
    FRUITS,
    GIRL_NAMES,
    GOOD_FEELINGS,
    GROUPS,
    HERO_ANIMALS,
    HOMES,
    INSTRUMENTS,
    IRREGULAR_PLURALS,
    LOOKS,
    OUTDOOR_PLACES,
    PET_NAMES,
    SEASONS,
    SIZES,
    SKY_SIGHTS,
    SPOTS,
    TIMES,
    TOWN_LOOKS,
    TOWNS,
    TRAITS,
    TREASURES,
    TREATS,
    TREES,
    WEATHER,
)

_T = TypeVar("_T")

PAST: dict[str, str] = {}
ING: dict[str, str] = {}
for _forms in VERB_FORMS:
    _base, PAST[_base], ING[_base] = _forms.split()
SOUNDS = {animal: (word, verb) for animal, word, verb in ANIMAL_SOUNDS}


# -- grammar -------------------------------------------------------------------------------------


def cap(s: str) -> str:
    """Upper-case the first letter (the one after an opening quote)."""
    if s[0] == '"':
        return '"' + s[1].upper() + s[2:]
    return s[0].upper() + s[1:]


def a(phrase: str) -> str:
    """`phrase` with "a" or "an" before it, by how its first word sounds."""
    if phrase.startswith(("unicorn", "ukulele", "uniform", "useful", "usual")):
        return "a " + phrase
    return ("an " if phrase[0] in "aeiou" else "a ") + phrase


def plural(noun: str) -> str:
    """'fox' -> 'foxes', 'bunny' -> 'bunnies', 'teddy bear' -> 'teddy bears', 'mouse' -> 'mice'."""
    head, _, last = noun.rpartition(" ")
    p = IRREGULAR_PLURALS.get(last)
    if p is None:
        if last.endswith(("s", "x", "z", "ch", "sh")):
            p = last + "es"
        elif last[-1] == "y" and last[-2] not in "aeiou":
            p = last[:-1] + "ies"
        else:
            p = last + "s"
    return f"{head} {p}" if head else p


def join(words: Sequence[str]) -> str:
    """('a', 'b', 'c') -> 'a, b and c'."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


PRONOUNS = {  # gender -> he, him, his, himself, was
    "f": ("she", "her", "her", "herself", "was"),
    "m": ("he", "him", "his", "himself", "was"),
    "p": ("they", "them", "their", "themselves", "were"),
    "n": ("it", "it", "its", "itself", "was"),
}


class Character:
    """Someone in a story, and the words that refer to them (he/she/they/it, was/were, I/we)."""

    desc: str  # make_hero's: "a little girl", "two best friends"
    home: str  # make_hero's: "in a small house"

    def __init__(self, name: str, kind: str, gender: str, intro: str | None = None, call: str | None = None) -> None:
        self.name = name  # in the narration: "Lily", "Tom and Mia", "the owl", "her mom"
        self.kind = kind  # what they are: "girl", "owl", "best friends"
        self.gender = gender
        self.intro = intro or name  # the first mention: "a little owl named Pip"
        self.call = call or name  # how others speak to them: "Mom", "Mrs. Owl"
        self.he, self.him, self.his, self.himself, self.was = PRONOUNS[gender]
        self.He, self.His = cap(self.he), cap(self.his)
        group = gender == "p"
        self.I, self.i, self.me, self.my, self.myself, self.am = (
            ("We", "we", "us", "our", "ourselves", "are") if group else ("I", "I", "me", "my", "myself", "am")
        )
        self.speaker = name.split(" and ")[0] if group else name  # who talks for a group


# -- the storyteller -----------------------------------------------------------------------------


class Teller:
    """One story being told: paragraphs of sentences, and the rng that makes every choice."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.paragraphs: list[list[str]] = [[]]
        self.hero: Character | None = None  # the only one a line of dialogue may name by pronoun ("she said")

    def pick(self, items: Sequence[_T]) -> _T:
        return self.rng.choice(items)

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def add(self, *sentences: str) -> None:
        self.paragraphs[-1].extend(sentences)

    def paragraph(self, *sentences: str) -> None:
        self.paragraphs.append(list(sentences))

    def say(self, who: Character, line: str, verb: str | None = None) -> None:
        """Add '"Line," said Who.' (or another order); `line` ends in . ! or ?."""
        end = line[-1]
        plain = verb is None
        if plain:
            verb = self.pick(ASK_VERBS if end == "?" else SHOUT_VERBS if end == "!" else SAY_VERBS)
        inner = line[:-1] + "," if end == "." else line
        r = self.rng.random()
        if r < 0.2:
            self.add(f'{who.speaker} {verb}, "{line}"')
        elif r < 0.55:
            self.add(f'"{inner}" {verb} {who.speaker}.')
        elif r < 0.65 and plain and end != "!":
            self.add(f'"{inner}" {verb} {who.speaker} {self.pick(ADVERBS)}.')
        elif r < 0.85 or who is not self.hero or who.gender == "p":  # a group: "said Tom", not "they said"
            self.add(f'"{inner}" {who.speaker} {verb}.')
        else:  # "she said", never "said she"
            self.add(f'"{inner}" {who.he} {verb}.')

    def text(self) -> str:
        text = "\n\n".join(" ".join(cap(s) for s in p) for p in self.paragraphs if p)
        return SENTENCE_START.sub(lambda m: m.group(0).upper(), text)  # "... knee. the owl" -> "The owl"

    # words that fill slots

    def fill(self, template: str, who: Character) -> str:
        """Fill the {slots} of a word-list entry; {his}/{himself} refer to `who`."""
        if "{" not in template:
            return template
        return SLOT.sub(lambda m: FILLERS[m.group(1)](self, who), template)

    def activity(self, who: Character, form: str = "base", avoid: str | None = None) -> tuple[str, str]:
        """Something `who` likes doing, as 'play in the sand' / 'played ...' / 'playing ...'."""
        phrase = self.pick(ACTIVITIES)
        while phrase == avoid:
            phrase = self.pick(ACTIVITIES)
        verb, _, rest = phrase.partition(" ")
        verb = verb if form == "base" else PAST[verb] if form == "past" else ING[verb]
        return self.fill(f"{verb} {rest}", who), phrase

    def thing(self, with_color: float = 0.6) -> tuple[str, str]:
        """'shiny red kite' (no article)."""
        name = self.pick(TREASURES)
        look = self.pick(LOOKS)
        return f"{look} {self.pick(COLORS)} {name}" if self.chance(with_color) else f"{look} {name}", name

    def when(self, weather: bool = True) -> str:
        """'One sunny morning', 'On a frosty winter day', 'One day' ..."""
        r = self.rng.random()
        if not weather:
            r = 0.6 + 0.4 * r
        if r < 0.35:
            return f"One {self.pick(WEATHER)} {self.pick(TIMES)}"
        if r < 0.6:
            season = self.pick(SEASONS)
            return f"On {a(self.pick(SEASON_WEATHER[season]))} {season} {self.pick(TIMES)}"
        if r < 0.7:
            return f"Early one {self.pick(('morning', 'spring morning', 'summer morning', 'autumn morning', 'winter morning'))}"
        if r < 0.85:
            return self.pick(("One day", "One day", "The next day", "Later that week", "One weekend"))
        return f"One {self.pick(SEASONS)} {self.pick(TIMES)}"

    def place(self) -> tuple[str, str]:
        """('park', 'in the park')"""
        name, prep = self.pick(OUTDOOR_PLACES)
        return name, f"{prep} the {name}"

    def feeling(self, good: bool) -> str:
        return self.pick(GOOD_FEELINGS if good else BAD_FEELINGS)

    def scenery(self) -> str:
        """A sentence about what the place is like."""
        r = self.rng.random()
        if r < 0.35:
            first, second = self.rng.sample(SKY_SIGHTS, 2)
            return f"{cap(first)} and {second}."
        if r < 0.6:
            f1, f2 = plural(self.pick(FLOWERS)), plural(self.pick(FLOWERS))
            return f"{cap(f1)} and {f2} grew all around." if f1 != f2 else f"{cap(f1)} grew all around."
        if r < 0.8:
            return f"Tall {self.pick(TREES)} trees swayed in the {self.pick(('wind', 'breeze', 'soft wind'))}."
        animal = self.pick(ANIMALS)
        return f"{cap(a(self.pick(SIZES) + ' ' + animal))} was {self.pick(ANIMAL_DOINGS)} {self.pick(SPOTS)}."


KID_SIZES = ("little", "little", "small", "young", "tall", "tiny")
SEASON_WEATHER = {
    "spring": ("warm", "sunny", "rainy", "breezy", "misty", "bright", "fresh", "green"),
    "summer": ("hot", "sunny", "warm", "bright", "lazy", "golden", "long"),
    "autumn": ("windy", "cool", "chilly", "foggy", "rainy", "gray", "crisp"),
    "winter": ("cold", "snowy", "frosty", "icy", "chilly", "gray", "dark"),
}
ANIMAL_GIFTS = (
    "a shiny stone",
    "a pretty feather",
    "a red berry",
    "a tiny flower",
    "a smooth shell",
    "a pine cone",
    "a golden leaf",
    "an acorn",
    "a sweet apple",
    "a blue egg shell",
    "a bright pebble",
    "a four-leaf clover",
)
SAY_VERBS = ("said", "said", "said", "said", "replied", "whispered", "answered", "explained", "called")
ASK_VERBS = ("asked", "asked", "asked", "asked", "wondered", "called")
SHOUT_VERBS = ("said", "shouted", "cried", "yelled", "called", "exclaimed", "laughed", "cheered")
ANIMAL_DOINGS = (
    "sleeping",
    "nibbling on a leaf",
    "looking for food",
    "resting",
    "hiding",
    "playing",
    "sitting quietly",
    "sniffing the air",
    "taking a nap",
    "munching on some grass",
)
SLOT = re.compile(r"\{(\w+)\}")
SENTENCE_START = re.compile(r"(?<=[.!?] )[a-z]")
FILLERS = {
    "animals": lambda t, who: plural(t.pick(ANIMALS)),
    "fruits": lambda t, who: plural(t.pick(FRUITS)),
    "flowers": lambda t, who: plural(t.pick(FLOWERS)),
    "treats": lambda t, who: plural(t.pick(TREATS)),
    "color": lambda t, who: t.pick(COLORS),
    "instrument": lambda t, who: t.pick(INSTRUMENTS),
    "his": lambda t, who: who.his,
    "himself": lambda t, who: who.himself,
}


# -- characters ----------------------------------------------------------------------------------


def name_for(t: Teller, gender: str, animal: bool = False) -> str:
    if animal and t.chance(0.5):
        return t.pick(PET_NAMES)
    return t.pick(GIRL_NAMES if gender == "f" else BOY_NAMES)


def make_hero(t: Teller) -> Character:
    """The one the story is about, with the phrase that introduces them and where they live."""
    r = t.rng.random()
    gender = t.pick("fm")
    if r < 0.45:
        kind, sort = ("girl" if gender == "f" else "boy"), "person"
    elif r < 0.78:
        kind, sort = t.pick(HERO_ANIMALS), "animal"
    elif r < 0.88:
        kind, either = t.pick(FANTASY_KINDS)
        gender, sort = either or gender, "fantasy"
    else:  # two of them: they
        animal = t.chance(0.35)
        first, second = name_for(t, t.pick("fm"), animal), name_for(t, t.pick("fm"), animal)
        while second == first:
            second = name_for(t, t.pick("fm"), animal)
        name = f"{first} and {second}"
        kind = plural(t.pick(HERO_ANIMALS)) if animal else t.pick(GROUPS)
        desc = f"two {t.pick(SIZES) + ' ' if animal or t.chance(0.3) else ''}{kind}"
        hero = Character(name, kind, "p", intro=f"{desc} named {name}")
        hero.desc, hero.home = desc, t.pick(HOMES["animal" if animal else "person"])
        return hero
    name = name_for(t, gender, sort == "animal")
    desc = a(f"{t.pick((SIZES if sort == 'animal' else KID_SIZES) if t.chance(0.6) else TRAITS)} {kind}")
    hero = Character(name, kind, gender, intro=f"{desc} named {name}")
    hero.desc, hero.home = desc, t.pick(HOMES[sort])
    return hero


def make_friend(t: Teller, hero: Character, named: float = 0.6) -> Character:
    """Someone the hero meets: another child, or an animal with or without a name."""
    gender = t.pick("fm")
    if hero.kind in ("girl", "boy") and t.chance(0.4):
        name = name_for(t, gender)
        while name in hero.name:
            name = name_for(t, gender)
        return Character(name, "girl" if gender == "f" else "boy", gender, intro=f"{hero.his} friend {name}")
    animal = t.pick(ANIMALS)
    look = t.pick(SIZES + TRAITS)
    if t.chance(named):
        name = name_for(t, gender, animal=True)
        while name in hero.name:
            name = name_for(t, gender, animal=True)
        return Character(name, animal, gender, intro=f"{a(look + ' ' + animal)} named {name}")
    title = "Mrs." if gender == "f" else "Mr."
    return Character(f"the {animal}", animal, gender, intro=a(f"{look} {animal}"), call=f"{title} {animal.title()}")


def make_family(t: Teller, hero: Character) -> Character:
    word, call, gender = t.pick(FAMILY)
    return Character(f"{hero.his} {word}", word, gender, call=call)


def greet(t: Teller, who: Character) -> str:
    """What an animal says first, if it says anything: 'Woof! '."""
    sound = SOUNDS.get(who.kind)
    return f"{sound[0]}! " if sound and t.chance(0.5) else ""


# -- how stories begin and end -------------------------------------------------------------------


def opening(t: Teller, h: Character) -> None:
    r = t.rng.random()
    there = "there were" if h.gender == "p" else "there was"
    if r < 0.3:
        t.add(f"Once upon a time, {there} {h.intro}.", f"{h.He} lived {h.home}.")
    elif r < 0.45:
        town = f"{t.pick(TOWN_LOOKS)} {t.pick(TOWNS)}"
        t.add(f"Once upon a time, in {a(town)}, there lived {h.intro}.")
    elif r < 0.6:
        t.add(f"Once {there} {h.intro} who lived {h.home}.")
    elif r < 0.75:
        t.add(f"{h.name} {h.was} {h.desc} who lived {h.home}.")
    elif r < 0.87:
        t.add(f"Long ago, {there} {h.intro}.", f"{h.He} lived {h.home}.")
    else:
        t.add(f"There once {'were' if h.gender == 'p' else 'was'} {h.intro}.")
    r = t.rng.random()
    form = "ing" if 0.55 <= r < 0.7 or r >= 0.9 else "past" if 0.4 <= r < 0.55 else "base"
    first, phrase = t.activity(h, form)
    if r < 0.25:
        second, _ = t.activity(h, avoid=phrase)
        t.add(f"{h.He} loved to {first} and {second}.")
    elif r < 0.4:
        t.add(f"{h.He} {h.was} very {t.pick(TRAITS)}, and {h.he} loved to {first}.")
    elif r < 0.55:
        t.add(f"Every {t.pick(('day', 'morning', 'afternoon', 'weekend', 'summer'))}, {h.he} {first}.")
    elif r < 0.7:
        t.add(f"{h.He} spent most of {h.his} days {first}.")
    elif r < 0.8:
        t.add(f"{h.His} favorite thing to do was to {first}.")
    elif r < 0.9:
        t.add(f"{h.His} favorite color was {t.pick(COLORS)}, and {h.he} loved to {first}.")
    else:
        t.add(f"{h.He} {h.was} the best at {first} in the whole {t.pick(TOWNS)}.")
    if t.chance(0.3):
        t.add(f"{h.He} had {t.pick(EYES)} eyes and {t.fill(t.pick(SMILES), h)}.")


def moral(t: Teller, h: Character, kind: str, parent: Character | None = None) -> None:
    lesson = t.pick(MORALS[kind])
    r = t.rng.random()
    if parent is not None and r < 0.3:
        t.add(f'"Remember," said {parent.name}, "{lesson}."')
    elif r < 0.7:
        t.add(f"{h.name} learned that {lesson}.")
    else:
        t.add(f"That day, {h.name} learned an important lesson: {lesson}.")


def snack(t: Teller, h: Character) -> None:
    food = t.pick(FRUITS + TREATS)
    t.add(
        t.pick(
            (
                f"For a snack, {h.he} ate {a(food)} and drank some {t.pick(DRINKS)}.",
                f"{h.He} stopped to eat {a(food)}.",
                f"{h.He} sat down on a log and shared {a(food)} with a {t.pick(('hungry', 'friendly', 'little'))} {t.pick(ANIMALS)}.",
            )
        )
    )


def happy_end(t: Teller, h: Character) -> None:
    t.add(
        t.pick(
            (
                f"That night, {h.he} fell asleep with a smile.",
                "It was the best day ever.",
                f"{h.He} never forgot that day.",
                f"And {h.he} lived happily ever after.",
                f"{h.name} smiled. It had been a wonderful day.",
                f"When the sun went down, {h.he} went home, tired and {t.feeling(True)}.",
            )
        )
    )
