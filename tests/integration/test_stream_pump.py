"""The stream pump on a real loopback moto server: Lambda's event source mapping, locally."""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pytest

from memkit_dev.local.streams import EventSourceMapping, StreamPump, lambda_record, pump_for
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

REGION = "us-east-1"

# The indexer's event in template.yaml (another change adds it there); the tests read this
# copy so they do not depend on that work.
INDEXER_TEMPLATE: dict[str, Any] = {
    "Parameters": {
        "IndexerBatchSize": {"Type": "Number", "Default": 100},
        "IndexerBatchingWindowSeconds": {"Type": "Number", "Default": 1},
        "IndexerMaximumRetryAttempts": {"Type": "Number", "Default": 5},
        "IndexerMaximumRecordAgeSeconds": {"Type": "Number", "Default": 86400},
    },
    "Resources": {
        "IndexerFunction": {
            "Type": "AWS::Serverless::Function",
            "Properties": {
                "CodeUri": "functions/indexer/",
                "Handler": "stream_indexer.lambda_handler",
                "Events": {
                    "TableStream": {
                        "Type": "DynamoDB",
                        "Properties": {
                            "Stream": {"Fn::GetAtt": ["MemoryTable", "StreamArn"]},
                            "StartingPosition": "TRIM_HORIZON",
                            "BatchSize": {"Ref": "IndexerBatchSize"},
                            "MaximumBatchingWindowInSeconds": {
                                "Ref": "IndexerBatchingWindowSeconds"
                            },
                            "BisectBatchOnFunctionError": True,
                            "MaximumRetryAttempts": {"Ref": "IndexerMaximumRetryAttempts"},
                            "MaximumRecordAgeInSeconds": {"Ref": "IndexerMaximumRecordAgeSeconds"},
                            "FunctionResponseTypes": ["ReportBatchItemFailures"],
                            "DestinationConfig": {
                                "OnFailure": {
                                    "Destination": {"Fn::GetAtt": ["IndexerDeadLetterQueue", "Arn"]}
                                }
                            },
                            "FilterCriteria": {
                                "Filters": [
                                    {
                                        "Pattern": '{"dynamodb": {"NewImage": {"kind": '
                                        '{"S": ["record", "memory"]}}}}'
                                    },
                                    {
                                        "Pattern": '{"dynamodb": '
                                        '{"OldImage": {"kind": {"S": ["record"]}}}}'
                                    },
                                    {
                                        "Pattern": '{"dynamodb": {"NewImage": {"kind": '
                                        '{"S": ["message"]}, "idx": {"S": ["1"]}}}}'
                                    },
                                    {
                                        "Pattern": '{"dynamodb": '
                                        '{"OldImage": {"kind": {"S": ["message"]}, '
                                        '"idx": {"S": ["1"]}}}}'
                                    },
                                ]
                            },
                        },
                    }
                },
            },
        }
    },
}

# Fast local settings; each test overrides what it exercises.
PLAIN = EventSourceMapping(batch_size=100, starting_position="TRIM_HORIZON")


# -- the moto server, a table, pumps -----------------------------------------------------


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    from memkit_dev.local.dynamodb import MotoDynamoDB

    server = MotoDynamoDB().start()
    yield server.endpoint
    server.stop()


@dataclass
class Table:
    name: str
    client: Any

    def put(self, sk: str, kind: str | None = "record", **attributes: Any) -> None:
        item: dict[str, Any] = {"PK": {"S": "t1#u1"}, "SK": {"S": sk}}
        if kind is not None:
            item["kind"] = {"S": kind}
        item.update(attributes)
        self.client.put_item(TableName=self.name, Item=item)

    def update(self, sk: str, text: str) -> None:
        self.client.update_item(
            TableName=self.name,
            Key={"PK": {"S": "t1#u1"}, "SK": {"S": sk}},
            UpdateExpression="SET #t = :t",
            ExpressionAttributeNames={"#t": "text"},
            ExpressionAttributeValues={":t": {"S": text}},
        )

    def delete(self, sk: str) -> None:
        self.client.delete_item(TableName=self.name, Key={"PK": {"S": "t1#u1"}, "SK": {"S": sk}})

    @property
    def stream_arn(self) -> str:
        return str(self.client.describe_table(TableName=self.name)["Table"]["LatestStreamArn"])


