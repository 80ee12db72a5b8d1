"""Long-term memory at its edges, on moto with the real indexer: replays and races that must
not undo a write, bad input that must not reach the table, and answers that must stay inside
Lambda's limits (found in review; each test failed before its fix)."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

import pytest

from memkit.errors import NotFound, VersionConflict
from memkit.models.budget import LAMBDA_RESPONSE_LIMIT
from tests.conftest import LambdaContextStub
from tests.events import http_event
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration
LTM = "/v1/long-term-memory"
# Text near the longest a memory may be that costs the most in a response: 2-byte
# characters, and quotes (2 bytes in the body, 4 once Lambda escapes the body again).
EXPENSIVE = 'é"' * 49_990


def _put_pending(world: MemoryWorld, *memories: dict[str, Any]) -> Any:
    return world.api(
        "PUT",
        "/v1/working-memory/chat-1",
        body={"user_id": "ada", "messages": [], "memories": list(memories)},
    )


def _search(world: MemoryWorld, **body: Any) -> dict[str, Any]:
    response = world.api("POST", f"{LTM}/search", body=body)
    assert response.status == 200, response.body
    return dict(response.body)


# -- promotion ---------------------------------------------------------------------------------


def test_promotion_leaves_the_stream_quiet(world: MemoryWorld) -> None:
    _put_pending(world, {"id": "pm1", "text": "Ada is allergic to peanuts"})

    batches = []
    for _ in range(4):
        world.settle()
        batches.append(len(world.last_batch))

    # the memory, its record, the persisted_at mark; then nothing
    assert batches[-1] == 0, batches


def test_a_replayed_promotion_undoes_no_edit_or_delete(world: MemoryWorld) -> None:
    _put_pending(
        world,
        {"id": "pm1", "text": "Ada is allergic to peanuts"},
        {"id": "pm2", "text": "Ada lives in Oslo"},
    )
    first = world.read_stream()
    world.index(first)
    world.settle()
    world.api("PATCH", f"{LTM}/pm1", body={"text": "Ada is no longer allergic to peanuts"})
    world.api("DELETE", LTM, query={"memory_ids": "pm2"})
    world.settle()

    world.index(first)  # Lambda retries the promotion batch
    world.settle()

    assert world.api("GET", f"{LTM}/pm1").body["text"].startswith("Ada is no longer")
    assert world.api("GET", f"{LTM}/pm2").status == 404


@pytest.mark.parametrize(
    ("extra", "field"),
    [
        ({"topics": [""]}, "memories.0.topics"),
        ({"topics": ["t" * 300]}, "memories.0.topics"),
        ({"created_at": "2099-01-01T00:00:00Z"}, "memories.0.created_at"),
        ({"extracted_from": [str(i) for i in range(101)]}, "memories.0.extracted_from"),
    ],
)
def test_a_pending_memory_that_cannot_become_a_record_is_refused(
    world: MemoryWorld, extra: dict[str, Any], field: str
) -> None:
    response = _put_pending(world, {"id": "pm", "text": "Ada likes tea", **extra})

    assert response.status == 422, response.body
    assert any(e["field"].startswith(field) for e in response.body["errors"]), response.body
    assert world.settle() == []


# -- the indexer -------------------------------------------------------------------------------


def test_an_insert_and_a_refresh_in_one_batch_index_the_message(world: MemoryWorld) -> None:
    world.api(
        "POST",
        "/v1/working-memory/chat-1/messages",
        body={"messages": [{"id": "m1", "role": "user", "content": "I moved to Lisbon"}]},
    )
    batch = world.read_stream()
    insert = next(r for r in batch if r["dynamodb"]["Keys"]["SK"]["S"] == "MSG#m1")
    refresh = copy.deepcopy(insert)
    refresh["eventName"] = "MODIFY"
    refresh["dynamodb"]["OldImage"] = copy.deepcopy(insert["dynamodb"]["NewImage"])
    refresh["dynamodb"]["NewImage"]["expires_at"] = {"N": "4102444800"}
    refresh["dynamodb"]["SequenceNumber"] = str(int(insert["dynamodb"]["SequenceNumber"]) + 1)

    assert world.index([*batch, refresh]) == {"batchItemFailures": []}
    assert "m1" in world.index_ids()


def test_a_malformed_remove_fails_alone(world: MemoryWorld) -> None:
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "a", "text": "one"}]})
    batch = world.read_stream()
    broken = copy.deepcopy(batch[0])
    broken["eventName"] = "REMOVE"
    broken["dynamodb"]["OldImage"] = broken["dynamodb"].pop("NewImage")
    broken["dynamodb"]["ApproximateCreationDateTime"] = "not a time"
    broken["dynamodb"]["SequenceNumber"] = "9" + batch[0]["dynamodb"]["SequenceNumber"]

    response = world.index([*batch, broken])

    assert response == {
        "batchItemFailures": [{"itemIdentifier": broken["dynamodb"]["SequenceNumber"]}]
    }
    assert world.index_ids() == {"a"}


def test_a_batch_where_every_record_fails_is_reported_not_raised(world: MemoryWorld) -> None:
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "a", "text": "one"}]})
    (record,) = world.read_stream()
    del record["dynamodb"]["NewImage"]["text"]

    response = world.index([record])

    assert response == {
        "batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]
    }


# -- edits racing other writes ------------------------------------------------------------------


def test_an_edit_from_a_stale_read_is_a_conflict(world: MemoryWorld) -> None:
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "r", "text": "A"}]})
    store = world.store.records
    stale = store.get_record("default", "r")
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "r", "text": "B"}]})

    with pytest.raises(VersionConflict):
        store.replace_record("default", replace(stale, pinned=True))
    assert store.get_record("default", "r").text == "B"


def test_an_edit_racing_a_delete_does_not_bring_the_record_back(world: MemoryWorld) -> None:
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "r", "text": "A"}]})
    store = world.store.records
    read = store.get_record("default", "r")
    world.api("DELETE", LTM, query={"memory_ids": "r"})

    with pytest.raises(NotFound):
        store.replace_record("default", replace(read, pinned=True))
    assert world.api("GET", f"{LTM}/r").status == 404


# -- bad input ---------------------------------------------------------------------------------


def test_a_null_text_in_an_edit_is_a_422(world: MemoryWorld) -> None:
    world.api("POST", f"{LTM}/", body={"memories": [{"id": "tea", "text": "green tea"}]})

    response = world.api("PATCH", f"{LTM}/tea", body={"text": None})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "text"


def test_an_oversized_record_is_a_413_and_nothing_is_written(world: MemoryWorld) -> None:
    records = [{"id": f"r{i}", "text": f"note {i}"} for i in range(29)]
    records.append({"id": "big", "text": "x", "metadata": {"blob": "y" * 420_000}})

    response = world.api("POST", f"{LTM}/", body={"memories": records})

    assert response.status == 413
    assert response.body["errors"][0]["field"] == "memories.29"
    assert world.api("GET", f"{LTM}/r0").status == 404


def test_filters_with_too_many_values_are_a_422(world: MemoryWorld) -> None:
    body = {"text": "x", "topics": {"all": [f"t{i}" for i in range(101)]}}

    response = world.api("POST", f"{LTM}/search", body=body)

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "topics.all"


def test_a_recency_re_rank_pages_only_through_its_window(world: MemoryWorld) -> None:
    body = {"text": "x", "recency_boost": True, "offset": 950, "limit": 100}

    response = world.api("POST", f"{LTM}/search", body=body)

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "offset"


# -- answers -----------------------------------------------------------------------------------


def test_a_page_stops_before_the_response_outgrows_lambda(world: MemoryWorld) -> None:
    # Given 26 memories of 300 KB each in Lambda's count: 7.8 MB together
    for batch in range(2):
        records = [{"id": f"b{batch}-{i}", "text": f"{EXPENSIVE} {batch}-{i}"} for i in range(13)]
        assert world.api("POST", f"{LTM}/", body={"memories": records}).status == 200
    world.settle()

    # When all of them are asked for
    raw = world.api_handler(
        http_event("POST", f"{LTM}/search", body={"text": "", "limit": 100}), LambdaContextStub()
    )
    body = json.loads(raw["body"])

    # Then the page holds what fits, and its offset gives the rest
    assert raw["statusCode"] == 200, body
    assert len(json.dumps(raw, ensure_ascii=False).encode()) < LAMBDA_RESPONSE_LIMIT
    assert 0 < len(body["memories"]) < 26
    assert body["next_offset"] == len(body["memories"])


def test_a_hit_the_index_still_holds_does_not_end_the_pages(world: MemoryWorld) -> None:
    records = [{"id": f"r{i:02d}", "text": f"note {i} about gardening"} for i in range(11)]
    records.append({"id": "gone", "text": "gardening gardening gardening"})
    world.api("POST", f"{LTM}/", body={"memories": records, "deduplicate": False})
    world.settle()
    world.api("DELETE", LTM, query={"memory_ids": "gone"})  # the index lags the delete

    first = _search(world, text="gardening", search_mode="keyword", limit=10)
    second = _search(world, text="gardening", search_mode="keyword", offset=10, limit=10)

    assert first["next_offset"] == 10
    assert "gone" not in [m["id"] for m in first["memories"] + second["memories"]]
    assert len(first["memories"]) + len(second["memories"]) == 11


def test_the_distance_threshold_is_the_vector_distance_in_every_vector_mode(
    world: MemoryWorld,
) -> None:
    world.api(
        "POST",
        f"{LTM}/",
        body={
            "memories": [
                {"id": "tea", "text": "Ada drinks green tea every morning"},
                {"id": "car", "text": "Bob repaired the car engine"},
            ]
        },
    )
    world.settle()
    query = "a cup of green tea at breakfast"
    semantic = _search(world, text=query, search_mode="semantic", limit=5)
    tea = next(m for m in semantic["memories"] if m["id"] == "tea")
    threshold = tea["dist"] + 0.01

    hybrid = _search(world, text=query, distance_threshold=threshold)
    strict = _search(world, text=query, distance_threshold=tea["dist"] - 0.01)

    assert [m["id"] for m in hybrid["memories"]] == ["tea"]
    assert strict["memories"] == []


# -- a provider that refuses one text ----------------------------------------------------------


def test_a_text_bedrock_refuses_fails_alone_and_shows_failed(world: MemoryWorld) -> None:
    import io

    import boto3
    from botocore.response import StreamingBody
    from botocore.stub import ANY, Stubber

    from memkit.embeddings.bedrock import TitanEmbedder
    from memkit.handlers.indexer import make_lambda_handler
    from memkit.jobs.indexing import Indexer

    world.api(
        "POST",
        f"{LTM}/",
        body={
            "memories": [
                {"id": "ok", "text": "Ada drinks green tea"},
                {"id": "refused", "text": "x" * 10},
            ]
        },
    )
    batch = world.read_stream()
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    titan = TitanEmbedder(client, dimensions=256, workers=1, sleep=lambda _: None)
    raw = json.dumps({"embedding": [0.0625] * 256, "inputTextTokenCount": 4}).encode()
    store = world.store
    indexer = Indexer(store.records, store.sessions, world.vector_index, titan)
    handler = make_lambda_handler(lambda: indexer)

    with Stubber(client) as stub:
        stub.add_response(
            "invoke_model",
            {"body": StreamingBody(io.BytesIO(raw), len(raw)), "contentType": "application/json"},
            {"modelId": ANY, "body": ANY, "contentType": ANY, "accept": ANY},
        )
        stub.add_client_error("invoke_model", "ValidationException", "Malformed input request", 400)
        response = handler({"Records": batch}, LambdaContextStub())

    refused = next(r for r in batch if r["dynamodb"]["NewImage"]["record_id"]["S"] == "refused")
    assert response == {
        "batchItemFailures": [{"itemIdentifier": refused["dynamodb"]["SequenceNumber"]}]
    }
    assert world.index_ids() == {"ok"}
    assert world.api("GET", f"{LTM}/ok").body["indexing"] == "indexed"
    assert world.api("GET", f"{LTM}/refused").body["indexing"] == "failed"
