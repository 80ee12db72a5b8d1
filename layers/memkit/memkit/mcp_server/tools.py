"""The MCP server: memkit's tools over the official `mcp` SDK (MCPServer), served stateless
with JSON responses, for the verified caller.

Each tool is the Agent Memory Server's tool of the same name and parameters where memkit has
the same operation (docs/mcp.md lists them), and runs the service the REST route of that
operation runs, through the same operations (memkit.app.operations): a tool never takes a
tenant or a user from its arguments without `Caller.acting_for` agreeing. The scratchpad's
tools keep their model-facing behaviour (memkit.service.tools) under names that do not
collide with the sessions' get/set_working_memory: get_scratchpad, update_scratchpad,
clear_scratchpad.

Refusals:

- a tool needs a scope (TOOL_SCOPES; a tool without one is never registered): a caller
  without it, or a caller naming another user without memory:admin, is refused with
  `InsufficientScope`, a JSON-RPC error that the handler answers as HTTP 403
  `insufficient_scope` (the same rule as the REST API's 403);
- what the model can fix (arguments, a missing session, a conflict) is a tool error
  (`isError`) in words it can act on, never the input itself: arguments the SDK refuses are
  named by field and reason as the REST API names them (the SDK would pass on pydantic's
  text, which quotes the value);
- anything else is logged by its type alone and answered as an internal error.

Logs name tools and their arguments, never values: memkit logs each call itself, and the
SDK's loggers are held at WARNING (at INFO they would write a refused tool call's text, with
a refused key or the content a profile's schema refused).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import Annotated, Any, Literal, ParamSpec, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from memkit import __version__
from memkit.app.operations import Operations
from memkit.app.scratchpads import PadName
from memkit.app.services import Services
from memkit.app.views import session_view
from memkit.errors import MemkitError, OutOfScope
from memkit.identity import ADMIN, READ, WRITE, Caller
from memkit.ids import new_ulid
from memkit.mcp_server.asgi import Message, Receive, Scope, Send
from memkit.mcp_server.resource import INSUFFICIENT_SCOPE
from memkit.models.domain import PROFILE_PATTERN, Id, StoredId
from memkit.models.lifecycle import DEFAULT_NEAR_DISTANCE, CompactResult
from memkit.models.memory import (
    MAX_CREATE,
    Ack,
    CreatedAck,
    CreateMemories,
    DateOp,
    MemoryEdit,
    MemoryHistoryView,
    MemoryRecordIn,
    MemoryRecordView,
    MemoryResults,
    SearchMode,
    SearchRequest,
    TextOp,
    TypeOp,
)
from memkit.models.problems import field_problems
from memkit.models.prompt import HydratedPrompt, PromptRequest, PromptSession
from memkit.models.session import (
    MemoryStrategy,
    MemoryType,
    PendingMemory,
    SessionView,
    SessionWrite,
)
from memkit.models.session import Message as SessionMessage
from memkit.observability import logger
from memkit.service.tools import failure_text, problem_text

P = ParamSpec("P")
R = TypeVar("R")

SERVER_NAME = "memkit"
INSTRUCTIONS = (
    "memkit keeps this user's memory. Before answering about the user's preferences, "
    "history or anything said in earlier conversations, search long-term memory "
    "(search_long_term_memory) or hydrate the prompt (memory_prompt). Store lasting facts "
    "with create_long_term_memories, resolving pronouns and relative dates first "
    "(get_current_datetime). Keep short working notes in the scratchpad (get_scratchpad, "
    "update_scratchpad)."
)
MAX_DELETE = 100


@dataclass
class Call:
    """One MCP request: who calls, what it runs over, and the scope a tool call was refused
    for (the handler turns that into HTTP 403 insufficient_scope)."""

    caller: Caller
    services: Services
    refused_scope: str | None = None

    @property
    def operations(self) -> Operations:
        """What the caller may do (memkit.app.operations)."""
        return self.services.operations


_current: ContextVar[Call] = ContextVar("memkit_mcp_call")


class InsufficientScope(MCPError):
    """A tool call the credential may not make: the scope it needs, and why."""

    def __init__(self, scope: str, refusal: MemkitError) -> None:
        super().__init__(
            code=INSUFFICIENT_SCOPE,
            message=f"insufficient_scope: {failure_text(refusal)}",
            data={"scope": scope},
        )
        self.scope = scope


@contextmanager
def _identity(scope: str) -> Iterator[None]:
    """An operation whose refusal of a scope (OutOfScope: naming another user, or no user,
    takes memory:admin) is a call this credential may not make without `scope`; its other
    refusals are the tool's errors."""
    try:
        yield
    except OutOfScope as exc:
        raise InsufficientScope(scope, exc) from exc


