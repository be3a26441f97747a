"""What the story generator's characters do, by category: verbs and their forms, activities, morals
and stock phrases (words.py holds who and where). Tuples, as there: the corpus a seed gives never
depends on hashing."""

from .words import word_list

# -- doing ---------------------------------------------------------------------------------------

# base past -ing, for every verb a story conjugates (the first word of each activity, and more).
VERB_FORMS = word_list("""
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
ACTIVITIES = word_list("""
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
MOVE_PAST = word_list("""
ran, walked, hurried, skipped, hopped, raced, dashed, wandered, strolled, marched, tiptoed,
jogged, zoomed, rushed, scampered, trotted, bounced, went, headed, set off
""")
LOOK_PAST = word_list("looked, searched, checked, peeked, hunted")

# -- endings -------------------------------------------------------------------------------------

MORALS = {
    "lost": word_list("""
        friends always help each other, it is good to ask for help, a good friend is a real treasure,
        two pairs of eyes are better than one, you should take good care of the things you love
        """),
    "fear": word_list("""
        being brave means doing something even when you are scared, most scary things are not so scary
        after all, it is okay to be afraid, you can be brave too, new things can be fun
        """),
    "share": word_list("""
        sharing makes everyone happy, sharing is caring, things are more fun when you share them,
        a friend is worth more than a toy, kindness always comes back to you
        """),
    "help": word_list("""
        helping others feels good, even a small friend can do a big thing, kindness is never wasted,
        every animal needs a friend, it is good to be kind to animals
        """),
    "gift": word_list("""
        the best gifts come from the heart, you should never give up, mistakes help you learn,
        love matters more than anything, trying again is the way to get better
        """),
    "explore": word_list("""
        the world is full of surprises, it is fun to be curious, there is magic everywhere
        if you look for it, every day can be an adventure
        """),
    "race": word_list("""
        helping a friend is more important than winning, friends matter more than prizes,
        winning is not everything, it is more fun to finish together
        """),
    "listen": word_list("""
        grown-ups give rules for a reason, it is important to listen, saying sorry makes things better,
        it is best to tell the truth, you should think before you act
        """),
    "rain": word_list("""
        there is always a way to have fun, even a gray day can be a good day, every cloud has
        a silver lining, fun can be found anywhere
        """),
    "grow": word_list("""
        good things take time, patience is worth it, little seeds can grow into big things,
        if you take care of something, it will grow
        """),
    "new": word_list("""
        everyone needs a friend, being different is okay, a kind word can make a new friend,
        it is good to include everyone, a stranger is a friend you have not met yet
        """),
    "cook": word_list("""
        cooking together is fun, a little mess is okay, food tastes better when you make it with love,
        it is fun to help in the kitchen
        """),
    "wish": word_list("""
        kindness is the best magic, the best wishes are for others, a kind heart is worth more than gold,
        thinking of others makes you happy too
        """),
    "trip": word_list("""
        good things come to those who wait, the best things are worth waiting for,
        it is good to be patient
        """),
}

# -- more: for the later plots and a few descriptions --------------------------------------------

GROWN = (  # (what grows from a seed, its color when ripe)
    ("carrot", "orange"),
    ("tomato", "red"),
    ("pumpkin", "orange"),
    ("pea", "green"),
    ("bean", "green"),
    ("sunflower", "yellow"),
    ("strawberry", "red"),
    ("cucumber", "green"),
    ("radish", "red"),
    ("beet", "purple"),
    ("cabbage", "green"),
    ("potato", "brown"),
    ("pepper", "red"),
    ("turnip", "white"),
    ("eggplant", "purple"),
    ("zucchini", "green"),
    ("melon", "green"),
    ("watermelon", "green"),
    ("tulip", "red"),
    ("daisy", "white"),
    ("rose", "pink"),
    ("poppy", "red"),
    ("marigold", "orange"),
    ("bluebell", "blue"),
    ("onion", "white"),
    ("squash", "yellow"),
    ("pea pod", "green"),
)
GAMES = word_list("""
tag, hide and seek, hopscotch, marbles, leapfrog, catch, tic-tac-toe, dominoes, checkers,
follow the leader, red light green light, duck duck goose, musical chairs, I spy,
freeze tag, Simon says, jump rope, kickball, soccer, ring toss, tug of war, treasure hunt
""")
DIFFERENCES = word_list("""
was very shy and did not talk much, came from a land far away and spoke another language,
could not run very fast, was much bigger than everyone else, was very small, had a funny laugh,
wore big round glasses, liked different games, was always very quiet, had a loud voice,
had only one ear that stood up, had a squeaky voice, walked with a little limp
""")
DRINKS = word_list("lemonade, milk, juice, hot cocoa, tea, water, apple juice, orange juice")
EYES = word_list("brown, blue, green, gray, dark, bright, sparkly, big brown, big blue, kind, sleepy, round")
SMILES = word_list("""
a big smile, a kind heart, a loud laugh, a gap in {his} teeth, a funny hat, a red nose,
a soft voice, lots of freckles, a big imagination, a happy grin, rosy cheeks, a curious nose
""")
ADVERBS = word_list("""
softly, quietly, happily, sadly, slowly, quickly, gently, loudly, proudly, bravely, kindly,
sleepily, nervously, excitedly, carefully, shyly, cheerfully, calmly, politely, eagerly
""")
WISHES = word_list("""
a mountain of candy, a pony of {his} own, wings to fly like a bird, a castle made of chocolate,
all the toys in the world, legs as long as a giraffe's, a day with no bedtime, a pool full of jelly,
a rocket to the moon, a dragon for a pet, a rainbow-colored bike, shoes that could jump over houses,
a tree that grew cookies, a boat that could sail to the stars
""")
