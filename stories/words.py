"""Word lists for the story generator, by category.

All tuples (never sets), so the order of every list, and with it the corpus a seed gives,
never depends on hashing. Entries with spaces ("teddy bear") are one item. Nouns are
singular: `generate.plural` makes the plurals (irregular ones are in IRREGULAR_PLURALS).
"""


def word_list(text: str) -> tuple[str, ...]:
    """'a, b c,<newline> d e' -> ('a', 'b c', 'd e'): items are separated by commas and may wrap."""
    return tuple(" ".join(item.split()) for item in text.split(",") if item.strip())


IRREGULAR_PLURALS = {
    "mouse": "mice",
    "sheep": "sheep",
    "fish": "fish",
    "goose": "geese",
    "wolf": "wolves",
    "calf": "calves",
    "deer": "deer",
    "moose": "moose",
    "child": "children",
    "person": "people",
    "man": "men",
    "woman": "women",
    "elf": "elves",
    "leaf": "leaves",
    "scarf": "scarves",
    "shelf": "shelves",
    "loaf": "loaves",
    "foot": "feet",
    "tooth": "teeth",
    "knife": "knives",
    "potato": "potatoes",
    "tomato": "tomatoes",
    "mango": "mangoes",
    "starfish": "starfish",
    "jellyfish": "jellyfish",
    "goldfish": "goldfish",
    "hero": "heroes",
    "volcano": "volcanoes",
}

# -- who -----------------------------------------------------------------------------------------

GIRL_NAMES = tuple(
    """
Lily Mia Emma Sophie Anna Lucy Sara Zoe Ella Amy Rose Daisy Grace Chloe Ruby Maya Nora Olivia
Ava Isla Hannah Molly Kate Jenny Tina Rita Nina Lena Clara Alice Ivy Hazel Poppy Elsie Freya Eva
Julia Laura Sally Polly Betty Kitty Penny Holly Megan Abby Bella Stella Luna Violet Willow Fiona
Gina Heidi Irene Jade Kira Leah Maria Nadia Olga Paula Rosa Sandy Tara Uma Vera Wendy Yara Zara
Amara Priya Aisha Mei Yuki Sofia Lola Millie Annie Ellie Josie Maggie Tessa Dora Greta Hattie
Judy Lottie Martha Nell Pearl Susie Trudy Winnie Edith Flora Georgia Matilda
""".split()
)

BOY_NAMES = tuple(
    """
Tom Ben Max Sam Leo Jack Tim Finn Noah Liam Oscar Charlie Harry Jake Luke Mark Owen Peter Ryan
Theo Adam Alex Billy Bobby Danny Eddie Felix George Henry Ivan Joe Kevin Leon Milo Ned Oliver
Paul Rex Simon Toby Victor Will Zack Arlo Ethan Hugo Jasper Kai Mason Nico Omar Pablo Rafi Ravi
Sid Teddy Ali Amir Bruno Caleb Dexter Elliot Frank Gus Hank Isaac Jonah Kofi Marco Nate Percy
Ross Rufus Seth Tyler Vince Wesley Yusuf Archie Barney Cody Dylan Ernie Freddie Gabe Hector Jimmy
Kenny Lenny Morris Ollie Stanley Timmy Walter Benny Arthur Edgar
""".split()
)

PET_NAMES = tuple(
    """
Buddy Coco Rocky Spot Patch Whiskers Fluffy Snowball Pepper Ginger Biscuit Muffin Peanut Pip
Squeak Nibbles Bubbles Sunny Shadow Button Cookie Mittens Sparky Thumper Hoppy Dot Tiny Fuzzy
Ziggy Rusty Scout Oreo Noodle Pickles Waffles Pudding Socks Pebble Bean Acorn Clover Maple
Pumpkin Toffee Marshmallow Jellybean Twinkle Bramble Puddles Sprout Nutmeg Cinnamon Domino
""".split()
)

