"""Word lists for the story generator, by category.

All tuples (never sets), so the order of every list, and with it the corpus a seed gives,
never depends on hashing. Entries with spaces ("teddy bear") are one item. Nouns are
singular: `generate.plural` makes the plurals (irregular ones are in IRREGULAR_PLURALS).
"""


def _items(text):
    """'a, b c,<newline> d e' -> ('a', 'b c', 'd e'): items are separated by commas and may wrap."""
    return tuple(" ".join(item.split()) for item in text.split(",") if item.strip())


IRREGULAR_PLURALS = {
    "mouse": "mice", "sheep": "sheep", "fish": "fish", "goose": "geese", "wolf": "wolves",
    "calf": "calves", "deer": "deer", "moose": "moose", "child": "children", "person": "people",
    "man": "men", "woman": "women", "elf": "elves", "leaf": "leaves", "scarf": "scarves",
    "shelf": "shelves", "loaf": "loaves", "foot": "feet", "tooth": "teeth", "knife": "knives",
    "potato": "potatoes", "tomato": "tomatoes", "mango": "mangoes", "starfish": "starfish",
    "jellyfish": "jellyfish", "goldfish": "goldfish", "hero": "heroes", "volcano": "volcanoes",
}

# -- who -----------------------------------------------------------------------------------------

GIRL_NAMES = tuple("""
Lily Mia Emma Sophie Anna Lucy Sara Zoe Ella Amy Rose Daisy Grace Chloe Ruby Maya Nora Olivia
Ava Isla Hannah Molly Kate Jenny Tina Rita Nina Lena Clara Alice Ivy Hazel Poppy Elsie Freya Eva
Julia Laura Sally Polly Betty Kitty Penny Holly Megan Abby Bella Stella Luna Violet Willow Fiona
Gina Heidi Irene Jade Kira Leah Maria Nadia Olga Paula Rosa Sandy Tara Uma Vera Wendy Yara Zara
Amara Priya Aisha Mei Yuki Sofia Lola Millie Annie Ellie Josie Maggie Tessa Dora Greta Hattie
Judy Lottie Martha Nell Pearl Susie Trudy Winnie Edith Flora Georgia Matilda
""".split())

BOY_NAMES = tuple("""
Tom Ben Max Sam Leo Jack Tim Finn Noah Liam Oscar Charlie Harry Jake Luke Mark Owen Peter Ryan
Theo Adam Alex Billy Bobby Danny Eddie Felix George Henry Ivan Joe Kevin Leon Milo Ned Oliver
Paul Rex Simon Toby Victor Will Zack Arlo Ethan Hugo Jasper Kai Mason Nico Omar Pablo Rafi Ravi
Sid Teddy Ali Amir Bruno Caleb Dexter Elliot Frank Gus Hank Isaac Jonah Kofi Marco Nate Percy
Ross Rufus Seth Tyler Vince Wesley Yusuf Archie Barney Cody Dylan Ernie Freddie Gabe Hector Jimmy
Kenny Lenny Morris Ollie Stanley Timmy Walter Benny Arthur Edgar
""".split())

PET_NAMES = tuple("""
Buddy Coco Rocky Spot Patch Whiskers Fluffy Snowball Pepper Ginger Biscuit Muffin Peanut Pip
Squeak Nibbles Bubbles Sunny Shadow Button Cookie Mittens Sparky Thumper Hoppy Dot Tiny Fuzzy
Ziggy Rusty Scout Oreo Noodle Pickles Waffles Pudding Socks Pebble Bean Acorn Clover Maple
Pumpkin Toffee Marshmallow Jellybean Twinkle Bramble Puddles Sprout Nutmeg Cinnamon Domino
""".split())

