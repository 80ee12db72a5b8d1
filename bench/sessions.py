"""Sessions on DynamoDB: the real handler and store on DynamoDB Local where Java 17+ is here
(else moto; MEMKIT_BENCH_ENGINE=moto forces it), every request counted.

    1. GET ?recent_messages_limit=20 on a session of 20 messages and on one of 20,000:
       latency (medians of interleaved runs) and DynamoDB requests per GET.
    2. PUT of a 1,000-message session plus one new message (the client sends all 1,001, as
       agent-memory-client does): items written and requests by operation.
    3. POST …/messages with 100 new messages: requests by operation and items written.

Requests are seen in botocore's `before-call` and `after-call` events (as in
bench/dynamodb_requests.py). Items written: one per PutItem, DeleteItem or UpdateItem, one per
entry of a BatchWriteItem, one per Put, Delete or Update of a TransactWriteItems. Items read:
the keys of a BatchGetItem, what a Query or GetItem returned. Sessions are seeded through the
append route, 100 messages a request, so the stored items are the store's own.

Latency on moto is partly moto's: moto answers a Query by going through every item of the
table and sorting the partition, where DynamoDB reads only the items it returns. So each GET
is also timed without its DynamoDB requests (the handler's own time), and the items its
Query read are shown.
"""

from __future__ import annotations

import json
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import environment
from bench.dynamodb_requests import RequestCounter, api_on_table
from bench.figures import median, report
from bench.warm_overhead import NOTES

SMALL, LARGE = 20, 20_000
RECENT = 20
PUT_STORED = 1_000
APPEND = 100  # the most one POST …/messages takes
GET_WARM_UP, GET_RUNS = 2, 25  # interleaved pairs of GETs
RATIO_TARGET = 1.5
BASE = "/v1/working-memory"
WORDS = NOTES.split()  # the vocabulary of message text
SINGLE_WRITES = ("PutItem", "DeleteItem", "UpdateItem")


@dataclass
class Call:
    """One DynamoDB request: its operation, the sort keys it wrote or asked for, the items
    its answer held, and its time from sent to parsed."""

    operation: str
    written: list[str] = field(default_factory=list)
    asked: list[str] = field(default_factory=list)  # BatchGetItem keys
    returned: int = 0  # Query / GetItem
    seconds: float = 0.0


def _sort_keys_written(operation: str, request: dict[str, Any]) -> list[str]:
    if operation in SINGLE_WRITES:
        return [(request.get("Item") or request["Key"])["SK"]["S"]]
    if operation == "BatchWriteItem":
        return [
            (entry.get("PutRequest", {}).get("Item") or entry["DeleteRequest"]["Key"])["SK"]["S"]
            for entries in request["RequestItems"].values()
            for entry in entries
        ]
    if operation == "TransactWriteItems":
        return [
            (action.get("Item") or action["Key"])["SK"]["S"]
            for item in request["TransactItems"]
            for kind, action in item.items()
            if kind in ("Put", "Delete", "Update")
        ]
    return []