# Animals a story can be about (they get a name and he/she), and all animals (seen, met, helped).
HERO_ANIMALS = word_list("""
puppy, kitten, bunny, rabbit, bear, fox, mouse, owl, duck, frog, pig, squirrel, turtle, hedgehog,
lamb, pony, monkey, penguin, elephant, lion, tiger, giraffe, zebra, panda, koala, deer, goat,
raccoon, otter, beaver, badger, chick, duckling, kangaroo, hamster, dragon, unicorn, dinosaur
""")
ANIMALS = HERO_ANIMALS + word_list("""
cat, dog, bird, cow, horse, sheep, hen, rooster, snail, wolf, goose, swan, parrot, robin,
sparrow, eagle, crow, pigeon, peacock, flamingo, ostrich, camel, hippo, rhino, crocodile,
lizard, snake, seal, whale, dolphin, crab, octopus, butterfly, bee, ant, ladybug, caterpillar,
spider, worm, beetle, dragonfly, mole, bat, skunk, chipmunk, donkey, llama, moose, gorilla,
cheetah, leopard, polar bear, seagull, pelican, woodpecker, hummingbird, firefly, grasshopper,
cricket, jellyfish, starfish, seahorse, lobster, goldfish, tadpole, guinea pig, calf, piglet,
hare, mule, yak, bison, buffalo, walrus, sloth, armadillo, porcupine, lemur, meerkat, orangutan,
chimpanzee, panther, jaguar, hyena, antelope, gazelle, toad, newt, salamander, gecko, tortoise,
swallow, owlet, kingfisher, heron, stork, toucan, vulture, falcon, hawk, canary, finch, bluebird,
cub, kid goat, foal, fawn, moth, wasp, bumblebee, centipede, shrimp, clam
""")
ANIMAL_SOUNDS = (  # (animal, what it says, how it says it)
    ("dog", "Woof", "barked"),
    ("puppy", "Woof", "barked"),
    ("cat", "Meow", "purred"),
    ("kitten", "Mew", "mewed"),
    ("cow", "Moo", "mooed"),
    ("duck", "Quack", "quacked"),
    ("duckling", "Quack", "quacked"),
    ("sheep", "Baa", "bleated"),
    ("lamb", "Baa", "bleated"),
    ("owl", "Hoot", "hooted"),
    ("frog", "Ribbit", "croaked"),
    ("pig", "Oink", "grunted"),
    ("hen", "Cluck", "clucked"),
    ("chick", "Peep", "peeped"),
    ("mouse", "Squeak", "squeaked"),
    ("lion", "Roar", "roared"),
    ("tiger", "Roar", "growled"),
    ("bear", "Grr", "growled"),
    ("horse", "Neigh", "neighed"),
    ("pony", "Neigh", "neighed"),
    ("goat", "Maa", "bleated"),
    ("bird", "Tweet", "chirped"),
    ("robin", "Tweet", "chirped"),
    ("bee", "Buzz", "buzzed"),
    ("goose", "Honk", "honked"),
    ("donkey", "Hee-haw", "brayed"),
    ("rooster", "Cock-a-doodle-doo", "crowed"),
)

FANTASY_KINDS = (  # (kind, "f" / "m" / "" for either)
    ("princess", "f"),
    ("prince", "m"),
    ("queen", "f"),
    ("king", "m"),
    ("knight", ""),
    ("fairy", "f"),
    ("wizard", ""),
    ("pirate", ""),
    ("robot", ""),
    ("mermaid", "f"),
    ("giant", ""),
    ("elf", ""),
    ("witch", "f"),
    ("troll", ""),
    ("astronaut", ""),
)

# Grown-ups a hero meets; each with a thing they give or know about.
PEOPLE = word_list("""
farmer, baker, teacher, doctor, nurse, fisherman, sailor, pilot, painter, gardener, mailman,
firefighter, police officer, chef, builder, artist, singer, dancer, magician, librarian,
shopkeeper, zookeeper, scientist, explorer, inventor, musician, neighbor, old man, old woman,
clown, vet, dentist, bus driver, park ranger, lighthouse keeper, beekeeper, toymaker, tailor
""")
FAMILY = (  # (word in the story, how the hero calls them, gender)
    ("mom", "Mom", "f"),
    ("dad", "Dad", "m"),
    ("mother", "Mother", "f"),
    ("father", "Father", "m"),
    ("grandma", "Grandma", "f"),
    ("grandpa", "Grandpa", "m"),
    ("mommy", "Mommy", "f"),
    ("daddy", "Daddy", "m"),
    ("granny", "Granny", "f"),
    ("aunt", "Auntie", "f"),
    ("uncle", "Uncle", "m"),
    ("big sister", "Sis", "f"),
    ("big brother", "Bro", "m"),
)
GROUPS = ("friends", "best friends", "twins", "cousins", "neighbors", "classmates")

# -- what a character is like --------------------------------------------------------------------

