"""The local stack's meter (`LocalStackConfig.meter_dir`): each function invocation written
where it ran, with its handler's time, the records its event carried, the DynamoDB requests
it made and the capacity units DynamoDB reported for them (of which its indexes'), and the
Bedrock embedding calls it made with the tokens of the texts it sent (what bench/billing.py
prices). On DynamoDB Local, AWS's own engine: moto reports no capacity."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from memkit.tokens import estimate_tokens
from memkit_dev.local.meter import read_invocations
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.integration.conftest import small_stack
from tests.waits import eventually

pytestmark = pytest.mark.integration


def _metered(tmp_path: Path, endpoint: str, **options: Any) -> tuple[LocalStackConfig, Path]:
    """A small stack on DynamoDB Local metering into a folder of `tmp_path`, and the folder."""
    meter = tmp_path / "meter"
    meter.mkdir()
    return small_stack(dynamodb_endpoint=endpoint, meter_dir=meter, **options), meter


def test_every_invocation_is_metered_with_its_dynamodb_requests_and_units(
    tmp_path: Path, dynamodb_local_endpoint: str
) -> None:
    config, meter = _metered(tmp_path, dynamodb_local_endpoint, table_name="memkit-meter")
    message = {"messages": [{"id": "m1", "role": "user", "content": "I drink green tea"}]}

    with LocalStack(config) as stack:
        written = httpx.post(
            f"{stack.url}/v1/working-memory/metered/messages", json=message, timeout=60
        )
        read = httpx.get(f"{stack.url}/v1/working-memory/metered", timeout=60)
        # the stream indexer runs on the write: its batch is metered where it ran
        lines = eventually(
            lambda: [
                line for line in read_invocations(meter) if line["function"] == "IndexerFunction"
            ]
        )
        api = [line for line in read_invocations(meter) if line["function"] == "ApiFunction"]

    assert (written.status_code, read.status_code) == (201, 200)
    assert len(api) == 2
    append, get = api
    assert append["ms"] > 0
    assert (
        append["dynamodb"].get("TransactWriteItems", 0) + append["dynamodb"].get("PutItem", 0) >= 1
    )
    assert append["write_units"] > 0
    # of which the session's listing and expiry index entries (GSIs)
    assert 0 < append["index_write_units"] < append["write_units"]
    assert get["write_units"] == 0
    assert get["read_units"] > 0
    assert lines[0]["records"] >= 1


def test_bedrock_embedding_calls_are_metered_with_the_tokens_of_the_texts_sent(
    tmp_path: Path, dynamodb_local_endpoint: str
) -> None:
    config, meter = _metered(
        tmp_path, dynamodb_local_endpoint, table_name="memkit-meter-cohere", embedder="cohere"
    )
    memories = [
        {"id": "tea", "text": "Ada drinks green tea every morning", "user_id": "ada"},
        {"id": "oslo", "text": "Ada flew to Oslo for a conference", "user_id": "ada"},
    ]

    with LocalStack(config) as stack:
        created = httpx.post(
            f"{stack.url}/v1/long-term-memory/", json={"memories": memories}, timeout=60
        )
        indexed = eventually(
            lambda: [
                line
                for line in read_invocations(meter)
                if line["function"] == "IndexerFunction" and line["embed_calls"]
            ]
        )
        searched = httpx.post(
            f"{stack.url}/v1/long-term-memory/search", json={"text": "tea?"}, timeout=60
        )
        assert stack.bedrock is not None
        sent = list(stack.bedrock.texts)
        lines = read_invocations(meter)

    assert (created.status_code, searched.status_code) == (200, 200)
    assert indexed[0]["embed_calls"] == 1  # Cohere: both texts in one call
    assert sum(line["embed_calls"] for line in lines) == len(stack.bedrock.calls)
    assert sum(line["embed_tokens"] for line in lines) == sum(estimate_tokens(t) for t in sent)
