"""The queue pump: the local stack's Lambda event source mapping for an SQS queue.

It does what Lambda's SQS poller does for a standard queue (Lambda developer guide, "Using
Lambda with Amazon SQS", "Handling errors for an SQS event source" and "Implementing
partial batch responses"): receives up to BatchSize messages, hands them to the function
as an SQS event (the record shape Lambda sends), and deletes what the function processed.
SQS itself (moto's, here) keeps the rest: a message is invisible for the queue's
VisibilityTimeout after each receive, a message sent with DelaySeconds is not received
before its delay, and the queue's RedrivePolicy moves a message received maxReceiveCount
times to its dead-letter queue on the next receive.

Outcomes follow Lambda's rules for SQS:
- ReportBatchItemFailures on: `{"batchItemFailures": [{"itemIdentifier": messageId}, ...]}`
  leaves the listed messages in the queue and deletes the others; an empty or missing list
  (or no response) deletes them all; an identifier that is null, empty, under another key
  or not a message id of the batch fails the whole batch. With it off, any response is a
  success.
- A function error (the invoke raised) deletes nothing: the whole batch is received again
  once its visibility timeout ends.

One batch is invoked at a time (Lambda runs several at once, up to the mapping's
MaximumConcurrency). Logs carry counts and message ids, never message bodies.

moto's server (memkit_dev.local.dynamodb.MotoDynamoDB runs moto's DomainDispatcherApplication)
serves SQS (and DynamoDB, when the stack runs on moto). It handles one request at a time, so a
long poll (`wait_seconds` > 0) holds every other call to it for its duration: keep it 0
against the local server.
"""

from __future__ import annotations

import base64
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Any

from memkit_dev.local.streams import _resolve

__all__ = [
    "LOCAL_VISIBILITY_TIMEOUT_SECONDS",
    "QueueMapping",
    "QueuePump",
    "QueueStats",
    "create_queues",
    "lambda_message",
    "queue_mapping_from_template",
    "queue_pump_for",
]

log = logging.getLogger(__name__)

# ReceiveMessage returns at most 10 messages a call; DeleteMessageBatch takes at most 10.
RECEIVE_LIMIT = 10
DELETE_LIMIT = 10
# Local queues hide a received message this long (the template's is minutes), so a failed
# message comes back within a test.
LOCAL_VISIBILITY_TIMEOUT_SECONDS = 2
# With nothing arriving for a while, poll at Lambda's idle rate instead.
IDLE_AFTER_SECONDS = 2.0
IDLE_POLL_SECONDS = 0.25
ERROR_BACKOFF_SECONDS = 0.5
# The system attributes of Lambda's SQS record: always these four, then FIFO's and the
# trace header when SQS has them.
RECORD_ATTRIBUTES = ("ApproximateReceiveCount", "SentTimestamp", "SenderId")
FIRST_RECEIVE_ATTRIBUTE = "ApproximateFirstReceiveTimestamp"
OPTIONAL_RECORD_ATTRIBUTES = (
    "SequenceNumber",
    "MessageGroupId",
    "MessageDeduplicationId",
    "AWSTraceHeader",
    "DeadLetterQueueSourceArn",
)
# Queue properties of AWS::SQS::Queue that CreateQueue takes as attributes.
QUEUE_ATTRIBUTES = (
    "DelaySeconds",
    "MaximumMessageSize",
    "MessageRetentionPeriod",
    "ReceiveMessageWaitTimeSeconds",
    "VisibilityTimeout",
)

Invoke = Callable[[dict[str, Any]], Any]


@dataclass(frozen=True)
class QueueMapping:
    """The settings of a function's SQS event (Lambda's defaults where the template is silent)."""

    queue_resource: str
    batch_size: int = 10
    report_batch_item_failures: bool = False
    maximum_concurrency: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10,000")
        if self.maximum_concurrency is not None and not 2 <= self.maximum_concurrency <= 1000:
            raise ValueError("maximum_concurrency must be between 2 and 1,000")