def current() -> Call:
    """This request's call (set by `serve` around the MCP transport)."""
    return _current.get()


# -- registration ---------------------------------------------------------------------------

TOOL_SCOPES: dict[str, str] = {}
_TOOLS: list[tuple[Callable[..., Any], ToolAnnotations]] = []


def _failed(tool: str, exc: Exception) -> ToolError:
    """What a failed tool call tells the model: its own mistakes, else the service's state."""
    if isinstance(exc, ValidationError):
        problems = exc.errors(include_url=False, include_input=False, include_context=False)
        return ToolError(f"invalid arguments for {tool}: {problem_text(problems)}")
    if isinstance(exc, MemkitError) and exc.caller_can_fix:
        return ToolError(failure_text(exc))
    if isinstance(exc, MemkitError):  # throttled or unavailable: waiting fixes it
        logger.error("tool call failed", extra={"tool": tool, "code": exc.code})
        after = f" in {exc.retry_after} s" if exc.retry_after else " later"
        return ToolError(f"the service is not available; retry{after}")
    # The type only: an exception's text may quote stored content.
    logger.error("unhandled error", extra={"tool": tool, "error_type": type(exc).__name__})
    return ToolError("internal error")


def _tool(
    scope: str, *, read_only: bool = False, destructive: bool = False
) -> Callable[[Callable[P, R]], Callable[P, Awaitable[R]]]:
    """Registers a tool that needs `scope`; its failures become what `_failed` says."""

    def register(function: Callable[P, R]) -> Callable[P, Awaitable[R]]:
        name = function.__name__

        @functools.wraps(function)
        async def run(*args: P.args, **kwargs: P.kwargs) -> R:
            call = current()
            try:
                with _identity(scope):
                    call.caller.require(scope)
                result = function(*args, **kwargs)
            except InsufficientScope as exc:
                call.refused_scope = exc.scope
                logger.info("tool call refused", extra={"tool": name, "status": 403})
                raise
            except ToolError:  # already in words the model can act on
                raise
            except Exception as exc:
                raise _failed(name, exc) from exc
            logger.info("tool called", extra={"tool": name})
            return result

        TOOL_SCOPES[name] = scope
        annotations = ToolAnnotations(
            read_only_hint=read_only, destructive_hint=destructive, open_world_hint=False
        )
        _TOOLS.append((run, annotations))
        return run

    return register


# -- shared argument shapes -----------------------------------------------------------------

TextFilter = Annotated[
    dict[TextOp, Any] | str,
    Field(description='{"eq": "x"}, {"any": ["x", "y"]}, {"ne": "x"} ... or the value itself'),
]
TagFilter = Annotated[dict[TextOp, Any], Field(description='{"any": ["a", "b"]}, {"all": [...]}')]
TypeFilter = Annotated[
    dict[TypeOp, Any],
    Field(description='{"eq": "semantic"}, {"in_": ["home_city", "employer"]} ...'),
]
DateFilter = Annotated[
    dict[DateOp, Any],
    Field(description='ISO 8601: {"gt": "2024-01-01T00:00:00Z"}, {"between": [a, b]} ...'),
]
EqFilter = Annotated[
    dict[Literal["eq"], str] | str, Field(description='the value, or {"eq": value}')
]
Weight = Annotated[float, Field(ge=0, le=1)]


class NewMemory(MemoryRecordIn):
    """A long-term memory to create; without an id, memkit gives it one."""

    id: Id | None = None  # type: ignore[assignment]


class NewPendingMemory(PendingMemory):
    """A memory waiting in a session to be promoted; without an id, memkit gives it one."""

    id: Id | None = None  # type: ignore[assignment]


def _given(**values: Any) -> dict[str, Any]:
    """The arguments a call gave (the model sends null for those it leaves out)."""
    return {name: value for name, value in values.items() if value is not None}


def _eq(value: dict[Literal["eq"], str] | str | None) -> str | None:
    """A plain value, also when given as AMS's {"eq": value} filter."""
    return value.get("eq") if isinstance(value, dict) else value


