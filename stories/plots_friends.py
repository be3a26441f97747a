"""Plots among friends and animals: the hero loses a thing, learns to share, helps an animal, stops
in a race for a friend, or welcomes a newcomer. stories/plots.py lists every plot."""

from .doing import DIFFERENCES, GAMES, LOOK_PAST, MOVE_PAST
from .teller import (
    ANIMAL_GIFTS,
    SOUNDS,
    Character,
    Teller,
    a,
    greet,
    make_family,
    make_friend,
    moral,
    name_for,
    plural,
    snack,
)
from .words import ANIMALS, FRUITS, GROUPS, HOUSE_SPOTS, ROOMS, SIZES, SPOTS, TREATS


def lost_thing(t: Teller, h: Character) -> None:
    thing, name = t.thing()
    t.add(f"{h.He} had {a(thing)} that {h.he} loved very much.")
    t.add(
        t.pick(
            (
                f"{h.He} took it everywhere.",
                f"{h.He} never went anywhere without it.",
                f"It was {h.his} favorite thing in the whole world.",
            )
        )
    )
    outside = t.chance(0.65)
    if outside:
        place, at_place = t.place()
        t.paragraph(f"{t.when()}, {h.name} {t.pick(MOVE_PAST)} to the {place} with {h.his} {name}.", t.scenery())
        t.add(f"{h.He} played {at_place} for a long time. When {h.he} looked around, the {name} was gone!")
        spots = t.rng.sample(SPOTS, 3)
    else:
        t.paragraph(
            f"{t.when()}, {h.name} wanted to play with {h.his} {name}, but it was not where {h.he} had left it!"
        )
        spots = t.rng.sample(HOUSE_SPOTS, 3)
    t.say(h, f"Oh no! Where is {h.my} {name}?", t.pick(("cried", "shouted", "gasped")))
    t.add(
        f"{h.He} {t.pick(LOOK_PAST)} {spots[0]}, but it was not there.",
        f"{h.He} {t.pick(LOOK_PAST)} {spots[1]}, but it was not there either.",
    )
    if outside:
        t.add(f"{h.name} felt {t.feeling(False)} and sat down on the grass.")
        friend = make_friend(t, h)
        t.paragraph(f"Just then, {friend.intro} came by.")
    else:
        rooms = t.rng.sample(ROOMS, 2)
        t.add(f"{h.He} searched the {rooms[0]} and the {rooms[1]}. Nothing! {h.name} felt {t.feeling(False)}.")
        friend = make_family(t, h)
        t.paragraph(f"Just then, {friend.name} came in.")
    t.say(friend, f"{greet(t, friend)}Why are you so {t.pick(('sad', 'upset', 'quiet', 'gloomy'))}?")
    t.say(h, f"{h.I} lost {h.my} {name}. {h.I} looked everywhere, but {h.i} can't find it.")
    t.say(
        friend,
        t.pick(
            (
                "Don't worry. I will help you look!",
                "Let's look together!",
                "I am good at finding things. I will help you!",
            )
        ),
    )
    t.add(f"{h.name} and {friend.name} looked high and low.")
    t.add(f"Then {friend.name} saw something {spots[2]}.", f"It was the {name}!")
    t.say(
        h,
        f"Thank you, {friend.call}!{' You are a good friend.' if outside else ''}",
        t.pick(("cried", "said", "laughed")),
    )
    t.paragraph(
        f"{h.name} hugged the {name} tight and felt {t.pick(('happy', 'glad', 'so happy', 'cheerful', 'joyful'))} again."
    )
    if outside and t.chance(0.5):
        t.add(f"From that day on, {h.name} and {friend.name} were best friends.")
    else:
        t.add(f"After that, {h.he} always took good care of {h.his} {name}.")
    moral(t, h, "lost")


