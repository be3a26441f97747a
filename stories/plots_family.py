"""Plots at home with the family: the hero is afraid, makes a gift for someone of the family, does
not listen, is kept inside by the rain, or cooks. stories/plots.py lists every plot."""

from .doing import ADVERBS
from .teller import Character, Teller, cap, join, make_family, make_friend, moral, plural
from .words import ANIMALS, PEOPLE

FEARS = (  # (what, how it seems, how it turns out); {he} {his} {him} are the hero
    (
        "the dark",
        "Every night, when the light went off, {he} hid under {his} blanket.",
        "{He} turned on a little lamp and looked around. It was just {his} room, with {his} toys and {his} books, the same as in the day.",
    ),
    (
        "thunder",
        "When a storm came, the sky went boom, and {he} hid under the table.",
        "{He} counted the seconds between the flash and the boom. The storm was far away, and soon it rolled on over the hills.",
    ),
    (
        "the big dog next door",
        "The dog was big and loud, and {he} always ran away from it.",
        "The dog wagged its tail and licked {his} hand. It only wanted to play!",
    ),
    (
        "the water",
        "{He} never went into the lake, not even on hot days.",
        "The water was cool and nice. {He} kicked {his} legs and splashed and laughed.",
    ),
    (
        "the tall slide",
        "It was so high that {he} always climbed back down the ladder.",
        "{He} went down the slide so fast that the wind blew in {his} face. It was so much fun!",
    ),
    (
        "the old tree in the garden",
        "At night its long branches looked like arms reaching for the window.",
        "In the light of day, {he} saw a nest in the branches, with three baby birds inside.",
    ),
    (
        "bees",
        "When a bee buzzed near, {he} ran away and hid.",
        "The bee just flew from flower to flower. It did not care about {him} at all; it was busy making honey.",
    ),
    (
        "the first day of school",
        "{He} did not know anyone there, and {his} tummy felt funny.",
        "The teacher was kind, and a girl with a red bow asked {him} to play. Soon {he} had a new friend.",
    ),
    (
        "the noisy vacuum cleaner",
        "Whenever it roared, {he} covered {his} ears and ran to {his} room.",
        "{He} pushed the button {himself}. It was loud, but it just ate the dust and crumbs.",
    ),
    (
        "the doctor",
        "{He} thought the doctor would hurt {him}.",
        "The doctor was gentle and funny, and at the end {he} got a shiny sticker.",
    ),
    (
        "the deep snow",
        "{He} thought {he} would sink in it and never come out.",
        "The snow was soft and cold and only came up to {his} knees. {He} made a snow angel.",
    ),
    (
        "the big waves",
        "They crashed on the beach with a loud roar.",
        "{He} jumped over the little waves at the edge of the water, and they tickled {his} toes.",
    ),
)


def scared(t: Teller, h: Character) -> None:
    what, seems, turns_out = t.pick(FEARS)
    slots = dict(he=h.he, He=h.He, his=h.his, him=h.him, himself=h.himself)
    parent = make_family(t, h)
    t.add(f"But {h.he} {h.was} afraid of {what}.", seems.format(**slots))
    t.paragraph(
        f"{t.when()}, {parent.name} saw that {h.name} {h.was} {t.pick(('worried', 'scared', 'upset', 'nervous', 'quiet', 'sad', 'frightened'))}."
    )
    t.say(parent, f"What is wrong, {h.speaker}?")
    t.say(h, f"{h.I} {h.am} scared of {what}.", t.pick(("whispered", "said", "sobbed")))
    t.say(
        parent,
        t.pick(
            (
                "Everyone is scared sometimes. Let's face it together.",
                f"I was scared of {what} too when I was little. Let me show you something.",
                "Hold my hand. I will be right here with you.",
                "Take a deep breath. You are braver than you think.",
            )
        ),
    )
    t.paragraph(f"{h.name} took a deep breath.", turns_out.format(**slots))
    t.say(h, t.pick((f"{h.I} {h.am} not scared anymore!", "It is not scary at all!", f"{h.I} did it!")))
    t.add(f"{parent.name} gave {h.him} a big hug. {h.He} felt {t.feeling(True)}.")
    moral(t, h, "fear", parent)


