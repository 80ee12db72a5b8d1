"""Current truth (issue 28) on the local stack: does the default search answer with what is
true now, `as_of` with what was true then, and what do the truth filters cost?

The stack is `make serve`'s (memkit_dev.local.stack, auth none: DynamoDB Local where Java
17+ is here, else moto, or as MEMKIT_BENCH_ENGINE says; the loopback OpenSearch; the stream
pump indexing records as they are written). A scripted life of USERS people over YEAR is
written through POST /v1/long-term-memory/, one request an event, in the order the writer
learns them (seeded: the same life every run):

- each person has four facts on 1 January (home city, employer and job, favourite food,
  favourite drink), then moves, job changes and changes of taste on days of the year, and
  CORRECTIONS corrections ("Correction: Ada moved to Porto, not to Oslo"), each written a
  few days after the fact it corrects and valid from the same day (the wrong one was never
  true);
- the life is written twice, so that the two ways of superseding differ in nothing else
  (half the records each): in namespace `slot` every record carries its `key` (home_city,
  employer, food, drink) and memkit finds what it supersedes; in namespace `explicit` no
  record has a key, and each one after a chain's first names the id it replaces in
  `supersedes` (the writer keeps the ids). Ids are prefixed by the way ("slot-ada-food-2");
- every record has its `valid_from` (and `event_date`) on the day it began to hold, and
  topics (so the curator has nothing to describe); the benchmark then waits until every
  record's current version is indexed (GET: `indexing` "indexed"), never a fixed sleep, and
  counts the records whose `retired_at` disagrees with the script.

Questions are phrased as a person would ask them ("Where does Ada live now?", "Who did Ada
work for on 3 May 2025?") and sent to POST /v1/long-term-memory/search with `user_id`
{"eq": ...} and `namespace` {"eq": the way}, limit 10 and otherwise the defaults (hybrid
search, local embedder). Which record answers a question is known from the script, never
from the API:

1. `now`: two phrasings per chain, the default search (current only); a hit is the chain's
   last record. Reported for each way, with the same share for `current_only` false.
2. `as_of`: a day inside each stretch of a chain's final history (noon, a day no record
   starts on; a corrected fact held for no time and has none), with `as_of` that day; a hit
   is the record that held then. Also counted: `as_of` searches that list another record of
   the chain, or not the one valid then (target 0).
3. The `now` questions with `current_only` false: the share where a record the chain
   superseded ranks above its current one (or the current one is missing), against the same
   share in the default search, whose target is 0; and the default searches that list a
   superseded record at all, or rank one first.
4. Latency at the HTTP client, ROUNDS rounds of every question, each search interleaved with
   the same search with `current_only` false (no truth conditions at all), alternating which
   goes first: median and 95th percentile of the default and the `as_of` searches, the
   median of their unfiltered twins, and the ratios.

It exits 1 if a default search ever ranks a superseded record first (by the script). With
`--misses` it prints every question whose first hit is not its answer. How long a run
takes, and what it measured, is in docs/benchmarks.md.

    python -m bench.truth [--engine auto|dynamodb-local|moto]
                          [--vector-store opensearch|dynamodb] [--misses]

`--vector-store dynamodb` runs the same on VectorStore dynamodb (the stack's vector table
behind its local stand-in); the figures are then prefixed `truth.dynamodb.`.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import environment
from bench.figures import median, percentile, report

YEAR = 2025
USERS = ("Ada", "Bruno", "Chloe", "Dev", "Elif")
SEED = "truth/life"
CORRECTIONS = 2  # a person
LIMIT = 10
ROUNDS = 3  # of every question, for the latency
WARM_UP = 5
SEARCHABLE_TIMEOUT = 300.0
LTM = "/v1/long-term-memory"

CITIES = [
    "Berlin", "Lisbon", "Oslo", "Vienna", "Madrid", "Dublin", "Prague", "Warsaw", "Helsinki",
    "Athens", "Zurich", "Munich", "Porto", "Seville", "Krakow", "Tallinn", "Ghent", "Bologna",
]  # fmt: skip
COMPANIES = [
    "Globex", "Initech", "Umbrella", "Hooli", "Soylent", "Vandelay", "Stark Industries",
    "Wayne Enterprises", "Cyberdyne", "Tyrell", "Wonka", "Acme", "Pied Piper", "Aperture",
]  # fmt: skip
JOBS = [
    "nurse", "teacher", "data analyst", "carpenter", "pilot", "accountant", "chef",
    "architect", "translator", "electrician", "pharmacist", "lawyer",
]  # fmt: skip
FOODS = [
    "ramen", "lasagne", "tacos", "sushi", "paella", "falafel", "pierogi", "curry", "risotto",
    "dumplings", "moussaka", "pho", "goulash", "burritos",
]  # fmt: skip
DRINKS = [
    "green tea", "espresso", "lemonade", "oat milk latte", "sparkling water", "rooibos",
    "hot chocolate", "ginger beer", "orange juice", "matcha", "kombucha", "cold brew",
]  # fmt: skip


@dataclass(frozen=True)
class Attribute:
    key: str
    topic: str
    changes: tuple[int, int]  # how many changes in the year, at least and at most
    now: tuple[str, str]  # the questions about now
    then: str  # the question about a day
    first: Callable[[str, Sequence[str]], str]  # the text of the fact on 1 January
    later: tuple[Callable[[str, Sequence[str]], str], ...]  # of a change (one at random)
    corrected: Callable[[str, Sequence[str], Sequence[str]], str]  # (new value, wrong value)
    values: Callable[[random.Random], tuple[str, ...]]


def _city(rng: random.Random) -> tuple[str, ...]:
    return (rng.choice(CITIES),)


def _job(rng: random.Random) -> tuple[str, ...]:
    return rng.choice(COMPANIES), rng.choice(JOBS)


def _food(rng: random.Random) -> tuple[str, ...]:
    return (rng.choice(FOODS),)


def _drink(rng: random.Random) -> tuple[str, ...]:
    return (rng.choice(DRINKS),)


ATTRIBUTES = (
    Attribute(
        key="home_city",
        topic="home",
        changes=(1, 3),
        now=("Where does {name} live now?", "Which city is {name} living in?"),
        then="Where did {name} live on {day}?",
        first=lambda n, v: f"{n} lives in {v[0]}",
        later=(
            lambda n, v: f"{n} moved to {v[0]}",
            lambda n, v: f"{n} has relocated to {v[0]} and lives there now",
        ),
        corrected=lambda n, v, w: f"Correction: {n} moved to {v[0]}, not to {w[0]}",
        values=_city,
    ),
    Attribute(
        key="employer",
        topic="work",
        changes=(1, 2),
        now=("Who does {name} work for?", "Where is {name} employed these days?"),
        then="Who did {name} work for on {day}?",
        first=lambda n, v: f"{n} works at {v[0]} as {_a(v[1])}",
        later=(
            lambda n, v: f"{n} now works at {v[0]} as {_a(v[1])}",
            lambda n, v: f"{n} started a new job at {v[0]} as {_a(v[1])}",
        ),
        corrected=lambda n, v, w: f"Correction: {n} works at {v[0]} as {_a(v[1])}, not at {w[0]}",
        values=_job,
    ),
    Attribute(
        key="food",
        topic="food",
        changes=(1, 3),
        now=("What is {name}'s favourite food?", "What does {name} like to eat most?"),
        then="What was {name}'s favourite food on {day}?",
        first=lambda n, v: f"{n}'s favourite food is {v[0]}",
        later=(
            lambda n, v: f"{n}'s favourite food is now {v[0]}",
            lambda n, v: f"{n} has come to love {v[0]} more than any other dish",
        ),
        corrected=lambda n, v, w: f"Correction: {n}'s favourite food is {v[0]}, not {w[0]}",
        values=_food,
    ),
    Attribute(
        key="drink",
        topic="drink",
        changes=(1, 3),
        now=("What does {name} like to drink?", "What is {name}'s favourite drink?"),
        then="What did {name} like to drink on {day}?",
        first=lambda n, v: f"{n}'s favourite drink is {v[0]}",
        later=(
            lambda n, v: f"{n} now prefers to drink {v[0]}",
            lambda n, v: f"{n}'s favourite drink these days is {v[0]}",
        ),
        corrected=lambda n, v, w: f"Correction: {n}'s favourite drink is {v[0]}, not {w[0]}",
        values=_drink,
    ),
)


@dataclass
class Fact:
    id: str
    text: str
    valid_from: datetime
    written: datetime  # when the writer learns it (the order of the writes)
    correction: bool = False


WAYS = ("slot", "explicit")  # each the namespace its records are written in


@dataclass
class Chain:
    """One person's one attribute, written one way: its records in the order written."""

    user: str
    name: str
    attribute: Attribute
    way: str  # slot: every record with `key`; explicit: each names the one it replaces
    facts: list[Fact] = field(default_factory=list)

    @property
    def current(self) -> Fact:
        return self.facts[-1]

    def held_on(self, day: datetime) -> Fact:
        """The fact that held on `day`: the last one written among those that began by then
        (a correction begins on the day the fact it corrects began, and replaces it)."""
        return [f for f in self.facts if f.valid_from <= day][-1]

    def stretches(self) -> list[tuple[datetime, datetime]]:
        """The stretches of the chain's final history, each a fact's, in order."""
        starts = sorted({f.valid_from for f in self.facts})
        ends = [*starts[1:], datetime(YEAR + 1, 1, 1, tzinfo=UTC)]
        return list(zip(starts, ends, strict=True))