def sharing(t: Teller, h: Character) -> None:
    friend = make_friend(t, h, named=0.8)
    many = t.chance(0.5)
    if many:
        treats = plural(t.pick(TREATS + FRUITS))
        mine = f"{t.pick(('three', 'four', 'five', 'six', 'ten', 'a bag of', 'a basket of'))} {treats}"
        ask, give = f"Can I have one of your {treats}?", f"Here, you can have some {treats} too."
        together = "They sat down and ate them together."
    else:
        thing, name = t.thing()
        mine = a(thing)
        ask, give = f"Can I play with your {name}?", f"Here, you can play with {h.my} {name} too."
        together = f"They played with the {name} together all {t.pick(('afternoon', 'day', 'morning'))}."
    place, at_place = t.place()
    t.paragraph(f"{t.when()}, {h.name} had {mine}. {h.He} took {'them' if many else 'it'} to the {place}.")
    t.add(f"There {h.he} met {friend.intro}.")
    t.say(friend, ask)
    t.say(
        h,
        t.pick(
            (
                f"No! {'They are' if many else 'It is'} {'ours' if h.gender == 'p' else 'mine'}!",
                f"No, {h.i} want {'them all' if many else 'it'} for {h.me}!",
            )
        ),
        t.pick(("said", "shouted", "snapped", "yelled")),
    )
    t.add(f"{friend.name} looked {t.feeling(False)} and walked away slowly.")
    t.paragraph(
        f"{h.name} {h.was} alone now. Somehow it was not fun anymore.",
        f"{h.He} felt {t.pick(('sorry', 'bad', 'lonely', 'sad'))}.",
    )
    t.add(f"{h.He} {t.pick(MOVE_PAST)} after {friend.name}.")
    t.say(h, f"{h.I} {h.am} sorry. {give}")
    t.say(
        friend,
        t.pick(("Thank you! You are kind.", "Really? Thank you!", "Oh, thank you! Let's be friends.")),
        t.pick(("said", "cried", "cheered")),
    )
    t.add(together, f"{'They all' if h.gender == 'p' else h.name + ' and ' + friend.name} laughed and had so much fun.")
    moral(t, h, "share")


TROUBLES = (  # (the animal's trouble, how the hero helps); {it}: the animal, {he} {his}: the hero
    (
        "stuck high up in a tree",
        "{He} found a ladder and climbed up slowly. {He} held out {his} hands, and the {it} jumped into them.",
    ),
    ("caught in an old net by the river", "{He} pulled at the net, knot by knot, until the {it} was free."),
    ("stuck in the mud", "{He} found a long stick and held it out. The {it} held on, and {he} pulled it out."),
    (
        "lost and crying for its mother",
        "{He} helped it look. They looked by the trees and by the water, and at last they found its mother.",
    ),
    (
        "hurt, with a sore leg",
        "{He} carried it home, and {his} mom helped {him} wrap its leg. In a few days it was well again.",
    ),
    ("shivering in the snow", "{He} wrapped it in {his} scarf and carried it to the warm barn."),
    ("trapped in a hole", "{He} lay down on the ground, reached in with both hands and lifted it out."),
    ("very hungry, with nothing to eat", "{He} shared {his} lunch with it, one little piece at a time."),
    (
        "stuck on a rock in the middle of the stream",
        "{He} put stones in the water to make a little path, and the {it} hopped back to land.",
    ),
    ("tangled in a long piece of string", "{He} gently pulled the string away until the {it} could move again."),
)


def helping(t: Teller, h: Character) -> None:
    animal = t.pick(ANIMALS)
    trouble, help_ = t.pick(TROUBLES)
    place, at_place = t.place()
    t.paragraph(f"{t.when()}, {h.name} {t.pick(MOVE_PAST)} to the {place}.", t.scenery())
    t.add(
        f"Suddenly, {h.he} heard a {t.pick(('little', 'sad', 'soft', 'tiny'))} cry.",
        f"{h.He} looked {t.pick(SPOTS)}, and there was {a(t.pick(SIZES) + ' ' + animal)}, {trouble}!",
    )
    t.say(
        h,
        t.pick(
            (
                "Don't be scared. I will help you.",
                "Oh, you poor thing! I will help you.",
                "Hold on, little one. I am coming!",
            )
        ),
    )
    t.paragraph(help_.format(He=h.He, he=h.he, his=h.his, him=h.him, it=animal))
    sound = SOUNDS.get(animal)
    if sound:
        t.add(f'"{sound[0]}!" {sound[1]} the {animal}. It seemed to say thank you.')
    else:
        t.add(f"The {animal} looked up at {h.name} with big, {t.pick(('happy', 'shiny', 'bright', 'grateful'))} eyes.")
    t.add(f"{h.name} felt {t.feeling(True)}.")
    r = t.rng.random()
    if r < 0.5:
        t.paragraph(
            f"The next day, the {animal} came back to the {place}. It brought {t.pick(ANIMAL_GIFTS)} as a gift."
        )
        t.add(f"From then on, {h.name} and the {animal} were the best of friends.")
    else:
        t.paragraph(f"After that, {h.name} went to the {place} every day to say hello to the {animal}.")
    moral(t, h, "help")


