"""AgentCore Memory's wire shapes (boto3's `bedrock-agentcore` and `bedrock-agentcore-control`
clients, rest-json): what memkit reads from them and writes back, with the service model's
lengths, patterns and enums as constraints (botocore's service-2.json is the contract).

Members are camelCase on the wire (aliases); a union (a payload, a strategy) holds exactly one
member. Members the service model has and memkit does not use are accepted and ignored, so a
newer client's new optional member is not an error. Timestamps arrive as epoch seconds (the
rest-json default) or ISO 8601, and leave as epoch seconds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import (
    AliasGenerator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictStr,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from memkit.models.session import as_utc, not_blank

# The service model's patterns, anchored (botocore's are matched whole).
MEMORY_NAME_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_]{0,47}$"
MEMORY_ID_PATTERN = r"^[a-zA-Z][a-zA-Z0-9_-]{0,99}-[a-zA-Z0-9]{10}$"
MEMORY_ARN_PREFIX = (
    r"^arn:(aws|aws-cn|aws-us-gov):bedrock-agentcore:[a-z0-9-]+:[0-9]{12}:memory/(?P<id>.+)$"
)
ACTOR_ID_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_/-]*(?::[a-zA-Z0-9_/-]+)*[a-zA-Z0-9_/-]*$"
SESSION_ID_PATTERN = r"^[a-zA-Z0-9][a-zA-Z0-9_-]*$"
EVENT_ID_PATTERN = r"^[0-9]+#[a-fA-F0-9]+$"
METADATA_PATTERN = r"^[a-zA-Z0-9\s._:/=+@-]*$"
NAMESPACE_TEMPLATE_PATTERN = r"^[a-zA-Z0-9_/-]*(\{[a-zA-Z][a-zA-Z0-9]*\}[a-zA-Z0-9_/-]*)*$"

# A text of a conversational payload, a JSON payload (the service's 100 KB).
MAX_TEXT = 100_000
MAX_PAYLOADS = 100
MAX_METADATA = 15


class Wire(BaseModel):
    """A member of AgentCore's wire shapes: camelCase names, unknown members ignored."""

    model_config = ConfigDict(
        alias_generator=AliasGenerator(validation_alias=to_camel, serialization_alias=to_camel),
        populate_by_name=True,
        extra="ignore",
        defer_build=True,
    )


def _one_member(model: BaseModel, shape: str) -> None:
    """A union: exactly one member set."""
    members = [name for name in type(model).model_fields if getattr(model, name) is not None]
    if len(members) != 1:
        raise ValueError(f"a {shape} holds exactly one of {', '.join(type(model).model_fields)}")


def _timestamp(value: datetime) -> datetime:
    aware = as_utc(value)
    if aware.year < 1970:
        raise ValueError("is before 1970")
    return aware


MemoryName = Annotated[str, Field(pattern=MEMORY_NAME_PATTERN)]
ActorId = Annotated[str, Field(min_length=1, max_length=255, pattern=ACTOR_ID_PATTERN)]
SessionId = Annotated[str, Field(min_length=1, max_length=100, pattern=SESSION_ID_PATTERN)]
EventId = Annotated[str, Field(max_length=128, pattern=EVENT_ID_PATTERN)]
BranchName = Annotated[str, Field(min_length=1, max_length=100, pattern=SESSION_ID_PATTERN)]
MetadataKey = Annotated[str, Field(min_length=1, max_length=128, pattern=METADATA_PATTERN)]
NextToken = Annotated[str | None, Field(default=None, max_length=4_096)]
MaxResults = Annotated[int, Field(default=20, ge=1, le=100)]


# -- the control plane: a memory's configuration ----------------------------------------------


class StrategyKind(StrEnum):
    """A strategy's type, as GetMemory names it (and the input member that makes it)."""

    SEMANTIC = "SEMANTIC"
    SUMMARIZATION = "SUMMARIZATION"
    USER_PREFERENCE = "USER_PREFERENCE"
    CUSTOM = "CUSTOM"
    EPISODIC = "EPISODIC"


STRATEGY_MEMBERS: dict[str, StrategyKind] = {
    "semantic_memory_strategy": StrategyKind.SEMANTIC,
    "summary_memory_strategy": StrategyKind.SUMMARIZATION,
    "user_preference_memory_strategy": StrategyKind.USER_PREFERENCE,
    "custom_memory_strategy": StrategyKind.CUSTOM,
    "episodic_memory_strategy": StrategyKind.EPISODIC,
}

NamespaceTemplate = Annotated[
    str, Field(min_length=1, max_length=512, pattern=NAMESPACE_TEMPLATE_PATTERN)
]


