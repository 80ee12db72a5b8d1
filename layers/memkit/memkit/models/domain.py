"""Domain models: what the service works with. Never DynamoDB items, never HTTP bodies."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    model_validator,
)
from pydantic_core import PydanticCustomError

from memkit.errors import FieldProblem, ValidationFailed
from memkit.ids import ID_PATTERN, MAX_ID_LENGTH, STORED_ID_PATTERN, id_problem
from memkit.models.budget import envelope_bytes

JsonObject = dict[str, Any]
# Scratchpad content: text for markdown/text, an object for json, None when empty.
Content = str | JsonObject | None

PROFILE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
DEFAULT_PROFILE = "default"
DEFAULT_NAMESPACE = "default"
MAX_TOKENS_LIMIT = 64_000
# Roles of messages that instruct the assistant rather than speak in the conversation
# (`developer` is OpenAI's newer name for `system`).
INSTRUCTION_ROLES = frozenset({"system", "developer"})


def is_instruction(role: str | None) -> bool:
    """Whether a message of `role` instructs the assistant (system, developer) rather than
    speaks in the conversation (docs/sessions.md "Roles")."""
    return role in INSTRUCTION_ROLES


def _an_id(value: str) -> str:
    problem = id_problem(value)
    if problem is not None:
        raise PydanticCustomError("id_rule", problem)
    return value


# An id a client gives, wherever it gives it (memkit.ids: the rule). The pattern is for the
# OpenAPI document; the validator refuses in words that name what breaks the rule.
Id = Annotated[
    str,
    AfterValidator(_an_id),
    Field(min_length=1, max_length=MAX_ID_LENGTH, json_schema_extra={"pattern": ID_PATTERN}),
]
# An id that only names something stored, to remove it: also one stored before the rule
# (any text without control characters), so what was made then can still be deleted.
StoredId = Annotated[str, Field(min_length=1, max_length=MAX_ID_LENGTH, pattern=STORED_ID_PATTERN)]


class Model(BaseModel):
    """Base of memkit's models: schemas are built on first use, not at import (cold start)."""

    model_config = ConfigDict(defer_build=True)


class Scope(StrEnum):
    SESSION = "session"
    USER = "user"


class PadFormat(StrEnum):
    MARKDOWN = "markdown"
    JSON = "json"
    TEXT = "text"


class ArrayMerge(StrEnum):
    UNION = "union"
    REPLACE = "replace"


class ProfileSpec(Model):
    """How a scratchpad behaves. Template and schema are exclusive; a schema implies json."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True, defer_build=True)

    scope: Scope = Scope.SESSION
    format: PadFormat | None = Field(
        default=None, description="markdown, json or text; json when a schema is given"
    )
    template: str | None = Field(default=None, max_length=20_000)
    json_schema: JsonObject | None = Field(
        default=None, alias="schema", description="A JSON Schema the content must satisfy"
    )
    array_merge: ArrayMerge = ArrayMerge.UNION
    read_only: StrictBool = False
    max_tokens: StrictInt = Field(default=4_000, ge=1, le=MAX_TOKENS_LIMIT)
    max_messages: StrictInt | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="keep at most this many messages per session, pruning the oldest "
        "(VoltAgent's storageLimit); null = keep all",
    )

    @model_validator(mode="after")
    def _consistent(self) -> ProfileSpec:
        problems: list[FieldProblem] = []
        if self.template is not None and self.json_schema is not None:
            problems.append(FieldProblem("template", "template and schema are mutually exclusive"))
        if self.json_schema is not None and self.format not in (None, PadFormat.JSON):
            problems.append(FieldProblem("format", "a schema implies format json"))
        if self.template is not None and self.format == PadFormat.JSON:
            problems.append(FieldProblem("template", "a template needs format markdown or text"))
        if problems:
            raise ValidationFailed("invalid profile", problems)
        if self.format is None:
            resolved = (
                PadFormat.JSON
                if self.json_schema is not None
                else (PadFormat.MARKDOWN if self.template is not None else PadFormat.TEXT)
            )
            object.__setattr__(self, "format", resolved)
        return self

    @property
    def pad_format(self) -> PadFormat:
        assert self.format is not None  # resolved by the validator
        return self.format


class Profile(ProfileSpec):
    """A named, stored profile (or the built-in default)."""

    name: str
    version: int = 0
    updated_at: str | None = None
    builtin: bool = False
    # The namespace that defines it: the one asked, or `default` (inherited); None: built in.
    namespace: str | None = None


def builtin_default_profile() -> Profile:
    """The profile used when `default` was never configured: session scope, free text."""
    return Profile(name=DEFAULT_PROFILE, builtin=True)


@dataclass(frozen=True)
class Owner:
    """Who a request acts for: the tenant (from auth), the namespace and the user.

    `confined`: the caller is that user and no admin (memkit.identity), so an item of another
    user or of no user is not its own; otherwise (an admin, memkit itself) only an item of
    another named user is refused."""

    tenant: str
    namespace: str = DEFAULT_NAMESPACE
    user_id: str | None = None
    confined: bool = False

    def refuses(self, item_user: str | None) -> bool:
        """Whether an item of `item_user` is out of this scope's reach."""
        if item_user == self.user_id:
            return False
        return self.confined or (item_user is not None and self.user_id is not None)