def queue_mapping_from_template(template: dict[str, Any], function_resource: str) -> QueueMapping:
    """The first SQS event of a function in template.yaml; Refs take the parameter's Default."""
    resource = template["Resources"][function_resource]
    events = resource.get("Properties", {}).get("Events") or {}
    found = [e for e in events.values() if isinstance(e, dict) and e.get("Type") == "SQS"]
    if not found:
        raise ValueError(f"{function_resource} has no event of Type SQS")
    properties: dict[str, Any] = found[0].get("Properties") or {}
    parameters: dict[str, Any] = template.get("Parameters") or {}

    def value(name: str, default: Any = None) -> Any:
        return _resolve(properties.get(name, default), parameters, name)

    if properties.get("FilterCriteria"):
        raise ValueError("filter criteria on SQS events are not supported by the local queue pump")
    if int(value("MaximumBatchingWindowInSeconds", 0)) != 0:
        raise ValueError("batching windows on SQS events are not supported by the local queue pump")
    response_types = [
        _resolve(item, parameters, "FunctionResponseTypes")
        for item in value("FunctionResponseTypes", []) or []
    ]
    scaling = value("ScalingConfig", {}) or {}
    concurrency = _resolve(scaling.get("MaximumConcurrency"), parameters, "MaximumConcurrency")
    return QueueMapping(
        queue_resource=_queue_resource(properties.get("Queue"), function_resource),
        batch_size=int(value("BatchSize", 10)),
        report_batch_item_failures="ReportBatchItemFailures" in response_types,
        maximum_concurrency=None if concurrency is None else int(concurrency),
    )


def _queue_resource(queue: Any, function_resource: str) -> str:
    """The logical id behind an SQS event's Queue (!GetAtt Queue.Arn)."""
    if isinstance(queue, dict) and "Fn::GetAtt" in queue:
        name, attribute = queue["Fn::GetAtt"]
        if attribute == "Arn":
            return str(name)
    raise ValueError(f"{function_resource}: the SQS event's Queue must be !GetAtt <queue>.Arn")


# -- creating the template's queues -----------------------------------------------------


def create_queues(
    client: Any,
    template: dict[str, Any],
    names: Mapping[str, str],
    visibility_timeout: int | None = LOCAL_VISIBILITY_TIMEOUT_SECONDS,
) -> dict[str, str]:
    """Create the template's queues (logical id -> queue name) and return their URLs.

    Attributes come from each AWS::SQS::Queue, a RedrivePolicy points at the queue created
    for its dead-letter target (which must be named too, and is created first), and
    `visibility_timeout` replaces the template's VisibilityTimeout (None keeps it).
    `client` is a boto3 SQS client.
    """
    resources: dict[str, Any] = template["Resources"]
    parameters: dict[str, Any] = template.get("Parameters") or {}
    urls: dict[str, str] = {}
    arns: dict[str, str] = {}

    def create(logical_id: str, chain: tuple[str, ...]) -> None:
        if logical_id in urls:
            return
        if logical_id in chain:
            raise ValueError(f"redrive policies loop through {logical_id}")
        resource = resources.get(logical_id)
        if not isinstance(resource, dict) or resource.get("Type") != "AWS::SQS::Queue":
            raise ValueError(f"{logical_id} is not an AWS::SQS::Queue of the template")
        if logical_id not in names:
            raise ValueError(f"{chain[-1]} redrives to {logical_id}: name it too")
        properties: dict[str, Any] = resource.get("Properties") or {}
        attributes = {
            name: str(_resolve(properties[name], parameters, name))
            for name in QUEUE_ATTRIBUTES
            if name in properties
        }
        if visibility_timeout is not None:
            attributes["VisibilityTimeout"] = str(int(visibility_timeout))
        redrive = properties.get("RedrivePolicy")
        if redrive:
            target = _queue_resource(redrive.get("deadLetterTargetArn"), logical_id)
            create(target, (*chain, logical_id))
            receives = _resolve(redrive.get("maxReceiveCount"), parameters, "maxReceiveCount")
            attributes["RedrivePolicy"] = json.dumps(
                {"deadLetterTargetArn": arns[target], "maxReceiveCount": int(receives)}
            )
        created = client.create_queue(QueueName=names[logical_id], Attributes=attributes)
        urls[logical_id] = url = str(created["QueueUrl"])
        arn = client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
        arns[logical_id] = str(arn["Attributes"]["QueueArn"])

    for logical_id in names:
        create(logical_id, ())
    return urls


