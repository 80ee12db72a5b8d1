"""The queue pump on a real loopback moto server: Lambda's SQS event source mapping, locally."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pytest

from memkit_dev.local.queues import (
    QueuePump,
    create_queues,
    queue_mapping_from_template,
    queue_pump_for,
)
from memkit_dev.local.template import load_template
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

REGION = "us-east-1"
WORK_QUEUE = "MemoryWorkQueue"
DEAD_LETTER_QUEUE = "MemoryWorkDeadLetterQueue"
# Seconds a received message stays hidden in these tests (SQS counts whole seconds).
VISIBILITY = 1


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """moto's server as the local stack runs it: the same endpoint serves SQS and DynamoDB."""
    from memkit_dev.local.dynamodb import MotoDynamoDB

    server = MotoDynamoDB().start()
    yield server.endpoint
    server.stop()


@pytest.fixture
def sqs(endpoint: str) -> Any:
    """A client per test: the fake credentials are set for each test (tests/conftest.py)."""
    import boto3

    return boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)


def _template(max_receive_count: int | None = None) -> dict[str, Any]:
    """template.yaml, with the work queue's maxReceiveCount changed when asked."""
    template = load_template(ROOT / "template.yaml")
    if max_receive_count is None:
        return template
    changed = copy.deepcopy(template)
    redrive = changed["Resources"][WORK_QUEUE]["Properties"]["RedrivePolicy"]
    redrive["maxReceiveCount"] = max_receive_count
    return changed