class StrategyInput(Wire):
    """One strategy of CreateMemory (SemanticMemoryStrategyInput and its siblings): what
    memkit keeps of it. Model overrides and record schemas are accepted and not used."""

    name: MemoryName
    description: str | None = Field(default=None, min_length=1, max_length=4_096)
    namespaces: list[NamespaceTemplate] | None = Field(default=None, min_length=1, max_length=1)
    namespace_templates: list[NamespaceTemplate] | None = Field(
        default=None, min_length=1, max_length=1
    )
    configuration: dict[str, Any] | None = None


class MemoryStrategyInput(Wire):
    """The MemoryStrategyInput union."""

    semantic_memory_strategy: StrategyInput | None = None
    summary_memory_strategy: StrategyInput | None = None
    user_preference_memory_strategy: StrategyInput | None = None
    custom_memory_strategy: StrategyInput | None = None
    episodic_memory_strategy: StrategyInput | None = None

    @model_validator(mode="after")
    def _union(self) -> MemoryStrategyInput:
        _one_member(self, "memory strategy")
        return self

    def chosen(self) -> tuple[StrategyKind, StrategyInput]:
        for member, kind in STRATEGY_MEMBERS.items():
            strategy = getattr(self, member)
            if strategy is not None:
                return kind, strategy
        raise AssertionError("the validator admits exactly one member")


class IndexedKey(Wire):
    key: MetadataKey
    type: Literal["STRING", "STRINGLIST", "NUMBER"]


class CreateMemoryInput(Wire):
    """CreateMemory (POST /memories/create)."""

    client_token: str | None = Field(default=None, max_length=500)
    name: MemoryName
    description: str | None = Field(default=None, min_length=1, max_length=4_096)
    encryption_key_arn: str | None = Field(default=None, max_length=2_048)
    memory_execution_role_arn: str | None = Field(default=None, max_length=2_048)
    event_expiry_duration: int = Field(ge=3, le=3_650)
    memory_strategies: list[MemoryStrategyInput] = Field(default_factory=list, max_length=6)
    indexed_keys: list[IndexedKey] | None = Field(default=None, min_length=1, max_length=10)
    tags: dict[str, str] | None = Field(default=None, max_length=50)

    @field_validator("memory_strategies")
    @classmethod
    def _unique_names(cls, value: list[MemoryStrategyInput]) -> list[MemoryStrategyInput]:
        names = [strategy.chosen()[1].name for strategy in value]
        if len(set(names)) != len(names):
            raise ValueError("strategy names must be unique within a memory")
        return value


class ListMemoriesInput(Wire):
    """ListMemories (POST /memories/)."""

    max_results: MaxResults = 20
    next_token: NextToken = None


# -- the data plane: events ------------------------------------------------------------------


class Role(StrEnum):
    ASSISTANT = "ASSISTANT"
    USER = "USER"
    TOOL = "TOOL"
    OTHER = "OTHER"


class TextContent(Wire):
    """The Content union: text is its one member (memkit keeps no blank message)."""

    text: StrictStr = Field(min_length=1, max_length=MAX_TEXT)

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        return not_blank(value)


class Conversational(Wire):
    content: TextContent
    role: Role


class JsonData(Wire):
    content: Any


class Payload(Wire):
    """The PayloadType union: a turn of the conversation, a blob (any JSON document), or
    JSON data."""

    conversational: Conversational | None = None
    blob: Any = None
    json_: JsonData | None = Field(default=None, alias="json")

    @model_validator(mode="after")
    def _union(self) -> Payload:
        members = [
            name
            for name, value in (
                ("conversational", self.conversational),
                ("blob", self.blob),
                ("json", self.json_),
            )
            if value is not None
        ]
        if len(members) != 1:
            raise ValueError("a payload holds exactly one of conversational, blob, json")
        return self


class Branch(Wire):
    root_event_id: EventId | None = None
    name: BranchName


class MetadataValue(Wire):
    """The MetadataValue union: a string is its one member."""

    string_value: StrictStr = Field(max_length=256, pattern=METADATA_PATTERN)


class CreateEventInput(Wire):
    """CreateEvent (POST /memories/{memoryId}/events)."""

    actor_id: ActorId
    session_id: SessionId | None = None
    event_timestamp: datetime
    payload: list[Payload] = Field(max_length=MAX_PAYLOADS)
    branch: Branch | None = None
    client_token: str | None = Field(default=None, max_length=500)
    metadata: dict[MetadataKey, MetadataValue] | None = Field(default=None, max_length=MAX_METADATA)
    extraction_mode: Literal["SKIP"] | None = None
    extraction_config: dict[str, Any] | None = None

    @field_validator("event_timestamp")
    @classmethod
    def _since_1970(cls, value: datetime) -> datetime:
        return _timestamp(value)


