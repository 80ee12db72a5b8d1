"""A Serverless collection that scaled to zero, through the real handlers on moto and the real
adapter on the loopback OpenSearch, whose capacity can be scaled to zero: every request then
waits until it wakes, as the first requests to a NEXTGEN collection wait 10 to 30 s after 10
idle minutes. A search answers once the collection wakes within the request's wait, and a
503 with Retry-After (a tool error to retry, over MCP) when it does not, never a hang; the
stream indexer's records are handed back to Lambda to retry until it wakes, never lost.

However long the adapter would wait, no request outlasts the invocation's deadline (the
remaining time the handler's context gives, less a margin): a DELETE answers while the
collection still sleeps, a route that needs the collection answers 503 with Retry-After,
and a cleanup run stops with time to save its cursors."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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
# Longer than anything a test waits: the adapter's requests wait this long, so only the
# invocation's deadline (or the test's guard, after LONG) ends a request to a sleeping
# collection.
PATIENT = 2 * LONG


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


@contextmanager
def _guarded(server: LoopbackOpenSearch) -> Iterator[None]:
    """The collection sleeps through the block, unless a request still waits for it after
    LONG: then it wakes, so a request that would hang ends (and the test fails on what it
    saw) instead of hanging the test."""
    done = threading.Event()

    def guard() -> None:
        if not done.wait(timeout=LONG):
            server.capacity.wake()

    thread = threading.Thread(target=guard, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def _answered_asleep(server: LoopbackOpenSearch, request: Any) -> tuple[Any, bool]:
    """What `request()` returned while the collection slept, and whether it still slept then
    (after the request had asked it)."""
    with _guarded(server):
        answer = request()
        asleep = server.capacity.asleep
    assert server.capacity.waiting.is_set(), "the request never reached the collection"
    return answer, asleep


def _refused_in_time(response: ApiResponse) -> None:
    assert response.status == 503, response.body
    assert response.body["code"] == "unavailable"
    assert response.headers["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS)


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


def _mcp_search(table: str, server: LoopbackOpenSearch, wait: float) -> Callable[[], Any]:
    """Ada's search through the MCP function, over the API's services with `wait` seconds a
    request to the collection."""
    settings = ApiSettings(
        table_name=table, region="us-east-1", auth_mode="jwt", tenant_claim="custom:tenant"
    )
    ada = jwt_authorizer("acme", "ada", READ, WRITE)
    world = _world(table, server, wait, settings)
    handler = make_lambda_handler(
        lambda: world.services, lambda: verifying_settings(scope_prefix="memkit/")
    )
    return lambda: call_mcp(handler, tool_call("search_long_term_memory", {"text": QUERY}), ada)


def test_an_mcp_search_of_a_sleeping_collection_is_a_tool_error_to_retry(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given the collection scaled to zero, and the MCP server's requests to it waiting less
    # than it takes to wake
    search = _mcp_search(dynamodb_table, collection, SHORT)
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


# -- the invocation's deadline -----------------------------------------------------------------


def test_a_session_delete_answers_while_the_collection_sleeps_and_the_stream_removes_its_vectors(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given Ada's message indexed, then the collection scaled to zero, and an API whose
    # requests to it would wait longer than the function has
    world = _asleep_remembering(dynamodb_table, collection, PATIENT)

    # When Ada deletes the session before the collection wakes
    deleted, asleep = _answered_asleep(
        collection, lambda: world.api("DELETE", "/v1/working-memory/chat")
    )

    # Then the DELETE answered, the session gone, while the collection still slept
    assert deleted.status == 200, deleted.body
    assert asleep
    assert world.api("GET", "/v1/working-memory/chat").status == 404

    # And once it wakes, the stream's removals take the message's vector out
    collection.capacity.wake()
    assert all(response["batchItemFailures"] == [] for response in world.settle())
    assert world.indexed() == []


def test_a_user_delete_that_meets_a_sleeping_collection_answers_503_in_time_and_a_retry_ends_it(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given Ada's message indexed, the collection scaled to zero, and an API with no work
    # queue (a user's deletion runs until done) whose requests would wait past its timeout
    world = _asleep_remembering(dynamodb_table, collection, PATIENT)

    # When Ada is deleted before the collection wakes, and again once it is awake
    refused, asleep = _answered_asleep(collection, lambda: world.api("DELETE", "/v1/users/ada"))
    collection.capacity.wake()
    retried = world.api("DELETE", "/v1/users/ada")

    # Then the first is the function's own 503 with Retry-After, sent while the collection
    # still slept, and the retry deletes the rest: nothing of Ada is left in the index
    _refused_in_time(refused)
    assert asleep
    assert retried.status == 200, retried.body
    assert world.indexed() == []


# A deletion's budget (MEMKIT_USER_DELETION_BUDGET_SECONDS) within the invocation's deadline
# (the test's context: 10 s, less a margin), and the most the setting allows, past it.
@pytest.mark.parametrize("budget", [3, 25], ids=["within_the_invocation", "past_its_deadline"])
def test_a_user_delete_with_a_work_queue_leaves_a_sleeping_collection_to_its_job(
    dynamodb_table: str, collection: LoopbackOpenSearch, budget: int
) -> None:
    import boto3

    sqs = boto3.client("sqs", region_name="us-east-1")
    queue = sqs.create_queue(QueueName=f"cold-work-{budget}")["QueueUrl"]
    indexing = _world(dynamodb_table, collection, LONG)
    _append(indexing)
    indexing.settle()
    collection.capacity.scale_to_zero()
    # Given the collection asleep, and an API that hands what a deletion's budget does not
    # reach to a job, its requests to the collection waiting longer than that budget; a
    # budget past the invocation's deadline ends at that deadline
    settings = ApiSettings(
        table_name=dynamodb_table,
        region="us-east-1",
        work_queue_url=queue,
        user_deletion_budget_seconds=budget,
    )
    world = _world(dynamodb_table, collection, PATIENT, settings)

    # When Ada is deleted before the collection wakes
    running, asleep = _answered_asleep(collection, lambda: world.api("DELETE", "/v1/users/ada"))

    # Then the request answered 202 with a job while the collection still slept, and the job
    # is queued for the worker
    assert running.status == 202, running.body
    assert asleep
    messages = sqs.receive_message(QueueUrl=queue).get("Messages", [])
    assert [message["Body"] for message in messages if running.body["job_id"] in message["Body"]]


def test_a_prompt_whose_searches_meet_a_sleeping_collection_answers_503_in_time(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given Ada's message indexed, then the collection scaled to zero, and an API whose
    # requests to it would wait longer than the function has
    world = _asleep_remembering(dynamodb_table, collection, PATIENT)
    body = {"query": QUERY, "session": {"session_id": "chat"}, "long_term_search": True}

    # When a prompt, whose session read and searches run in a thread pool, is hydrated
    # before the collection wakes
    refused, asleep = _answered_asleep(
        collection, lambda: world.api("POST", "/v1/memory/prompt", body=body)
    )

    # Then it is the function's own 503 with Retry-After, sent while the collection slept
    _refused_in_time(refused)
    assert asleep


def test_an_mcp_search_outwaiting_the_invocation_is_a_tool_error_sent_in_time(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    # Given the collection scaled to zero, and the MCP server's requests to it waiting
    # longer than the function has
    search = _mcp_search(dynamodb_table, collection, PATIENT)
    collection.capacity.scale_to_zero()

    # When the model searches before it wakes
    refused, asleep = _answered_asleep(collection, search)

    # Then the answer is a tool error that says when to retry, sent while it still slept
    assert refused.status == 200
    assert f"retry in {UNAVAILABLE_RETRY_AFTER_SECONDS}" in refused.tool_error
    assert asleep


def test_a_cleanup_run_stops_its_orphan_sweep_in_time_and_the_next_run_resumes_it(
    dynamodb_table: str, collection: LoopbackOpenSearch
) -> None:
    from memkit.config import CleanupSettings
    from memkit.handlers.wiring import cleanup_phases
    from memkit.jobs.cleanup import CleanupRun, TableCursors, TimeBudget
    from memkit.store.dynamodb import DynamoStore

    # Given Ada's message indexed, then the collection scaled to zero, and the cleanup run
    # as wired, its requests to the collection waiting longer than the invocation has
    _asleep_remembering(dynamodb_table, collection, LONG)
    settings = CleanupSettings(
        table_name=dynamodb_table,
        region="us-east-1",
        opensearch_endpoint=collection.url,
        opensearch_auth="none",
        opensearch_flavour="serverless",
        opensearch_timeout_seconds=PATIENT,
    )
    store = DynamoStore(settings)
    run = CleanupRun(cleanup_phases(settings, store), TableCursors(store.expiry), TimeBudget())

    # When a run with 12 s left (its requests end 10 s before the timeout) meets it asleep,
    # and the next run finds it awake
    first, asleep = _answered_asleep(collection, lambda: run.run(remaining_ms=12_000))
    collection.capacity.wake()
    second = run.run(remaining_ms=60_000)

    # Then the first stopped the sweep while the collection still slept, failing nothing,
    # and the next one swept the index
    summary = first.summary()
    assert asleep
    assert first.failed == []
    assert summary["phases"]["orphans"]["status"] == "stopped"
    assert second.summary()["phases"]["orphans"]["counts"]["OrphanVectorsExamined"] == 1
