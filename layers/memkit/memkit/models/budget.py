"""How much one response may carry, counted as Lambda counts it.

A synchronous Lambda invocation returns at most 6 MB: the whole response object, whose
`body` is the API's JSON as a string, so the body's quotes, backslashes and control
characters are escaped a second time (python3.12's runtime keeps other characters as UTF-8,
as the API's serializer does). A content of `"` characters takes 4 bytes a character there.
A response over the limit is a 5xx at API Gateway; so lists stop at a byte budget of these
bytes and hand back a cursor for the rest, and a response that would still outgrow the limit
is refused with a 4xx the client can act on (memkit.api.guard).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

# What Lambda returns from a synchronous invocation at most (6 MB), and what one list's
# items may take of it: the rest is the envelope, headers and the other fields.
LAMBDA_RESPONSE_LIMIT = 6 * 1024 * 1024
LIST_BYTE_BUDGET = 5_000_000


def envelope_bytes(value: Any) -> int:
    """What `value` takes in the Lambda response: its JSON (UTF-8, compact, as the API writes
    it), escaped again as part of the body string."""
    body = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return len(json.dumps(body, ensure_ascii=False).encode()) - 2


def fitting(sizes: Iterable[int], budget: int = LIST_BYTE_BUDGET) -> int:
    """How many of the leading items, of `sizes` bytes each, fit `budget` together (at least
    one when there is one: a single item never exceeds what one response may hold)."""
    total = count = 0
    for size in sizes:
        total += size
        if count and total > budget:
            break
        count += 1
    return count
