"""The plots of stories/generate.py, each a problem, an attempt and a resolution told by a
`Teller` (stories/teller.py) about a hero; PLOTS lists them all."""
from .teller import (
    ANIMAL_GIFTS, SOUNDS, Character, a, cap, greet, join, make_family, make_friend, moral, name_for, plural, snack,
)
from .words import (
    ADVERBS, ANIMALS, BOY_NAMES, COLORS, DIFFERENCES, FLOWERS, FRUITS, GAMES, GIRL_NAMES, GROUPS, GROWN,
    HOUSE_SPOTS, LOOK_PAST, MOVE_PAST, PEOPLE, ROOMS, SIZES, SPOTS, TOWNS, TREASURES, TREATS, WISHES,
)


def lost_thing(t, h):
    thing, name = t.thing()
    t.add(f"{h.He} had {a(thing)} that {h.he} loved very much.")
    t.add(t.pick((f"{h.He} took it everywhere.", f"{h.He} never went anywhere without it.", f"It was {h.his} favorite thing in the whole world.")))
    outside = t.chance(0.65)
    if outside:
        place, at_place = t.place()
        t.paragraph(f"{t.when()}, {h.name} {t.pick(MOVE_PAST)} to the {place} with {h.his} {name}.", t.scenery())
        t.add(f"{h.He} played {at_place} for a long time. When {h.he} looked around, the {name} was gone!")
        spots = t.rng.sample(SPOTS, 3)
    else:
        t.paragraph(f"{t.when()}, {h.name} wanted to play with {h.his} {name}, but it was not where {h.he} had left it!")
        spots = t.rng.sample(HOUSE_SPOTS, 3)
    t.say(h, f"Oh no! Where is {h.my} {name}?", t.pick(("cried", "shouted", "gasped")))
    t.add(f"{h.He} {t.pick(LOOK_PAST)} {spots[0]}, but it was not there.", f"{h.He} {t.pick(LOOK_PAST)} {spots[1]}, but it was not there either.")
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
    t.say(friend, t.pick(("Don't worry. I will help you look!", "Let's look together!", "I am good at finding things. I will help you!")))
    t.add(f"{h.name} and {friend.name} looked high and low.")
    t.add(f"Then {friend.name} saw something {spots[2]}.", f"It was the {name}!")
    t.say(h, f"Thank you, {friend.call}!{' You are a good friend.' if outside else ''}", t.pick(("cried", "said", "laughed")))
    t.paragraph(f"{h.name} hugged the {name} tight and felt {t.pick(('happy', 'glad', 'so happy', 'cheerful', 'joyful'))} again.")
    if outside and t.chance(0.5):
        t.add(f"From that day on, {h.name} and {friend.name} were best friends.")
    else:
        t.add(f"After that, {h.he} always took good care of {h.his} {name}.")
    moral(t, h, "lost")


FEARS = (  # (what, how it seems, how it turns out); {he} {his} {him} are the hero
    ("the dark", "Every night, when the light went off, {he} hid under {his} blanket.",
     "{He} turned on a little lamp and looked around. It was just {his} room, with {his} toys and {his} books, the same as in the day."),
    ("thunder", "When a storm came, the sky went boom, and {he} hid under the table.",
     "{He} counted the seconds between the flash and the boom. The storm was far away, and soon it rolled on over the hills."),
    ("the big dog next door", "The dog was big and loud, and {he} always ran away from it.",
     "The dog wagged its tail and licked {his} hand. It only wanted to play!"),
    ("the water", "{He} never went into the lake, not even on hot days.",
     "The water was cool and nice. {He} kicked {his} legs and splashed and laughed."),
    ("the tall slide", "It was so high that {he} always climbed back down the ladder.",
     "{He} went down the slide so fast that the wind blew in {his} face. It was so much fun!"),
    ("the old tree in the garden", "At night its long branches looked like arms reaching for the window.",
     "In the light of day, {he} saw a nest in the branches, with three baby birds inside."),
    ("bees", "When a bee buzzed near, {he} ran away and hid.",
     "The bee just flew from flower to flower. It did not care about {him} at all; it was busy making honey."),
    ("the first day of school", "{He} did not know anyone there, and {his} tummy felt funny.",
     "The teacher was kind, and a girl with a red bow asked {him} to play. Soon {he} had a new friend."),
    ("the noisy vacuum cleaner", "Whenever it roared, {he} covered {his} ears and ran to {his} room.",
     "{He} pushed the button {himself}. It was loud, but it just ate the dust and crumbs."),
    ("the doctor", "{He} thought the doctor would hurt {him}.",
     "The doctor was gentle and funny, and at the end {he} got a shiny sticker."),
    ("the deep snow", "{He} thought {he} would sink in it and never come out.",
     "The snow was soft and cold and only came up to {his} knees. {He} made a snow angel."),
    ("the big waves", "They crashed on the beach with a loud roar.",
     "{He} jumped over the little waves at the edge of the water, and they tickled {his} toes."),
)


