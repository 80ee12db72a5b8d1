"""A search counts as a use of the records it shows: `last_accessed` moves to now (at most
hourly), which is what inactivity-based forgetting reads. The touch costs no embedding."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration


def _iso(delta: timedelta) -> str:
    return (datetime.now(UTC) + delta).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _search(world: MemoryWorld, text: str) -> list[dict[str, object]]:
    body = {"text": text, "user_id": {"eq": "ada"}, "memory_type": {"ne": "message"}, "limit": 1}
    response = world.api("POST", "/v1/long-term-memory/search", body=body)
    assert response.status == 200
    return list(response.body["memories"])


def test_a_search_marks_what_it_shows_accessed_at_most_hourly(world: MemoryWorld) -> None:
    long_ago, a_minute_ago = _iso(-timedelta(days=40)), _iso(-timedelta(minutes=1))
    memories = [
        {"id": "tea", "text": "Ada drinks green tea", "user_id": "ada", "last_accessed": long_ago},
        {"id": "jazz", "text": "Ada likes jazz", "user_id": "ada", "last_accessed": a_minute_ago},
        {"id": "boat", "text": "Ada owns a boat", "user_id": "ada", "last_accessed": long_ago},
    ]
    assert world.api("POST", "/v1/long-term-memory/", body={"memories": memories}).status == 200
    world.settle()
    embedded = world.embedded_texts
    before = {
        m["id"]: world.api("GET", f"/v1/long-term-memory/{m['id']}").body["last_accessed"]
        for m in memories
    }

    shown = {m["id"]: m["last_accessed"] for m in _search(world, "green tea")}
    world.settle()  # the touch reaches the indexer as a MODIFY
    stored = {
        m["id"]: world.api("GET", f"/v1/long-term-memory/{m['id']}").body["last_accessed"]
        for m in memories
    }

    assert list(shown) == ["tea"]
    assert stored["tea"] == shown["tea"]
    assert str(stored["tea"]) > a_minute_ago  # now
    assert stored["boat"] == before["boat"]  # not shown: not accessed
    assert str(before["boat"]).startswith(long_ago[:19])  # the client's time was kept
    assert world.embedded_texts == embedded  # no re-embedding for an access

    again = _search(world, "jazz")
    assert again[0]["id"] == "jazz"
    # accessed a minute ago: not written again within the hour
    assert world.api("GET", "/v1/long-term-memory/jazz").body["last_accessed"] == before["jazz"]


def test_a_search_with_track_access_false_leaves_last_accessed_alone(world: MemoryWorld) -> None:
    """What an export reads (`memkit export`): every record, none of them counted as used."""
    long_ago = _iso(-timedelta(days=40))
    memory = {"id": "kept", "text": "Ada keeps bees", "user_id": "ada", "last_accessed": long_ago}
    assert world.api("POST", "/v1/long-term-memory/", body={"memories": [memory]}).status == 200
    world.settle()
    before = world.api("GET", "/v1/long-term-memory/kept").body["last_accessed"]

    body = {"text": "bees", "user_id": {"eq": "ada"}, "track_access": False}
    shown = world.api("POST", "/v1/long-term-memory/search", body=body).body["memories"]
    world.settle()

    assert [m["id"] for m in shown] == ["kept"]
    assert shown[0]["last_accessed"] == before
    assert world.api("GET", "/v1/long-term-memory/kept").body["last_accessed"] == before
    assert str(before).startswith(long_ago[:19])
