"""Parts of DynamoDB key strings: escaped so a caller's id can never forge another key, and
short enough for DynamoDB's key sizes. Shared by the table's keys (memkit.store.keys) and the
vector table's (memkit.vectors.dynamodb), which sit in different layers."""

from __future__ import annotations

import hashlib

# DynamoDB keys hold 2,048 (partition) and 1,024 (sort) bytes. An id of 256 characters can
# take 1,024 bytes in UTF-8, so a longer component keeps a prefix and a digest of the whole.
MAX_PART_BYTES = 600


def within(text: str, limit: int) -> str:
    """`text`, or when it is longer than `limit` bytes its first bytes plus a SHA-256 digest
    of the whole (unique, no longer order-preserving), `limit` bytes in all."""
    raw = text.encode()
    if len(raw) <= limit:
        return text
    digest = hashlib.sha256(raw).hexdigest()
    prefix = raw[: limit - len(digest) - 1].decode(errors="ignore")
    return f"{prefix}~{digest}"


def part(value: str, limit: int = MAX_PART_BYTES) -> str:
    """A key component with `%` and `#` escaped, and at most `limit` bytes long.

    Escaping is reversible and keeps order; a component that would be too long becomes its
    first bytes plus a digest of the whole. Items keep their ids as attributes, so nothing
    is ever parsed back out of a key."""
    return within(value.replace("%", "%25").replace("#", "%23"), limit)
