"""Long-term memory as clients send and read it (API.md "Long-term memory"; the Agent Memory
Server's MemoryRecord, docs/ams-client.md §2 and §4.11-4.15).

agent-memory-client always sends `created_at`, `updated_at`, `last_accessed`,
`discrete_memory_extracted` and `memory_type` on each record it creates; memkit keeps the
client's `created_at` (an import keeps its history) and sets the other times itself.
"""

from __future__ import annotations

import math
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictBool, StrictStr, field_validator, model_validator

from memkit.models.domain import Id, Model, StoredId
from memkit.models.session import MemoryType, as_utc, creation_time, not_blank

# One create request: agent-memory-client's bulk create sends 100 records a request.
MAX_CREATE = 100
MAX_TEXT = 100_000
MAX_TAGS = 100
MAX_QUERY = 10_000
MAX_OFFSET = 9_800  # offset + limit + 1 stays within OpenSearch's 10,000 window
MAX_MESSAGE_RANGE = 10
# Records one write may supersede (each is a conditional write in its transaction).
MAX_SUPERSEDES = 10

Tag = StrictStr


def _tags(values: list[str] | None) -> list[str] | None:
    if values is None:
        return None
    for value in values:
        if not value or len(value) > 256:
            raise ValueError("each must be 1 to 256 characters")
    return list(dict.fromkeys(values))


class RecordFields(Model):
    """What a record holds besides its id and text (shared by create and edit)."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    memory_type: MemoryType | None = None
    topics: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    entities: list[Tag] | None = Field(default=None, max_length=MAX_TAGS)
    session_id: Id | None = None
    user_id: Id | None = None
    namespace: Id | None = None
    event_date: datetime | None = None
    pinned: StrictBool | None = None
    extracted_from: list[StrictStr] | None = Field(default=None, max_length=MAX_TAGS)
    metadata: dict[str, Any] | None = None
    valid_from: datetime | None = Field(
        default=None,
        description="when the fact began to hold (default: event_date, else the creation time)",
    )
    valid_until: datetime | None = Field(
        default=None, description="when the fact stopped holding (default: open)"
    )
    key: Id | None = Field(
        default=None,
        description="the slot the fact fills (what it is about, e.g. home_city), per user and "
        "namespace: a new current record in the slot supersedes the current one",
    )
    supersedes: list[StoredId] | None = Field(
        default=None,
        max_length=MAX_SUPERSEDES,
        description="ids of records this one replaces: they stay in history, no longer current",
    )

    @field_validator("topics", "entities")
    @classmethod
    def _clean_tags(cls, values: list[str] | None) -> list[str] | None:
        return _tags(values)

    @field_validator("event_date", "valid_from", "valid_until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)

    @field_validator("supersedes")
    @classmethod
    def _distinct(cls, values: list[str] | None) -> list[str] | None:
        return None if values is None else list(dict.fromkeys(values))

    @model_validator(mode="after")
    def _validity(self) -> RecordFields:
        if self.valid_from and self.valid_until and self.valid_until <= self.valid_from:
            raise ValueError("valid_until must be after valid_from")
        return self


class MemoryRecordIn(RecordFields):
    """A record to create. `id` is required (AMS); the client's `created_at` and
    `last_accessed` are kept (an import keeps its history; neither may be in the future)."""

    id: Id
    text: StrictStr = Field(min_length=1, max_length=MAX_TEXT)
    created_at: datetime | None = None
    last_accessed: datetime | None = None
    recorded_at: datetime | None = Field(
        default=None,
        description="when memkit learned it (default: now; an import keeps the exported one)",
    )
    retired_at: datetime | None = Field(
        default=None,
        description="when memkit stopped holding it current (default: current; an import "
        "of a superseded or retired record keeps the exported one)",
    )
    discrete_memory_extracted: Literal["t", "f"] = "f"

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return not_blank(value)

    @field_validator("created_at", "last_accessed", "recorded_at", "retired_at")
    @classmethod
    def _not_in_the_future(cls, value: datetime | None) -> datetime | None:
        return None if value is None else creation_time(value)


class CreateMemories(Model):
    """POST /v1/long-term-memory/ body."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    memories: list[MemoryRecordIn] = Field(max_length=MAX_CREATE)
    deduplicate: bool = Field(
        default=True,
        description="skip a record whose text the user already has in the namespace "
        "(by content hash); a record with the id of a stored one always replaces it",
    )


