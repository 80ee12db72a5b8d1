"""Sessions under races and at the edges: what the review of issue 3 found, kept fixed.

A race is staged by running a second request at the exact moment the first is between its
read and its write: the store's methods are wrapped on the instance the handler uses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from tests.conftest import ApiResponse, LambdaContextStub
from tests.events import http_event

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): these run on moto and on AWS's own engine.
ENGINES = ("moto", "dynamodb-local")
S1 = "/v1/working-memory/s1"
Call = Callable[..., ApiResponse]


def _msg(mid: str, seconds_ago: float = 0, **extra: Any) -> dict[str, Any]:
    at = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()
    return {"id": mid, "role": "user", "content": f"text of {mid}", "created_at": at, **extra}


@pytest.fixture
def stack(dynamodb_table: str) -> tuple[Call, Any]:
    """The real handler, and the store instance it uses (to stage races on)."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    store = DynamoStore(settings)
    services = api_services(store, settings)
    handler = make_lambda_handler(lambda: services)

    def call(method: str, path: str, **kwargs: Any) -> ApiResponse:
        result = handler(http_event(method, path, **kwargs), LambdaContextStub())
        body = result.get("body") or ""
        return ApiResponse(result["statusCode"], result.get("headers") or {}, json.loads(body))

    return call, store.sessions


def _once_before(store: Any, method: str, action: Callable[[], Any]) -> None:
    """Run `action` the first time `store.<method>` is called, just before it runs."""
    original = getattr(store, method)
    armed = [True]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if armed[0]:
            armed[0] = False
            action()
        return original(*args, **kwargs)

    setattr(store, method, wrapped)


def _during_partition_read(store: Any, action: Callable[[], Any]) -> None:
    """Run `action` after the store has read a session's partition, before it writes."""
    original = store._session_items
    armed = [True]

    def wrapped(*args: Any, **kwargs: Any) -> Iterator[Any]:
        items = list(original(*args, **kwargs))
        if armed[0]:
            armed[0] = False
            action()
        yield from items

    store._session_items = wrapped


def _ids(call: Call, path: str = S1) -> list[str]:
    return [m["id"] for m in call("GET", path).body["messages"]]


def _log(call: Call) -> list[str]:
    return [m["id"] for m in call("GET", f"{S1}/messages").body["messages"]]


def test_a_ttl_refresh_never_undoes_a_write_made_meanwhile(stack: tuple[Call, Any]) -> None:
    call, store = stack
    call(
        "PUT",
        S1,
        body={"messages": [_msg("a", 30), _msg("b", 20), _msg("c", 10)], "ttl_seconds": 60},
    )
    call("PUT", f"{S1}/scratchpad", body={"content": "v1"})

    def meanwhile() -> None:
        call("PUT", f"{S1}/scratchpad", body={"content": "v2"})
        call("PUT", S1, body={"messages": [_msg("a", 30), _msg("b", 20)]})

    _during_partition_read(store, meanwhile)
    # a much longer TTL: every item of the session gets a new expiry
    assert call("PATCH", S1, body={"ttl_seconds": 100_000}).status == 200

    pad = call("GET", f"{S1}/scratchpad").body
    assert (pad["content"], pad["version"]) == ("v2", 2)
    assert _ids(call) == ["a", "b"]
    assert _log(call) == ["a", "b"]
    assert call("GET", S1).body["message_count"] == 2


def test_an_if_match_put_that_loses_the_race_changes_nothing(stack: tuple[Call, Any]) -> None:
    call, store = stack
    memories = [{"id": "m", "text": "v1"}]
    etag = call(
        "PUT",
        S1,
        body={"messages": [_msg("a", 30), _msg("b", 20), _msg("c", 10)], "memories": memories},
    ).headers["ETag"]
    _once_before(store, "commit_session", lambda: call("PATCH", S1, body={"title": "meanwhile"}))

    refused = call(
        "PUT",
        S1,
        headers={"If-Match": etag},
        body={
            "messages": [_msg("a", 30), _msg("b", 20), _msg("d", 5)],
            "memories": [{"id": "m", "text": "v2"}],
        },
    )

    assert refused.status == 409
    body = call("GET", S1).body
    assert [m["id"] for m in body["messages"]] == ["a", "b", "c"]
    assert body["memories"][0]["text"] == "v1"
    # and a later PUT of the same memory text is not mistaken for "unchanged"
    call("PUT", S1, body={"messages": [], "memories": [{"id": "m", "text": "v3"}]})
    assert call("GET", S1).body["memories"][0]["text"] == "v3"


