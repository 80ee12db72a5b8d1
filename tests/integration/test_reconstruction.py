"""Reconstruction (AMS): with index_all_messages on, a session's indexed messages outlive its
TTL as long-term message records, and a GET of the expired session rebuilds the document
from them. The real API and indexer handlers on moto; expiry is what DynamoDB leaves behind
(items past `expires_at`, still stored) or, later, what its TTL deletion leaves (nothing of
the items that carried `expires_at`)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import httpx
import pytest
from boto3.dynamodb.conditions import Key

from memkit.store import keys
from tests.conftest import handler_transport
from tests.integration.memory_world import MemoryWorld, build_world

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): these run on moto and on AWS's own engine.
ENGINES = ("moto", "dynamodb-local")

SESSION = "/v1/working-memory/chat"


def _world(table: str, index_all_messages: bool, **settings_: Any) -> MemoryWorld:
    """conftest's `world`, with the server setting index_all_messages as given."""
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(
        table_name=table, region="us-east-1", index_all_messages=index_all_messages, **settings_
    )
    store = DynamoStore(
        settings, index_messages=True, index_all_messages=settings.index_all_messages
    )
    return build_world(table, settings, store=store)


@pytest.fixture
def keeping(dynamodb_table: str) -> MemoryWorld:
    """The API and the indexer with index_all_messages on."""
    return _world(dynamodb_table, index_all_messages=True)


@pytest.fixture
def plain(dynamodb_table: str) -> MemoryWorld:
    """The API and the indexer with index_all_messages off (the default)."""
    return _world(dynamodb_table, index_all_messages=False)


# -- helpers ------------------------------------------------------------------------------------


def _msg(mid: str, content: str, at: str | None = None, role: str = "user") -> dict[str, Any]:
    message = {"id": mid, "role": role, "content": content}
    if at is not None:
        message["created_at"] = at
    return message


CONVERSATION = [
    _msg("m1", "I am planning a trip to Lisbon", "2026-01-01T10:00:00Z"),
    _msg("m2", "Lisbon is lovely in spring", "2026-01-01T10:00:05Z", "assistant"),
    _msg("m3", "My hotel booking number is 88213", "2026-01-01T10:00:10Z"),
]


def _session(world: MemoryWorld, **fields: Any) -> None:
    """The session `chat` of user ada with a TTL, messages, data, a summary, a pending memory
    and a scratchpad: everything a document can hold."""
    body = {
        "messages": CONVERSATION,
        "user_id": "ada",
        "ttl_seconds": 600,
        "data": {"step": 2},
        "context": "a summary",
        "memories": [{"id": "p1", "text": "Ada travels to Lisbon"}],
        "scratchpad": "notes",
        **fields,
    }
    response = world.api("PUT", SESSION, body=body)
    assert response.status == 200, response.body


def _items(table: str, session_id: str = "chat") -> list[dict[str, Any]]:
    """Every stored item of the session's partition, expired ones included."""
    pk = keys.session_pk("default", "default", session_id)
    found = (
        boto3.resource("dynamodb", region_name="us-east-1")
        .Table(table)
        .query(KeyConditionExpression=Key("PK").eq(pk), ConsistentRead=True)
    )
    return list(found["Items"])


def _messages_stored(table: str) -> dict[str, dict[str, Any]]:
    return {i["message_id"]: i for i in _items(table) if i["kind"] == "message"}


def _expire(table: str, session_id: str = "chat") -> None:
    """What DynamoDB leaves for days after TTL: every item that carries `expires_at` past
    it, still stored."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    for item in _items(table, session_id):
        if "expires_at" in item:
            client.update_item(
                TableName=table,
                Key={"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}},
                UpdateExpression="SET expires_at = :past",
                ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 1)}},
            )


def _ttl_delete(table: str, session_id: str = "chat") -> None:
    """What DynamoDB's TTL deletion (or the cleanup run) leaves: nothing that carried
    `expires_at`."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    for item in _items(table, session_id):
        if "expires_at" in item:
            client.delete_item(
                TableName=table, Key={"PK": {"S": item["PK"]}, "SK": {"S": item["SK"]}}
            )


