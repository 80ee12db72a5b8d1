"""The local stack at volume, sized for CI: conversations backfilled back to back through the
API (100 messages a request, message indexing, curation and cleanup running) get no 5xx and
every message becomes searchable, on moto and on DynamoDB Local (bench/ingest.py runs the
full size: 10 conversations of 700)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memkit.config import IndexSettings
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

CONVERSATIONS, MESSAGES, PER_REQUEST = 3, 300, 100
NS = "volume"
# Generous: the indexer embeds 900 messages on a loaded 2-core machine.
SETTLE_SECONDS = 300.0


@pytest.fixture(params=["moto", "dynamodb-local"])
def busy_stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[LocalStack]:
    """A stack whose background work all runs: curation, and cleanup every 2 s."""
    if request.param == "dynamodb-local":
        request.getfixturevalue("dynamodb_local_endpoint")  # skips where it cannot run
    config = LocalStackConfig(
        port=0,
        concurrency=2,
        template=ROOT / "template.yaml",
        engine=request.param,
        data_dir=tmp_path / "data" if request.param == "dynamodb-local" else None,
        tools_dir=ROOT / ".tools",
        cleanup_interval_seconds=2.0,
        extraction_quiet_seconds=1,
    )
    with LocalStack(config) as stack:
        yield stack


def _indexed(stack: LocalStack) -> int:
    assert stack.opensearch is not None
    docs = stack.opensearch.documents(IndexSettings().opensearch_index)
    return sum(1 for _, doc in docs if doc.get("namespace") == NS and not doc.get("deleted"))


def test_backfilled_conversations_get_no_5xx_and_all_become_searchable(
    busy_stack: LocalStack,
) -> None:
    # Given conversations sent back to back, 100 messages a request
    statuses: Counter[int] = Counter()
    with httpx.Client(timeout=120) as client:
        for c in range(CONVERSATIONS):
            for start in range(0, MESSAGES, PER_REQUEST):
                batch = [
                    {"id": f"m{n}", "role": "user", "content": f"conversation {c} turn {n}"}
                    for n in range(start, start + PER_REQUEST)
                ]
                response = client.post(
                    f"{busy_stack.url}/v1/working-memory/conv-{c}/messages",
                    params={"namespace": NS},
                    json={"messages": batch},
                )
                statuses[response.status_code] += 1

    # Then none was refused, and every message is indexed
    assert set(statuses) <= {200, 201}, statuses
    deadline = time.monotonic() + SETTLE_SECONDS
    while _indexed(busy_stack) < CONVERSATIONS * MESSAGES:
        assert time.monotonic() < deadline, f"{_indexed(busy_stack)} messages indexed"
        time.sleep(0.5)
    health = httpx.get(f"{busy_stack.url}/v1/health").json()["local"]["stream_pumps"]
    assert all(pump["state"] != "stalled" for pump in health.values()), health