TRAITS = word_list("""
kind, curious, brave, shy, happy, playful, clever, gentle, cheerful, helpful, friendly, funny,
silly, smart, polite, careful, busy, lively, quiet, sweet, caring, thoughtful, patient, generous,
bold, adventurous, energetic, creative, hardworking, loyal, cheeky, clumsy, chatty, sleepy,
grumpy, bouncy, daring, dreamy, jolly, lazy, lonely, messy, nosy, proud, restless, sensible,
stubborn, timid, tidy, wise, bright, eager, noisy, merry, spirited, bashful, fearless
""")
SIZES = word_list("little, small, tiny, big, tall, short, young, old, round, chubby, skinny, fluffy")
LOOKS = word_list("""
shiny, soft, fuzzy, sparkly, striped, spotted, wooden, golden, silver, bright, old, new, round,
smooth, bumpy, shiny new, fancy, plain, pretty, beautiful, lovely, special, magic, tiny,
enormous, huge, little, small, big, heavy, light, squishy, cozy, warm, colorful, glittery,
dusty, muddy, broken, crooked, curly, fluffy, gigantic, glowing, hairy, lumpy, pointy, rusty,
scratchy, silky, slimy, sticky, stretchy, strange, velvet, wobbly, woolly, wrinkly, patchy
""")
COLORS = word_list("""
red, blue, green, yellow, orange, purple, pink, brown, black, white, gray, gold, silver,
golden, navy, violet, turquoise, crimson, scarlet, lavender, teal, amber,
indigo, beige, maroon, sky blue, dark green, light blue, pale pink
""")
GOOD_FEELINGS = word_list("""
happy, glad, excited, proud, thankful, grateful, joyful, cheerful, delighted, thrilled,
hopeful, calm, relieved, amazed, pleased, cozy, safe, warm inside, brave, content, peaceful,
overjoyed, giddy
""")
BAD_FEELINGS = word_list("""
sad, upset, worried, scared, afraid, nervous, lonely, angry, grumpy, frightened, confused,
unhappy, gloomy, miserable, cross, jealous, bored, sorry, disappointed, anxious, uneasy,
frustrated, tearful, glum
""")

# -- where and when ------------------------------------------------------------------------------

OUTDOOR_PLACES = (  # (place, preposition for being there)
    ("park", "in"),
    ("forest", "in"),
    ("beach", "on"),
    ("farm", "on"),
    ("hill", "on"),
    ("river", "by"),
    ("lake", "by"),
    ("garden", "in"),
    ("meadow", "in"),
    ("zoo", "at"),
    ("playground", "at"),
    ("pond", "by"),
    ("woods", "in"),
    ("jungle", "in"),
    ("field", "in"),
    ("orchard", "in"),
    ("backyard", "in"),
    ("valley", "in"),
    ("mountain", "on"),
    ("island", "on"),
    ("seaside", "at"),
    ("swamp", "in"),
    ("desert", "in"),
    ("fair", "at"),
    ("harbor", "at"),
    ("village green", "on"),
    ("campsite", "at"),
    ("vegetable patch", "in"),
    ("sunflower field", "in"),
    ("old mill", "by"),
    ("waterfall", "by"),
    ("riverbank", "on"),
    ("cornfield", "in"),
    ("pumpkin patch", "in"),
    ("rose garden", "in"),
    ("sand dunes", "on"),
    ("school yard", "in"),
    ("town square", "in"),
    ("market", "at"),
    ("circus", "at"),
)
ROOMS = word_list("""
kitchen, living room, bedroom, attic, basement, playroom, hallway, garage, dining room, cellar,
porch, laundry room, bathroom, garden shed, toy room
""")
HOMES = {  # where a hero of each sort lives
    "person": word_list("""
        in a small house near the forest, in a little blue house by the sea, on a big farm,
        in a tall building in the city, in a cozy cottage at the end of the lane,
        in a busy town near the river, in a yellow house with a red door,
        in a quiet village at the foot of a hill, in a little white house with a big garden,
        in a wooden house by the lake, in an old farmhouse, in a tiny flat above a bakery
        """),
    "animal": word_list("""
        in a hole under a big oak tree, in a cozy nest high in a tree, in a burrow under the hill,
        in a den deep in the forest, in a barn on a farm, by a quiet pond,
        in a hollow log in the woods, in a little house at the edge of the meadow,
        in a warm basket by the fire, under an old bridge, in a garden full of flowers
        """),
    "fantasy": word_list("""
        in a castle on a hill, in a tall tower, in a cave by the sea, in a magic forest,
        in a kingdom far away, on a cloud high in the sky, in a palace made of glass,
        in a land of giants, on a ship that sailed the seas, in a village of elves
        """),
}
TOWNS = word_list("village, town, city, kingdom, forest, valley, land, place, neighborhood, island")
TOWN_LOOKS = word_list("""
small, quiet, busy, sunny, green, peaceful, pretty, faraway, sleepy, happy, snowy, windy,
little, lovely, magical, friendly, colorful, old
""")
WEATHER = word_list("""
sunny, rainy, windy, cloudy, snowy, foggy, warm, cold, hot, chilly, bright, gray, stormy, cool,
breezy, frosty, misty, lovely, beautiful, quiet, fine, clear, wet, gloomy, icy
""")
TIMES = word_list("morning, afternoon, day, evening")
SEASONS = word_list("spring, summer, autumn, winter")
SKY_SIGHTS = word_list("""
the sun was shining, the sky was blue, fluffy clouds floated by, a soft wind was blowing,
the birds were singing, the leaves were dancing in the wind, the grass was wet with dew,
the air smelled of flowers, bees were buzzing from flower to flower, the sky was clear and bright,
butterflies were flying over the grass, the trees were full of blossoms
""")

