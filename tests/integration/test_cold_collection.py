"""A Serverless collection that scaled to zero, through the real handlers on moto and the real
adapter on the loopback OpenSearch, whose capacity can be scaled to zero: every request then
waits until it wakes, as the first requests to a NEXTGEN collection wait 10 to 30 s after 10
idle minutes. A search answers once the collection wakes within the request's wait, and a
503 with Retry-After (a tool error to retry, over MCP) when it does not, never a hang; the
stream indexer's records are handed back to Lambda to retry until it wakes, never lost."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from memkit.config import ApiSettings, IndexSettings
from memkit.errors import UNAVAILABLE_RETRY_AFTER_SECONDS
from memkit.handlers.mcp import make_lambda_handler
from memkit.identity import READ, WRITE
from memkit.vectors.opensearch import opensearch_index
from memkit_dev.local.opensearch import LoopbackOpenSearch
from tests.conftest import ApiResponse
from tests.events import jwt_authorizer
from tests.integration.memory_world import CountingEmbedder, MemoryWorld, build_world
from tests.mcp_requests import call_mcp, tool_call
from tests.tokens import verifying_settings

pytestmark = pytest.mark.integration

MESSAGE = "I drink green tea every morning"
QUERY = "what does Ada drink in the morning?"
# Seconds a request may wait. SHORT: a collection asleep until the test wakes it outlasts
# it (the client gives up, as the API function does after 20 s), an awake loopback never
# does. LONG: nothing outlasts it (the test wakes the collection as soon as a request waits
# for it: it bounds the test, it is not waited out).
SHORT = 2.0
LONG = 120.0


@pytest.fixture
def collection() -> Iterator[LoopbackOpenSearch]:
    with LoopbackOpenSearch(CountingEmbedder().dimensions, flavour="serverless") as server:
        yield server


def _world(
    table: str, server: LoopbackOpenSearch, wait: float, settings: ApiSettings | None = None
) -> MemoryWorld:
    """The API and the indexer over `table`, their index the serverless adapter on `server`
    with `wait` seconds a request."""
    index_settings = IndexSettings(
        opensearch_endpoint=server.url,
        opensearch_auth="none",
        opensearch_flavour="serverless",
        opensearch_timeout_seconds=wait,
    )
    embedder = CountingEmbedder()
    index = opensearch_index(index_settings, "us-east-1", embedder.dimensions)
    return build_world(table, settings, index=index, embedder=embedder)


def _append(world: MemoryWorld) -> None:
    message = {"id": "m1", "role": "user", "content": MESSAGE}
    body = {"messages": [message], "user_id": "ada"}
    appended = world.api("POST", "/v1/working-memory/chat/messages", body=body)
    assert appended.status == 201, appended.body


def _asleep_remembering(table: str, server: LoopbackOpenSearch, wait: float) -> MemoryWorld:
    """Ada's message appended and indexed while the collection was awake, then the collection
    scaled to zero; the API over it, with `wait` seconds a request."""
    indexing = _world(table, server, LONG)
    _append(indexing)
    assert all(response["batchItemFailures"] == [] for response in indexing.settle())
    server.capacity.scale_to_zero()
    return _world(table, server, wait)


def _search(world: MemoryWorld) -> ApiResponse:
    return world.api("POST", "/v1/long-term-memory/search", body={"text": QUERY, "user_id": "ada"})


def _found(response: ApiResponse) -> list[str]:
    assert response.status == 200, response.body
    return [memory["text"] for memory in response.body["memories"]]


def _wake_when_a_request_waits(server: LoopbackOpenSearch) -> threading.Thread:
    def wake() -> None:
        assert server.capacity.waiting.wait(timeout=LONG)
        server.capacity.wake()

    thread = threading.Thread(target=wake, daemon=True)
    thread.start()
    return thread


def test_a_search_waits_for_a_collection_that_wakes_within_its_wait(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given Ada's message indexed, then the collection scaled to zero
    world = _asleep_remembering(dynamodb_table, collection, LONG)

    # When a search arrives and the collection wakes while the search waits for it
    waker = _wake_when_a_request_waits(collection)
    response = _search(world)
    waker.join()

    # Then the search answers as if it had never slept
    assert _found(response) == [MESSAGE]


def test_a_search_that_outwaits_its_wait_is_a_503_to_retry_and_the_retry_finds(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given Ada's message indexed, then the collection scaled to zero, and an API whose
    # requests to it wait less than it takes to wake
    world = _asleep_remembering(dynamodb_table, collection, SHORT)

    # When a search arrives before it wakes, and again once it is awake
    refused = _search(world)
    collection.capacity.wake()
    retried = _search(world)

    # Then the first is a 503 that says when to retry, and the retry finds the message
    assert refused.status == 503, refused.body
    assert refused.body["code"] == "unavailable"
    assert refused.headers["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    assert _found(retried) == [MESSAGE]


def test_stream_records_that_meet_a_sleeping_collection_are_retried_not_lost(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given an indexer whose requests to the collection wait less than it takes to wake
    world = _world(dynamodb_table, collection, SHORT)
    collection.capacity.scale_to_zero()

    # When Ada's message reaches it while the collection sleeps, and Lambda delivers the
    # records it reported again once the collection is awake
    _append(world)
    [first] = world.settle()
    collection.capacity.wake()
    failed = {failure["itemIdentifier"] for failure in first["batchItemFailures"]}
    again = [r for r in world.last_batch if r["dynamodb"]["SequenceNumber"] in failed]
    retried = world.index(again)

    # Then every record of the batch was handed back, the retry indexed them, and the
    # message is found once
    assert failed == {record["dynamodb"]["SequenceNumber"] for record in world.last_batch}
    assert retried["batchItemFailures"] == []
    assert _found(_search(world)) == [MESSAGE]


def test_an_mcp_search_of_a_sleeping_collection_is_a_tool_error_to_retry(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given the collection scaled to zero, and the MCP server's requests to it waiting less
    # than it takes to wake
    settings = ApiSettings(
        table_name=dynamodb_table, region="us-east-1", auth_mode="jwt", tenant_claim="custom:tenant"
    )
    ada = jwt_authorizer("acme", "ada", READ, WRITE)
    world = _world(dynamodb_table, collection, SHORT, settings)
    handler = make_lambda_handler(
        lambda: world.services, lambda: verifying_settings(scope_prefix="memkit/")
    )

    def search() -> Any:
        return call_mcp(handler, tool_call("search_long_term_memory", {"text": QUERY}), ada)

    collection.capacity.scale_to_zero()

    # When the model searches before it wakes, and again once it is awake
    refused = search()
    collection.capacity.wake()
    retried = search()

    # Then the first is a tool error that says when to retry (not an HTTP 5xx), and the
    # retry is a search's answer
    assert refused.status == 200
    assert f"retry in {UNAVAILABLE_RETRY_AFTER_SECONDS}" in refused.tool_error
    assert retried.status == 200
    assert retried.result.get("isError") is False, retried.body
