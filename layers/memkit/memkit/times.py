"""Time as memkit stores and shows it (ISO 8601 in UTC with a `Z`), and deadlines.

A deadline also bounds the remote requests made under it: `within(deadline)` sets it for
the block (and the threads of a `DeadlinePool` started there), and a client of a slow
service ends each request by `bound()`, the earliest deadline in force
(memkit.vectors.opensearch caps each request's wait at it; memkit.vectors.dynamodb sends
nothing once it has passed). The HTTP functions set one per invocation, their remaining time
less a margin, so a request that meets a service still waking up answers 503 in time, never
Lambda's timeout.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
R = TypeVar("R")


def now_iso(epoch: float) -> str:
    """`epoch` seconds as ISO 8601 with milliseconds (the store's updated_at and the like)."""
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )


@dataclass(frozen=True)
class Deadline:
    """When a phase must stop starting new work (monotonic seconds)."""

    at: float
    clock: Callable[[], float] = time.monotonic

    @classmethod
    def after(cls, seconds: float, clock: Callable[[], float] = time.monotonic) -> Deadline:
        return cls(clock() + seconds, clock)

    def left(self) -> float:
        return self.at - self.clock()

    def passed(self) -> bool:
        return self.left() <= 0


def invocation_deadline(
    remaining_ms: int, margin_seconds: float, clock: Callable[[], float] = time.monotonic
) -> Deadline:
    """The end of an invocation that has `remaining_ms` left (Lambda's context), less the
    margin the function needs to answer after its last request."""
    return Deadline.after(max(0.0, remaining_ms / 1000 - margin_seconds), clock)


_bound: contextvars.ContextVar[Deadline | None] = contextvars.ContextVar(
    "memkit_request_deadline", default=None
)


def bound() -> Deadline | None:
    """The deadline remote requests made now must end by (the earliest `within` in force),
    or None: only their own timeouts bound them."""
    return _bound.get()


@contextmanager
def within(deadline: Deadline) -> Iterator[Deadline]:
    """Remote requests made in the block end by `deadline`, or by an earlier one already in
    force; yields the one that is."""
    current = _bound.get()
    earliest = current if current is not None and current.left() <= deadline.left() else deadline
    token = _bound.set(earliest)
    try:
        yield earliest
    finally:
        _bound.reset(token)


def in_time() -> bool:
    """False once the deadline in force (`bound`) has passed: a write committed now might
    land after its invocation's answer is due (a 503 already sent, or Lambda's timeout)."""
    deadline = _bound.get()
    return deadline is None or not deadline.passed()


class DeadlinePool(ThreadPoolExecutor):
    """A thread pool whose tasks run under the deadline in force where they were submitted
    (a plain pool's threads see none: contextvars stay with the thread that set them)."""

    def submit(self, fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Future[R]:
        context = contextvars.copy_context()
        return super().submit(lambda: context.run(fn, *args, **kwargs))
