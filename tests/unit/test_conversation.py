"""How search reads a message in its conversation (memkit.vectors.conversation)."""

from __future__ import annotations

import pytest

from memkit.text import words
from memkit.vectors.conversation import (
    CONTEXT_CHARS,
    context_of,
    drop_function_words,
    meaning_of,
    names_speaker,
    speaker_of,
)


@pytest.mark.parametrize(
    ("content", "name", "speaker"),
    [
        ("Caroline: I went to a LGBTQ support group yesterday.", None, "caroline"),
        ("Dr. Jane Smith: take two a day", None, "dr jane smith"),
        ("  Melanie:  hi", None, "melanie"),
        ("anything at all", "Ada Lovelace", "ada lovelace"),  # the message's name wins
        ("Caroline: hi", "Ada", "ada"),
        ("Note to self: buy milk", None, None),  # a lowercase word: not a name label
        ("hello: there", None, None),
        ("Caroline:no space", None, None),
        ("https://example.com is down", None, None),
        ("A Very Long Speaker Label: four words", None, None),
        ("A" + "b" * 40 + ": a word of 41 characters is no name", None, None),
        ("A" + "b" * 39 + ": forty", None, "a" + "b" * 39),
        ("plain text", "   ", None),
    ],
)
def test_a_speaker_is_the_name_or_a_transcript_label(
    content: str, name: str | None, speaker: str | None
) -> None:
    assert speaker_of(content, name) == speaker


def test_context_is_the_end_of_the_turn_before() -> None:
    assert context_of(None) == context_of("") == ""
    assert context_of("Congrats on the promotion!") == "Congrats on the promotion!"
    long = "a" * CONTEXT_CHARS + "what did you get?"
    assert context_of(long) == long[-CONTEXT_CHARS:]
    assert context_of(long).endswith("what did you get?")


def test_a_questions_meaning_leaves_out_function_words_and_the_speakers_it_names() -> None:
    assert meaning_of("What did Caroline research?", {"caroline"}) == "research"
    # a name that is no speaker of the conversation is what the question is about
    assert meaning_of("Where did I stay in Lisbon?", {"caroline"}) == "stay lisbon"
    assert meaning_of("What did Dr. Jane Smith prescribe?", {"dr jane smith"}) == "prescribe"
    assert meaning_of("What is Caroline's identity?", {"caroline"}) == "identity"
    # nothing else left: the question without its function words, then as asked
    assert meaning_of("Who is Caroline?", {"caroline"}) == "caroline"
    assert meaning_of("What did I do?") == "What did I do?"
    assert meaning_of("What's my dog's name?") == drop_function_words("What's my dog's name?")
    # negations stay: a contextual embedder reads them
    assert meaning_of("Which restaurants does Ada not like?", {"ada"}) == "restaurants not like"


def test_a_question_names_a_speaker_when_it_holds_every_word_of_the_name() -> None:
    asked = set(words("What did Jane Smith say about the trip?"))
    assert names_speaker(asked, "jane smith")
    assert names_speaker(asked, "jane")
    assert not names_speaker(asked, "dr jane smith")
    assert not names_speaker(asked, "")
    assert not names_speaker(asked, None)
