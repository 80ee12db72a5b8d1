"""A local stack holding a few hundred items restarts cleanly every time (issue 26, finding 8):
on start the index is rebuilt from the table (loopback OpenSearch) or the vector table's
indexes are filled again from a Scan (`--vector-store dynamodb`), while the stream pump
replays the stream's retained records.

The engine outlives the stacks, as a data folder outlives `memkit serve`: DynamoDB Local is
one process for the module (a stack on `dynamodb_endpoint`, as `--dynamodb-endpoint` runs),
moto's backends live as long as this process. Each life writes a record and a session that
the next life must find, by keyword (the rebuilt index itself), not only in the table."""

from __future__ import annotations

import functools
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare
from memkit_dev.local.stack import LocalStack
from tests.conftest import ROOT
from tests.integration.conftest import small_stack

pytestmark = pytest.mark.integration

# Ten restarts where the start-up rebuild raced the pump (the loopback OpenSearch); three
# on the vector table, whose every start replays the whole stream and re-embeds it (the
# pump starts at TRIM_HORIZON, as the template says: each life waits out that replay).
RESTARTS = {"opensearch": 10, "dynamodb": 3}
SESSIONS, MESSAGES = 20, 10  # 200 messages, each indexed, with 20 session items
SETTLE_SECONDS = 120.0  # generous: a loaded 2-core machine indexes in a second or two


@pytest.fixture(scope="module")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    try:
        home = prepare(ROOT / ".tools")
    except Unavailable as exc:
        pytest.skip(f"DynamoDB Local cannot run here: {exc}")
    server = DynamoDBLocal(home, data_dir=None).start()
    yield server
    server.stop()


def _until(check: Any, what: str) -> Any:
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, what
            return found
        time.sleep(0.2)


def _found(url: str, token: str, record_id: str) -> bool:
    """Whether a keyword search for `token` returns `record_id` (the index holds it)."""
    search = {"text": token, "search_mode": "keyword", "limit": 5}
    answer = httpx.post(f"{url}/v1/long-term-memory/search", json=search, timeout=60)
    assert answer.status_code == 200, answer.text
    return record_id in [m["id"] for m in answer.json()["memories"]]


def _populate(url: str) -> None:
    for s in range(SESSIONS):
        messages = [
            {"id": f"m{i}", "role": "user", "content": f"note {i} of trip {s}: trains and tea"}
            for i in range(MESSAGES)
        ]
        answer = httpx.post(
            f"{url}/v1/working-memory/trip-{s}/messages", json={"messages": messages}, timeout=60
        )
        assert answer.status_code == 201, answer.text


def _live(url: str, life: int) -> None:
    """What life `life` leaves for the next: a record with a token of its own (indexed
    before the stack stops) and a session."""
    record = {"id": f"life-{life}", "text": f"restart token zq{life}x kept", "user_id": "ada"}
    created = httpx.post(f"{url}/v1/long-term-memory/", json={"memories": [record]}, timeout=60)
    assert created.status_code == 200, created.text
    said = {"messages": [{"id": "m0", "role": "user", "content": f"life {life} was here"}]}
    appended = httpx.post(f"{url}/v1/working-memory/life-{life}/messages", json=said, timeout=60)
    assert appended.status_code == 201, appended.text
    indexed = functools.partial(_state, url, f"life-{life}")
    _until(lambda: indexed() == "indexed", f"life {life}'s record indexed")


def _state(url: str, record_id: str) -> str:
    answer = httpx.get(f"{url}/v1/long-term-memory/{record_id}", timeout=60)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["indexing"])


@pytest.mark.parametrize("vector_store", ["opensearch", "dynamodb"])
@pytest.mark.parametrize("engine", ["dynamodb-local", "moto"])
def test_a_stack_with_data_restarts_cleanly_every_time(
    request: pytest.FixtureRequest, engine: str, vector_store: str
) -> None:
    # Given an engine holding a few hundred items written through a stack
    table = f"memkit-restart-{vector_store}"
    options: dict[str, Any] = {"engine": "moto", "table_name": table, "vector_store": vector_store}
    if engine == "dynamodb-local":
        options["dynamodb_endpoint"] = request.getfixturevalue("dynamodb_local").endpoint
    config = small_stack(**options)
    with LocalStack(config) as first:
        _populate(first.url)
        _live(first.url, 0)

    # When it is stopped and started again, ten times, each life writing, and stopping
    # while the pump still replays the stream (which a start replays from its oldest record)
    restarts = RESTARTS[vector_store]
    for life in range(1, restarts + 1):
        with LocalStack(config) as stack:  # a start that failed raises here
            url = stack.url
            assert httpx.get(f"{url}/v1/health", timeout=60).status_code == 200

            # Then each start finds what the life before wrote, in the table and, from its
            # first request, in the index (rebuilt, or kept in the vector table)
            session = httpx.get(f"{url}/v1/working-memory/life-{life - 1}", timeout=60).json()
            assert [m["id"] for m in session["messages"]] == ["m0"]
            assert _found(url, f"zq{life - 1}x", f"life-{life - 1}")
            _live(url, life)

    # and the last start holds every life's record, the first population's sessions too
    with LocalStack(config) as last:
        for life in range(restarts + 1):
            assert _found(last.url, f"zq{life}x", f"life-{life}"), f"life {life} kept"
        listed = httpx.get(f"{last.url}/v1/working-memory/", params={"limit": 100}, timeout=60)
        sessions = set(listed.json()["sessions"])
        assert {f"trip-{s}" for s in range(SESSIONS)} <= sessions
    assert stack.dead_letters == []
    assert last.dead_letters == []
