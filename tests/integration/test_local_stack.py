"""The local stack over HTTP: real handler processes, the template's routes, moto DynamoDB."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from memkit_dev.local.dynamodb import MotoDynamoDB
from memkit_dev.local.stack import LocalStack, LocalStackConfig

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def request(
    base: str, method: str, path: str, body: Any = None, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(
        base + path,
        data=data,
        method=method,
        headers={"content-type": "application/json", **(headers or {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as response:
            return response.status, dict(response.headers), json.loads(response.read() or b"null")
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read() or b"null")


@pytest.fixture(scope="module")
def stack() -> Iterator[LocalStack]:
    config = LocalStackConfig(port=0, concurrency=4, template=ROOT / "template.yaml")
    with LocalStack(config) as running:
        yield running


def test_concurrent_patches_of_distinct_keys_are_all_applied(stack: LocalStack) -> None:
    # Given a json scratchpad
    request(stack.url, "PUT", "/v1/profiles/keys", {"format": "json", "max_tokens": 64000})
    path = "/v1/working-memory/race/scratchpad?profile=keys"

    # When 8 threads each PATCH 10 distinct keys at once
    def writer(thread: int) -> list[int]:
        return [
            request(stack.url, "PATCH", path, {"content": {f"t{thread}-k{i}": i}})[0]
            for i in range(10)
        ]

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = [status for batch in pool.map(writer, range(8)) for status in batch]

    # Then every write succeeded, all 80 keys are there, and each was applied exactly once
    status, _, pad = request(stack.url, "GET", "/v1/working-memory/race/scratchpad")
    assert statuses == [200] * 80
    assert status == 200
    assert len(pad["content"]) == 80
    assert pad["content"]["t7-k9"] == 9
    assert pad["version"] == 80


def test_the_gateway_routes_only_what_the_template_wires(stack: LocalStack) -> None:
    status, _, body = request(stack.url, "GET", "/v1/not-in-template")

    assert status == 404
    assert body == {"message": "Not Found"}


def test_with_auth_off_every_answer_of_the_functions_says_no_credential_was_checked(
    stack: LocalStack,
) -> None:
    # Given the stack with auth mode none (its default here: `memkit serve --auth none`)
    public = [
        ("GET", "/v1/health"),
        ("GET", "/v1/openapi.json"),
        ("GET", "/.well-known/oauth-protected-resource/mcp"),  # the MCP function's
    ]
    private = [
        ("GET", "/v1/working-memory/?namespace=warned"),
        ("GET", "/v1/working-memory/warned-none"),  # a 404 of the function
    ]

    # When each is called over HTTP
    answers = {path: request(stack.url, method, path) for method, path in public + private}

    # Then each says so, public routes and refusals alike
    statuses = {path: status for path, (status, _, _) in answers.items()}
    assert statuses == {
        "/v1/health": 200,
        "/v1/openapi.json": 200,
        "/.well-known/oauth-protected-resource/mcp": 200,
        "/v1/working-memory/?namespace=warned": 200,
        "/v1/working-memory/warned-none": 404,
    }
    for path, (_, headers, _) in answers.items():
        warning = {k.lower(): v for k, v in headers.items()}.get("x-memkit-warning", "")
        assert warning.startswith("unauthenticated"), path


def test_a_scratchpad_round_trip_with_etag_over_http(stack: LocalStack) -> None:
    put_status, headers, _ = request(
        stack.url, "PUT", "/v1/working-memory/rt/scratchpad", {"content": "hello"}
    )
    stale_status, _, stale = request(
        stack.url,
        "PATCH",
        "/v1/working-memory/rt/scratchpad",
        {"content": "x"},
        headers={"If-Match": '"9"'},
    )

    assert put_status == 200
    assert headers["ETag"] == '"1"'
    assert stale_status == 409
    assert stale["code"] == "version_conflict"


@pytest.mark.parametrize("megabytes", [7, 11])
def test_a_body_over_the_gateway_or_lambda_limit_is_a_413_and_writes_nothing(
    stack: LocalStack, megabytes: int
) -> None:
    # 100 messages of 70 or 110 KB: each fits an item, the request fits neither Lambda's
    # 6 MB event limit nor (at 11 MB) the HTTP API's 10 MB payload limit
    text = "x" * (megabytes * 10_000)
    messages = [{"id": f"m{i}", "role": "user", "content": text} for i in range(100)]

    status, _, body = request(
        stack.url, "POST", "/v1/working-memory/big/messages", {"messages": messages}
    )

    assert status == 413
    assert body == {"message": "Request Entity Too Large"}
    assert request(stack.url, "GET", "/v1/working-memory/big")[0] == 404


def test_sessions_are_listed_at_the_ams_path_with_or_without_its_slash(stack: LocalStack) -> None:
    request(stack.url, "PUT", "/v1/working-memory/slash", {"messages": [], "namespace": "sl"})

    with_slash = request(stack.url, "GET", "/v1/working-memory/?namespace=sl")
    without = request(stack.url, "GET", "/v1/working-memory?namespace=sl")

    assert with_slash[0] == without[0] == 200
    assert with_slash[2] == without[2] == {"sessions": ["slash"], "total": 1}


def test_a_dynamodb_endpoint_can_replace_moto_in_process() -> None:
    # Given a DynamoDB-compatible endpoint run elsewhere (here: a separate moto server)
    endpoint = MotoDynamoDB().start()
    try:
        config = LocalStackConfig(
            port=0,
            concurrency=1,
            template=ROOT / "template.yaml",
            dynamodb_endpoint=endpoint.endpoint,
            table_name="memkit-elsewhere",
        )
        # When the stack runs against it
        with LocalStack(config) as running:
            request(running.url, "PUT", "/v1/working-memory/e/scratchpad", {"content": "there"})

        # Then the table and the data live at that endpoint
        import boto3

        client = boto3.client("dynamodb", endpoint_url=endpoint.endpoint, region_name="us-east-1")
        assert "memkit-elsewhere" in client.list_tables()["TableNames"]
        assert client.scan(TableName="memkit-elsewhere")["Count"] == 2  # session + scratchpad
    finally:
        endpoint.stop()


def test_functions_wait_their_timeout_for_a_slow_local_engine(stack: LocalStack) -> None:
    # A local engine on a busy machine answers late but answers: each function may wait
    # its Timeout for it (at most a minute), not DynamoDB's 5 s and then a 503
    from memkit_dev.local.template import load_template

    template = load_template(ROOT / "template.yaml")
    for function, timeout in (("ApiFunction", 25), ("IndexerFunction", 60)):
        environment = stack._environment(template, function)
        assert float(environment["MEMKIT_READ_TIMEOUT_SECONDS"]) == timeout