# -- Lambda's record shape ---------------------------------------------------------------


def _attribute_value(value: dict[str, Any]) -> dict[str, Any]:
    """A message attribute as Lambda sends it: camelCase, binary values base64, lists always."""

    def encoded(data: Any) -> str:
        raw = data if isinstance(data, bytes) else str(data).encode()
        return base64.b64encode(raw).decode("ascii")

    converted: dict[str, Any] = {}
    if "StringValue" in value:
        converted["stringValue"] = value["StringValue"]
    if "BinaryValue" in value:
        converted["binaryValue"] = encoded(value["BinaryValue"])
    converted["stringListValues"] = list(value.get("StringListValues") or [])
    converted["binaryListValues"] = [encoded(item) for item in value.get("BinaryListValues") or []]
    converted["dataType"] = value["DataType"]
    return converted


def lambda_message(message: dict[str, Any], queue_arn: str, region: str) -> dict[str, Any]:
    """A message of ReceiveMessage (boto3) as the record of a Lambda SQS event."""
    received: dict[str, Any] = message.get("Attributes") or {}
    attributes = {name: received[name] for name in RECORD_ATTRIBUTES if name in received}
    attributes[FIRST_RECEIVE_ATTRIBUTE] = received.get(
        FIRST_RECEIVE_ATTRIBUTE, str(int(time.time() * 1000))
    )
    attributes.update(
        {name: received[name] for name in OPTIONAL_RECORD_ATTRIBUTES if name in received}
    )
    record: dict[str, Any] = {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message.get("Body", ""),
        "attributes": attributes,
        "messageAttributes": {
            name: _attribute_value(value)
            for name, value in (message.get("MessageAttributes") or {}).items()
        },
        "md5OfBody": message["MD5OfBody"],
    }
    if message.get("MD5OfMessageAttributes"):
        record["md5OfMessageAttributes"] = message["MD5OfMessageAttributes"]
    record.update({"eventSource": "aws:sqs", "eventSourceARN": queue_arn, "awsRegion": region})
    return record


# -- the pump ----------------------------------------------------------------------------


@dataclass(frozen=True)
class QueueStats:
    """What the pump has done so far (a message counts again each time it is received)."""

    messages_received: int = 0
    messages_deleted: int = 0
    messages_failed: int = 0  # left in the queue: reported failures and function errors
    invocations: int = 0
    function_errors: int = 0
    partial_failures: int = 0