GOALS = (
    "the big oak tree",
    "the top of the hill",
    "the end of the beach",
    "the old fence",
    "the red barn",
    "the pond",
    "the gate",
    "the bridge",
)


def race(t: Teller, h: Character) -> None:
    friend = make_friend(t, h, named=0.9)
    goal = t.pick(GOALS)
    t.paragraph(f"{t.when()}, {h.name} and {friend.intro} were playing {t.place()[1]}.")
    t.say(friend, f"Let's have a race! The first one to {goal} wins!")
    t.say(h, t.pick((f"{h.I} will win!", "You are on!", "Ready, set, go!")))
    t.add(f"They ran as fast as they could. {h.name} was in front. {h.He} really wanted to win.")
    t.paragraph(
        f"Then {h.he} heard a cry. {friend.name} had tripped over a {t.pick(('rock', 'root', 'stick', 'log'))} and hurt {friend.his} knee."
    )
    t.add(f"{h.name} looked at {goal}. It was so close! But {h.he} stopped and ran back.")
    t.say(h, "Are you okay? Let me help you up.")
    t.say(friend, t.pick(("But you could have won!", "You came back for me?")))
    t.say(h, t.pick(("Friends are more important than winning.", "Winning is not fun without you.")))
    t.paragraph(f"{h.name} helped {friend.name} up, and they walked to {goal} together, side by side.")
    t.add(f"They both felt {t.feeling(True)}.")
    if t.chance(0.4):
        snack(t, h)
    moral(t, h, "race")


def new_friend(t: Teller, h: Character) -> None:
    gender = t.pick("fm")
    children = h.kind in ("girl", "boy") or h.kind in GROUPS
    name = name_for(t, gender, animal=not children)
    while name in h.name:
        name = name_for(t, gender, animal=not children)
    if children:
        kind, where, others = (
            ("girl" if gender == "f" else "boy"),
            f"{h.his} {t.pick(('school', 'street', 'class', 'town'))}",
            "children",
        )
    else:
        kind, where, others = (
            t.pick(ANIMALS),
            f"the {t.pick(('forest', 'meadow', 'pond', 'farm', 'woods', 'valley'))}",
            "animals",
        )
    new = Character(name, kind, gender)
    t.paragraph(
        f"{t.when()}, a new {kind} came to {where}.", f"{new.His} name was {name}, and {new.he} {t.pick(DIFFERENCES)}."
    )
    t.add(
        f"The other {others} did not ask {new.him} to play. {name} sat alone {t.pick(SPOTS)}, looking {t.feeling(False)}."
    )
    t.add(f"{h.name} saw this and felt sad for {new.him}.")
    game, game2 = t.rng.sample(GAMES, 2)
    names = "Our names are" if h.gender == "p" else "My name is"
    t.paragraph(f"{h.He} {t.pick(MOVE_PAST)} over to {name}.")
    t.say(h, f"Hello! {names} {h.name}. Do you want to play {game} with {h.me}?")
    t.say(
        new,
        t.pick(("Yes, please!", "Really? I would love to!", "Oh, yes! Thank you!")),
        t.pick(("said", "cried", "whispered")),
    )
    t.add(f"They played {game}, and then {game2}. {name} was very good at {game2}!")
    t.add(
        f"Soon the other {others} came to play too, and everyone had a {t.pick(('great', 'wonderful', 'lovely', 'fun'))} time."
    )
    if h.gender == "p" or t.chance(0.3):
        t.paragraph(f"From that day on, {name} was never alone again.")
    else:
        t.paragraph(
            f"From that day on, {name} and {h.name} were {t.pick(('best friends', 'the best of friends', 'good friends'))}."
        )
    moral(t, h, "new")
