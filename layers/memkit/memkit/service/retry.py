"""Optimistic writes: a writer that lost a race waits a jittered, growing moment and retries."""

from __future__ import annotations

import random
from collections.abc import Callable

from memkit.errors import OutOfTime
from memkit.observability import metrics
from memkit.times import in_time

BACKOFF_BASE_SECONDS = 0.005
# The window must stay wider than a few writers' read-merge-write turns, or retries collide
# again: with 0.1 s, 4 writers merging into a 200-key object ran out of 25 attempts.
BACKOFF_CAP_SECONDS = 0.4


def back_off(attempt: int, sleep: Callable[[float], None], metric: str) -> None:
    """Count the lost race in `metric` and sleep "full jitter" (AWS's backoff advice)."""
    metrics.add_metric(name=metric, unit="Count", value=1)
    cap = min(BACKOFF_CAP_SECONDS, BACKOFF_BASE_SECONDS * 2**attempt)
    sleep(random.uniform(0, cap))  # noqa: S311 (jitter, not crypto)


def commit_in_time(what: str) -> None:
    """Refuse to commit `what` once the invocation's deadline has passed (memkit.times): a
    503 with Retry-After, nothing written, rather than a write that lands after the client
    was told the request failed. Checks (a JSON Schema's, say) may have used the time up."""
    if not in_time():
        metrics.add_metric(name="WritesOutOfTime", unit="Count", value=1)
        raise OutOfTime(f"the {what} was not written: the request ran out of time; retry")
