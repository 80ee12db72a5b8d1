"""Expired items are hidden on every read; logs never carry scratchpad content."""

from __future__ import annotations

import io
import json
import time

import boto3
import pytest

from memkit.store import keys
from tests.integration.conftest import Call

pytestmark = pytest.mark.integration
PAD = "/v1/working-memory/s1/scratchpad"


def _expire(table: str, key: keys.Key) -> None:
    """What DynamoDB leaves for days after TTL: an item past `expires_at`, still stored."""
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=table,
        Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 60)}},
    )


def test_an_expired_scratchpad_reads_as_empty_before_dynamodb_deletes_it(
    api: Call, dynamodb_table: str
) -> None:
    # Given a scratchpad whose item is past its expiry but not yet deleted
    api("PUT", PAD, body={"content": "old secret"})
    _expire(dynamodb_table, keys.session_pad_key("default", "default", "s1", "default"))

    # When it is read
    response = api("GET", PAD)

    # Then its content is hidden, and the version keeps counting (no ETag reuse)
    assert response.status == 200
    assert response.body["content"] is None
    assert response.body["version"] == 1


def test_a_write_over_an_expired_item_starts_fresh(api: Call, dynamodb_table: str) -> None:
    api("PUT", PAD, body={"content": "old"})
    _expire(dynamodb_table, keys.session_pad_key("default", "default", "s1", "default"))
    _expire(dynamodb_table, keys.session_key("default", "default", "s1"))

    response = api("PATCH", PAD, body={"content": "new"})

    assert response.status == 200
    assert response.body["content"] == "new"  # not "old\nnew"
    assert response.body["version"] == 2


def test_logs_never_carry_scratchpad_content(api: Call, debug_log: io.StringIO) -> None:
    # Given the most verbose logging
    secret = "canary-7f3a9c"

    # When content goes through writes, a refused write and reads
    api("PUT", PAD, body={"content": secret})
    api("PATCH", PAD, body={"content": {"bad": secret}})
    api("GET", PAD)
    api("GET", PAD, query={"render": "prompt"})

    # Then no log line quotes it
    lines = debug_log.getvalue().splitlines()
    assert any(json.loads(line)["message"] == "request refused" for line in lines)
    assert all(secret not in line for line in lines)