@dataclass(frozen=True)
class Write:
    chain: Chain
    fact: Fact
    replaces: str | None  # the id it supersedes (the chain's current one when written)


def _distinct(rng: random.Random, attribute: Attribute, used: set[str]) -> tuple[str, ...]:
    """A value whose first part (the city, the company, the dish) is not in `used`."""
    while (value := attribute.values(rng))[0] in used:
        pass
    used.add(value[0])
    return value


def _a(noun: str) -> str:
    return f"{'an' if noun[0] in 'aeiou' else 'a'} {noun}"


def _lives(seed: str) -> list[Chain]:
    """Every person's chains, once (no way yet)."""
    rng = random.Random(seed)
    start = datetime(YEAR, 1, 1, tzinfo=UTC)
    chains: list[Chain] = []
    for name in USERS:
        user = name.lower()
        mine: list[Chain] = []
        values: dict[str, tuple[str, ...]] = {}  # a fact's value, by its id
        for attribute in ATTRIBUTES:
            chain = Chain(user, name, attribute, "")
            used: set[str] = set()
            days = sorted(rng.sample(range(20, 340), rng.randint(*attribute.changes)))
            for n, day in enumerate([0, *days]):
                value = _distinct(rng, attribute, used)
                began = start + timedelta(days=day)
                text = (attribute.first if n == 0 else rng.choice(attribute.later))(name, value)
                fact = Fact(f"{user}-{attribute.key}-{n}", text, began, began)
                values[fact.id] = value
                chain.facts.append(fact)
            mine.append(chain)
        # Corrections: a change (never the first fact) found wrong a few days later, before
        # the chain's next change, and valid from the day the wrong one was.
        changes = [(c, f) for c in mine for f in c.facts[1:]]
        for chain, wrong in rng.sample(changes, CORRECTIONS):
            later = [f.valid_from for f in chain.facts if f.valid_from > wrong.valid_from]
            learned = wrong.valid_from + timedelta(days=rng.randint(2, 9))
            if later and learned >= min(later):
                learned = min(later) - timedelta(hours=12)
            used = {values[f.id][0] for f in chain.facts}
            right = _distinct(rng, chain.attribute, used)
            text = chain.attribute.corrected(name, right, values[wrong.id])
            fact = Fact(f"{wrong.id}-fix", text, wrong.valid_from, learned, correction=True)
            values[fact.id] = right
            chain.facts.append(fact)
        for chain in mine:
            chain.facts.sort(key=lambda f: f.written)
        chains += mine
    return chains