# -- things --------------------------------------------------------------------------------------

TREASURES = word_list("""
ball, kite, teddy bear, doll, toy car, toy boat, toy train, toy robot, puzzle, book, drum,
whistle, marble, shell, necklace, bracelet, ring, hat, scarf, blanket, umbrella, balloon,
wagon, bike, scooter, music box, crown, wand, map, compass, flashlight, lantern, backpack,
basket, bucket, shovel, jar, box, feather, stone, key, clock, watch, mirror, locket, ribbon,
sock, mitten, boot, glove, spinning top, jigsaw, rocket, airplane, truck, tractor, yo-yo, flute,
guitar, violin, trumpet, harmonica, xylophone, piano, ukulele, crayon, paintbrush, notebook,
pencil, sticker, postcard, coin, button, bell, quilt, pillow, cup, bowl, spoon, teapot, cape,
mask, sword, shield, helmet, boat, sailboat, bucket hat, sun hat, raincoat, sweater, jacket,
slingshot, telescope, magnifying glass, camera, radio, lunchbox, pencil case, water bottle,
snow globe, kaleidoscope, hula hoop, frisbee, skipping rope, rubber duck, toy dinosaur,
stuffed elephant, rag doll, puppet, tiara, medal, trophy, piggy bank, globe, sled, canoe,
toy drum, wind chime, beach ball, soccer ball, baseball cap, pinwheel, lunch bag, storybook
""")
FRUITS = word_list("""
apple, banana, orange, pear, plum, peach, cherry, strawberry, grape, lemon, melon, mango,
kiwi, apricot, blueberry, raspberry, blackberry, coconut, pineapple, watermelon, fig, lime
""")
TREATS = word_list("""
cookie, cupcake, muffin, pancake, waffle, sandwich, bun, pie, cake, donut, cracker, pretzel,
lollipop, candy cane, gingerbread man, biscuit, scone, carrot, tomato, potato, pumpkin,
cheese sandwich, jam tart, honey cake, sugar cookie, cinnamon roll, taco, pizza, pickle,
cheese stick, rice cake, egg roll, dumpling, bagel, croissant, toffee apple, cream puff, brownie,
jelly bean, gumdrop, marshmallow, cherry tart, peanut butter cookie, breadstick, popsicle
""")
FLOWERS = word_list("""
daisy, rose, tulip, sunflower, daffodil, lily, violet, poppy, dandelion, bluebell, lilac,
marigold, pansy, orchid, buttercup, snowdrop, primrose, clover, iris, bluebonnet
""")
TREES = word_list("oak, pine, apple, maple, willow, birch, cherry, palm, elm, chestnut, fir, plum")
SPOTS = word_list("""
under a bush, behind a big rock, in the tall grass, under a big leaf, by the old fence,
inside a hollow log, under a pile of leaves, next to the pond, behind the shed, in a puddle,
under a bench, near the gate, beside a tree stump, in a flower bed, under the bridge,
on top of the wall, between two rocks, near a mossy stone, under a wheelbarrow, by the mailbox
""")
HOUSE_SPOTS = word_list("""
under the bed, behind the sofa, in the toy box, under the table, in the closet,
behind the curtains, under a pillow, in the laundry basket, on the bookshelf, in a drawer,
behind the door, under the rug, in the bathtub, on the windowsill, under the stairs
""")
INSTRUMENTS = word_list("drum, flute, guitar, violin, trumpet, harmonica, xylophone, piano, ukulele, tambourine")