@dataclass
class Queues:
    sqs: Any
    work: str
    dead_letters: str

    def send(self, body: str, **arguments: Any) -> str:
        sent = self.sqs.send_message(QueueUrl=self.work, MessageBody=body, **arguments)
        return str(sent["MessageId"])

    @property
    def work_arn(self) -> str:
        attributes = self.sqs.get_queue_attributes(QueueUrl=self.work, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    def counts(self, url: str | None = None) -> dict[str, int]:
        attributes = self.sqs.get_queue_attributes(
            QueueUrl=url or self.work,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return {name: int(value) for name, value in attributes.items()}

    def dead_bodies(self) -> list[str]:
        page = self.sqs.receive_message(QueueUrl=self.dead_letters, MaxNumberOfMessages=10)
        return [message["Body"] for message in page.get("Messages", [])]


def _queues(sqs: Any, template: dict[str, Any]) -> Queues:
    suffix = uuid.uuid4().hex[:8]
    urls = create_queues(
        sqs,
        template,
        {WORK_QUEUE: f"work-{suffix}", DEAD_LETTER_QUEUE: f"work-dlq-{suffix}"},
        visibility_timeout=VISIBILITY,
    )
    return Queues(sqs, urls[WORK_QUEUE], urls[DEAD_LETTER_QUEUE])


@pytest.fixture
def queues(sqs: Any) -> Queues:
    """A fresh work queue and its dead-letter queue per test, from template.yaml."""
    return _queues(sqs, _template())


@dataclass
class Function:
    """A recording stand-in for the memory worker: `respond(event)` is its behaviour."""

    respond: Callable[[dict[str, Any]], Any] = lambda event: None
    events: list[dict[str, Any]] = field(default_factory=list)
    times: list[float] = field(default_factory=list)

    def __call__(self, event: dict[str, Any]) -> Any:
        self.events.append(copy.deepcopy(event))
        self.times.append(time.monotonic())
        return self.respond(event)

    @property
    def batches(self) -> list[list[str]]:
        """Each invocation's message bodies."""
        return [[record["body"] for record in event["Records"]] for event in self.events]

    def arrival(self, body: str) -> float:
        return next(t for t, b in zip(self.times, self.batches, strict=True) if body in b)


@pytest.fixture
def run_pump(endpoint: str) -> Iterator[Callable[..., QueuePump]]:
    """run_pump(queues, function, **options) starts a pump on the work queue; stopped after."""
    pumps: list[QueuePump] = []

    def start(queues: Queues, function: Function, **options: Any) -> QueuePump:
        pump = QueuePump(endpoint, REGION, queues.work, function, poll_interval=0.01, **options)
        pump.start()
        pumps.append(pump)
        return pump

    yield start
    for pump in pumps:
        pump.stop()


def failing(*bodies: str, times: int | None = None) -> Callable[[dict[str, Any]], Any]:
    """A function that reports the messages with these bodies as failed (the first `times`)."""
    reported: dict[str, int] = {}

    def respond(event: dict[str, Any]) -> Any:
        failures = []
        for record in event["Records"]:
            body = record["body"]
            if body in bodies and (times is None or reported.get(body, 0) < times):
                reported[body] = reported.get(body, 0) + 1
                failures.append({"itemIdentifier": record["messageId"]})
        return {"batchItemFailures": failures}

    return respond


# -- the record shape ---------------------------------------------------------------------


def test_messages_arrive_in_lambdas_sqs_record_shape(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    from aws_lambda_powertools.utilities.parser.models import SqsModel

    # Given a pump feeding a recording function
    function = Function()
    pump = run_pump(queues, function)
    before_ms = time.time() * 1000

    # When a message with attributes of every type is sent
    message_id = queues.send(
        '{"job": "summarise"}',
        MessageAttributes={
            "kind": {"DataType": "String", "StringValue": "summary"},
            "attempt": {"DataType": "Number", "StringValue": "1"},
            "blob": {"DataType": "Binary", "BinaryValue": b"\x00\x01"},
        },
    )
    pump.drain()

    # Then the function gets it as Lambda's SQS record, and it is deleted from the queue
    [[record]] = [event["Records"] for event in function.events]
    assert list(record) == [
        "messageId",
        "receiptHandle",
        "body",
        "attributes",
        "messageAttributes",
        "md5OfBody",
        "md5OfMessageAttributes",
        "eventSource",
        "eventSourceARN",
        "awsRegion",
    ]
    assert record["messageId"] == message_id
    assert record["body"] == '{"job": "summarise"}'
    assert record["md5OfBody"] == hashlib.md5(record["body"].encode()).hexdigest()
    assert (record["eventSource"], record["eventSourceARN"], record["awsRegion"]) == (
        "aws:sqs",
        queues.work_arn,
        REGION,
    )
    attributes = record["attributes"]
    assert set(attributes) == {
        "ApproximateReceiveCount",
        "SentTimestamp",
        "SenderId",
        "ApproximateFirstReceiveTimestamp",
    }
    assert attributes["ApproximateReceiveCount"] == "1"
    assert all(isinstance(value, str) for value in attributes.values()), "SQS sends strings"
    assert before_ms - 1000 <= int(attributes["SentTimestamp"]) <= time.time() * 1000
    assert record["messageAttributes"] == {
        "kind": {
            "stringValue": "summary",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "String",
        },
        "attempt": {
            "stringValue": "1",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Number",
        },
        "blob": {
            "binaryValue": "AAE=",
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": "Binary",
        },
    }
    SqsModel.model_validate(function.events[0])  # what Powertools' parser accepts
    json.dumps(function.events[0])  # what a Lambda event is: plain JSON
    assert queues.counts() == dict.fromkeys(queues.counts(), 0)
    assert pump.stats.messages_deleted == 1


def test_a_message_without_attributes_has_none_in_its_record(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    function = Function()
    pump = run_pump(queues, function)

    queues.send("plain")
    pump.drain()

    [[record]] = [event["Records"] for event in function.events]
    assert record["messageAttributes"] == {}
    assert "md5OfMessageAttributes" not in record


# -- batching and delays ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("batch_size", "expected"),
    [(5, [5, 5, 2]), (25, [12])],
    ids=["at most batch size", "more than one receive fills a batch"],
)
def test_batches_hold_at_most_batch_size_messages(
    queues: Queues, run_pump: Callable[..., QueuePump], batch_size: int, expected: list[int]
) -> None:
    # Given twelve messages waiting (SQS returns at most 10 a receive)
    for n in range(12):
        queues.send(f"m{n}")
    function = Function()

    # When a pump with this batch size drains the queue
    pump = run_pump(queues, function, batch_size=batch_size)
    pump.drain()

    # Then each invocation holds at most batch_size messages, every message once
    assert [len(batch) for batch in function.batches] == expected
    assert sorted(b for batch in function.batches for b in batch) == sorted(
        f"m{n}" for n in range(12)
    )


def test_a_delayed_message_arrives_only_after_its_delay(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    # Given a running pump
    function = Function()
    pump = run_pump(queues, function)

    # When one message is sent now and one with DelaySeconds 1
    sent = time.monotonic()
    queues.send("later", DelaySeconds=1)
    queues.send("now")
    pump.drain(timeout=5)

    # Then "now" comes at once and "later" only after its delay, in an invocation of its own
    assert function.batches == [["now"], ["later"]]
    assert function.arrival("now") - sent < 0.5
    assert function.arrival("later") - sent >= 0.95


# -- failures ------------------------------------------------------------------------------


def test_a_reported_failure_comes_back_after_the_visibility_timeout_and_the_rest_are_deleted(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    # Given three messages and a function that reports "b" failed the first time
    for body in ("a", "b", "c"):
        queues.send(body)
    function = Function(failing("b", times=1))

    # When the pump drains the queue
    pump = run_pump(queues, function)
    pump.drain(timeout=5)

    # Then only "b" is received again, once its visibility timeout has passed
    assert function.batches == [["a", "b", "c"], ["b"]]
    [retry] = function.events[1]["Records"]
    assert retry["attributes"]["ApproximateReceiveCount"] == "2"
    assert function.times[1] - function.times[0] >= VISIBILITY - 0.05
    assert pump.stats.messages_deleted == 3
    assert pump.stats.partial_failures == 1
    assert queues.dead_bodies() == []


def test_a_message_that_keeps_failing_ends_in_the_dead_letter_queue(
    sqs: Any, run_pump: Callable[..., QueuePump]
) -> None:
    # Given a work queue that redrives after two receives, and a message that always fails
    queues = _queues(sqs, _template(max_receive_count=2))
    queues.send("poison")
    queues.send("fine")
    function = Function(failing("poison"))

    # When the pump drains the queue
    pump = run_pump(queues, function)
    pump.drain(timeout=10)

    # Then the poison message was tried maxReceiveCount times and waits in the dead letters
    tries = [batch for batch in function.batches if "poison" in batch]
    assert len(tries) == 2
    assert [b for batch in function.batches for b in batch].count("fine") == 1
    assert queues.dead_bodies() == ["poison"]
    assert queues.counts() == dict.fromkeys(queues.counts(), 0)


def test_a_function_error_leaves_the_whole_batch_in_the_queue(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    # Given two messages and a function that raises on its first invocation
    calls = []

    def respond(event: dict[str, Any]) -> Any:
        calls.append(event)
        if len(calls) == 1:
            raise RuntimeError("the model timed out")
        return None

    queues.send("a")
    queues.send("b")
    function = Function(respond)

    # When the pump drains the queue
    pump = run_pump(queues, function)
    pump.drain(timeout=5)

    # Then nothing was deleted after the error: both come back together, then are deleted
    assert function.batches == [["a", "b"], ["a", "b"]]
    assert {r["attributes"]["ApproximateReceiveCount"] for r in function.events[1]["Records"]} == {
        "2"
    }
    assert pump.stats.function_errors == 1
    assert pump.stats.messages_deleted == 2


@pytest.mark.parametrize(
    "failure",
    [{"itemIdentifier": "not-in-this-batch"}, {"itemIdentifier": ""}, {"id": "a"}],
    ids=["unknown id", "empty id", "another key"],
)
def test_an_unusable_item_identifier_fails_the_whole_batch(
    queues: Queues, run_pump: Callable[..., QueuePump], failure: dict[str, str]
) -> None:
    # Given a function whose first response names no message of the batch
    responses = iter([{"batchItemFailures": [failure]}])
    queues.send("a")
    queues.send("b")
    function = Function(lambda event: next(responses, None))

    # When the pump drains the queue
    pump = run_pump(queues, function)
    pump.drain(timeout=5)

    # Then Lambda's rule applies: the whole batch failed and comes back
    assert function.batches == [["a", "b"], ["a", "b"]]


def test_item_failures_are_ignored_unless_the_mapping_reports_them(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    queues.send("a")
    function = Function(failing("a"))

    pump = run_pump(queues, function, report_batch_item_failures=False)
    pump.drain()

    assert function.batches == [["a"]]
    assert pump.stats.messages_deleted == 1


def test_an_invoke_returning_a_future_is_awaited_as_local_function_invoke_does(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    recorder = Function(failing("a", times=1))

    def invoke(event: dict[str, Any]) -> Future[Any]:
        future: Future[Any] = Future()
        threading.Timer(0.05, lambda: future.set_result(recorder(event))).start()
        return future

    queues.send("a")
    pump = QueuePump(queues.sqs.meta.endpoint_url, REGION, queues.work, invoke, poll_interval=0.01)
    pump.start()
    try:
        pump.drain(timeout=5)
    finally:
        pump.stop()

    assert recorder.batches == [["a"], ["a"]]


# -- drain ---------------------------------------------------------------------------------


def test_drain_returns_once_the_queue_is_empty_and_nothing_is_in_flight(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    # Given a slow function and messages sent while the pump runs
    function = Function(lambda event: time.sleep(0.2))
    pump = run_pump(queues, function, batch_size=2)
    for n in range(5):
        queues.send(f"m{n}")

    # When drain returns
    pump.drain(timeout=5)

    # Then every message was handled and SQS holds nothing, visible, in flight or delayed
    assert sorted(b for batch in function.batches for b in batch) == [f"m{n}" for n in range(5)]
    assert queues.counts() == {
        "ApproximateNumberOfMessages": 0,
        "ApproximateNumberOfMessagesNotVisible": 0,
        "ApproximateNumberOfMessagesDelayed": 0,
    }


def test_drain_times_out_while_a_failed_message_waits_to_come_back(
    queues: Queues, run_pump: Callable[..., QueuePump]
) -> None:
    function = Function(failing("a"))
    queues.send("a")
    pump = run_pump(queues, function)

    with pytest.raises(TimeoutError):
        pump.drain(timeout=0.5)

    assert function.batches == [["a"]]


def test_drain_refuses_a_pump_that_is_not_running(endpoint: str, queues: Queues) -> None:
    pump = QueuePump(endpoint, REGION, queues.work, Function())

    with pytest.raises(RuntimeError):
        pump.drain(timeout=0.1)


# -- the template --------------------------------------------------------------------------


def test_the_template_queues_are_created_with_their_redrive_policy(sqs: Any) -> None:
    # When the template's work queue and dead-letter queue are created locally
    suffix = uuid.uuid4().hex[:8]
    urls = create_queues(
        sqs,
        _template(),
        {WORK_QUEUE: f"work-{suffix}", DEAD_LETTER_QUEUE: f"work-dlq-{suffix}"},
    )

    # Then the work queue redrives to the created dead-letter queue after the template's
    # count, and hides a received message for the short local visibility timeout
    work = sqs.get_queue_attributes(QueueUrl=urls[WORK_QUEUE], AttributeNames=["All"])
    dead = sqs.get_queue_attributes(QueueUrl=urls[DEAD_LETTER_QUEUE], AttributeNames=["All"])
    redrive = json.loads(work["Attributes"]["RedrivePolicy"])
    expected = _template()["Resources"][WORK_QUEUE]["Properties"]["RedrivePolicy"]
    assert redrive["deadLetterTargetArn"] == dead["Attributes"]["QueueArn"]
    assert int(redrive["maxReceiveCount"]) == expected["maxReceiveCount"] == 5
    assert work["Attributes"]["VisibilityTimeout"] == "2"
    assert work["Attributes"]["MessageRetentionPeriod"] == "345600"
    assert dead["Attributes"]["MessageRetentionPeriod"] == "1209600"


def test_a_queue_whose_dead_letter_queue_is_not_named_is_refused(sqs: Any) -> None:
    with pytest.raises(ValueError, match="MemoryWorkDeadLetterQueue"):
        create_queues(sqs, _template(), {WORK_QUEUE: f"work-{uuid.uuid4().hex[:8]}"})


def test_the_workers_mapping_is_read_from_its_sqs_event() -> None:
    mapping = queue_mapping_from_template(_template(), "MemoryWorkerFunction")

    assert mapping.queue_resource == WORK_QUEUE
    assert mapping.batch_size == 5
    assert mapping.report_batch_item_failures is True
    assert mapping.maximum_concurrency == 2


def test_a_mapping_with_filter_criteria_is_refused() -> None:
    template = copy.deepcopy(_template())
    [event] = template["Resources"]["MemoryWorkerFunction"]["Properties"]["Events"].values()
    event["Properties"]["FilterCriteria"] = {"Filters": [{"Pattern": '{"body": {"a": [1]}}'}]}

    with pytest.raises(ValueError, match="filter"):
        queue_mapping_from_template(template, "MemoryWorkerFunction")


def test_queue_pump_for_feeds_the_worker_as_its_event_says(endpoint: str, queues: Queues) -> None:
    # Given the worker's pump, built from template.yaml
    function = Function(failing("a", times=1))
    pump = queue_pump_for(
        _template(), "MemoryWorkerFunction", endpoint, REGION, queues.work, function, 0.01
    )
    for n in range(7):
        queues.send("a" if n == 0 else f"m{n}")

    # When it drains the queue
    pump.start()
    try:
        pump.drain(timeout=5)
    finally:
        pump.stop()

    # Then batches are the template's five, and reported failures are honoured
    assert (pump.batch_size, pump.report_batch_item_failures) == (5, True)
    assert [len(batch) for batch in function.batches] == [5, 2, 1]
    assert function.batches[-1] == ["a"]