def life(seed: str = SEED) -> tuple[list[Chain], list[Write]]:
    """Every person's chains, written each way (the same facts, ids prefixed by the way),
    and the writes that make them, in the order they are written."""
    chains = [
        Chain(
            chain.user,
            chain.name,
            chain.attribute,
            way,
            [replace(f, id=f"{way}-{f.id}") for f in chain.facts],
        )
        for way in WAYS
        for chain in _lives(seed)
    ]
    writes = [
        # The record each write replaces is the chain's newest when it is written.
        Write(chain, fact, chain.facts[n - 1].id if n else None)
        for chain in chains
        for n, fact in enumerate(chain.facts)
    ]
    writes.sort(key=lambda w: (w.fact.written, w.chain.way, w.fact.id))
    return chains, writes


def body_of(write: Write) -> dict[str, Any]:
    """The record as the writer sends it."""
    chain, fact = write.chain, write.fact
    record: dict[str, Any] = {
        "id": fact.id,
        "text": fact.text,
        "user_id": chain.user,
        "namespace": chain.way,
        "topics": [chain.attribute.topic],
        "valid_from": fact.valid_from.isoformat(),
        "event_date": fact.valid_from.isoformat(),
    }
    if chain.way == "slot":
        record["key"] = chain.attribute.key
    elif write.replaces is not None:
        record["supersedes"] = [write.replaces]
    return record


