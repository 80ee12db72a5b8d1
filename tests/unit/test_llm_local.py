"""The local memory model: extractive summaries, plain titles, simple tags, exact matching,
and no pretending to find facts."""

from __future__ import annotations

import re

import pytest

from memkit.config import LLMSettings
from memkit.handlers.wiring import memory_model_for
from memkit.llm.local import LocalModel
from memkit.llm.protocol import (
    ADD,
    TITLE_MAX_CHARS,
    Candidate,
    Decision,
    Description,
    Extracted,
    Turn,
)

TURNS = (
    Turn(
        "m1",
        "user",
        "Hi! I need help planning a trip to Lisbon in May. I love seafood and old trams.",
        "2024-05-01T10:00:00Z",
    ),
    Turn(
        "m2",
        "assistant",
        "Sure. Lisbon has great seafood restaurants in Alfama. Trams 28 and 12 cross the old "
        "town. Thanks!",
        "2024-05-01T10:00:05Z",
    ),
    Turn(
        "m3",
        "user",
        "Great, book seafood restaurants near tram 28 in Lisbon please.\nOk.",
        "2024-05-01T10:01:00Z",
    ),
)
PREVIOUS = "The user is travelling to Portugal. The user dislikes crowded beaches."


SOURCE = " ".join([PREVIOUS, *(" ".join(t.content.split()) for t in TURNS)])


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.findall(r"[^.!?\n]+[.!?]*", text) if s.strip()]


@pytest.fixture
def model() -> LocalModel:
    return LocalModel()


def test_a_summary_is_made_only_of_sentences_of_the_input(model: LocalModel) -> None:
    # Given a previous summary and three turns
    source = set(_sentences(SOURCE))

    # When they are summarised in at most 30 words
    summary = model.summarize(PREVIOUS, TURNS, max_words=30)

    # Then every sentence of the summary is one of theirs, and it keeps to 30 words
    chosen = _sentences(summary)
    assert chosen
    assert set(chosen) <= source
    assert len(summary.split()) <= 30


def test_a_summary_prefers_central_sentences_and_keeps_their_order(model: LocalModel) -> None:
    summary = model.summarize(PREVIOUS, TURNS, max_words=25)

    # the seafood-and-Lisbon sentences share the conversation's words; small talk does not
    assert "Lisbon has great seafood restaurants in Alfama." in summary
    assert "Thanks!" not in summary
    assert "Ok." not in summary
    positions = [SOURCE.index(sentence) for sentence in _sentences(summary)]
    assert positions == sorted(positions)


@pytest.mark.parametrize("max_words", [1, 3, 10, 200])
def test_a_summary_respects_max_words(model: LocalModel, max_words: int) -> None:
    summary = model.summarize(PREVIOUS, TURNS, max_words=max_words)

    assert 0 < len(summary.split()) <= max_words
    assert all(sentence in SOURCE for sentence in _sentences(summary))


def test_nothing_to_summarise_is_an_empty_summary(model: LocalModel) -> None:
    assert model.summarize(None, (), max_words=50) == ""
    assert model.summarize(None, (Turn("m1", "user", "Thanks!", "2024-05-01T10:00:00Z"),), 50) == ""


@pytest.mark.parametrize(
    ("turns", "title"),
    [
        (TURNS, "I need help planning a trip to Lisbon in May"),
        (
            (Turn("a1", "assistant", "How can I help you today?", "t"),),
            "How can I help you today?",
        ),
        (
            (Turn("m1", "user", '"Book a table."   Then call me.', "t"),),
            "Book a table",
        ),
        ((), ""),
    ],
)
def test_the_title_is_the_first_user_sentence_cleaned(
    model: LocalModel, turns: tuple[Turn, ...], title: str
) -> None:
    assert model.title(turns) == title


def test_a_long_title_is_cut_at_a_word_boundary(model: LocalModel) -> None:
    long = "Please compare " + "these very expensive alternatives " * 10 + "today."

    title = model.title((Turn("m1", "user", long, "t"),))

    assert len(title) <= TITLE_MAX_CHARS
    assert long.startswith(title)
    assert long[len(title)] == " "


def test_describe_finds_frequent_words_and_names(model: LocalModel) -> None:
    text = (
        "I moved to Lisbon with my friend Tom on 2024-05-03. The Bank of America called "
        "about the flat. New York was too expensive for a flat; Lisbon flats are cheaper "
        "than New York flats. Today Alice Smith visited the flat."
    )

    (description,) = model.describe([text])

    assert description.topics[0] == "flat"
    assert "flats" in description.topics
    assert description.entities == (
        "Lisbon",
        "Tom",
        "Bank of America",
        "New York",
        "Alice Smith",
        "2024-05-03",
    )


def test_describe_gives_one_description_per_text(model: LocalModel) -> None:
    assert model.describe(["", "ok", "Meet Ana Costa", "Lisbon is nice."]) == [
        Description(),
        Description(),
        Description(topics=("meet", "ana", "costa"), entities=("Ana Costa",)),
        # a sentence's first word alone may just be capitalised for grammar: not kept
        Description(topics=("lisbon", "nice"), entities=()),
    ]


def test_the_local_model_finds_no_facts_and_says_so(model: LocalModel) -> None:
    memories = model.extract(TURNS, "discrete")

    assert memories == []
    assert model.capabilities.extract is False
    assert model.capabilities.judge is False
    assert any("extract finds nothing" in note for note in model.capabilities.notes)
    assert any("exact equality" in note for note in model.capabilities.notes)


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        ("The user lives in Lisbon.", "the user lives in lisbon", True),
        ("The user  lives in\nLisbon!", "The user lives in Lisbon", True),
        ("The user lives in Lisbon.", "The user's home is in Lisbon.", False),
        ("The user lives in Lisbon.", "The user lives in Porto.", False),
        ("", "", False),
    ],
)
def test_same_fact_is_exact_normalised_equality(
    model: LocalModel, first: str, second: str, same: bool
) -> None:
    assert model.same_fact(first, second) is same


def test_local_curation_skips_word_for_word_repeats_and_never_supersedes(
    model: LocalModel,
) -> None:
    facts = [
        Extracted("The user lives in Berlin.", "semantic"),
        Extracted("The user lives in Lisbon.", "semantic"),
        Extracted("The user has a cat.", "semantic"),
    ]
    paris = Candidate("01PARIS", "The user lives in Paris.")
    lisbon = Candidate("01LISBON", "the user lives in LISBON")

    decisions = model.curate(facts, [[paris], [paris, lisbon], []])

    # a contradiction needs a language model to tell: the local model adds it
    assert decisions == [ADD, Decision("skip", ("01LISBON",)), ADD]
    assert model.capabilities.curate is False
    assert any("never supersedes" in note for note in model.capabilities.notes)


def test_the_default_memory_model_is_the_local_one() -> None:
    model = memory_model_for(LLMSettings())

    assert isinstance(model, LocalModel)
    assert model is memory_model_for(LLMSettings())
