"""Conformance: the real agent-memory-client (0.14.0, pinned in the dev extra) against the local
stack over HTTP. Each test has a namespace of its own; docs/ams-client.md has the protocol."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any
from uuid import uuid4

import httpx
import pytest
from agent_memory_client import (
    MemoryAPIClient,
    MemoryClientConfig,
    MemoryNotFoundError,
)
from agent_memory_client.filters import MemoryType, Topics, UserId
from agent_memory_client.models import (
    ClientMemoryRecord,
    MemoryMessage,
    MemoryTypeEnum,
    WorkingMemory,
)

from memkit_dev.local.stack import LocalStack

pytestmark = [
    pytest.mark.integration,
    pytest.mark.anyio,
    # get_or_create (and so append, set-data, update-data, add-memories) calls the client's
    # own deprecated get_working_memory.
    pytest.mark.filterwarnings("ignore:get_working_memory is deprecated:DeprecationWarning"),
]


@pytest.fixture
def ns() -> str:
    """A namespace of the test's own, so sessions and listings never meet another test's."""
    return f"ams-{uuid4().hex[:12]}"


def client(stack: LocalStack, ns: str, **config: Any) -> MemoryAPIClient:
    return MemoryAPIClient(
        MemoryClientConfig(base_url=stack.url, timeout=30.0, default_namespace=ns, **config)
    )


def message(mid: str, content: str, role: str = "user", seconds_ago: float = 0) -> MemoryMessage:
    return MemoryMessage(
        id=mid,
        role=role,
        content=content,
        created_at=datetime.now(UTC) - timedelta(seconds=seconds_ago),
    )


async def seed(c: MemoryAPIClient, session_id: str, **fields: Any) -> None:
    """A session with one message, an owner and a TTL, which the data and memory helpers of
    the client (each a GET, then a PUT of a document it builds anew) must not lose."""
    document = {"messages": [message("m1", "keep me")], "user_id": "u1", "ttl_seconds": 600}
    await c.put_working_memory(
        session_id, WorkingMemory(session_id=session_id, **document | fields)
    )


def kept(memory: WorkingMemory) -> None:
    assert ids(memory) == ["m1"]
    assert [m.content for m in memory.messages] == ["keep me"]
    assert (memory.user_id, memory.ttl_seconds) == ("u1", 600)


def ids(memory: WorkingMemory) -> list[str]:
    return [m.id for m in memory.messages]


def log(stack: LocalStack, ns: str, session_id: str) -> list[dict[str, Any]]:
    """The session's whole message log, oldest first (memkit's route; the client has none)."""
    response = httpx.get(
        f"{stack.url}/v1/working-memory/{session_id}/messages",
        params={"namespace": ns, "limit": 1000, "order": "asc"},
        timeout=30.0,
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["next_cursor"] is None
    return list(body["messages"])


async def test_health_check_reports_the_server_clock(stack: LocalStack, ns: str) -> None:
    async with client(stack, ns) as c:
        health = await c.health_check()

    assert health.now > 0
    assert abs(health.now / 1000 - time.time()) < 60  # epoch milliseconds, as AMS sends


async def test_a_put_document_reads_back_field_for_field(stack: LocalStack, ns: str) -> None:
    sent = WorkingMemory(
        session_id="doc",
        namespace=ns,
        user_id="u1",
        messages=[
            message("m1", "hello", seconds_ago=3),
            message("m2", "hi, how can I help?", role="assistant", seconds_ago=2),
            message("m3", "tea or coffee?", seconds_ago=1),
        ],
        data={"plan": ["a", "b"], "n": 1.5, "nested": {"ok": True}},
        context="they talked about drinks",
        ttl_seconds=3600,
    )
    async with client(stack, ns) as c:
        put = await c.put_working_memory("doc", sent)
        got = await c.get_working_memory("doc", user_id="u1", namespace=ns)

    for memory in (put, got):
        assert memory.session_id == "doc"
        assert ids(memory) == ["m1", "m2", "m3"]
        assert [m.role for m in memory.messages] == ["user", "assistant", "user"]
        assert [m.content for m in memory.messages] == [
            "hello",
            "hi, how can I help?",
            "tea or coffee?",
        ]
        assert [m.created_at for m in memory.messages] == [m.created_at for m in sent.messages]
        assert memory.data == {"plan": ["a", "b"], "n": 1.5, "nested": {"ok": True}}
        assert memory.context == "they talked about drinks"
        assert memory.ttl_seconds == 3600
        assert memory.user_id == "u1"
        assert memory.namespace == ns


async def test_get_or_create_creates_a_missing_session_once(stack: LocalStack, ns: str) -> None:
    async with client(stack, ns) as c:
        first = await c.get_or_create_working_memory("fresh", user_id="u1")
        second = await c.get_or_create_working_memory("fresh", user_id="u1")

    created, memory = first
    assert created is True
    assert (memory.session_id, memory.namespace, memory.user_id) == ("fresh", ns, "u1")
    assert memory.messages == []
    created_again, again = second
    assert created_again is False
    assert (again.session_id, again.namespace, again.user_id) == ("fresh", ns, "u1")


async def test_list_sessions_filters_pages_and_shows_the_newest_first(
    stack: LocalStack, ns: str
) -> None:
    async with client(stack, ns) as c:
        for session_id, user_id in [("s1", "ann"), ("s2", "bob"), ("s3", "ann"), ("s4", "ann")]:
            await c.put_working_memory(
                session_id, WorkingMemory(session_id=session_id, user_id=user_id)
            )
        await c.put_working_memory(
            "elsewhere", WorkingMemory(session_id="elsewhere", namespace=f"{ns}-other")
        )

        everything = await c.list_sessions()
        anns = await c.list_sessions(user_id="ann")
        first_page = await c.list_sessions(limit=2, offset=0)
        second_page = await c.list_sessions(limit=2, offset=2)
        past_the_end = await c.list_sessions(limit=2, offset=4)
        other = await c.list_sessions(namespace=f"{ns}-other")

    assert (everything.sessions, everything.total) == (["s4", "s3", "s2", "s1"], 4)
    assert (anns.sessions, anns.total) == (["s4", "s3", "s1"], 3)
    assert (first_page.sessions, first_page.total) == (["s4", "s3"], 4)
    assert (second_page.sessions, second_page.total) == (["s2", "s1"], 4)
    assert (past_the_end.sessions, past_the_end.total) == ([], 4)
    assert (other.sessions, other.total) == (["elsewhere"], 1)


async def test_a_deleted_session_is_not_found(stack: LocalStack, ns: str) -> None:
    async with client(stack, ns) as c:
        await c.put_working_memory(
            "gone", WorkingMemory(session_id="gone", messages=[message("m1", "bye")])
        )
        ack = await c.delete_working_memory("gone")
        with pytest.raises(MemoryNotFoundError):
            await c.get_working_memory("gone")
        listed = await c.list_sessions()

    assert ack.status == "ok"
    assert (listed.sessions, listed.total) == ([], 0)
    response = httpx.get(
        f"{stack.url}/v1/working-memory/gone/messages", params={"namespace": ns}, timeout=30.0
    )
    assert response.status_code == 404


async def test_append_adds_to_an_existing_session_in_order_with_ids_kept(
    stack: LocalStack, ns: str
) -> None:
    async with client(stack, ns) as c:
        await c.put_working_memory(
            "chat",
            WorkingMemory(
                session_id="chat",
                user_id="u1",
                messages=[message("m1", "hello", seconds_ago=1)],
                data={"k": "v"},
                ttl_seconds=600,
            ),
        )
        appended = await c.append_messages_to_working_memory(
            "chat",
            [
                message("m2", "hi!", role="assistant"),
                {"role": "user", "content": "what is new?"},
            ],
            user_id="u1",
        )
        got = await c.get_working_memory("chat")

    minted = got.messages[2].id
    assert minted not in ("m1", "m2")
    for memory in (appended, got):
        assert ids(memory) == ["m1", "m2", minted]
        assert [m.content for m in memory.messages] == ["hello", "hi!", "what is new?"]
        assert [m.role for m in memory.messages] == ["user", "assistant", "user"]
        # the GET-then-PUT round trip keeps the session's other fields
        assert (memory.data, memory.ttl_seconds, memory.user_id) == ({"k": "v"}, 600, "u1")
    assert [m["id"] for m in log(stack, ns, "chat")] == ["m1", "m2", minted]


async def test_append_creates_a_missing_session(stack: LocalStack, ns: str) -> None:
    async with client(stack, ns) as c:
        appended = await c.append_messages_to_working_memory(
            "new", [message("m1", "first"), message("m2", "second", role="assistant")]
        )
        got = await c.get_working_memory("new")

    for memory in (appended, got):
        assert (memory.session_id, memory.namespace) == ("new", ns)
        assert ids(memory) == ["m1", "m2"]
        assert [m.content for m in memory.messages] == ["first", "second"]


async def test_appending_a_message_id_again_does_not_duplicate_it(
    stack: LocalStack, ns: str
) -> None:
    again = message("m2", "said once", seconds_ago=1)
    async with client(stack, ns) as c:
        await c.append_messages_to_working_memory("idem", [message("m1", "first", seconds_ago=2)])
        await c.append_messages_to_working_memory("idem", [again])
        retried = await c.append_messages_to_working_memory("idem", [again])
        got = await c.get_working_memory("idem")

    assert ids(retried) == ids(got) == ["m1", "m2"]
    assert [m["id"] for m in log(stack, ns, "idem")] == ["m1", "m2"]


async def test_set_data_replaces_the_data_and_keeps_the_messages(
    stack: LocalStack, ns: str
) -> None:
    async with client(stack, ns) as c:
        await seed(c, "data", data={"a": 1, "b": 2})
        await c.set_working_memory_data("data", {"c": {"d": [3]}})
        got = await c.get_working_memory("data")

    assert got.data == {"c": {"d": [3]}}
    kept(got)


async def test_update_data_merges_into_the_stored_data(stack: LocalStack, ns: str) -> None:
    async with client(stack, ns) as c:
        await seed(c, "merge", data={"a": 1, "b": {"x": 1}})
        merged = await c.update_working_memory_data("merge", {"b": {"y": 2}, "c": 3})
        deep = await c.update_working_memory_data(
            "merge", {"b": {"x": 9}}, merge_strategy="deep_merge"
        )
        got = await c.get_working_memory("merge")

    assert merged.data == {"a": 1, "b": {"y": 2}, "c": 3}
    assert deep.data == got.data == {"a": 1, "b": {"y": 2, "x": 9}, "c": 3}
    kept(got)


async def test_memories_added_to_a_session_show_with_their_ids(stack: LocalStack, ns: str) -> None:
    tea = ClientMemoryRecord(id="mem-tea", text="likes tea", memory_type=MemoryTypeEnum.SEMANTIC)
    trip = ClientMemoryRecord(
        id="mem-trip", text="went to Oslo", memory_type=MemoryTypeEnum.EPISODIC
    )
    async with client(stack, ns) as c:
        await seed(c, "mems")
        first = await c.add_memories_to_working_memory("mems", [tea])
        second = await c.add_memories_to_working_memory("mems", [trip])
        got = await c.get_working_memory("mems")

    assert [(m.id, m.text) for m in first.memories] == [("mem-tea", "likes tea")]
    for memory in (second, got):
        assert [(m.id, m.text, m.memory_type) for m in memory.memories] == [
            ("mem-tea", "likes tea", MemoryTypeEnum.SEMANTIC),
            ("mem-trip", "went to Oslo", MemoryTypeEnum.EPISODIC),
        ]
    kept(got)


async def test_append_through_a_trimmed_window_keeps_the_whole_log(
    stack: LocalStack, ns: str
) -> None:
    # Given a session of 8 messages, more than a 40-token window holds
    history = [
        message(f"m{i}", f"message {i} with a few words of padding", seconds_ago=10 - i)
        for i in range(8)
    ]
    async with client(stack, ns) as c:
        await c.put_working_memory("long", WorkingMemory(session_id="long", messages=history))

    async with client(stack, ns, default_context_window_max=40) as windowed:
        seen = await windowed.get_working_memory("long")
        # When a client whose GETs are trimmed to that window appends
        appended = await windowed.append_messages_to_working_memory(
            "long", [message("new", "one more")]
        )

    async with client(stack, ns) as c:
        document = await c.get_working_memory("long")

    # Then the GET was trimmed, so the PUT carried only the window and the new message
    visible = ids(seen)
    assert 0 < len(visible) < len(history)
    assert visible == [m.id for m in history[-len(visible) :]]
    assert ids(appended)[-1] == "new"
    # the document shows the window the client saw, plus the new message
    assert ids(document) == [*visible, "new"]
    # and the log still holds every message, in order
    assert [m["id"] for m in log(stack, ns, "long")] == [*[m.id for m in history], "new"]
    assert [m["content"] for m in log(stack, ns, "long")][-1] == "one more"


async def test_a_window_given_on_a_put_is_the_one_the_session_is_summarised_against(
    stack: LocalStack, ns: str
) -> None:
    # Given 120 turns of about 70 tokens (8,500): within the server's 16,000-token window
    turns = [
        message(
            f"t{i:03d}",
            f"Turn {i:03d}: we planned the garden in Lisbon, the roses, the tomatoes, the basil "
            "and the watering schedule for the hot weeks of the summer, and what we might "
            "plant next spring on the small sunny balcony by the old kitchen window upstairs.",
            role="user" if i % 2 == 0 else "assistant",
            seconds_ago=200 - i,
        )
        for i in range(120)
    ]
    # When the client PUTs them with its 2,000-token window, as AMS summarises against it
    async with client(stack, ns) as c:
        await c.put_working_memory(
            "garden", WorkingMemory(session_id="garden", messages=turns), context_window_max=2000
        )
        # Then the background curator summarises the session and trims its view
        summarised(stack, ns, "garden")
        memory = await c.get_working_memory("garden")

    assert memory.context
    assert 0 < len(memory.messages) < len(turns)
    assert ids(memory)[-1] == "t119"
    assert len(log(stack, ns, "garden")) == len(turns)


def summarised(stack: LocalStack, ns: str, session_id: str, timeout: float = 120.0) -> None:
    """Wait until the session has a running summary (generous, as `searchable`)."""
    deadline = time.monotonic() + timeout
    url = f"{stack.url}/v1/working-memory/{session_id}"
    while True:
        body = httpx.get(url, params={"namespace": ns}, timeout=30.0).json()
        if body.get("context") or time.monotonic() > deadline:
            assert body.get("context"), f"no summary after {timeout} s"
            return
        time.sleep(0.1)


# -- long-term memory --------------------------------------------------------------------------


def searchable(stack: LocalStack, memory_id: str, timeout: float = 120.0) -> dict[str, Any]:
    """The record once the stream pump and the indexer made it searchable (memkit's
    `indexing` field; the client's model has none). Generous: a loaded machine's first
    batch waits for the indexer's cold start; a healthy stack answers in about a second."""
    deadline = time.monotonic() + timeout
    while True:
        body = httpx.get(f"{stack.url}/v1/long-term-memory/{memory_id}", timeout=30.0).json()
        if body.get("indexing") == "indexed" or time.monotonic() > deadline:
            assert body.get("indexing") == "indexed", body
            return dict(body)
        time.sleep(0.05)


async def test_long_term_create_search_get_edit_delete(stack: LocalStack, ns: str) -> None:
    tea_id, trip_id = f"tea-{ns}", f"trip-{ns}"
    records = [
        ClientMemoryRecord(
            id=tea_id,
            text="Ada drinks green tea every morning",
            user_id="u1",
            topics=["drinks"],
            memory_type=MemoryTypeEnum.SEMANTIC,
        ),
        ClientMemoryRecord(
            id=trip_id,
            text="Ada flew to Oslo for a conference in May",
            user_id="u1",
            topics=["travel"],
            memory_type=MemoryTypeEnum.EPISODIC,
        ),
    ]
    async with client(stack, ns) as c:
        # Given two records created through the client
        ack = await c.create_long_term_memory(records)
        searchable(stack, tea_id)
        searchable(stack, trip_id)

        # When the client searches, reads, edits and deletes them
        found = await c.search_long_term_memory(
            "what does Ada like to drink?", user_id=UserId(eq="u1"), limit=1
        )
        travel = await c.search_long_term_memory("trips", topics=Topics(any=["travel"]))
        got = await c.get_long_term_memory(tea_id)
        edited = await c.edit_long_term_memory(tea_id, {"text": "Ada now drinks black coffee"})
        searchable(stack, tea_id)
        coffee = await c.search_long_term_memory(
            "coffee", memory_type=MemoryType(eq="semantic"), limit=5
        )
        deleted = await c.delete_long_term_memories([tea_id, trip_id])
        with pytest.raises(MemoryNotFoundError):
            await c.get_long_term_memory(tea_id)

    # Then each answer parses into the client's models with what was stored
    assert ack.status == "ok"
    assert [m.id for m in found.memories] == [tea_id]
    assert 0 <= found.memories[0].dist < 1
    assert found.memories[0].namespace == ns
    assert [m.id for m in travel.memories] == [trip_id]
    assert got.text == "Ada drinks green tea every morning"
    assert got.memory_type == MemoryTypeEnum.SEMANTIC
    assert got.topics == ["drinks"]
    assert edited.text == "Ada now drinks black coffee"
    assert coffee.memories[0].id == tea_id
    assert deleted.status == "ok, deleted 2 memories"


async def test_search_memory_tool_reads_relevance_from_dist(stack: LocalStack, ns: str) -> None:
    rid = f"pet-{ns}"
    async with client(stack, ns) as c:
        await c.create_long_term_memory(
            [ClientMemoryRecord(id=rid, text="Bob has a grey cat called Pixel", user_id="u2")]
        )
        searchable(stack, rid)
        result = await c.search_memory_tool("Bob's cat", user_id="u2", min_relevance=0.1)

    assert [m["id"] for m in result["memories"]] == [rid]
    assert result["has_more"] is False
    assert 0.1 <= result["memories"][0]["relevance_score"] <= 1


# -- prompt hydration (docs/ams-client.md §4.16-4.17) -------------------------------------------

LONG_TERM_HEADING = "## Long term memories related to the user's query"


def texts_of(prompt: dict[str, Any]) -> list[str]:
    return [m["content"]["text"] for m in prompt["messages"]]


async def test_memory_prompt_hydrates_a_session_with_the_users_memories(
    stack: LocalStack, ns: str
) -> None:
    tea_id = f"tea-{ns}"
    async with client(stack, ns) as c:
        # Given a session with a summary and turns, and a memory of its user
        await c.put_working_memory(
            "trip",
            WorkingMemory(
                session_id="trip",
                user_id="u1",
                context="Ada is planning a trip to Oslo",
                messages=[
                    message("m1", "I land in Oslo on Friday", seconds_ago=2),
                    message("m2", "Noted: Friday in Oslo", role="assistant", seconds_ago=1),
                ],
            ),
        )
        await c.create_long_term_memory(
            [ClientMemoryRecord(id=tea_id, text="Ada drinks green tea every morning", user_id="u1")]
        )
        searchable(stack, tea_id)

        # When the client hydrates the next query (context_window_max goes as a string)
        prompt = await c.memory_prompt(
            "What should I drink on the flight?",
            session_id="trip",
            user_id="u1",
            context_window_max=4000,
        )

    # Then the prompt reads as AMS's: summary, memories, turns, then the query
    assert [m["role"] for m in prompt["messages"]] == [
        "system",
        "system",
        "user",
        "assistant",
        "user",
    ]
    assert all(m["content"]["type"] == "text" for m in prompt["messages"])
    assert texts_of(prompt) == [
        "## A summary of the conversation so far:\nAda is planning a trip to Oslo",
        f"{LONG_TERM_HEADING}\n- Ada drinks green tea every morning (ID: {tea_id})",
        "I land in Oslo on Friday",
        "Noted: Friday in Oslo",
        "What should I drink on the flight?",
    ]
    # and memkit's accounting: a quarter of the 4,000-token window is left for the answer
    assert prompt["token_budget"] == 3000
    assert prompt["total_tokens"] == sum(part["used"] for part in prompt["parts"].values())
    assert [m["id"] for m in prompt["long_term_memories"]] == [tea_id]


async def test_a_system_message_reads_back_and_hydrates_as_a_system_message(
    stack: LocalStack, ns: str
) -> None:
    async with client(stack, ns) as c:
        # Given a session whose first message is the assistant's instructions
        await c.put_working_memory(
            "agent",
            WorkingMemory(
                session_id="agent",
                user_id="u1",
                messages=[
                    message("i1", "You are a travel agent.", role="system", seconds_ago=3),
                    message("i2", "I want to fly to Oslo", seconds_ago=2),
                    message("i3", "Oslo it is", role="assistant", seconds_ago=1),
                ],
            ),
        )

        # When the client reads it back and hydrates the next query
        document = await c.get_working_memory("agent", user_id="u1", namespace=ns)
        prompt = await c.memory_prompt(
            "Which airline?", session_id="agent", user_id="u1", long_term_search={"limit": 1}
        )

    # Then the instructions are a system message in both, in their place
    assert [(m.id, m.role) for m in document.messages] == [
        ("i1", "system"),
        ("i2", "user"),
        ("i3", "assistant"),
    ]
    turns = [(m["role"], m["content"]["text"]) for m in prompt["messages"][-4:]]
    assert turns == [
        ("system", "You are a travel agent."),
        ("user", "I want to fly to Oslo"),
        ("assistant", "Oslo it is"),
        ("user", "Which airline?"),
    ]


async def test_hydrate_memory_prompt_searches_long_term_memory_by_its_filters(
    stack: LocalStack, ns: str
) -> None:
    cat_id, dog_id, tea_id = f"cat-{ns}", f"dog-{ns}", f"tea-{ns}"
    async with client(stack, ns) as c:
        # Given memories of two users
        await c.create_long_term_memory(
            [
                ClientMemoryRecord(
                    id=cat_id, text="Bob has a grey cat called Pixel", user_id="u2", topics=["pets"]
                ),
                ClientMemoryRecord(
                    id=dog_id, text="Ada walks a dog called Rex", user_id="u1", topics=["pets"]
                ),
                ClientMemoryRecord(
                    id=tea_id, text="Bob drinks black tea", user_id="u2", topics=["drinks"]
                ),
            ]
        )
        for memory_id in (cat_id, dog_id, tea_id):
            searchable(stack, memory_id)

        # When the client hydrates a query from long-term memory alone
        prompt = await c.hydrate_memory_prompt(
            "What is the pet called?",
            user_id={"eq": "u2"},
            topics={"any": ["pets"]},
            limit=3,
        )

    # Then only the memories meeting the filters are in it, then the query
    assert texts_of(prompt) == [
        f"{LONG_TERM_HEADING}\n- Bob has a grey cat called Pixel (ID: {cat_id})",
        "What is the pet called?",
    ]
    assert [m["role"] for m in prompt["messages"]] == ["system", "user"]


async def test_memory_prompt_without_a_session_or_a_search_is_refused_as_ams_does(
    stack: LocalStack, ns: str
) -> None:
    from agent_memory_client import MemoryServerError

    async with client(stack, ns) as c:
        with pytest.raises(MemoryServerError) as refused:
            await c.memory_prompt("hello?")

    assert refused.value.status_code == 400
    assert "either session or long_term_search" in str(refused.value)
