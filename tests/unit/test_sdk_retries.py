"""The SDK's retries (memkit.client.retries) and its own waits (edit_scratchpad,
wait_until_indexed) through a client on httpx's MockTransport: what is sent again, how long
the client waits first, and what it raises."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import httpx
import pytest

from memkit.client import (
    APIConnectionError,
    AsyncMemkitClient,
    ConflictError,
    IndexingTimeout,
    MemkitClient,
    RateLimitError,
    Retries,
    ServiceUnavailableError,
    UnprocessableEntityError,
)
from memkit.client.errors import InternalServerError

PAD = {
    "session_id": "s",
    "user_id": None,
    "namespace": "default",
    "profile": "default",
    "scope": "session",
    "format": "text",
    "content": "tea",
    "version": 1,
    "template": None,
    "schema": None,
    "read_only": False,
    "tokens": 1,
    "max_tokens": 4000,
    "updated_at": None,
}
APPENDED = {
    "session_id": "s",
    "namespace": "default",
    "created": True,
    "appended": ["m1"],
    "already_stored": [],
    "pruned": 0,
    "message_count": 1,
    "version": 1,
}
THROTTLED = {"detail": "throttled", "code": "throttled", "errors": []}
UNAVAILABLE = {"detail": "DynamoDB is unavailable", "code": "unavailable", "errors": []}
Answer = httpx.Response | Exception


class Server:
    """Answers each request with the next answer in line; keeps what was sent."""

    def __init__(self, *answers: Answer) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) for r in self.requests]


def client(server: Server, waits: list[float], **retries: Any) -> MemkitClient:
    policy = Retries(jitter=lambda: 1.0, **retries)
    return MemkitClient(
        "http://memkit.test",
        transport=httpx.MockTransport(server),
        sleep=waits.append,
        retries=policy,
    )


def reply(status: int, body: Any, **headers: str) -> httpx.Response:
    return httpx.Response(status, json=body, headers=headers)


def update(memkit: MemkitClient) -> Any:
    """A scratchpad merge: not idempotent (text appends)."""
    return memkit.update_scratchpad("tea", "s")


def append(memkit: MemkitClient) -> Any:
    """A message append: idempotent by message id."""
    return memkit.append_messages("s", [{"role": "user", "content": "hi"}])


def test_a_429_is_sent_again_after_its_retry_after_seconds() -> None:
    server, waits = Server(reply(429, THROTTLED, **{"Retry-After": "3"}), reply(200, PAD)), []

    pad = update(client(server, waits))

    assert pad.content == "tea"
    assert waits == [3.0]
    assert len(server.requests) == 2


def test_a_retry_after_http_date_is_waited_until() -> None:
    when = format_datetime(datetime.now(UTC) + timedelta(seconds=5), usegmt=True)
    server, waits = Server(reply(429, THROTTLED, **{"Retry-After": when}), reply(200, PAD)), []

    update(client(server, waits))

    [wait] = waits
    assert 3.0 < wait <= 5.0


def test_without_retry_after_the_waits_double_and_the_last_error_is_raised() -> None:
    server, waits = Server(*[reply(429, THROTTLED)] * 5), []

    with pytest.raises(RateLimitError) as raised:
        update(client(server, waits, attempts=5, backoff=0.5))

    assert waits == [0.5, 1.0, 2.0, 4.0]  # full jitter drawn at its top (jitter 1.0)
    assert raised.value.status == 429
    assert raised.value.code == "throttled"
    assert len(server.requests) == 5


def test_the_backoff_is_jittered_below_its_window() -> None:
    draws = iter([0.25, 0.5])
    policy = Retries(backoff=1.0, jitter=lambda: next(draws))

    assert [policy.backoff_for(1), policy.backoff_for(2)] == [0.25, 1.0]


def test_a_retry_after_beyond_the_limit_is_raised_at_once_with_its_wait() -> None:
    server, waits = Server(reply(429, THROTTLED, **{"Retry-After": "120"})), []

    with pytest.raises(RateLimitError) as raised:
        update(client(server, waits, max_retry_after=60))

    assert waits == []
    assert raised.value.retry_after == 120.0


def test_memkits_own_503_means_the_call_did_not_run_so_even_a_merge_is_sent_again() -> None:
    server, waits = Server(reply(503, UNAVAILABLE, **{"Retry-After": "5"}), reply(200, PAD)), []

    update(client(server, waits))

    assert waits == [5.0]


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (502, {"message": "Internal Server Error"}),
        (503, {"message": "Service Unavailable"}),
        (504, {"message": "Gateway Timeout"}),
    ],
)
def test_an_unknown_outcome_resends_an_append_but_never_a_merge(status: int, body: Any) -> None:
    # Given the gateway's own answer: the function may have run
    server, waits = Server(reply(status, body), reply(201, APPENDED)), []
    merge_server = Server(reply(status, body))

    appended = append(client(server, waits))
    with pytest.raises((InternalServerError, ServiceUnavailableError)) as raised:
        update(client(merge_server, []))

    assert appended.appended == ["m1"]
    assert len(server.requests) == 2
    assert len(merge_server.requests) == 1
    assert raised.value.code == "gateway"
    assert raised.value.detail == body["message"]


def test_a_resent_append_carries_the_same_message_ids() -> None:
    server, waits = Server(reply(502, {"message": "x"}), reply(201, APPENDED)), []

    append(client(server, waits))

    first, second = server.bodies()
    assert first == second
    assert first["messages"][0]["id"]  # given before the first try


def test_a_connection_refused_is_retried_for_any_call_a_lost_answer_only_for_idempotent() -> None:
    refused = httpx.ConnectError("refused")
    lost = httpx.ReadTimeout("no answer")
    server = Server(refused, reply(200, PAD))
    merge_lost = Server(lost)
    append_lost = Server(lost, reply(201, APPENDED))

    update(client(server, []))
    with pytest.raises(APIConnectionError) as raised:
        update(client(merge_lost, []))
    append(client(append_lost, []))

    assert len(server.requests) == 2
    assert len(merge_lost.requests) == 1
    assert "ReadTimeout" in str(raised.value)
    assert len(append_lost.requests) == 2


def test_client_errors_are_raised_at_once_with_the_apis_field_problems() -> None:
    problem = {
        "detail": "invalid request",
        "code": "validation_error",
        "errors": [{"field": "messages.0.content", "reason": "must not be empty"}],
    }
    conflict = {"detail": "version 2, not 1", "code": "version_conflict", "errors": []}
    server, waits = Server(reply(422, problem), reply(409, conflict)), []
    memkit = client(server, waits)

    with pytest.raises(UnprocessableEntityError) as invalid:
        append(memkit)
    with pytest.raises(ConflictError):
        memkit.update_scratchpad("x", "s", if_match=1)

    assert waits == []
    assert [(e.field, e.reason) for e in invalid.value.errors] == [
        ("messages.0.content", "must not be empty")
    ]
    assert str(invalid.value) == (
        "422 validation_error: invalid request (messages.0.content: must not be empty)"
    )
    assert server.requests[1].headers["if-match"] == '"1"'


def test_the_async_client_retries_the_same_way() -> None:
    server = Server(reply(429, THROTTLED, **{"Retry-After": "2"}), reply(200, PAD))
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)

    async def run() -> Any:
        async with AsyncMemkitClient(
            "http://memkit.test",
            transport=httpx.MockTransport(server),
            sleep=sleep,
            retries=Retries(jitter=lambda: 1.0),
        ) as memkit:
            return await memkit.update_scratchpad("tea", "s")

    pad = asyncio.run(run())

    assert pad.version == 1
    assert waits == [2.0]


def test_a_token_function_is_asked_for_every_try() -> None:
    tokens: Callable[[], str] = iter(["t1", "t2"]).__next__
    server = Server(reply(429, THROTTLED, **{"Retry-After": "0"}), reply(200, PAD))
    memkit = MemkitClient(
        "http://memkit.test",
        token=tokens,
        transport=httpx.MockTransport(server),
        sleep=lambda _: None,
    )

    update(memkit)

    assert [r.headers["authorization"] for r in server.requests] == ["Bearer t1", "Bearer t2"]


def test_edit_scratchpad_rereads_on_each_conflict_and_gives_up_after_its_attempts() -> None:
    conflict = {"detail": "moved on", "code": "version_conflict", "errors": []}
    server = Server(*[reply(200, PAD), reply(409, conflict)] * 3)
    waits: list[float] = []
    changes: list[str] = []

    def change(content: Any) -> str:
        changes.append(content)
        return f"{content}!"

    with pytest.raises(ConflictError):
        client(server, waits).edit_scratchpad(change, "s", attempts=3)

    assert [r.method for r in server.requests] == ["GET", "PUT"] * 3
    assert [r.headers["if-match"] for r in server.requests if r.method == "PUT"] == ['"1"'] * 3
    assert changes == ["tea"] * 3
    assert waits == [0.5, 1.0]  # a backoff between attempts, none after the last


def test_waiting_for_indexing_gives_up_after_its_timeout() -> None:
    record = {
        "id": "r1",
        "text": "t",
        "memory_type": "semantic",
        "topics": [],
        "entities": [],
        "session_id": None,
        "user_id": None,
        "namespace": "default",
        "event_date": None,
        "pinned": False,
        "created_at": "x",
        "updated_at": "x",
        "last_accessed": "x",
        "persisted_at": None,
        "memory_hash": "h",
        "extracted_from": [],
        "metadata": {},
        "discrete_memory_extracted": "f",
        "indexing": "pending",
    }
    server, waits = Server(*[reply(200, record)] * 4), []

    with pytest.raises(IndexingTimeout, match=r"still pending after 0\.5 s: r1"):
        client(server, waits).wait_until_indexed(["r1"], timeout=0.5, interval=0.25)

    assert waits == [0.25, 0.25]
    assert len(server.requests) == 3