# -- tools ----------------------------------------------------------------------------------


@_tool(READ, read_only=True)
def get_current_datetime() -> dict[str, str | int]:
    """The current time in UTC, to ground relative dates ("yesterday", "next week") before
    storing a memory: iso_utc (ISO 8601, Z suffix) and unix_ts (seconds). Put the resolved
    date in an episodic memory's text and its event_date."""
    now = datetime.now(UTC).replace(microsecond=0)
    return {"iso_utc": now.isoformat().replace("+00:00", "Z"), "unix_ts": int(now.timestamp())}


@_tool(WRITE)
def create_long_term_memories(
    memories: Annotated[list[NewMemory], Field(min_length=1, max_length=MAX_CREATE)],
    deduplicate: bool = True,
) -> CreatedAck:
    """Store long-term memories, searchable a moment later. Resolve every pronoun and
    relative date first (get_current_datetime): "User prefers dark mode", not "he likes it".
    memory_type "semantic" for lasting facts and preferences, "episodic" for events (with
    event_date). Omit user_id (your own user) and session_id unless you know the exact id.
    A text the user already has is skipped (deduplicate)."""
    call = current()
    records = [m.model_copy(update={"id": m.id or new_ulid()}) for m in memories]
    body = CreateMemories(memories=list(records), deduplicate=deduplicate)
    with _identity(ADMIN):
        return call.operations.memories.create(call.caller, body)


def _search_request(**given: Any) -> SearchRequest:
    """A search of the arguments given (those the model left out, None, are not)."""
    return SearchRequest.model_validate(_given(**given))


