"""Time as memkit stores and shows it (ISO 8601 in UTC with a `Z`), and deadlines."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime


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
