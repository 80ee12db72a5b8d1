"""The stream pump: the local stack's Lambda event source mapping for the table's stream.

It does what Lambda's stream poller does for a DynamoDB event source (Lambda developer
guide, "Using AWS Lambda with Amazon DynamoDB", "Error handling" and "Reporting batch item
failures"): finds the table's stream, reads every shard in order (children after their
parent), turns each stream record into the record Lambda hands a function, drops records
no filter matches (they count as processed), batches up to BatchSize within the batching
window and invokes the function synchronously, one batch per shard at a time.

Failures follow Lambda's rules for streams:
- ReportBatchItemFailures on: `{"batchItemFailures": [{"itemIdentifier": seq}, ...]}`
  checkpoints the records before the lowest reported sequence number and retries from it;
  an empty or missing list (or no response) is a success; an identifier that is null,
  empty, under another key or not a sequence number of the batch fails the whole batch.
  With it off, any response is a success.
- A function error (the invoke raised) fails the whole batch; with BisectBatchOnFunctionError
  the batch is split in halves, which does not count as a retry, so a poison record ends
  up failing alone.
- After MaximumRetryAttempts retries (-1: no limit), or once records are older than
  MaximumRecordAgeInSeconds (-1: no limit), the records go to `on_failure` as Lambda's
  on-failure destination record for streams (DDBStreamBatchInfo, no item content) and the
  shard moves on. Retries back off a few milliseconds, doubling, capped at 0.1 s.

Logs carry counts, sequence numbers and shard ids, never item content.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import os
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memkit_dev.local.event_filter import parse_pattern, passes

__all__ = [
    "EventSourceMapping",
    "PumpStats",
    "StreamPump",
    "lambda_record",
    "pump_for",
]

log = logging.getLogger(__name__)

STARTING_POSITIONS = ("TRIM_HORIZON", "LATEST")
# Lambda's synchronous invocation payload limit; a batch stops growing before it.
PAYLOAD_LIMIT_BYTES = 6 * 1024 * 1024
# GetRecords returns at most 1,000 records a call.
GET_RECORDS_LIMIT = 1000
RETRY_BACKOFF_SECONDS = 0.002
RETRY_BACKOFF_CAP_SECONDS = 0.1
# Shards are listed again this often (a split adds child shards).
SHARD_REFRESH_SECONDS = 1.0
# With nothing arriving for a while, poll at Lambda's base rate (4 a second): moto keeps
# every shard iterator it hands out, so a fast idle poll slowly grows its memory.
IDLE_AFTER_SECONDS = 2.0
IDLE_POLL_SECONDS = 0.25
ERROR_BACKOFF_SECONDS = 0.5
# A shard whose iterator has returned nothing for this long is checked with a fresh iterator
# from where the pump stands (at most this often): an iterator can go stale (moto replaced
# the shard under it on a cancelled transaction), and records then wait behind it for good.
ITERATOR_CHECK_SECONDS = 5.0
# Records waiting this long with no batch done is a stall: logged, and shown in /v1/health.
STALL_SECONDS = 60.0

Invoke = Callable[[dict[str, Any]], Any]
OnFailure = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class EventSourceMapping:
    """The settings of a DynamoDB event source (Lambda's defaults where the template is silent)."""

    batch_size: int = 100
    batching_window_seconds: float = 0.0
    bisect_on_error: bool = False
    maximum_retry_attempts: int = -1
    maximum_record_age_seconds: int = -1
    report_batch_item_failures: bool = False
    filters: list[str] = field(default_factory=list)
    starting_position: str = "TRIM_HORIZON"

    def __post_init__(self) -> None:
        if not 1 <= self.batch_size <= 10_000:
            raise ValueError("batch_size must be between 1 and 10,000")
        if self.batching_window_seconds < 0:
            raise ValueError("batching_window_seconds must not be negative")
        if self.maximum_retry_attempts < -1 or self.maximum_record_age_seconds < -1:
            raise ValueError("retry attempts and record age are -1 (no limit) or more")
        if self.starting_position not in STARTING_POSITIONS:
            raise ValueError(f"starting_position must be one of {STARTING_POSITIONS}")
        for pattern in self.filters:
            parse_pattern(pattern)  # refuse what Lambda's filter syntax does not have

    @classmethod
    def from_template(cls, template: dict[str, Any], function_resource: str) -> EventSourceMapping:
        """The first DynamoDB event of a function in template.yaml; Refs take the Default."""
        resource = template["Resources"][function_resource]
        events = resource.get("Properties", {}).get("Events") or {}
        found = [e for e in events.values() if isinstance(e, dict) and e.get("Type") == "DynamoDB"]
        if not found:
            raise ValueError(f"{function_resource} has no event of Type DynamoDB")
        properties: dict[str, Any] = found[0].get("Properties") or {}
        parameters: dict[str, Any] = template.get("Parameters") or {}

        def value(name: str, default: Any = None) -> Any:
            return _resolve(properties.get(name, default), parameters, name)

        if "TumblingWindowInSeconds" in properties:
            raise ValueError("tumbling windows are not supported by the local stream pump")
        starting_position = value("StartingPosition")
        if starting_position is None:
            raise ValueError(f"{function_resource}: a DynamoDB event needs a StartingPosition")
        response_types = [
            _resolve(item, parameters, "FunctionResponseTypes")
            for item in value("FunctionResponseTypes", []) or []
        ]
        criteria = value("FilterCriteria", {}) or {}
        filters = [
            _pattern_text(_resolve(entry.get("Pattern"), parameters, "Pattern"))
            for entry in criteria.get("Filters") or []
        ]
        return cls(
            batch_size=int(value("BatchSize", 100)),
            batching_window_seconds=float(value("MaximumBatchingWindowInSeconds", 0)),
            bisect_on_error=_boolean(value("BisectBatchOnFunctionError", False)),
            maximum_retry_attempts=int(value("MaximumRetryAttempts", -1)),
            maximum_record_age_seconds=int(value("MaximumRecordAgeInSeconds", -1)),
            report_batch_item_failures="ReportBatchItemFailures" in response_types,
            filters=filters,
            starting_position=str(starting_position),
        )


def _resolve(value: Any, parameters: dict[str, Any], name: str) -> Any:
    """A plain value, or {"Ref": parameter} as the parameter's Default."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        parameter = parameters.get(value["Ref"])
        if not isinstance(parameter, dict) or "Default" not in parameter:
            raise ValueError(f"{name}: !Ref {value['Ref']} is not a parameter with a Default")
        return parameter["Default"]
    if isinstance(value, dict) and any(key.startswith("Fn::") for key in value):
        raise ValueError(f"{name}: intrinsic functions other than Ref are not resolved locally")
    return value


def _boolean(value: Any) -> bool:
    if isinstance(value, str):
        if value.lower() not in ("true", "false"):
            raise ValueError(f"not a boolean: {value!r}")
        return value.lower() == "true"
    return bool(value)


def _pattern_text(pattern: Any) -> str:
    if isinstance(pattern, str):
        return pattern
    if isinstance(pattern, dict):
        return json.dumps(pattern)
    raise ValueError("a FilterCriteria Pattern is a JSON string")


# -- Lambda's record shape ---------------------------------------------------------------


def _attribute_value(value: dict[str, Any]) -> dict[str, Any]:
    """DynamoDB JSON as Lambda sends it: binary values base64, the rest as read."""
    [(kind, inner)] = value.items()
    if kind == "B":
        return {"B": base64.b64encode(inner).decode("ascii")}
    if kind == "BS":
        return {"BS": [base64.b64encode(item).decode("ascii") for item in inner]}
    if kind == "M":
        return {"M": _image(inner)}
    if kind == "L":
        return {"L": [_attribute_value(item) for item in inner]}
    return {kind: inner}


def _image(image: dict[str, Any]) -> dict[str, Any]:
    return {name: _attribute_value(value) for name, value in image.items()}


def _timestamp(created: Any) -> float:
    """A stream record's ApproximateCreationDateTime (a datetime from boto3) in epoch seconds."""
    if isinstance(created, datetime):
        aware = created if created.tzinfo else created.replace(tzinfo=UTC)
        return aware.timestamp()
    return float(created)


def lambda_record(raw: dict[str, Any], stream_arn: str, region: str) -> dict[str, Any]:
    """A record of GetRecords (boto3) as the record of a Lambda DynamoDB event."""
    stream = raw["dynamodb"]
    dynamodb: dict[str, Any] = {}
    if "ApproximateCreationDateTime" in stream:
        # Epoch seconds, rounded down to the second as DynamoDB Streams reports it.
        dynamodb["ApproximateCreationDateTime"] = float(
            math.floor(_timestamp(stream["ApproximateCreationDateTime"]))
        )
    dynamodb["Keys"] = _image(stream.get("Keys", {}))
    for image in ("NewImage", "OldImage"):
        if image in stream:
            dynamodb[image] = _image(stream[image])
    dynamodb["SequenceNumber"] = stream["SequenceNumber"]
    dynamodb["SizeBytes"] = stream.get("SizeBytes", 0)
    dynamodb["StreamViewType"] = stream.get("StreamViewType", "NEW_AND_OLD_IMAGES")
    record: dict[str, Any] = {
        "eventID": raw["eventID"],
        "eventName": raw["eventName"],
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": region,
        "dynamodb": dynamodb,
        "eventSourceARN": stream_arn,
    }
    identity = raw.get("userIdentity")
    if identity:
        # The Streams API says Type/PrincipalId; Lambda's event says type/principalId.
        record["userIdentity"] = {
            "type": identity.get("Type", identity.get("type")),
            "principalId": identity.get("PrincipalId", identity.get("principalId")),
        }
    return record


# -- the pump ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PumpStats:
    """What the pump has done so far (records count once each, invocations every time)."""

    records_read: int = 0
    records_filtered: int = 0
    records_delivered: int = 0
    records_failed: int = 0  # handed to on_failure
    invocations: int = 0
    records_invoked: int = 0  # records in all invocations, retries included
    function_errors: int = 0
    partial_failures: int = 0
    stale_iterators: int = 0  # iterators found stale and replaced


@dataclass
class _Entry:
    record: dict[str, Any]
    sequence: str
    created: float
    size: int


@dataclass
class _Batch:
    entries: list[_Entry]
    failures: int = 0  # failed attempts that count towards MaximumRetryAttempts
    invocations: int = 0
    function_error: bool = False
    retry_at: float = 0.0


@dataclass
class _Shard:
    shard_id: str
    parent_id: str | None
    iterator_type: str
    iterator: str | None = None
    last_read: str | None = None
    closed: bool = False
    buffer: deque[_Entry] = field(default_factory=deque)
    window_start: float | None = None
    work: deque[_Batch] = field(default_factory=deque)
    # Since when reads return nothing, and when a fresh iterator last checked this one.
    quiet_since: float | None = None
    checked_at: float = 0.0

    @property
    def settled(self) -> bool:
        return not self.buffer and not self.work

    @property
    def done(self) -> bool:
        return self.closed and self.settled


class Positions:
    """Where a pump stands in each shard of its table's stream, kept in a file: Lambda's
    event source mapping keeps its checkpoint across deployments, so its starting position
    applies only to its first start, and a stack restarted on the same data reads on from
    there instead of replaying (and re-embedding) all the stream retains. A position is the
    last record of a shard with nothing buffered or in flight before it: a stop mid-batch
    reads that batch again, as Lambda retries one (at least once). A stream of another ARN
    (the table made again) starts afresh."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._arn: str | None = None
        self._shards: dict[str, str] = {}
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            self._arn = str(kept["stream_arn"])
            self._shards = {str(k): str(v) for k, v in dict(kept["shards"]).items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            pass  # none kept yet, or unreadable: the mapping's starting position

    def of(self, stream_arn: str, shard_id: str) -> str | None:
        """The sequence number the pump had reached in `shard_id`, if known."""
        return self._shards.get(shard_id) if stream_arn == self._arn else None

    def reached(self, stream_arn: str, shard_id: str, sequence: str) -> None:
        if stream_arn != self._arn:
            self._arn, self._shards = stream_arn, {}
        if self._shards.get(shard_id) == sequence:
            return
        self._shards[shard_id] = sequence
        self._path.parent.mkdir(parents=True, exist_ok=True)
        written = self._path.with_suffix(".tmp")
        body = {"stream_arn": self._arn, "shards": self._shards}
        written.write_text(json.dumps(body, indent=1), encoding="utf-8")
        os.replace(written, self._path)  # whole or not at all


class StreamPump:
    """A background worker that feeds a table's stream to a function as Lambda would.

    `invoke(event)` runs the function and returns its response (a Future of it is awaited,
    so `LocalFunction.invoke` fits); raising means a function error. `on_failure(record)`
    receives Lambda's on-failure destination record for discarded batches.
    """

    def __init__(
        self,
        endpoint: str | None,
        region: str,
        table_name: str,
        mapping: EventSourceMapping,
        invoke: Invoke,
        on_failure: OnFailure | None = None,
        poll_interval: float = 0.05,
        function_name: str = "local",
        positions: Positions | None = None,
    ) -> None:
        import boto3

        self.mapping = mapping
        # Kept across restarts (Positions), or only while this pump runs (None).
        self._positions = positions
        self.table_name = table_name
        self.region = region
        self.function_name = function_name
        self._invoke = invoke
        self._on_failure = on_failure
        self._poll_interval = poll_interval
        self._dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
        self._streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=region)
        self.stream_arn: str | None = None
        self._shards: dict[str, _Shard] = {}
        self._first_listing = True
        self._last_refresh = 0.0
        self._last_records = time.monotonic()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._stats = PumpStats()
        self._cycles = 0
        self._idle_cycle = -1
        self._refresh_wanted = False
        self._stopping = threading.Event()
        self._wake = threading.Event()
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        # When a batch was last done (or the pump started), and whether a stall was logged.
        self._progress_at = time.monotonic()
        self._stall_logged = False
        # Records waiting after the last round, counted by the pump's own thread (the only
        # one that touches the shards' buffers).
        self._waiting_count = 0

    # -- lifecycle -------------------------------------------------------------------

    def start(self) -> None:
        """Start polling; returns once the shards are listed (so LATEST starts now)."""
        if self._thread is not None:
            raise RuntimeError("the stream pump is already running")
        self._thread = threading.Thread(target=self._run, name="stream-pump", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=5.0):
            log.warning("stream pump: no stream found yet for the table; still looking")

    def stop(self) -> None:
        """Stop after the invocation in flight, if any."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    @property
    def stats(self) -> PumpStats:
        with self._lock:
            return self._stats

    def health(self) -> dict[str, Any]:
        """How the pump is doing, for /v1/health on the local stack: `ok`, `catching up`
        (records wait, batches are being done), `stalled` (records have waited STALL_SECONDS
        with no batch done) or `stopped`."""
        now = time.monotonic()
        with self._lock:
            waiting = self._waiting_count
            since = now - self._progress_at
            stats = self._stats
        running = self._thread is not None and self._thread.is_alive()
        state = "ok"
        if not running:
            state = "stopped"
        elif waiting and since >= STALL_SECONDS:
            state = "stalled"
        elif waiting:
            state = "catching up"
        return {
            "state": state,
            "waiting": waiting,
            "seconds_since_progress": round(since, 1),
            "delivered": stats.records_delivered,
            "failed": stats.records_failed,
            "stale_iterators": stats.stale_iterators,
        }

    def drain(self, timeout: float = 10.0) -> None:
        """Block until every record in the stream before this call is delivered or discarded.

        Caught up means: a polling round that began after this call listed the shards,
        read nothing new from any of them and left no record buffered or awaiting a retry.
        """
        deadline = time.monotonic() + timeout
        with self._changed:
            if self._thread is None or not self._thread.is_alive():
                raise RuntimeError("the stream pump is not running")
            since = self._cycles
            self._refresh_wanted = True
            self._wake.set()
            while self._idle_cycle <= since:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(f"the stream pump did not catch up within {timeout} s")
                self._changed.wait(remaining)

    def _count(self, **increments: int) -> None:
        with self._lock:
            current = self._stats
            self._stats = replace(
                current, **{name: getattr(current, name) + n for name, n in increments.items()}
            )
            if increments.get("records_delivered") or increments.get("records_failed"):
                self._progress_at = time.monotonic()
                self._stall_logged = False

    def _waiting(self) -> int:
        """Records read and not yet delivered or discarded (the pump's thread only)."""
        shards = list(self._shards.values())
        return sum(len(s.buffer) + sum(len(b.entries) for b in s.work) for s in shards)

    def _watch(self, idle: bool) -> None:
        """Progress bookkeeping after a round: nothing waiting counts as progress; records
        waiting STALL_SECONDS with no batch done are logged once as a stall."""
        now = time.monotonic()
        waiting = self._waiting()
        with self._lock:
            self._waiting_count = waiting
            if idle or not waiting:
                self._progress_at = now
                self._stall_logged = False
                return
            stalled = now - self._progress_at >= STALL_SECONDS and not self._stall_logged
            if stalled:
                self._stall_logged = True
        if stalled:
            log.warning(
                "stream pump for %s: records have waited %.0f s with no batch done",
                self.function_name,
                now - self._progress_at,
            )

    # -- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                self._cycles += 1
                cycle = self._cycles
                refresh = self._refresh_wanted
                self._refresh_wanted = False
            try:
                worked, idle = self._round(refresh)
            except Exception as exc:  # the pump outlives a bad round (moto restarting...)
                log.warning("stream pump: polling failed (%s); retrying", type(exc).__name__)
                worked, idle = False, False
                self._stopping.wait(ERROR_BACKOFF_SECONDS)
            self._watch(idle)
            if idle:
                with self._changed:
                    self._idle_cycle = cycle
                    self._changed.notify_all()
            if not worked:
                self._wake.wait(self._pause())
                self._wake.clear()

    def _pause(self) -> float:
        now = time.monotonic()
        pause = self._poll_interval
        if now - self._last_records > IDLE_AFTER_SECONDS:
            pause = max(pause, IDLE_POLL_SECONDS)
        for shard in self._shards.values():
            if shard.work:
                pause = min(pause, max(0.0, shard.work[0].retry_at - now))
            elif shard.buffer and shard.window_start is not None:
                deadline = shard.window_start + self.mapping.batching_window_seconds
                pause = min(pause, max(0.0, deadline - now))
        return pause

    def _round(self, refresh: bool) -> tuple[bool, bool]:
        """One polling round over the shards: (did any work, caught up)."""
        if self.stream_arn is None:
            self.stream_arn = self._find_stream()
            if self.stream_arn is None:
                return False, False
            refresh = True
        now = time.monotonic()
        if refresh or now - self._last_refresh >= SHARD_REFRESH_SECONDS:
            self._list_shards()
            self._last_refresh = now
        worked = False
        idle = True
        for shard in list(self._shards.values()):
            if shard.done:
                continue
            if shard.parent_id in self._shards and not self._shards[shard.parent_id].done:
                continue  # a child shard waits for its parent, as Lambda keeps order
            read = self._read(shard)
            processed = self._process(shard)
            worked = worked or read > 0 or processed
            if self._positions is not None and shard.settled and shard.last_read is not None:
                assert self.stream_arn is not None
                self._positions.reached(self.stream_arn, shard.shard_id, shard.last_read)
            if read or not shard.settled or (shard.iterator is None and not shard.closed):
                idle = False
        return worked, idle

    def _find_stream(self) -> str | None:
        table = self._dynamodb.describe_table(TableName=self.table_name)["Table"]
        arn = table.get("LatestStreamArn")
        if arn and table.get("StreamSpecification", {}).get("StreamEnabled", True):
            log.info("stream pump: reading the stream of table %s", self.table_name)
            return str(arn)
        return None

    def _list_shards(self) -> None:
        assert self.stream_arn is not None
        start: str | None = None
        while True:
            arguments: dict[str, Any] = {"StreamArn": self.stream_arn}
            if start:
                arguments["ExclusiveStartShardId"] = start
            description = self._streams.describe_stream(**arguments)["StreamDescription"]
            for shard in description.get("Shards", []):
                shard_id = shard["ShardId"]
                if shard_id in self._shards:
                    continue
                # LATEST applies to the shards open when the mapping starts; shards that
                # appear later (children of a split) are read from their beginning.
                position = self.mapping.starting_position if self._first_listing else "TRIM_HORIZON"
                listed = _Shard(shard_id, shard.get("ParentShardId"), position)
                if self._positions is not None:  # a restart reads on after its checkpoint
                    listed.last_read = self._positions.of(self.stream_arn, shard_id)
                    if listed.last_read is not None:
                        position = f"after {listed.last_read}"
                # The iterator is taken now, so LATEST means "from when the pump started".
                listed.iterator = self._iterator(listed)
                self._shards[shard_id] = listed
                log.info("stream pump: shard %s from %s", shard_id, position)
            start = description.get("LastEvaluatedShardId")
            if not start:
                break
        self._first_listing = False
        self._ready.set()

    # -- reading ---------------------------------------------------------------------

    def _read(self, shard: _Shard) -> int:
        """Poll one shard unless enough is buffered; returns the records read."""
        if shard.closed or len(shard.buffer) >= self.mapping.batch_size:
            return 0
        if shard.iterator is None:
            shard.iterator = self._iterator(shard)
        from botocore.exceptions import ClientError

        try:
            page = self._streams.get_records(ShardIterator=shard.iterator, Limit=GET_RECORDS_LIMIT)
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code", "")
            if code == "ExpiredIteratorException":
                shard.iterator = None
                return 0
            if code == "TrimmedDataAccessException":
                log.warning("stream pump: shard %s trimmed past our position", shard.shard_id)
                shard.iterator, shard.last_read, shard.iterator_type = None, None, "TRIM_HORIZON"
                return 0
            raise
        shard.iterator = page.get("NextShardIterator")
        if shard.iterator is None:
            shard.closed = True
            log.info("stream pump: shard %s closed", shard.shard_id)
        raw_records = page.get("Records", [])
        now = time.monotonic()
        if not raw_records:
            self._check_iterator(shard, now)
            return 0
        shard.quiet_since = None
        assert self.stream_arn is not None
        self._last_records = now
        filtered = 0
        for raw in raw_records:
            record = lambda_record(raw, self.stream_arn, self.region)
            shard.last_read = record["dynamodb"]["SequenceNumber"]
            if not passes(self.mapping.filters, record):
                filtered += 1
                continue
            if shard.window_start is None:
                shard.window_start = now
            created = raw["dynamodb"].get("ApproximateCreationDateTime")
            shard.buffer.append(
                _Entry(
                    record,
                    shard.last_read,
                    _timestamp(created) if created is not None else time.time(),
                    len(json.dumps(record)),
                )
            )
        self._count(records_read=len(raw_records), records_filtered=filtered)
        log.debug(
            "stream pump: shard %s read %d, filtered out %d, up to %s",
            shard.shard_id,
            len(raw_records),
            filtered,
            shard.last_read,
        )
        return len(raw_records)

    def _check_iterator(self, shard: _Shard, now: float) -> None:
        """A shard quiet for a while: does a fresh iterator from where the pump stands see
        records that the held one does not? Then the held one went stale: follow the shard
        again from there (nothing is lost or read twice: the position is the last record)."""
        if shard.closed or shard.iterator is None:
            return
        if shard.quiet_since is None:
            shard.quiet_since = now
            return
        if now - shard.quiet_since < ITERATOR_CHECK_SECONDS:
            return
        if now - shard.checked_at < ITERATOR_CHECK_SECONDS:
            return
        shard.checked_at = now
        fresh = self._iterator(shard)
        if self._streams.get_records(ShardIterator=fresh, Limit=1).get("Records"):
            log.warning(
                "stream pump: shard %s: its iterator went stale with records waiting; "
                "following the shard again from the last record read",
                shard.shard_id,
            )
            shard.iterator = self._iterator(shard)
            self._count(stale_iterators=1)

    def _iterator(self, shard: _Shard) -> str:
        assert self.stream_arn is not None
        arguments: dict[str, Any] = {"StreamArn": self.stream_arn, "ShardId": shard.shard_id}
        if shard.last_read is not None:
            arguments.update(
                ShardIteratorType="AFTER_SEQUENCE_NUMBER", SequenceNumber=shard.last_read
            )
        else:
            arguments["ShardIteratorType"] = shard.iterator_type
        return str(self._streams.get_shard_iterator(**arguments)["ShardIterator"])

    # -- invoking --------------------------------------------------------------------

    def _process(self, shard: _Shard) -> bool:
        """Invoke the shard's next batch if one is due; returns whether it invoked."""
        now = time.monotonic()
        if shard.work:
            batch = shard.work[0]
            if now < batch.retry_at:
                return False
        elif shard.buffer and self._window_closed(shard, now):
            batch = _Batch(self._take_batch(shard))
            shard.work.append(batch)
            shard.window_start = None
        else:
            return False
        self._run_batch(shard, batch)
        if shard.buffer and shard.window_start is None:
            # Lambda: the next window begins as soon as the previous invocation completes.
            shard.window_start = time.monotonic()
        return True

    def _window_closed(self, shard: _Shard, now: float) -> bool:
        if len(shard.buffer) >= self.mapping.batch_size:
            return True
        if sum(entry.size for entry in shard.buffer) >= PAYLOAD_LIMIT_BYTES:
            return True
        start = shard.window_start if shard.window_start is not None else now
        return now - start >= self.mapping.batching_window_seconds

    def _take_batch(self, shard: _Shard) -> list[_Entry]:
        entries: list[_Entry] = []
        size = 0
        while shard.buffer and len(entries) < self.mapping.batch_size:
            entry = shard.buffer[0]
            if entries and size + entry.size > PAYLOAD_LIMIT_BYTES:
                break
            entries.append(shard.buffer.popleft())
            size += entry.size
        return entries

    def _run_batch(self, shard: _Shard, batch: _Batch) -> None:
        batch.entries = self._drop_expired(shard, batch)
        if not batch.entries:
            shard.work.popleft()
            return
        batch.invocations += 1
        self._count(invocations=1, records_invoked=len(batch.entries))
        first, last = batch.entries[0].sequence, batch.entries[-1].sequence
        try:
            response = self._call({"Records": [entry.record for entry in batch.entries]})
        except Exception as exc:  # a function error: the handler raised or the runtime died
            self._count(function_errors=1)
            log.info(
                "stream pump: shard %s batch %s..%s (%d) failed: %s",
                shard.shard_id,
                first,
                last,
                len(batch.entries),
                type(exc).__name__,
            )
            self._function_error(shard, batch)
            return
        failed_at = self._failed_at(response, batch.entries)
        if failed_at is None:
            shard.work.popleft()
            self._count(records_delivered=len(batch.entries))
            return
        self._count(partial_failures=1, records_delivered=max(failed_at, 0))
        log.info(
            "stream pump: shard %s batch %s..%s reported failures from %s",
            shard.shard_id,
            first,
            last,
            batch.entries[failed_at].sequence if failed_at >= 0 else "(whole batch)",
        )
        if failed_at > 0:
            # The records before the lowest failure are checkpointed; the failed one has
            # now failed once.
            batch.entries = batch.entries[failed_at:]
            batch.failures = 0
        batch.function_error = False
        self._retry_or_discard(shard, batch)

    def _call(self, event: dict[str, Any]) -> Any:
        result = self._invoke(event)
        if isinstance(result, Future):
            return result.result()
        return result

    def _failed_at(self, response: Any, entries: list[_Entry]) -> int | None:
        """None: success; an index: retry from that record; -1: the whole batch failed."""
        if not self.mapping.report_batch_item_failures or not isinstance(response, dict):
            return None
        failures = response.get("batchItemFailures")
        if not failures:
            return None
        if not isinstance(failures, list):
            return -1
        positions = {entry.sequence: index for index, entry in enumerate(entries)}
        lowest: int | None = None
        for failure in failures:
            identifier = failure.get("itemIdentifier") if isinstance(failure, dict) else None
            if not isinstance(identifier, str) or identifier not in positions:
                return -1  # null, empty, another key or not in this batch: all failed
            index = positions[identifier]
            lowest = index if lowest is None else min(lowest, index)
        return lowest

    def _function_error(self, shard: _Shard, batch: _Batch) -> None:
        batch.function_error = True
        if self.mapping.bisect_on_error and len(batch.entries) > 1:
            # Splitting does not count towards the retry quota.
            middle = len(batch.entries) // 2
            shard.work.popleft()
            for half in (batch.entries[middle:], batch.entries[:middle]):
                shard.work.appendleft(
                    _Batch(half, batch.failures, batch.invocations, function_error=True)
                )
            return
        self._retry_or_discard(shard, batch)

    def _retry_or_discard(self, shard: _Shard, batch: _Batch) -> None:
        batch.failures += 1
        limit = self.mapping.maximum_retry_attempts
        if 0 <= limit < batch.failures:
            shard.work.popleft()
            self._discard(shard, batch.entries, "RetryAttemptsExhausted", batch)
            return
        backoff = RETRY_BACKOFF_SECONDS * 2 ** (batch.failures - 1)
        batch.retry_at = time.monotonic() + min(backoff, RETRY_BACKOFF_CAP_SECONDS)

    def _drop_expired(self, shard: _Shard, batch: _Batch) -> list[_Entry]:
        """Send records older than MaximumRecordAgeInSeconds away; returns the rest."""
        limit = self.mapping.maximum_record_age_seconds
        if limit < 0:
            return batch.entries
        oldest_allowed = time.time() - limit
        expired = [entry for entry in batch.entries if entry.created < oldest_allowed]
        if expired:
            self._discard(shard, expired, "RecordAgeExceeded", batch)
        return [entry for entry in batch.entries if entry.created >= oldest_allowed]

    def _discard(self, shard: _Shard, entries: list[_Entry], condition: str, batch: _Batch) -> None:
        self._count(records_failed=len(entries))
        log.warning(
            "stream pump: shard %s records %s..%s (%d) discarded: %s",
            shard.shard_id,
            entries[0].sequence,
            entries[-1].sequence,
            len(entries),
            condition,
        )
        if self._on_failure is None:
            return
        try:
            self._on_failure(self._failure_record(shard, entries, condition, batch))
        except Exception as exc:  # a broken destination must not stall the shard
            log.warning("stream pump: on_failure raised %s", type(exc).__name__)

    def _failure_record(
        self, shard: _Shard, entries: list[_Entry], condition: str, batch: _Batch
    ) -> dict[str, Any]:
        """Lambda's on-failure destination record for a stream batch (no item content)."""
        assert self.stream_arn is not None
        account = self.stream_arn.split(":")[4] or "123456789012"
        response_context: dict[str, Any] = {"statusCode": 200, "executedVersion": "$LATEST"}
        if batch.function_error:
            response_context["functionError"] = "Unhandled"
        return {
            "requestContext": {
                "requestId": str(uuid.uuid4()),
                "functionArn": (
                    f"arn:aws:lambda:{self.region}:{account}:function:{self.function_name}"
                ),
                "condition": condition,
                "approximateInvokeCount": batch.invocations,
            },
            "responseContext": response_context,
            "version": "1.0",
            "timestamp": datetime.now(UTC)
            .isoformat(timespec="milliseconds")
            .replace("+00:00", "Z"),
            "DDBStreamBatchInfo": {
                "shardId": shard.shard_id,
                "startSequenceNumber": entries[0].sequence,
                "endSequenceNumber": entries[-1].sequence,
                "approximateArrivalOfFirstRecord": _iso_seconds(entries[0].created),
                "approximateArrivalOfLastRecord": _iso_seconds(entries[-1].created),
                "batchSize": len(entries),
                "streamArn": self.stream_arn,
            },
        }


def _iso_seconds(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pump_for(
    template: dict[str, Any],
    function_resource: str,
    endpoint: str | None,
    region: str,
    table_name: str,
    invoke: Invoke,
    on_failure: OnFailure | None = None,
    poll_interval: float = 0.05,
    positions: Path | None = None,
) -> StreamPump:
    """A pump for a template function's DynamoDB event (e.g. the indexer), not yet started;
    its shard positions kept in the file `positions` (None: not kept)."""
    return StreamPump(
        endpoint,
        region,
        table_name,
        EventSourceMapping.from_template(template, function_resource),
        invoke,
        on_failure,
        poll_interval=poll_interval,
        function_name=function_resource,
        positions=Positions(positions) if positions is not None else None,
    )
