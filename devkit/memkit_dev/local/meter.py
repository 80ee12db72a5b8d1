"""What each local Lambda invocation would be billed for on AWS, measured as it runs
(`LocalStackConfig.meter_dir`; bench/billing.py prices it).

Each execution environment, when the stack meters, writes one JSON line per invocation to
`<meter_dir>/<function>-<pid>.jsonl`: the function, when it started, how long the handler ran
(Lambda bills its duration), the records its event carried (a stream or queue batch), and the
DynamoDB requests it made with the capacity units DynamoDB says they consumed (on-demand bills
read and write request units as the same numbers), of which the table's indexes' writes, and
a vector index's bytes (VectorSearchRequestBytes, VectorWriteRequestBytes): every DynamoDB
request is asked for `ReturnConsumedCapacity=INDEXES`, which changes nothing else it does.
SQS sends are counted too, and Bedrock embedding calls with the tokens of the texts they
sent (memkit.tokens' estimate: Bedrock bills its own tokenizer's count).

The hooks are botocore handlers added to its built-in list before the function's code is
imported, so every client the function makes (PynamoDB's among them) carries them.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The environment variable that turns metering on in an execution environment.
METER_VARIABLE = "MEMKIT_LOCAL_METER_DIR"
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems", "SearchVectors"})
INDEX_KINDS = ("GlobalSecondaryIndexes", "LocalSecondaryIndexes")


def _consumed(parsed: dict[str, Any]) -> list[dict[str, Any]]:
    """A response's ConsumedCapacity entries (one, or a list for batches)."""
    consumed = parsed.get("ConsumedCapacity")
    entries = consumed if isinstance(consumed, list) else [consumed]
    return [entry for entry in entries if isinstance(entry, dict)]


def _number(value: Any) -> float:
    return float(value or 0)


def _index_units(entry: dict[str, Any]) -> float:
    """Capacity units an entry reports for the table's secondary indexes."""
    return sum(
        _number(index.get("CapacityUnits"))
        for kind in INDEX_KINDS
        for index in (entry.get(kind) or {}).values()
    )


def _vector_write_bytes(entry: dict[str, Any]) -> float:
    return sum(
        _number(index.get("VectorWriteRequestBytes"))
        for index in (entry.get("VectorIndexes") or {}).values()
    )


def _embedded_texts(body: Any) -> list[str]:
    """The texts an InvokeModel body asks to embed: Titan's `inputText`, Cohere's `texts`."""
    try:
        request = json.loads(body)
    except (TypeError, ValueError):
        return []
    if not isinstance(request, dict):
        return []
    if isinstance(request.get("inputText"), str):
        return [request["inputText"]]
    texts = request.get("texts")
    return [text for text in texts if isinstance(text, str)] if isinstance(texts, list) else []


@dataclass
class _Invocation:
    operations: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    index_write_units: float = 0.0
    vector_search_bytes: float = 0.0
    vector_write_bytes: float = 0.0
    sqs_sends: int = 0
    embed_calls: int = 0
    embed_tokens: int = 0


class Meter:
    """The meter of one execution environment (one process)."""

    def __init__(self, directory: Path, function: str) -> None:
        self._path = directory / f"{function}-{os.getpid()}.jsonl"
        self._function = function
        self._current = _Invocation()

    def _handlers(self) -> list[tuple[str, Any]]:
        return [
            ("provide-client-params.dynamodb", self._ask_for_capacity),
            ("after-call.dynamodb", self._count_dynamodb),
            ("before-call.sqs", self._count_sqs),
            ("before-call.bedrock-runtime.InvokeModel", self._count_embedding),
        ]

    def install(self) -> Meter:
        """Hook every botocore session made from now on in this process."""
        from botocore import handlers

        handlers.BUILTIN_HANDLERS.extend(self._handlers())
        return self

    def attach(self, client: Any) -> Meter:
        """Hook one botocore client only (a benchmark metering a call it makes itself)."""
        for event, handler in self._handlers():
            client.meta.events.register(event, handler)
        return self

    @staticmethod
    def _ask_for_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "INDEXES")

    def _count_dynamodb(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        current = self._current
        current.operations[model.name] += 1
        for entry in _consumed(parsed):
            units = _number(entry.get("CapacityUnits"))
            current.vector_search_bytes += _number(entry.get("VectorSearchRequestBytes"))
            if model.name in READS:
                current.read_units += units
            else:
                current.write_units += units
                current.index_write_units += _index_units(entry)
                current.vector_write_bytes += _vector_write_bytes(entry)

    def _count_sqs(self, model: Any, **_: Any) -> None:
        if model.name.startswith("SendMessage"):
            self._current.sqs_sends += 1

    def _count_embedding(self, params: dict[str, Any], **_: Any) -> None:
        # before the call: a retried attempt counts again (Bedrock bills the one that answers)
        from memkit.tokens import estimate_tokens

        texts = _embedded_texts(params.get("body"))
        self._current.embed_calls += 1
        self._current.embed_tokens += sum(estimate_tokens(text) for text in texts)

    @contextmanager
    def invocation(self, event: Any) -> Iterator[None]:
        """Meter one invocation of the handler on `event`, written when it ends."""
        self._current = _Invocation()
        started = time.time()
        clock = time.perf_counter()
        try:
            yield
        finally:
            records = event.get("Records") if isinstance(event, dict) else None
            line = {
                "function": self._function,
                "started": started,
                "ms": (time.perf_counter() - clock) * 1000,
                "records": len(records) if isinstance(records, list) else 0,
                "dynamodb": dict(self._current.operations),
                "read_units": self._current.read_units,
                "write_units": self._current.write_units,
                "index_write_units": self._current.index_write_units,
                "vector_search_bytes": self._current.vector_search_bytes,
                "vector_write_bytes": self._current.vector_write_bytes,
                "sqs_sends": self._current.sqs_sends,
                "embed_calls": self._current.embed_calls,
                "embed_tokens": self._current.embed_tokens,
            }
            with self._path.open("a", encoding="utf-8") as out:
                out.write(json.dumps(line) + "\n")


def meter_from_environment(function: str) -> Meter | None:
    """The meter of this execution environment when the stack meters (METER_VARIABLE set)."""
    directory = os.environ.get(METER_VARIABLE)
    if not directory:
        return None
    return Meter(Path(directory), function).install()


def read_invocations(directory: Path) -> list[dict[str, Any]]:
    """Every invocation metered in `directory`, oldest first."""
    lines = [
        json.loads(line)
        for path in sorted(directory.glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return sorted(lines, key=lambda line: float(line["started"]))