class QueuePump:
    """A background worker that feeds an SQS queue to a function as Lambda would.

    `invoke(event)` runs the function and returns its response (a Future of it is awaited,
    so `LocalFunction.invoke` fits); raising means a function error.
    """

    def __init__(
        self,
        endpoint: str | None,
        region: str,
        queue_url: str,
        invoke: Invoke,
        batch_size: int = 5,
        poll_interval: float = 0.05,
        wait_seconds: int = 0,
        *,
        report_batch_item_failures: bool = True,
        function_name: str = "local",
    ) -> None:
        import boto3

        if not 1 <= batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10,000")
        if not 0 <= wait_seconds <= 20:
            raise ValueError("wait_seconds must be between 0 and 20 (SQS's long poll)")
        self.queue_url = queue_url
        self.region = region
        self.batch_size = batch_size
        self.report_batch_item_failures = report_batch_item_failures
        self.function_name = function_name
        self._invoke = invoke
        self._poll_interval = poll_interval
        self._wait_seconds = wait_seconds
        self._sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=region)
        self.queue_arn: str | None = None
        self._last_messages = time.monotonic()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stats = QueueStats()
        self._cycles = 0
        self._idle_cycle = -1
        # The polling round whose count found the queue empty, until a receive confirms it.
        self._empty_at: int | None = None
        self._draining = 0
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start polling (the queue must exist: its ARN is read first)."""
        if self._thread is not None:
            raise RuntimeError("the queue pump is already running")
        attributes = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url, AttributeNames=["QueueArn"]
        )["Attributes"]
        self.queue_arn = str(attributes["QueueArn"])
        log.info("queue pump: polling %s for %s", self.queue_arn, self.function_name)
        self._thread = threading.Thread(target=self._run, name="queue-pump", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop after the receive or invocation in flight, if any."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    @property
    def stats(self) -> QueueStats:
        with self._lock:
            return self._stats

    def drain(self, timeout: float = 10.0) -> None:
        """Block until the queue is empty and nothing is in flight.

        Empty means: in a polling round that began after this call, the queue held no
        visible, in-flight (received and not yet deleted, such as a failed message waiting
        out its visibility timeout) or delayed message, and the next receive found nothing.
        So drain waits out DelaySeconds, and for messages that keep failing until the
        redrive policy moves them to the dead-letter queue.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            if self._thread is None or not self._thread.is_alive():
                raise RuntimeError("the queue pump is not running")
            since = self._cycles
            self._draining += 1
            self._wake.set()
            try:
                while self._idle_cycle <= since:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        raise TimeoutError(f"the queue did not empty within {timeout} s")
                    self._changed.wait(remaining)
            finally:
                self._draining -= 1

    def _count(self, **increments: int) -> None:
        with self._lock:
            current = self._stats
            self._stats = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )

    # -- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                self._cycles += 1
                cycle = self._cycles
            try:
                worked, empty_at = self._round(cycle)
            except Exception as exc:  # the pump outlives a bad round (moto restarting...)
                log.warning("queue pump: polling failed (%s); retrying", type(exc).__name__)
                worked, empty_at = False, None
                self._empty_at = None
                self._stopping.wait(ERROR_BACKOFF_SECONDS)
            if empty_at is not None:
                with self._changed:
                    self._idle_cycle = max(self._idle_cycle, empty_at)
                    self._changed.notify_all()
            if not worked:
                self._wake.wait(self._pause())
                self._wake.clear()

    def _pause(self) -> float:
        with self._lock:
            draining = self._draining > 0
        if not draining and time.monotonic() - self._last_messages > IDLE_AFTER_SECONDS:
            return max(self._poll_interval, IDLE_POLL_SECONDS)
        return self._poll_interval

    def _round(self, cycle: int) -> tuple[bool, int | None]:
        """One polling round: (invoked the function, the round since which the queue is empty).

        The queue is empty since round N when N's count found nothing in it and a receive
        after that count found nothing either. The receive is needed because SQS counts
        visible, in-flight and delayed messages one after the other: a message that turns
        visible between two of them is in neither.
        """
        messages = self._receive()
        if messages:
            self._empty_at = None
            self._last_messages = time.monotonic()
            self._deliver(messages)
            return True, None
        with self._lock:
            draining = self._draining > 0
        if not draining:
            self._empty_at = None
            return False, None
        confirmed = self._empty_at
        self._empty_at = cycle if self._settled() else None
        return False, confirmed

    def _receive(self) -> list[dict[str, Any]]:
        """Up to batch_size messages, in as many receives as that takes (10 a call)."""
        batch: list[dict[str, Any]] = []
        while len(batch) < self.batch_size and not self._stopping.is_set():
            page = self._sqs.receive_message(
                QueueUrl=self.queue_url,
                MaxNumberOfMessages=min(RECEIVE_LIMIT, self.batch_size - len(batch)),
                # Only the first receive of a batch waits; the rest take what is there.
                WaitTimeSeconds=0 if batch else self._wait_seconds,
                MessageSystemAttributeNames=["All"],
                MessageAttributeNames=["All"],
            )
            messages = page.get("Messages") or []
            if not messages:
                break
            batch.extend(messages)
        if batch:
            self._count(messages_received=len(batch))
        return batch

    def _settled(self) -> bool:
        counts = self._sqs.get_queue_attributes(
            QueueUrl=self.queue_url,
            AttributeNames=[
                "ApproximateNumberOfMessages",
                "ApproximateNumberOfMessagesNotVisible",
                "ApproximateNumberOfMessagesDelayed",
            ],
        )["Attributes"]
        return all(int(count) == 0 for count in counts.values())

    # -- invoking --------------------------------------------------------------------

    def _deliver(self, messages: list[dict[str, Any]]) -> None:
        assert self.queue_arn is not None
        event = {"Records": [lambda_message(m, self.queue_arn, self.region) for m in messages]}
        self._count(invocations=1)
        try:
            response = self._call(event)
        except Exception as exc:  # a function error: the handler raised or the runtime died
            self._count(function_errors=1, messages_failed=len(messages))
            log.info(
                "queue pump: batch of %d failed (%s); it returns after its visibility timeout",
                len(messages),
                type(exc).__name__,
            )
            return
        failed = self._failed(response, messages)
        if failed:
            self._count(partial_failures=1, messages_failed=len(failed))
            log.info("queue pump: %d of %d messages failed: %s", len(failed), len(messages), failed)
        self._delete([m for m in messages if m["MessageId"] not in failed])

    def _call(self, event: dict[str, Any]) -> Any:
        result = self._invoke(event)
        if isinstance(result, Future):
            return result.result()
        return result

    def _failed(self, response: Any, messages: list[dict[str, Any]]) -> set[str]:
        """The ids of the messages to leave in the queue (every one: the batch failed)."""
        if not self.report_batch_item_failures or not isinstance(response, dict):
            return set()
        failures = response.get("batchItemFailures")
        if not failures:
            return set()
        everything = {message["MessageId"] for message in messages}
        if not isinstance(failures, list):
            return everything
        failed: set[str] = set()
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not isinstance(identifier, str) or identifier not in everything:
                return everything  # null, empty, another key or not in this batch: all failed
            failed.add(identifier)
        return failed

    def _delete(self, messages: list[dict[str, Any]]) -> None:
        for start in range(0, len(messages), DELETE_LIMIT):
            chunk = messages[start : start + DELETE_LIMIT]
            result = self._sqs.delete_message_batch(
                QueueUrl=self.queue_url,
                Entries=[
                    {"Id": str(index), "ReceiptHandle": message["ReceiptHandle"]}
                    for index, message in enumerate(chunk)
                ],
            )
            deleted = len(result.get("Successful") or [])
            self._count(messages_deleted=deleted)
            for failure in result.get("Failed") or []:
                log.warning(
                    "queue pump: message %s not deleted (%s); it will be received again",
                    chunk[int(failure["Id"])]["MessageId"],
                    failure.get("Code"),
                )


def queue_pump_for(
    template: dict[str, Any],
    function_resource: str,
    endpoint: str | None,
    region: str,
    queue_url: str,
    invoke: Invoke,
    poll_interval: float = 0.05,
) -> QueuePump:
    """A pump for a template function's SQS event (e.g. the memory worker), not yet started.

    `queue_url` is the URL create_queues returned for the mapping's `queue_resource`.
    """
    mapping = queue_mapping_from_template(template, function_resource)
    return QueuePump(
        endpoint,
        region,
        queue_url,
        invoke,
        batch_size=mapping.batch_size,
        poll_interval=poll_interval,
        report_batch_item_failures=mapping.report_batch_item_failures,
        function_name=function_resource,
    )