@_tool(READ, read_only=True)
def search_long_term_memory(
    text: str | None = None,
    search_mode: SearchMode = SearchMode.HYBRID,
    session_id: TextFilter | None = None,
    namespace: TextFilter | None = None,
    topics: TagFilter | None = None,
    entities: TagFilter | None = None,
    created_at: DateFilter | None = None,
    last_accessed: DateFilter | None = None,
    user_id: TextFilter | None = None,
    memory_type: TypeFilter | None = None,
    event_date: DateFilter | None = None,
    distance_threshold: Annotated[float, Field(ge=0, le=2)] | None = None,
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
    offset: Annotated[int, Field(ge=0)] = 0,
    optimize_query: bool = False,
    recency_boost: bool | None = None,
    recency_semantic_weight: Weight | None = None,
    recency_recency_weight: Weight | None = None,
    recency_freshness_weight: Weight | None = None,
    recency_novelty_weight: Weight | None = None,
    recency_half_life_last_access_days: float | None = None,
    recency_half_life_created_days: float | None = None,
    server_side_recency: bool | None = None,
    updated_at: DateFilter | None = None,
    pinned: bool | None = None,
    hybrid_alpha: Weight | None = None,
    message_range: Annotated[int, Field(ge=0, le=10)] = 0,
    valid_from: DateFilter | None = None,
    valid_until: DateFilter | None = None,
    recorded_at: DateFilter | None = None,
    retired_at: DateFilter | None = None,
    key: TypeFilter | None = None,
    current_only: bool | None = None,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> MemoryResults:
    """Search long-term memory by meaning and keywords (hybrid, the default), meaning alone
    (semantic) or keywords (keyword), with filters as {operator: value}. text "" lists
    memories by recency. Without user_id you search your own user's memories. Use the exact
    session_id of this conversation or none (never a guessed one). Only current memories
    are found (none superseded or no longer valid) unless current_only is false; as_of (a
    time) finds what was valid then, known_at what memkit held then. optimize_query is
    accepted and ignored (memkit does not rewrite queries)."""
    call = current()
    request = _search_request(  # every parameter but optimize_query is the search's
        text=text,
        search_mode=search_mode,
        session_id=session_id,
        namespace=namespace,
        topics=topics,
        entities=entities,
        created_at=created_at,
        last_accessed=last_accessed,
        user_id=user_id,
        memory_type=memory_type,
        event_date=event_date,
        distance_threshold=distance_threshold,
        limit=limit,
        offset=offset,
        recency_boost=recency_boost,
        recency_semantic_weight=recency_semantic_weight,
        recency_recency_weight=recency_recency_weight,
        recency_freshness_weight=recency_freshness_weight,
        recency_novelty_weight=recency_novelty_weight,
        recency_half_life_last_access_days=recency_half_life_last_access_days,
        recency_half_life_created_days=recency_half_life_created_days,
        server_side_recency=server_side_recency,
        updated_at=updated_at,
        pinned=pinned,
        hybrid_alpha=hybrid_alpha,
        message_range=message_range,
        valid_from=valid_from,
        valid_until=valid_until,
        recorded_at=recorded_at,
        retired_at=retired_at,
        key=key,
        current_only=current_only,
        as_of=as_of,
        known_at=known_at,
    )
    with _identity(ADMIN):
        return call.operations.memories.search(call.caller, request, access=True)


@_tool(READ, read_only=True)
def memory_prompt(
    query: Annotated[str, Field(min_length=1)],
    session_id: EqFilter | None = None,
    namespace: EqFilter | None = None,
    model_name: str | None = None,
    context_window_max: Annotated[int, Field(ge=1)] | None = None,
    topics: TagFilter | None = None,
    entities: TagFilter | None = None,
    created_at: DateFilter | None = None,
    last_accessed: DateFilter | None = None,
    user_id: EqFilter | None = None,
    memory_type: TypeFilter | None = None,
    event_date: DateFilter | None = None,
    distance_threshold: Annotated[float, Field(ge=0, le=2)] | None = None,
    search_mode: SearchMode = SearchMode.HYBRID,
    limit: Annotated[int, Field(ge=1, le=100)] = 10,
    offset: Annotated[int, Field(ge=0)] = 0,
    optimize_query: bool = False,
    recency_boost: bool | None = None,
    recency_semantic_weight: Weight | None = None,
    recency_recency_weight: Weight | None = None,
    recency_freshness_weight: Weight | None = None,
    recency_novelty_weight: Weight | None = None,
    recency_half_life_last_access_days: float | None = None,
    recency_half_life_created_days: float | None = None,
    server_side_recency: bool | None = None,
    include_long_term_search: bool = True,
    token_budget: Annotated[int, Field(ge=1)] | None = None,
    valid_from: DateFilter | None = None,
    valid_until: DateFilter | None = None,
    recorded_at: DateFilter | None = None,
    retired_at: DateFilter | None = None,
    key: TypeFilter | None = None,
    current_only: bool | None = None,
    as_of: datetime | None = None,
    known_at: datetime | None = None,
) -> HydratedPrompt:
    """The messages for your next turn: the session's summary, scratchpad, recalled and
    recent turns (with session_id), the long-term memories related to the query, then the
    query, within a token budget. Without filters, long-term memory is your user's memories
    outside this session; with filters (topics, created_at ...), a search with them. At
    least a session_id or include_long_term_search must be given."""
    call = current()
    session = None
    if _eq(session_id) is not None:
        session = PromptSession.model_validate(
            _given(
                session_id=_eq(session_id),
                namespace=_eq(namespace),
                user_id=_eq(user_id),
                model_name=model_name,
                context_window_max=context_window_max,
            )
        )
    # The long-term search's own filters; with a session, its namespace and user are the
    # session's (the scope PromptService searches in), not filters.
    filters = _given(
        topics=topics,
        entities=entities,
        created_at=created_at,
        last_accessed=last_accessed,
        memory_type=memory_type,
        event_date=event_date,
        distance_threshold=distance_threshold,
        recency_boost=recency_boost,
        recency_semantic_weight=recency_semantic_weight,
        recency_recency_weight=recency_recency_weight,
        recency_freshness_weight=recency_freshness_weight,
        recency_novelty_weight=recency_novelty_weight,
        recency_half_life_last_access_days=recency_half_life_last_access_days,
        recency_half_life_created_days=recency_half_life_created_days,
        server_side_recency=server_side_recency,
        valid_from=valid_from,
        valid_until=valid_until,
        recorded_at=recorded_at,
        retired_at=retired_at,
        key=key,
        current_only=current_only,
        as_of=as_of,
        known_at=known_at,
    )
    if session is None:  # no session: the namespace and user are the search's
        filters.update(_given(namespace=namespace, user_id=user_id))
    changed = search_mode is not SearchMode.HYBRID or limit != 10 or offset != 0
    long_term: bool | SearchRequest = include_long_term_search
    if include_long_term_search and (filters or changed):
        long_term = _search_request(
            text=query, search_mode=search_mode, limit=limit, offset=offset, **filters
        )
    body = PromptRequest.model_validate(
        _given(query=query, session=session, long_term_search=long_term, token_budget=token_budget)
    )
    with _identity(ADMIN):
        return call.operations.memories.prompt(call.caller, body)


@_tool(WRITE, destructive=True)
def set_working_memory(
    session_id: Id,
    memories: Annotated[list[NewPendingMemory], Field(max_length=1_000)] | None = None,
    messages: Annotated[list[SessionMessage], Field(max_length=10_000)] | None = None,
    context: str | None = None,
    data: dict[str, Any] | None = None,
    namespace: Id | None = None,
    user_id: Id | None = None,
    ttl_seconds: Annotated[int, Field(ge=1)] | None = None,
    long_term_memory_strategy: MemoryStrategy | None = None,
) -> SessionView:
    """Replace a session's document (as PUT /v1/working-memory/{session_id}): its messages,
    pending memories (promoted to long-term memory later), summary (context), free JSON data
    and TTL. It creates the session. Messages and memories without an id get one; a message
    already stored keeps its place. Prefer it for structured data and pending memories, not
    for appending conversation turns."""
    call = current()
    pending = [m.model_copy(update={"id": m.id or new_ulid()}) for m in memories or []]
    body = SessionWrite.model_validate(
        _given(
            messages=messages,
            memories=pending,
            context=context,
            data=data,
            namespace=namespace,
            user_id=user_id,
            ttl_seconds=ttl_seconds,
            long_term_memory_strategy=long_term_memory_strategy,
        )
    )
    with _identity(ADMIN):
        document = call.operations.sessions.put(
            call.caller, session_id, body, user_id=user_id, namespace=namespace
        )
    return session_view(document)


@_tool(READ, read_only=True)
def get_working_memory(
    session_id: Id,
    user_id: Id | None = None,
    namespace: Id | None = None,
    recent_messages_limit: Annotated[int, Field(ge=1, le=100_000)] | None = None,
    model_name: str | None = None,
    context_window_max: Annotated[int, Field(ge=1)] | None = None,
) -> SessionView:
    """Read a session (as GET /v1/working-memory/{session_id}): its newest messages, summary,
    data, pending memories and scratchpad. recent_messages_limit keeps the newest N;
    model_name or context_window_max trims to a model's window."""
    call = current()
    with _identity(ADMIN):
        document = call.operations.sessions.get(
            call.caller,
            session_id,
            user_id=user_id,
            namespace=namespace,
            recent_messages_limit=recent_messages_limit,
            model_name=model_name,
            context_window_max=context_window_max,
        )
    return session_view(document)


@_tool(READ, read_only=True)
def get_long_term_memory(memory_id: Id) -> MemoryRecordView:
    """Read one long-term memory by its id (with whether it is searchable yet)."""
    call = current()
    return call.operations.memories.get(call.caller, memory_id)


@_tool(WRITE)
def edit_long_term_memory(
    memory_id: Id,
    text: str | None = None,
    topics: list[str] | None = None,
    entities: list[str] | None = None,
    memory_type: MemoryType | None = None,
    namespace: Id | None = None,
    user_id: Id | None = None,
    session_id: Id | None = None,
    event_date: datetime | None = None,
    pinned: bool | None = None,
) -> MemoryRecordView:
    """Change the fields you give of a long-term memory (a new text is embedded again), for
    corrections and updates the user makes. A memory never changes its user or namespace:
    create a new one instead. For a time-bound memory set event_date (get_current_datetime
    resolves "today")."""
    call = current()
    edit = MemoryEdit.model_validate(
        _given(
            text=text,
            topics=topics,
            entities=entities,
            memory_type=memory_type,
            namespace=namespace,
            user_id=user_id,
            session_id=session_id,
            event_date=event_date,
            pinned=pinned,
        )
    )
    # Naming a user takes memory:admin unless it is the caller's own (claim_user).
    with _identity(ADMIN):
        return call.operations.memories.edit(call.caller, memory_id, edit, claim_user=True)


@_tool(WRITE, destructive=True)
def delete_long_term_memories(
    memory_ids: Annotated[list[StoredId], Field(min_length=1, max_length=MAX_DELETE)],
) -> Ack:
    """Delete long-term memories by id, for good (their search entries follow). Ids you may
    not see count as absent."""
    call = current()
    return call.operations.memories.delete(call.caller, memory_ids)


@_tool(WRITE)
def supersede_long_term_memory(
    memory_id: StoredId,
    text: Annotated[str, Field(min_length=1)],
    valid_from: datetime | None = None,
    event_date: datetime | None = None,
    topics: list[str] | None = None,
    entities: list[str] | None = None,
) -> MemoryRecordView:
    """Replace a long-term memory that is no longer true with what is true now (a move, a
    new job, a changed preference, a correction): a new memory of the same user, namespace,
    type and key (topics and entities too unless you give new ones) that supersedes it. The
    old one stays in its history, valid until valid_from (default: now), and is no longer
    found by searches (unless they ask as_of an earlier time). Returns the new memory."""
    call = current()
    old = call.operations.memories.get(call.caller, memory_id)
    record = MemoryRecordIn.model_validate(
        _given(
            id=new_ulid(),
            text=text,
            memory_type=old.memory_type,
            topics=old.topics if topics is None else topics,
            entities=old.entities if entities is None else entities,
            user_id=old.user_id,
            namespace=old.namespace,
            key=old.key,
            valid_from=valid_from,
            event_date=event_date,
            supersedes=[memory_id],
        )
    )
    with _identity(ADMIN):
        # its own new fact, even where its text repeats one (the one it supersedes, say)
        body = CreateMemories(memories=[record], deduplicate=False)
        call.operations.memories.create(call.caller, body)
    return call.operations.memories.get(call.caller, record.id)


@_tool(READ, read_only=True)
def get_long_term_memory_history(
    memory_id: StoredId,
    limit: Annotated[int, Field(ge=1, le=100)] = 20,
    before: Annotated[int, Field(ge=0)] | None = None,
) -> MemoryHistoryView:
    """A long-term memory's versions, newest first: each change (create, edit, supersede,
    retire, restore, delete), when, by whom, through which door, the fields it changed and
    the memory as it was. Also for a deleted memory, while its history is kept."""
    call = current()
    return call.operations.memories.history(call.caller, memory_id, limit=limit, before=before)


@_tool(ADMIN, destructive=True)
def compact_long_term_memories(
    namespace: Id | None = None,
    user_id: Id | None = None,
    dry_run: bool = False,
    near_duplicates: bool = True,
    limit: Annotated[int, Field(ge=1, le=1_000)] = 50,
    distance_threshold: Annotated[float, Field(ge=0, le=2)] = DEFAULT_NEAR_DISTANCE,
    cursor: Annotated[str, Field(max_length=4096)] | None = None,
) -> CompactResult:
    """Merge duplicate long-term memories (exact copies into the oldest; near duplicates when
    the model confirms, else flagged) among the `limit` records after `cursor`, as the
    reference server does; dry_run=true only reports what would merge. Needs memory:admin."""
    call = current()
    with _identity(ADMIN):
        return call.operations.upkeep.compact(
            call.caller,
            limit=limit,
            dry_run=dry_run,
            near_duplicates=near_duplicates,
            distance_threshold=distance_threshold,
            cursor=cursor,
            user_id=user_id,
            namespace=namespace,
        )


def _scratchpad(
    tool: str,
    arguments: dict[str, Any],
    session_id: str | None,
    user_id: str | None,
    namespace: str | None,
    profile: str | None,
) -> dict[str, Any]:
    """A scratchpad tool call run as the REST API's tool calls run (memkit.service.tools)."""
    call = current()
    named = PadName(session_id, user_id, namespace, profile)
    with _identity(ADMIN):
        outcome = call.operations.scratchpads.call_tool(
            call.caller, named, tool, arguments, about="of the scratchpad"
        )
    if "error" in outcome:
        raise ToolError(str(outcome["error"]))
    result = outcome["result"]
    return result if isinstance(result, dict) else {"status": result}


Profile = Annotated[str, Field(pattern=PROFILE_PATTERN)]


@_tool(READ, read_only=True)
def get_scratchpad(
    session_id: Id | None = None,
    user_id: Id | None = None,
    namespace: Id | None = None,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """Read the scratchpad ("working memory" in VoltAgent and Mastra): the session's
    (session_id), or the user's for a profile of user scope. Returns its content and
    version. Read it before replacing it."""
    return _scratchpad("get_working_memory", {}, session_id, user_id, namespace, profile)


@_tool(WRITE)
def update_scratchpad(
    content: Annotated[
        str | dict[str, Any],
        Field(
            description="merge: text to append, or the JSON fields that changed (null "
            "removes one); replace: the whole new content"
        ),
    ],
    mode: Literal["merge", "replace"] = "merge",
    session_id: Id | None = None,
    user_id: Id | None = None,
    namespace: Id | None = None,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """Change the scratchpad: merge (the default) or replace its content. Its profile decides
    its format (markdown, JSON checked by a schema, or text)."""
    arguments = {"content": content, "mode": mode}
    return _scratchpad("update_working_memory", arguments, session_id, user_id, namespace, profile)


@_tool(WRITE, destructive=True)
def clear_scratchpad(
    session_id: Id | None = None,
    user_id: Id | None = None,
    namespace: Id | None = None,
    profile: Profile | None = None,
) -> dict[str, Any]:
    """Empty the scratchpad."""
    return _scratchpad("clear_working_memory", {}, session_id, user_id, namespace, profile)


# -- the server and its transport -----------------------------------------------------------


def _refused_arguments(tool: Tool, refused: ValidationError) -> ToolError:
    """Arguments the SDK refused for `tool`, as the model reads them: each field and why,
    never the value; memkit's log line names the tool and the arguments refused."""
    shape = tool.fn_metadata.arg_model
    errors = refused.errors(include_url=False, include_input=False)
    problems = field_problems(errors, shape, name_keys=False)
    named = {str(error["loc"][0]) for error in errors if error["loc"]}
    arguments = sorted(named & set(shape.model_fields))  # never a name the client made up
    logger.info("tool arguments refused", extra={"tool": tool.name, "arguments": arguments})
    reasons = "; ".join(f"{problem.field}: {problem.reason}" for problem in problems)
    return ToolError(f"invalid arguments for {tool.name}: {reasons}")


class _Server(MCPServer):
    """The SDK's server, with memkit's words for arguments it refuses."""

    def __init__(self, name: str, tools: list[Tool], **settings: Any) -> None:
        super().__init__(name, tools=tools, **settings)
        self._memkit_tools = {tool.name: tool for tool in tools}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            # Only the arguments' validation, before the tool runs, leaves pydantic's error
            # as the cause (a tool's own refusals are ToolErrors in words already).
            refused = exc.__cause__
            if isinstance(exc, UnexpectedToolError) or not isinstance(refused, ValidationError):
                raise
            raise _refused_arguments(self._memkit_tools[name], refused) from refused


@lru_cache(maxsize=1)
def server() -> MCPServer:
    """The MCP server with every tool, built once per execution environment."""
    # MCPServer configures the root logger (logging.basicConfig); memkit logs through
    # Powertools (memkit.observability), so the root logger is put back as it was.
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    tools = [Tool.from_function(function, annotations=hints) for function, hints in _TOOLS]
    built: MCPServer = _Server(
        SERVER_NAME,
        tools,
        title="memkit",
        description="Memory for AI agents: sessions, scratchpad and long-term memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        # Nothing outlives a request: no listeners, no sessions.
        subscriptions=False,
    )
    root.handlers[:] = handlers
    root.setLevel(level)
    # At INFO the SDK logs a failed tool call's text: it may hold what the client sent.
    logging.getLogger("mcp").setLevel(logging.WARNING)
    return built


async def serve(
    call: Call, allowed_host: str, origin: str, scope: Scope, receive: Receive, send: Send
) -> None:
    """One HTTP request to the MCP endpoint, by `call`'s caller: a stateless transport with
    JSON responses, made for this request (a session manager runs once), that answers every
    protocol version the SDK knows (the initialize handshake's and 2026-07-28's)."""
    mcp = server()
    mcp.streamable_http_app(
        json_response=True,
        stateless_http=True,
        # DNS rebinding: only the host the gateway served this request on (it answers only
        # for its own domains); a browser page of another origin than the API's is refused.
        transport_security=TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=[allowed_host],
            allowed_origins=[origin],
        ),
    )
    manager = mcp.session_manager
    token = _current.set(call)
    try:
        async with manager.run():
            await manager.handle_request(scope, receive, send)
    finally:
        _current.reset(token)


__all__ = ["TOOL_SCOPES", "Call", "InsufficientScope", "Message", "serve", "server"]