@dataclass(frozen=True)
class RecordRef:
    """A long-term record by memkit's ids (record ids are unique per tenant)."""

    tenant: str
    record_id: str


@dataclass(frozen=True)
class MessageRef:
    """A session's message by memkit's ids (message ids are unique per session)."""

    tenant: str
    namespace: str
    session_id: str
    message_id: str


@dataclass(frozen=True)
class PendingMemoryRef:
    """A session's pending structured memory, before it becomes a long-term record."""

    tenant: str
    namespace: str
    session_id: str
    memory_id: str


ItemRef = RecordRef | MessageRef


@dataclass(frozen=True)
class PadRef:
    """Which scratchpad a request names: by session (any scope) or by user (user scope)."""

    owner: Owner
    session_id: str | None = None
    # The profile asked for; None = the session's profile, else the default.
    profile: str | None = None


@dataclass(frozen=True)
class SessionStub:
    """What the scratchpad needs of a session: who owns it and which profile it uses."""

    session_id: str
    namespace: str
    user_id: str | None
    profile: str | None
    expires_at: int | None = None
    version: int = 0
    gen: str | None = None
    children_expire_at: int | None = None


@dataclass(frozen=True)
class Scratchpad:
    """Stored scratchpad content with its version (0 = never written)."""

    profile: str
    scope: Scope
    format: PadFormat
    content: Content
    version: int = 0
    tokens: int = 0  # counted once, when written
    created_at: str | None = None
    updated_at: str | None = None
    expires_at: int | None = None


@dataclass(frozen=True)
class SessionMeta:
    """A session's own item: the document's fields, its counters and its life.

    `gen` names this life of the session: a session recreated after it expired gets a new
    one, and items of an older life are never shown. `view_from` is the LSI1 order key below
    which messages stay in the session's log but leave the document (a PUT that dropped them,
    later a summary). `version` is the stored item's (0 = not stored).
    """

    session_id: str
    namespace: str
    gen: str
    created_at: str
    updated_at: str
    created_us: int
    user_id: str | None = None
    profile: str | None = None
    last_accessed: str | None = None
    expires_at: int | None = None
    ttl_seconds: int | None = None
    data: JsonObject | None = None
    context: str | None = None
    tokens: int = 0
    strategy: JsonObject | None = None
    title: str | None = None
    metadata: JsonObject | None = None
    message_count: int = 0
    memory_ids: tuple[str, ...] = ()
    # A digest of each pending memory, in memory_ids' order: a PUT rewrites only changed ones.
    memory_digests: tuple[str, ...] = ()
    view_from: str | None = None
    children_expire_at: int | None = None
    # This session's own choice to index its messages (None: the server's setting).
    index_messages: bool | None = None
    # The context window (tokens) its client last gave on a write (context_window_max, or its
    # model_name's): what background summarisation works against (None: the server's).
    window_tokens: int | None = None
    version: int = 0


@dataclass(frozen=True)
class StoredMessage:
    """A message as stored: the client's fields plus its order key and token count."""

    id: str
    role: str
    content: str
    created_at: str  # ISO 8601, microseconds, Z
    order: str  # the LSI1 sort key: created_at µs, then id
    tokens: int
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: list[JsonObject] | None = None
    metadata: JsonObject | None = None
    persisted_at: str | None = None
    discrete_memory_extracted: str = "f"

    @property
    def response_bytes(self) -> int:
        """What it adds to a response as Lambda counts it (memkit.models.budget): its text
        and fields, with room for the keys. Documents and pages of messages stop adding
        messages at a byte budget (Lambda answers at most 6 MB)."""
        return envelope_bytes([self.content, self.tool_calls, self.metadata]) + 300


