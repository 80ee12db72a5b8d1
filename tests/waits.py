"""Waiting for background work (the stream indexer, the curator) without timed assertions: a
check is polled until it holds, for as long as the slowest machine needs."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def eventually(check: Callable[[], Any], timeout: float = 60.0) -> Any:
    """`check()` once it is truthy, or its last answer when `timeout` seconds have passed."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)