class MemoryEdit(RecordFields):
    """PATCH /v1/long-term-memory/{id} body: the fields to change (a new text is re-embedded)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: StrictStr | None = Field(default=None, min_length=1, max_length=MAX_TEXT)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is None:
            raise ValueError("must be a text (a record always has one)")
        return not_blank(value)


# -- search ----------------------------------------------------------------------------------

TextOp = Literal["eq", "ne", "any", "all", "none", "startswith", "in_", "not_eq", "not_in"]
TypeOp = Literal["eq", "ne", "any", "in_", "not_eq", "not_in", "none"]
DateOp = Literal["eq", "ne", "gt", "gte", "lt", "lte", "between"]


class SearchMode(StrEnum):
    SEMANTIC = "semantic"
    KEYWORD = "keyword"
    HYBRID = "hybrid"


class SearchRequest(Model):
    """POST /v1/long-term-memory/search body (AMS's SearchRequest, plus memkit's
    `search_mode` default and `message_range`). Filter objects map an operator to a value;
    `{}` is no constraint, and an unknown operator is a 422 (filters never widen)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: StrictStr = Field(default="", max_length=MAX_QUERY)
    session_id: dict[TextOp, Any] | StrictStr | None = None
    namespace: dict[TextOp, Any] | StrictStr | None = None
    user_id: dict[TextOp, Any] | StrictStr | None = None
    topics: dict[TextOp, Any] | None = None
    entities: dict[TextOp, Any] | None = None
    memory_type: dict[TypeOp, Any] | None = None
    created_at: dict[DateOp, Any] | None = None
    updated_at: dict[DateOp, Any] | None = None
    last_accessed: dict[DateOp, Any] | None = None
    event_date: dict[DateOp, Any] | None = None
    pinned: StrictBool | None = None
    valid_from: dict[DateOp, Any] | None = None
    valid_until: dict[DateOp, Any] | None = None
    recorded_at: dict[DateOp, Any] | None = None
    retired_at: dict[DateOp, Any] | None = None
    key: dict[TypeOp, Any] | None = None
    current_only: StrictBool = Field(
        default=True,
        description="leave out records superseded or retired, or whose validity ended "
        "(false: every record, whatever its time)",
    )
    as_of: datetime | None = Field(
        default=None, description="what was valid at this time (superseded records included)"
    )
    known_at: datetime | None = Field(
        default=None,
        description="what memkit held as current at this time (with as_of: what it held "
        "then about as_of)",
    )
    search_mode: SearchMode = SearchMode.HYBRID
    hybrid_alpha: float | None = Field(default=None, ge=0, le=1)
    distance_threshold: float | None = Field(default=None, ge=0, le=2)
    limit: int = Field(default=10, ge=1, le=100)
    offset: int = Field(default=0, ge=0, le=MAX_OFFSET)
    recency_boost: bool | None = None
    recency_semantic_weight: float | None = Field(default=None, ge=0, le=1)
    recency_recency_weight: float | None = Field(default=None, ge=0, le=1)
    recency_freshness_weight: float | None = Field(default=None, ge=0, le=1)
    recency_novelty_weight: float | None = Field(default=None, ge=0, le=1)
    recency_half_life_last_access_days: float | None = Field(default=None, gt=0, le=36_500)
    recency_half_life_created_days: float | None = Field(default=None, gt=0, le=36_500)
    server_side_recency: bool | None = None
    message_range: int = Field(default=0, ge=0, le=MAX_MESSAGE_RANGE)
    track_access: StrictBool = Field(
        default=True,
        description="false: the records shown do not count as accessed (last_accessed stays; "
        "what an export or a backup reads)",
    )

    @field_validator("as_of", "known_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)

    @model_validator(mode="after")
    def _finite(self) -> SearchRequest:
        for name in ("hybrid_alpha", "distance_threshold"):
            value = getattr(self, name)
            if value is not None and not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number")
        return self


# -- responses -------------------------------------------------------------------------------


class MemoryRecordView(Model):
    """A long-term record as every route shows it. `indexing` says whether its current
    version is searchable yet (pending, indexed, failed)."""

    id: str
    text: str
    memory_type: MemoryType
    topics: list[str]
    entities: list[str]
    session_id: str | None
    user_id: str | None
    namespace: str
    event_date: str | None
    pinned: bool
    created_at: str
    updated_at: str
    last_accessed: str
    persisted_at: str | None
    memory_hash: str
    extracted_from: list[str]
    metadata: dict[str, Any]
    discrete_memory_extracted: Literal["t", "f"]
    indexing: Literal["pending", "indexed", "failed"]
    # Temporal truth (docs/long-term-memory.md "Current truth"); defaults read a server
    # from before them as holding every record valid since its creation and current.
    valid_from: str | None = Field(
        default=None, description="valid since (default event_date or created_at)"
    )
    valid_until: str | None = Field(default=None, description="valid until (None: open)")
    recorded_at: str | None = Field(default=None, description="when memkit learned it")
    retired_at: str | None = Field(
        default=None, description="when memkit stopped holding it current"
    )
    key: str | None = Field(default=None, description="the slot: what the fact is about")
    supersedes: list[str] = Field(default_factory=list, description="records it replaced")
    superseded_by: str | None = Field(default=None, description="the record that replaced it")


class SurroundingMessage(Model):
    id: str
    role: str
    content: str
    created_at: str


class MemoryHit(MemoryRecordView):
    """A search result: a record (or a message of a session, memory_type "message") with
    `dist` (what AMS clients read; 1 - score) and memkit's `score` and `score_type`."""

    memory_hash: str | None  # type: ignore[assignment]  # a message has none
    role: str | None = Field(default=None, description="message hits: the message's role")
    dist: float
    score: float
    score_type: Literal["semantic", "keyword", "hybrid", "recency", "none"]
    surrounding_messages: list[SurroundingMessage] | None = Field(
        default=None,
        description="message hits with message_range: the n messages before and after, in order",
    )


class MemoryResults(Model):
    memories: list[MemoryHit]
    total: int
    next_offset: int | None


class Ack(Model):
    status: str


class CreatedAck(Ack):
    """POST /v1/long-term-memory/ answer (AMS reads `status`; the lists are memkit's)."""

    created: list[str] = Field(description="ids written (indexed a moment later)")
    duplicates: list[str] = Field(
        description="ids skipped: the user already has that text in the namespace"
    )


# -- current truth ---------------------------------------------------------------------------


class MemoryRetirement(Model):
    """POST /v1/long-term-memory/{id}/retire body: the record no longer holds."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    valid_until: datetime | None = Field(
        default=None, description="when it stopped holding (default: now)"
    )

    @field_validator("valid_until")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)


class MemoryRestoration(Model):
    """POST /v1/long-term-memory/{id}/restore body: the version to make current again."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    version: int = Field(ge=0, description="a version number its history lists")


ChangeKind = Literal["create", "edit", "supersede", "retire", "restore", "delete"]


class MemoryVersionView(Model):
    """One version of a record: what made it, when, who (a credential's principal, or
    memkit), through which front door, the fields it changed, and the record as it was
    (null for a delete: a delete keeps no text in the version it adds)."""

    version: int
    change: ChangeKind
    at: str
    by: str | None
    via: str | None
    changed: list[str]
    memory: MemoryRecordView | None


class MemoryHistoryView(Model):
    """GET /v1/long-term-memory/{id}/history: the versions, newest first."""

    id: str
    versions: list[MemoryVersionView]
    next_before: int | None = Field(
        description="pass as `before` for the older versions (null: there are none)"
    )
