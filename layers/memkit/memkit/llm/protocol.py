"""What memory curation needs from a language model, as tasks rather than raw prompts.

Each provider turns a task into its own calls (Bedrock Converse: prompts and JSON; the local
provider: extractive and heuristic methods that need no network) and returns plain data.
Inputs are untrusted conversation text: a provider must treat it as data, never as
instructions (prompts fence it and say so). Outputs are validated here, not trusted.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

Strategy = Literal["discrete", "summary", "preferences", "custom"]

# A session title, as both providers give it and the API shows it.
TITLE_MAX_CHARS = 80
_TITLE_LABEL = re.compile(r"^(?:title|subject)\s*[:\-]\s*", re.IGNORECASE)
_TITLE_MARKUP = re.compile(r"^[#>*\s-]+|\*\*|__|`")
_QUOTES = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb`"


@dataclass(frozen=True)
class Turn:
    """One message given to a model: who said it, what, when (ISO 8601), and its id."""

    id: str
    role: str
    content: str
    created_at: str


@dataclass(frozen=True)
class Extracted:
    """A memory a model found in some turns. `event_date` (ISO 8601) for episodic ones,
    with relative dates resolved against the turns' times; `source_ids` are the turns'."""

    text: str
    memory_type: Literal["semantic", "episodic"]
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    event_date: str | None = None
    source_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Candidate:
    """A current stored memory an extracted fact may be about: its record id and text."""

    id: str
    text: str


Action = Literal["add", "supersede", "skip"]


@dataclass(frozen=True)
class Decision:
    """What curation does with an extracted fact, given its candidates: `add` it as a new
    memory; `supersede` the `targets` (the fact replaces them: it contradicts or refines
    them); `skip` it (the `targets` say it already, and keep it as evidence)."""

    action: Action
    targets: tuple[str, ...] = ()


ADD = Decision("add")


@dataclass(frozen=True)
class Description:
    """What a text is about: `topics` in lowercase, `entities` (people, places,
    organisations, products, dates) as the text writes them."""

    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()


@dataclass(frozen=True)
class Capabilities:
    """What a provider can honestly do (the local one cannot find facts, say).

    `judge` is whether `same_fact` recognises the same fact in other words; without it,
    `same_fact` is exact equality of normalised text. `curate` is whether `curate` can tell
    a contradiction or a refinement (supersede) from a new fact; without it, it only skips
    what a candidate says word for word. `notes` say how each task is done.
    """

    summarize: bool = True
    extract: bool = True
    title: bool = True
    describe: bool = True
    judge: bool = True
    curate: bool = True
    notes: tuple[str, ...] = field(default_factory=tuple)


class LLMError(Exception):
    """The model could not do the task (after retries); the reason carries no content.
    `retryable` says whether trying again later may help (throttling, timeouts)."""

    def __init__(self, reason: str, retryable: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retryable = retryable


class AnswerCutShort(LLMError):
    """The model's answer hit its token limit: what it found in these turns is incomplete
    (give it fewer turns)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason, retryable=False)


class MemoryModel(Protocol):
    @property
    def model_id(self) -> str: ...

    @property
    def capabilities(self) -> Capabilities: ...

    def summarize(self, previous: str | None, turns: Sequence[Turn], max_words: int) -> str:
        """A running summary: `previous` (the session's context) extended by `turns`, at
        most `max_words` words. Raises LLMError when no summary could be made (the caller
        then keeps its view unchanged)."""
        ...

    def extract(
        self,
        turns: Sequence[Turn],
        strategy: Strategy,
        instructions: str | None = None,
        known: Sequence[str] = (),
    ) -> list[Extracted]:
        """Memories worth keeping from `turns`, by strategy (discrete: facts and events;
        summary: one summary memory; preferences: likes, dislikes, habits; custom: the
        caller's `instructions`, fenced as data). `known` are texts already stored, so the
        model does not repeat them."""
        ...

    def title(self, turns: Sequence[Turn]) -> str:
        """A short title for a conversation from its first turns: one line, no quotes, at
        most TITLE_MAX_CHARS characters; "" when there is nothing to title."""
        ...

    def describe(self, texts: Sequence[str]) -> list[Description]:
        """Topics and entities for each text, in order (one Description per text, empty
        where none were found)."""
        ...

    def same_fact(self, first: str, second: str) -> bool:
        """Whether two memories say the same thing (a merge needs a yes; anything unclear
        is a no, so unrelated facts are never merged)."""
        ...

    def curate(
        self, facts: Sequence[Extracted], candidates: Sequence[Sequence[Candidate]]
    ) -> list[Decision]:
        """One Decision per fact, in order: add, supersede or skip, given the fact's
        `candidates` (the user's current memories that may be about the same thing). A
        decision names only its own fact's candidates; anything unclear is an add, so a
        fact is never lost and never retires a memory on a guess."""
        ...


def obvious(fact: Extracted, candidates: Sequence[Candidate]) -> Decision | None:
    """The decision no model is needed for: no candidates (add), or a candidate that says
    the fact word for word (skip it, keeping that one); None when it takes judgement."""
    if not candidates:
        return ADD
    key = fact_key(fact.text)
    same = [c.id for c in candidates if key and fact_key(c.text) == key]
    return Decision("skip", (same[0],)) if same else None


def clean_title(text: str) -> str:
    """A title as shown: the first non-empty line, without markup, a "Title:" label or
    surrounding quotes, whitespace collapsed, cut at a word boundary to TITLE_MAX_CHARS."""
    line = next((part.strip() for part in text.splitlines() if part.strip()), "")
    line = _TITLE_LABEL.sub("", _TITLE_MARKUP.sub("", line))
    previous = None
    while previous != line:  # quotes, labels and trailing stops can nest: "Title: 'X.'"
        previous = line
        line = _TITLE_LABEL.sub("", line.strip().strip(_QUOTES).rstrip(".,;:").strip())
    line = " ".join(line.split())
    if len(line) <= TITLE_MAX_CHARS:
        return line
    cut = line[: TITLE_MAX_CHARS + 1].rsplit(" ", 1)[0] if " " in line[:TITLE_MAX_CHARS] else ""
    return (cut or line[:TITLE_MAX_CHARS]).rstrip(" ,;:-")


def fact_key(text: str) -> str:
    """A memory's text as compared for exact equality: Unicode-normalised, case-folded,
    punctuation dropped, whitespace collapsed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join("".join(char if char.isalnum() else " " for char in folded).split())
