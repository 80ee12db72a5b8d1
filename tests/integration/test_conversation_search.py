"""A message is searched as it reads in its conversation: who said it and the turn before it
(memkit.vectors.conversation), through the real API handler and the real indexer on moto."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import ApiResponse
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

NS = {"namespace": "chat"}


def _ok(response: ApiResponse, status: int = 200) -> Any:
    assert response.status == status, response.body
    return response.body


def _append(world: MemoryWorld, session: str, *turns: tuple[str, str]) -> None:
    messages = [{"id": i, "role": "user", "content": c} for i, c in turns]
    body = {"user_id": "ada", "messages": messages}
    _ok(world.api("POST", f"/v1/working-memory/{session}/messages", query=NS, body=body), 201)


def _search(world: MemoryWorld, text: str, session: str, **extra: Any) -> list[str]:
    body = {
        "text": text,
        "namespace": {"eq": "chat"},
        "session_id": {"eq": session},
        "memory_type": {"eq": "message"},
        "limit": 10,
        **extra,
    }
    found = _ok(world.api("POST", "/v1/long-term-memory/search", body=body))
    return [hit["id"] for hit in found["memories"]]


def test_a_reply_is_found_by_the_words_of_the_turn_it_answers(world: MemoryWorld) -> None:
    # Given a turn and its reply, appended and indexed one request at a time (so the
    # indexer reads the turn before the reply back from the table)
    _append(world, "work", ("m1", "Maria: Congrats on the promotion!"))
    world.settle()
    _append(world, "work", ("m2", "John: Thanks! I'm an assistant manager now."))
    _append(world, "work", ("m3", "Maria: Lunch tomorrow?"))
    world.settle()

    # When a question uses the words of the first turn only
    found = _search(world, "promotion", "work", search_mode="keyword")

    # Then the reply is found through its context, after the turn that holds the words;
    # the message after the reply is not (its turn before says nothing of a promotion)
    assert found == ["m1", "m2"]
    # And what a hit shows is the message itself, never its context
    hits = _ok(
        world.api(
            "POST",
            "/v1/long-term-memory/search",
            body={"text": "promotion", "session_id": {"eq": "work"}, "search_mode": "keyword"},
        )
    )["memories"]
    assert [h["text"] for h in hits] == [
        "Maria: Congrats on the promotion!",
        "John: Thanks! I'm an assistant manager now.",
    ]


def test_a_sessions_first_message_has_no_turn_before_it(world: MemoryWorld) -> None:
    _append(world, "one", ("a1", "Ada: the lighthouse keeper retired"))
    _append(world, "two", ("b1", "Bob: we should paint the fence"))
    world.settle()

    assert _search(world, "lighthouse", "two", search_mode="keyword") == []
    assert _search(world, "painting", "two", search_mode="keyword") == ["b1"]  # stemmed


def test_the_default_search_prefers_what_the_person_asked_about_said(world: MemoryWorld) -> None:
    # Given two speakers saying the same thing, and a turn that only names Caroline
    _append(
        world,
        "talk",
        ("t1", "Melanie: I signed up for a pottery class yesterday."),
        ("t2", "Caroline: I signed up for a pottery class yesterday."),
        ("t3", "Melanie: Caroline, you will love it."),
    )
    world.settle()

    # When each is asked about by name with the default search
    # Then what that person said comes first
    assert _search(world, "What class did Caroline sign up for?", "talk")[0] == "t2"
    assert _search(world, "What class did Melanie sign up for?", "talk")[0] == "t1"
