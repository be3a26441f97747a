"""Plots out of doors: the hero explores, grows a garden, goes on a trip, or is granted a wish.
stories/plots.py lists every plot."""

from .doing import GROWN, MOVE_PAST, WISHES
from .teller import Character, Teller, cap, join, make_family, make_friend, moral, name_for, plural, snack
from .words import ANIMALS, BOY_NAMES, COLORS, FLOWERS, GIRL_NAMES, PEOPLE, SPOTS, TOWNS, TREASURES

FINDS = (  # (what the hero finds, where it leads)
    ("a shiny little key", "It opened an old wooden box under the roots of a tree. Inside were {treasures}."),
    ("an old map", "The map showed a path to a big rock. Behind the rock was a hidden garden full of {flowers}."),
    ("a tiny door in a tree", "{He} knocked, and a family of {animals} came out to say hello."),
    ("a glowing stone", "When {he} held it up, {his} wish came true: the sky filled with {color} stars."),
    (
        "a bottle with a note inside",
        "The note said: 'Whoever finds this, please be my friend.' It was signed by {a_name}.",
    ),
    ("a secret path", "It led to a quiet pond where {animals} were playing in the water."),
    ("a nest with three blue eggs", "{He} watched from far away, and one by one the eggs hatched."),
    ("a hidden cave", "Inside, the walls were covered with old paintings of {animals}."),
    ("a set of tiny footprints", "{He} followed them all the way to a sleepy little {animal} under a bush."),
    ("a rope ladder hanging from a tree", "At the top was an old treehouse with {treasures} inside."),
)


def adventure(t: Teller, h: Character) -> None:
    place, at_place = t.place()
    find, leads = t.pick(FINDS)
    t.paragraph(f"{t.when()}, {h.name} decided to explore the {place}.")
    t.add(t.scenery(), f"{h.He} {t.pick(MOVE_PAST)} along, looking at everything.")
    if t.chance(0.4):
        snack(t, h)
    t.add(f"Then {h.he} saw something {t.pick(SPOTS)}. It was {find}!")
    t.say(h, t.pick(("Wow! What is this?", "I wonder where this goes?", "What a surprise!", "How strange!")))
    if t.chance(0.5):
        friend = make_friend(t, h)
        t.add(f"{cap(friend.intro)} came to look too.")
        t.say(friend, t.pick(("Let's find out!", "Let's follow it together!", "I have never seen that before!")))
    treasures = (
        join([plural(t.pick(TREASURES)) for _ in range(2)])
        if t.chance(0.7)
        else f"{t.pick(COLORS)} {plural(t.pick(TREASURES))}"
    )
    t.paragraph(
        leads.format(
            He=h.He,
            he=h.he,
            his=h.his,
            treasures=treasures,
            flowers=plural(t.pick(FLOWERS)),
            animals=plural(t.pick(ANIMALS)),
            animal=t.pick(ANIMALS),
            color=t.pick(COLORS),
            a_name=t.pick(GIRL_NAMES + BOY_NAMES),
        )
    )
    t.add(f"{h.name} felt {t.feeling(True)}.")
    parent = make_family(t, h)
    t.paragraph(f"When {h.he} got home, {h.he} told {parent.name} all about it.")
    t.say(parent, t.pick(("What an adventure!", "You are a real explorer!", "What a wonderful day you had!")))
    moral(t, h, "explore", parent)