IndexState = Literal["pending", "indexed", "failed"]


@dataclass(frozen=True)
class Writer:
    """Who makes a change to a record, as its history shows: a caller's principal (None: a
    credential that names none) and the front door it came through; memkit's own work
    (curation, promotion, lifecycle) is MEMKIT."""

    by: str | None = None
    via: str = "rest"


MEMKIT = Writer("memkit", "memkit")


@dataclass(frozen=True)
class StoredRecord:
    """A long-term record as stored. `written_us` (microseconds of the last write) versions
    its vector in the index; `version` is the item's, for conditional edits (0 = new)."""

    id: str
    namespace: str
    text: str
    memory_type: str
    created_at: str
    updated_at: str
    last_accessed: str
    memory_hash: str
    written_us: int
    topics: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    session_id: str | None = None
    user_id: str | None = None
    event_date: str | None = None
    pinned: bool = False
    persisted_at: str | None = None
    extracted_from: tuple[str, ...] = ()
    metadata: JsonObject = field(default_factory=dict)
    discrete_memory_extracted: str = "f"
    version: int = 0
    indexing: IndexState = "pending"
    # When the record expires (epoch seconds; the table's TTL): None, never.
    expires_at: int | None = None
    # Whose it is: set on what the table (or its stream) holds and what a create writes;
    # writes still name their tenant.
    tenant: str = ""
    # Valid time (docs/long-term-memory.md "Current truth"): when the fact held, from
    # `valid_from` (a record written before validity existed: its creation) until
    # `valid_until` (None: open).
    valid_from: str | None = None
    valid_until: str | None = None
    # System time: when memkit learned it (None: at its creation) and when memkit stopped
    # holding it as current (superseded or retired; None: current). `held_until` is the
    # valid_until it had while current, when superseding shortened it (None: open).
    recorded_at: str | None = None
    retired_at: str | None = None
    held_until: str | None = None
    # The slot it fills (what the fact is about, e.g. home_city), per user and namespace:
    # a new current record in the slot supersedes the current one.
    key: str | None = None
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    # What made this version (create, edit, supersede, retire, restore), who (a caller's
    # principal, or memkit) and through which front door (rest, mcp, agentcore, memkit).
    change: str = "create"
    changed_by: str | None = None
    changed_via: str | None = None

    def __post_init__(self) -> None:
        if self.valid_from is None:
            object.__setattr__(self, "valid_from", self.created_at)
        if self.recorded_at is None:
            object.__setattr__(self, "recorded_at", self.created_at)

    @property
    def ref(self) -> RecordRef:
        return RecordRef(self.tenant, self.id)

    @property
    def life(self) -> int:
        """Which life of its id this record is (µs of `recorded_at`): a record created again
        under the id of a deleted one starts a new history."""
        stamp = datetime.fromisoformat(str(self.recorded_at).replace("Z", "+00:00"))
        return int(stamp.timestamp() * 1_000_000)

    @property
    def created_us(self) -> int:
        stamp = datetime.fromisoformat(self.created_at.replace("Z", "+00:00"))
        return int(stamp.timestamp() * 1_000_000)


@dataclass(frozen=True)
class RecordVersion:
    """One version of a record in its history: its number, and the record as it was then
    (`record`: None for a delete, which keeps no text). `at`, `by` and `via` say when, who
    and through which door the change that made it came (`change`)."""

    number: int
    change: str
    at: str
    by: str | None
    via: str | None
    record: StoredRecord | None


@dataclass(frozen=True)
class RecordHistory:
    """A record's versions, oldest first, of its newest life (a record created again under a
    deleted one's id starts anew). `user_id` and `namespace` say whose it is (for the
    access check), also after a delete; `deleted`: the newest version is its delete."""

    record_id: str
    user_id: str | None
    namespace: str
    versions: tuple[RecordVersion, ...]

    @property
    def deleted(self) -> bool:
        return bool(self.versions) and self.versions[-1].record is None

    @property
    def current(self) -> StoredRecord | None:
        return None if self.deleted else self.versions[-1].record
