"""What each local Lambda invocation would be billed for on AWS, measured as it runs
(`LocalStackConfig.meter_dir`; `bench.agentcore` reads it).

Each execution environment, when the stack meters, writes one JSON line per invocation to
`<meter_dir>/<function>-<pid>.jsonl`: the function, when it started, how long the handler ran
(Lambda bills its duration), the records its event carried (a stream or queue batch), and the
DynamoDB requests it made with the capacity units DynamoDB says they consumed (on-demand bills
read and write request units as the same numbers): every DynamoDB request is asked for
`ReturnConsumedCapacity=TOTAL`, which changes nothing else it does. SQS sends are counted too.

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
READS = frozenset({"GetItem", "BatchGetItem", "Query", "Scan", "TransactGetItems"})


def _units(consumed: Any) -> float:
    """Capacity units of a ConsumedCapacity member (one, or a list for batches)."""
    items = consumed if isinstance(consumed, list) else [consumed]
    return sum(float(item.get("CapacityUnits") or 0) for item in items if isinstance(item, dict))


@dataclass
class _Invocation:
    operations: Counter[str] = field(default_factory=Counter)
    read_units: float = 0.0
    write_units: float = 0.0
    sqs_sends: int = 0


class Meter:
    """The meter of one execution environment (one process)."""

    def __init__(self, directory: Path, function: str) -> None:
        self._path = directory / f"{function}-{os.getpid()}.jsonl"
        self._function = function
        self._current = _Invocation()

    def install(self) -> Meter:
        """Hook every botocore session made from now on in this process."""
        from botocore import handlers

        handlers.BUILTIN_HANDLERS.extend(
            [
                ("provide-client-params.dynamodb", self._ask_for_capacity),
                ("after-call.dynamodb", self._count_dynamodb),
                ("before-call.sqs", self._count_sqs),
            ]
        )
        return self

    @staticmethod
    def _ask_for_capacity(params: dict[str, Any], model: Any, **_: Any) -> None:
        if "ReturnConsumedCapacity" in model.input_shape.members:
            params.setdefault("ReturnConsumedCapacity", "TOTAL")

    def _count_dynamodb(self, parsed: dict[str, Any], model: Any, **_: Any) -> None:
        self._current.operations[model.name] += 1
        units = _units(parsed.get("ConsumedCapacity"))
        if model.name in READS:
            self._current.read_units += units
        else:
            self._current.write_units += units

    def _count_sqs(self, model: Any, **_: Any) -> None:
        if model.name.startswith("SendMessage"):
            self._current.sqs_sends += 1

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
                "sqs_sends": self._current.sqs_sends,
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
