"""The long-term memory tools (search_memory, add_memory) through POST /v1/tools/call, on moto:
the real API handler writes, the real indexer reads the stream, the tool searches the index."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration
ULID_LENGTH = 26


def _call(world: MemoryWorld, name: str, arguments: Any, **scope: str) -> dict[str, Any]:
    body = {"name": name, "arguments": arguments, **scope}
    response = world.api("POST", "/v1/tools/call", body=body)
    assert response.status == 200, response.body
    return dict(response.body)


def _add(world: MemoryWorld, text: str, **arguments: Any) -> dict[str, Any]:
    scope = {"user_id": arguments.pop("user_id", "ada")}
    outcome = _call(world, "add_memory", {"text": text, **arguments}, **scope)
    assert "result" in outcome, outcome
    return dict(outcome["result"])


def _search(world: MemoryWorld, query: str, **scope: str) -> list[dict[str, Any]]:
    outcome = _call(world, "search_memory", {"query": query}, **scope)
    assert "result" in outcome, outcome
    return list(outcome["result"])


def _stored_records(world: MemoryWorld) -> int:
    world.settle()
    listing = world.api("POST", "/v1/long-term-memory/search", body={"text": ""})
    assert listing.status == 200, listing.body
    return int(listing.body["total"])


def test_an_added_memory_is_found_by_search_once_indexed(world: MemoryWorld) -> None:
    # Given a memory added through the tool
    added = _add(world, "Ada drinks green tea every morning", topics=["drinks"])
    world.settle()

    # When the same user searches for it
    hits = _search(world, "what does Ada drink?", user_id="ada")

    # Then the memory comes back, compact, with a relevance
    assert added["status"].startswith("stored")
    assert len(added["id"]) == ULID_LENGTH
    assert hits[0]["id"] == added["id"]
    assert set(hits[0]) == {"id", "text", "memory_type", "topics", "created_at", "relevance"}
    assert hits[0]["text"] == "Ada drinks green tea every morning"
    assert hits[0]["memory_type"] == "semantic"
    assert hits[0]["topics"] == ["drinks"]
    assert 0 < hits[0]["relevance"] <= 1


def test_an_added_memory_is_owned_by_the_calls_user_namespace_and_session(
    world: MemoryWorld,
) -> None:
    # Given a tool call naming a user, a namespace and a session
    outcome = _call(
        world,
        "add_memory",
        {"text": "Ada flies to Oslo on 2025-03-14", "memory_type": "episodic"},
        user_id="ada",
        namespace="travel",
        session_id="chat-1",
    )

    # When the record is read
    record = world.api("GET", f"/v1/long-term-memory/{outcome['result']['id']}")

    # Then it carries the call's scope
    assert record.status == 200
    assert (record.body["user_id"], record.body["namespace"], record.body["session_id"]) == (
        "ada",
        "travel",
        "chat-1",
    )
    assert record.body["memory_type"] == "episodic"


def test_search_does_not_return_another_users_memories(world: MemoryWorld) -> None:
    # Given a memory of Bob's
    _add(world, "Bob has a grey cat called Pixel", user_id="bob")
    world.settle()

    # When Ada searches for it
    hits = _search(world, "grey cat called Pixel", user_id="ada")

    # Then nothing is found: an empty list is the answer
    assert hits == []


def test_a_call_naming_only_its_session_acts_for_the_sessions_user(
    world: MemoryWorld,
) -> None:
    # Given Ada's session, a memory of Ada's and one of Bob's
    world.api("PUT", "/v1/working-memory/ada-chat", body={"user_id": "ada", "messages": []})
    _add(world, "Ada's cat is called Miso")
    _add(world, "Bob's cat is called Pixel", user_id="bob")
    world.settle()

    # When the model in Ada's session searches and adds with only the session named
    hits = _search(world, "cat called", session_id="ada-chat")
    added = _call(world, "add_memory", {"text": "Ada got a second cat"}, session_id="ada-chat")

    # Then only Ada's memories are found, and the new one is Ada's
    assert [hit["text"] for hit in hits] == ["Ada's cat is called Miso"]
    record = world.api("GET", f"/v1/long-term-memory/{added['result']['id']}")
    assert record.body["user_id"] == "ada"


def test_a_session_without_a_user_searches_only_itself(world: MemoryWorld) -> None:
    # Given an anonymous session and a memory of Bob's
    world.api("PUT", "/v1/working-memory/anon", body={"messages": []})
    _add(world, "Bob's cat is called Pixel", user_id="bob")
    world.settle()

    # When the anonymous session searches
    hits = _search(world, "cat called Pixel", session_id="anon")

    # Then other people's memories stay out of it
    assert hits == []


def test_search_stays_in_the_calls_namespace(world: MemoryWorld) -> None:
    # Given a memory of Ada's in another namespace
    _call(world, "add_memory", {"text": "Ada's locker is 12"}, user_id="ada", namespace="gym")
    world.settle()

    # When Ada searches in the default namespace
    hits = _search(world, "locker", user_id="ada")

    # Then nothing is found
    assert hits == []


def test_search_filters_by_topic_and_type_and_caps_the_results(world: MemoryWorld) -> None:
    # Given memories of two topics and two types
    _add(world, "Ada likes green tea", topics=["drinks"])
    _add(world, "Ada likes black coffee", topics=["drinks"])
    _add(world, "Ada drank tea in Kyoto", topics=["travel"], memory_type="episodic")
    world.settle()

    # When she searches one topic, one type, one result
    outcome = _call(
        world,
        "search_memory",
        {"query": "tea", "topics": ["drinks"], "memory_type": "semantic", "max_results": 1},
        user_id="ada",
    )

    # Then one semantic memory of that topic comes back
    assert [h["text"] for h in outcome["result"]] == ["Ada likes green tea"]


def test_a_message_hit_carries_its_session_and_role(world: MemoryWorld) -> None:
    # Given a session whose messages are indexed
    world.api(
        "POST",
        "/v1/working-memory/chat-1/messages",
        body={
            "user_id": "ada",
            "messages": [{"id": "m1", "role": "user", "content": "My passport ends in 4471"}],
        },
    )
    world.settle()

    # When the model searches past messages
    outcome = _call(
        world,
        "search_memory",
        {"query": "passport", "memory_type": "message"},
        user_id="ada",
    )

    # Then the hit names the session and the role
    hit = outcome["result"][0]
    assert (hit["id"], hit["session_id"], hit["role"]) == ("m1", "chat-1", "user")


def test_adding_a_memory_the_user_has_says_already_known(world: MemoryWorld) -> None:
    # Given a memory already stored
    first = _add(world, "Ada is vegetarian")

    # When the model adds the same text again
    second = _add(world, "Ada is vegetarian")

    # Then it is told so, and one record exists
    assert first["status"].startswith("stored")
    assert second == {"id": None, "status": second["status"]}
    assert second["status"].startswith("already known")
    assert _stored_records(world) == 1


def test_the_camel_case_names_run_the_same_tools(world: MemoryWorld) -> None:
    # Given a memory added under the camelCase name, with OpenAI-style string arguments
    added = _call(world, "addMemory", json.dumps({"text": "Ada's bike is blue"}), user_id="ada")
    world.settle()

    # When it is searched under the camelCase name
    found = _call(world, "searchMemory", {"query": "bike"}, user_id="ada")

    # Then it is found
    assert [h["id"] for h in found["result"]] == [added["result"]["id"]]


def test_nulls_for_optional_arguments_mean_not_given(world: MemoryWorld) -> None:
    # Given a model that sends null for each optional argument
    arguments = {"text": "Ada runs on Sundays", "memory_type": None, "topics": None}
    added = _call(world, "add_memory", arguments, user_id="ada")
    world.settle()

    # When it searches the same way
    found = _call(
        world,
        "search_memory",
        {"query": "running", "topics": None, "memory_type": None, "max_results": None},
        user_id="ada",
    )

    # Then both work with the defaults
    assert found["result"][0]["id"] == added["result"]["id"]
    assert found["result"][0]["memory_type"] == "semantic"


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({}, 'missing argument "text"'),
        ({"text": "   "}, "text: must not be empty"),
        ({"text": 42}, "text: Input should be a valid string"),
        ({"text": "x", "memory_type": "message"}, "memory_type: Input should be"),
        ({"text": "x", "topics": "food"}, "topics: Input should be a valid list"),
        ({"text": "x", "entities": [""]}, "entities: each must be 1 to 256 characters"),
        ({"text": "x", "event_date": "next Friday"}, "event_date: Input should be a valid"),
        ({"text": "x", "user_id": "bob"}, 'unknown argument "user_id"'),
        ("not json", "arguments are not valid JSON"),
    ],
    ids=[
        "missing",
        "blank",
        "not-a-string",
        "message-type",
        "topics-not-a-list",
        "empty-entity",
        "bad-date",
        "owner-in-arguments",
        "invalid-json",
    ],
)
def test_a_bad_add_is_a_tool_error_and_writes_nothing(
    world: MemoryWorld, arguments: Any, reason: str
) -> None:
    # Given add_memory arguments a model got wrong
    # When the call is made
    outcome = _call(world, "add_memory", arguments, user_id="ada")

    # Then the model reads why, and nothing is stored
    assert set(outcome) == {"error"}
    assert reason in outcome["error"]
    assert _stored_records(world) == 0


@pytest.mark.parametrize(
    ("arguments", "reason"),
    [
        ({}, 'missing argument "query"'),
        ({"query": ""}, "query: String should have at least 1 character"),
        ({"query": ["tea"]}, "query: Input should be a valid string"),
        ({"query": "tea", "memory_type": "procedural"}, "memory_type: Input should be"),
        ({"query": "tea", "max_results": 0}, "max_results: Input should be greater than"),
        ({"query": "tea", "max_results": 21}, "max_results: Input should be less than"),
        ({"query": "tea", "max_results": "5"}, "max_results: Input should be a valid integer"),
        ({"query": "tea", "topics": [1]}, "topics.0: Input should be a valid string"),
        ({"query": "tea", "entities": ["x"]}, 'unknown argument "entities"'),
    ],
    ids=[
        "missing",
        "empty",
        "not-a-string",
        "unknown-type",
        "zero-results",
        "too-many-results",
        "results-as-string",
        "topic-not-a-string",
        "unknown-argument",
    ],
)
def test_a_bad_search_is_a_tool_error(world: MemoryWorld, arguments: Any, reason: str) -> None:
    # Given search_memory arguments a model got wrong
    # When the call is made
    outcome = _call(world, "search_memory", arguments, user_id="ada")

    # Then the model reads why (status 200, no stack trace)
    assert set(outcome) == {"error"}
    assert reason in outcome["error"]


def test_a_memory_tool_call_without_session_or_user_is_422(world: MemoryWorld) -> None:
    response = world.api("POST", "/v1/tools/call", body={"name": "search_memory"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "session_id"


def test_a_changed_fact_added_with_its_key_or_the_ids_it_replaces_is_the_only_one_recalled(
    world: MemoryWorld,
) -> None:
    # Given a home and a job the agent stored, one with a key
    paris = _add(world, "Ada lives in Paris", key="home_city")
    acme = _add(world, "Ada works at Acme as an engineer")

    # When the user moved and changed jobs: one added with the same key, one naming the old
    berlin = _add(world, "Ada lives in Berlin", key="home_city")
    globex = _add(world, "Ada works at Globex as a nurse", replaces=[acme["id"]])
    world.settle()

    # Then search_memory recalls only what is true now, with its key
    homes = _search(world, "where does Ada live?", user_id="ada")
    jobs = _search(world, "where does Ada work?", user_id="ada")
    assert [h["id"] for h in homes if "lives" in h["text"]] == [berlin["id"]]
    assert homes[0]["key"] == "home_city"
    assert [h["id"] for h in jobs if "works" in h["text"]] == [globex["id"]]
    assert paris["id"] not in {h["id"] for h in homes + jobs}


def test_replacing_a_memory_the_user_does_not_have_is_a_tool_error(world: MemoryWorld) -> None:
    outcome = _call(
        world, "add_memory", {"text": "Ada lives in Rome", "replaces": ["nobody"]}, user_id="ada"
    )

    assert "no long-term memory" in outcome["error"]
    assert _stored_records(world) == 0
