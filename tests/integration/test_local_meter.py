"""The local stack's meter (`LocalStackConfig.meter_dir`): each function invocation written
where it ran, with its handler's time, the records its event carried, the DynamoDB requests
it made and the capacity units DynamoDB reported for them (what `bench.agentcore` prices).
On DynamoDB Local, AWS's own engine: moto reports no capacity."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from memkit_dev.local.meter import read_invocations
from memkit_dev.local.stack import LocalStack
from tests.integration.conftest import small_stack
from tests.waits import eventually

pytestmark = pytest.mark.integration


def test_every_invocation_is_metered_with_its_dynamodb_requests_and_units(
    tmp_path: Path, dynamodb_local_endpoint: str
) -> None:
    meter = tmp_path / "meter"
    meter.mkdir()
    config = small_stack(
        dynamodb_endpoint=dynamodb_local_endpoint, table_name="memkit-meter", meter_dir=meter
    )
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
    assert get["write_units"] == 0
    assert get["read_units"] > 0
    assert lines[0]["records"] >= 1
