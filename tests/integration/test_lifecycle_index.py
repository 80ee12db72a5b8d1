"""GSI3, the lifecycle index: what expires is findable by expiry time, and records by
namespace then user, without a Scan (memkit.store.keys)."""

from __future__ import annotations

import time

import boto3
import pytest

from memkit.store import keys
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration


def _gsi3(table: str, pk: str, **extra: object) -> list[dict[str, object]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    found = client.query(
        TableName=table,
        IndexName="GSI3",
        KeyConditionExpression="GSI3PK = :pk" + (" AND GSI3SK < :before" if extra else ""),
        ExpressionAttributeValues={
            ":pk": {"S": pk},
            **{f":{name}": {"S": value} for name, value in extra.items()},
        },
    )
    return list(found["Items"])


def test_a_session_with_a_ttl_is_listed_by_its_expiry_and_moves_when_it_changes(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    body = {"messages": [], "ttl_seconds": 600, "user_id": "ada"}
    assert world.api("PUT", "/v1/working-memory/s1", body=body).status == 200
    pk = keys.session_pk("default", "default", "s1")
    shard = keys.expiry_pk(keys.expiry_shard(pk))
    soon = int(time.time()) + 700

    listed = _gsi3(dynamodb_table, shard, before=keys.expiry_before(soon))
    assert [item["PK"]["S"] for item in listed] == [pk]
    assert listed[0]["kind"]["S"] == "session"

    body["ttl_seconds"] = 3600  # a later expiry: no longer due within the hour
    assert world.api("PUT", "/v1/working-memory/s1", body=body).status == 200
    assert _gsi3(dynamodb_table, shard, before=keys.expiry_before(soon)) == []
    body["ttl_seconds"] = None  # no expiry: not in the index at all
    assert world.api("PUT", "/v1/working-memory/s1", body=body).status == 200
    assert _gsi3(dynamodb_table, shard) == []


def test_records_are_listed_by_namespace_then_user(world: MemoryWorld, dynamodb_table: str) -> None:
    memories = [
        {"id": "a1", "text": "Ada likes tea", "user_id": "ada"},
        {"id": "b1", "text": "Bob likes coffee", "user_id": "bob"},
        {"id": "n1", "text": "The office opens at nine"},
        {"id": "w1", "text": "Ada in work", "user_id": "ada", "namespace": "work"},
    ]
    assert world.api("POST", "/v1/long-term-memory/", body={"memories": memories}).status == 200

    listed = _gsi3(dynamodb_table, keys.records_by_namespace("default", "default"))
    by_user = {item["GSI3SK"]["S"].split("#")[0]: item["record_id"]["S"] for item in listed}
    assert by_user == {"ada": "a1", "bob": "b1", "": "n1"}
    work = _gsi3(dynamodb_table, keys.records_by_namespace("default", "work"))
    assert [item["record_id"]["S"] for item in work] == ["w1"]