GIFTS = (  # (the gift, made how, what went wrong, how it went the second time)
    (
        "a cake",
        "baked",
        "The cake came out flat and burned on top.",
        "This time {he} watched the oven very carefully, and the cake came out round and golden.",
    ),
    (
        "a card",
        "made",
        "{He} spilled juice all over it.",
        "{He} drew {animals} and hearts on the new card, and it was even better than the first one.",
    ),
    (
        "a picture",
        "painted",
        "The wind blew the paper into a puddle.",
        "{He} painted it again, with more colors this time, and hung it up to dry inside.",
    ),
    (
        "a necklace",
        "made",
        "The string broke, and the beads rolled everywhere.",
        "{He} picked up every bead and used a stronger string.",
    ),
    (
        "a bird house",
        "built",
        "The roof fell off when {he} picked it up.",
        "{He} used more nails this time, and the roof stayed on.",
    ),
    ("a scarf", "knitted", "It had a big hole in the middle.", "{He} started again, slowly, one stitch at a time."),
    (
        "a flower crown",
        "made",
        "The flowers fell apart when {he} lifted it.",
        "{He} tied each flower with a little ribbon, and it held together.",
    ),
    (
        "a song",
        "wrote",
        "{He} forgot the words in the middle.",
        "{He} practiced it again and again until {he} knew every word.",
    ),
    ("a clay bowl", "made", "The bowl cracked in the sun.", "{He} made a thicker one and let it dry in the shade."),
    (
        "a batch of cookies",
        "baked",
        "{He} used salt instead of sugar, and they tasted terrible.",
        "{He} read the recipe slowly this time, and the cookies were sweet and soft.",
    ),
)


def making_gift(t: Teller, h: Character) -> None:
    for_whom = make_family(t, h)
    gift, made, wrong, again = t.pick(GIFTS)
    slots = dict(He=h.He, he=h.he, his=h.his, animals=plural(t.pick(ANIMALS)))
    reason = t.pick(
        (
            f"it was {for_whom.name}'s birthday",
            f"{for_whom.name} was sick in bed",
            f"{for_whom.name} had been sad all week",
            f"{for_whom.name} was coming home from a long trip",
        )
    )
    t.paragraph(f"{t.when()}, {h.name} remembered that {reason}.")
    t.add(f"{h.He} wanted to make something special, so {h.he} {made} {gift}.")
    t.add(cap(wrong.format(**slots)))
    t.say(
        h,
        t.pick(("Oh no! It is ruined!", f"{h.I} can't do anything right!", f"Now {h.i} have nothing to give!")),
        t.pick(("cried", "sighed", "said")),
    )
    helper = make_friend(t, h, named=0.7) if t.chance(0.5) else None
    if helper:
        t.paragraph(f"Just then, {helper.intro} came by and saw the mess.")
        t.say(
            helper,
            t.pick(
                ("Don't give up! Let's try again together.", "Everyone makes mistakes. Try again, and I will help you.")
            ),
        )
    else:
        t.paragraph(f"{h.name} wanted to give up. But then {h.he} thought of {for_whom.name} and tried again.")
    t.add(cap(again.format(**slots)))
    t.paragraph(f"When {for_whom.name} saw the gift, {for_whom.he} smiled from ear to ear.")
    t.say(
        for_whom,
        t.pick(
            (
                "This is the best gift ever! Thank you!",
                "You made this for me? I love it!",
                "Thank you! I will keep it forever.",
            )
        ),
    )
    t.add(f"{h.name} felt very {t.feeling(True)}.")
    moral(t, h, "gift")