def scared(t, h):
    what, seems, turns_out = t.pick(FEARS)
    slots = dict(he=h.he, He=h.He, his=h.his, him=h.him, himself=h.himself)
    parent = make_family(t, h)
    t.add(f"But {h.he} {h.was} afraid of {what}.", seems.format(**slots))
    t.paragraph(f"{t.when()}, {parent.name} saw that {h.name} {h.was} {t.pick(('worried', 'scared', 'upset', 'nervous', 'quiet', 'sad', 'frightened'))}.")
    t.say(parent, f"What is wrong, {h.speaker}?")
    t.say(h, f"{h.I} {h.am} scared of {what}.", t.pick(("whispered", "said", "sobbed")))
    t.say(parent, t.pick((
        "Everyone is scared sometimes. Let's face it together.",
        f"I was scared of {what} too when I was little. Let me show you something.",
        "Hold my hand. I will be right here with you.",
        "Take a deep breath. You are braver than you think.",
    )))
    t.paragraph(f"{h.name} took a deep breath.", turns_out.format(**slots))
    t.say(h, t.pick((f"{h.I} {h.am} not scared anymore!", f"It is not scary at all!", f"{h.I} did it!")))
    t.add(f"{parent.name} gave {h.him} a big hug. {h.He} felt {t.feeling(True)}.")
    moral(t, h, "fear", parent)


def sharing(t, h):
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
    t.say(h, t.pick((f"No! {'They are' if many else 'It is'} {'ours' if h.gender == 'p' else 'mine'}!",
                     f"No, {h.i} want {'them all' if many else 'it'} for {h.me}!")), t.pick(("said", "shouted", "snapped", "yelled")))
    t.add(f"{friend.name} looked {t.feeling(False)} and walked away slowly.")
    t.paragraph(f"{h.name} {h.was} alone now. Somehow it was not fun anymore.", f"{h.He} felt {t.pick(('sorry', 'bad', 'lonely', 'sad'))}.")
    t.add(f"{h.He} {t.pick(MOVE_PAST)} after {friend.name}.")
    t.say(h, f"{h.I} {h.am} sorry. {give}")
    t.say(friend, t.pick(("Thank you! You are kind.", "Really? Thank you!", "Oh, thank you! Let's be friends.")), t.pick(("said", "cried", "cheered")))
    t.add(together, f"{'They all' if h.gender == 'p' else h.name + ' and ' + friend.name} laughed and had so much fun.")
    moral(t, h, "share")


TROUBLES = (  # (the animal's trouble, how the hero helps); {it}: the animal, {he} {his}: the hero
    ("stuck high up in a tree", "{He} found a ladder and climbed up slowly. {He} held out {his} hands, and the {it} jumped into them."),
    ("caught in an old net by the river", "{He} pulled at the net, knot by knot, until the {it} was free."),
    ("stuck in the mud", "{He} found a long stick and held it out. The {it} held on, and {he} pulled it out."),
    ("lost and crying for its mother", "{He} helped it look. They looked by the trees and by the water, and at last they found its mother."),
    ("hurt, with a sore leg", "{He} carried it home, and {his} mom helped {him} wrap its leg. In a few days it was well again."),
    ("shivering in the snow", "{He} wrapped it in {his} scarf and carried it to the warm barn."),
    ("trapped in a hole", "{He} lay down on the ground, reached in with both hands and lifted it out."),
    ("very hungry, with nothing to eat", "{He} shared {his} lunch with it, one little piece at a time."),
    ("stuck on a rock in the middle of the stream", "{He} put stones in the water to make a little path, and the {it} hopped back to land."),
    ("tangled in a long piece of string", "{He} gently pulled the string away until the {it} could move again."),
)