class BranchFilter(Wire):
    name: BranchName
    include_parent_branches: StrictBool = False


class LeftExpression(Wire):
    metadata_key: MetadataKey


class RightExpression(Wire):
    metadata_value: MetadataValue


class MetadataFilter(Wire):
    """EventMetadataFilterExpression: a key compared with EQUALS_TO, EXISTS or NOT_EXISTS."""

    left: LeftExpression
    operator: Literal["EQUALS_TO", "EXISTS", "NOT_EXISTS"]
    right: RightExpression | None = None

    @model_validator(mode="after")
    def _operand(self) -> MetadataFilter:
        if self.operator == "EQUALS_TO" and self.right is None:
            raise ValueError("EQUALS_TO compares with a right-hand metadataValue")
        if self.operator != "EQUALS_TO" and self.right is not None:
            raise ValueError(f"{self.operator} takes no right-hand value")
        return self


class EventFilter(Wire):
    branch: BranchFilter | None = None
    event_metadata: list[MetadataFilter] | None = Field(default=None, min_length=1, max_length=5)


class ListEventsInput(Wire):
    """ListEvents (POST /memories/{memoryId}/actor/{actorId}/sessions/{sessionId})."""

    include_payloads: StrictBool = True
    filter: EventFilter | None = None
    max_results: MaxResults = 20
    next_token: NextToken = None


class SessionFilter(Wire):
    event_filter: Literal["HAS_EVENTS"] | None = None


class ListSessionsInput(Wire):
    """ListSessions (POST /memories/{memoryId}/actor/{actorId}/sessions)."""

    max_results: MaxResults = 20
    next_token: NextToken = None
    filter: SessionFilter | None = None


class ListActorsInput(Wire):
    """ListActors (POST /memories/{memoryId}/actors)."""

    max_results: MaxResults = 20
    next_token: NextToken = None


# -- domain: what the service keeps and hands out ----------------------------------------------


@dataclass(frozen=True)
class MemoryStrategy:
    """A strategy of a memory: its id (`{name}-{10 alphanumerics}`), kind and namespaces."""

    strategy_id: str
    name: str
    kind: StrategyKind
    namespaces: tuple[str, ...]
    description: str | None = None
    configuration: dict[str, Any] | None = None


@dataclass(frozen=True)
class AgentMemory:
    """An AgentCore memory: a tenant's configuration item. Its events live in the namespace
    named by its id; `request_digest` identifies the CreateMemory that made it (a retry with
    the same client token and parameters gets it back). `deletion_job`: the job deleting it
    (DeleteMemory); until it is done the memory shows as DELETING and nothing reads or
    writes its data."""

    memory_id: str
    name: str
    event_expiry_days: int
    created_at: float
    updated_at: float
    request_digest: str
    description: str | None = None
    strategies: tuple[MemoryStrategy, ...] = ()
    indexed_keys: tuple[dict[str, str], ...] = ()
    deletion_job: str | None = None

    @property
    def deleting(self) -> bool:
        return self.deletion_job is not None

    @property
    def status(self) -> str:
        """Its MemoryStatus."""
        return "DELETING" if self.deleting else "ACTIVE"

    def as_json(self) -> dict[str, Any]:
        return {
            "memory_id": self.memory_id,
            "name": self.name,
            "event_expiry_days": self.event_expiry_days,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
            "request_digest": self.request_digest,
            "description": self.description,
            "strategies": [
                {**asdict(s), "kind": s.kind.value, "namespaces": list(s.namespaces)}
                for s in self.strategies
            ],
            "indexed_keys": list(self.indexed_keys),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> AgentMemory:
        strategies = tuple(
            MemoryStrategy(
                strategy_id=s["strategy_id"],
                name=s["name"],
                kind=StrategyKind(s["kind"]),
                namespaces=tuple(s["namespaces"]),
                description=s.get("description"),
                configuration=s.get("configuration"),
            )
            for s in raw.get("strategies") or []
        )
        return cls(
            memory_id=raw["memory_id"],
            name=raw["name"],
            event_expiry_days=int(raw["event_expiry_days"]),
            created_at=float(raw["created_at"]),
            updated_at=float(raw["updated_at"]),
            request_digest=raw["request_digest"],
            description=raw.get("description"),
            strategies=strategies,
            indexed_keys=tuple(raw.get("indexed_keys") or ()),
        )


@dataclass(frozen=True)
class MemoryPage:
    memories: list[AgentMemory]
    next_token: str | None


@dataclass(frozen=True)
class SessionSummary:
    session_id: str
    actor_id: str
    created_at: float


@dataclass(frozen=True)
class Listing:
    """A page of a listing (sessions, actors) and where the next starts (None: the end)."""

    items: list[Any] = field(default_factory=list)
    next_token: str | None = None
