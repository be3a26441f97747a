"""The plots of stories/generate.py, each a problem, an attempt and a resolution told by a
`Teller` (stories/teller.py) about a hero; PLOTS lists them all. The plots themselves are in
plots_friends.py (among friends and animals), plots_family.py (at home with the family) and
plots_outdoors.py (out of doors)."""

from .plots_family import cooking, listening, making_gift, rainy_day, scared
from .plots_friends import helping, lost_thing, new_friend, race, sharing
from .plots_outdoors import adventure, garden, trip, wish

PLOTS = (
    lost_thing,
    scared,
    sharing,
    helping,
    making_gift,
    adventure,
    race,
    listening,
    rainy_day,
    garden,
    new_friend,
    trip,
    cooking,
    wish,
)
