"""Session messages: ids, times and the content a message must carry."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from memkit.ids import new_ulid
from memkit.models.session import Message

ULID = re.compile(r"^[0-9A-HJKMNP-TV-Z]{26}$")


def test_ulids_are_26_crockford_characters_and_sort_by_time() -> None:
    earlier, later = new_ulid(1_000), new_ulid(2_000)

    assert ULID.match(earlier)
    assert earlier < later
    assert new_ulid(1_000)[:10] == earlier[:10]  # same millisecond, same time prefix


def test_a_message_without_id_or_time_gets_a_ulid_and_the_server_time() -> None:
    before = datetime.now(UTC)

    message = Message(role="user", content="hi")

    assert ULID.match(message.id)
    assert before <= message.created_at <= datetime.now(UTC)


def test_a_message_more_than_300_seconds_ahead_is_refused() -> None:
    future = datetime.now(UTC) + timedelta(seconds=400)

    with pytest.raises(ValidationError, match="300 s in the future"):
        Message(role="user", content="hi", created_at=future)


def test_clock_skew_within_300_seconds_is_accepted() -> None:
    soon = datetime.now(UTC) + timedelta(seconds=200)

    assert Message(role="user", content="hi", created_at=soon).created_at == soon


def test_naive_times_are_read_as_utc() -> None:
    message = Message.model_validate(
        {"role": "user", "content": "x", "created_at": "2024-01-01T12:00:00.123456"}
    )

    assert message.created_at == datetime(2024, 1, 1, 12, 0, 0, 123456, tzinfo=UTC)
    assert message.created_at_us == 1_704_110_400_123_456


@pytest.mark.parametrize("field", ["content", "role"])
def test_empty_content_or_role_is_refused(field: str) -> None:
    values = {"role": "user", "content": "x", field: ""}

    with pytest.raises(ValidationError) as error:
        Message.model_validate(values)

    assert error.value.errors()[0]["loc"] == (field,)


def test_the_fields_agent_memory_client_sends_are_kept() -> None:
    message = Message.model_validate(
        {
            "role": "user",
            "content": "x",
            "discrete_memory_extracted": "t",
            "persisted_at": "2024-01-02T00:00:00Z",
        }
    )

    assert message.discrete_memory_extracted == "t"
    assert message.persisted_at == datetime(2024, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"contnet": "typo"}, "contnet"),  # a misspelt key is refused, not silently dropped
        ({"content": ["a", "part"]}, "content"),  # content parts are not text
        ({"role": 5}, "role"),
        ({"content": "   \n"}, "content"),  # only whitespace
        ({"discrete_memory_extracted": True}, "discrete_memory_extracted"),
        ({"created_at": "0240-07-15T09:43:13.68-15:23"}, "created_at"),  # before the epoch
    ],
)
def test_a_malformed_message_names_the_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as error:
        Message.model_validate({"role": "user", "content": "x", **values})

    assert error.value.errors()[0]["loc"][0] == field


def test_created_at_us_keeps_microsecond_order() -> None:
    base = datetime.fromtimestamp(time.time() - 10, UTC)
    first = Message(role="user", content="a", created_at=base)
    second = Message(role="user", content="b", created_at=base + timedelta(microseconds=1))

    assert second.created_at_us - first.created_at_us == 1