@pytest.fixture
def table(endpoint: str) -> Table:
    """A fresh table per test, created from template.yaml's MemoryTable."""
    from memkit_dev.local.dynamodb import dynamodb_client
    from memkit_dev.local.template import create_table, load_template

    client = dynamodb_client(endpoint, REGION)
    name = f"pump-{uuid.uuid4().hex[:8]}"
    create_table(client, load_template(ROOT / "template.yaml"), name)
    return Table(name, client)


@dataclass
class Function:
    """A recording stand-in for the indexer: `respond(event)` is its behaviour."""

    respond: Callable[[dict[str, Any]], Any] = lambda event: None
    events: list[dict[str, Any]] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)

    def __call__(self, event: dict[str, Any]) -> Any:
        self.events.append(copy.deepcopy(event))
        return self.respond(event)

    def on_failure(self, info: dict[str, Any]) -> None:
        self.failures.append(info)

    @property
    def batches(self) -> list[list[str]]:
        """Each invocation's sort keys."""
        return [[r["dynamodb"]["Keys"]["SK"]["S"] for r in e["Records"]] for e in self.events]


@pytest.fixture
def run_pump(endpoint: str, table: Table) -> Iterator[Callable[..., StreamPump]]:
    """run_pump(function, mapping) starts a pump on the test's table; stopped afterwards."""
    pumps: list[StreamPump] = []

    def start(function: Function, mapping: EventSourceMapping = PLAIN) -> StreamPump:
        pump = StreamPump(
            endpoint,
            REGION,
            table.name,
            mapping,
            function,
            on_failure=function.on_failure,
            poll_interval=0.01,
        )
        pump.start()
        pumps.append(pump)
        return pump

    yield start
    for pump in pumps:
        pump.stop()


def sort_keys(records: list[dict[str, Any]]) -> list[str]:
    return [record["dynamodb"]["Keys"]["SK"]["S"] for record in records]


def all_records(function: Function) -> list[dict[str, Any]]:
    return [record for event in function.events for record in event["Records"]]


def raising_on(marker: str) -> Callable[[dict[str, Any]], Any]:
    """A function that fails (raises) on any batch holding the item with sort key `marker`."""

    def respond(event: dict[str, Any]) -> Any:
        if marker in sort_keys(event["Records"]):
            raise RuntimeError("poison record")
        return {"batchItemFailures": []}

    return respond


# -- the record shape ---------------------------------------------------------------------


