"""Long user-assistant conversations and questions about them, generated from a seed.

The retrieval benchmark (bench/retrieval.py) needs what LoCoMo-style benchmarks have: months of
sessions between a user and an assistant, hundreds of messages each, and questions asked later
whose answer sits in exactly one message. This module writes them from templates:

- A conversation follows a dozen *threads* of the user's life (a new dog, a trip, a kitchen
  renovation...) drawn from THREADS. A thread runs over a window of sessions: a few *facts*
  (each one evidence message holding a detail: the breed, the hotel, the physio's name), many
  *remarks* on the same subject that hold none of the details, and assistant replies that echo
  the subject. So every question has distractors that share its vocabulary.
- Between threads: requests for help (an email, a recipe) with long assistant answers, and
  small talk, as in a real assistant's log.
- A question is written as the user would ask it later: its own wording, not the message's.
  Each thread's *concepts* have several surface forms (dog / puppy / pup); a question reuses
  the form its evidence used with probability SAME_FORM and picks another one otherwise, and
  question templates use their own verbs and frames ("What kind of dog did I get" for "We
  brought home a beagle"). Past tense in messages, present in questions, no stemming in BM25:
  the partial lexical overlap LoCoMo has.
- A question is kept only if its answer (the slot value, e.g. "beagle") occurs in its evidence
  message and in no other message of the conversation: answerable from that message alone.

Everything is drawn from `random.Random(f"{seed}:{number}")`: the same seed, the same data.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

# Probability that a question uses the same surface form of a concept as its evidence message.
SAME_FORM = 0.65
THREADS_PER_CONVERSATION = 13
SESSIONS = 24
REMARKS_PER_THREAD = (6, 9)
HELP_EXCHANGES = 30
SMALL_TALK_EXCHANGES = 24
# A user message gets some small talk around it this often (messages are rarely one fact).
CHATTER = 0.3
START = datetime(2023, 1, 9, 9, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Message:
    id: str
    session_id: str
    role: str  # "user" or "assistant"
    text: str
    created_at: float  # epoch seconds


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    evidence_id: str
    answer: str
    thread: str


@dataclass(frozen=True)
class Conversation:
    id: str
    user: str
    messages: tuple[Message, ...]
    questions: tuple[Question, ...]


@dataclass(frozen=True)
class Fact:
    answer: str  # the slot whose value answers the question
    evidence: tuple[str, ...]
    questions: tuple[str, ...]


@dataclass(frozen=True)
class Thread:
    name: str
    slots: Mapping[str, tuple[str, ...]]
    concepts: Mapping[str, tuple[str, ...]]
    facts: tuple[Fact, ...]
    remarks: tuple[str, ...]
    replies: tuple[str, ...]


# ---------------------------------------------------------------------------------------------
# Value pools. A value is used at most once per conversation (drawn without replacement across
# every slot that reads the same pool), so an answer cannot turn up in another thread.

USERS = (
    "Maya", "Jonas", "Priya", "Tomás", "Ingrid", "Kwame", "Lena", "Hiroshi", "Sofia", "Dmitri",
    "Amara", "Felix", "Noor", "Rafael", "Elif", "Callum",
)  # fmt: skip
PEOPLE = (
    "Hannah", "Marcus", "Aisha", "Diego", "Chloe", "Ravi", "Greta", "Omar", "Bea", "Lukas",
    "Yuki", "Nadia", "Pablo", "Freya", "Tobias", "Leila", "Samir", "Ines", "Arjun", "Zoe",
    "Mateo", "Clara", "Jasper", "Wanjiru", "Esme", "Bruno", "Keiko", "Oscar", "Farah", "Ivo",
)  # fmt: skip
SURNAMES = (
    "Okafor", "Lindqvist", "Moreau", "Castellanos", "Brennan", "Takahashi", "Novak", "Haddad",
    "Fitzgerald", "Petrov", "Albrecht", "Mensah", "Varga", "Quintero", "Sato", "Kowalczyk",
    "Delacroix", "Abernathy", "Rossi", "Nakamura",
)  # fmt: skip
CITIES = (
    "Lisbon", "Kyoto", "Reykjavik", "Marrakesh", "Vienna", "Oaxaca", "Tallinn", "Hanoi",
    "Edinburgh", "Cape Town", "Montreal", "Porto", "Seville", "Krakow", "Bergen", "Valparaiso",
)  # fmt: skip
TOWNS = (
    "Millbrook", "Ashford", "Riverside", "Oakridge", "Elmstead", "Fairhaven", "Kingsbury",
    "Westerly", "Harrowgate", "Pinecrest", "Larkfield", "Stonebridge",
)  # fmt: skip
DOG_BREEDS = (
    "beagle", "corgi", "border collie", "dachshund", "whippet", "labrador", "poodle",
    "shiba inu", "greyhound", "cocker spaniel",
)  # fmt: skip
PET_NAMES = (
    "Biscuit", "Pepper", "Mochi", "Juniper", "Waffles", "Ziggy", "Clementine", "Pickle",
    "Bramble", "Nacho", "Luna", "Otis",
)  # fmt: skip
DISHES = (
    "grilled sardines", "octopus stew", "ramen", "tagine", "goulash", "mole negro",
    "pho", "seafood paella", "dumplings", "smoked trout", "ceviche", "pierogi",
)  # fmt: skip
LODGINGS = (
    "Casa Azul", "Hotel Miramar", "Blue Door Inn", "Pension Aurora", "Harbour Loft",
    "Villa Serena", "Old Mill Guesthouse", "Hotel Lanterna",
)  # fmt: skip
LUGGAGE = ("green suitcase", "camera bag", "hiking backpack", "guitar case", "duffel bag")
SNACKS = (
    "a chocolate bar", "a bunch of grapes", "a bag of raisins", "half an onion",
    "a tube of toothpaste", "a whole sock",
)  # fmt: skip
COMPANIES = (
    "Northwind Analytics", "Bluefin Labs", "Hexagon Freight", "Copperleaf Health",
    "Tidewater Energy", "Lumen Robotics", "Granite Insurance", "Saffron Media",
    "Brightline Logistics", "Orchid Software",
)  # fmt: skip
ROLES = (
    "product manager", "data engineer", "UX researcher", "operations lead", "solutions architect",
    "content strategist", "QA lead", "account director",
)  # fmt: skip
AMOUNTS = (
    "fifteen percent", "twelve thousand", "eight percent", "twenty thousand", "nine percent",
    "five thousand",
)  # fmt: skip
COLOURS = ("sage green", "navy blue", "terracotta", "mustard yellow", "charcoal grey", "teal")
MATERIALS = ("quartz", "butcher block", "marble", "terrazzo", "concrete", "soapstone")
TIMES = (
    "2 hours 4 minutes", "1 hour 58 minutes", "2 hours 11 minutes", "1 hour 49 minutes",
    "2 hours 19 minutes", "1 hour 55 minutes",
)  # fmt: skip
SHOES = ("Brooks Ghost", "Hoka Clifton", "Asics Novablast", "Saucony Ride", "New Balance 880")
VENUES = (
    "a vineyard", "a lighthouse", "a botanical garden", "an old barn", "a lakeside cabin",
    "a rooftop terrace", "a castle ruin",
)  # fmt: skip
SONGS = (
    "Wonderwall", "Hallelujah", "Blackbird", "Wish You Were Here", "Hotel California",
    "Stand By Me", "Fast Car", "Landslide",
)  # fmt: skip
INSTRUMENT_BRANDS = ("Yamaha", "Taylor", "Martin", "Fender", "Cort", "Epiphone")
VEGETABLES = (
    "zucchini", "kale", "cherry tomatoes", "snap peas", "butternut squash", "radishes",
    "rhubarb", "fennel",
)  # fmt: skip
PESTS = ("slugs", "aphids", "a groundhog", "squirrels", "cabbage moths", "rabbits")
INJURIES = ("torn meniscus", "sprained ankle", "stress fracture", "pulled hamstring")
EXERCISES = ("wall sits", "step-downs", "clamshells", "single-leg bridges", "calf raises")
CARS = (
    "Mazda 3", "Toyota Corolla", "Subaru Outback", "Kia Niro", "Honda Civic", "Skoda Octavia",
    "Volvo V60",
)  # fmt: skip
BOOKS = (
    "The Salt Road", "A Winter Atlas", "The Glass Orchard", "Night Ferry", "The Cartographer",
    "Small Hours", "The Quiet Tide", "Paper Lanterns", "The Last Lighthouse",
)  # fmt: skip
NEIGHBOURHOODS = (
    "Greenpoint", "Elm Park", "the Riverside district", "Kensal Rise", "Hillcrest",
    "the old harbour", "Southgate",
)  # fmt: skip
RENTS = ("1,850", "2,100", "1,640", "2,375", "1,990")
BREADS = ("rye", "spelt", "whole wheat", "olive and rosemary", "walnut", "cranberry")
STARTERS = ("Bubbles", "Doughy Parton", "Clint Yeastwood", "Gluten Morgan", "Sir Loaf")
SUBJECTS = ("fractions", "spelling", "the solar system", "long division", "the Romans")
TEACHERS = ("Ms. Abernathy", "Mr. Quintero", "Ms. Varga", "Mr. Fitzgerald", "Ms. Petrov")
SPORTS = ("swimming", "chess club", "karate", "football", "gymnastics", "robotics club")
SHIFT_DAYS = ("Tuesday evenings", "Saturday mornings", "Thursday afternoons", "Sunday mornings")
LANGUAGES = ("Spanish", "Portuguese", "Italian", "Japanese", "German", "Korean")
APPS = ("Duolingo", "Babbel", "Memrise", "Busuu", "Pimsleur")
TUTORS = ("Valentina", "Kenji", "Lucia", "Matthias", "Beatriz", "Min-jun")
STREAKS = ("41", "87", "120", "63", "200", "152")
GOALS = ("forty thousand", "sixty thousand", "thirty-five thousand", "fifty-five thousand")
MONTHLY = ("600", "850", "1,200", "475", "950")
BANKS = ("Harbor Credit Union", "Summit Bank", "Evergreen Savings", "Keystone Mutual")
CAMERAS = ("Fujifilm X-T30", "Sony a6400", "Nikon Z50", "Canon R50", "Olympus OM-5")
LENSES = ("35mm prime", "50mm f/1.8", "macro", "wide-angle zoom", "70-200mm zoom")
PHOTO_SUBJECTS = ("a heron", "the northern lights", "a fox cub", "a lightning storm", "an owl")
GIFTS = (
    "a pottery class voucher", "a vintage record player", "a hammock", "a telescope",
    "a bread maker", "a kayak rental day",
)  # fmt: skip
BANDS = (
    "The Marrow Lights", "Velvet Harbour", "Saint Juniper", "The Paper Kites Club",
    "Neon Orchard", "Glass Animals Revival",
)  # fmt: skip
FESTIVALS = ("Greenfield", "Riverbend Fest", "Summer Static", "Wildwood Weekend")
CAMPSITES = ("Pine Hollow", "Eagle Lake", "Bear Creek", "Silver Falls", "Moss Ridge")
DENTAL = ("a cracked molar", "two cavities", "a wisdom tooth infection", "a chipped incisor")
GAMES = ("Wingspan", "Catan", "Azul", "Terraforming Mars", "Ticket to Ride", "Cascadia")
CONFERENCES = ("DataConf", "UX Summit", "CloudWeek", "OpsDays", "PyData North")
TOPICS = (
    "supply chain forecasting", "onboarding drop-off", "warehouse robotics",
    "pricing experiments", "churn prediction",
)  # fmt: skip
MEDIA = ("watercolour", "oil pastels", "acrylics", "gouache", "charcoal")
TEACHER_NAMES = ("Ruth", "Emil", "Solveig", "Antoine", "Marisol", "Declan")
AILMENTS = ("hip replacement", "cataract surgery", "a bad fall", "pneumonia")
RECIPES = ("lemon drizzle cake", "shepherd's pie", "apple strudel", "chicken soup")
PLANTS = ("a fiddle-leaf fig", "a monstera", "an olive tree", "a lemon tree", "a bonsai")


def _fact(answer: str, evidence: Sequence[str], questions: Sequence[str]) -> Fact:
    return Fact(answer, tuple(evidence), tuple(questions))


THREADS: tuple[Thread, ...] = (
    Thread(
        "dog",
        {"breed": DOG_BREEDS, "pet": PET_NAMES, "doctor": SURNAMES, "snack": SNACKS},
        {"dog": ("dog", "puppy", "pup"), "shelter": ("shelter", "rescue"),
         "vet": ("vet", "veterinarian", "animal clinic")},
        (
            _fact("breed",
                  ["We finally brought home a {breed} {dog} from the {shelter} this weekend!",
                   "Big news: I adopted a {dog}! She's a {breed} mix from the local {shelter}."],
                  ["What breed is the {dog} I adopted?",
                   "What kind of {dog} did I get from the {shelter}?",
                   "Which breed did my new {dog} turn out to be?"]),
            _fact("pet",
                  ["We settled on a name for the {dog}: {pet}. The kids voted for it.",
                   "The {dog} finally has a name, we went with {pet}."],
                  ["What did we end up calling the {dog}?", "What's my {dog}'s name?",
                   "Which name did the kids pick for our {dog}?"]),
            _fact("doctor",
                  ["First {vet} checkup done. Dr. {doctor} says the {dog} is healthy but needs "
                   "one more round of shots.",
                   "We switched to Dr. {doctor} at the {vet} near the park, much nicer than the "
                   "last one."],
                  ["Who is the {vet} looking after my {dog}?", "What's the name of our {vet}?",
                   "Which doctor does the {dog}'s checkups?"]),
            _fact("snack",
                  ["Scary night: the {dog} swallowed {snack} off the counter and we rushed to "
                   "the emergency {vet}.",
                   "The {dog} got into {snack} while we were out, so we spent the evening at "
                   "the emergency {vet}."],
                  ["What did my {dog} eat that sent us to the emergency {vet}?",
                   "Why did we have to rush the {dog} to the {vet} that night?"]),
        ),
        (
            "The {dog} chewed up another pair of my shoes.",
            "House training the {dog} is slow going, lots of accidents on the rug.",
            "Early morning walks with the {dog} are growing on me.",
            "The {dog} barked at the mail carrier for ten minutes straight.",
            "Bought a bigger crate for the {dog}, hoping she sleeps through the night.",
            "Our cat is still not impressed by the new {dog}.",
            "The {dog} learned to sit in one afternoon!",
            "Is it normal for a {dog} to sleep eighteen hours a day?",
            "Took the {dog} to the beach, she was terrified of the waves.",
            "Training class at the {shelter} starts next week, fingers crossed.",
            "How often should a young {dog} eat? She always acts starving.",
        ),
        (
            "Aww, how is the {dog} settling in?",
            "That's so sweet. Patience pays off with training.",
            "A tired {dog} is a good {dog}: long walks really help.",
            "Keep an eye on what's left on the counters!",
            "Consistent routines help a new {dog} feel safe.",
            "Cats usually come around after a few weeks.",
        ),
    ),
    Thread(
        "trip",
        {"city": CITIES, "friend": PEOPLE, "dish": DISHES, "lodging": LODGINGS,
         "luggage": LUGGAGE},
        {"trip": ("trip", "vacation", "holiday"), "flight": ("flight", "plane ride"),
         "hotel": ("hotel", "place we stayed", "accommodation")},
        (
            _fact("friend",
                  ["Booked the {trip} to {city}! {friend} is coming with me, we've talked "
                   "about it for years.",
                   "{friend} and I finally locked in dates for {city}, so excited to travel "
                   "together."],
                  ["Who am I going to {city} with?", "Which friend is joining me on the {trip}?",
                   "Who's travelling with me to {city}?"]),
            _fact("dish",
                  ["Best thing I ate in {city} was the {dish} at a tiny place by the harbour.",
                   "I'm still dreaming about the {dish} we had on our last night in {city}."],
                  ["What was the best food I had in {city}?",
                   "Which meal did I love most on the {trip}?",
                   "What did I eat in {city} that I keep raving about?"]),
            _fact("luggage",
                  ["Disaster on the way back: the airline lost my {luggage}, it's somewhere "
                   "between {city} and home.",
                   "Landed and my {luggage} never showed up on the carousel. Great end to the "
                   "{trip}."],
                  ["What did the airline lose on my way home?",
                   "Which of my bags went missing after the {flight}?"]),
            _fact("lodging",
                  ["We stayed at the {lodging} in the old town, the rooftop view was unreal.",
                   "The {lodging} was perfect, walking distance to everything in {city}."],
                  ["Where did we stay in {city}?", "What was the name of the {hotel} on my {trip}?",
                   "Which {hotel} did we book?"]),
        ),
        (
            "Only three weeks until {city}!",
            "Should I bring a rain jacket to {city} this time of year?",
            "Found a cheap {flight} to {city} but the layover is awful.",
            "Started a packing list for the {trip}.",
            "Does anyone actually sleep on a long {flight}?",
            "Back from {city}, completely exhausted but happy.",
            "Sorting through all the photos from the {trip}.",
            "Jet lag is hitting me hard after {city}.",
            "Need to exchange some money before the {trip}.",
            "The walking tour in {city} was the highlight, our guide was hilarious.",
        ),
        (
            "How exciting! Have you planned an itinerary for {city}?",
            "{city} is lovely this time of year.",
            "Welcome back! How was the {trip}?",
            "Packing cubes are a game changer.",
            "Drink plenty of water on the {flight}, it helps with jet lag.",
        ),
    ),
    Thread(
        "job",
        {"company": COMPANIES, "role": ROLES, "boss": PEOPLE, "raise": AMOUNTS},
        {"job": ("job", "position", "role"), "interview": ("interview", "hiring process"),
         "manager": ("manager", "boss", "team lead")},
        (
            _fact("company",
                  ["I got the offer! Starting at {company} next month.",
                   "Signed the contract with {company} today, I can't believe it."],
                  ["Which company hired me?", "Where is my new {job}?",
                   "What's the name of the place I'm going to work at?"]),
            _fact("role",
                  ["The title is {role}, which is a step up from what I do now.",
                   "They want me in as a {role}, leading a small team."],
                  ["What's my title at the new {job}?", "What {job} did they offer me?",
                   "What will I be doing at the new place?"]),
            _fact("boss",
                  ["Met my new {manager} {boss} today, she seems sharp and very direct.",
                   "I'll be reporting to {boss}, who used to run the analytics group."],
                  ["Who is my {manager} at the new {job}?", "Who do I report to now?",
                   "What's the name of my new {manager}?"]),
            _fact("raise",
                  ["The salary is {raise} more than I make now, which settled it.",
                   "They matched my ask: {raise} above my current pay."],
                  ["How much more will I earn in the new {job}?",
                   "What pay bump did I get by switching?"]),
        ),
        (
            "Second round {interview} tomorrow, I'm so nervous.",
            "The {interview} had a take-home exercise, took me all weekend.",
            "Handed in my notice today. Weird feeling.",
            "First week at the new {job} was a blur of onboarding.",
            "My {manager} wants a thirty-sixty-ninety day plan from me.",
            "Commute to the new {job} is twenty minutes longer, ugh.",
            "Still not sure I made the right call leaving my old team.",
            "Had my first one-on-one with my {manager}, it went well.",
            "Imposter syndrome is real this week.",
            "The new {job} has free lunch on Fridays, small wins.",
        ),
        (
            "Congratulations! That's a big step.",
            "How are you feeling about the new {job}?",
            "Good luck with the {interview}! You've prepared well.",
            "It's normal to feel unsure during the first weeks.",
            "Setting expectations early with your {manager} is smart.",
        ),
    ),
    Thread(
        "kitchen",
        {"colour": COLOURS, "material": MATERIALS, "builder": PEOPLE, "cost": AMOUNTS},
        {"kitchen": ("kitchen", "kitchen remodel", "renovation"),
         "cabinets": ("cabinets", "cupboards"), "counter": ("countertop", "worktop")},
        (
            _fact("colour",
                  ["We're painting the {cabinets} {colour}, bold choice but I love it.",
                   "Picked the paint for the {cabinets} at last: {colour}."],
                  ["What colour did we choose for the {cabinets}?",
                   "Which shade are the {cabinets} going to be?"]),
            _fact("material",
                  ["Went with {material} for the {counter}, it was that or going over budget.",
                   "The {material} {counter} got installed today and it looks amazing."],
                  ["What is the new {counter} made of?",
                   "Which material did we pick for the {counter}?"]),
            _fact("builder",
                  ["Hired a contractor, {builder}, who did our neighbours' place.",
                   "{builder} is running the {kitchen} job, she came highly recommended."],
                  ["Who is the contractor on the {kitchen}?",
                   "Which builder did we hire for the {kitchen}?"]),
            _fact("cost",
                  ["Final bill came in {cost} over the estimate. Ouch.",
                   "We ended up {cost} over budget on the whole {kitchen} thing."],
                  ["How far over budget did the {kitchen} go?",
                   "By how much did the {kitchen} overrun the estimate?"]),
        ),
        (
            "Demolition day for the {kitchen}! So much dust.",
            "Living without a {kitchen} means microwave dinners for weeks.",
            "The {cabinets} were delayed again by the supplier.",
            "Can't decide between open shelving and more {cabinets}.",
            "The electrician found old wiring behind the {kitchen} wall.",
            "We're washing dishes in the bathtub until the {kitchen} is done.",
            "Tiles for the backsplash arrived, two boxes were cracked.",
            "The {kitchen} is finally finished, cooking feels like a luxury.",
            "Should the {counter} overhang for bar stools?",
        ),
        (
            "Renovations always take longer than planned, hang in there.",
            "That sounds like it's coming together nicely!",
            "Take photos of the wiring before the walls close up.",
            "A good contractor is worth their weight in gold.",
            "How is the {kitchen} coming along?",
        ),
    ),
    Thread(
        "running",
        {"race_town": TOWNS, "time": TIMES, "shoes": SHOES, "partner": PEOPLE},
        {"race": ("half marathon", "race", "21k"), "run": ("run", "jog"),
         "training": ("training", "training plan")},
        (
            _fact("time",
                  ["Finished the {race} in {time}! Legs are destroyed.",
                   "Official result is in: {time} for the {race}, way better than I hoped."],
                  ["What was my finishing time in the {race}?",
                   "How long did the {race} take me?"]),
            _fact("shoes",
                  ["Bought new {shoes} for {training}, the cushioning is unreal.",
                   "Switched to the {shoes} after my old pair gave me blisters."],
                  ["Which running shoes did I buy?", "What shoes am I {training} in?"]),
            _fact("partner",
                  ["{partner} from work is doing the long {run}s with me on Sundays.",
                   "My {run} buddy is {partner} now, we keep each other honest."],
                  ["Who do I go on long {run}s with?", "Who is my {training} partner?"]),
            _fact("race_town",
                  ["Signed up for the {race} in {race_town} in the spring.",
                   "The {race_town} {race} is in April and I'm officially registered."],
                  ["Where is the {race} I registered for?",
                   "Which town is my {race} in?"]),
        ),
        (
            "Did a ten mile {run} this morning, felt strong.",
            "My knees are complaining after the hill repeats.",
            "Skipped {training} today, too much going on.",
            "Trying to eat more carbs before the long {run}.",
            "Rain all week, I'm sick of the treadmill.",
            "Week six of the {training} done!",
            "My pace is finally dropping.",
            "Foam rolling every night now, it hurts so good.",
            "Is it bad to {run} two days in a row?",
        ),
        (
            "Great consistency! Remember to rest too.",
            "How is the {training} going?",
            "Listen to your body, niggles can turn into injuries.",
            "Carb loading helps on long days.",
            "That's a solid effort, well done!",
        ),
    ),
    Thread(
        "wedding",
        {"sibling": PEOPLE, "venue": VENUES, "song": SONGS, "fiance": PEOPLE},
        {"wedding": ("wedding", "big day", "ceremony"), "speech": ("speech", "toast"),
         "sister": ("sister", "sis")},
        (
            _fact("venue",
                  ["My {sister} booked {venue} for the {wedding}, it's gorgeous.",
                   "The {wedding} will be at {venue}, outdoors if the weather holds."],
                  ["Where is my {sister}'s {wedding} being held?",
                   "What's the venue for the {wedding}?"]),
            _fact("fiance",
                  ["My {sister} is marrying {fiance}, they met at university.",
                   "{fiance} proposed to my {sister} last night! I'm going to be in the "
                   "{wedding}!"],
                  ["Who is my {sister} getting married to?",
                   "What's my {sister}'s partner called?"]),
            _fact("song",
                  ["They picked {song} for the first dance, I cried a bit.",
                   "First dance song is {song}, which is so them."],
                  ["What song are they dancing to first at the {wedding}?",
                   "Which song did the couple choose for the first dance?"]),
            _fact("sibling",
                  ["I'm the maid of honour for {sibling}, my little {sister}.",
                   "{sibling} asked me to give the main {speech}, no pressure."],
                  ["What's my {sister}'s name?", "Whose {wedding} am I giving a {speech} at?"]),
        ),
        (
            "Dress fitting for the {wedding} today.",
            "Writing the {speech} is so hard, everything sounds cheesy.",
            "The {wedding} guest list is causing family drama.",
            "Helping with the table plan this weekend.",
            "Hen party is booked for next month.",
            "Only six weeks until the {wedding}.",
            "Practised my {speech} in front of the mirror.",
            "The {wedding} was perfect, I'm still emotional.",
            "Mum keeps asking about the flowers for the {wedding}.",
        ),
        (
            "How lovely! Weddings are such a joy.",
            "Keep the {speech} short and personal, it always lands.",
            "Family drama around weddings is so common.",
            "How are the {wedding} preparations going?",
            "That sounds like a beautiful day.",
        ),
    ),
    Thread(
        "guitar",
        {"teacher": PEOPLE, "brand": INSTRUMENT_BRANDS, "song": SONGS, "day": SHIFT_DAYS},
        {"guitar": ("guitar", "acoustic"), "lesson": ("lesson", "session"),
         "practice": ("practice", "practising")},
        (
            _fact("brand",
                  ["Bought my first {guitar}, a second-hand {brand}.",
                   "The {brand} {guitar} arrived, it sounds warmer than I expected."],
                  ["What make is my {guitar}?", "Which brand of {guitar} did I buy?"]),
            _fact("teacher",
                  ["My {guitar} teacher is {teacher}, very patient with beginners.",
                   "Started {lesson}s with {teacher}, who plays in a jazz trio."],
                  ["Who teaches me {guitar}?", "What's my {guitar} teacher's name?"]),
            _fact("song",
                  ["I can finally play {song} all the way through!",
                   "First full song I learned: {song}. Slowly, but still."],
                  ["What was the first song I could play start to finish?",
                   "Which song did I learn first on the {guitar}?"]),
            _fact("day",
                  ["My {lesson}s are on {day}, right after work.",
                   "Moved my {lesson} slot to {day}, works better."],
                  ["When are my {guitar} {lesson}s?", "What day is my {guitar} {lesson}?"]),
        ),
        (
            "My fingertips hurt so much from {practice}.",
            "The F chord is my nemesis.",
            "Did thirty minutes of {practice} before bed.",
            "Restrung the {guitar} myself for the first time.",
            "My neighbours must hate my {practice}.",
            "Learning to read tabs is easier than sheet music.",
            "Barre chords are starting to ring out clean!",
            "Missed a {lesson} this week because of work.",
            "Should I get a capo?",
        ),
        (
            "Sore fingertips mean calluses are forming, it gets better!",
            "Short daily {practice} beats long weekly sessions.",
            "The F chord defeats everyone at first.",
            "How is the {guitar} coming along?",
            "That's real progress, nice work!",
        ),
    ),
    Thread(
        "garden",
        {"vegetable": VEGETABLES, "pest": PESTS, "neighbour": PEOPLE, "plant": PLANTS},
        {"garden": ("garden", "vegetable patch", "allotment"), "plants": ("plants", "seedlings"),
         "harvest": ("harvest", "crop")},
        (
            _fact("vegetable",
                  ["The {vegetable} went completely wild this year, I'm giving it away.",
                   "Biggest {harvest} so far is the {vegetable}, I have way too much."],
                  ["Which vegetable did I grow too much of?",
                   "What did I have a huge {harvest} of in the {garden}?"]),
            _fact("pest",
                  ["Something is eating my {plants}: turns out it's {pest}.",
                   "Caught the culprit in the {garden} at last, {pest}."],
                  ["What was destroying my {plants}?", "What pest got into the {garden}?"]),
            _fact("neighbour",
                  ["My neighbour {neighbour} gave me a ton of seeds and tips for the {garden}.",
                   "{neighbour} next door is teaching me how to compost properly."],
                  ["Which neighbour helps me with the {garden}?",
                   "Who has been giving me {garden} advice?"]),
            _fact("plant",
                  ["Treated myself to {plant} for the balcony.",
                   "Brought home {plant} from the nursery, hope I don't kill it."],
                  ["What did I buy for the balcony?", "Which plant did I get from the nursery?"]),
        ),
        (
            "Spent the whole Saturday weeding the {garden}.",
            "The {plants} need watering twice a day in this heat.",
            "Raised beds are finally built.",
            "Frost warning tonight, covering the {plants}.",
            "Started {plants} on the windowsill.",
            "The compost pile is getting smelly.",
            "Does mulch really help with weeds?",
            "The {garden} is the only thing keeping me sane lately.",
            "Lost half the {harvest} to the heatwave.",
        ),
        (
            "Gardening is so good for the soul.",
            "Mulch helps keep moisture in and weeds down.",
            "How's the {garden} doing?",
            "Frost covers are a great idea.",
            "Fresh vegetables from your own {garden} taste better.",
        ),
    ),
    Thread(
        "knee",
        {"injury": INJURIES, "therapist": SURNAMES, "exercise": EXERCISES},
        {"knee": ("knee", "leg"), "physio": ("physio", "physical therapist", "physiotherapist"),
         "doctor": ("doctor", "specialist")},
        (
            _fact("injury",
                  ["The scan came back: it's a {injury}.",
                   "{doctor} confirmed a {injury}, so no running for a while."],
                  ["What did the scan show was wrong with my {knee}?",
                   "What's my diagnosis?", "What injury do I have?"]),
            _fact("therapist",
                  ["Started seeing a {physio}, {therapist}, twice a week.",
                   "My {physio} is called {therapist}, she's tough but good."],
                  ["Who is my {physio}?", "What's the name of the {physio} I see?"]),
            _fact("exercise",
                  ["The {physio} has me doing {exercise} every day, they burn.",
                   "New homework from the {physio}: {exercise}, three sets of fifteen."],
                  ["Which exercise did the {physio} give me?",
                   "What do I have to do every day for my {knee}?"]),
        ),
        (
            "My {knee} is swollen again after the stairs.",
            "Icing the {knee} while watching TV.",
            "Walking without a limp today, small victory.",
            "The {doctor} appointment got moved to Friday.",
            "Can't kneel at all, gardening is impossible.",
            "Rehab is so boring but I'm sticking with it.",
            "My {knee} clicks when I squat, is that bad?",
            "Got the all-clear to cycle gently.",
        ),
        (
            "Sorry to hear that, {knee} injuries are frustrating.",
            "Consistency with rehab really pays off.",
            "Ice and elevation help with swelling.",
            "How is the {knee} feeling today?",
            "Ask the {physio} about the clicking next time.",
        ),
    ),
    Thread(
        "car",
        {"car_model": CARS, "dealer": TOWNS, "loan": MONTHLY, "mechanic": PEOPLE},
        {"car": ("car", "vehicle"), "buy": ("buy", "purchase"),
         "dealership": ("dealership", "dealer", "showroom")},
        (
            _fact("car_model",
                  ["Test drove a {car_model} and I think that's the one.",
                   "We picked up the new {car_model} today, it still smells new."],
                  ["Which model of {car} did I get?", "What {car} did we end up buying?"]),
            _fact("dealer",
                  ["The best offer was at the {dealership} in {dealer}.",
                   "Drove out to {dealer} because their {dealership} had one in stock."],
                  ["Where did I {buy} the {car}?", "Which town was the {dealership} in?"]),
            _fact("loan",
                  ["Payments will be {loan} a month for four years.",
                   "Financing came out at {loan} monthly, which we can manage."],
                  ["How much is my monthly {car} payment?",
                   "What do I pay each month for the {car}?"]),
            _fact("mechanic",
                  ["Our old {car} failed inspection, {mechanic} says it's not worth fixing.",
                   "{mechanic} at the garage looked at the old {car} and shook their head."],
                  ["Which mechanic told me the old {car} wasn't worth repairing?",
                   "Who checked our old {car}?"]),
        ),
        (
            "Car shopping is exhausting, so many options.",
            "Do I really need all-wheel drive?",
            "The old {car} made a weird noise again.",
            "Insurance quotes for the new {car} are all over the place.",
            "Finally sold the old {car} online.",
            "Parallel parking the new {car} is terrifying.",
            "Should we go electric this time?",
            "Got a parking ticket on day two, of course.",
        ),
        (
            "Always test drive a few before you decide.",
            "Congrats on the new {car}!",
            "Check the total cost of ownership, not just the monthly payment.",
            "How do you like the new {car}?",
            "Electric can save a lot on fuel.",
        ),
    ),
    Thread(
        "book_club",
        {"book_title": BOOKS, "host": PEOPLE, "snack": RECIPES},
        {"book_club": ("book club", "reading group"), "book": ("book", "novel"),
         "meeting": ("meeting", "get-together")},
        (
            _fact("book_title",
                  ["This month's {book} is {book_title}, I'm halfway through.",
                   "We're reading {book_title} for the {book_club}."],
                  ["Which {book} is my {book_club} reading?",
                   "What am I reading for the {book_club} right now?"]),
            _fact("host",
                  ["{host} is hosting the {book_club} this month, at her flat.",
                   "Next {meeting} is at {host}'s place."],
                  ["Who hosts the next {book_club} {meeting}?",
                   "Where is the {book_club} meeting this time?"]),
            _fact("snack",
                  ["I'm bringing {snack} to the {meeting}.",
                   "Baked {snack} for the {book_club}, it disappeared in minutes."],
                  ["What did I make for the {book_club}?",
                   "Which dish am I bringing to the {meeting}?"]),
        ),
        (
            "Didn't finish the {book} in time again.",
            "The {book_club} discussion got really heated.",
            "Half the group hated the ending.",
            "We're voting on next month's {book}.",
            "The {book_club} is the best part of my month.",
            "Audiobook or paper for the {book}? I can't focus on audio.",
            "Someone suggested we read more non-fiction.",
            "Loved the twist in chapter twelve.",
        ),
        (
            "What did you think of the {book} so far?",
            "Book clubs are a great way to read outside your comfort zone.",
            "Heated discussions mean it was a good pick!",
            "How did the {meeting} go?",
        ),
    ),
    Thread(
        "moving",
        {"area": NEIGHBOURHOODS, "rent": RENTS, "landlord": PEOPLE, "mover": SURNAMES},
        {"apartment": ("apartment", "flat", "new place"), "move": ("move", "moving day"),
         "lease": ("lease", "rental contract")},
        (
            _fact("area",
                  ["We found an {apartment} in {area}, signing next week.",
                   "Moving to {area}! The new {apartment} is closer to work and the park."],
                  ["Which neighbourhood is my new {apartment} in?",
                   "Where are we moving to?"]),
            _fact("rent",
                  ["Rent is {rent} a month, a bit more than now but worth it.",
                   "The {lease} for the {apartment} says {rent} per month, without utilities."],
                  ["How much is the rent on the new {apartment}?",
                   "What do we pay monthly for the {apartment}?"]),
            _fact("mover",
                  ["Booked {mover} Removals for the {move}, they were the cheapest quote.",
                   "The {mover} Removals crew were fast, nothing broken."],
                  ["Which moving company did we hire?", "Who did the {move} for us?"]),
        ),
        (
            "Packing boxes everywhere, I can't find anything.",
            "The {move} is in two weeks and nothing is packed.",
            "Our current landlord wants a deep clean before we leave.",
            "First night in the {apartment}, sleeping on a mattress on the floor.",
            "Internet won't be installed until next Thursday.",
            "Decluttered three bags of clothes before the {move}.",
            "Still unpacking the kitchen boxes.",
            "The new {apartment} gets so much light.",
            "Need to update my address everywhere.",
        ),
        (
            "Moving is so stressful, you're doing great.",
            "Label boxes by room, it saves hours.",
            "How is the new {apartment}?",
            "Take photos of the old place for the deposit.",
        ),
    ),
    Thread(
        "sourdough",
        {"bread": BREADS, "starter_name": STARTERS, "friend": PEOPLE},
        {"sourdough": ("sourdough", "bread"), "starter": ("starter", "levain"),
         "bake": ("bake", "loaf")},
        (
            _fact("starter_name",
                  ["My {starter} is alive! I named it {starter_name}.",
                   "Fed {starter_name}, my {starter}, and it doubled overnight."],
                  ["What's my {starter} called?", "What name did I give the {starter}?"]),
            _fact("bread",
                  ["Best {bake} yet: a {bread} {sourdough} with a crackly crust.",
                   "Tried a {bread} {sourdough} this weekend, the family demolished it."],
                  ["Which kind of {sourdough} came out best?",
                   "What flavour {bake} did the family love?"]),
            _fact("friend",
                  ["{friend} gave me a bit of her {starter} to get me going.",
                   "Got my {starter} from {friend}, hers is ten years old."],
                  ["Who gave me the {starter}?", "Where did my {starter} come from?"]),
        ),
        (
            "My {sourdough} came out flat as a pancake.",
            "Kitchen is covered in flour again.",
            "Trying a longer cold proof in the fridge.",
            "Ordered a proper banneton.",
            "Hydration at seventy five percent was too sticky.",
            "Forgot to feed the {starter} for three days, oops.",
            "Scoring the {bake} is harder than it looks.",
            "The crumb is getting more open every week.",
        ),
        (
            "Flat loaves usually mean under-proofing.",
            "Baking is such a satisfying hobby.",
            "How did the {bake} turn out?",
            "A cold proof adds flavour too.",
        ),
    ),
    Thread(
        "school",
        {"subject": SUBJECTS, "teacher": TEACHERS, "sport": SPORTS},
        {"son": ("son", "boy", "kid"), "school": ("school", "class"),
         "homework": ("homework", "assignments")},
        (
            _fact("teacher",
                  ["Parent evening went well, {teacher} says my {son} is a joy in class.",
                   "His new teacher is {teacher}, strict but fair apparently."],
                  ["Who is my {son}'s teacher?", "What's the name of my {son}'s teacher?"]),
            _fact("subject",
                  ["He's really struggling with {subject}, tears over {homework} again.",
                   "My {son} and I spent the whole evening on {subject} {homework}."],
                  ["What is my {son} struggling with at {school}?",
                   "Which topic gives my {son} trouble?"]),
            _fact("sport",
                  ["Signed my {son} up for {sport} after {school} on Wednesdays.",
                   "He's obsessed with {sport} now, it's all he talks about."],
                  ["What after-{school} activity did my {son} join?",
                   "Which club is my {son} into?"]),
        ),
        (
            "School run was chaos this morning.",
            "He forgot his lunchbox again.",
            "Parent-teacher meeting next week.",
            "Packed lunches every day are wearing me down.",
            "He got a gold star today and was so proud.",
            "The {school} wants volunteers for the bake sale.",
            "Reading together at bedtime is our favourite thing.",
            "Snow day, {school} is closed.",
        ),
        (
            "It sounds like he's growing up fast!",
            "Homework battles are so common at that age.",
            "How is he finding {school}?",
            "Celebrate the small wins!",
        ),
    ),
    Thread(
        "volunteer",
        {"org": TOWNS, "shift_day": SHIFT_DAYS, "coordinator": PEOPLE},
        {"food_bank": ("food bank", "pantry"), "volunteer": ("volunteer", "help out"),
         "shift": ("shift", "slot")},
        (
            _fact("shift_day",
                  ["I {volunteer} at the {food_bank} on {shift_day}.",
                   "Got a regular {shift} at the {food_bank}: {shift_day}."],
                  ["When do I {volunteer} at the {food_bank}?",
                   "What's my regular {shift} at the {food_bank}?"]),
            _fact("coordinator",
                  ["The coordinator, {coordinator}, runs the {food_bank} like clockwork.",
                   "{coordinator} who coordinates everything asked me to train new people."],
                  ["Who runs the {food_bank}?", "Who coordinates the volunteers?"]),
            _fact("org",
                  ["Started at the {org} Community {food_bank} last week.",
                   "The {org} {food_bank} needs more drivers."],
                  ["Which {food_bank} do I {volunteer} at?",
                   "Where is the {food_bank} I help at?"]),
        ),
        (
            "Sorted tins for three hours, my back hurts.",
            "We served more families than ever this week.",
            "The {food_bank} is running low on baby formula.",
            "Volunteering makes me feel useful.",
            "Met a lovely retired teacher on {shift} today.",
            "Donations always spike around the holidays.",
            "The fridge at the {food_bank} broke down again.",
        ),
        (
            "That's such a generous thing to do.",
            "Food banks rely on people like you.",
            "How was the {shift} today?",
            "Make sure you lift with your legs!",
        ),
    ),
    Thread(
        "language",
        {"language": LANGUAGES, "app": APPS, "tutor_name": TUTORS, "streak": STREAKS},
        {"learn": ("learning", "studying"), "lesson": ("lesson", "session"),
         "tutor": ("tutor", "teacher")},
        (
            _fact("language",
                  ["Decided to start {learn} {language} before the summer.",
                   "Day one of {learn} {language}! Everything sounds so fast."],
                  ["Which language am I {learn}?", "What language did I decide to pick up?"]),
            _fact("app",
                  ["Using {app} every morning on the bus.",
                   "{app} keeps sending me guilt-trip notifications."],
                  ["Which app do I use to study?", "What app am I {learn} with?"]),
            _fact("tutor_name",
                  ["Found an online {tutor}, {tutor_name}, for conversation practice.",
                   "My {lesson}s with {tutor_name} are the highlight of my week."],
                  ["Who is my conversation {tutor}?", "What's my {tutor}'s name?"]),
            _fact("streak",
                  ["My streak is at {streak} days, don't break it!",
                   "Hit a {streak}-day streak this morning."],
                  ["How long is my study streak?", "How many days in a row have I practised?"]),
        ),
        (
            "Verb conjugations are breaking my brain.",
            "Watched a film without subtitles and understood maybe a third.",
            "Flashcards before bed every night.",
            "My accent is terrible but I'm trying.",
            "Listening practice is the hardest part.",
            "Ordered coffee in the language today, felt like a win.",
            "Missed a {lesson}, need to catch up.",
        ),
        (
            "Consistency beats intensity with languages.",
            "Speaking practice is the fastest way to improve.",
            "How is the {learn} going?",
            "Films are great for listening practice.",
        ),
    ),
    Thread(
        "savings",
        {"goal": GOALS, "monthly": MONTHLY, "bank": BANKS, "advisor": PEOPLE},
        {"house": ("house", "home"), "saving": ("saving", "putting aside"),
         "deposit": ("deposit", "down payment")},
        (
            _fact("goal",
                  ["We need {goal} for the {deposit} on a {house}.",
                   "Target for the {deposit} is {goal}, long way to go."],
                  ["How much do we need for the {deposit}?",
                   "What's our {saving} target for the {house}?"]),
            _fact("monthly",
                  ["I'm {saving} {monthly} a month towards the {house}.",
                   "Automatic transfer of {monthly} every payday into the {house} fund."],
                  ["How much am I {saving} each month?",
                   "What do I put into the {house} fund monthly?"]),
            _fact("bank",
                  ["Opened a high-interest account at {bank} for the {house} {deposit}.",
                   "Moved the {house} fund to {bank}, better rate."],
                  ["Which bank holds the {house} fund?", "Where is my {deposit} money kept?"]),
        ),
        (
            "Cancelled three subscriptions to save more.",
            "House prices keep going up, it's depressing.",
            "Made a spreadsheet of every expense this month.",
            "No takeaways for a month, wish me luck.",
            "Should we look at smaller towns to afford a {house}?",
            "Mortgage rates went up again.",
            "Saving feels slow but the number is growing.",
        ),
        (
            "Automating savings is a great habit.",
            "Every bit adds up over time.",
            "How is the {saving} going?",
            "Tracking expenses is eye-opening.",
        ),
    ),
    Thread(
        "photography",
        {"camera_model": CAMERAS, "lens": LENSES, "subject": PHOTO_SUBJECTS, "club": TOWNS},
        {"camera": ("camera", "body"), "photo": ("photo", "picture", "shot"),
         "photography": ("photography", "shooting")},
        (
            _fact("camera_model",
                  ["Upgraded from my phone to a proper {camera}, the {camera_model}.",
                   "The {camera_model} arrived, time to read the manual."],
                  ["Which {camera} did I buy?", "What {camera} do I use now?"]),
            _fact("lens",
                  ["Saved up and got a {lens} lens, the background blur is gorgeous.",
                   "The new {lens} lens lives on my {camera} now."],
                  ["Which lens did I buy?", "What lens do I mostly use?"]),
            _fact("subject",
                  ["Got a {photo} of {subject} at dawn, best {photo} I've ever taken.",
                   "Waited two hours in the cold but I captured {subject}."],
                  ["What was my best {photo} of?",
                   "What did I wait hours in the cold to capture?"]),
            _fact("club",
                  ["Joined the {club} Camera Club, they do monthly walks.",
                   "The {club} club is holding an exhibition and I'm in it!"],
                  ["Which {photography} club did I join?", "What camera club am I a member of?"]),
        ),
        (
            "Learning manual mode properly this time.",
            "Golden hour light was perfect tonight.",
            "Editing {photo}s takes longer than taking them.",
            "My {photography} walk got rained out.",
            "Thinking about printing a few {photo}s for the wall.",
            "Composition rules are making sense now.",
            "Cleaned the sensor myself, nerve-wracking.",
        ),
        (
            "Golden hour is magic for {photography}.",
            "Practice makes the manual settings second nature.",
            "I'd love to hear what you shot today!",
            "Printing your {photo}s is so rewarding.",
        ),
    ),
    Thread(
        "party",
        {"friend": PEOPLE, "gift": GIFTS, "restaurant": LODGINGS},
        {"party": ("party", "celebration", "surprise"), "birthday": ("birthday", "bday"),
         "present": ("present", "gift")},
        (
            _fact("friend",
                  ["Planning a surprise {party} for {friend}'s {birthday}.",
                   "{friend}'s {birthday} is coming up and I'm organising the {party}."],
                  ["Whose {birthday} {party} am I planning?",
                   "Who is the {party} for?"]),
            _fact("gift",
                  ["We all chipped in for {gift} as the {present}.",
                   "Got {gift}, I think it's the perfect {present}."],
                  ["What {present} did we get?", "What did we buy as the {present}?"]),
            _fact("restaurant",
                  ["Booked the back room at the {restaurant} for the {party}.",
                   "The {party} is at the {restaurant}, they have a private room."],
                  ["Where is the {birthday} {party}?", "Which venue did I book for the {party}?"]),
        ),
        (
            "Keeping a {party} secret is so hard.",
            "Group chat for the {party} is out of control.",
            "Ordered balloons and a banner.",
            "Need a cake that isn't chocolate, she hates it.",
            "Almost gave away the surprise today.",
            "The {party} was a total success, she cried!",
        ),
        (
            "Surprise parties are so much fun to plan.",
            "How did the {party} go?",
            "That sounds like a thoughtful {present}.",
            "Good luck keeping it a secret!",
        ),
    ),
    Thread(
        "festival",
        {"band": BANDS, "festival_name": FESTIVALS, "friend": PEOPLE},
        {"festival": ("festival", "music festival"), "gig": ("gig", "concert", "show"),
         "tickets": ("tickets", "passes")},
        (
            _fact("band",
                  ["Got {tickets} to see {band}, front row!",
                   "{band} were incredible live, my ears are still ringing."],
                  ["Which band did I see live?", "Who did I get {tickets} for?"]),
            _fact("festival_name",
                  ["Going to {festival_name} this summer, three nights at the {festival}.",
                   "{festival_name} lineup just dropped and I'm going!"],
                  ["Which {festival} am I going to?", "What {festival} did I get {tickets} for?"]),
            _fact("friend",
                  ["{friend} is coming to the {gig} with me, she's a huge fan.",
                   "Going to the {gig} with {friend}, we've loved them since school."],
                  ["Who am I going to the {gig} with?", "Who's coming to the {gig}?"]),
        ),
        (
            "The {tickets} sold out in six minutes.",
            "Planning my outfit for the {festival}.",
            "Need earplugs for the {gig}.",
            "It rained the whole {festival}, mud everywhere.",
            "Lost my voice from singing along.",
            "The queue for the {gig} was two hours long.",
        ),
        (
            "How exciting! Live music is the best.",
            "Bring earplugs, your future self will thank you.",
            "How was the {gig}?",
            "Festivals are such an experience.",
        ),
    ),
    Thread(
        "camping",
        {"site_name": CAMPSITES, "animal": PHOTO_SUBJECTS, "friend": PEOPLE},
        {"camping": ("camping", "camping trip"), "tent": ("tent", "shelter"),
         "hike": ("hike", "trek", "walk")},
        (
            _fact("site_name",
                  ["Booked a pitch at {site_name} for our {camping} weekend.",
                   "{site_name} campground was beautiful, right by the water."],
                  ["Where did we go {camping}?", "Which campground did I book?"]),
            _fact("animal",
                  ["We saw {animal} right outside the {tent} at dawn!",
                   "Best moment of the {camping}: {animal} near our {tent}."],
                  ["What wildlife did we see while {camping}?",
                   "What animal came by our {tent}?"]),
            _fact("friend",
                  ["{friend} is coming {camping} with us, she has all the gear.",
                   "Going {camping} with {friend}, first time for both of us."],
                  ["Who went {camping} with me?", "Who is joining the {camping}?"]),
        ),
        (
            "Practised pitching the {tent} in the garden.",
            "The {hike} to the ridge nearly killed me.",
            "It was freezing at night, need a better sleeping bag.",
            "Campfire cooking is harder than it looks.",
            "Mosquitoes everywhere.",
            "Back from {camping}, everything smells like smoke.",
        ),
        (
            "Camping is such a reset.",
            "How was the {camping}?",
            "A good sleeping bag makes all the difference.",
            "Always check the weather before a {hike}.",
        ),
    ),
    Thread(
        "dentist",
        {"problem": DENTAL, "dentist_name": SURNAMES, "cost": MONTHLY},
        {"dentist": ("dentist", "dental surgeon"), "tooth": ("tooth", "teeth"),
         "appointment": ("appointment", "checkup")},
        (
            _fact("problem",
                  ["The x-ray showed {problem}, so I need work done.",
                   "Turns out the {tooth} pain was {problem}."],
                  ["What did the {dentist} find?", "What was wrong with my {tooth}?"]),
            _fact("dentist_name",
                  ["Switched to a new {dentist}, Dr. {dentist_name}, she's much gentler.",
                   "New {dentist}: Dr. {dentist_name}, highly rated."],
                  ["Who is my {dentist}?", "What's my {dentist}'s name?"]),
            _fact("cost",
                  ["The treatment plan is {cost} after insurance.",
                   "Quoted {cost} for the whole {tooth} treatment, ouch."],
                  ["How much will the dental work cost me?",
                   "What's the price of the {tooth} treatment?"]),
        ),
        (
            "I hate the {dentist} so much.",
            "My {tooth} is sensitive to cold drinks.",
            "Booked the next {appointment} for a month from now.",
            "Flossing every day now, promise.",
            "The numbness took hours to wear off.",
        ),
        (
            "Dental anxiety is really common.",
            "How did the {appointment} go?",
            "Sensitive toothpaste can help.",
            "Good on you for keeping up with it.",
        ),
    ),
    Thread(
        "games",
        {"game_title": GAMES, "host": PEOPLE, "winner": PEOPLE},
        {"game": ("board game", "game"), "night": ("game night", "games evening"),
         "win": ("win", "victory")},
        (
            _fact("game_title",
                  ["Our new favourite {game} is {game_title}, we played it four times.",
                   "Bought {game_title} for the group and everyone's hooked."],
                  ["Which {game} is our group's favourite?", "What {game} did I buy?"]),
            _fact("winner",
                  ["{winner} won every single round at {night}, it's unfair.",
                   "{winner} is undefeated, we need a new strategy."],
                  ["Who keeps winning at {night}?", "Who beat everyone at the {game}?"]),
            _fact("host",
                  ["{night} is at {host}'s this week.",
                   "{host} is hosting {night} from now on, they have the big table."],
                  ["Who hosts {night}?", "Where is {night} held?"]),
        ),
        (
            "{night} ran until 2am again.",
            "Learning a new rulebook is a workout.",
            "Someone flipped the table, metaphorically.",
            "We should try a cooperative {game} next.",
            "Brought snacks for {night}.",
        ),
        (
            "Game nights are great for friendships.",
            "Who won this time?",
            "Cooperative games are fun for mixed groups.",
            "Sounds like a fun evening!",
        ),
    ),
    Thread(
        "conference",
        {"conference_name": CONFERENCES, "topic": TOPICS, "city": TOWNS},
        {"talk": ("talk", "presentation"), "conference": ("conference", "summit"),
         "slides": ("slides", "deck")},
        (
            _fact("conference_name",
                  ["My {talk} got accepted at {conference_name}!",
                   "{conference_name} said yes to my {talk} proposal!"],
                  ["Which {conference} accepted my {talk}?",
                   "Where am I giving my {talk}?"]),
            _fact("topic",
                  ["The {talk} is about {topic}, based on our project last year.",
                   "My {talk} will present our work on {topic}."],
                  ["What is my {talk} about?", "What topic am I presenting on?"]),
            _fact("city",
                  ["The {conference} is in {city} this year, never been.",
                   "Booked the train to {city} for the {conference}."],
                  ["Where is the {conference} being held?",
                   "Which city do I travel to for the {conference}?"]),
        ),
        (
            "Rehearsed the {talk} twice today.",
            "The {slides} are still a mess.",
            "Cut ten {slides}, it's better shorter.",
            "Nervous about the Q and A.",
            "The {talk} went well, lots of questions!",
            "Networking at the {conference} is exhausting.",
        ),
        (
            "Congratulations on the {talk}!",
            "Rehearsing out loud is the best prep.",
            "How did the {talk} go?",
            "Fewer {slides} usually means a better {talk}.",
        ),
    ),
    Thread(
        "painting",
        {"medium": MEDIA, "teacher": TEACHER_NAMES, "venue": TOWNS},
        {"painting": ("painting", "art"), "class": ("class", "workshop"),
         "canvas": ("canvas", "piece")},
        (
            _fact("medium",
                  ["Started an evening {painting} {class} in {medium}.",
                   "Switching to {medium}, it's more forgiving."],
                  ["What medium am I {painting} with?", "What kind of paint do I use?"]),
            _fact("teacher",
                  ["Our {class} teacher {teacher} used to illustrate children's books.",
                   "{teacher}, who runs the {class}, liked my last {canvas}."],
                  ["Who teaches my {painting} {class}?",
                   "What's the name of my art teacher?"]),
            _fact("venue",
                  ["The {venue} library is showing our {class}'s work next month.",
                   "Two pieces of my {painting} are in the {venue} community show!"],
                  ["Where is my {painting} being exhibited?",
                   "Which show is my art in?"]),
        ),
        (
            "Ruined a {canvas} by overworking it.",
            "Colour mixing is harder than I thought.",
            "Spent the whole Sunday {painting}.",
            "Bought new brushes.",
            "My {painting} finally looks like what I pictured.",
            "Missed {class} this week, sick.",
        ),
        (
            "Art is such a great outlet.",
            "Knowing when to stop is the hardest skill.",
            "How is the {painting} going?",
            "I'd love to hear about your latest {canvas}.",
        ),
    ),
    Thread(
        "grandma",
        {"ailment": AILMENTS, "recipe": RECIPES, "carer": PEOPLE, "town": TOWNS},
        {"grandma": ("grandma", "gran", "grandmother"), "visit": ("visit", "see"),
         "hospital": ("hospital", "ward")},
        (
            _fact("ailment",
                  ["My {grandma} is in for {ailment}, I'm worried.",
                   "{grandma} had {ailment} last week, recovering slowly."],
                  ["Why was my {grandma} in {hospital}?",
                   "What happened to my {grandma}?"]),
            _fact("recipe",
                  ["{grandma} finally taught me her {recipe} recipe.",
                   "Made {grandma}'s {recipe} and it tasted just like childhood."],
                  ["Which of {grandma}'s recipes did I learn?",
                   "What dish did my {grandma} teach me?"]),
            _fact("town",
                  ["Drove to {town} to {visit} {grandma} this weekend.",
                   "{grandma} still lives in {town}, two hours away."],
                  ["Where does my {grandma} live?", "Which town did I drive to for my {grandma}?"]),
            _fact("carer",
                  ["{grandma}'s new carer {carer} is wonderful with her.",
                   "{carer} now helps {grandma} in the mornings."],
                  ["Who is my {grandma}'s carer?", "Who helps my {grandma} at home?"]),
        ),
        (
            "Called {grandma} for an hour today.",
            "{grandma} told the same story three times, but I don't mind.",
            "Worried about {grandma} living alone.",
            "Took {grandma} photos of the kids.",
            "Visiting hours at the {hospital} are so short.",
            "{grandma} is back home and in good spirits.",
        ),
        (
            "She's lucky to have you.",
            "How is your {grandma} doing?",
            "Those stories are precious.",
            "Take care of yourself too.",
        ),
    ),
)  # fmt: skip

HELP = (
    ("Can you help me write a polite email declining a meeting invite?",
     "Of course. Something like: thank you for the invitation, unfortunately I can't make it "
     "this time, could you share the notes afterwards? Keep it short and friendly."),
    ("What's a quick dinner I can make with chickpeas and spinach?",
     "Try a chickpea and spinach curry: fry onion, garlic and spices, add a tin of tomatoes, "
     "the chickpeas and the spinach, simmer ten minutes and serve with rice."),
    ("How do I get better sleep? I keep waking up at 3am.",
     "Keep a regular schedule, avoid screens an hour before bed, cut caffeine after lunch, and "
     "if you wake up, get up for a while instead of lying there worrying."),
    ("Can you explain what an index fund is?",
     "An index fund holds every stock in a market index, so you get broad diversification at "
     "low cost instead of betting on individual companies."),
    ("Give me a five minute stretching routine for my back.",
     "Cat-cow for a minute, child's pose for a minute, knee-to-chest on each side, a gentle "
     "spinal twist, and finish with a standing forward fold."),
    ("What's the difference between baking soda and baking powder?",
     "Baking soda needs an acid in the recipe to react; baking powder already contains one, "
     "so it works on its own."),
    ("Help me plan my week, I have too much going on.",
     "List everything, mark what has a deadline, block time for the top three priorities, and "
     "leave some slack each day for surprises."),
    ("Can you recommend a podcast about history?",
     "Many people enjoy narrative history shows that go deep on one era per season; pick a "
     "period you're curious about and start from the first episode."),
    ("How long should I boil an egg for a runny yolk?",
     "About six minutes from boiling water, then straight into cold water to stop cooking."),
    ("Write a short thank-you note for my colleague who covered for me.",
     "Thanks so much for stepping in while I was out, it made a real difference and I owe "
     "you one. Coffee's on me this week!"),
    ("What are some good indoor plants for low light?",
     "Snake plants, pothos, ZZ plants and peace lilies all tolerate low light and forgetful "
     "watering."),
    ("How can I stop procrastinating on a big report?",
     "Break it into tiny first steps, set a timer for twenty five minutes, and start with the "
     "easiest section to build momentum."),
    ("What should I pack for a rainy weekend away?",
     "A waterproof jacket, quick-dry layers, spare socks, a compact umbrella and shoes with "
     "good grip."),
    ("Summarise the pros and cons of working from home.",
     "Pros: no commute, flexibility, fewer interruptions. Cons: isolation, blurred boundaries "
     "between work and home, and fewer spontaneous conversations."),
    ("Can you suggest a name for a team newsletter?",
     "How about The Weekly Sync, Behind the Scenes, or The Loop? Pick one that matches your "
     "team's tone."),
    ("How do I remove a red wine stain from a carpet?",
     "Blot, don't rub. Cover it with salt or baking soda, then dab with a mix of dish soap, "
     "white vinegar and warm water."),
    ("What's a good gift for someone who has everything?",
     "Experiences work well: a class, a concert, a nice meal out, or something handmade."),
    ("How many hours of sleep do adults actually need?",
     "Most adults need seven to nine hours, though it varies a little from person to person."),
    ("Can you help me understand my electricity bill?",
     "Your bill has a standing charge per day plus a unit rate per kilowatt hour; compare the "
     "units used month to month to spot changes."),
    ("Suggest a weekend hike near the city that isn't too hard.",
     "Look for a loop under ten kilometres with less than three hundred metres of climbing; "
     "local park trails are often ideal."),
    ("Give me ideas for a rainy Sunday with no plans.",
     "Bake something, start a puzzle, watch a film series, tidy one drawer, or call someone "
     "you haven't spoken to in a while."),
    ("How do I make cold brew coffee?",
     "Mix coarse ground coffee with cold water at one to eight, steep twelve to eighteen hours "
     "in the fridge, then strain."),
    ("What are healthy snacks for work?",
     "Nuts, fruit, yoghurt, hummus with carrots, or a boiled egg keep you going without a "
     "sugar crash."),
    ("Help me word a message asking my landlord to fix the heating.",
     "Hi, the heating has stopped working since Monday. Could you arrange a repair this week? "
     "Let me know what times suit. Thanks!"),
    ("What's a good way to learn to touch type?",
     "Use a free typing tutor for fifteen minutes a day and resist looking at the keys; speed "
     "comes after accuracy."),
    ("Can you explain compound interest simply?",
     "You earn interest on your interest: each year's growth is added to the balance, so the "
     "next year grows from a bigger number."),
    ("Recommend a film for a cosy night in.",
     "A warm comedy-drama is perfect for a cosy night; pick one with good reviews and a short "
     "running time."),
    ("How do I say no to extra work without seeming lazy?",
     "Explain your current priorities and ask which one should move to make room; that shows "
     "commitment and sets limits."),
    ("What's the best way to store fresh herbs?",
     "Treat soft herbs like flowers in a glass of water; wrap hardy herbs in a damp paper "
     "towel in the fridge."),
    ("Tips for a first time at a climbing gym?",
     "Rent shoes, start on the easiest routes, climb with straight arms, and watch how others "
     "use their legs."),
    ("How do I descale a kettle?",
     "Fill it with equal parts water and white vinegar, boil, leave an hour, rinse well and "
     "boil fresh water once."),
    ("Can you give me a simple budgeting method?",
     "Try fifty thirty twenty: half for needs, thirty percent for wants and twenty for savings "
     "or debt."),
    ("What are good questions to ask at the end of an interview?",
     "Ask what success looks like in the first six months, what the team's biggest challenge "
     "is, and what the next steps are."),
    ("How do I keep my focus in long meetings?",
     "Take notes by hand, ask one question early, and stand or stretch during breaks."),
    ("Is it worth getting a standing desk?",
     "It can help if you alternate; standing all day isn't better than sitting all day."),
    ("What should I do with leftover rice?",
     "Fried rice is the classic: a hot pan, oil, egg, whatever vegetables you have and a splash "
     "of soy sauce."),
)  # fmt: skip

SMALL_TALK = (
    ("Good morning!", "Good morning, {user}! How did you sleep?"),
    ("I'm back.", "Welcome back, {user}! What's new?"),
    ("Long day today.", "Sorry to hear that. Want to talk about it?"),
    ("Thanks, that's really helpful.", "Glad it helped, {user}!"),
    ("Ugh, Mondays.", "Hang in there, the week will pick up."),
    ("Just checking in.", "Nice to hear from you, {user}. How are things?"),
    ("Not much to report this week.", "Quiet weeks are good too."),
    ("I'm so tired.", "Make sure you get some rest tonight."),
    ("Haha, fair enough.", "😄"),
    ("ok cool", "Anything else I can help with?"),
    ("Happy Friday!", "Happy Friday, {user}! Any plans for the weekend?"),
    ("The weather is miserable.", "Perfect excuse for a cosy evening in."),
    ("Busy week ahead.", "You've got this. Want help planning it?"),
    ("Good night!", "Good night, {user}, sleep well."),
    ("Feeling pretty good today actually.", "Love to hear it!"),
    ("Sorry I've been quiet.", "No need to apologise, {user}. Good to have you back."),
    ("What day is it even.", "Time flies! It's been a busy stretch for you."),
    ("I need a holiday.", "Sounds like you've earned one."),
    ("Coffee number three.", "Maybe switch to water for the next one!"),
    ("Hey, quick one.", "Sure, go ahead."),
)  # fmt: skip

CHATTER_BEFORE = ("Oh, and ", "Quick update: ", "So, ", "Anyway, ", "Random thing: ", "")
# First words that a prefix lowercases (a name stays capitalised).
LOWERED = frozenset(
    ("The", "We", "My", "Our", "This", "His", "Her", "Started", "Bought", "Got", "Booked",
     "Found", "First", "Best", "Big", "Signed", "Moving", "Decided", "Opened", "Drove", "Made",
     "Finished", "Went", "Met", "Picked", "Test", "Payments", "Rent", "Final", "Switched")
)  # fmt: skip
CHATTER_AFTER = (
    " Anyway, how's your day going?", " Long week.", " Just wanted to share.",
    " Not sure how I feel about it.", " Such a busy time.", " Life, huh.",
)  # fmt: skip
# An assistant reply without a thread's own words: an opener, often with a follow-up.
OPENERS = (
    "That's great to hear!",
    "Thanks for sharing that with me.",
    "Oh wow, that's a big one.",
    "I'm glad you told me.",
    "Sounds like a lot going on.",
    "Nice!",
    "Good to know.",
    "That makes sense.",
    "Fair enough.",
    "Oh, I see.",
    "Love that.",
    "Noted.",
)
FOLLOW_UPS = (
    "Let me know if you want to talk it through.", "I'll remember that for next time.",
    "Is there anything I can do to help?", "Keep me posted on how it goes.",
    "You've had a busy few weeks.", "Take it one step at a time.",
    "It sounds like you're handling it well.", "Remember to take a break too.",
    "How are you feeling about it overall?", "Tell me more whenever you like.",
)  # fmt: skip

_PLACEHOLDER = re.compile(r"{(\w+)}")


@dataclass
class _Renderer:
    """Fills templates: slot values fixed per thread, concept forms drawn per message."""

    rng: random.Random
    values: dict[str, str]
    concepts: Mapping[str, tuple[str, ...]]
    chosen: dict[str, str] = field(default_factory=dict)

    def render(self, template: str, like: Mapping[str, str] | None = None) -> str:
        """The template filled; `like` (the evidence's concept forms) makes a question reuse a
        form with probability SAME_FORM."""
        self.chosen = {}

        def fill(match: re.Match[str]) -> str:
            key = match.group(1)
            if key in self.values:
                return self.values[key]
            if key not in self.chosen:
                forms = self.concepts[key]
                before = like.get(key) if like else None
                if before is not None and len(forms) > 1:
                    others = [form for form in forms if form != before]
                    self.chosen[key] = (
                        before if self.rng.random() < SAME_FORM else self.rng.choice(others)
                    )
                else:
                    self.chosen[key] = self.rng.choice(forms)
            return self.chosen[key]

        text = _PLACEHOLDER.sub(fill, template)
        return text[0].upper() + text[1:]


@dataclass
class _Exchange:
    user: str
    assistant: str
    thread: str = ""
    order: float = 0.0  # position of a thread's exchange within the thread
    question: tuple[str, str, str] | None = None  # (question, answer, thread)


def _mentions(text: str, value: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.IGNORECASE) is not None


def _chatty(text: str, rng: random.Random) -> str:
    """A user message with some small talk before or after it, now and then."""
    if rng.random() >= CHATTER:
        return text
    if rng.random() < 0.5:
        return text + rng.choice(CHATTER_AFTER)
    before = rng.choice(CHATTER_BEFORE)
    if not before or text.startswith(("I ", "I'")) or text.split()[0] not in LOWERED:
        return before + text
    return before + text[0].lower() + text[1:]


def _reply(renderer: _Renderer, replies: list[str], rng: random.Random) -> str:
    """An assistant reply: one of the thread's (each used once) or a generic one."""
    said = renderer.render(replies.pop()) if replies and rng.random() < 0.7 else ""
    if not said or rng.random() < 0.4:
        said = f"{rng.choice(OPENERS)} {said}".strip()
    if rng.random() < 0.5:
        said += " " + rng.choice(FOLLOW_UPS)
    return said


def _thread_exchanges(
    thread: Thread, rng: random.Random, values: dict[str, str]
) -> list[_Exchange]:
    renderer = _Renderer(rng, values, thread.concepts)
    replies = rng.sample(thread.replies, len(thread.replies))
    exchanges: list[_Exchange] = []
    for fact in thread.facts:
        evidence = renderer.render(rng.choice(fact.evidence))
        forms = dict(renderer.chosen)
        question = renderer.render(rng.choice(fact.questions), like=forms)
        asked = (question, values[fact.answer], thread.name)
        exchanges.append(
            _Exchange(evidence, _reply(renderer, replies, rng), thread.name, question=asked)
        )
    low, high = REMARKS_PER_THREAD
    for remark in rng.sample(thread.remarks, min(len(thread.remarks), rng.randint(low, high))):
        exchanges.append(
            _Exchange(renderer.render(remark), _reply(renderer, replies, rng), thread.name)
        )
    for exchange in exchanges:
        exchange.order = rng.random()
        exchange.user = _chatty(exchange.user, rng)
    return exchanges


def _in_thread_order(exchanges: list[_Exchange]) -> list[_Exchange]:
    """The same places taken in turn by each thread's exchanges in the thread's own order (a
    thread's session grows with its order, so every exchange stays in its session)."""
    ordered = list(exchanges)
    places: dict[str, list[int]] = {}
    for place, exchange in enumerate(exchanges):
        if exchange.thread:
            places.setdefault(exchange.thread, []).append(place)
    for taken in places.values():
        in_order = sorted((exchanges[place] for place in taken), key=lambda e: e.order)
        for place, exchange in zip(taken, in_order, strict=True):
            ordered[place] = exchange
    return ordered


def _values_for(thread: Thread, rng: random.Random, used: set[str]) -> dict[str, str]:
    """One value per slot, none used before in the conversation."""
    values: dict[str, str] = {}
    for key, pool in thread.slots.items():
        fresh = [value for value in pool if value not in used]
        if not fresh:
            raise ValueError(f"pool of {thread.name}.{key} exhausted")
        values[key] = rng.choice(fresh)
        used.add(values[key])
    return values


def conversation(seed: int, number: int) -> Conversation:
    """One conversation, the same for the same (seed, number)."""
    rng = random.Random(f"{seed}:{number}")
    conversation_id = f"c{number:02d}"
    user = rng.choice(USERS)
    used: set[str] = {user}
    exchanges: list[tuple[int, _Exchange]] = []
    for thread in rng.sample(THREADS, THREADS_PER_CONVERSATION):
        values = _values_for(thread, rng, used)
        span = rng.randint(4, 10)
        first = rng.randint(0, SESSIONS - span)
        for exchange in _thread_exchanges(thread, rng, values):
            exchanges.append((first + int(exchange.order * span), exchange))
    for request, answer in rng.sample(HELP, HELP_EXCHANGES):
        exchanges.append((rng.randrange(SESSIONS), _Exchange(request, answer)))
    for _ in range(SMALL_TALK_EXCHANGES):
        said, reply = rng.choice(SMALL_TALK)
        exchanges.append((rng.randrange(SESSIONS), _Exchange(said, reply.format(user=user))))
    rng.shuffle(exchanges)
    exchanges.sort(key=lambda item: item[0])  # stable: shuffled within each session
    sessions = [number for number, _ in exchanges]
    ordered = zip(sessions, _in_thread_order([exchange for _, exchange in exchanges]), strict=True)

    messages: list[Message] = []
    evidence: list[tuple[str, tuple[str, str, str]]] = []
    day = START
    session = -1
    clock = day
    for session_number, exchange in ordered:
        while session < session_number:
            session += 1
            day += timedelta(days=rng.randint(2, 9), minutes=rng.randint(-90, 90))
            clock = day
        session_id = f"{conversation_id}-s{session:02d}"
        for role, text in (("user", exchange.user), ("assistant", exchange.assistant)):
            clock += timedelta(seconds=rng.randint(20, 240))
            message_id = f"{conversation_id}-m{len(messages):04d}"
            messages.append(Message(message_id, session_id, role, text, clock.timestamp()))
            if role == "user" and exchange.question is not None:
                evidence.append((message_id, exchange.question))

    texts = {message.id: message.text for message in messages}
    questions: list[Question] = []
    for message_id, (text, answer, thread_name) in evidence:
        holders = [mid for mid, said in texts.items() if _mentions(said, answer)]
        if holders != [message_id]:
            continue  # answerable from another message too (or from none): not a fair question
        questions.append(
            Question(
                f"{conversation_id}-q{len(questions):03d}", text, message_id, answer, thread_name
            )
        )
    return Conversation(conversation_id, user, tuple(messages), tuple(questions))


def conversations(seed: int, numbers: Sequence[int]) -> list[Conversation]:
    """The conversations numbered `numbers` of the benchmark drawn from `seed`."""
    return [conversation(seed, number) for number in numbers]
