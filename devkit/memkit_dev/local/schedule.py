"""The local stack's EventBridge Scheduler: a timer that invokes a function at a fixed rate.

It sends the event the template's schedule sends (template.yaml's Input, with the context
attributes Scheduler fills in: events/schedule.json) and a context whose remaining time is
the function's Timeout, so a run bounds itself exactly as on Lambda. One invocation at a time:
a run that takes longer than the interval delays the next one instead of overlapping it.
A failed run is logged (the function's own logs say which phase) and the next tick retries.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger(__name__)

Invoke = Callable[[dict[str, Any], float], "Future[Any]"]


def schedule_event(name: str, region: str) -> dict[str, Any]:
    """What the schedule sends: its ids, as Scheduler fills the template's Input."""
    return {
        "schedule_arn": f"arn:aws:scheduler:{region}:000000000000:schedule/default/{name}",
        "scheduled_time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "execution_id": uuid.uuid4().hex[:16],
        "attempt_number": "1",
    }


class ScheduleTimer:
    """Invokes `invoke(event, timeout_seconds)` every `interval_seconds` in a thread."""

    def __init__(
        self,
        name: str,
        invoke: Invoke,
        interval_seconds: float,
        timeout_seconds: float,
        region: str = "us-east-1",
    ) -> None:
        self._name = name
        self._invoke = invoke
        self._interval = interval_seconds
        self._timeout = timeout_seconds
        self._region = region
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        # Finished invocations: (result or None, error type or None), newest last.
        self.runs: list[tuple[Any, str | None]] = []

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._loop, name=f"schedule-{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 5)

    def _loop(self) -> None:
        while not self._stopped.wait(self._interval):
            self.run_once()

    def run_once(self) -> None:
        """One scheduled invocation, waited for (a failure is logged, not raised)."""
        try:
            result = self._invoke(schedule_event(self._name, self._region), self._timeout).result()
        except Exception as exc:  # the next tick is the retry, as on AWS
            log.warning("scheduled %s failed: %s", self._name, type(exc).__name__)
            self.runs.append((None, type(exc).__name__))
            return
        self.runs.append((result, None))