WARNINGS = (  # (the rule, what the hero did, what happened); {he} {was} ...: the hero
    (
        "Do not play ball in the house.",
        "{he} kicked {his} ball in the living room",
        "The ball hit a lamp, and it fell with a crash!",
    ),
    (
        "Do not go near the pond alone.",
        "{he} went to the pond all by {himself}",
        "{He} slipped on the wet grass and fell into the cold water!",
    ),
    (
        "Do not eat the cookies before dinner.",
        "{he} ate five cookies from the jar",
        "At dinner {his} tummy hurt, and {he} could not eat a thing.",
    ),
    (
        "Do not climb the tall tree.",
        "{he} climbed up the tall tree",
        "Soon {he} {was} so high that {he} could not get down!",
    ),
    (
        "Do not touch the wet paint.",
        "{he} touched the new paint on the fence",
        "Paint got all over {his} hands and {his} clothes!",
    ),
    (
        "Stay close to me at the market.",
        "{he} wandered off to look at the toys",
        "When {he} turned around, {he} {was} all alone!",
    ),
    (
        "Do not open the gate.",
        "{he} opened the gate to look at the field",
        "The goat ran out and ate all the flowers in the garden!",
    ),
    (
        "Put on your boots before you go out in the snow.",
        "{he} ran outside in {his} socks",
        "{His} feet got wet and cold, and {he} began to sneeze.",
    ),
    (
        "Do not jump on the bed.",
        "{he} jumped on the bed, higher and higher",
        "{He} fell off and bumped {his} head on the floor!",
    ),
    (
        "Do not feed the ducks too much bread.",
        "{he} threw the whole loaf into the pond",
        "The ducks ate too much and looked very sick!",
    ),
)


def listening(t: Teller, h: Character) -> None:
    parent = make_family(t, h)
    rule, did, happened = t.pick(WARNINGS)
    slots = dict(he=h.he, He=h.He, his=h.his, His=h.His, himself=h.himself, was=h.was)
    t.paragraph(f'{t.when()}, {parent.name} said to {h.name}, "{rule}"')
    t.add(f"But {h.name} did not listen. When no one was looking, {did.format(**slots)}.")
    t.add(happened.format(**slots))
    t.paragraph(
        f"{parent.name} came running. {h.name} felt {t.pick(('very sorry', 'ashamed', 'sad', 'sorry and scared'))}."
    )
    t.say(
        h,
        f"{h.I} {h.am} sorry, {parent.call}. {h.I} should have listened to you.",
        t.pick(("said", "sobbed", "whispered")),
    )
    t.say(
        parent,
        t.pick(
            (
                "I forgive you. Rules are there to keep you safe.",
                "Thank you for saying sorry. Next time, please listen.",
                "It is okay. Everyone makes mistakes. What matters is that you learn from them.",
            )
        ),
    )
    t.add(f"{parent.name} gave {h.him} a hug, and {h.he} felt better.")
    moral(t, h, "listen", parent)


INDOOR_FUN = (
    "build a fort out of blankets and pillows",
    "bake cookies",
    "paint pictures",
    "play a board game",
    "put on a puppet show",
    "read a book about {animals}",
    "have a tea party with the toys",
    "make paper boats",
    "dance to music in the kitchen",
    "build a castle out of boxes",
)


def rainy_day(t: Teller, h: Character) -> None:
    parent = make_family(t, h)
    plan, _ = t.activity(h)
    t.paragraph(f"{t.when(weather=False)}, {h.name} wanted to go outside and {plan}.")
    t.add(
        f"But when {h.he} looked out of the window, it was {t.pick(('raining', 'pouring', 'raining hard'))}. Gray clouds covered the sky."
    )
    t.say(
        h,
        t.pick((f"Now {h.i} can't go out!", "Rain, rain, go away!", "This is the worst day ever!")),
        t.pick(("sighed", "said", "groaned")),
    )
    fun = t.fill(t.pick(INDOOR_FUN).replace("{animals}", plural(t.pick(ANIMALS))), h)
    t.paragraph(f'{parent.name} smiled and said, "Why don\'t we {fun}?"')
    t.add(f"So they did. They had so much fun that {h.name} forgot all about the rain.")
    t.paragraph(
        t.pick(("Later, the rain stopped.", "After a while, the rain stopped.", "Soon the clouds went away.")),
        "A big rainbow came out: red, orange, yellow, green, blue and purple.",
    )
    t.say(h, "Look! A rainbow!", t.pick(("shouted", "cried", "cheered")))
    t.add(f"{h.He} put on {h.his} boots and splashed in the puddles.")
    moral(t, h, "rain")