def _search(world: MemoryWorld, text: str, session_id: str = "chat") -> list[str]:
    response = world.api(
        "POST",
        "/v1/long-term-memory/search",
        query={"optimize_query": "false"},
        body={
            "text": text,
            "search_mode": "keyword",
            "memory_type": {"eq": "message"},
            "session_id": {"eq": session_id},
        },
    )
    assert response.status == 200, response.body
    return [m["id"] for m in response.body["memories"]]


def _ids(body: dict[str, Any]) -> list[str]:
    return [m["id"] for m in body["messages"]]


# -- what is kept --------------------------------------------------------------------------------


def test_kept_messages_carry_no_expiry_while_the_rest_of_the_session_does(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)

    items = _items(dynamodb_table)

    messages = [i for i in items if i["kind"] == "message"]
    others = [i for i in items if i["kind"] != "message"]
    assert sorted(m["message_id"] for m in messages) == ["m1", "m2", "m3"]
    assert all("expires_at" not in m and m["idx"] == "1" for m in messages)
    assert {i["kind"] for i in others} == {"session", "memory", "scratchpad"}
    assert all("expires_at" in i for i in others)


def test_without_the_setting_messages_expire_with_their_session(
    plain: MemoryWorld, dynamodb_table: str
) -> None:
    _session(plain)

    assert all("expires_at" in i for i in _items(dynamodb_table))


def test_a_session_that_opts_out_of_indexing_keeps_nothing(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping, index_messages=False)
    _expire(dynamodb_table)

    assert all("expires_at" in m for m in _messages_stored(dynamodb_table).values())
    assert keeping.api("GET", SESSION).status == 404


# -- the rebuilt document ------------------------------------------------------------------------


