"""Conformance: agent-memory-client's forget_long_term_memories, and the compaction request
AMS's own tools send (the client 0.14.0 has no compact call), against the local stack over
HTTP (conftest's `stack`, as tests/integration/test_ams_client.py uses it). Each test has a
namespace of its own."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import httpx
import pytest
from agent_memory_client import MemoryAPIClient, MemoryClientConfig
from agent_memory_client.models import ClientMemoryRecord, ForgetPolicy, MemoryTypeEnum

from memkit_dev.local.stack import LocalStack

pytestmark = [pytest.mark.integration, pytest.mark.anyio]


@pytest.fixture
def ns() -> str:
    return f"ams-forget-{uuid4().hex[:12]}"


def client(stack: LocalStack, ns: str) -> MemoryAPIClient:
    return MemoryAPIClient(
        MemoryClientConfig(base_url=stack.url, timeout=30.0, default_namespace=ns)
    )


def memory(record_id: str, ns: str, days_old: float) -> ClientMemoryRecord:
    created = datetime.now(UTC) - timedelta(days=days_old)
    return ClientMemoryRecord(
        id=record_id,
        text=f"Fact {record_id} about the user.",
        user_id="u1",
        namespace=ns,
        created_at=created,
        last_accessed=created,
    )


def stored(stack: LocalStack, record_id: str) -> bool:
    response = httpx.get(f"{stack.url}/v1/long-term-memory/{record_id}", timeout=30.0)
    return response.status_code == 200


async def test_the_client_previews_what_a_policy_forgets(stack: LocalStack, ns: str) -> None:
    old, new, kept = f"{ns}-old", f"{ns}-new", f"{ns}-kept"
    async with client(stack, ns) as c:
        await c.create_long_term_memory(
            [memory(old, ns, 40), memory(new, ns, 2), memory(kept, ns, 50)], deduplicate=False
        )

        preview = await c.forget_long_term_memories(
            ForgetPolicy(max_age_days=30),
            namespace=ns,
            user_id="u1",
            dry_run=True,
            pinned_ids=[kept],
        )

    assert preview.dry_run is True
    assert preview.scanned == 3
    assert (preview.deleted, preview.deleted_ids) == (1, [old])
    assert stored(stack, old)
    assert stored(stack, kept)


async def test_without_dry_run_the_client_gets_the_servers_default_a_dry_run(
    stack: LocalStack, ns: str
) -> None:
    old = f"{ns}-old"
    async with client(stack, ns) as c:
        await c.create_long_term_memory([memory(old, ns, 40)])

        # The client sends dry_run only when true; AMS's server (and memkit) default to true.
        answer = await c.forget_long_term_memories(
            ForgetPolicy(max_inactive_days=30), namespace=ns, dry_run=False
        )

    assert answer.dry_run is True
    assert answer.deleted_ids == [old]
    assert stored(stack, old)


async def test_a_forget_with_dry_run_false_deletes(stack: LocalStack, ns: str) -> None:
    old, new = f"{ns}-old", f"{ns}-new"
    async with client(stack, ns) as c:
        await c.create_long_term_memory([memory(old, ns, 40), memory(new, ns, 1)])

    response = httpx.post(
        f"{stack.url}/v1/long-term-memory/forget",
        params={"namespace": ns, "dry_run": "false"},
        json={"policy": {"budget": 1}},
        timeout=30.0,
    )

    assert response.status_code == 200, response.text
    assert response.json() == {"scanned": 2, "deleted": 1, "deleted_ids": [old], "dry_run": False}
    assert not stored(stack, old)
    assert stored(stack, new)


async def test_a_compaction_as_the_reference_servers_tools_send_it_merges(
    stack: LocalStack, ns: str
) -> None:
    # AMS's compact route has no dry run, and its CLI sends only namespace and user_id.
    first, copy = f"{ns}-first", f"{ns}-copy"
    fact = {"text": "The user takes tea without sugar.", "memory_type": MemoryTypeEnum.SEMANTIC}
    async with client(stack, ns) as c:
        await c.create_long_term_memory([memory(first, ns, 3).model_copy(update=fact)])
        await c.create_long_term_memory(
            [memory(copy, ns, 1).model_copy(update=fact)], deduplicate=False
        )
    assert stored(stack, copy)

    response = httpx.post(
        f"{stack.url}/v1/long-term-memory/compact",
        params={"namespace": ns, "user_id": "u1"},
        timeout=30.0,
    )

    assert response.status_code == 200, response.text
    assert response.json()["dry_run"] is False
    assert response.json()["merged"] == [{"kept": first, "removed": [copy], "reason": "exact"}]
    assert stored(stack, first)
    assert not stored(stack, copy)
