"""Throttled or unavailable backing services through the real API handler on moto: Bedrock's
embedding model, DynamoDB and OpenSearch answer after their SDKs' retries, and the client gets
a 429 (back off) or a 503 (retry later) with Retry-After and the usual error body, never a
500 and never the SDK's message (docs/api.md, "Errors")."""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from botocore.exceptions import ClientError

from memkit.config import IndexSettings
from memkit.embeddings.bedrock import TitanEmbedder
from memkit.errors import THROTTLED_RETRY_AFTER_SECONDS, UNAVAILABLE_RETRY_AFTER_SECONDS
from memkit.vectors.opensearch import opensearch_index
from tests.conftest import ApiResponse
from tests.integration.memory_world import CountingEmbedder, MemoryWorld, build_world

pytestmark = pytest.mark.integration

# What AWS says in its error messages: it must reach neither a client nor a log line.
MARKER = "MARKER-7f3a: the service said this"
QUERY = "what does Ada drink in the morning?"
SESSION = {"session_id": "chat", "user_id": "ada"}
# The three ways a request embeds a query: a search, a prompt, a model's search_memory call.
EMBEDDING_ROUTES = {
    "search": ("/v1/long-term-memory/search", {"text": QUERY, "user_id": "ada"}),
    "prompt": ("/v1/memory/prompt", {"query": QUERY, "session": SESSION}),
    "search_memory": (
        "/v1/tools/call",
        {"name": "search_memory", "arguments": {"query": QUERY}, **SESSION},
    ),
}
THROTTLED = str(THROTTLED_RETRY_AFTER_SECONDS)
UNAVAILABLE = str(UNAVAILABLE_RETRY_AFTER_SECONDS)


class RefusingBedrock:
    """bedrock-runtime whose InvokeModel always fails with `code` (HTTP `status`), as
    botocore raises it once its own retries are spent."""

    def __init__(self, code: str, status: int) -> None:
        self.code, self.status, self.calls = code, status, 0

    def invoke_model(self, **_: Any) -> Any:
        self.calls += 1
        error = {"Code": self.code, "Message": MARKER}
        answer = {"Error": error, "ResponseMetadata": {"HTTPStatusCode": self.status}}
        raise ClientError(answer, "InvokeModel")


def _with_session(world: MemoryWorld) -> MemoryWorld:
    message = {"id": "m1", "role": "user", "content": "I drink green tea every morning"}
    body = {"messages": [message], "user_id": "ada"}
    appended = world.api("POST", "/v1/working-memory/chat/messages", body=body)
    assert appended.status == 201, appended.body
    return world


def _bedrock_world(table: str, code: str, status: int) -> MemoryWorld:
    """The API on moto whose embedder is Titan on a Bedrock that refuses every call (its
    retries are the embedder's own, without the pauses)."""
    embedder = TitanEmbedder(RefusingBedrock(code, status), sleep=lambda _: None)
    return _with_session(build_world(table, embedder=embedder))


def _post(world: MemoryWorld, route: str) -> ApiResponse:
    path, body = EMBEDDING_ROUTES[route]
    return world.api("POST", path, body=body)


def _refused(response: ApiResponse, status: int, code: str, retry_after: str) -> None:
    assert response.status == status, response.body
    assert response.headers["Retry-After"] == retry_after
    assert set(response.body) == {"detail", "code", "errors"}
    assert response.body["code"] == code
    assert response.body["errors"] == []
    assert MARKER not in json.dumps(response.body)


