"""The in-process moto the tests run on, under memkit's thread pools.

memkit's stores write from thread pools (a session's expiry refresh, marking messages
extracted, index states). moto's backends are not thread-safe: two concurrent writes could
get one stream sequence number, and the stream reader then read the last record forever
(a CI run hung this way). The `dynamodb_table` fixture makes moto answer one request at a
time, as the local stack's server does; this keeps that true.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import boto3
import pytest

from tests.integration.memory_world import StreamReader

pytestmark = pytest.mark.integration
WRITES = 400


@pytest.fixture
def busy_scheduler() -> Iterator[None]:
    """Threads switch as often as on a loaded machine (where the race showed)."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def test_concurrent_writes_reach_the_stream_once_each_in_order(
    dynamodb_table: str, busy_scheduler: None
) -> None:
    client = boto3.client("dynamodb", region_name="us-east-1")
    reader = StreamReader(dynamodb_table)

    def put(n: int) -> None:
        client.put_item(
            TableName=dynamodb_table,
            Item={"PK": {"S": f"race#{n:04d}"}, "SK": {"S": "item"}},
        )

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(put, range(WRITES)))
    records = reader.read()
    again = reader.read()

    numbers = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    keys = {r["dynamodb"]["Keys"]["PK"]["S"] for r in records}
    assert len(records) == WRITES
    assert keys == {f"race#{n:04d}" for n in range(WRITES)}
    assert numbers == sorted(set(numbers))  # unique and increasing
    assert again == []  # read to the end, and nothing twice


def test_a_cancelled_transaction_leaves_the_stream_readable_by_its_readers(
    dynamodb_table: str,
) -> None:
    # Given a reader that has read the stream, and a transaction that is cancelled
    client = boto3.client("dynamodb", region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = client.describe_table(TableName=dynamodb_table)["Table"]["LatestStreamArn"]
    shard = streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"][0]["ShardId"]
    iterator = streams.get_shard_iterator(
        StreamArn=arn, ShardId=shard, ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    item = {"PK": {"S": "tx"}, "SK": {"S": "item"}}
    client.put_item(TableName=dynamodb_table, Item=item)
    page = streams.get_records(ShardIterator=iterator)
    assert len(page["Records"]) == 1
    cancelled = [
        {"Put": {"TableName": dynamodb_table, "Item": {**item, "PK": {"S": "undone"}}}},
        {
            "Put": {
                "TableName": dynamodb_table,
                "Item": item,
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        },
    ]
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=cancelled)

    # When the table is written again
    client.put_item(TableName=dynamodb_table, Item={"PK": {"S": "after"}, "SK": {"S": "item"}})

    # Then the reader's iterator sees that write, and nothing of the cancelled transaction
    later = streams.get_records(ShardIterator=page["NextShardIterator"])["Records"]
    assert [r["dynamodb"]["Keys"]["PK"]["S"] for r in later] == ["after"]


def test_a_cancelled_transaction_undoes_each_of_its_actions_and_nothing_else(
    dynamodb_table: str,
) -> None:
    # Given items a transaction will replace, delete and update, and one it never names
    client = boto3.client("dynamodb", region_name="us-east-1")

    def item(pk: str, **values: str) -> dict[str, dict[str, str]]:
        return {"PK": {"S": pk}, "SK": {"S": "item"}, **{k: {"S": v} for k, v in values.items()}}

    for pk in ("replaced", "deleted", "updated", "bystander"):
        client.put_item(TableName=dynamodb_table, Item=item(pk, state="before"))
    before = client.scan(TableName=dynamodb_table, ConsistentRead=True)["Items"]
    actions = [
        {"Put": {"TableName": dynamodb_table, "Item": item("replaced", state="after")}},
        {"Put": {"TableName": dynamodb_table, "Item": item("created", state="after")}},
        {"Delete": {"TableName": dynamodb_table, "Key": item("deleted")}},
        {
            "Update": {
                "TableName": dynamodb_table,
                "Key": item("updated"),
                "UpdateExpression": "SET #s = :s",
                "ExpressionAttributeNames": {"#s": "state"},
                "ExpressionAttributeValues": {":s": {"S": "after"}},
            }
        },
        {
            "ConditionCheck": {
                "TableName": dynamodb_table,
                "Key": item("bystander"),
                "ConditionExpression": "attribute_not_exists(PK)",
            }
        },
    ]

    # When the transaction is cancelled by its last action's condition
    with pytest.raises(client.exceptions.TransactionCanceledException):
        client.transact_write_items(TransactItems=actions)

    # Then the table is as it was, item for item, and it still takes writes
    after = client.scan(TableName=dynamodb_table, ConsistentRead=True)["Items"]
    assert sorted(after, key=str) == sorted(before, key=str)
    client.put_item(TableName=dynamodb_table, Item=item("later"))
    assert client.get_item(TableName=dynamodb_table, Key=item("later"), ConsistentRead=True)
