"""Session messages as clients send them (API.md "Sessions"; docs/ams-client.md)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from pydantic import ConfigDict, Field, field_validator

from memkit.ids import new_ulid
from memkit.models.domain import ID_PATTERN, Model

# API.md: a message more than 300 s in the future is refused (clock skew allowance).
MAX_FUTURE_SECONDS = 300


def _now() -> datetime:
    return datetime.now(UTC)


class Message(Model):
    """One message of a session. Ids are ULIDs when absent; times default to the server's."""

    # agent-memory-client echoes fields it does not model; they are accepted and dropped.
    model_config = ConfigDict(extra="ignore")

    id: str = Field(default_factory=new_ulid, min_length=1, max_length=256, pattern=ID_PATTERN)
    role: str = Field(min_length=1, max_length=64)
    content: str = Field(min_length=1)
    created_at: datetime = Field(default_factory=_now)
    name: str | None = Field(default=None, max_length=256)
    tool_call_id: str | None = Field(default=None, max_length=256)
    tool_calls: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("created_at")
    @classmethod
    def _not_in_the_future(cls, value: datetime) -> datetime:
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)  # naive = UTC
        if aware.timestamp() > time.time() + MAX_FUTURE_SECONDS:
            raise ValueError(f"is more than {MAX_FUTURE_SECONDS} s in the future")
        return aware.astimezone(UTC)

    @property
    def created_at_us(self) -> int:
        """Microseconds since the epoch: the message's place in its session's key order."""
        delta = self.created_at - datetime(1970, 1, 1, tzinfo=UTC)
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