def garden(t: Teller, h: Character) -> None:
    parent = make_family(t, h)
    crop, color = t.pick(GROWN)
    crops = plural(crop)
    bed = t.pick(("garden", "backyard", "vegetable patch", "flower bed", "yard"))
    t.paragraph(f"{t.when()}, {parent.name} gave {h.name} a little bag of {crop} seeds.")
    t.say(parent, "If you take good care of them, they will grow.")
    t.add(
        f"{h.name} dug a small hole in the {bed}, dropped in the seeds and covered them with soil.",
        f"Then {h.he} watered them with {h.his} {t.pick(COLORS)} watering can.",
    )
    t.paragraph(
        f"The next morning, {h.he} {t.pick(MOVE_PAST)} outside to look. Nothing!",
        f"Day after day, {h.he} watered the soil, but nothing happened.",
    )
    t.say(h, t.pick(("Why won't they grow?", "When will they grow?", f"Maybe {h.i} did something wrong.")))
    t.say(
        parent,
        t.pick(
            (
                "Good things take time. Be patient.",
                "Seeds grow slowly. Keep watering them, and wait.",
                "Under the soil, they are growing. You will see.",
            )
        ),
    )
    t.paragraph(
        f"Then one morning, {h.name} saw a tiny green sprout!",
        f"It grew taller and taller, with sun and rain and a little help from {h.name}.",
    )
    t.add(f"By the end of the summer, the {bed} was full of big {color} {crops}.")
    t.say(h, f"Look! {h.I} grew them all by {h.myself}!", t.pick(("shouted", "cheered", "cried")))
    people = t.rng.sample(PEOPLE, 2)
    t.add(
        f"{h.He} gave some to the {people[0]} and the {people[1]}.",
        f"Everyone said they were the best {crops} in the whole {t.pick(TOWNS)}.",
    )
    moral(t, h, "grow", parent)


TRIPS = {  # where -> what there is to see: (who, doing), who plural
    "zoo": (
        ("the lions", "sleeping in the sun"),
        ("the monkeys", "swinging from branch to branch"),
        ("the giraffes", "eating leaves from the tall trees"),
        ("the penguins", "diving into the cold water"),
        ("the elephants", "spraying water with their trunks"),
        ("the zebras", "running in the grass"),
        ("the bears", "eating honey"),
        ("the parrots", "squawking in the trees"),
        ("the tigers", "walking up and down"),
    ),
    "beach": (
        ("the crabs", "running sideways on the sand"),
        ("the seagulls", "flying over the waves"),
        ("the sailboats", "sailing far out at sea"),
        ("the big waves", "crashing on the rocks"),
        ("the dolphins", "jumping far out in the water"),
        ("the children", "building sandcastles"),
    ),
    "farm": (
        ("the cows", "eating grass in the field"),
        ("the pigs", "rolling in the mud"),
        ("the hens", "pecking at seeds"),
        ("the sheep", "resting under a tree"),
        ("the baby goats", "jumping on the hay"),
        ("the horses", "running in the field"),
        ("the piglets", "sleeping in a pile"),
    ),
    "circus": (
        ("the clowns", "juggling and falling over"),
        ("the acrobats", "flying through the air"),
        ("the dancing dogs", "doing tricks"),
        ("the jugglers", "throwing rings high in the air"),
        ("the seals", "balancing balls on their noses"),
        ("the ponies", "running round and round"),
    ),
    "museum": (
        ("the dinosaur bones", "standing tall in the great hall"),
        ("the old paintings", "hanging in golden frames"),
        ("the statues", "standing in a long row"),
        ("the shiny rocks", "glowing under the lights"),
        ("the model ships", "sitting in glass boxes"),
        ("the space rockets", "pointing up at the ceiling"),
    ),
    "aquarium": (
        ("the sharks", "swimming round and round"),
        ("the jellyfish", "glowing in the dark water"),
        ("the sea turtles", "gliding slowly by"),
        ("the octopuses", "hiding between the rocks"),
        ("the colorful fish", "darting in and out of the coral"),
        ("the seahorses", "holding on to the seaweed"),
    ),
}
RIDES = (("car", "in"), ("bus", "on"), ("train", "on"), ("boat", "on"), ("ferry", "on"), ("tram", "on"))


def trip(t: Teller, h: Character) -> None:
    parent = make_family(t, h)
    where = t.pick(tuple(TRIPS))
    (fav, fav_doing), (s1, d1), (s2, d2) = t.rng.sample(TRIPS[where], 3)
    ride, on = t.pick(RIDES)
    t.paragraph(
        f"{t.when(weather=False)}, {h.name} went to the {where} with {parent.name}. They went by {ride}.",
        f"{h.He} {h.was} so {t.pick(('excited', 'happy', 'thrilled', 'eager'))} that {h.he} could not sit still.",
    )
    t.say(h, f"{h.I} want to see {fav}!", t.pick(("said", "cried", "shouted")))
    t.paragraph(f"At the {where}, they saw {s1} {d1}, and {s2} {d2}.", f"But {fav} were nowhere to be seen.")
    t.add(f"{h.name} felt {t.pick(('disappointed', 'sad', 'glum', 'a little sad'))}.")
    if t.chance(0.5):
        snack(t, h)
    t.say(parent, t.pick(("Don't worry. Maybe we will see them later.", "Let's keep looking. They must be somewhere.")))
    t.paragraph(
        f"Just as they were about to go home, {parent.name} pointed and {t.pick(('smiled', 'laughed', 'called out'))}."
    )
    t.add(f"There were {fav}, {fav_doing}!")
    t.say(
        h,
        t.pick(("Wow! Look at them!", "There they are!", "I knew we would find them!")),
        t.pick(("cried", "shouted", "cheered")),
    )
    t.add(
        "It was the best part of the whole day.",
        f"On the way home, {h.he} fell asleep {on} the {ride}, dreaming of {fav}.",
    )
    moral(t, h, "trip", parent)


