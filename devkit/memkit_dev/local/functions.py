"""Lambda functions as the template declares them, run in local execution environments.

Each environment is a separate process that imports the function's real handler from its
CodeUri (as Lambda does) and runs one invocation at a time; several run at once, so
concurrent requests race in DynamoDB as they would on AWS. An invocation gets the
function's Timeout, as on Lambda: its context's remaining time starts there, and one still
running then is stopped (its process killed, whatever it would have done next never done,
its result never seen) and reported as FunctionTimedOut; the next invocation gets a fresh
environment (a cold start). API Gateway answers a function error, a timeout included, with
500 (gateway.py).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import time
import uuid
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

# What every function imports and nothing configures at import: loaded once by the fork
# server, so an environment's cold start imports only the function's own code (a spawned
# interpreter took about a second per environment, most of a stack's start).
PRELOADED = [
    "boto3",
    "botocore.client",
    "botocore.httpsession",
    "botocore.session",
    "numpy",
    "pydantic",
    "pynamodb.models",
    "aws_lambda_powertools.event_handler",
    "aws_lambda_powertools.logging",
    "aws_lambda_powertools.metrics",
    "memkit_dev.local.functions",
]
# Lambda's default when neither the function nor Globals set a Timeout.
DEFAULT_TIMEOUT_SECONDS = 3.0
# How long a stopping environment may take to exit on its own before it is killed.
STOP_SECONDS = 5.0


def function_timeout(template: dict[str, Any], resource: str) -> float:
    """The function's Timeout in seconds, as the template (or its Globals) declares it."""
    properties = template["Resources"][resource]["Properties"]
    globals_ = template.get("Globals", {}).get("Function", {})
    return float(properties.get("Timeout") or globals_.get("Timeout") or DEFAULT_TIMEOUT_SECONDS)


class FunctionTimedOut(Exception):
    """An invocation ran past the function's Timeout: it was stopped, its result is lost."""


class EnvironmentExited(Exception):
    """An execution environment's process ended during an invocation (it crashed)."""


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
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS  # its Timeout

    @classmethod
    def from_template(cls, template: dict[str, Any], root: Path, resource: str) -> FunctionSpec:
        properties = template["Resources"][resource]["Properties"]
        return cls(
            resource,
            (root / properties["CodeUri"]).resolve(),
            properties["Handler"],
            function_timeout(template, resource),
        )


class LocalContext:
    """The parts of Lambda's context object that handlers and Powertools read."""

    def __init__(self, function_name: str, timeout_seconds: float) -> None:
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


def _start_environment(spec: FunctionSpec, environment: dict[str, str], cwd: str) -> None:
    global _handler, _function_name, _meter
    from memkit_dev.local.meter import meter_from_environment

    os.chdir(cwd)  # the stack's, as a spawned process would start in

    # A Ctrl-C in the terminal reaches every process of its group: the stack stops its
    # environments itself, so they must not die mid-invocation with a traceback each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # The stack's own environment as it is now (the fork server's dates from its start),
    # then the function's.
    os.environ.clear()
    os.environ.update(environment)
    _meter = meter_from_environment(spec.name)  # before the code: its clients get the hooks
    sys.path.insert(0, str(spec.code_dir))
    module_name, function_name = spec.handler.rsplit(".", 1)
    _handler = getattr(importlib.import_module(module_name), function_name)
    _function_name = spec.name


def _invoke(event: dict[str, Any], timeout_seconds: float) -> Any:
    context = LocalContext(_function_name, timeout_seconds)
    if _meter is None:
        return _handler(event, context)
    with _meter.invocation(event):
        return _handler(event, context)


def _portable(error: BaseException) -> BaseException:
    """`error` as it can cross to the stack's process (its type's name when it cannot)."""
    try:
        pickle.loads(pickle.dumps(error))  # noqa: S301 (our own exception, just made)
    except Exception:  # any failure to pickle
        return RuntimeError(f"{type(error).__name__} in the function")
    return error


def _serve(
    spec: FunctionSpec, environment: dict[str, str], cwd: str, connection: Connection
) -> None:
    """An execution environment's process: start the function, then run each invocation
    received, one at a time, until told to stop (None) or its pipe closes."""
    try:
        _start_environment(spec, environment, cwd)
    except BaseException as exc:  # an init error, for the stack
        connection.send(("failed", _portable(exc)))
        return
    connection.send(("ready", None))
    while True:
        try:
            message = connection.recv()
        except EOFError:
            return
        if message is None:
            return
        event, timeout_seconds = message
        try:
            outcome: tuple[str, Any] = ("ok", _invoke(event, timeout_seconds))
        except Exception as exc:  # a function error, for the caller
            outcome = ("error", _portable(exc))
        connection.send(outcome)


_forkserver: multiprocessing.context.ForkServerContext | None = None