# -- Bedrock: the embedding model ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("bedrock_code", "bedrock_status", "status", "code", "retry_after", "detail"),
    [
        (
            "ThrottlingException",
            429,
            429,
            "throttled",
            THROTTLED,
            "the embedding model is busy; retry later",
        ),
        (
            "ServiceUnavailableException",
            503,
            503,
            "unavailable",
            UNAVAILABLE,
            "the service is not available; retry later",
        ),
    ],
    ids=["throttled", "unavailable"],
)
@pytest.mark.parametrize("route", EMBEDDING_ROUTES)
def test_an_embedding_model_throttled_or_down_is_a_429_or_503_with_retry_after(
    dynamodb_table: str,
    route: str,
    bedrock_code: str,
    bedrock_status: int,
    status: int,
    code: str,
    retry_after: str,
    detail: str,
) -> None:
    # Given a Bedrock that still throttles (or is down) after the embedder's retries
    world = _bedrock_world(dynamodb_table, bedrock_code, bedrock_status)

    # When a request has a query to embed
    response = _post(world, route)

    # Then the client is told to back off (or to retry later), and when to come back
    _refused(response, status, code, retry_after)
    assert response.body["detail"] == detail


@pytest.mark.parametrize(
    ("code", "status"),
    [("AccessDeniedException", 403), ("ValidationException", 400)],
)
def test_a_model_that_refuses_the_service_is_a_503_logged_with_the_code_alone(
    dynamodb_table: str, debug_log: io.StringIO, code: str, status: int
) -> None:
    # Given a Bedrock that refuses the deployment (no model access, a wrong model id)
    world = _bedrock_world(dynamodb_table, code, status)

    # When a client searches
    response = _post(world, "search")

    # Then the service is unavailable to the client, and the operator reads Bedrock's error
    # code (at ERROR) but neither its message nor the query
    _refused(response, 503, "unavailable", UNAVAILABLE)
    lines = [json.loads(line) for line in debug_log.getvalue().splitlines()]
    refusal = next(line for line in lines if line["message"] == "embedding model refused a request")
    assert refusal["level"] == "ERROR"
    assert refusal["reasons"] == [code]
    assert MARKER not in debug_log.getvalue()
    assert QUERY not in debug_log.getvalue()


def test_a_throttle_is_tried_again_by_the_embedder_before_the_client_is_told(
    dynamodb_table: str,
) -> None:
    bedrock = RefusingBedrock("ThrottlingException", 429)
    embedder = TitanEmbedder(bedrock, max_attempts=3, sleep=lambda _: None)
    world = build_world(dynamodb_table, embedder=embedder)

    response = _post(world, "search")

    assert response.status == 429
    assert bedrock.calls == 3  # the embedder's own retries, then the 429


# -- DynamoDB --------------------------------------------------------------------------------------


Refuse = Callable[[str, int], Callable[[], None]]