def helping(t, h):
    animal = t.pick(ANIMALS)
    trouble, help_ = t.pick(TROUBLES)
    place, at_place = t.place()
    t.paragraph(f"{t.when()}, {h.name} {t.pick(MOVE_PAST)} to the {place}.", t.scenery())
    t.add(f"Suddenly, {h.he} heard a {t.pick(('little', 'sad', 'soft', 'tiny'))} cry.",
          f"{h.He} looked {t.pick(SPOTS)}, and there was {a(t.pick(SIZES) + ' ' + animal)}, {trouble}!")
    t.say(h, t.pick(("Don't be scared. I will help you.", "Oh, you poor thing! I will help you.", "Hold on, little one. I am coming!")))
    t.paragraph(help_.format(He=h.He, he=h.he, his=h.his, him=h.him, it=animal))
    sound = SOUNDS.get(animal)
    if sound:
        t.add(f'"{sound[0]}!" {sound[1]} the {animal}. It seemed to say thank you.')
    else:
        t.add(f"The {animal} looked up at {h.name} with big, {t.pick(('happy', 'shiny', 'bright', 'grateful'))} eyes.")
    t.add(f"{h.name} felt {t.feeling(True)}.")
    r = t.rng.random()
    if r < 0.5:
        t.paragraph(f"The next day, the {animal} came back to the {place}. It brought {t.pick(ANIMAL_GIFTS)} as a gift.")
        t.add(f"From then on, {h.name} and the {animal} were the best of friends.")
    else:
        t.paragraph(f"After that, {h.name} went to the {place} every day to say hello to the {animal}.")
    moral(t, h, "help")


GIFTS = (  # (the gift, made how, what went wrong, how it went the second time)
    ("a cake", "baked", "The cake came out flat and burned on top.", "This time {he} watched the oven very carefully, and the cake came out round and golden."),
    ("a card", "made", "{He} spilled juice all over it.", "{He} drew {animals} and hearts on the new card, and it was even better than the first one."),
    ("a picture", "painted", "The wind blew the paper into a puddle.", "{He} painted it again, with more colors this time, and hung it up to dry inside."),
    ("a necklace", "made", "The string broke, and the beads rolled everywhere.", "{He} picked up every bead and used a stronger string."),
    ("a bird house", "built", "The roof fell off when {he} picked it up.", "{He} used more nails this time, and the roof stayed on."),
    ("a scarf", "knitted", "It had a big hole in the middle.", "{He} started again, slowly, one stitch at a time."),
    ("a flower crown", "made", "The flowers fell apart when {he} lifted it.", "{He} tied each flower with a little ribbon, and it held together."),
    ("a song", "wrote", "{He} forgot the words in the middle.", "{He} practiced it again and again until {he} knew every word."),
    ("a clay bowl", "made", "The bowl cracked in the sun.", "{He} made a thicker one and let it dry in the shade."),
    ("a batch of cookies", "baked", "{He} used salt instead of sugar, and they tasted terrible.", "{He} read the recipe slowly this time, and the cookies were sweet and soft."),
)


def making_gift(t, h):
    for_whom = make_family(t, h)
    gift, made, wrong, again = t.pick(GIFTS)
    slots = dict(He=h.He, he=h.he, his=h.his, animals=plural(t.pick(ANIMALS)))
    reason = t.pick((
        f"it was {for_whom.name}'s birthday",
        f"{for_whom.name} was sick in bed",
        f"{for_whom.name} had been sad all week",
        f"{for_whom.name} was coming home from a long trip",
    ))
    t.paragraph(f"{t.when()}, {h.name} remembered that {reason}.")
    t.add(f"{h.He} wanted to make something special, so {h.he} {made} {gift}.")
    t.add(cap(wrong.format(**slots)))
    t.say(h, t.pick((f"Oh no! It is ruined!", f"{h.I} can't do anything right!", f"Now {h.i} have nothing to give!")), t.pick(("cried", "sighed", "said")))
    helper = make_friend(t, h, named=0.7) if t.chance(0.5) else None
    if helper:
        t.paragraph(f"Just then, {helper.intro} came by and saw the mess.")
        t.say(helper, t.pick(("Don't give up! Let's try again together.", "Everyone makes mistakes. Try again, and I will help you.")))
    else:
        t.paragraph(f"{h.name} wanted to give up. But then {h.he} thought of {for_whom.name} and tried again.")
    t.add(cap(again.format(**slots)))
    t.paragraph(f"When {for_whom.name} saw the gift, {for_whom.he} smiled from ear to ear.")
    t.say(for_whom, t.pick(("This is the best gift ever! Thank you!", "You made this for me? I love it!", "Thank you! I will keep it forever.")))
    t.add(f"{h.name} felt very {t.feeling(True)}.")
    moral(t, h, "gift")


