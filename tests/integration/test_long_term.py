"""Long-term memory end to end on moto: the real API handler writes, the real indexer handler
reads the real stream records of those writes (as Lambda's poller would deliver them) and
fills the vector index, and the API searches it. Each test runs on the local exact index and
on the DynamoDB vector table (VectorStore dynamodb, through its local stand-in): deletes,
versions, TTL removals, keyword and hybrid search behave the same on both."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from tests.integration.memory_world import BACKENDS, MemoryWorld, backend_world

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): these run on moto and on AWS's own engine.
ENGINES = ("moto", "dynamodb-local")
LTM = "/v1/long-term-memory"


@pytest.fixture(params=BACKENDS)
def world(request: pytest.FixtureRequest, dynamodb_table: str) -> Iterator[MemoryWorld]:
    with backend_world(request.param, dynamodb_table) as built:
        yield built


def _record(rid: str, text: str, **fields: Any) -> dict[str, Any]:
    return {"id": rid, "text": text, **fields}


def _create(world: MemoryWorld, *records: dict[str, Any], deduplicate: bool = True) -> Any:
    response = world.api(
        "POST", f"{LTM}/", body={"memories": list(records), "deduplicate": deduplicate}
    )
    assert response.status == 200, response.body
    return response.body


def _search(world: MemoryWorld, **body: Any) -> dict[str, Any]:
    response = world.api("POST", f"{LTM}/search", query={"optimize_query": "false"}, body=body)
    assert response.status == 200, response.body
    return dict(response.body)


def _ids(body: dict[str, Any]) -> list[str]:
    return [m["id"] for m in body["memories"]]


FACTS = [
    _record("tea", "Ada drinks green tea every morning", user_id="ada", topics=["drinks"]),
    _record(
        "oslo",
        "Ada is flying to Oslo on Friday for a conference",
        user_id="ada",
        topics=["travel"],
        memory_type="episodic",
    ),
    _record("cat", "Bob has a grey cat called Pixel", user_id="bob", topics=["pets"]),
]


# -- records: pending, then indexed ---------------------------------------------------------


def test_a_created_record_is_pending_until_the_indexer_has_run(world: MemoryWorld) -> None:
    _create(world, FACTS[0])

    before = world.api("GET", f"{LTM}/tea")
    world.settle()
    after = world.api("GET", f"{LTM}/tea")

    assert before.status == 200
    assert before.body["indexing"] == "pending"
    assert after.body["indexing"] == "indexed"
    assert after.body["text"] == FACTS[0]["text"]
    assert after.body["persisted_at"] is not None
    assert after.body["memory_type"] == "semantic"


def test_search_finds_a_record_by_meaning_once_indexed(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    world.settle()

    body = _search(world, text="what does Ada like to drink?", search_mode="semantic", limit=3)

    assert _ids(body)[0] == "tea"
    first = body["memories"][0]
    assert 0 <= first["dist"] < 1
    assert first["score"] == pytest.approx(1 - first["dist"])
    assert first["score_type"] == "semantic"


def test_keyword_and_hybrid_modes_find_the_named_record(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    world.settle()

    keyword = _search(world, text="Pixel", search_mode="keyword")
    hybrid = _search(world, text="grey cat Pixel")

    assert _ids(keyword) == ["cat"]
    assert keyword["memories"][0]["score_type"] == "keyword"
    assert _ids(hybrid)[0] == "cat"
    assert hybrid["memories"][0]["score_type"] == "hybrid"


def test_filters_narrow_and_never_widen(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    world.settle()

    ada = _search(world, text="anything at all", user_id={"eq": "ada"}, limit=10)
    travel = _search(world, text="trips", topics={"any": ["travel"]})
    episodic = _search(world, text="", memory_type={"eq": "episodic"})
    nobody = _search(world, text="tea", user_id={"eq": "carol"})

    assert set(_ids(ada)) == {"tea", "oslo"}
    assert _ids(travel) == ["oslo"]
    assert _ids(episodic) == ["oslo"]
    assert nobody == {"memories": [], "total": 0, "next_offset": None}


def test_an_empty_text_lists_by_filters_newest_first(world: MemoryWorld) -> None:
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    _create(world, {**FACTS[0], "created_at": old}, FACTS[1])
    world.settle()

    body = _search(world, text="", user_id={"eq": "ada"})

    assert _ids(body) == ["oslo", "tea"]
    assert body["memories"][0]["dist"] == 1.0


def test_date_filters_take_iso_times(world: MemoryWorld) -> None:
    old = (datetime.now(UTC) - timedelta(days=30)).isoformat()
    _create(world, {**FACTS[0], "created_at": old}, FACTS[1])
    world.settle()
    since = (datetime.now(UTC) - timedelta(days=1)).isoformat()

    recent = _search(world, text="", created_at={"gte": since})

    assert _ids(recent) == ["oslo"]


def test_pages_follow_next_offset(world: MemoryWorld) -> None:
    _create(world, *[_record(f"r{i}", f"note number {i} about gardening") for i in range(5)])
    world.settle()

    first = _search(world, text="gardening", limit=2)
    second = _search(world, text="gardening", limit=2, offset=first["next_offset"])
    last = _search(world, text="gardening", limit=2, offset=4)

    assert first["next_offset"] == 2
    assert len(first["memories"]) == len(second["memories"]) == 2
    assert not set(_ids(first)) & set(_ids(second))
    assert last["next_offset"] is None
    assert len(last["memories"]) == 1


def test_distance_threshold_drops_distant_hits(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    world.settle()

    body = _search(
        world,
        text="Ada drinks green tea every morning",
        search_mode="semantic",
        distance_threshold=0.05,
    )

    assert _ids(body) == ["tea"]


def test_recency_boost_prefers_the_newer_of_two_similar_records(world: MemoryWorld) -> None:
    old = (datetime.now(UTC) - timedelta(days=200)).isoformat()
    _create(
        world,
        _record("old", "The office wifi password is tulip", created_at=old),
        _record("new", "The office wifi password is now orchid"),
    )
    world.settle()

    plain = _search(world, text="office wifi password is tulip", search_mode="semantic")
    boosted = _search(
        world,
        text="office wifi password is tulip",
        search_mode="semantic",
        recency_boost=True,
        recency_recency_weight=0.9,
        recency_semantic_weight=0.1,
    )

    assert _ids(plain)[0] == "old"
    assert _ids(boosted)[0] == "new"
    assert boosted["memories"][0]["score_type"] == "recency"


# -- edits and deletes reach the index ------------------------------------------------------


def test_an_edited_text_is_embedded_again(world: MemoryWorld) -> None:
    _create(world, FACTS[2])
    world.settle()

    edited = world.api("PATCH", f"{LTM}/cat", body={"text": "Bob has a small brown dog called Rex"})
    world.settle()
    dog = _search(world, text="Rex", search_mode="keyword")
    cat = _search(world, text="Pixel", search_mode="keyword")

    assert edited.status == 200
    assert edited.body["indexing"] == "pending"
    assert world.api("GET", f"{LTM}/cat").body["indexing"] == "indexed"
    assert _ids(dog) == ["cat"]
    assert _ids(cat) == []


def test_deleted_records_leave_the_index(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    world.settle()

    deleted = world.api("DELETE", LTM, query={"memory_ids": ["tea", "cat", "nope"]})
    world.settle()

    assert deleted.body == {"status": "ok, deleted 2 memories"}
    assert world.api("GET", f"{LTM}/tea").status == 404
    assert world.index_ids() == {"oslo"}


def test_a_create_with_a_stored_id_replaces_that_record(world: MemoryWorld) -> None:
    _create(world, FACTS[0])
    world.settle()
    first = world.api("GET", f"{LTM}/tea").body

    _create(world, _record("tea", "Ada now prefers black coffee", user_id="ada"))
    world.settle()
    second = world.api("GET", f"{LTM}/tea").body

    assert second["text"] == "Ada now prefers black coffee"
    assert second["created_at"] == first["created_at"]
    assert _ids(_search(world, text="coffee", search_mode="keyword")) == ["tea"]


def test_deduplicate_skips_a_text_the_user_already_has(world: MemoryWorld) -> None:
    _create(world, FACTS[0])

    again = _create(world, {**FACTS[0], "id": "tea-2"})
    other_user = _create(world, {**FACTS[0], "id": "tea-3", "user_id": "bob"})
    forced = _create(world, {**FACTS[0], "id": "tea-4"}, deduplicate=False)

    assert again["duplicates"] == ["tea-2"]
    assert world.api("GET", f"{LTM}/tea-2").status == 404
    assert other_user["created"] == ["tea-3"]
    assert forced["created"] == ["tea-4"]


# -- the indexer on stream records ------------------------------------------------------------


def test_a_replayed_batch_changes_nothing(world: MemoryWorld) -> None:
    _create(world, *FACTS)
    batch = world.read_stream()
    world.index(batch)
    before = _search(world, text="tea", search_mode="keyword")

    again = world.index(batch)

    assert again == {"batchItemFailures": []}
    assert _search(world, text="tea", search_mode="keyword") == before
    assert world.index_ids() == {"tea", "oslo", "cat"}


def test_an_older_version_never_overwrites_a_newer_one(world: MemoryWorld) -> None:
    _create(world, FACTS[2])
    insert = world.read_stream()
    world.api("PATCH", f"{LTM}/cat", body={"text": "Bob has a brown dog called Rex"})
    modify = world.read_stream()

    world.index(modify)
    world.index(insert)  # delivered late

    assert _ids(_search(world, text="Rex", search_mode="keyword")) == ["cat"]
    assert _ids(_search(world, text="Pixel", search_mode="keyword")) == []


def test_a_remove_then_a_late_insert_does_not_bring_a_record_back(world: MemoryWorld) -> None:
    _create(world, FACTS[2])
    insert = world.read_stream()
    world.api("DELETE", LTM, query={"memory_ids": "cat"})
    remove = world.read_stream()

    world.index(remove)
    world.index(insert)

    assert world.index_ids() == set()


def test_a_poison_record_fails_alone(world: MemoryWorld) -> None:
    _create(world, FACTS[0], FACTS[1])
    batch = world.read_stream()
    poison = copy.deepcopy(batch[0])
    del poison["dynamodb"]["NewImage"]["text"]
    poison["dynamodb"]["SequenceNumber"] = "1" + poison["dynamodb"]["SequenceNumber"]
    poisoned_keys = dict(poison["dynamodb"]["Keys"])
    poison["dynamodb"]["Keys"] = poisoned_keys

    response = world.index([poison, batch[1]])

    assert response == {
        "batchItemFailures": [{"itemIdentifier": poison["dynamodb"]["SequenceNumber"]}]
    }
    assert batch[1]["dynamodb"]["NewImage"]["record_id"]["S"] in world.index_ids()


def test_a_ttl_remove_deletes_the_vector(world: MemoryWorld) -> None:
    world.api(
        "POST",
        "/v1/working-memory/chat-1/messages",
        body={"messages": [{"id": "m1", "role": "user", "content": "I moved to Lisbon"}]},
    )
    world.settle()
    assert "m1" in world.index_ids()
    insert = next(r for r in world.last_batch if r["dynamodb"]["Keys"]["SK"]["S"] == "MSG#m1")

    ttl_remove = copy.deepcopy(insert)
    ttl_remove["eventName"] = "REMOVE"
    ttl_remove["dynamodb"]["OldImage"] = ttl_remove["dynamodb"].pop("NewImage")
    ttl_remove["dynamodb"]["SequenceNumber"] = "9" + insert["dynamodb"]["SequenceNumber"]
    ttl_remove["dynamodb"]["ApproximateCreationDateTime"] += 3600
    ttl_remove["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

    assert world.index([ttl_remove]) == {"batchItemFailures": []}
    assert "m1" not in world.index_ids()


def test_a_record_removed_by_its_ttl_leaves_no_index_state(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a record indexed (its index state beside it), then removed by the table's TTL
    world.api("POST", "/v1/long-term-memory/", body={"memories": [{"id": "r1", "text": "tea"}]})
    world.settle()
    insert = next(r for r in world.last_batch if r["dynamodb"]["Keys"]["SK"]["S"] == "RECORD")
    table = boto3.client("dynamodb", region_name="us-east-1")
    keys = insert["dynamodb"]["Keys"]
    table.delete_item(TableName=dynamodb_table, Key=keys)  # what the TTL process does
    ttl_remove = copy.deepcopy(insert)
    ttl_remove["eventName"] = "REMOVE"
    ttl_remove["dynamodb"]["OldImage"] = ttl_remove["dynamodb"].pop("NewImage")
    ttl_remove["dynamodb"]["SequenceNumber"] = "9" + insert["dynamodb"]["SequenceNumber"]
    ttl_remove["userIdentity"] = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}

    # When the indexer reads the removal
    assert world.index([ttl_remove]) == {"batchItemFailures": []}

    # Then the vector and the index state are gone with the record
    assert "r1" not in world.index_ids()
    state = table.get_item(
        TableName=dynamodb_table, Key={**keys, "SK": {"S": "INDEX"}}, ConsistentRead=True
    )
    assert "Item" not in state


def test_an_expiry_refresh_embeds_nothing(world: MemoryWorld) -> None:
    world.api(
        "POST",
        "/v1/working-memory/chat-1/messages",
        body={"messages": [{"id": "m1", "role": "user", "content": "hello"}]},
    )
    world.settle()
    insert = world.last_batch[0]
    refresh = copy.deepcopy(insert)
    refresh["eventName"] = "MODIFY"
    refresh["dynamodb"]["OldImage"] = copy.deepcopy(insert["dynamodb"]["NewImage"])
    refresh["dynamodb"]["NewImage"]["expires_at"] = {"N": "4102444800"}

    calls = world.embedded_texts
    world.index([refresh])

    assert world.embedded_texts == calls


# -- messages and pending memories ------------------------------------------------------------


def test_session_messages_are_searchable_as_message_records(world: MemoryWorld) -> None:
    messages = [
        {"id": f"m{i}", "role": "user" if i % 2 == 0 else "assistant", "content": text}
        for i, text in enumerate(
            [
                "Let's plan the trip",
                "Sure, where to?",
                "My passport number ends in 4471",
                "Noted, I will keep it safe",
                "Thanks, see you tomorrow",
            ]
        )
    ]
    world.api(
        "POST", "/v1/working-memory/chat-1/messages", body={"messages": messages, "user_id": "ada"}
    )
    world.settle()

    body = _search(
        world,
        text="passport number",
        memory_type={"eq": "message"},
        session_id={"eq": "chat-1"},
        message_range=1,
        limit=1,
    )

    hit = body["memories"][0]
    assert hit["id"] == "m2"
    assert hit["memory_type"] == "message"
    assert hit["session_id"] == "chat-1"
    assert hit["user_id"] == "ada"
    assert hit["role"] == "user"
    assert [m["id"] for m in hit["surrounding_messages"]] == ["m1", "m3"]


def test_deleting_a_session_removes_its_message_vectors(world: MemoryWorld) -> None:
    world.api(
        "POST",
        "/v1/working-memory/chat-1/messages",
        body={"messages": [{"id": "m1", "role": "user", "content": "my locker is 12"}]},
    )
    world.settle()

    world.api("DELETE", "/v1/working-memory/chat-1")
    world.settle()

    assert world.index_ids() == set()
    assert _search(world, text="locker", search_mode="keyword")["memories"] == []


def test_pending_memories_are_promoted_and_marked_persisted(world: MemoryWorld) -> None:
    world.api(
        "PUT",
        "/v1/working-memory/chat-1",
        body={
            "user_id": "ada",
            "messages": [],
            "memories": [{"id": "pm1", "text": "Ada is allergic to peanuts", "topics": ["health"]}],
        },
    )
    world.settle()  # the pending memory becomes a record
    world.settle()  # the record is indexed

    record = world.api("GET", f"{LTM}/pm1").body
    session = world.api("GET", "/v1/working-memory/chat-1").body

    assert record["text"] == "Ada is allergic to peanuts"
    assert record["user_id"] == "ada"
    assert record["session_id"] == "chat-1"
    assert record["indexing"] == "indexed"
    assert session["memories"][0]["persisted_at"] is not None
    assert _ids(_search(world, text="peanuts", search_mode="keyword")) == ["pm1"]


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "x", "topics": {"like": ["a"]}}, "topics.like"),
        ({"text": "x", "limit": 0}, "limit"),
        ({"text": "x", "created_at": {"gte": "yesterday"}}, "created_at.gte"),
        ({"text": "x", "user_id": {"any": "ada"}}, "user_id.any"),
        ({"text": "x", "search_mode": "fuzzy"}, "search_mode"),
    ],
)
def test_a_bad_search_is_a_422_naming_the_field(
    world: MemoryWorld, body: dict[str, Any], field: str
) -> None:
    response = world.api("POST", f"{LTM}/search", body=body)

    assert response.status == 422, response.body
    assert any(e["field"].startswith(field) for e in response.body["errors"]), response.body


def test_bad_records_are_refused_and_nothing_is_written(world: MemoryWorld) -> None:
    response = world.api(
        "POST", f"{LTM}/", body={"memories": [FACTS[0], {"id": "blank", "text": "  "}]}
    )

    assert response.status == 422
    assert world.api("GET", f"{LTM}/tea").status == 404


def test_an_empty_edit_is_a_400_and_a_missing_record_a_404(world: MemoryWorld) -> None:
    _create(world, FACTS[0])

    assert world.api("PATCH", f"{LTM}/tea", body={}).status == 400
    assert world.api("PATCH", f"{LTM}/nope", body={"text": "x"}).status == 404
    assert world.api("GET", f"{LTM}/nope").status == 404


def test_a_session_can_keep_its_messages_out_of_long_term_memory(world: MemoryWorld) -> None:
    world.api(
        "PUT",
        "/v1/working-memory/private",
        body={
            "index_messages": False,
            "messages": [{"id": "p1", "role": "user", "content": "my pin is 2468"}],
        },
    )
    world.settle()
    skipped = world.index_ids()

    patched = world.api("PATCH", "/v1/working-memory/private", body={"index_messages": True})
    world.api(
        "POST",
        "/v1/working-memory/private/messages",
        body={"messages": [{"id": "p2", "role": "user", "content": "my bike is blue"}]},
    )
    world.settle()

    assert skipped == set()
    assert patched.body["index_messages"] is True
    assert world.index_ids() == {"p2"}  # written after the switch; p1 stays out