def test_the_count_stays_exact_when_an_append_loses_the_race(stack: tuple[Call, Any]) -> None:
    call, store = stack
    call("PUT", "/v1/profiles/two", body={"max_messages": 2})
    call("PUT", S1, body={"profile": "two", "messages": [_msg("a", 30)]})
    _once_before(store, "commit_session", lambda: call("PATCH", S1, body={"title": "meanwhile"}))

    appended = call("POST", f"{S1}/messages", body={"messages": [_msg("b", 20)]})

    assert appended.status == 201
    assert call("GET", S1).body["message_count"] == 2
    call("POST", f"{S1}/messages", body={"messages": [_msg("c", 10)]})
    assert _log(call) == ["b", "c"]  # max_messages still holds


def test_an_append_older_than_the_document_shows_in_it(stack: tuple[Call, Any]) -> None:
    call, _ = stack
    call("PUT", S1, body={"messages": [_msg("a", 100), _msg("b", 50)]})
    call("PUT", S1, body={"messages": [_msg("b", 50)]})  # a leaves the document

    call("POST", f"{S1}/messages", body={"messages": [_msg("x", 60)]})

    assert _ids(call) == ["x", "b"]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("created_at", "0001-01-01T00:00:00+14:00"),
        ("created_at", "9999-12-31T23:59:59-14:00"),
        ("persisted_at", "0001-01-01T00:00:00+14:00"),
    ],
)
def test_times_at_the_edge_of_the_calendar_are_a_422(
    stack: tuple[Call, Any], field: str, value: str
) -> None:
    call, _ = stack

    response = call("PUT", S1, body={"messages": [{"role": "user", "content": "x", field: value}]})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == f"messages.0.{field}"


def test_a_token_count_beyond_2_to_the_53_is_a_422(stack: tuple[Call, Any]) -> None:
    call, _ = stack

    assert call("PUT", S1, body={"tokens": 10**30}).status == 422
    assert call("GET", S1).status == 404


def test_the_longest_ids_in_four_byte_characters_fit_the_keys(stack: tuple[Call, Any]) -> None:
    call, _ = stack
    long_id = "\U0001d11e" * 256  # 1,024 bytes of UTF-8: the keys hold 2,048 and 1,024
    scope = {"namespace": long_id, "user_id": long_id}

    put = call("PUT", S1, query=scope, body={"messages": [_msg(long_id), _msg("x" * 256)]})
    appended = call("POST", f"{S1}/messages", query=scope, body={"messages": [_msg(long_id)]})

    assert put.status == 200
    assert appended.body["already_stored"] == [long_id]
    got = call("GET", S1, query=scope).body
    assert [m["id"] for m in got["messages"]] == [long_id, "x" * 256]
    listed = call("GET", "/v1/working-memory/", query=scope).body
    assert listed == {"sessions": ["s1"], "total": 1}


def test_a_document_stays_under_the_lambda_response_limit(stack: tuple[Call, Any]) -> None:
    call, _ = stack
    # Each message carries 150 KB of metadata (DynamoDB's item limit, counting the local
    # index's copy, is about 200 KB): 48 of them are 7.2 MB, over Lambda's 6 MB.
    heavy = {"blob": "y" * 150_000}
    for batch in range(6):
        messages = [_msg(f"m{batch}-{i}", 100 - batch * 10 - i, metadata=heavy) for i in range(8)]
        assert call("POST", f"{S1}/messages", body={"messages": messages}).status == 201

    response = call("GET", S1)

    assert response.status == 200
    assert len(json.dumps(response.body)) < 6_000_000
    assert response.body["messages"][-1]["id"] == "m5-7"  # the newest are the ones kept
    assert response.body["message_count"] == 48


