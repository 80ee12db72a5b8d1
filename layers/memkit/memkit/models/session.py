"""Sessions as clients send and read them (API.md "Sessions"; docs/ams-client.md).

Request bodies accept what agent-memory-client sends: its PUT carries `session_id`,
`last_accessed`, `tokens` and echoed response-only keys (`context_percentage_*`,
`new_session`, `unsaved`), so a session body ignores keys it does not know. A message is
strict: a misspelt key there is a 422, not silently lost content.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictInt, StrictStr, field_validator

from memkit.ids import new_ulid
from memkit.models.domain import PROFILE_PATTERN, Id, Model

# API.md: a message more than 300 s in the future is refused (clock skew allowance).
MAX_FUTURE_SECONDS = 300
# A session keeps at most this many pending structured memories (promoted to long-term).
MAX_PENDING_MEMORIES = 100
# Messages one append may carry (one request's worth of batched writes).
MAX_APPEND_MESSAGES = 100
# Messages one PUT body may carry (agent-memory-client sends the whole conversation).
MAX_DOCUMENT_MESSAGES = 20_000
# A token counter: exact in a JSON number and in DynamoDB.
MAX_TOKENS = 2**53
# Ten years: long enough for "keep", short enough that expires_at stays an epoch second.
MAX_TTL_SECONDS = 10 * 365 * 86_400
# The largest context window (tokens) a client may give: far above any model's.
MAX_WINDOW_TOKENS = 100_000_000


def _now() -> datetime:
    return datetime.now(UTC)


def as_utc(value: datetime) -> datetime:
    """An aware UTC time; a naive one is read as UTC (what agent-memory-client means)."""
    aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    try:
        return aware.astimezone(UTC)
    except OverflowError as exc:  # year 1 at +14:00, year 9999 at -14:00
        raise ValueError("is outside the range of UTC times") from exc


def iso(value: datetime) -> str:
    """ISO 8601 with microseconds and `Z` (what the client's datetime parser expects)."""
    return as_utc(value).isoformat(timespec="microseconds").replace("+00:00", "Z")


def not_blank(value: str) -> str:
    """A text that says something: not empty, not only whitespace."""
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


def creation_time(value: datetime) -> datetime:
    """A client's created_at as UTC: at most 300 s ahead of the server's clock (API.md), and
    not before 1970 (items are ordered by microseconds since the epoch)."""
    aware = as_utc(value)
    if aware.timestamp() > time.time() + MAX_FUTURE_SECONDS:
        raise ValueError(f"is more than {MAX_FUTURE_SECONDS} s in the future")
    if aware.year < 1970:
        raise ValueError("is before 1970")
    return aware


def epoch_us(value: datetime) -> int:
    delta = as_utc(value) - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


class Message(Model):
    """One message of a session. Ids are ULIDs when absent; times default to the server's."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    id: Id = Field(default_factory=new_ulid)
    role: StrictStr = Field(min_length=1, max_length=64)
    content: StrictStr = Field(min_length=1)
    created_at: datetime = Field(default_factory=_now)
    name: StrictStr | None = Field(default=None, max_length=256)
    tool_call_id: StrictStr | None = Field(default=None, max_length=256)
    tool_calls: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    persisted_at: datetime | None = Field(
        default=None, description="when it was promoted to long-term memory (server-assigned)"
    )
    discrete_memory_extracted: Literal["t", "f"] = Field(
        default="f", description='"t" once facts were extracted from it'
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return not_blank(value)

    @field_validator("created_at")
    @classmethod
    def _not_in_the_future(cls, value: datetime) -> datetime:
        return creation_time(value)

    @field_validator("persisted_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        return None if value is None else as_utc(value)

    @property
    def created_at_us(self) -> int:
        """Microseconds since the epoch: the message's place in its session's order."""
        return epoch_us(self.created_at)


class MemoryType(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    MESSAGE = "message"


class PendingMemory(Model):
    """A structured memory waiting in a session to be promoted to long-term memory."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    id: Id
    text: StrictStr = Field(min_length=1, max_length=100_000)
    memory_type: MemoryType = MemoryType.SEMANTIC
    topics: list[StrictStr] | None = Field(default=None, max_length=100)
    entities: list[StrictStr] | None = Field(default=None, max_length=100)
    event_date: datetime | None = None
    user_id: Id | None = None
    namespace: Id | None = None
    session_id: Id | None = None
    memory_hash: str | None = Field(default=None, max_length=256)
    extracted_from: list[StrictStr] | None = None
    discrete_memory_extracted: Literal["t", "f"] = "f"
    persisted_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    last_accessed: datetime | None = None

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return not_blank(value)


class Strategy(StrEnum):
    DISCRETE = "discrete"
    SUMMARY = "summary"
    PREFERENCES = "preferences"
    CUSTOM = "custom"


class MemoryStrategy(Model):
    """How long-term memories are extracted from the session (AMS's MemoryStrategyConfig)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    strategy: Strategy = Strategy.DISCRETE
    config: dict[str, Any] = Field(default_factory=dict)


def _scope_field(description: str) -> Any:
    return Field(default=None, description=description)


class SessionFields(Model):
    """What a PUT or PATCH may set besides messages and memories."""

    model_config = ConfigDict(extra="ignore", defer_build=True)

    namespace: Id | None = _scope_field('the session\'s namespace (default "default")')
    user_id: Id | None = _scope_field("the session's owner")
    data: dict[str, Any] | None = Field(default=None, description="free JSON")
    context: StrictStr | None = Field(default=None, description="the running summary")
    ttl_seconds: int | None = Field(
        default=None,
        ge=1,
        le=MAX_TTL_SECONDS,
        description="the session and its items expire this long after the last write",
    )
    long_term_memory_strategy: MemoryStrategy | None = None
    profile: str | None = Field(
        default=None, pattern=PROFILE_PATTERN, description="the scratchpad profile"
    )
    title: StrictStr | None = Field(default=None, max_length=1_000)
    metadata: dict[str, Any] | None = None
    index_messages: bool | None = Field(
        default=None,
        description="index this session's messages in long-term memory (memory_type "
        '"message"); null = the server\'s setting (MEMKIT_INDEX_MESSAGES, on by default). '
        "Applies to messages written from now on",
    )


class SessionWrite(SessionFields):
    """PUT body: the document (full replace of the AMS fields).

    Fields agent-memory-client does not know (`title`, `metadata`, `profile`) keep their
    stored values when left out, so its GET-then-PUT round trips cannot erase them.
    """

    session_id: Id | None = _scope_field("must equal the path's session id when given")
    messages: list[Message] = Field(default_factory=list, max_length=MAX_DOCUMENT_MESSAGES)
    memories: list[PendingMemory] = Field(default_factory=list, max_length=MAX_PENDING_MEMORIES)
    tokens: int = Field(
        default=0, ge=0, le=MAX_TOKENS, description="tokens the client has used (stored as is)"
    )
    scratchpad: str | dict[str, Any] | None = Field(
        default=None,
        description="initial scratchpad content: seeds the scratchpad while it is empty",
    )


class SessionPatch(SessionFields):
    """PATCH body: session fields only; messages are never touched. `data` is merged."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    tokens: int | None = Field(default=None, ge=0, le=MAX_TOKENS)
    # Strict: `true` or "2000" is a 422, never a window of 1 or a guess.
    context_window_max: StrictInt | None = Field(
        default=None,
        ge=1,
        le=MAX_WINDOW_TOKENS,
        description="the session's context window in tokens, which background summarisation "
        "works against (as a write's context_window_max or model_name sets it); null: back "
        "to the server's (summary_window_tokens); left out: unchanged",
    )


class AppendMessages(Model):
    """POST …/messages body."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    messages: list[Message] = Field(min_length=1, max_length=MAX_APPEND_MESSAGES)
    namespace: Id | None = _scope_field('default "default"')
    user_id: Id | None = _scope_field("the owner, when the append creates the session")
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS)
    profile: str | None = Field(default=None, pattern=PROFILE_PATTERN)


# -- responses ---------------------------------------------------------------------------------


class MessageView(Model):
    id: str
    role: str
    content: str
    created_at: str
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    persisted_at: str | None = None
    discrete_memory_extracted: Literal["t", "f"] = "f"


class SessionScratchpad(Model):
    """The session's scratchpad as the document shows it (GET …/scratchpad has the rest)."""

    profile: str
    scope: str
    format: str
    content: str | dict[str, Any] | None
    version: int


class SessionView(Model):
    """The session document. `messages` are oldest first."""

    session_id: str
    namespace: str
    user_id: str | None
    messages: list[MessageView]
    memories: list[dict[str, Any]]
    data: dict[str, Any]
    context: str | None
    tokens: int
    ttl_seconds: int | None
    long_term_memory_strategy: MemoryStrategy
    profile: str | None
    title: str | None
    metadata: dict[str, Any]
    index_messages: bool | None = None
    context_window_max: int | None = Field(
        default=None,
        description="the session's context window in tokens, as the last write that gave "
        "model_name or context_window_max set it: background summarisation keeps the "
        "session within it; null: the server's (summary_window_tokens)",
    )
    scratchpad: SessionScratchpad | None
    created_at: str
    updated_at: str
    last_accessed: str
    expires_at: int | None = Field(description="epoch seconds; null when the session keeps")
    message_count: int = Field(description="messages in the session's log")
    version: int
    context_percentage_total_used: float | None = None
    context_percentage_until_summarization: float | None = None
    new_session: bool | None = None
    reconstructed: bool | None = Field(
        default=None,
        description="true when the session had expired and this document was rebuilt from "
        "the messages it kept in long-term memory (index_all_messages): its newest life's "
        "messages only, nothing stored; a write starts a new life",
    )


class SessionList(Model):
    sessions: list[str]
    total: int


class MessagePage(Model):
    messages: list[MessageView]
    next_cursor: str | None


class AppendView(Model):
    session_id: str
    namespace: str
    created: bool = Field(description="true when this request created the session")
    appended: list[str] = Field(description="ids of the messages stored by this request")
    already_stored: list[str] = Field(description="ids that were already stored (unchanged)")
    pruned: int = Field(description="oldest messages removed by the profile's max_messages")
    message_count: int
    version: int