FINDS = (  # (what the hero finds, where it leads)
    ("a shiny little key", "It opened an old wooden box under the roots of a tree. Inside were {treasures}."),
    ("an old map", "The map showed a path to a big rock. Behind the rock was a hidden garden full of {flowers}."),
    ("a tiny door in a tree", "{He} knocked, and a family of {animals} came out to say hello."),
    ("a glowing stone", "When {he} held it up, {his} wish came true: the sky filled with {color} stars."),
    ("a bottle with a note inside", "The note said: 'Whoever finds this, please be my friend.' It was signed by {a_name}."),
    ("a secret path", "It led to a quiet pond where {animals} were playing in the water."),
    ("a nest with three blue eggs", "{He} watched from far away, and one by one the eggs hatched."),
    ("a hidden cave", "Inside, the walls were covered with old paintings of {animals}."),
    ("a set of tiny footprints", "{He} followed them all the way to a sleepy little {animal} under a bush."),
    ("a rope ladder hanging from a tree", "At the top was an old treehouse with {treasures} inside."),
)


def adventure(t, h):
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
    treasures = join([plural(t.pick(TREASURES)) for _ in range(2)]) if t.chance(0.7) else f"{t.pick(COLORS)} {plural(t.pick(TREASURES))}"
    t.paragraph(leads.format(He=h.He, he=h.he, his=h.his, treasures=treasures, flowers=plural(t.pick(FLOWERS)),
                             animals=plural(t.pick(ANIMALS)), animal=t.pick(ANIMALS), color=t.pick(COLORS),
                             a_name=t.pick(GIRL_NAMES + BOY_NAMES)))
    t.add(f"{h.name} felt {t.feeling(True)}.")
    parent = make_family(t, h)
    t.paragraph(f"When {h.he} got home, {h.he} told {parent.name} all about it.")
    t.say(parent, t.pick(("What an adventure!", "You are a real explorer!", "What a wonderful day you had!")))
    moral(t, h, "explore", parent)


GOALS = ("the big oak tree", "the top of the hill", "the end of the beach", "the old fence", "the red barn", "the pond", "the gate", "the bridge")


def race(t, h):
    friend = make_friend(t, h, named=0.9)
    goal = t.pick(GOALS)
    t.paragraph(f"{t.when()}, {h.name} and {friend.intro} were playing {t.place()[1]}.")
    t.say(friend, f"Let's have a race! The first one to {goal} wins!")
    t.say(h, t.pick((f"{h.I} will win!", "You are on!", "Ready, set, go!")))
    t.add(f"They ran as fast as they could. {h.name} was in front. {h.He} really wanted to win.")
    t.paragraph(f"Then {h.he} heard a cry. {friend.name} had tripped over a {t.pick(('rock', 'root', 'stick', 'log'))} and hurt {friend.his} knee.")
    t.add(f"{h.name} looked at {goal}. It was so close! But {h.he} stopped and ran back.")
    t.say(h, f"Are you okay? Let me help you up.")
    t.say(friend, t.pick(("But you could have won!", "You came back for me?")))
    t.say(h, t.pick(("Friends are more important than winning.", "Winning is not fun without you.")))
    t.paragraph(f"{h.name} helped {friend.name} up, and they walked to {goal} together, side by side.")
    t.add(f"They both felt {t.feeling(True)}.")
    if t.chance(0.4):
        snack(t, h)
    moral(t, h, "race")


WARNINGS = (  # (the rule, what the hero did, what happened); {he} {was} ...: the hero
    ("Do not play ball in the house.", "{he} kicked {his} ball in the living room", "The ball hit a lamp, and it fell with a crash!"),
    ("Do not go near the pond alone.", "{he} went to the pond all by {himself}", "{He} slipped on the wet grass and fell into the cold water!"),
    ("Do not eat the cookies before dinner.", "{he} ate five cookies from the jar", "At dinner {his} tummy hurt, and {he} could not eat a thing."),
    ("Do not climb the tall tree.", "{he} climbed up the tall tree", "Soon {he} {was} so high that {he} could not get down!"),
    ("Do not touch the wet paint.", "{he} touched the new paint on the fence", "Paint got all over {his} hands and {his} clothes!"),
    ("Stay close to me at the market.", "{he} wandered off to look at the toys", "When {he} turned around, {he} {was} all alone!"),
    ("Do not open the gate.", "{he} opened the gate to look at the field", "The goat ran out and ate all the flowers in the garden!"),
    ("Put on your boots before you go out in the snow.", "{he} ran outside in {his} socks", "{His} feet got wet and cold, and {he} began to sneeze."),
    ("Do not jump on the bed.", "{he} jumped on the bed, higher and higher", "{He} fell off and bumped {his} head on the floor!"),
    ("Do not feed the ducks too much bread.", "{he} threw the whole loaf into the pond", "The ducks ate too much and looked very sick!"),
)


