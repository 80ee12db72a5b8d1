"""Indexing on the local stack never stalls: parallel appends that race in DynamoDB (some of
their transactions are cancelled) still end with every message indexed, later writes too,
and /v1/health shows each stream pump's state."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from memkit_dev.local.stack import LocalStack

pytestmark = pytest.mark.integration

NS = "indexing-race"
# Generous: on a loaded 2-core machine a batch is indexed within seconds.
SETTLE_SECONDS = 120.0


def _indexed_messages(url: str, session_id: str) -> set[str]:
    body = {
        "text": "message",
        "namespace": {"eq": NS},
        "session_id": {"eq": session_id},
        "memory_type": {"eq": "message"},
        "limit": 50,
    }
    found = httpx.post(f"{url}/v1/long-term-memory/search", json=body, timeout=30).json()
    return {memory["id"] for memory in found["memories"]}


def _until(check: Any, what: str) -> None:
    deadline = time.monotonic() + SETTLE_SECONDS
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.25)


def test_parallel_appends_to_a_new_session_are_all_indexed_and_so_is_what_follows(
    stack: LocalStack,
) -> None:
    # Given 10 parallel appends of one message each to a session that does not exist yet
    url = f"{stack.url}/v1/working-memory/race/messages"

    def append(n: int) -> int:
        body = {"messages": [{"id": f"m{n}", "role": "user", "content": f"message number {n}"}]}
        return httpx.post(url, params={"namespace": NS}, json=body, timeout=60).status_code

    with ThreadPoolExecutor(max_workers=10) as pool:
        statuses = list(pool.map(append, range(10)))
    assert all(status in (200, 201) for status in statuses), statuses

    # Then every message is indexed
    wanted = {f"m{n}" for n in range(10)}
    _until(lambda: _indexed_messages(stack.url, "race") >= wanted, "all 10 messages indexed")

    # And a write after them is indexed too (the pumps did not stop)
    later = {"messages": [{"id": "after", "role": "user", "content": "message after the race"}]}
    response = httpx.post(
        f"{stack.url}/v1/working-memory/later/messages", params={"namespace": NS}, json=later
    )
    assert response.status_code in (200, 201)
    _until(lambda: "after" in _indexed_messages(stack.url, "later"), "the later message indexed")


def test_health_shows_the_engine_and_each_stream_pump(stack: LocalStack) -> None:
    health = httpx.get(f"{stack.url}/v1/health", timeout=30).json()

    assert health["now"] > 0
    assert health["local"]["dynamodb"] == stack.engine
    pumps = health["local"]["stream_pumps"]
    assert set(pumps) == {"indexer", "curator"}
    assert all(p["state"] in ("ok", "catching up") for p in pumps.values()), pumps
    assert health["local"]["dead_letters"] == 0


def test_a_long_question_is_answered_not_refused_by_opensearchs_clause_limit(
    stack: LocalStack,
) -> None:
    # Given a question of 1,500 distinct words (a pasted document): the keyword query is a
    # match on a doc's text and one on its context, and OpenSearch refuses a query of more
    # than 1,024 term clauses (the loopback OpenSearch too)
    # (a message indexed first, so the index and its mapping exist)
    appended = {"messages": [{"id": "w7", "role": "user", "content": "a message about w7"}]}
    url = f"{stack.url}/v1/working-memory/long-question/messages"
    assert httpx.post(url, params={"namespace": NS}, json=appended, timeout=30).status_code == 201
    _until(lambda: _indexed_messages(stack.url, "long-question") == {"w7"}, "w7 indexed")
    text = " ".join(f"w{n}" for n in range(1500))  # under the 10,000 characters a text takes
    body = {"text": text, "namespace": {"eq": NS}, "session_id": {"eq": "long-question"}}

    response = httpx.post(f"{stack.url}/v1/long-term-memory/search", json=body, timeout=60)

    # Then it is answered from its first words (w7 among them)
    assert response.status_code == 200, response.text
    assert [memory["id"] for memory in response.json()["memories"]] == ["w7"]