class CallRecorder(RequestCounter):
    """A RequestCounter that also keeps, per request, the items involved and its time."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []

    def install(self) -> CallRecorder:
        from botocore import handlers

        super().install()
        handlers.BUILTIN_HANDLERS.append(("after-call.dynamodb", self._answered))
        return self

    def _count(self, model: Any, params: Any = None, context: Any = None, **_: Any) -> None:
        super()._count(model)
        request = json.loads(params["body"]) if params and params.get("body") else {}
        call = Call(model.name, written=_sort_keys_written(model.name, request))
        if model.name == "BatchGetItem":
            tables = request["RequestItems"].values()
            call.asked = [key["SK"]["S"] for table in tables for key in table["Keys"]]
        self.calls.append(call)
        if context is not None:
            context["bench_sent"] = time.perf_counter()

    def _answered(self, model: Any, parsed: Any = None, context: Any = None, **_: Any) -> None:
        call = self.calls[-1]
        if context is not None and "bench_sent" in context:
            call.seconds = time.perf_counter() - context.pop("bench_sent")
        if parsed is not None and model.name == "Query":
            call.returned = parsed.get("Count", 0)
        elif parsed is not None and model.name == "GetItem":
            call.returned = int("Item" in parsed)

    def recording(self, action: Callable[[], Any]) -> list[Call]:
        """The requests `action` made."""
        self.calls.clear()
        self.during(action)
        return list(self.calls)


def _prefix(sort_key: str) -> str:
    return sort_key.split("#", 1)[0] + "#" if "#" in sort_key else sort_key


def described(calls: list[Call]) -> str:
    """Requests by operation, then the items read and written by sort-key prefix."""
    operations = Counter(c.operation for c in calls)
    parts = [", ".join(f"{op} {n}" for op, n in sorted(operations.items()))]
    queried = [c.returned for c in calls if c.operation == "Query"]
    if queried:
        parts.append(f"Query items returned {'+'.join(map(str, queried))}")
    for what, keys in (
        ("BatchGetItem keys", [sk for c in calls for sk in c.asked]),
        ("written", [sk for c in calls for sk in c.written]),
    ):
        if keys:
            by_prefix = Counter(_prefix(sk) for sk in keys)
            parts.append(f"{what} " + " ".join(f"{p} {n}" for p, n in sorted(by_prefix.items())))
    return "; ".join(parts)


def items_written(calls: list[Call]) -> int:
    return sum(len(c.written) for c in calls)


def messages(session_id: str, count: int, start: int = 0) -> list[dict[str, Any]]:
    """Messages `start` to `start + count` of a session: 200 to 800 characters of text each,
    a second apart, ids `<session_id>-<n>` (the same each time they are asked for)."""
    rng = random.Random(f"{session_id}/{start}")
    origin = datetime(2025, 1, 1, tzinfo=UTC)
    made = []
    for n in range(start, start + count):
        length = rng.randint(200, 800)
        text = " ".join(rng.choices(WORDS, k=length // 4))[:length]
        made.append(
            {
                "id": f"{session_id}-{n:06d}",
                "role": "user" if n % 2 == 0 else "assistant",
                "content": text.strip(),
                "created_at": (origin + timedelta(seconds=n)).isoformat(),
            }
        )
    return made


def main() -> None:
    environment.apply()
    recorder = CallRecorder().install()  # before any botocore session exists

    with api_on_table() as (send, engine):
        print(f"sessions: DynamoDB on {engine}", flush=True)

        def append(session_id: str, start: int, count: int) -> None:
            body = {"messages": messages(session_id, count, start)}
            send("POST", f"{BASE}/{session_id}/messages", 201, body=body)

        def seed(session_id: str, count: int) -> None:
            for start in range(0, count, APPEND):
                append(session_id, start, min(APPEND, count - start))

        started = time.perf_counter()
        for session_id, count in (("small", SMALL), ("large", LARGE), ("put", PUT_STORED)):
            seed(session_id, count)
        seeded = time.perf_counter() - started
        report("sessions.seeding_s", seeded, "s", f"{SMALL + LARGE + PUT_STORED} messages")

        # 1. GET the newest 20 of each session, the two in turn first.
        def get(session_id: str) -> Callable[[], Any]:
            query = {"recent_messages_limit": RECENT}
            return lambda: send("GET", f"{BASE}/{session_id}", query=query)

        gets = {SMALL: get("small"), LARGE: get("large")}
        samples: dict[int, dict[str, list[float]]] = {SMALL: {}, LARGE: {}}
        last: dict[int, list[Call]] = {}
        for run in range(GET_WARM_UP + GET_RUNS):
            for size in (SMALL, LARGE) if run % 2 == 0 else (LARGE, SMALL):
                started = time.perf_counter()
                calls = last[size] = recorder.recording(gets[size])
                elapsed = time.perf_counter() - started
                if run < GET_WARM_UP:
                    continue
                taken = {"total": elapsed, "own": elapsed - sum(c.seconds for c in calls)}
                for call in calls:
                    taken[call.operation] = taken.get(call.operation, 0.0) + call.seconds
                for what, seconds in taken.items():
                    samples[size].setdefault(what, []).append(seconds * 1000)
        ms = {size: {what: median(s) for what, s in samples[size].items()} for size in samples}
        for size in (SMALL, LARGE):
            name = f"sessions.get_recent_{RECENT}_of_{size}"
            spent = ", ".join(
                f"{what} {ms[size][what]:.3g} ms" for what in sorted(ms[size]) if what[0].isupper()
            )
            report(f"{name}_ms", ms[size]["total"], "ms median", f"DynamoDB requests: {spent}")
            report(f"{name}_without_dynamodb_ms", ms[size]["own"], "ms median")
            report(
                f"{name}_requests", len(last[size]), target=f"target <= 2; {described(last[size])}"
            )
        report(
            "sessions.get_latency_ratio",
            ms[LARGE]["total"] / ms[SMALL]["total"],
            target=f"target <= {RATIO_TARGET}; {LARGE} vs {SMALL} messages, on {engine}",
        )
        report(
            "sessions.get_latency_ratio_without_dynamodb",
            ms[LARGE]["own"] / ms[SMALL]["own"],
            target="the handler's own time",
        )

        # 2. PUT: the 1,000 stored messages as the client last saw them, and one new one.
        body = {"messages": messages("put", PUT_STORED + 1)}
        calls = recorder.recording(lambda: send("PUT", f"{BASE}/put", body=body))
        report(
            f"sessions.put_{PUT_STORED}_plus_1_items_written",
            items_written(calls),
            target="target 2: the new message and the session item",
        )
        report(f"sessions.put_{PUT_STORED}_plus_1_requests", len(calls), target=described(calls))

        # 3. One POST of 100 new messages to that session.
        calls = recorder.recording(lambda: append("put", PUT_STORED + 1, APPEND))
        report(f"sessions.append_{APPEND}_items_written", items_written(calls))
        report(f"sessions.append_{APPEND}_requests", len(calls), target=described(calls))


if __name__ == "__main__":
    main()