RECIPES = (  # (what, what goes in)
    ("pancakes", ("flour", "eggs", "milk")),
    ("cookies", ("flour", "sugar", "butter", "chocolate chips")),
    ("a cake", ("flour", "sugar", "eggs", "butter", "vanilla")),
    ("soup", ("carrots", "potatoes", "onions", "peas")),
    ("muffins", ("flour", "berries", "sugar", "milk")),
    ("bread", ("flour", "water", "yeast", "salt")),
    ("a pizza", ("tomato sauce", "cheese", "peppers")),
    ("an apple pie", ("apples", "sugar", "cinnamon", "butter")),
    ("lemonade", ("lemons", "sugar", "water", "ice")),
    ("a fruit salad", ("bananas", "apples", "berries", "yogurt")),
    ("oatmeal cookies", ("oats", "raisins", "honey", "butter")),
    ("hot cocoa", ("milk", "cocoa", "sugar", "cream")),
    ("gingerbread", ("flour", "ginger", "honey", "butter")),
    ("waffles", ("flour", "eggs", "milk", "maple syrup")),
    ("jam tarts", ("flour", "butter", "jam")),
    ("banana bread", ("bananas", "flour", "nuts", "nutmeg")),
)
SIPS = {"lemonade": "a big sip", "hot cocoa": "a big sip", "soup": "a spoonful"}
MISHAPS = (
    "{He} tripped, and the {first} went all over the floor!",
    "{He} stirred so fast that some of it flew out of the bowl and onto {his} nose!",
    "{He} spilled the {last} all over the table!",
    "{He} sneezed, and a cloud of {first} flew into the air!",
    "{He} dropped the big spoon, and it landed in the bowl with a splash!",
)


def cooking(t: Teller, h: Character) -> None:
    parent = make_family(t, h)
    dish, goes_in = t.pick(RECIPES)
    food = dish.split(" ", 1)[1] if dish.startswith(("a ", "an ")) else dish
    many = food.endswith("s")
    t.paragraph(
        f"{t.when()}, {h.name} helped {parent.name} make {dish} in the {t.pick(('kitchen', 'kitchen', 'bakery', 'big kitchen'))}."
    )
    t.add(f"First they put the {goes_in[0]} in a big bowl. Then they added the {join(goes_in[1:])}.")
    t.add(f"{h.name} stirred and stirred {t.pick(ADVERBS)}.")
    t.paragraph(t.pick(MISHAPS).format(He=h.He, his=h.his, first=goes_in[0], last=goes_in[-1]))
    t.say(h, t.pick(("Oops! I am sorry!", "Oh no! What a mess!", "Uh-oh!")), t.pick(("cried", "said", "gasped")))
    t.say(
        parent,
        t.pick(("That's okay. Let's clean it up together.", "Don't worry. Every good cook makes a mess.")),
        "laughed",
    )
    t.paragraph(
        f"When the {food} {'were' if many else 'was'} ready, {'they' if many else 'it'} smelled {t.pick(('wonderful', 'delicious', 'so good', 'sweet', 'yummy'))}."
    )
    t.add(f"{h.name} had {SIPS.get(food) or t.pick(('a big bite', 'a little taste', 'a warm bite'))}.")
    t.say(h, f"Yummy! {'These are' if many else 'This is'} the best {food} ever!", t.pick(("said", "cried", "cheered")))
    t.add(
        f"They saved some for the {t.pick(PEOPLE)}, who said it was a {t.pick(('wonderful', 'lovely', 'delicious'))} treat."
    )
    moral(t, h, "cook", parent)