def _context() -> multiprocessing.context.ForkServerContext:
    """Environments are forked from a server process that has PRELOADED imported (no
    thread of this process is copied, as a plain fork would)."""
    global _forkserver
    if _forkserver is None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOADED)
        _forkserver = context
    return _forkserver


class _Environment:
    """One execution environment: a process of its own, started now, ready once its
    function is imported."""

    def __init__(self, spec: FunctionSpec, environment: dict[str, str]) -> None:
        context = _context()
        self._connection, child = context.Pipe()
        inherited = {**os.environ, **environment}
        self._process = context.Process(
            target=_serve,
            args=(spec, inherited, os.getcwd(), child),
            name=f"lambda-{spec.name}",
        )
        self._process.start()
        child.close()
        self._ready = False

    def wait_ready(self) -> None:
        """Wait for the cold start (not counted in an invocation's Timeout, as on Lambda)."""
        if self._ready:
            return
        status, error = self._receive("while it started")
        if status == "failed":
            raise error
        self._ready = True

    def run(self, event: dict[str, Any], timeout_seconds: float) -> Any:
        """The function's response to `event`, or what it raised; FunctionTimedOut once it
        has run for `timeout_seconds` (the caller then kills this environment)."""
        self.wait_ready()
        self._connection.send((event, timeout_seconds))
        if not self._connection.poll(timeout_seconds):
            raise FunctionTimedOut(f"the function timed out after {timeout_seconds:g} s")
        status, value = self._receive("during the invocation")
        if status == "error":
            raise value
        return value

    def _receive(self, when: str) -> tuple[str, Any]:
        """The environment's next message; EnvironmentExited if its process ended first."""
        try:
            status, value = self._connection.recv()
        except EOFError as exc:
            raise EnvironmentExited(f"the environment exited {when}") from exc
        return status, value

    def kill(self) -> None:
        self._process.kill()
        self._process.join()
        self._connection.close()

    def stop(self) -> None:
        with contextlib.suppress(OSError):  # already gone
            self._connection.send(None)
        self._process.join(STOP_SECONDS)
        if self._process.is_alive():
            self.kill()
        else:
            self._connection.close()


class LocalFunction:
    """Execution environments for one function, at most `concurrency` of them, each started
    when an invocation first needs it (or by `warm`)."""

    def __init__(self, spec: FunctionSpec, environment: dict[str, str], concurrency: int) -> None:
        self.spec = spec
        self._environment = environment
        self._concurrency = concurrency
        self._idle: queue.SimpleQueue[_Environment] = queue.SimpleQueue()
        self._started: set[_Environment] = set()
        self._starting: list[_Environment] = []  # prestarted, not yet waited for
        self._lock = threading.Lock()
        # One thread per environment: each waits on its invocation's answer or Timeout.
        self._runner = ThreadPoolExecutor(concurrency, thread_name_prefix=f"lambda-{spec.name}")

    def _start(self) -> _Environment:
        started = _Environment(self.spec, self._environment)
        with self._lock:
            self._started.add(started)
        return started

    def _take(self) -> _Environment:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            return self._start()  # the runner's threads bound how many run at once

    def _discard(self, environment: _Environment) -> None:
        environment.kill()
        with self._lock:
            self._started.discard(environment)

    def prestart(self) -> LocalFunction:
        """Begin every environment's cold start now, without waiting for it (`warm` waits):
        several functions start at once, and alongside the stack's own work."""
        with self._lock:
            missing = self._concurrency - len(self._started)
        self._starting.extend(self._start() for _ in range(missing))
        return self

    def warm(self) -> None:
        """Start every environment now (cold starts before the first request, not during)."""
        self.prestart()
        starting, self._starting = self._starting, []
        for environment in starting:
            environment.wait_ready()
            self._idle.put(environment)

    def _run(self, event: dict[str, Any], timeout_seconds: float) -> Any:
        environment = self._take()
        try:
            result = environment.run(event, timeout_seconds)
        except (FunctionTimedOut, EnvironmentExited):
            self._discard(environment)  # Lambda stops it; the next invocation starts cold
            raise
        except BaseException:
            self._idle.put(environment)  # a function error: the environment lives on
            raise
        self._idle.put(environment)
        return result

    def invoke(self, event: dict[str, Any], timeout_seconds: float | None = None) -> Future[Any]:
        """Run the handler on `event` with `timeout_seconds` (None: the function's Timeout):
        the context's remaining time starts there, and an invocation still running then is
        stopped and fails with FunctionTimedOut."""
        timeout = self.spec.timeout_seconds if timeout_seconds is None else timeout_seconds
        return self._runner.submit(self._run, event, timeout)

    def stop(self) -> None:
        self._runner.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            started, self._started = list(self._started), set()
        for environment in started:
            environment.stop()
