"""HTTP bodies of API.md. Built from domain objects explicitly, never from DynamoDB items."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, StrictInt, StrictStr, field_validator

from memkit.models.domain import PROFILE_PATTERN, ArrayMerge, Id, Model, PadFormat, Scope, StoredId
from memkit.models.memory import MAX_QUERY, MAX_SUPERSEDES, MAX_TAGS, MAX_TEXT, Tag
from memkit.models.session import MemoryType

# search_memory's max_results: enough to answer, few enough to fit a model's context.
MAX_SEARCH_RESULTS = 20
DEFAULT_SEARCH_RESULTS = 5


class FieldError(Model):
    field: str
    reason: str


class ErrorBody(Model):
    """The one error body: a human message, a machine code, field problems on 422."""

    detail: str
    code: str
    errors: list[FieldError] = Field(default_factory=list)


class GatewayAnswer(Model):
    """API Gateway's own answer, sent before or instead of memkit's function (docs/api.md):
    e.g. a 404 for a path it routes nowhere, a 400 for one it cannot decode."""

    message: str


class Health(Model):
    now: int = Field(description="server time, epoch milliseconds")
    version: str | None = Field(default=None, description="memkit's version")
    local: dict[str, Any] | None = Field(
        default=None,
        description="the local stack only (`memkit serve`): what serves DynamoDB, its stream "
        "pumps and dead letters; null on AWS",
    )


class Status(Model):
    status: str = "ok"


class ProfileView(Model):
    model_config = ConfigDict(populate_by_name=True)

    name: str
    scope: Scope
    format: PadFormat
    template: str | None
    json_schema: dict[str, Any] | None = Field(alias="schema")
    array_merge: ArrayMerge
    read_only: bool
    max_tokens: int
    max_messages: int | None
    version: int
    updated_at: str | None
    builtin: bool = Field(description="true for the built-in default (never stored)")
    namespace: str | None = Field(
        default=None,
        description="the namespace that defines it: the one asked, or `default` when the "
        "namespace has no profile of that name and inherits the one defined without a "
        "namespace; null for the built-in default",
    )


class ProfileList(Model):
    profiles: list[ProfileView]
    next_cursor: str | None = None


class ScratchpadWrite(Model):
    """PUT (replace) or PATCH (merge) body. Scoping may also come in the body."""

    model_config = ConfigDict(extra="forbid")

    content: str | dict[str, Any] | None = Field(
        description="text for markdown/text scratchpads, an object for json ones"
    )
    namespace: Id | None = None
    user_id: Id | None = None


class ScratchpadView(Model):
    model_config = ConfigDict(populate_by_name=True)

    session_id: str | None
    user_id: str | None
    namespace: str
    profile: str
    scope: Scope
    format: PadFormat
    content: str | dict[str, Any] | None
    version: int
    template: str | None
    json_schema: dict[str, Any] | None = Field(alias="schema")
    read_only: bool
    tokens: int = Field(description="estimated tokens of the content")
    max_tokens: int
    updated_at: str | None
    problems: list[FieldError] = Field(
        default_factory=list,
        description="where stored content no longer fits a changed profile (empty when valid)",
    )


class PromptView(Model):
    prompt: str


class ToolsView(Model):
    format: str
    tools: list[dict[str, Any]]


class ToolCall(Model):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=128)
    arguments: dict[str, Any] | str | None = None
    session_id: Id | None = None
    user_id: Id | None = None
    namespace: Id | None = None
    profile: str | None = Field(default=None, pattern=PROFILE_PATTERN)


class ToolSuccess(Model):
    model_config = ConfigDict(extra="forbid")

    result: Any


class ToolFailure(Model):
    """A failure the model can read and act on (still status 200: the call itself worked)."""

    model_config = ConfigDict(extra="forbid")

    error: str


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty or only whitespace")
    return value


class SearchMemoryArguments(Model):
    """search_memory's arguments as a model sends them (a null is dropped before: not given).
    An unknown argument is refused rather than ignored, so a filter never widens silently."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    query: StrictStr = Field(min_length=1, max_length=MAX_QUERY)
    topics: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    memory_type: MemoryType | None = None
    max_results: StrictInt = Field(default=DEFAULT_SEARCH_RESULTS, ge=1, le=MAX_SEARCH_RESULTS)

    @field_validator("query")
    @classmethod
    def _query(cls, value: str) -> str:
        return _not_blank(value)


class AddMemoryArguments(Model):
    """add_memory's arguments as a model sends them; ownership comes from the call, never
    from the arguments. `event_date` is parsed where the record is built."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: StrictStr = Field(min_length=1, max_length=MAX_TEXT)
    memory_type: Literal["semantic", "episodic"] = "semantic"
    topics: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    entities: list[Tag] = Field(default_factory=list, max_length=MAX_TAGS)
    event_date: StrictStr | None = None
    key: Id | None = None
    replaces: list[StoredId] = Field(default_factory=list, max_length=MAX_SUPERSEDES)

    @field_validator("text")
    @classmethod
    def _text(cls, value: str) -> str:
        return _not_blank(value)
