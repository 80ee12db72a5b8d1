"""Lambda functions as the template declares them, run in local execution environments.

Each environment is a separate process that imports the function's real handler from its
CodeUri (as Lambda does) and runs one invocation at a time; several run at once, so
concurrent requests race in DynamoDB as they would on AWS.
"""

from __future__ import annotations

import importlib
import multiprocessing
import os
import signal
import sys
import time
import uuid
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Set by the initializer in each environment process.
_handler: Any = None
_function_name = "local"
_meter: Any = None  # memkit_dev.local.meter.Meter when the stack meters


@dataclass(frozen=True)
class FunctionSpec:
    """A function of the template: where its code is and which handler to call."""

    name: str
    code_dir: Path
    handler: str  # module.function, as in template.yaml

    @classmethod
    def from_template(cls, template: dict[str, Any], root: Path, resource: str) -> FunctionSpec:
        properties = template["Resources"][resource]["Properties"]
        return cls(resource, (root / properties["CodeUri"]).resolve(), properties["Handler"])


class LocalContext:
    """The parts of Lambda's context object that handlers and Powertools read."""

    def __init__(self, function_name: str, timeout_seconds: float = 30.0) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = 512
        self.invoked_function_arn = (
            f"arn:aws:lambda:us-east-1:123456789012:function:{function_name}"
        )
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _start_environment(spec: FunctionSpec, environment: dict[str, str]) -> None:
    global _handler, _function_name, _meter
    from memkit_dev.local.meter import meter_from_environment

    # A Ctrl-C in the terminal reaches every process of its group: the stack stops its
    # environments itself, so they must not die mid-invocation with a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    os.environ.update(environment)
    _meter = meter_from_environment(spec.name)  # before the code: its clients get the hooks
    sys.path.insert(0, str(spec.code_dir))
    module_name, function_name = spec.handler.rsplit(".", 1)
    _handler = getattr(importlib.import_module(module_name), function_name)
    _function_name = spec.name


def _invoke(event: dict[str, Any], timeout_seconds: float | None = None) -> Any:
    if timeout_seconds is None:
        context = LocalContext(_function_name)
    else:
        context = LocalContext(_function_name, timeout_seconds)
    if _meter is None:
        return _handler(event, context)
    with _meter.invocation(event):
        return _handler(event, context)


def _ready() -> bool:
    return _handler is not None


class LocalFunction:
    """A pool of execution environments for one function (size = its concurrency)."""

    def __init__(self, spec: FunctionSpec, environment: dict[str, str], concurrency: int) -> None:
        self.spec = spec
        self._concurrency = concurrency
        self._pool = ProcessPoolExecutor(
            max_workers=concurrency,
            mp_context=multiprocessing.get_context("spawn"),
            initializer=_start_environment,
            initargs=(spec, environment),
        )

    def warm(self) -> None:
        """Start every environment now (cold starts before the first request, not during)."""
        for future in [self._pool.submit(_ready) for _ in range(self._concurrency)]:
            future.result()

    def invoke(self, event: dict[str, Any], timeout_seconds: float | None = None) -> Future[Any]:
        """Run the handler on `event`; the context's remaining time starts at
        `timeout_seconds` (the function's Timeout; None: 30 s)."""
        return self._pool.submit(_invoke, event, timeout_seconds)

    def stop(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
