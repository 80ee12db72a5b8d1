"""Token estimates for `max_tokens` budgets."""

from __future__ import annotations

import json

import pytest

from memkit.tokens import content_tokens, estimate_tokens


def test_empty_text_is_zero_tokens() -> None:
    # Given empty text
    # When it is counted
    tokens = estimate_tokens("")

    # Then it costs nothing
    assert tokens == 0, "empty text is 0 tokens"


def test_whitespace_is_free() -> None:
    # Given only whitespace
    # When it is counted
    tokens = estimate_tokens(" \n\t  \n")

    # Then it costs nothing
    assert tokens == 0, "whitespace alone is 0 tokens"


@pytest.mark.parametrize(
    ("word", "tokens"), [("a", 1), ("abcd", 1), ("abcde", 2), ("abcdefgh", 2), ("abcdefghi", 3)]
)
def test_a_word_costs_one_token_per_started_four_characters(word: str, tokens: int) -> None:
    # Given a single run of letters
    # When it is counted
    counted = estimate_tokens(word)

    # Then it costs one token per started 4 characters
    assert counted == tokens, "a word costs ceil(len / 4) tokens"


@pytest.mark.parametrize(
    "text",
    [
        "The quick brown fox jumps over the lazy dog, twice!",
        '{"name":"Ada","tags":["a","b"],"n":12345}',
        "snake_case_identifier = value_1 + value_22",
        "Zürich — café, naïve; 東京 and ünïcödé",
    ],
)
def test_estimate_is_monotonic_in_length(text: str) -> None:
    # Given every prefix of a text, shortest first
    prefixes = [text[:n] for n in range(len(text) + 1)]

    # When each is counted
    counts = [estimate_tokens(prefix) for prefix in prefixes]

    # Then no longer prefix costs fewer tokens
    assert counts == sorted(counts), "appending text never lowers the estimate"


@pytest.mark.parametrize("mark", [",", ".", "!", "{", '"', ":", "_", "-", "€"])
def test_each_punctuation_mark_is_one_token(mark: str) -> None:
    # Given a word and the same word followed by a punctuation mark
    # When both are counted
    difference = estimate_tokens("word" + mark) - estimate_tokens("word")

    # Then the mark costs one token of its own
    assert difference == 1, f"{mark!r} costs one token"


def test_punctuation_is_counted_per_mark() -> None:
    # Given a run of punctuation
    # When it is counted
    tokens = estimate_tokens("!!!...")

    # Then each mark counts
    assert tokens == 6, "each punctuation mark is a token"


def test_content_tokens_of_none_is_zero() -> None:
    # Given no content
    # When it is counted
    tokens = content_tokens(None)

    # Then it costs nothing
    assert tokens == 0, "no content is 0 tokens"


def test_content_tokens_of_text_is_the_estimate() -> None:
    # Given text content
    text = "Ada likes green tea, strongly."

    # When it is counted
    tokens = content_tokens(text)

    # Then it is the text's estimate
    assert tokens == estimate_tokens(text), "text content is counted as is"


def test_content_tokens_of_an_object_counts_its_compact_json() -> None:
    # Given object content with non-ASCII text
    content = {"city": "Zürich", "tags": ["a", "b"], "n": {"x": None}}

    # When it is counted
    tokens = content_tokens(content)

    # Then it is the estimate of its compact, unescaped JSON (not \u escapes)
    compact = json.dumps(content, separators=(",", ":"), ensure_ascii=False)
    assert tokens == estimate_tokens(compact), "objects are counted from compact JSON"


def test_content_tokens_of_non_ascii_does_not_count_escapes() -> None:
    # Given an object whose value is non-ASCII
    content = {"k": "日本"}

    # When it is counted
    tokens = content_tokens(content)

    # Then the characters count, not their \u escapes
    assert tokens < estimate_tokens(json.dumps(content)), "non-ASCII is not counted as escapes"


def test_content_tokens_of_an_empty_object_counts_its_braces() -> None:
    # Given an empty object
    # When it is counted
    tokens = content_tokens({})

    # Then its two braces count
    assert tokens == 2, "{} is two punctuation tokens"
