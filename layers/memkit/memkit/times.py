"""Timestamps as memkit stores and shows them: ISO 8601 in UTC with a `Z`."""

from __future__ import annotations

from datetime import UTC, datetime


def now_iso(epoch: float) -> str:
    """`epoch` seconds as ISO 8601 with milliseconds (the store's updated_at and the like)."""
    return (
        datetime.fromtimestamp(epoch, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    )
