"""Context windows and the session items' expiry: the pure rules behind GET and every write."""

from __future__ import annotations

import pytest

from memkit.errors import ValidationFailed
from memkit.models.domain import StoredMessage
from memkit.service.sessions import children_expiry
from memkit.service.windows import effective_window, fit, message_tokens, model_window


def _messages(*tokens: int) -> list[StoredMessage]:
    return [
        StoredMessage(id=f"m{i}", role="user", content="x", created_at="", order=f"M#{i}", tokens=t)
        for i, t in enumerate(tokens)
    ]


@pytest.mark.parametrize(
    ("name", "window"),
    [
        ("gpt-4o", 128_000),
        ("gpt-4o-2024-08-06", 128_000),
        ("gpt-4", 8_192),
        ("gpt-4.1-mini", 1_047_576),
        ("claude-3-5-sonnet-20240620", 200_000),
        ("anthropic.claude-3-5-sonnet-20240620-v1:0", 200_000),
        ("us.anthropic.claude-sonnet-4-20250514-v1:0", 200_000),
        ("openai/gpt-3.5-turbo", 16_385),
        ("o1-preview", 200_000),
        ("amazon.nova-pro-v1:0", 300_000),
    ],
)
def test_models_are_known_by_family_whatever_their_provider_prefix(name: str, window: int) -> None:
    assert model_window(name) == window


def test_gpt_4o_is_not_mistaken_for_gpt_4() -> None:
    assert model_window("gpt-4o-mini") == 128_000
    assert model_window("gpt-4-0613") == 8_192


def test_an_explicit_window_wins_and_an_unknown_model_says_what_to_send() -> None:
    assert effective_window("gpt-4o", 1_000) == 1_000
    assert effective_window(None, None) is None
    with pytest.raises(ValidationFailed) as error:
        effective_window("my-llm", None)
    assert error.value.errors[0].field == "model_name"


def test_fit_drops_the_oldest_until_the_rest_fit_and_reports_percentages() -> None:
    window = fit(_messages(50, 30, 20, 10), 65)

    assert [m.id for m in window.messages] == ["m1", "m2", "m3"]  # 60 tokens
    assert window.total_used == pytest.approx(60 / 65 * 100)
    assert window.until_summarization == pytest.approx(min(100.0, 60 / int(65 * 0.7) * 100))


def test_fit_always_keeps_the_newest_message_and_caps_at_100() -> None:
    window = fit(_messages(10, 500), 100)

    assert [m.id for m in window.messages] == ["m1"]
    assert window.total_used == 100.0


def test_without_a_window_nothing_is_trimmed_or_measured() -> None:
    window = fit(_messages(10, 20), None)

    assert len(window.messages) == 2
    assert window.total_used is None


def test_a_message_costs_its_role_and_content() -> None:
    assert message_tokens("user", "hello there") > message_tokens("user", "hello")


def test_items_get_twice_the_ttl_and_are_rewritten_at_most_once_a_period() -> None:
    now = 1_000_000.0
    # a new session: nothing stored to rewrite
    assert children_expiry(now, 100, None, exists=False) == (1_000_200, False)
    # still outliving the session: keep, no rewrite
    assert children_expiry(now + 50, 100, 1_000_200, exists=True) == (1_000_200, False)
    # the session would outlive its items: rewrite them all with a fresh expiry
    assert children_expiry(now + 150, 100, 1_000_200, exists=True) == (1_000_350, True)
    # a TTL set on a session whose items never expire: rewrite
    assert children_expiry(now, 100, None, exists=True) == (1_000_200, True)
    # the TTL removed: items must stop expiring
    assert children_expiry(now, None, 1_000_200, exists=True) == (None, True)
    assert children_expiry(now, None, None, exists=True) == (None, False)
    # a TTL shortened a lot: items that would linger long after the session are rewritten
    assert children_expiry(now, 10, 1_000_200, exists=True) == (1_000_020, True)