def test_a_transaction_the_sdk_sends_twice_is_never_a_failure(
    stack: tuple[Call, Any], request: pytest.FixtureRequest
) -> None:
    # Given the session's transaction sent twice, as the SDK does when an answer is lost to
    # a timeout: the first goes through, its answer never arrives
    call, store = stack
    assert call("POST", f"{S1}/messages", body={"messages": [_msg("m1")]}).status == 201
    client = store._items.connection.client
    send = client.transact_write_items
    repeats = [1]

    def sent_twice(**kwargs: Any) -> Any:
        while repeats:
            repeats.pop()
            send(**kwargs)
        return send(**kwargs)

    client.transact_write_items = sent_twice
    try:
        appended = call("POST", f"{S1}/messages", body={"messages": [_msg("m2")]})
    finally:
        client.transact_write_items = send

    # Then the client is told it is stored, and it is, once
    assert appended.status in (200, 201)
    stored = call("GET", S1).body
    assert [m["id"] for m in stored["messages"]] == ["m1", "m2"]
    assert stored["message_count"] == 2
    if request.node.callspec.params["dynamodb_table"] == "dynamodb-local":
        # DynamoDB answers the repeat by its ClientRequestToken, as it answered the first
        assert appended.status == 201
        assert appended.body["appended"] == ["m2"]
    else:  # moto ignores the token: the repeat fails its check, and a re-read finds it stored
        assert appended.body["already_stored"] == ["m2"]


def _unavailable() -> Exception:
    from botocore.exceptions import ClientError

    answer = {"Error": {"Code": "ServiceUnavailable", "Message": "down"}}
    return ClientError({**answer, "ResponseMetadata": {"HTTPStatusCode": 503}}, "Transact")


def _failing_sends(
    store: Any, monkeypatch: pytest.MonkeyPatch, fails: Callable[[int, Callable[[], Any]], Any]
) -> list[str]:
    """Route the session transactions through `fails(n, send)` (n counts from 1; send() sends
    the transaction for real), with no pause before a resend; the tokens sent, in order."""
    monkeypatch.setattr("memkit.store.sessions.RESEND_PAUSES_SECONDS", (0.0, 0.0))
    client = store._items.connection.client
    send, tokens = client.transact_write_items, []

    def sent(**kwargs: Any) -> Any:
        tokens.append(kwargs["ClientRequestToken"])
        return fails(len(tokens), lambda: send(**kwargs))

    monkeypatch.setattr(client, "transact_write_items", sent)
    return tokens


def test_storage_unavailable_past_the_sdks_retries_is_resent_not_a_503(
    stack: tuple[Call, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    call, store = stack
    assert call("POST", f"{S1}/messages", body={"messages": [_msg("m1")]}).status == 201

    # Given storage that stays unavailable through the SDK's own retries: the first send
    # fails outright, the second goes through but its answer is lost
    def fails(n: int, send: Callable[[], Any]) -> Any:
        if n == 2:
            send()
        if n <= 2:
            raise _unavailable()
        return send()

    tokens = _failing_sends(store, monkeypatch, fails)

    # When a client appends
    appended = call("POST", f"{S1}/messages", body={"messages": [_msg("m2")]})

    # Then it is told the message is stored, the same transaction was resent, and the
    # message is there once (DynamoDB answers the resend by its token; moto, which ignores
    # tokens, fails its version check, and the re-read finds it stored)
    assert appended.status in (200, 201), appended.body
    assert "m2" in appended.body["appended"] + appended.body["already_stored"]
    assert tokens[0] == tokens[1] == tokens[2]
    stored = call("GET", S1).body
    assert [m["id"] for m in stored["messages"]] == ["m1", "m2"]
    assert stored["message_count"] == 2


def test_storage_that_stays_unavailable_is_a_503_and_writes_nothing(
    stack: tuple[Call, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    call, store = stack
    assert call("POST", f"{S1}/messages", body={"messages": [_msg("m1")]}).status == 201

    def down(n: int, send: Callable[[], Any]) -> Any:
        raise _unavailable()

    tokens = _failing_sends(store, monkeypatch, down)
    appended = call("POST", f"{S1}/messages", body={"messages": [_msg("m2")]})

    assert appended.status == 503
    assert appended.body["code"] == "unavailable"
    assert len(tokens) == 3  # the first send and two resends, then the client is told
    monkeypatch.undo()
    assert [m["id"] for m in call("GET", S1).body["messages"]] == ["m1"]
