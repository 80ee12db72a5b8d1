"""Agent tools (API.md "Agent integration"): every tool listed for a model API, and each call
run by the service that owns it. The scratchpad's tools go to ScratchpadService; search_memory
and add_memory go to long-term memory, scoped to the call's namespace and user."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from memkit.errors import MemkitError
from memkit.ids import new_ulid
from memkit.models.api import AddMemoryArguments, SearchMemoryArguments
from memkit.models.domain import Owner, PadRef
from memkit.models.memory import (
    CreatedAck,
    CreateMemories,
    MemoryHit,
    MemoryRecordIn,
    MemoryResults,
    SearchMode,
    SearchRequest,
)
from memkit.models.session import MemoryType
from memkit.scratchpad import tools
from memkit.service.scratchpad import ScratchpadService

Arguments = TypeVar("Arguments", bound=BaseModel)
STORED = "stored; searchable with search_memory in a few seconds"
ALREADY_KNOWN = "already known: the user already has this memory, nothing new was stored"


class LongTermMemory(Protocol):
    """What the memory tools need of long-term memory (LongTermService)."""

    def create(
        self, tenant: str, body: CreateMemories, *, confined: bool = False
    ) -> CreatedAck: ...

    def search(self, tenant: str, request: SearchRequest) -> MemoryResults: ...


class ToolService:
    """Lists the agent tools and runs the calls models make; a failure is `{"error": ...}`."""

    def __init__(
        self,
        scratchpads: ScratchpadService,
        long_term: LongTermMemory,
        session_user: Callable[[Owner, str], str | None] = lambda owner, session_id: None,
        new_id: Callable[[], str] = new_ulid,
    ) -> None:
        self._scratchpads = scratchpads
        self._long_term = long_term
        # A call that names only its session acts for the session's user.
        self._session_user = session_user
        self._new_id = new_id

    def _user_of(self, ref: PadRef) -> str | None:
        if ref.owner.user_id is not None or ref.session_id is None:
            return ref.owner.user_id
        return self._session_user(ref.owner, ref.session_id)

    def definitions(self, ref: PadRef, tool_format: tools.ToolFormat) -> list[dict[str, Any]]:
        """The scratchpad's tools (typed by its profile), then long-term memory's."""
        scratchpad = self._scratchpads.tool_definitions(ref, tool_format)
        return scratchpad + tools.render_memory_tools(tool_format)

    def call(self, ref: PadRef, name: str, arguments: Any) -> dict[str, Any]:
        """Run a tool call; what the model can fix (arguments, a refusal) comes back as
        `{"error": ...}` for it to read. The service's own failures (throttled, unavailable)
        are raised: the HTTP status says so, and the caller retries the call as it is."""
        memory_tool = tools.MEMORY_ALIASES.get(name)
        if memory_tool is not None:
            return self._call_memory_tool(ref, memory_tool, arguments)
        if name in tools.ALIASES:
            return self._scratchpads.call_tool(ref, name, arguments)
        known = ", ".join(sorted([*tools.ToolName, *tools.MemoryToolName]))
        return {"error": f"unknown tool {name!r}; available: {known}"}

    def _call_memory_tool(
        self, ref: PadRef, tool: tools.MemoryToolName, arguments: Any
    ) -> dict[str, Any]:
        try:
            # Models send null for an argument they leave out.
            given = {k: v for k, v in tools.parse_arguments(arguments).items() if v is not None}
            if tool is tools.MemoryToolName.SEARCH:
                return {"result": self._search(ref, given)}
            return {"result": self._add(ref, given)}
        except tools.ToolArgumentError as exc:
            return {"error": str(exc)}
        except MemkitError as exc:
            if not exc.caller_can_fix:  # throttled or down: a 429 or 503 with Retry-After
                raise
            return {"error": failure_text(exc)}

    def _search(self, ref: PadRef, given: dict[str, Any]) -> list[dict[str, Any]]:
        args = _validated(SearchMemoryArguments, given, tools.MemoryToolName.SEARCH)
        owner = ref.owner
        user_id = self._user_of(ref)
        request = SearchRequest(
            text=args.query,
            namespace=owner.namespace,
            user_id=user_id,
            # No user known: only what this conversation itself stored or said.
            session_id=ref.session_id if user_id is None else None,
            topics={"any": args.topics} if args.topics else None,
            memory_type={"eq": args.memory_type.value} if args.memory_type else None,
            search_mode=SearchMode.HYBRID,
            limit=args.max_results,
        )
        found = self._long_term.search(owner.tenant, request)
        return [_for_model(hit) for hit in found.memories]

    def _add(self, ref: PadRef, given: dict[str, Any]) -> dict[str, Any]:
        tool = tools.MemoryToolName.ADD
        args = _validated(AddMemoryArguments, given, tool)
        owner = ref.owner
        fields = {
            **args.model_dump(exclude_defaults=True, exclude={"replaces"}),
            "supersedes": args.replaces or None,
            "memory_type": args.memory_type,
            "id": self._new_id(),
            "namespace": owner.namespace,
            "user_id": self._user_of(ref),
            "session_id": ref.session_id,
        }
        # The record's own checks (event_date, tag lengths) before anything is written.
        record = _validated(MemoryRecordIn, fields, tool)
        ack = self._long_term.create(
            owner.tenant,
            CreateMemories(memories=[record], deduplicate=True),
            confined=owner.confined,
        )
        if record.id in ack.created:
            return {"id": record.id, "status": STORED}
        return {"id": None, "status": ALREADY_KNOWN}


def _validated(
    model: type[Arguments], given: dict[str, Any], tool: tools.MemoryToolName
) -> Arguments:
    try:
        return model.model_validate(given)
    except ValidationError as exc:
        problems = exc.errors(include_url=False, include_input=False, include_context=False)
        message = f"invalid arguments for {tool.value}: {problem_text(problems)}"
        if any(p["type"] == "extra_forbidden" for p in problems):
            message += f" ({tool.value} takes {', '.join(model.model_fields)})"
        raise tools.ToolArgumentError(message) from exc


def problem_text(problems: list[ErrorDetails]) -> str:
    """Each problem where a model can act on it (never the input itself)."""
    reasons: list[str] = []
    for problem in problems:
        where = ".".join(str(part) for part in problem["loc"])
        if problem["type"] == "missing":
            reasons.append(f'missing argument "{where}"')
        elif problem["type"] == "extra_forbidden":
            reasons.append(f'unknown argument "{where}"')
        else:
            reasons.append(f"{where}: {problem['msg'].removeprefix('Value error, ')}")
    return "; ".join(reasons)


def failure_text(exc: MemkitError) -> str:
    """A refusal in words the model can act on: the detail and each field's reason."""
    reasons = "; ".join(f"{p.field}: {p.reason}" for p in exc.errors)
    return exc.detail + (f" ({reasons})" if reasons else "")


def _for_model(hit: MemoryHit) -> dict[str, Any]:
    """A search hit as a model reads it: the memory, when it was made, how relevant it is."""
    found: dict[str, Any] = {
        "id": hit.id,
        "text": hit.text,
        "memory_type": hit.memory_type.value,
        "topics": hit.topics,
        "created_at": hit.created_at,
        "relevance": round(1.0 - hit.dist, 3),
    }
    if hit.event_date is not None:
        found["event_date"] = hit.event_date
    if hit.key is not None:
        found["key"] = hit.key
    if hit.memory_type is MemoryType.MESSAGE:
        found["session_id"] = hit.session_id
        found["role"] = hit.role
    return found
