"""The memory model of the local stack: no network, no model weights, and honest about it.

It summarises by choosing sentences (never writing new text), titles a session with its
first user sentence, tags texts with frequent words and capitalised names, compares memories
by exact normalised text, and finds no facts: extraction needs a language model, so
`extract` returns nothing rather than pretend.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence

from memkit.llm.protocol import (
    ADD,
    Candidate,
    Capabilities,
    Decision,
    Description,
    Extracted,
    Strategy,
    Turn,
    clean_title,
    fact_key,
    obvious,
)

MODEL_ID = "local-extractive-v1"
TOPICS_MAX = 5
ENTITIES_MAX = 10
SENTENCE_MIN_WORDS = 3  # "Thanks!", "OK, sure." say nothing worth keeping

_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+[\"')\]]*|$)", re.MULTILINE)
_TOKEN = re.compile(r"[A-Za-z][A-Za-z'\-]*[A-Za-z]|[A-Za-z]")
_WORD = re.compile(r"\S+")
_CAPITALISED = re.compile(
    r"[A-Z][A-Za-z0-9'\-]*(?:[ \t]+(?:(?:of|de|la|van|von|the)[ \t]+)?[A-Z][A-Za-z0-9'\-]*)*"
)
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")

_STOPWORDS = """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further get got had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like maybe me
    might more most much must mustn't my myself need no nor not now of off on once only or
    other ought our ours ourselves out over own please really same shall shan't she she'd
    she'll she's should shouldn't so some such sure than thank thanks that that's the their
    theirs them themselves then there there's these they they'd they'll they're they've this
    those through to too under until up us very want was wasn't we we'd we'll we're we've were
    weren't what what's when when's where where's which while who who's whom why why's will
    with won't would wouldn't yes yeah yet you you'd you'll you're you've your yours yourself
    yourselves ok okay hi hello hey one two also just know think going
"""
STOPWORDS = frozenset(_STOPWORDS.split())
# Capitalised for grammar, not because they name something.
_GRAMMAR_CAPITALS = """
    i i'm i've i'd i'll monday tuesday wednesday thursday friday saturday sunday january
    february march april may june july august september october november december
    the a an and but or so if when what where who why how this that these those it my your
    our their his her we you they he she yes no ok okay hi hello hey thanks please
    yesterday today tomorrow tonight
