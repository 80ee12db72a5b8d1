"""When the SDK sends a request again, and how long it waits first (no I/O here).

A request is sent again only when doing so cannot apply it twice:

- whatever the call, when the API says it did not run it: a 429 (memkit's `throttled` and
  `quota_exceeded`, and API Gateway's throttling, which never reached the function) and
  memkit's own 503 `unavailable` (docs/api.md: "The call did not run"); and when the
  connection failed before the request was sent (connect errors and timeouts, a full pool);
- only for idempotent calls, when the outcome is unknown: 502 (the function failed), 503 from
  the gateway (the function timed out), 504, and a connection lost after the request was sent.

Which calls are idempotent is decided where each call is defined (memkit.client.api); docs/sdk.md
lists them. The wait is the API's Retry-After (seconds or an HTTP date) when it sends one,
never less than exponential backoff with full jitter; a Retry-After longer than
`max_retry_after` is not waited for: the error is raised with its `retry_after`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from memkit.client.errors import memkit_error_body, retry_after

RETRY_STATUSES = frozenset({429, 502, 503, 504})
# Failures before the request left: the API never saw it.
NOT_SENT: tuple[type[Exception], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
)
# Failures after the request may have reached the API.
MAYBE_SENT: tuple[type[Exception], ...] = (
    httpx.ReadTimeout,
    httpx.WriteTimeout,
    httpx.ReadError,
    httpx.WriteError,
    httpx.RemoteProtocolError,
)


@dataclass(frozen=True)
class Retries:
    """How often and how patiently to retry. `Retries(attempts=1)` never retries."""

    # Tries in all, the first included.
    attempts: int = 5
    # The first backoff window in seconds; it doubles each try, up to max_backoff.
    backoff: float = 0.5
    max_backoff: float = 20.0
    # A Retry-After longer than this is not waited for (the error says how long to wait).
    max_retry_after: float = 60.0
    # A number in [0, 1): the jitter (a parameter so tests can fix it).
    jitter: Callable[[], float] = field(default=random.random, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")

    def backoff_for(self, attempt: int) -> float:
        """Seconds to wait after try number `attempt` (1-based): full jitter."""
        window = min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1))
        return window * self.jitter()

    def after_response(
        self, response: httpx.Response, attempt: int, idempotent: bool
    ) -> float | None:
        """Seconds to wait before sending again after this error answer; None: raise it."""
        status = response.status_code
        if attempt >= self.attempts or status not in RETRY_STATUSES:
            return None
        did_not_run = status == 429 or (status == 503 and memkit_error_body(response) is not None)
        if not (did_not_run or idempotent):
            return None
        asked = retry_after(response)
        if asked is not None and asked > self.max_retry_after:
            return None
        return max(asked or 0.0, self.backoff_for(attempt))

    def after_error(self, error: Exception, attempt: int, idempotent: bool) -> float | None:
        """Seconds to wait before sending again after a connection error; None: raise it."""
        if attempt >= self.attempts:
            return None
        if isinstance(error, NOT_SENT) or (idempotent and isinstance(error, MAYBE_SENT)):
            return self.backoff_for(attempt)
        return None