def listening(t, h):
    parent = make_family(t, h)
    rule, did, happened = t.pick(WARNINGS)
    slots = dict(he=h.he, He=h.He, his=h.his, His=h.His, himself=h.himself, was=h.was)
    t.paragraph(f'{t.when()}, {parent.name} said to {h.name}, "{rule}"')
    t.add(f"But {h.name} did not listen. When no one was looking, {did.format(**slots)}.")
    t.add(happened.format(**slots))
    t.paragraph(f"{parent.name} came running. {h.name} felt {t.pick(('very sorry', 'ashamed', 'sad', 'sorry and scared'))}.")
    t.say(h, f"{h.I} {h.am} sorry, {parent.call}. {h.I} should have listened to you.", t.pick(("said", "sobbed", "whispered")))
    t.say(parent, t.pick((
        "I forgive you. Rules are there to keep you safe.",
        "Thank you for saying sorry. Next time, please listen.",
        "It is okay. Everyone makes mistakes. What matters is that you learn from them.",
    )))
    t.add(f"{parent.name} gave {h.him} a hug, and {h.he} felt better.")
    moral(t, h, "listen", parent)


INDOOR_FUN = (
    "build a fort out of blankets and pillows", "bake cookies", "paint pictures",
    "play a board game", "put on a puppet show", "read a book about {animals}",
    "have a tea party with the toys", "make paper boats", "dance to music in the kitchen",
    "build a castle out of boxes",
)


def rainy_day(t, h):
    parent = make_family(t, h)
    plan, _ = t.activity(h)
    t.paragraph(f"{t.when(weather=False)}, {h.name} wanted to go outside and {plan}.")
    t.add(f"But when {h.he} looked out of the window, it was {t.pick(('raining', 'pouring', 'raining hard'))}. Gray clouds covered the sky.")
    t.say(h, t.pick((f"Now {h.i} can't go out!", f"Rain, rain, go away!", f"This is the worst day ever!")), t.pick(("sighed", "said", "groaned")))
    fun = t.fill(t.pick(INDOOR_FUN).replace("{animals}", plural(t.pick(ANIMALS))), h)
    t.paragraph(f'{parent.name} smiled and said, "Why don\'t we {fun}?"')
    t.add(f"So they did. They had so much fun that {h.name} forgot all about the rain.")
    t.paragraph(t.pick(("Later, the rain stopped.", "After a while, the rain stopped.", "Soon the clouds went away.")),
                "A big rainbow came out: red, orange, yellow, green, blue and purple.")
    t.say(h, "Look! A rainbow!", t.pick(("shouted", "cried", "cheered")))
    t.add(f"{h.He} put on {h.his} boots and splashed in the puddles.")
    moral(t, h, "rain")


def garden(t, h):
    parent = make_family(t, h)
    crop, color = t.pick(GROWN)
    crops = plural(crop)
    bed = t.pick(("garden", "backyard", "vegetable patch", "flower bed", "yard"))
    t.paragraph(f"{t.when()}, {parent.name} gave {h.name} a little bag of {crop} seeds.")
    t.say(parent, "If you take good care of them, they will grow.")
    t.add(f"{h.name} dug a small hole in the {bed}, dropped in the seeds and covered them with soil.",
          f"Then {h.he} watered them with {h.his} {t.pick(COLORS)} watering can.")
    t.paragraph(f"The next morning, {h.he} {t.pick(MOVE_PAST)} outside to look. Nothing!",
                f"Day after day, {h.he} watered the soil, but nothing happened.")
    t.say(h, t.pick(("Why won't they grow?", "When will they grow?", f"Maybe {h.i} did something wrong.")))
    t.say(parent, t.pick(("Good things take time. Be patient.", "Seeds grow slowly. Keep watering them, and wait.",
                          "Under the soil, they are growing. You will see.")))
    t.paragraph(f"Then one morning, {h.name} saw a tiny green sprout!",
                f"It grew taller and taller, with sun and rain and a little help from {h.name}.")
    t.add(f"By the end of the summer, the {bed} was full of big {color} {crops}.")
    t.say(h, f"Look! {h.I} grew them all by {h.myself}!", t.pick(("shouted", "cheered", "cried")))
    people = t.rng.sample(PEOPLE, 2)
    t.add(f"{h.He} gave some to the {people[0]} and the {people[1]}.",
          f"Everyone said they were the best {crops} in the whole {t.pick(TOWNS)}.")
    moral(t, h, "grow", parent)