"""
_NOT_NAMES = frozenset(_GRAMMAR_CAPITALS.split())
_EDGE_WORDS = _NOT_NAMES | {"of", "de", "la", "van", "von"}
_OPENERS = " \"'([*-"  # what may come before a sentence's first word


class LocalModel:
    """MemoryModel without a network: extractive, heuristic, and fast (standard library)."""

    @property
    def model_id(self) -> str:
        return MODEL_ID

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            summarize=True,
            extract=False,
            title=True,
            describe=True,
            judge=False,
            curate=False,
            notes=(
                "summaries are extractive: sentences of the input chosen by word-frequency "
                "centrality, never new text",
                "extract finds nothing: finding facts needs a language model "
                "(MEMKIT_LLM_PROVIDER=bedrock)",
                "same_fact is exact equality of normalised text: paraphrases are not merged",
                "curate skips a fact a candidate says word for word and adds the rest: it "
                "never supersedes (only a record's key, its slot, does that without a model)",
                "title is the first user sentence; topics are frequent words, entities are "
                "capitalised names and ISO dates",
            ),
        )

    def summarize(self, previous: str | None, turns: Sequence[Turn], max_words: int) -> str:
        """The most central sentences of `previous` and `turns`, in their order, at most
        `max_words` words.

        A sentence's score is the sum, over its distinct content words (stopwords removed),
        of the word's frequency in the whole input divided by the highest frequency, divided
        by the square root of its number of content words: sentences made of the words the
        conversation keeps coming back to win, long ones are not favoured for length alone.
        Sentences under SENTENCE_MIN_WORDS words and repeats are skipped. Sentences are taken
        best first while they fit; if not even the best fits, its first `max_words` words.
        """
        sentences = _sentences(previous or "")
        for turn in turns:
            sentences.extend(_sentences(turn.content))
        candidates = _unique(s for s in sentences if len(_WORD.findall(s)) >= SENTENCE_MIN_WORDS)
        if not candidates or max_words < 1:
            return ""
        frequency = Counter(word for s in candidates for word in _content_words(s))
        top = max(frequency.values(), default=1)

        def score(sentence: str) -> float:
            words = set(_content_words(sentence))
            if not words:
                return 0.0
            return sum(frequency[w] / top for w in words) / math.sqrt(len(words))

        ranked = sorted(range(len(candidates)), key=lambda i: (-score(candidates[i]), i))
        chosen: list[int] = []
        used = 0
        for index in ranked:
            length = len(_WORD.findall(candidates[index]))
            if used + length <= max_words:
                chosen.append(index)
                used += length
        if not chosen:
            return " ".join(_WORD.findall(candidates[ranked[0]])[:max_words])
        return " ".join(candidates[i] for i in sorted(chosen))

    def extract(
        self,
        turns: Sequence[Turn],
        strategy: Strategy,
        instructions: str | None = None,
        known: Sequence[str] = (),
    ) -> list[Extracted]:
        """Nothing: finding facts needs a language model (see `capabilities`)."""
        return []

    def title(self, turns: Sequence[Turn]) -> str:
        """The first user turn's first sentence of SENTENCE_MIN_WORDS words or more (so not
        "Hi!"; its first sentence if none is that long; the first turn's if no user spoke),
        cleaned and cut at a word boundary to TITLE_MAX_CHARS."""
        first = next((t for t in turns if t.role == "user" and t.content.strip()), None)
        if first is None:
            first = next((t for t in turns if t.content.strip()), None)
        if first is None:
            return ""
        sentences = _sentences(first.content) or [first.content]
        telling = (s for s in sentences if len(_WORD.findall(s)) >= SENTENCE_MIN_WORDS)
        return clean_title(next(telling, sentences[0]))

    def describe(self, texts: Sequence[str]) -> list[Description]:
        """Per text: topics = the TOPICS_MAX most frequent content words (lowercase, three
        letters or more, stopwords removed; ties by first use); entities = runs of
        capitalised words ("Bank of America"), without a sentence's first word unless the
        text also capitalises that word mid-sentence and without pronouns, weekdays and
        months at their edges, then ISO dates; in order of appearance, at most ENTITIES_MAX."""
        return [Description(topics=_topics(text), entities=_entities(text)) for text in texts]

    def same_fact(self, first: str, second: str) -> bool:
        """Exact equality of normalised text (case, punctuation and spacing ignored)."""
        return bool(fact_key(first)) and fact_key(first) == fact_key(second)

    def curate(
        self, facts: Sequence[Extracted], candidates: Sequence[Sequence[Candidate]]
    ) -> list[Decision]:
        """Skip a fact a candidate says word for word (normalised text); add the rest. Telling
        a contradiction from a second fact needs a language model, so nothing is superseded
        here: slots (a record's `key`) supersede at write time without one."""
        return [obvious(fact, found) or ADD for fact, found in zip(facts, candidates, strict=True)]


def _sentences(text: str) -> list[str]:
    return [" ".join(m.group(0).split()) for m in _SENTENCE.finditer(text) if m.group(0).strip()]


def _unique(sentences: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    unique: list[str] = []
    for sentence in sentences:
        key = fact_key(sentence)
        if key and key not in seen:
            seen.add(key)
            unique.append(sentence)
    return unique


def _content_words(text: str) -> list[str]:
    words = (token.lower() for token in _TOKEN.findall(text))
    return [word for word in words if word not in STOPWORDS and len(word) > 2]


def _topics(text: str) -> tuple[str, ...]:
    counts = Counter(_content_words(text))  # insertion order = first use; sorted() is stable
    return tuple(sorted(counts, key=lambda word: -counts[word])[:TOPICS_MAX])


def _entities(text: str) -> tuple[str, ...]:
    sentences = _sentences(text)
    # a sentence's first word is capitalised anyway: it counts only if the text also
    # capitalises it mid-sentence ("New" in "than New York")
    inner_capitals = {
        word
        for sentence in sentences
        for match in _CAPITALISED.finditer(sentence)
        if sentence[: match.start()].strip(_OPENERS)
        for word in match.group(0).split()
    }
    found: dict[str, str] = {}
    for sentence in sentences:
        for match in _CAPITALISED.finditer(sentence):
            words = match.group(0).split()
            if not sentence[: match.start()].strip(_OPENERS) and words[0] not in inner_capitals:
                words = words[1:]
            while words and words[0].lower() in _EDGE_WORDS:
                words = words[1:]
            while words and words[-1].lower() in _EDGE_WORDS:
                words = words[:-1]
            if words:
                name = " ".join(words)
                found.setdefault(name.casefold(), name)
    for match in _ISO_DATE.finditer(text):
        found.setdefault(match.group(0), match.group(0))
    return tuple(found.values())[:ENTITIES_MAX]