@dataclass(frozen=True)
class Question:
    chain: Chain
    text: str
    answer: str  # the id of the record that answers it
    superseded: frozenset[str]  # the chain's other records (not the answer)
    as_of: str | None = None


def _day(day: datetime) -> str:
    return f"{day.day} {day:%B %Y}"


def now_questions(chains: Sequence[Chain]) -> list[Question]:
    return [
        Question(
            chain,
            phrasing.format(name=chain.name),
            chain.current.id,
            frozenset(f.id for f in chain.facts[:-1]),
        )
        for chain in chains
        for phrasing in chain.attribute.now
    ]


def as_of_questions(chains: Sequence[Chain]) -> list[Question]:
    """A day in each stretch of each chain's history (the same days whichever way)."""
    asked = []
    for chain in chains:
        rng = random.Random(f"{SEED}/days/{chain.user}/{chain.attribute.key}")
        for began, ended in chain.stretches():
            days = (ended - began).days
            day = began + timedelta(days=rng.randint(0, max(0, days - 1)), hours=12)
            held = chain.held_on(day)
            text = chain.attribute.then.format(name=chain.name, day=_day(day))
            others = frozenset(f.id for f in chain.facts if f.id != held.id)
            asked.append(Question(chain, text, held.id, others, day.isoformat()))
    return asked


def _above_current(ids: Sequence[str], question: Question) -> bool:
    """Whether a record the chain superseded ranks above its current one (or the current
    one is missing while a superseded one is there)."""
    ranks = {rid: n for n, rid in enumerate(ids)}
    current = ranks.get(question.answer, len(ids))
    return any(ranks[rid] < current for rid in question.superseded if rid in ranks)


def until_indexed(client: Any, ids: Sequence[str]) -> float | None:
    """Seconds until every record's current version is indexed (its GET says so); None if
    that did not happen within SEARCHABLE_TIMEOUT."""
    started = time.monotonic()
    waiting = list(ids)
    while time.monotonic() - started < SEARCHABLE_TIMEOUT:
        still = []
        for rid in waiting:
            response = client.get(f"{LTM}/{rid}")
            assert response.status_code == 200, (response.status_code, response.text)
            if response.json()["indexing"] != "indexed":
                still.append(rid)
        if not still:
            return time.monotonic() - started
        waiting = still
        time.sleep(0.5)
    return None