# Animals a story can be about (they get a name and he/she), and all animals (seen, met, helped).
HERO_ANIMALS = _items("""
puppy, kitten, bunny, rabbit, bear, fox, mouse, owl, duck, frog, pig, squirrel, turtle, hedgehog,
lamb, pony, monkey, penguin, elephant, lion, tiger, giraffe, zebra, panda, koala, deer, goat,
raccoon, otter, beaver, badger, chick, duckling, kangaroo, hamster, dragon, unicorn, dinosaur
""")
ANIMALS = HERO_ANIMALS + _items("""
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
    ("dog", "Woof", "barked"), ("puppy", "Woof", "barked"), ("cat", "Meow", "purred"),
    ("kitten", "Mew", "mewed"), ("cow", "Moo", "mooed"), ("duck", "Quack", "quacked"),
    ("duckling", "Quack", "quacked"), ("sheep", "Baa", "bleated"), ("lamb", "Baa", "bleated"),
    ("owl", "Hoot", "hooted"), ("frog", "Ribbit", "croaked"), ("pig", "Oink", "grunted"),
    ("hen", "Cluck", "clucked"), ("chick", "Peep", "peeped"), ("mouse", "Squeak", "squeaked"),
    ("lion", "Roar", "roared"), ("tiger", "Roar", "growled"), ("bear", "Grr", "growled"),
    ("horse", "Neigh", "neighed"), ("pony", "Neigh", "neighed"), ("goat", "Maa", "bleated"),
    ("bird", "Tweet", "chirped"), ("robin", "Tweet", "chirped"), ("bee", "Buzz", "buzzed"),
    ("goose", "Honk", "honked"), ("donkey", "Hee-haw", "brayed"), ("rooster", "Cock-a-doodle-doo", "crowed"),
)

FANTASY_KINDS = (  # (kind, "f" / "m" / "" for either)
    ("princess", "f"), ("prince", "m"), ("queen", "f"), ("king", "m"), ("knight", ""),
    ("fairy", "f"), ("wizard", ""), ("pirate", ""), ("robot", ""), ("mermaid", "f"),
    ("giant", ""), ("elf", ""), ("witch", "f"), ("troll", ""), ("astronaut", ""),
)

# Grown-ups a hero meets; each with a thing they give or know about.
PEOPLE = _items("""
farmer, baker, teacher, doctor, nurse, fisherman, sailor, pilot, painter, gardener, mailman,
firefighter, police officer, chef, builder, artist, singer, dancer, magician, librarian,
shopkeeper, zookeeper, scientist, explorer, inventor, musician, neighbor, old man, old woman,
clown, vet, dentist, bus driver, park ranger, lighthouse keeper, beekeeper, toymaker, tailor
""")
FAMILY = (  # (word in the story, how the hero calls them, gender)
    ("mom", "Mom", "f"), ("dad", "Dad", "m"), ("mother", "Mother", "f"), ("father", "Father", "m"),
    ("grandma", "Grandma", "f"), ("grandpa", "Grandpa", "m"), ("mommy", "Mommy", "f"),
    ("daddy", "Daddy", "m"), ("granny", "Granny", "f"), ("aunt", "Auntie", "f"),
    ("uncle", "Uncle", "m"), ("big sister", "Sis", "f"), ("big brother", "Bro", "m"),
)
GROUPS = ("friends", "best friends", "twins", "cousins", "neighbors", "classmates")

# -- what a character is like --------------------------------------------------------------------

TRAITS = _items("""
kind, curious, brave, shy, happy, playful, clever, gentle, cheerful, helpful, friendly, funny,
silly, smart, polite, careful, busy, lively, quiet, sweet, caring, thoughtful, patient, generous,
bold, adventurous, energetic, creative, hardworking, loyal, cheeky, clumsy, chatty, sleepy,
grumpy, bouncy, daring, dreamy, jolly, lazy, lonely, messy, nosy, proud, restless, sensible,
stubborn, timid, tidy, wise, bright, eager, noisy, merry, spirited, bashful, fearless
""")
SIZES = _items("little, small, tiny, big, tall, short, young, old, round, chubby, skinny, fluffy")
LOOKS = _items("""
shiny, soft, fuzzy, sparkly, striped, spotted, wooden, golden, silver, bright, old, new, round,
smooth, bumpy, shiny new, fancy, plain, pretty, beautiful, lovely, special, magic, tiny,
enormous, huge, little, small, big, heavy, light, squishy, cozy, warm, colorful, glittery,
dusty, muddy, broken, crooked, curly, fluffy, gigantic, glowing, hairy, lumpy, pointy, rusty,
scratchy, silky, slimy, sticky, stretchy, strange, velvet, wobbly, woolly, wrinkly, patchy
""")
COLORS = _items("""
red, blue, green, yellow, orange, purple, pink, brown, black, white, gray, gold, silver,
golden, navy, violet, turquoise, crimson, scarlet, lavender, teal, amber,
indigo, beige, maroon, sky blue, dark green, light blue, pale pink
""")
GOOD_FEELINGS = _items("""
happy, glad, excited, proud, thankful, grateful, joyful, cheerful, delighted, thrilled,
hopeful, calm, relieved, amazed, pleased, cozy, safe, warm inside, brave, content, peaceful,
overjoyed, giddy
""")
BAD_FEELINGS = _items("""
sad, upset, worried, scared, afraid, nervous, lonely, angry, grumpy, frightened, confused,
unhappy, gloomy, miserable, cross, jealous, bored, sorry, disappointed, anxious, uneasy,
frustrated, tearful, glum
""")

# -- where and when ------------------------------------------------------------------------------

OUTDOOR_PLACES = (  # (place, preposition for being there)
    ("park", "in"), ("forest", "in"), ("beach", "on"), ("farm", "on"), ("hill", "on"),
    ("river", "by"), ("lake", "by"), ("garden", "in"), ("meadow", "in"), ("zoo", "at"),
    ("playground", "at"), ("pond", "by"), ("woods", "in"), ("jungle", "in"), ("field", "in"),
    ("orchard", "in"), ("backyard", "in"), ("valley", "in"), ("mountain", "on"),
    ("island", "on"), ("seaside", "at"), ("swamp", "in"), ("desert", "in"), ("fair", "at"),
    ("harbor", "at"), ("village green", "on"), ("campsite", "at"), ("vegetable patch", "in"),
    ("sunflower field", "in"), ("old mill", "by"), ("waterfall", "by"), ("riverbank", "on"),
    ("cornfield", "in"), ("pumpkin patch", "in"), ("rose garden", "in"), ("sand dunes", "on"),
    ("school yard", "in"), ("town square", "in"), ("market", "at"), ("circus", "at"),
)
ROOMS = _items("""
kitchen, living room, bedroom, attic, basement, playroom, hallway, garage, dining room, cellar,
porch, laundry room, bathroom, garden shed, toy room
""")
HOMES = {  # where a hero of each sort lives
    "person": _items("""
        in a small house near the forest, in a little blue house by the sea, on a big farm,
        in a tall building in the city, in a cozy cottage at the end of the lane,
        in a busy town near the river, in a yellow house with a red door,
        in a quiet village at the foot of a hill, in a little white house with a big garden,
        in a wooden house by the lake, in an old farmhouse, in a tiny flat above a bakery
        """),
    "animal": _items("""
        in a hole under a big oak tree, in a cozy nest high in a tree, in a burrow under the hill,
        in a den deep in the forest, in a barn on a farm, by a quiet pond,
        in a hollow log in the woods, in a little house at the edge of the meadow,
        in a warm basket by the fire, under an old bridge, in a garden full of flowers
        """),
    "fantasy": _items("""
        in a castle on a hill, in a tall tower, in a cave by the sea, in a magic forest,
        in a kingdom far away, on a cloud high in the sky, in a palace made of glass,
        in a land of giants, on a ship that sailed the seas, in a village of elves
        """),
}
TOWNS = _items("village, town, city, kingdom, forest, valley, land, place, neighborhood, island")
TOWN_LOOKS = _items("""
small, quiet, busy, sunny, green, peaceful, pretty, faraway, sleepy, happy, snowy, windy,
little, lovely, magical, friendly, colorful, old
""")
WEATHER = _items("""
sunny, rainy, windy, cloudy, snowy, foggy, warm, cold, hot, chilly, bright, gray, stormy, cool,
breezy, frosty, misty, lovely, beautiful, quiet, fine, clear, wet, gloomy, icy
""")
TIMES = _items("morning, afternoon, day, evening")
SEASONS = _items("spring, summer, autumn, winter")
SKY_SIGHTS = _items("""
the sun was shining, the sky was blue, fluffy clouds floated by, a soft wind was blowing,
the birds were singing, the leaves were dancing in the wind, the grass was wet with dew,
the air smelled of flowers, bees were buzzing from flower to flower, the sky was clear and bright,
butterflies were flying over the grass, the trees were full of blossoms
""")

# -- things --------------------------------------------------------------------------------------

TREASURES = _items("""
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
FRUITS = _items("""
apple, banana, orange, pear, plum, peach, cherry, strawberry, grape, lemon, melon, mango,
kiwi, apricot, blueberry, raspberry, blackberry, coconut, pineapple, watermelon, fig, lime
""")
TREATS = _items("""
cookie, cupcake, muffin, pancake, waffle, sandwich, bun, pie, cake, donut, cracker, pretzel,
lollipop, candy cane, gingerbread man, biscuit, scone, carrot, tomato, potato, pumpkin,
cheese sandwich, jam tart, honey cake, sugar cookie, cinnamon roll, taco, pizza, pickle,
cheese stick, rice cake, egg roll, dumpling, bagel, croissant, toffee apple, cream puff, brownie,
jelly bean, gumdrop, marshmallow, cherry tart, peanut butter cookie, breadstick, popsicle
""")
FLOWERS = _items("""
daisy, rose, tulip, sunflower, daffodil, lily, violet, poppy, dandelion, bluebell, lilac,
marigold, pansy, orchid, buttercup, snowdrop, primrose, clover, iris, bluebonnet
""")
TREES = _items("oak, pine, apple, maple, willow, birch, cherry, palm, elm, chestnut, fir, plum")
SPOTS = _items("""
under a bush, behind a big rock, in the tall grass, under a big leaf, by the old fence,
inside a hollow log, under a pile of leaves, next to the pond, behind the shed, in a puddle,
under a bench, near the gate, beside a tree stump, in a flower bed, under the bridge,
on top of the wall, between two rocks, near a mossy stone, under a wheelbarrow, by the mailbox
""")
HOUSE_SPOTS = _items("""
under the bed, behind the sofa, in the toy box, under the table, in the closet,
behind the curtains, under a pillow, in the laundry basket, on the bookshelf, in a drawer,
behind the door, under the rug, in the bathtub, on the windowsill, under the stairs
""")
INSTRUMENTS = _items("drum, flute, guitar, violin, trumpet, harmonica, xylophone, piano, ukulele, tambourine")

# -- doing ---------------------------------------------------------------------------------------

# base past -ing, for every verb a story conjugates (the first word of each activity, and more).
VERB_FORMS = _items("""
play played playing, run ran running, swim swam swimming, climb climbed climbing,
build built building, draw drew drawing, paint painted painting, read read reading,
sing sang singing, dance danced dancing, ride rode riding, fly flew flying, bake baked baking,
pick picked picking, chase chased chasing, splash splashed splashing, collect collected collecting,
watch watched watching, look looked looking, count counted counting, dig dug digging,
make made making, feed fed feeding, plant planted planting, explore explored exploring,
roll rolled rolling, blow blew blowing, skip skipped skipping, hop hopped hopping,
jump jumped jumping, tell told telling, listen listened listening, visit visited visiting,
help helped helping, catch caught catching, throw threw throwing, kick kicked kicking,
write wrote writing, sew sewed sewing, knit knitted knitting, hunt hunted hunting,
stack stacked stacking, cook cooked cooking, swing swung swinging, slide slid sliding,
skate skated skating, hike hiked hiking, sail sailed sailing, row rowed rowing, wade waded wading,
float floated floating, spin spun spinning, twirl twirled twirling, whistle whistled whistling,
hum hummed humming, fold folded folding, color colored coloring, water watered watering,
gather gathered gathering, pet petted petting, brush brushed brushing, bounce bounced bouncing,
practice practiced practicing, learn learned learning, solve solved solving, find found finding,
go went going, sort sorted sorting, wash washed washing, race raced racing, toss tossed tossing,
feel felt feeling, lie lay lying, sit sat sitting, stomp stomped stomping, tickle tickled tickling,
juggle juggled juggling, whittle whittled whittling, decorate decorated decorating,
fix fixed fixing, sweep swept sweeping, pretend pretended pretending, wave waved waving,
march marched marching, spy spied spying, chat chatted chatting, giggle giggled giggling,
cuddle cuddled cuddling, share shared sharing, invent invented inventing, tap tapped tapping,
drum drummed drumming, ring rang ringing, search searched searching, gaze gazed gazing,
peek peeked peeking, nap napped napping, sniff sniffed sniffing, squeeze squeezed squeezing,
carve carved carving, polish polished polishing, string strung stringing, weave wove weaving,
hang hung hanging, fill filled filling, chalk chalked chalking, wrap wrapped wrapping,
design designed designing, mix mixed mixing, tend tended tending, trace traced tracing,
pour poured pouring, bury buried burying, scribble scribbled scribbling,
shovel shoveled shoveling, rake raked raking, crawl crawled crawling, teach taught teaching,
recite recited reciting, imagine imagined imagining, keep kept keeping,
train trained training, groom groomed grooming, measure measured measuring,
perform performed performing, shoot shot shooting, dress dressed dressing, turn turned turning
""")
# What a hero loves to do: base-form phrases whose first word is the only verb (in VERB_FORMS).
# {animals} {fruits} {color} {instrument} {his} are filled in by generate.fill.
ACTIVITIES = _items("""
play in the sand, build sandcastles, draw pictures of {animals}, paint pictures of {animals},
read books about {animals}, sing songs, dance in the rain, ride {his} bike, fly kites,
pick {flowers}, chase butterflies, splash in puddles, collect shells, collect {color} stones,
watch the birds, look at the stars, count the clouds, dig in the mud, make mud pies,
feed the ducks, plant seeds in the garden, explore the woods, roll down the hill,
blow bubbles, skip stones on the pond, hop like a frog, jump rope, tell jokes,
listen to stories, visit {his} grandma, help {his} dad in the garden, catch bugs in a jar,
throw sticks for the dog, kick a ball in the yard, write little poems, sew clothes for {his} dolls,
knit scarves, hunt for treasure, stack blocks into tall towers, cook soup with {his} mom,
swing on the swings, slide down the big slide, skate on the ice, hike up the hill,
sail paper boats, wade in the stream, float on {his} back in the lake, spin in circles,
twirl in {his} {color} dress, whistle little tunes, hum to {himself}, fold paper animals,
color pictures of {animals}, water the flowers, gather {fruits} in the orchard, pet the cat,
brush the pony, bounce on the bed, practice the {instrument}, learn new words,
solve puzzles, find pretty leaves, go for long walks, sort {his} buttons by color,
wash the car with {his} dad, race {his} friends to the tree, toss leaves in the air,
lie in the grass, sit by the window, stomp in the snow, juggle {fruits}, decorate cookies,
fix broken toys, sweep the porch, pretend to be a pirate, pretend to be a princess,
march like a soldier, spy on the squirrels, chat with the neighbors, cuddle {his} teddy bear,
invent new games, drum on pots and pans, ring {his} bicycle bell, gaze at the moon,
peek into bird nests, nap in the sun, sniff the flowers, squeeze lemons for lemonade,
play hide and seek, play tag with {his} friends, play the {instrument}, bake {treats},
carve little boats out of wood, polish {his} {color} shoes, string beads into necklaces,
weave baskets out of grass, hang {color} lanterns in the trees, fill jars with fireflies,
chalk pictures on the sidewalk, wrap presents for {his} friends, design dresses for {his} dolls,
mix colors to make new ones, tend the vegetable garden, trace the shapes of leaves,
pour water into the sandbox, bury treasure in the backyard, scribble funny faces,
shovel snow off the path, rake leaves into big piles and jump in them, crawl through tunnels,
teach {his} dog new tricks, recite poems about {animals}, imagine {himself} as a sailor,
keep a diary, train for races, groom the horses on the farm, measure how tall the sunflowers were,
perform magic tricks, shoot hoops, dress up as a pirate, turn cartwheels on the grass,
watch {animals} at the zoo, build forts out of branches, collect acorns and pine cones,
make necklaces of {flowers}, read comics under the blanket, dig for worms after the rain,
draw maps of secret islands, visit the lighthouse, ride the merry-go-round, splash in the waves
""")
MOVE_PAST = _items("""
ran, walked, hurried, skipped, hopped, raced, dashed, wandered, strolled, marched, tiptoed,
jogged, zoomed, rushed, scampered, trotted, bounced, went, headed, set off
""")
LOOK_PAST = _items("looked, searched, checked, peeked, hunted")

# -- endings -------------------------------------------------------------------------------------

MORALS = {
    "lost": _items("""
        friends always help each other, it is good to ask for help, a good friend is a real treasure,
        two pairs of eyes are better than one, you should take good care of the things you love
        """),
    "fear": _items("""
        being brave means doing something even when you are scared, most scary things are not so scary
        after all, it is okay to be afraid, you can be brave too, new things can be fun
        """),
    "share": _items("""
        sharing makes everyone happy, sharing is caring, things are more fun when you share them,
        a friend is worth more than a toy, kindness always comes back to you
        """),
    "help": _items("""
        helping others feels good, even a small friend can do a big thing, kindness is never wasted,
        every animal needs a friend, it is good to be kind to animals
        """),
    "gift": _items("""
        the best gifts come from the heart, you should never give up, mistakes help you learn,
        love matters more than anything, trying again is the way to get better
        """),
    "explore": _items("""
        the world is full of surprises, it is fun to be curious, there is magic everywhere
        if you look for it, every day can be an adventure
        """),
    "race": _items("""
        helping a friend is more important than winning, friends matter more than prizes,
        winning is not everything, it is more fun to finish together
        """),
    "listen": _items("""
        grown-ups give rules for a reason, it is important to listen, saying sorry makes things better,
        it is best to tell the truth, you should think before you act
        """),
    "rain": _items("""
        there is always a way to have fun, even a gray day can be a good day, every cloud has
        a silver lining, fun can be found anywhere
        """),
    "grow": _items("""
        good things take time, patience is worth it, little seeds can grow into big things,
        if you take care of something, it will grow
        """),
    "new": _items("""
        everyone needs a friend, being different is okay, a kind word can make a new friend,
        it is good to include everyone, a stranger is a friend you have not met yet
        """),
    "cook": _items("""
        cooking together is fun, a little mess is okay, food tastes better when you make it with love,
        it is fun to help in the kitchen
        """),
    "wish": _items("""
        kindness is the best magic, the best wishes are for others, a kind heart is worth more than gold,
        thinking of others makes you happy too
        """),
    "trip": _items("""
        good things come to those who wait, the best things are worth waiting for,
        it is good to be patient
        """),
}

# -- more: for the later plots and a few descriptions --------------------------------------------

GROWN = (  # (what grows from a seed, its color when ripe)
    ("carrot", "orange"), ("tomato", "red"), ("pumpkin", "orange"), ("pea", "green"), ("bean", "green"),
    ("sunflower", "yellow"), ("strawberry", "red"), ("cucumber", "green"), ("radish", "red"),
    ("beet", "purple"), ("cabbage", "green"), ("potato", "brown"), ("pepper", "red"), ("turnip", "white"),
    ("eggplant", "purple"), ("zucchini", "green"), ("melon", "green"), ("watermelon", "green"),
    ("tulip", "red"), ("daisy", "white"), ("rose", "pink"), ("poppy", "red"), ("marigold", "orange"),
    ("bluebell", "blue"), ("onion", "white"), ("squash", "yellow"), ("pea pod", "green"),
)
GAMES = _items("""
tag, hide and seek, hopscotch, marbles, leapfrog, catch, tic-tac-toe, dominoes, checkers,
follow the leader, red light green light, duck duck goose, musical chairs, I spy,
freeze tag, Simon says, jump rope, kickball, soccer, ring toss, tug of war, treasure hunt
""")
DIFFERENCES = _items("""
was very shy and did not talk much, came from a land far away and spoke another language,
could not run very fast, was much bigger than everyone else, was very small, had a funny laugh,
wore big round glasses, liked different games, was always very quiet, had a loud voice,
had only one ear that stood up, had a squeaky voice, walked with a little limp
""")
DRINKS = _items("lemonade, milk, juice, hot cocoa, tea, water, apple juice, orange juice")
EYES = _items("brown, blue, green, gray, dark, bright, sparkly, big brown, big blue, kind, sleepy, round")
SMILES = _items("""
a big smile, a kind heart, a loud laugh, a gap in {his} teeth, a funny hat, a red nose,
a soft voice, lots of freckles, a big imagination, a happy grin, rosy cheeks, a curious nose
""")
ADVERBS = _items("""
softly, quietly, happily, sadly, slowly, quickly, gently, loudly, proudly, bravely, kindly,
sleepily, nervously, excitedly, carefully, shyly, cheerfully, calmly, politely, eagerly
""")
WISHES = _items("""
a mountain of candy, a pony of {his} own, wings to fly like a bird, a castle made of chocolate,
all the toys in the world, legs as long as a giraffe's, a day with no bedtime, a pool full of jelly,
a rocket to the moon, a dragon for a pet, a rainbow-colored bike, shoes that could jump over houses,
a tree that grew cookies, a boat that could sail to the stars
""")
