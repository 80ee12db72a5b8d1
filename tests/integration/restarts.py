"""What the restart tests share (test_local_restart*.py): a local stack holding a few hundred
items restarts cleanly every time (issue 26, finding 8):
on start the index is rebuilt from the table (loopback OpenSearch) or the vector table's
indexes are filled again from a Scan (`--vector-store dynamodb`), and the stream pumps read
on from the positions the last stop kept. Ten restarts on each engine and vector backend.

The engine outlives the stacks, as a data folder outlives `memkit serve`: DynamoDB Local is
one process for the module (a stack on `dynamodb_endpoint`, as `--dynamodb-endpoint` runs),
moto's backends live as long as this process. Each life writes a record and a session that
the next life must find, by keyword (the rebuilt index itself), not only in the table."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memkit_dev.local.dynamodb_local import DynamoDBLocal, Unavailable, prepare
from memkit_dev.local.stack import LocalStack
from tests.conftest import ROOT
from tests.integration.conftest import small_stack, until

RESTARTS = 10
# Each restart test runs on both engines (DynamoDB Local: the module's `dynamodb_local`).
engines = pytest.mark.parametrize("engine", ["dynamodb-local", "moto"])
SESSIONS, MESSAGES = 10, 10  # 100 messages, each indexed (with the records, ~150 items)
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
    return until(check, what, SETTLE_SECONDS)


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


def _live(url: str, life: int, vector_store: str) -> None:
    """What life `life` leaves for the next: a record with a token of its own and a session.
    On the vector table the record is indexed before the stack stops (the next start keeps
    that table); the loopback OpenSearch is rebuilt from the table on every start."""
    record = {"id": f"life-{life}", "text": f"restart token zq{life}x kept", "user_id": "ada"}
    created = httpx.post(f"{url}/v1/long-term-memory/", json={"memories": [record]}, timeout=60)
    assert created.status_code == 200, created.text
    said = {"messages": [{"id": "m0", "role": "user", "content": f"life {life} was here"}]}
    appended = httpx.post(f"{url}/v1/working-memory/life-{life}/messages", json=said, timeout=60)
    assert appended.status_code == 201, appended.text
    if vector_store == "dynamodb":
        indexed = functools.partial(_state, url, f"life-{life}")
        _until(lambda: indexed() == "indexed", f"life {life}'s record indexed")


def _caught_up(stack: LocalStack) -> None:
    """Wait until the stack's pumps have handled everything its life wrote (a stop then
    leaves no batch to read again)."""
    for pump in (stack.pump, stack.curator_pump):
        assert pump is not None
        pump.drain(timeout=SETTLE_SECONDS)


def _state(url: str, record_id: str) -> str:
    answer = httpx.get(f"{url}/v1/long-term-memory/{record_id}", timeout=60)
    assert answer.status_code == 200, answer.text
    return str(answer.json()["indexing"])


def restarts_cleanly(
    request: pytest.FixtureRequest, tmp_path: Path, engine: str, vector_store: str
) -> None:
    """Ten restarts of a stack on `engine` (dynamodb-local, moto) and `vector_store`."""
    # Given an engine holding what a stack wrote (100 messages, their sessions, their vectors
    # or index docs: a few hundred items; the data folder keeps the stream pumps' positions,
    # as `memkit serve` keeps them in .memkit)
    table = f"memkit-restart-{vector_store}"
    options: dict[str, Any] = {
        "engine": "moto",
        "table_name": table,
        "vector_store": vector_store,
        "data_dir": tmp_path,
    }
    if engine == "dynamodb-local":
        options["dynamodb_endpoint"] = request.getfixturevalue("dynamodb_local").endpoint
    config = small_stack(**options)
    with LocalStack(config) as first:
        _populate(first.url)
        _live(first.url, 0, vector_store)
        _caught_up(first)

    # When it is stopped and started again, ten times, each life writing, its pumps reading
    # on from where the last life's stopped
    for life in range(1, RESTARTS + 1):
        with LocalStack(config) as stack:  # a start that failed raises here
            url = stack.url
            assert httpx.get(f"{url}/v1/health", timeout=60).status_code == 200

            # Then each start finds what the life before wrote, in the table and, from its
            # first request, in the index (rebuilt, or kept in the vector table)
            session = httpx.get(f"{url}/v1/working-memory/life-{life - 1}", timeout=60).json()
            assert [m["id"] for m in session["messages"]] == ["m0"]
            assert _found(url, f"zq{life - 1}x", f"life-{life - 1}")
            _live(url, life, vector_store)
            # and its indexer's pump read on from its position, not the whole stream again
            _caught_up(stack)
            assert stack.pump is not None
            assert stack.pump.stats.records_invoked < SESSIONS * MESSAGES / 4

    # and the last start holds every life's record, the first population's sessions too
    with LocalStack(config) as last:
        for life in range(RESTARTS + 1):
            assert _found(last.url, f"zq{life}x", f"life-{life}"), f"life {life} kept"
        listed = httpx.get(f"{last.url}/v1/working-memory/", params={"limit": 100}, timeout=60)
        sessions = set(listed.json()["sessions"])
        assert {f"trip-{s}" for s in range(SESSIONS)} <= sessions
    assert stack.dead_letters == []
    assert last.dead_letters == []
