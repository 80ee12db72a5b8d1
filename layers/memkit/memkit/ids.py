"""Ids: the rule every id a client gives must follow, and ULIDs (26 characters, Crockford
base32, sortable by creation time, made with the stdlib) for those memkit gives itself.

The rule. An id (of a session, a message, a record, a user, a namespace) is free text, up to
256 characters: UUIDs, emails, slugs, any language. But every one of them may later be named
in a URL path, percent-encoded, and must arrive there as itself. Behind API Gateway (HTTP API)
it would not when it holds
- `/`: the gateway decodes `%2F` before routing, so the id becomes two path segments (another
  route, or a 404);
- `?`: the gateway cuts the decoded path at it (`a%3Fb` reaches the function as `a`);
- `%`: the gateway decodes the path twice (`a%2541` reaches the function as `aA`, `a%25zz`
  is a 400);
and clients (browsers, httpx, urllib3) resolve the segments `.` and `..` before sending.
Control characters were never ids: Unicode's (C0, DEL and C1, NEL U+0085 among them) and the
line and paragraph separators U+2028 and U+2029, which end a line as a newline does (in a log
line, a CSV or JSONL export, a JavaScript string). So those are refused wherever an id is
given, in bodies and queries alike, and every id memkit stores can be addressed. (Live
captures of API Gateway's decoding: docs/api.md#ids.)
"""

from __future__ import annotations

import os
import time
import unicodedata

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

MAX_ID_LENGTH = 256
# Unicode's controls (Cc: U+0000-U+001F, U+007F-U+009F) and the line and paragraph separators
# (Zl U+2028, Zp U+2029): _CONTROLS in a pattern. Format characters (Cf: the zero-width
# joiner of emoji sequences, Persian's non-joiner) and spaces stay: names hold them.
_CONTROL_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})
# Characters no id may hold: they do not survive a URL path behind API Gateway.
NOT_IN_IDS = "/?%"
# The rule as a regular expression for the OpenAPI document (no look-around, which many
# engines lack): some character that is not a dot, or only dots but at least three.
# `id_problem` says in words which part a value breaks.
_CONTROLS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
_ALLOWED = rf"[^{_CONTROLS}/?%]"
ID_PATTERN = rf"^(?:{_ALLOWED}*[^{_CONTROLS}/?%.]{_ALLOWED}*|\.{{3,}})$"
# What ids were before the rule (any text without control characters): such an id, stored
# then, can still be named where naming it only removes it.
STORED_ID_PATTERN = r"^[^\x00-\x1f\x7f]+$"
ID_RULE = (
    "an id is used as one URL path segment, so it holds no '/', '?', '%' or control "
    "character and is not '.' or '..'"
)


def id_problem(value: str) -> str | None:
    """Why `value` cannot be an id (in words naming what is wrong and the rule), or None.
    Its length is checked where the id is declared (1 to MAX_ID_LENGTH characters)."""
    for char in value:
        if char in NOT_IN_IDS:
            return f"must not contain {char!r}: {ID_RULE}"
        if unicodedata.category(char) in _CONTROL_CATEGORIES:
            return f"must not contain a control character: {ID_RULE}"
    if value in (".", ".."):
        return f"must not be {value!r}: {ID_RULE}"
    return None


def new_ulid(now_ms: int | None = None) -> str:
    """A ULID: 48 bits of milliseconds since the epoch, then 80 random bits."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    if not 0 <= ms < 2**48:
        raise ValueError("time outside the ULID range")
    value = (ms << 80) | int.from_bytes(os.urandom(10), "big")
    return "".join(_CROCKFORD[(value >> shift) & 31] for shift in range(125, -1, -5))