def new_friend(t, h):
    gender = t.pick("fm")
    children = h.kind in ("girl", "boy") or h.kind in GROUPS
    name = name_for(t, gender, animal=not children)
    while name in h.name:
        name = name_for(t, gender, animal=not children)
    if children:
        kind, where, others = ("girl" if gender == "f" else "boy"), f"{h.his} {t.pick(('school', 'street', 'class', 'town'))}", "children"
    else:
        kind, where, others = t.pick(ANIMALS), f"the {t.pick(('forest', 'meadow', 'pond', 'farm', 'woods', 'valley'))}", "animals"
    new = Character(name, kind, gender)
    t.paragraph(f"{t.when()}, a new {kind} came to {where}.", f"{new.His} name was {name}, and {new.he} {t.pick(DIFFERENCES)}.")
    t.add(f"The other {others} did not ask {new.him} to play. {name} sat alone {t.pick(SPOTS)}, looking {t.feeling(False)}.")
    t.add(f"{h.name} saw this and felt sad for {new.him}.")
    game, game2 = t.rng.sample(GAMES, 2)
    names = "Our names are" if h.gender == "p" else "My name is"
    t.paragraph(f"{h.He} {t.pick(MOVE_PAST)} over to {name}.")
    t.say(h, f"Hello! {names} {h.name}. Do you want to play {game} with {h.me}?")
    t.say(new, t.pick(("Yes, please!", "Really? I would love to!", "Oh, yes! Thank you!")), t.pick(("said", "cried", "whispered")))
    t.add(f"They played {game}, and then {game2}. {name} was very good at {game2}!")
    t.add(f"Soon the other {others} came to play too, and everyone had a {t.pick(('great', 'wonderful', 'lovely', 'fun'))} time.")
    if h.gender == "p" or t.chance(0.3):
        t.paragraph(f"From that day on, {name} was never alone again.")
    else:
        t.paragraph(f"From that day on, {name} and {h.name} were {t.pick(('best friends', 'the best of friends', 'good friends'))}.")
    moral(t, h, "new")


TRIPS = {  # where -> what there is to see: (who, doing), who plural
    "zoo": (("the lions", "sleeping in the sun"), ("the monkeys", "swinging from branch to branch"),
            ("the giraffes", "eating leaves from the tall trees"), ("the penguins", "diving into the cold water"),
            ("the elephants", "spraying water with their trunks"), ("the zebras", "running in the grass"),
            ("the bears", "eating honey"), ("the parrots", "squawking in the trees"), ("the tigers", "walking up and down")),
    "beach": (("the crabs", "running sideways on the sand"), ("the seagulls", "flying over the waves"),
              ("the sailboats", "sailing far out at sea"), ("the big waves", "crashing on the rocks"),
              ("the dolphins", "jumping far out in the water"), ("the children", "building sandcastles")),
    "farm": (("the cows", "eating grass in the field"), ("the pigs", "rolling in the mud"), ("the hens", "pecking at seeds"),
             ("the sheep", "resting under a tree"), ("the baby goats", "jumping on the hay"),
             ("the horses", "running in the field"), ("the piglets", "sleeping in a pile")),
    "circus": (("the clowns", "juggling and falling over"), ("the acrobats", "flying through the air"),
               ("the dancing dogs", "doing tricks"), ("the jugglers", "throwing rings high in the air"),
               ("the seals", "balancing balls on their noses"), ("the ponies", "running round and round")),
    "museum": (("the dinosaur bones", "standing tall in the great hall"), ("the old paintings", "hanging in golden frames"),
               ("the statues", "standing in a long row"), ("the shiny rocks", "glowing under the lights"),
               ("the model ships", "sitting in glass boxes"), ("the space rockets", "pointing up at the ceiling")),
    "aquarium": (("the sharks", "swimming round and round"), ("the jellyfish", "glowing in the dark water"),
                 ("the sea turtles", "gliding slowly by"), ("the octopuses", "hiding between the rocks"),
                 ("the colorful fish", "darting in and out of the coral"), ("the seahorses", "holding on to the seaweed")),
}
RIDES = (("car", "in"), ("bus", "on"), ("train", "on"), ("boat", "on"), ("ferry", "on"), ("tram", "on"))