def test_changes_arrive_in_order_in_lambdas_record_shape(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given a pump feeding a recording function
    function = Function()
    pump = run_pump(function)
    before = time.time()

    # When an item is inserted, modified and removed
    table.put("rec#1", blob={"B": b"\x00\x01"}, tags={"SS": ["a"]})
    table.update("rec#1", "changed")
    table.delete("rec#1")
    pump.drain()

    # Then the function gets INSERT, MODIFY, REMOVE in order, shaped as Lambda sends them
    records = all_records(function)
    assert [r["eventName"] for r in records] == ["INSERT", "MODIFY", "REMOVE"]
    stream_arn = table.stream_arn
    for record in records:
        assert record["eventVersion"] == "1.1"
        assert record["eventSource"] == "aws:dynamodb"
        assert record["awsRegion"] == REGION
        assert record["eventSourceARN"] == stream_arn
        assert re.fullmatch(r"[0-9a-f]+", record["eventID"])
        dynamodb = record["dynamodb"]
        assert dynamodb["Keys"] == {"PK": {"S": "t1#u1"}, "SK": {"S": "rec#1"}}
        assert dynamodb["StreamViewType"] == "NEW_AND_OLD_IMAGES"
        assert isinstance(dynamodb["SizeBytes"], int)
        created = dynamodb["ApproximateCreationDateTime"]
        assert isinstance(created, float), "epoch seconds, not a datetime"
        assert before - 1 <= created <= time.time()
        json.dumps(record)  # what a Lambda event is: plain JSON
    insert, modify, remove = (r["dynamodb"] for r in records)
    assert "OldImage" not in insert
    assert insert["NewImage"]["blob"] == {"B": "AAE="}, "binary values are base64, as in Lambda"
    assert insert["NewImage"]["tags"] == {"SS": ["a"]}
    assert modify["OldImage"]["kind"] == {"S": "record"}
    assert modify["NewImage"]["text"] == {"S": "changed"}
    assert "NewImage" not in remove
    assert remove["OldImage"]["text"] == {"S": "changed"}
    sequence = [int(r["dynamodb"]["SequenceNumber"]) for r in records]
    assert sequence == sorted(sequence)
    assert len(set(sequence)) == 3


def test_lambda_record_carries_the_ttl_user_identity() -> None:
    # moto sets no userIdentity; the Streams API spells it Type/PrincipalId.
    raw = {
        "eventID": "abc",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": REGION,
        "dynamodb": {
            "ApproximateCreationDateTime": datetime(2025, 1, 2, 3, 4, 5, 600000, tzinfo=UTC),
            "Keys": {"PK": {"S": "a"}, "SK": {"S": "b"}},
            "OldImage": {"PK": {"S": "a"}, "SK": {"S": "b"}, "nums": {"NS": ["1", "2"]}},
            "SequenceNumber": "42",
            "SizeBytes": 20,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "userIdentity": {"Type": "Service", "PrincipalId": "dynamodb.amazonaws.com"},
    }

    record = lambda_record(raw, "arn:aws:dynamodb:us-east-1:1:table/t/stream/x", REGION)

    assert record["userIdentity"] == {"type": "Service", "principalId": "dynamodb.amazonaws.com"}
    assert record["dynamodb"]["ApproximateCreationDateTime"] == 1735787045.0
    assert record["dynamodb"]["OldImage"]["nums"] == {"NS": ["1", "2"]}


# -- filtering -----------------------------------------------------------------------------


def test_filters_pass_indexable_changes_and_drop_the_rest(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given the indexer's mapping (its four patterns), without a batching window
    mapping = replace(
        EventSourceMapping.from_template(INDEXER_TEMPLATE, "IndexerFunction"),
        batching_window_seconds=0,
    )
    function = Function(respond=lambda event: {"batchItemFailures": []})
    pump = run_pump(function, mapping)

    # When items of every kind are written and some removed
    table.put("rec#1", kind="record")
    table.put("mem#1", kind="memory")
    table.put("msg#1", kind="message", idx={"S": "1"})
    table.put("msg#2", kind="message", idx={"S": "2"})
    table.put("msg#3", kind="message")
    table.put("profile", kind="profile")
    table.put("session", kind="session")
    table.put("bare", kind=None)
    table.delete("rec#1")
    table.delete("msg#1")
    table.delete("msg#2")
    table.delete("mem#1")
    table.delete("profile")
    pump.drain()

    # Then only records, memories and first message parts reach the function (and their
    # removes, judged by the old image), in order; everything else counts as filtered
    records = all_records(function)
    assert [(r["eventName"], r["dynamodb"]["Keys"]["SK"]["S"]) for r in records] == [
        ("INSERT", "rec#1"),
        ("INSERT", "mem#1"),
        ("INSERT", "msg#1"),
        ("REMOVE", "rec#1"),
        ("REMOVE", "msg#1"),
    ]
    stats = pump.stats
    assert stats.records_read == 13
    assert stats.records_filtered == 8
    assert stats.records_delivered == 5


# -- batching ------------------------------------------------------------------------------


def test_batches_hold_at_most_batch_size_records(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given seven changes already in the stream
    for n in range(7):
        table.put(f"rec#{n}")
    function = Function()

    # When a pump with a batch size of 3 reads them
    pump = run_pump(function, replace(PLAIN, batch_size=3))
    pump.drain()

    # Then they arrive in order in batches of 3, 3 and 1
    assert function.batches == [["rec#0", "rec#1", "rec#2"], ["rec#3", "rec#4", "rec#5"], ["rec#6"]]


def test_the_batching_window_gathers_records_into_one_invocation(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given a pump that waits up to a second to fill a batch
    function = Function()
    pump = run_pump(function, replace(PLAIN, batching_window_seconds=1.0))

    # When a few changes are written in quick succession
    for n in range(4):
        table.put(f"rec#{n}")
    pump.drain()

    # Then they arrive together
    assert function.batches == [["rec#0", "rec#1", "rec#2", "rec#3"]]


def test_latest_starts_after_what_the_stream_already_holds(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    table.put("old")
    function = Function()
    pump = run_pump(function, replace(PLAIN, starting_position="LATEST"))

    table.put("new")
    pump.drain()

    assert function.batches == [["new"]]


# -- partial failures ----------------------------------------------------------------------


def test_a_partial_failure_retries_from_the_lowest_failed_record(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given five changes and a function that reports rec#2 and rec#4 failed, once
    for n in range(5):
        table.put(f"rec#{n}")
    calls = 0

    def respond(event: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            return {"batchItemFailures": []}
        by_key = {r["dynamodb"]["Keys"]["SK"]["S"]: r for r in event["Records"]}
        return {
            "batchItemFailures": [
                {"itemIdentifier": by_key[key]["dynamodb"]["SequenceNumber"]}
                for key in ("rec#4", "rec#2")
            ]
        }

    function = Function(respond=respond)

    # When the pump delivers them with ReportBatchItemFailures on
    pump = run_pump(function, replace(PLAIN, report_batch_item_failures=True))
    pump.drain()

    # Then the retry starts at rec#2, and rec#0 and rec#1 are not delivered again
    assert function.batches == [
        ["rec#0", "rec#1", "rec#2", "rec#3", "rec#4"],
        ["rec#2", "rec#3", "rec#4"],
    ]
    assert pump.stats.records_delivered == 5
    assert pump.stats.partial_failures == 1


@pytest.mark.parametrize(
    "failure",
    [
        {"itemIdentifier": ""},
        {"itemIdentifier": None},
        {"itemId": "{first}"},
        {"itemIdentifier": "12345"},
    ],
    ids=["empty", "null", "bad-key", "not-in-batch"],
)
def test_an_unusable_item_identifier_fails_the_whole_batch(
    table: Table, run_pump: Callable[..., StreamPump], failure: dict[str, Any]
) -> None:
    # Given a function whose first answer names no record of the batch properly
    for n in range(3):
        table.put(f"rec#{n}")
    calls = 0

    def respond(event: dict[str, Any]) -> Any:
        nonlocal calls
        calls += 1
        first = event["Records"][0]["dynamodb"]["SequenceNumber"]
        answer = {k: v.format(first=first) if isinstance(v, str) else v for k, v in failure.items()}
        return {"batchItemFailures": [answer]} if calls == 1 else {}

    function = Function(respond=respond)

    # When the pump delivers them
    pump = run_pump(function, replace(PLAIN, report_batch_item_failures=True))
    pump.drain()

    # Then the whole batch is retried
    assert function.batches == [["rec#0", "rec#1", "rec#2"]] * 2


def test_item_failures_are_ignored_unless_the_mapping_reports_them(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    table.put("rec#0")
    function = Function(respond=lambda event: {"batchItemFailures": [{"itemIdentifier": ""}]})

    pump = run_pump(function, replace(PLAIN, report_batch_item_failures=False))
    pump.drain()

    assert function.batches == [["rec#0"]]
    assert pump.stats.records_delivered == 1


# -- function errors, bisecting, retries and the on-failure destination --------------------


def test_bisecting_on_function_errors_isolates_a_poison_record(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given eight changes, the fifth of which makes the function raise
    for n in range(8):
        table.put(f"rec#{n}")
    function = Function(respond=raising_on("rec#4"))
    mapping = replace(PLAIN, bisect_on_error=True, maximum_retry_attempts=2)

    # When the pump delivers them with bisecting on
    pump = run_pump(function, mapping)
    pump.drain()

    # Then every other record is delivered, in order, and the poison fails alone
    succeeded = [batch for batch in function.batches if "rec#4" not in batch]
    assert [key for batch in succeeded for key in batch] == [
        f"rec#{n}" for n in (0, 1, 2, 3, 5, 6, 7)
    ]
    assert function.batches.count(["rec#4"]) == 3, "the poison alone: one try and two retries"
    [failure] = function.failures
    info = failure["DDBStreamBatchInfo"]
    assert info["batchSize"] == 1
    assert info["startSequenceNumber"] == info["endSequenceNumber"]
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["responseContext"]["functionError"] == "Unhandled"
    assert pump.stats.records_failed == 1
    assert pump.stats.records_delivered == 7


def test_exhausted_retries_send_the_batch_to_the_destination_and_the_shard_moves_on(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given three changes, one of them poison, and no bisecting
    for key in ("rec#0", "poison", "rec#1"):
        table.put(key)
    function = Function(respond=raising_on("poison"))
    mapping = replace(PLAIN, maximum_retry_attempts=1)
    pump = run_pump(function, mapping)

    # When the pump has given up on them and later changes arrive
    pump.drain()
    table.put("rec#2")
    pump.drain()

    # Then the whole batch went to on_failure after one retry, described as Lambda does
    assert function.batches == [["rec#0", "poison", "rec#1"]] * 2 + [["rec#2"]]
    [failure] = function.failures
    records = all_records(function)
    assert failure["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert failure["requestContext"]["approximateInvokeCount"] == 2
    assert failure["requestContext"]["functionArn"].startswith("arn:aws:lambda:us-east-1:")
    assert failure["version"] == "1.0"
    info = failure["DDBStreamBatchInfo"]
    assert info["streamArn"] == table.stream_arn
    assert info["shardId"].startswith("shardId-")
    assert info["startSequenceNumber"] == records[0]["dynamodb"]["SequenceNumber"]
    assert info["endSequenceNumber"] == records[2]["dynamodb"]["SequenceNumber"]
    assert info["batchSize"] == 3
    for key in ("approximateArrivalOfFirstRecord", "approximateArrivalOfLastRecord"):
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", info[key])
    assert "Records" not in failure
    assert "poison" not in json.dumps(failure), "no item content in the destination record"
    assert pump.stats.records_failed == 3


def test_records_older_than_the_maximum_age_are_discarded_without_an_invocation(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given two changes that are older than the mapping's maximum record age
    table.put("rec#0")
    table.put("rec#1")
    time.sleep(1.2)
    function = Function()

    # When a pump with a one-second maximum age starts, and a fresh change follows
    pump = run_pump(function, replace(PLAIN, maximum_record_age_seconds=1))
    pump.drain()
    table.put("rec#2")
    pump.drain()

    # Then the old ones go to on_failure as RecordAgeExceeded; the fresh one is delivered
    assert function.batches == [["rec#2"]]
    [failure] = function.failures
    assert failure["requestContext"]["condition"] == "RecordAgeExceeded"
    assert failure["DDBStreamBatchInfo"]["batchSize"] == 2


def test_an_invoke_returning_a_future_is_awaited_as_local_function_invoke_does(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    # Given an invoke that hands back a Future (as LocalFunction.invoke does)
    from concurrent.futures import Future, ThreadPoolExecutor

    function = Function(respond=raising_on("poison"))
    executor = ThreadPoolExecutor(max_workers=1)

    def invoke(event: dict[str, Any]) -> Future[Any]:
        return executor.submit(function, event)

    table.put("poison")
    table.put("rec#0")

    # When the pump delivers one record at a time through it, with no retries
    try:
        mapping = replace(PLAIN, batch_size=1, maximum_retry_attempts=0)
        pump = run_pump(Function(respond=invoke), mapping)
        pump.drain()
    finally:
        executor.shutdown()

    # Then the Future's exception is a function error and its result a success
    assert function.batches == [["poison"], ["rec#0"]]
    assert pump.stats.function_errors == 1
    assert pump.stats.records_failed == 1
    assert pump.stats.records_delivered == 1


# -- drain ---------------------------------------------------------------------------------


def test_drain_returns_once_every_earlier_change_is_delivered(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    function = Function()
    pump = run_pump(function, replace(PLAIN, batch_size=10))

    for n in range(25):
        table.put(f"rec#{n:02}")
    pump.drain()

    assert sort_keys(all_records(function)) == [f"rec#{n:02}" for n in range(25)]
    assert pump.stats.records_delivered == 25


def test_drain_times_out_while_the_function_is_stuck(
    table: Table, run_pump: Callable[..., StreamPump]
) -> None:
    release = threading.Event()
    function = Function(respond=lambda event: release.wait(5))
    pump = run_pump(function)
    table.put("rec#0")

    with pytest.raises(TimeoutError):
        pump.drain(timeout=0.3)
    release.set()
    pump.drain()

    assert function.batches == [["rec#0"]]


# -- the template --------------------------------------------------------------------------


def test_the_mapping_is_read_from_the_functions_dynamodb_event() -> None:
    mapping = EventSourceMapping.from_template(INDEXER_TEMPLATE, "IndexerFunction")

    assert mapping.batch_size == 100
    assert mapping.batching_window_seconds == 1
    assert mapping.bisect_on_error is True
    assert mapping.maximum_retry_attempts == 5
    assert mapping.maximum_record_age_seconds == 86400
    assert mapping.report_batch_item_failures is True
    assert mapping.starting_position == "TRIM_HORIZON"
    assert len(mapping.filters) == 4


def test_a_mapping_with_an_unsupported_filter_is_refused() -> None:
    template = copy.deepcopy(INDEXER_TEMPLATE)
    properties = template["Resources"]["IndexerFunction"]["Properties"]
    properties["Events"]["TableStream"]["Properties"]["FilterCriteria"]["Filters"].append(
        {"Pattern": '{"dynamodb": {"Keys": {"PK": {"S": [{"wildcard": "t1#*"}]}}}}'}
    )

    with pytest.raises(ValueError, match="wildcard"):
        EventSourceMapping.from_template(template, "IndexerFunction")


def test_the_deployed_template_indexer_mapping_is_readable() -> None:
    from memkit_dev.local.template import load_template

    template = load_template(ROOT / "template.yaml")
    if "IndexerFunction" not in template.get("Resources", {}):
        pytest.skip("template.yaml has no IndexerFunction yet")

    mapping = EventSourceMapping.from_template(template, "IndexerFunction")

    assert mapping.report_batch_item_failures
    assert mapping.filters


def test_pump_for_builds_a_pump_from_the_template(endpoint: str, table: Table) -> None:
    function = Function(respond=lambda event: {"batchItemFailures": []})
    pump = pump_for(INDEXER_TEMPLATE, "IndexerFunction", endpoint, REGION, table.name, function)
    pump.start()
    try:
        table.put("mem#1", kind="memory")
        pump.drain()
    finally:
        pump.stop()

    assert function.batches == [["mem#1"]]
    assert pump.mapping.batching_window_seconds == 1


def test_an_iterator_gone_stale_is_found_and_the_shard_followed_again(
    table: Table,
    run_pump: Callable[..., StreamPump],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    # Given a pump that delivered a record, and moto's own rollback, which replaces the
    # table's stream shard under every iterator handed out (memkit mends it; not here)
    function = Function()
    pump = run_pump(function)
    table.put("rec#1")
    pump.drain()
    monkeypatch.setattr(
        DynamoDBBackend, "transact_write_items", DynamoDBBackend._memkit_rollback_loses_shards
    )
    cancelled = {
        "Put": {
            "TableName": table.name,
            "Item": {"PK": {"S": "t1#u1"}, "SK": {"S": "rec#1"}, "kind": {"S": "record"}},
            "ConditionExpression": "attribute_not_exists(PK)",
        }
    }
    with pytest.raises(table.client.exceptions.TransactionCanceledException):
        table.client.transact_write_items(TransactItems=[cancelled])

    # When the table is written again
    table.put("rec#2")

    # Then the pump finds its iterator stale, follows the shard again and delivers the write
    deadline = time.monotonic() + 120  # generous: the check runs every few seconds
    while "rec#2" not in sort_keys(all_records(function)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sort_keys(all_records(function)) == ["rec#1", "rec#2"]
    assert pump.stats.stale_iterators == 1
    assert "went stale" in caplog.text