@pytest.fixture
def stocked(dynamodb_table: str) -> MemoryWorld:
    """A world with a session and an indexed memory of Ada's."""
    world = _with_session(build_world(dynamodb_table))
    memory = {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"}
    created = world.api("POST", "/v1/long-term-memory/", body={"memories": [memory]})
    assert created.status == 200, created.body
    world.settle()
    return world


@pytest.fixture
def dynamodb_refuses(stocked: MemoryWorld) -> Iterator[Refuse]:
    """refuse(code, status): from then on every call the API's store makes fails with
    `code`, as botocore raises it once its retries are spent (the answer is given before the
    request is sent); returns the undo, which also runs after the test."""
    client = stocked.store.table.items.connection.client
    event, handler_id = "before-call.dynamodb.*", "test-refuses"

    def undo() -> None:
        client.meta.events.unregister(event, unique_id=handler_id)

    def refuse(code: str, status: int) -> Callable[[], None]:
        class Answer:
            status_code = status

        def answer(**_: Any) -> tuple[Any, dict[str, Any]]:
            error = {"Code": code, "Message": MARKER}
            return Answer(), {"Error": error, "ResponseMetadata": {"HTTPStatusCode": status}}

        client.meta.events.register(event, answer, unique_id=handler_id)
        return undo

    yield refuse
    undo()


DYNAMODB_ROUTES = {
    **EMBEDDING_ROUTES,
    "create": (
        "/v1/long-term-memory/",
        {"memories": [{"id": "pin", "text": "x", "user_id": "ada"}]},
    ),
    "add_memory": (
        "/v1/tools/call",
        {"name": "add_memory", "arguments": {"text": "Ada cycles to work"}, **SESSION},
    ),
    "update_working_memory": (
        "/v1/tools/call",
        {"name": "update_working_memory", "arguments": {"content": "- tea"}, **SESSION},
    ),
}


THROTTLING = ("ProvisionedThroughputExceededException", 400, 429, "throttled", THROTTLED)
FAILING = ("InternalServerError", 500, 503, "unavailable", UNAVAILABLE)
DYNAMODB_CASES = [
    *[pytest.param(route, *THROTTLING, id=f"throttled-{route}") for route in DYNAMODB_ROUTES],
    *[
        pytest.param(route, *FAILING, id=f"unavailable-{route}")
        for route in ("search", "prompt", "update_working_memory")
    ],
]


@pytest.mark.parametrize(
    ("route", "dynamodb_code", "dynamodb_status", "status", "code", "retry_after"),
    DYNAMODB_CASES,
)
def test_dynamodb_throttled_or_down_is_a_429_or_503_with_retry_after(
    stocked: MemoryWorld,
    dynamodb_refuses: Refuse,
    route: str,
    dynamodb_code: str,
    dynamodb_status: int,
    status: int,
    code: str,
    retry_after: str,
) -> None:
    # Given DynamoDB throttling (or failing) past the SDK's retries
    dynamodb_refuses(dynamodb_code, dynamodb_status)

    # When a request reads or writes the table
    path, body = DYNAMODB_ROUTES[route]
    response = stocked.api("POST", path, body=body)

    # Then the client is told to back off (or retry later), never handed a tool result or a 500
    _refused(response, status, code, retry_after)


def test_a_throttled_tool_call_writes_nothing(
    stocked: MemoryWorld, dynamodb_refuses: Refuse
) -> None:
    # Given add_memory called while DynamoDB throttles, then DynamoDB recovers
    undo = dynamodb_refuses("ProvisionedThroughputExceededException", 400)
    path, body = DYNAMODB_ROUTES["add_memory"]
    assert stocked.api("POST", path, body=body).status == 429

    undo()
    stocked.settle()

    # Then only what was there before is stored (Ada's memory and her message)
    listing = stocked.api("POST", "/v1/long-term-memory/search", body={"text": ""})
    assert {m["id"] for m in listing.body["memories"]} == {"tea", "m1"}


# -- OpenSearch ------------------------------------------------------------------------------------


class _Answering(BaseHTTPRequestHandler):
    """Every request answered with the server's `status` and an OpenSearch error body."""

    def _answer(self) -> None:
        status = self.server.status  # type: ignore[attr-defined]
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        error = {"type": "rejected_execution_exception", "reason": MARKER}
        body = json.dumps({"error": error, "status": status}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_HEAD = do_PUT = _answer

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def opensearch_answering() -> Iterator[Callable[[int], str]]:
    """A loopback HTTP server answering every OpenSearch request with one status."""
    servers: list[ThreadingHTTPServer] = []

    def start(status: int) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Answering)
        server.status = status  # type: ignore[attr-defined]
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize(
    ("status", "code", "retry_after"),
    [(429, "throttled", THROTTLED), (503, "unavailable", UNAVAILABLE)],
)
@pytest.mark.parametrize("route", EMBEDDING_ROUTES)
def test_opensearch_throttled_or_down_reaches_the_client_with_retry_after(
    dynamodb_table: str,
    opensearch_answering: Callable[[int], str],
    route: str,
    status: int,
    code: str,
    retry_after: str,
) -> None:
    # Given OpenSearch (opensearch-py, as deployed, with its resends) answering 429 or 503
    endpoint = opensearch_answering(status)
    settings = IndexSettings(opensearch_endpoint=endpoint, opensearch_auth="none")
    embedder = CountingEmbedder()
    index = opensearch_index(settings, "us-east-1", embedder.dimensions)
    world = _with_session(build_world(dynamodb_table, index=index, embedder=embedder))

    # When a request searches the index
    response = _post(world, route)

    # Then the client gets the same status, with Retry-After, never OpenSearch's words
    _refused(response, status, code, retry_after)