def trip(t, h):
    parent = make_family(t, h)
    where = t.pick(tuple(TRIPS))
    (fav, fav_doing), (s1, d1), (s2, d2) = t.rng.sample(TRIPS[where], 3)
    ride, on = t.pick(RIDES)
    t.paragraph(f"{t.when(weather=False)}, {h.name} went to the {where} with {parent.name}. They went by {ride}.",
                f"{h.He} {h.was} so {t.pick(('excited', 'happy', 'thrilled', 'eager'))} that {h.he} could not sit still.")
    t.say(h, f"{h.I} want to see {fav}!", t.pick(("said", "cried", "shouted")))
    t.paragraph(f"At the {where}, they saw {s1} {d1}, and {s2} {d2}.", f"But {fav} were nowhere to be seen.")
    t.add(f"{h.name} felt {t.pick(('disappointed', 'sad', 'glum', 'a little sad'))}.")
    if t.chance(0.5):
        snack(t, h)
    t.say(parent, t.pick(("Don't worry. Maybe we will see them later.", "Let's keep looking. They must be somewhere.")))
    t.paragraph(f"Just as they were about to go home, {parent.name} pointed and {t.pick(('smiled', 'laughed', 'called out'))}.")
    t.add(f"There were {fav}, {fav_doing}!")
    t.say(h, t.pick(("Wow! Look at them!", "There they are!", "I knew we would find them!")), t.pick(("cried", "shouted", "cheered")))
    t.add(f"It was the best part of the whole day.", f"On the way home, {h.he} fell asleep {on} the {ride}, dreaming of {fav}.")
    moral(t, h, "trip", parent)


RECIPES = (  # (what, what goes in)
    ("pancakes", ("flour", "eggs", "milk")), ("cookies", ("flour", "sugar", "butter", "chocolate chips")),
    ("a cake", ("flour", "sugar", "eggs", "butter", "vanilla")), ("soup", ("carrots", "potatoes", "onions", "peas")),
    ("muffins", ("flour", "berries", "sugar", "milk")), ("bread", ("flour", "water", "yeast", "salt")),
    ("a pizza", ("tomato sauce", "cheese", "peppers")), ("an apple pie", ("apples", "sugar", "cinnamon", "butter")),
    ("lemonade", ("lemons", "sugar", "water", "ice")), ("a fruit salad", ("bananas", "apples", "berries", "yogurt")),
    ("oatmeal cookies", ("oats", "raisins", "honey", "butter")), ("hot cocoa", ("milk", "cocoa", "sugar", "cream")),
    ("gingerbread", ("flour", "ginger", "honey", "butter")), ("waffles", ("flour", "eggs", "milk", "maple syrup")),
    ("jam tarts", ("flour", "butter", "jam")), ("banana bread", ("bananas", "flour", "nuts", "nutmeg")),
)
SIPS = {"lemonade": "a big sip", "hot cocoa": "a big sip", "soup": "a spoonful"}
MISHAPS = (
    "{He} tripped, and the {first} went all over the floor!",
    "{He} stirred so fast that some of it flew out of the bowl and onto {his} nose!",
    "{He} spilled the {last} all over the table!",
    "{He} sneezed, and a cloud of {first} flew into the air!",
    "{He} dropped the big spoon, and it landed in the bowl with a splash!",
)