MAGIC = (  # (what the hero finds, how, the magic one, gender)
    ("a tiny fairy caught in a spider web", "{He} gently set her free.", "the fairy", "f"),
    ("a shiny old lamp", "{He} rubbed it, and out came a little genie in a puff of smoke.", "the genie", "m"),
    ("a golden fish in a little puddle", "{He} carried it back to the pond.", "the golden fish", "n"),
    ("a fallen star, glowing in the grass", "{He} held it up to the sky.", "the star", "n"),
    ("a talking frog with a tiny crown", "{He} bent down to say hello.", "the frog", "n"),
)
NEEDS = (  # (who, what is wrong, the wish, what happened); {his} {name}: the hero's, a friend's
    (
        "the old tree in the park",
        "was dying because there had been no rain",
        "for rain",
        "Dark clouds came, and a soft rain fell all night. In the morning, the tree had new green leaves.",
    ),
    (
        "{his} friend {name}",
        "was sick in bed",
        "that {name} would get well",
        "The next day, {name} knocked on the door, laughing and ready to play.",
    ),
    (
        "the little birds in the garden",
        "had no food because of the snow",
        "for food for the birds",
        "Suddenly, the bird feeder was full of seeds, and the birds sang a happy song.",
    ),
    (
        "{his} grandpa",
        "felt lonely in his little house",
        "that grandpa would never be lonely again",
        "That very day, a fluffy puppy came to grandpa's door, wagging its tail.",
    ),
    (
        "the children of the town",
        "had no place to play",
        "for a playground for everyone",
        "In the morning, there was a new playground in the square, with swings and a slide.",
    ),
    (
        "the fish in the river",
        "were sad because the river was full of trash",
        "for a clean river",
        "The water turned clear and blue, and the fish jumped for joy.",
    ),
)


def wish(t: Teller, h: Character) -> None:
    found, how, magic_name, gender = t.pick(MAGIC)
    magic = Character(magic_name, magic_name.split()[-1], gender)
    place, at_place = t.place()
    t.paragraph(f"{t.when()}, while {h.he} {h.was} playing {at_place}, {h.name} found {found}.", how.format(He=h.He))
    t.say(
        magic,
        t.pick(
            (
                "Thank you! For your kindness, I will give you one wish.",
                "You helped me, so now I will grant you a wish. Just one!",
            )
        ),
    )
    w = t.rng.sample(WISHES, 3)
    t.paragraph(
        f"{h.name} thought and thought.",
        f"{h.He} could wish for {t.fill(w[0], h)}, or {t.fill(w[1], h)}, or even {t.fill(w[2], h)}!",
    )
    who, wrong, wished, happened = t.pick(NEEDS)
    friend = name_for(t, t.pick("fm"))
    slots = dict(his=h.his, name=friend)
    t.add(
        f"But then {h.he} remembered {who.format(**slots)}, which {wrong}."
        if who.startswith("the old tree")
        else f"But then {h.he} thought of {who.format(**slots)}, who {wrong}."
    )
    t.say(h, f"{h.I} wish {wished.format(**slots)}.", t.pick(("said", "whispered", "said softly")))
    t.say(magic, t.pick(("What a kind wish!", "That is the best wish I have ever heard!", "Your wish is granted!")))
    t.paragraph(happened.format(**slots))
    t.add(f"{h.name} felt {t.feeling(True)}. It was better than any candy or toy.")
    moral(t, h, "wish")