def test_a_get_of_an_expired_session_rebuilds_it_from_its_kept_messages(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _expire(dynamodb_table)

    response = keeping.api("GET", SESSION)

    assert response.status == 200, response.body
    body = response.body
    assert body["reconstructed"] is True
    assert _ids(body) == ["m1", "m2", "m3"]
    assert [m["content"] for m in body["messages"]] == [m["content"] for m in CONVERSATION]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant", "user"]
    assert (body["session_id"], body["namespace"], body["user_id"]) == ("chat", "default", "ada")
    # What expired with the session is not brought back.
    assert (body["data"], body["context"], body["memories"]) == ({}, None, [])
    assert (body["scratchpad"], body["ttl_seconds"], body["expires_at"]) == (None, None, None)
    assert body["created_at"] == "2026-01-01T10:00:00.000000Z"
    assert (body["version"], response.headers["ETag"]) == (0, '"0"')


def test_the_rebuild_does_not_depend_on_whether_ttl_deletion_ran(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _expire(dynamodb_table)
    before = keeping.api("GET", SESSION).body

    _ttl_delete(dynamodb_table)
    after = keeping.api("GET", SESSION).body

    assert {i["kind"] for i in _items(dynamodb_table)} == {"message"}
    ignore = {"updated_at", "last_accessed"}
    assert {k: v for k, v in after.items() if k not in ignore} == {
        k: v for k, v in before.items() if k not in ignore
    }


def test_messages_come_back_in_created_at_order_then_id(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    same = "2026-01-01T10:00:00Z"
    messages = [
        _msg("c", "third", "2026-01-01T10:00:09Z"),
        _msg("b", "tie, second by id", same),
        _msg("a", "tie, first by id", same),
    ]
    keeping.api("PUT", SESSION, body={"messages": messages, "ttl_seconds": 60})
    _ttl_delete(dynamodb_table)

    body = keeping.api("GET", SESSION).body

    assert _ids(body) == ["a", "b", "c"]


def test_recent_messages_limit_and_the_window_apply_to_a_rebuilt_session(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _ttl_delete(dynamodb_table)

    newest = keeping.api("GET", SESSION, query={"recent_messages_limit": "2"}).body
    windowed = keeping.api("GET", SESSION, query={"context_window_max": "12"}).body

    assert (newest["reconstructed"], _ids(newest)) == (True, ["m2", "m3"])
    assert windowed["reconstructed"] is True
    assert _ids(windowed) == ["m3"]
    assert windowed["context_percentage_total_used"] is not None


def test_a_rebuilt_document_holds_the_newest_500_messages_and_can_be_put_back(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    messages = [
        _msg(f"m{i:03d}", f"turn {i}", f"2026-01-01T10:{i // 60:02d}:{i % 60:02d}Z")
        for i in range(501)
    ]
    keeping.api("PUT", SESSION, body={"messages": messages, "ttl_seconds": 60})
    _ttl_delete(dynamodb_table)

    rebuilt = keeping.api("GET", SESSION).body
    continued = keeping.api(
        "PUT", SESSION, body={"messages": [*rebuilt["messages"], _msg("new", "and one more")]}
    )

    assert _ids(rebuilt) == [m["id"] for m in messages[1:]]
    assert continued.status == 200, continued.body
    assert continued.body["message_count"] == 501


def test_a_rebuilt_session_is_refused_to_another_user(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _ttl_delete(dynamodb_table)

    assert keeping.api("GET", SESSION, query={"user_id": "bob"}).status == 403
    assert keeping.api("GET", SESSION, query={"user_id": "ada"}).status == 200


def test_without_the_setting_an_expired_session_is_a_404(
    plain: MemoryWorld, dynamodb_table: str
) -> None:
    _session(plain)
    _expire(dynamodb_table)

    response = plain.api("GET", SESSION)

    assert response.status == 404
    assert all("expires_at" in i for i in _items(dynamodb_table))


def test_a_session_that_left_nothing_is_a_404(keeping: MemoryWorld, dynamodb_table: str) -> None:
    keeping.api("PUT", SESSION, body={"data": {"k": 1}, "ttl_seconds": 60})
    _expire(dynamodb_table)

    assert keeping.api("GET", SESSION).status == 404
    assert keeping.api("GET", "/v1/working-memory/never").status == 404


def test_a_live_session_is_never_marked_reconstructed(keeping: MemoryWorld) -> None:
    _session(keeping)

    body = keeping.api("GET", SESSION).body

    assert body["reconstructed"] is None
    assert body["data"] == {"step": 2}


def test_a_prompt_for_an_expired_session_is_hydrated_from_the_rebuilt_document(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _ttl_delete(dynamodb_table)

    response = keeping.api(
        "POST",
        "/v1/memory/prompt",
        query={"optimize_query": "false"},
        body={"query": "What was my booking number?", "session": {"session_id": "chat"}},
    )

    assert response.status == 200, response.body
    texts = [m["content"]["text"] for m in response.body["messages"]]
    assert texts[-1] == "What was my booking number?"
    assert "My hotel booking number is 88213" in texts[:-1]


# -- long-term memory ----------------------------------------------------------------------------


def test_kept_messages_stay_searchable_after_their_session_expired(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    keeping.settle()
    _ttl_delete(dynamodb_table)
    keeping.settle()  # TTL deletes of the session's other items reach the indexer too

    assert _search(keeping, "hotel booking") == ["m3"]
    assert {"m1", "m2", "m3"} <= keeping.index_ids()


def test_without_the_setting_expired_messages_leave_the_search(
    plain: MemoryWorld, dynamodb_table: str
) -> None:
    _session(plain)
    plain.settle()
    _ttl_delete(dynamodb_table)
    plain.settle()

    assert _search(plain, "hotel booking") == []
    assert not {"m1", "m2", "m3"} & plain.index_ids()


def test_a_delete_removes_the_kept_messages_and_their_vectors(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    keeping.settle()
    _ttl_delete(dynamodb_table)

    assert keeping.api("DELETE", SESSION).status == 200
    keeping.settle()

    assert _items(dynamodb_table) == []
    assert keeping.api("GET", SESSION).status == 404
    assert _search(keeping, "hotel booking") == []
    assert not {"m1", "m2", "m3"} & keeping.index_ids()


def test_a_users_delete_leaves_what_another_user_kept_under_the_same_session_id(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)  # ada's
    _ttl_delete(dynamodb_table)
    keeping.api(
        "POST",
        f"{SESSION}/messages",
        body={"messages": [_msg("b1", "bob starts over")], "user_id": "bob", "ttl_seconds": 60},
    )

    keeping.settle()
    assert {"m1", "m2", "m3", "b1"} <= keeping.index_ids()

    deleted = keeping.api("DELETE", SESSION, query={"user_id": "bob"})

    assert deleted.status == 200
    assert set(_messages_stored(dynamodb_table)) == {"m1", "m2", "m3"}
    assert keeping.api("GET", SESSION, query={"user_id": "ada"}).body["user_id"] == "ada"
    # bob's message vector goes at once; ada's kept messages stay searchable
    assert "b1" not in keeping.index_ids()
    assert {"m1", "m2", "m3"} <= keeping.index_ids()
    keeping.settle()
    assert {"m1", "m2", "m3"} <= keeping.index_ids()


# -- writes after expiry -------------------------------------------------------------------------


def test_a_put_of_the_rebuilt_document_continues_it_in_a_new_life(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _expire(dynamodb_table)
    rebuilt = keeping.api("GET", SESSION).body

    reply = _msg("m4", "Noted: booking 88213", role="assistant")
    written = keeping.api(
        "PUT",
        SESSION,
        body={"messages": [*rebuilt["messages"], reply], "user_id": "ada", "ttl_seconds": 600},
    )

    assert written.status == 200, written.body
    assert written.body["new_session"] is True
    assert _ids(written.body) == ["m1", "m2", "m3", "m4"]
    body = keeping.api("GET", SESSION).body
    assert (body["reconstructed"], _ids(body), body["message_count"]) == (
        None,
        ["m1", "m2", "m3", "m4"],
        4,
    )
    assert body["data"] == {}  # the old life's data expired with it


def test_messages_a_new_life_leaves_out_stay_records_but_never_join_its_document(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _ttl_delete(dynamodb_table)

    keeping.api(
        "POST",
        f"{SESSION}/messages",
        body={"messages": [_msg("n1", "a new conversation")], "ttl_seconds": 60},
    )
    # A TTL change rewrites the expiry of every item of the session (the refresh), which
    # deletes what an earlier life left behind, except its kept messages.
    keeping.api("PATCH", SESSION, body={"ttl_seconds": 3600})
    keeping.settle()

    assert _ids(keeping.api("GET", SESSION).body) == ["n1"]
    assert set(_messages_stored(dynamodb_table)) == {"m1", "m2", "m3", "n1"}
    assert _search(keeping, "hotel booking") == ["m3"]
    # When the new life expires too, its own messages are what a GET rebuilds.
    _ttl_delete(dynamodb_table)
    rebuilt = keeping.api("GET", SESSION).body
    assert (rebuilt["reconstructed"], _ids(rebuilt)) == (True, ["n1"])


def test_a_refresh_under_the_setting_keeps_messages_written_before_it_was_on(
    plain: MemoryWorld, dynamodb_table: str
) -> None:
    _session(plain)
    keeping = _world(dynamodb_table, index_all_messages=True)

    keeping.api("PATCH", SESSION, body={"ttl_seconds": 3600})

    stored = _messages_stored(dynamodb_table)
    assert all("expires_at" not in m for m in stored.values())
    _ttl_delete(dynamodb_table)
    assert _ids(keeping.api("GET", SESSION).body) == ["m1", "m2", "m3"]


def test_a_write_that_drops_messages_from_the_document_still_keeps_them(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)

    # A PUT of the newest messages alone: the older ones leave the document, not the log.
    keeping.api("PUT", SESSION, body={"messages": CONVERSATION[1:], "ttl_seconds": 600})
    _ttl_delete(dynamodb_table)

    assert _ids(keeping.api("GET", SESSION).body) == ["m1", "m2", "m3"]


# -- cost ----------------------------------------------------------------------------------------


class RequestCounter:
    """DynamoDB calls by operation, seen by botocore in every session created after install."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def count(self, model: Any, **_kwargs: Any) -> None:
        self.calls.append(model.name)


@pytest.fixture
def counted(dynamodb_table: str) -> Iterator[tuple[MemoryWorld, RequestCounter]]:
    """`keeping`, built after a botocore handler that counts its store's requests (with
    settings no other test uses: the store's connection is cached by its settings, and
    only a botocore session created after the handler was added calls it)."""
    from botocore import handlers

    counter = RequestCounter()
    entry = ("before-call.dynamodb", counter.count)
    handlers.BUILTIN_HANDLERS.append(entry)
    try:
        yield _world(dynamodb_table, True, connect_timeout_seconds=2.125), counter
    finally:
        handlers.BUILTIN_HANDLERS.remove(entry)


def test_a_rebuild_is_one_request(
    counted: tuple[MemoryWorld, RequestCounter], dynamodb_table: str
) -> None:
    world, counter = counted
    _session(world)
    _expire(dynamodb_table)

    counter.calls.clear()
    response = world.api("GET", SESSION, query={"recent_messages_limit": "2"})

    assert response.body["reconstructed"] is True
    assert counter.calls == ["Query"]


# -- settings ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "environment",
    [
        {"MEMKIT_INDEX_ALL_MESSAGES": "true"},
        {"INDEX_ALL_MESSAGES_IN_LONG_TERM_MEMORY": "true"},
        {"MEMKIT_INDEX_ALL_MESSAGES": "true", "INDEX_ALL_MESSAGES_IN_LONG_TERM_MEMORY": "false"},
    ],
)
def test_the_setting_is_read_under_memkits_name_or_ams(environment: dict[str, str]) -> None:
    from memkit.config import ApiSettings

    settings = ApiSettings.from_env({"MEMKIT_TABLE_NAME": "memkit-dev", **environment})

    assert settings.index_all_messages is True


def test_the_setting_is_off_by_default() -> None:
    from memkit.config import ApiSettings

    assert ApiSettings.from_env({"MEMKIT_TABLE_NAME": "memkit-dev"}).index_all_messages is False


# -- agent-memory-client -------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _client(world: MemoryWorld) -> Any:
    """agent-memory-client whose HTTP requests go to the API handler as API Gateway events."""
    from agent_memory_client import MemoryAPIClient, MemoryClientConfig

    client = MemoryAPIClient(MemoryClientConfig(base_url="http://memkit", timeout=30.0))
    # The client builds its own httpx client; this one has the same base URL and headers
    # and hands each request to the handler instead of a socket.
    client._client = httpx.AsyncClient(
        base_url="http://memkit",
        headers=client._client.headers,
        transport=handler_transport(world.api_handler),
    )
    return client


@pytest.mark.anyio
@pytest.mark.filterwarnings("ignore:get_working_memory is deprecated:DeprecationWarning")
async def test_agent_memory_client_reads_and_continues_a_rebuilt_session(
    keeping: MemoryWorld, dynamodb_table: str
) -> None:
    _session(keeping)
    _ttl_delete(dynamodb_table)

    async with _client(keeping) as client:
        memory = await client.get_working_memory("chat", namespace="default")
        appended = await client.append_messages_to_working_memory(
            "chat", [{"id": "m4", "role": "user", "content": "and a taxi"}], namespace="default"
        )

    assert [m.id for m in memory.messages] == ["m1", "m2", "m3"]
    assert [m.content for m in memory.messages][2] == "My hotel booking number is 88213"
    assert memory.user_id == "ada"
    assert [m.id for m in appended.messages] == ["m1", "m2", "m3", "m4"]
    stored = keeping.api("GET", SESSION).body
    assert (stored["reconstructed"], _ids(stored)) == (None, ["m1", "m2", "m3", "m4"])