def cooking(t, h):
    parent = make_family(t, h)
    dish, goes_in = t.pick(RECIPES)
    food = dish.split(" ", 1)[1] if dish.startswith(("a ", "an ")) else dish
    many = food.endswith("s")
    t.paragraph(f"{t.when()}, {h.name} helped {parent.name} make {dish} in the {t.pick(('kitchen', 'kitchen', 'bakery', 'big kitchen'))}.")
    t.add(f"First they put the {goes_in[0]} in a big bowl. Then they added the {join(goes_in[1:])}.")
    t.add(f"{h.name} stirred and stirred {t.pick(ADVERBS)}.")
    t.paragraph(t.pick(MISHAPS).format(He=h.He, his=h.his, first=goes_in[0], last=goes_in[-1]))
    t.say(h, t.pick(("Oops! I am sorry!", "Oh no! What a mess!", "Uh-oh!")), t.pick(("cried", "said", "gasped")))
    t.say(parent, t.pick(("That's okay. Let's clean it up together.", "Don't worry. Every good cook makes a mess.")), "laughed")
    t.paragraph(f"When the {food} {'were' if many else 'was'} ready, {'they' if many else 'it'} smelled {t.pick(('wonderful', 'delicious', 'so good', 'sweet', 'yummy'))}.")
    t.add(f"{h.name} had {SIPS.get(food) or t.pick(('a big bite', 'a little taste', 'a warm bite'))}.")
    t.say(h, f"Yummy! {'These are' if many else 'This is'} the best {food} ever!", t.pick(("said", "cried", "cheered")))
    t.add(f"They saved some for the {t.pick(PEOPLE)}, who said it was a {t.pick(('wonderful', 'lovely', 'delicious'))} treat.")
    moral(t, h, "cook", parent)


MAGIC = (  # (what the hero finds, how, the magic one, gender)
    ("a tiny fairy caught in a spider web", "{He} gently set her free.", "the fairy", "f"),
    ("a shiny old lamp", "{He} rubbed it, and out came a little genie in a puff of smoke.", "the genie", "m"),
    ("a golden fish in a little puddle", "{He} carried it back to the pond.", "the golden fish", "n"),
    ("a fallen star, glowing in the grass", "{He} held it up to the sky.", "the star", "n"),
    ("a talking frog with a tiny crown", "{He} bent down to say hello.", "the frog", "n"),
)
NEEDS = (  # (who, what is wrong, the wish, what happened); {his} {name}: the hero's, a friend's
    ("the old tree in the park", "was dying because there had been no rain", "for rain",
     "Dark clouds came, and a soft rain fell all night. In the morning, the tree had new green leaves."),
    ("{his} friend {name}", "was sick in bed", "that {name} would get well",
     "The next day, {name} knocked on the door, laughing and ready to play."),
    ("the little birds in the garden", "had no food because of the snow", "for food for the birds",
     "Suddenly, the bird feeder was full of seeds, and the birds sang a happy song."),
    ("{his} grandpa", "felt lonely in his little house", "that grandpa would never be lonely again",
     "That very day, a fluffy puppy came to grandpa's door, wagging its tail."),
    ("the children of the town", "had no place to play", "for a playground for everyone",
     "In the morning, there was a new playground in the square, with swings and a slide."),
    ("the fish in the river", "were sad because the river was full of trash", "for a clean river",
     "The water turned clear and blue, and the fish jumped for joy."),
)


def wish(t, h):
    found, how, magic_name, gender = t.pick(MAGIC)
    magic = Character(magic_name, magic_name.split()[-1], gender)
    place, at_place = t.place()
    t.paragraph(f"{t.when()}, while {h.he} {h.was} playing {at_place}, {h.name} found {found}.", how.format(He=h.He))
    t.say(magic, t.pick(("Thank you! For your kindness, I will give you one wish.", "You helped me, so now I will grant you a wish. Just one!")))
    w = t.rng.sample(WISHES, 3)
    t.paragraph(f"{h.name} thought and thought.", f"{h.He} could wish for {t.fill(w[0], h)}, or {t.fill(w[1], h)}, or even {t.fill(w[2], h)}!")
    who, wrong, wished, happened = t.pick(NEEDS)
    friend = name_for(t, t.pick("fm"))
    slots = dict(his=h.his, name=friend)
    t.add(f"But then {h.he} remembered {who.format(**slots)}, which {wrong}." if who.startswith("the old tree") else
          f"But then {h.he} thought of {who.format(**slots)}, who {wrong}.")
    t.say(h, f"{h.I} wish {wished.format(**slots)}.", t.pick(("said", "whispered", "said softly")))
    t.say(magic, t.pick(("What a kind wish!", "That is the best wish I have ever heard!", "Your wish is granted!")))
    t.paragraph(happened.format(**slots))
    t.add(f"{h.name} felt {t.feeling(True)}. It was better than any candy or toy.")
    moral(t, h, "wish")


PLOTS = (lost_thing, scared, sharing, helping, making_gift, adventure, race, listening, rainy_day,
         garden, new_friend, trip, cooking, wish)