def _share(flags: Sequence[bool]) -> float:
    return sum(flags) / len(flags)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--engine", choices=["auto", "dynamodb-local", "moto"])
    parser.add_argument("--vector-store", choices=["opensearch", "dynamodb"], default="opensearch")
    parser.add_argument(
        "--misses", action="store_true", help="print each question whose first hit is wrong"
    )
    args = parser.parse_args()
    name = "truth" if args.vector_store == "opensearch" else "truth.dynamodb"
    environment.apply()
    import httpx

    from bench.dynamodb_requests import local_stack

    chains, writes = life()
    now_asked, then_asked = now_questions(chains), as_of_questions(chains)
    superseded = {f.id for c in chains for f in c.facts if f is not c.current}
    report(
        f"{name}.records",
        len(writes),
        target=f"{len(USERS)} people over {YEAR}, {len(chains) // len(WAYS)} chains, written "
        f"each way ({', '.join(WAYS)}); {sum(w.fact.correction for w in writes)} corrections, "
        f"{len(superseded)} records superseded",
    )

    stack_of = local_stack("truth", args.engine, vector_store=args.vector_store)
    with stack_of as stack, httpx.Client(base_url=stack.url, timeout=120) as http:
        started = time.monotonic()
        for write in writes:
            response = http.post(f"{LTM}/", json={"memories": [body_of(write)]})
            assert response.status_code == 200, (response.status_code, response.text)
            assert response.json()["created"] == [write.fact.id], response.text
        written = time.monotonic() - started
        searchable = until_indexed(http, [w.fact.id for w in writes])
        if searchable is None:
            print(f"truth: not every record was indexed within {SEARCHABLE_TIMEOUT:.0f} s")
            return 1
        report(
            f"{name}.all_searchable_s",
            searchable,
            "s",
            f"after {len(writes)} writes, one a request, in {written:.1f} s",
        )
        # The API's own view of each record against the script.
        wrong_state = []
        for chain in chains:
            for fact in chain.facts:
                record = http.get(f"{LTM}/{fact.id}").json()
                if (record["retired_at"] is None) != (fact is chain.current):
                    wrong_state.append(fact.id)
        report(
            f"{name}.records_not_as_scripted",
            len(wrong_state),
            target="target 0; records retired where the script has them current, or not"
            + (f": {', '.join(wrong_state)}" if wrong_state else ""),
        )

        def search(question: Question, **extra: Any) -> tuple[list[str], float]:
            body = {
                "text": question.text,
                "user_id": {"eq": question.chain.user},
                "namespace": {"eq": question.chain.way},
                "limit": LIMIT,
                **extra,
            }
            began = time.perf_counter()
            response = http.post(f"{LTM}/search", json=body)
            elapsed = (time.perf_counter() - began) * 1000
            assert response.status_code == 200, (response.status_code, response.text)
            return [hit["id"] for hit in response.json()["memories"]], elapsed

        for question in (now_asked + then_asked)[:WARM_UP]:
            search(question)
            search(question, current_only=False)

        # Every question ROUNDS times, each with its unfiltered twin right before or after;
        # what each search ranked (in its first round), by label, in question order.
        ranked: dict[str, list[list[str]]] = {}
        times: dict[str, list[float]] = {}
        for run in range(ROUNDS):
            for kind, asked in (("now", now_asked), ("as_of", then_asked)):
                for n, question in enumerate(asked):
                    truth: dict[str, Any] = {"as_of": question.as_of} if question.as_of else {}
                    pair: list[tuple[str, dict[str, Any]]] = [
                        (kind, truth),
                        (f"{kind}_all", {"current_only": False}),
                    ]
                    if (run + n) % 2:
                        pair.reverse()
                    for label, extra in pair:
                        ids, elapsed = search(question, **extra)
                        times.setdefault(label, []).append(elapsed)
                        if run == 0:
                            ranked.setdefault(label, []).append(ids)

        def first(label: str, asked: Sequence[Question]) -> list[bool]:
            return [ids[:1] == [q.answer] for q, ids in zip(asked, ranked[label], strict=True)]

        def by_way(flags: Sequence[bool], asked: Sequence[Question], way: str) -> list[bool]:
            return [hit for q, hit in zip(asked, flags, strict=True) if q.chain.way == way]

        # 1. What is true now, by the way it was written; and without the truth conditions.
        first_now, first_all = first("now", now_asked), first("now_all", now_asked)
        for way in WAYS:
            mine = by_way(first_now, now_asked, way)
            how = "key" if way == "slot" else "supersedes [id]"
            report(
                f"{name}.now_top1.{way}",
                _share(mine),
                target=f"target 1.0; {len(mine)} questions, written with {how}, default search",
            )
            report(
                f"{name}.now_top1_current_only_false.{way}",
                _share(by_way(first_all, now_asked, way)),
                target="the same questions, current_only false",
            )
        missing = sum(q.answer not in ids for q, ids in zip(now_asked, ranked["now"], strict=True))
        report(
            f"{name}.now_current_missing",
            missing,
            target=f"target 0; default searches without the current record in their {LIMIT}",
        )
        # 2. What was true on a day.
        first_then = first("as_of", then_asked)
        for way in WAYS:
            mine = by_way(first_then, then_asked, way)
            report(
                f"{name}.as_of_top1.{way}",
                _share(mine),
                target=f"{len(mine)} questions, a day in each stretch of a chain's history",
            )
        report(f"{name}.as_of_top1", _share(first_then), target=f"{len(first_then)} questions")
        other_versions = sum(
            bool(q.superseded & {*ids}) or q.answer not in ids
            for q, ids in zip(then_asked, ranked["as_of"], strict=True)
        )
        report(
            f"{name}.as_of_wrong_version",
            other_versions,
            target="target 0; as_of searches listing another record of the chain, or not the "
            "one valid then",
        )
        # 3. A superseded record above the current one, and in the default search at all.
        for label, shown, note in (
            ("now_all", "current_only_false", f"{len(now_asked)} questions, current_only false"),
            ("now", "default", "target 0; the same questions, default search"),
        ):
            above = [
                _above_current(ids, q) for q, ids in zip(now_asked, ranked[label], strict=True)
            ]
            report(f"{name}.superseded_above_current.{shown}", _share(above), target=note)
        listed = sum(bool(superseded & {*ids}) for ids in ranked["now"])
        report(
            f"{name}.default_superseded_listed",
            listed,
            target=f"target 0; default searches with a superseded record in their {LIMIT}",
        )
        first_superseded = [
            (q, ids[0])
            for q, ids in zip(now_asked, ranked["now"], strict=True)
            if ids and ids[0] in superseded
        ]
        report(
            f"{name}.default_superseded_first",
            len(first_superseded),
            target="target 0; default searches whose first hit is a superseded record",
        )
        # 4. What the truth conditions cost.
        shape = f"{len(writes)} records, user and namespace filter, limit {LIMIT}"
        for kind in ("now", "as_of"):
            label = "search" if kind == "now" else "as_of_search"
            samples, twins = times[kind], times[f"{kind}_all"]
            report(
                f"{name}.{label}_ms",
                median(samples),
                "ms median",
                f"{len(samples)} searches ({ROUNDS} rounds), {shape}",
            )
            report(f"{name}.{label}_p95_ms", percentile(samples, 0.95), "ms")
            report(
                f"{name}.{label}_current_only_false_ms",
                median(twins),
                "ms median",
                "the same searches with current_only false, interleaved",
            )
            report(
                f"{name}.{label}_truth_cost_ratio",
                median(samples) / median(twins),
                "x",
                f"{'default' if kind == 'now' else 'as_of'} median / current_only false median",
            )
        if args.misses:
            for kind, asked, hits in (
                ("now", now_asked, first_now),
                ("as_of", then_asked, first_then),
            ):
                for question, ids, hit in zip(asked, ranked[kind], hits, strict=True):
                    if not hit:
                        at = f" as of {question.as_of}" if question.as_of else ""
                        print(
                            f"truth: miss: {question.text!r}{at} ({question.chain.way}): "
                            f"expected {question.answer}, got {ids}",
                            flush=True,
                        )
    if first_superseded:
        print(
            "truth: the default search ranked a superseded record first for "
            + "; ".join(f"{q.text!r} ({rid})" for q, rid in first_superseded),
            flush=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
