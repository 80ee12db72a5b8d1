"""AgentCore Memory's routes: the data plane's event operations (boto3 `bedrock-agentcore`)
and the control plane's memory configuration (`bedrock-agentcore-control`), at the paths and
in the shapes botocore's service models give them (docs/agentcore.md). Every failure here
leaves in AgentCore's error shape (memkit.agentcore.errors).

They are left out of memkit's OpenAPI document: AgentCore's clients are generated from
botocore's model, which is the contract these routes keep.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import unquote

from aws_lambda_powertools.event_handler import Response, content_types
from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from memkit.agentcore.models import (
    ACTOR_ID_PATTERN,
    EVENT_ID_PATTERN,
    MEMORY_ARN_PREFIX,
    MEMORY_ID_PATTERN,
    SESSION_ID_PATTERN,
    AgentMemory,
    CreateEventInput,
    CreateMemoryInput,
    ListActorsInput,
    ListEventsInput,
    ListMemoriesInput,
    ListSessionsInput,
)
from memkit.agentcore.service import AgentEvent
from memkit.agentcore.wing import AgentCore, actor_owner, listed_actor
from memkit.api.context import caller_of, services_of
from memkit.errors import FieldProblem, NotServed, ValidationFailed
from memkit.models.domain import Owner
from memkit.models.problems import field_problems

router = APIGatewayHttpRouter()
Input = TypeVar("Input", bound=BaseModel)

MEMORY = "/memories/<memory_id>"
SESSION = f"{MEMORY}/actor/<actor_id>/sessions/<session_id>"
EVENT = f"{SESSION}/events/<event_id>"
# An account id for ARNs when the tenant is not one (AgentCore's ARNs name an account).
NO_ACCOUNT = "000000000000"
PATTERNS = {
    "memoryId": MEMORY_ID_PATTERN,
    "actorId": ACTOR_ID_PATTERN,
    "sessionId": SESSION_ID_PATTERN,
    "eventId": EVENT_ID_PATTERN,
}
LENGTHS = {"memoryId": 2_048, "actorId": 255, "sessionId": 100, "eventId": 128}


def _path(value: str, name: str) -> str:
    """A path parameter as the client sent it (the handler escaped what the resolver cannot
    match: memkit.agentcore.errors), checked against the service model's pattern."""
    text = unquote(value)
    bare = text
    if name == "memoryId":
        found = re.match(MEMORY_ARN_PREFIX, text)
        bare = found.group("id") if found else text
    if len(text) > LENGTHS[name] or not re.fullmatch(PATTERNS[name].strip("^$"), bare):
        raise ValidationFailed(
            f"{name} is not valid", [FieldProblem(name, f"must match {PATTERNS[name]}")]
        )
    return bare


def _body(model: type[Input]) -> Input:
    """The request's body as `model` (validated here rather than by the resolver, whose
    OpenAPI document would otherwise list AgentCore's shapes among memkit's)."""
    event = router.current_event
    raw = event.json_body if event.body else {}
    try:
        return model.model_validate(raw)
    except PydanticValidationError as exc:
        problems = field_problems(exc.errors(), model)
        raise ValidationFailed("the request is not valid", problems) from exc


def _answer(body: dict[str, Any], status: int = 200) -> Response[str]:
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return Response(status_code=status, content_type=content_types.APPLICATION_JSON, body=text)


def _clean(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


def memory_view(memory: AgentMemory, tenant: str, region: str) -> dict[str, Any]:
    """The control plane's Memory shape."""
    account = tenant if re.fullmatch(r"[0-9]{12}", tenant) else NO_ACCOUNT
    strategies = [
        _clean(
            {
                "strategyId": s.strategy_id,
                "name": s.name,
                "description": s.description,
                "type": s.kind.value,
                "namespaces": list(s.namespaces),
                "namespaceTemplates": list(s.namespaces),
                "status": memory.status,
                "createdAt": memory.created_at,
                "updatedAt": memory.updated_at,
            }
        )
        for s in memory.strategies
    ]
    return _clean(
        {
            "arn": f"arn:aws:bedrock-agentcore:{region}:{account}:memory/{memory.memory_id}",
            "id": memory.memory_id,
            "name": memory.name,
            "description": memory.description,
            "eventExpiryDuration": memory.event_expiry_days,
            "status": memory.status,
            "createdAt": memory.created_at,
            "updatedAt": memory.updated_at,
            "strategies": strategies,
            "indexedKeys": list(memory.indexed_keys) or None,
        }
    )


def event_view(event: AgentEvent) -> dict[str, Any]:
    """The data plane's Event shape."""
    return _clean(
        {
            "memoryId": event.memory_id,
            "actorId": event.actor_id,
            "sessionId": event.session_id,
            "eventId": event.event_id,
            "eventTimestamp": event.timestamp,
            "payload": event.payload,
            "branch": event.branch,
            "metadata": event.metadata,
        }
    )


def _wing() -> AgentCore:
    """The wing's services for this request's (built on first use)."""
    return AgentCore.of(services_of(router))


def _memory(memory_id: str) -> tuple[AgentCore, AgentMemory]:
    """The wing and the caller's memory `memory_id` names (404 when its tenant has none
    such: another tenant's memory is as unknown as one never made)."""
    wing = _wing()
    caller = caller_of(router)
    return wing, wing.memories.memory(caller.tenant, _path(memory_id, "memoryId"))


def _actor_owner(memory: AgentMemory, actor_id: str) -> Owner:
    """The scope an operation on `actor_id`'s data acts in (memkit.agentcore.wing)."""
    return actor_owner(caller_of(router), memory.memory_id, _path(actor_id, "actorId"))


# -- the control plane -----------------------------------------------------------------------


@router.post("/memories/create", include_in_schema=False)
def create_memory() -> Response[str]:
    """CreateMemory: a memory, ACTIVE at once (202, as AgentCore answers)."""
    body = _body(CreateMemoryInput)
    wing = _wing()
    tenant = caller_of(router).tenant
    memory = wing.memories.create_memory(tenant, body)
    return _answer({"memory": memory_view(memory, tenant, wing.region)}, 202)


@router.get(f"{MEMORY}/details", include_in_schema=False)
def get_memory(memory_id: str) -> Response[str]:
    """GetMemory: DELETING while its deletion runs, then ResourceNotFoundException."""
    wing = _wing()
    tenant = caller_of(router).tenant
    memory = wing.memories.described(tenant, _path(memory_id, "memoryId"))
    return _answer({"memory": memory_view(memory, tenant, wing.region)})


@router.delete(f"{MEMORY}/delete", include_in_schema=False)
def delete_memory(memory_id: str) -> Response[str]:
    """DeleteMemory: DELETING at once (202); a job deletes everything the memory holds
    (memkit.agentcore.deletion), then the memory."""
    wing = _wing()
    tenant = caller_of(router).tenant
    memory = wing.memories.described(tenant, _path(memory_id, "memoryId"))
    deleting = wing.deletion.start(tenant, memory)
    return _answer({"memoryId": deleting.memory_id, "status": deleting.status}, 202)


# API Gateway routes /memories/ to the route /memories (a route path cannot end with a slash);
# the resolver matches paths exactly, so the function answers both.
@router.post("/memories", include_in_schema=False)
@router.post("/memories/", include_in_schema=False)
def list_memories() -> Response[str]:
    body = _body(ListMemoriesInput)
    wing = _wing()
    tenant = caller_of(router).tenant
    page = wing.memories.list_memories(tenant, body.max_results, body.next_token)
    summaries = [
        {
            key: view[key]
            for key in ("arn", "id", "status", "createdAt", "updatedAt")
            if key in (view := memory_view(memory, tenant, wing.region))
        }
        for memory in page.memories
    ]
    return _answer(_clean({"memories": summaries, "nextToken": page.next_token}))


# -- events ----------------------------------------------------------------------------------


@router.post(f"{MEMORY}/events", include_in_schema=False)
def create_event(memory_id: str) -> Response[str]:
    body = _body(CreateEventInput)
    wing, memory = _memory(memory_id)
    owner = _actor_owner(memory, body.actor_id)
    event = wing.memories.create_event(owner, memory, body)
    return _answer({"event": event_view(event)}, 201)


@router.get(EVENT, include_in_schema=False)
def get_event(memory_id: str, actor_id: str, session_id: str, event_id: str) -> Response[str]:
    wing, memory = _memory(memory_id)
    owner = _actor_owner(memory, actor_id)
    event = wing.memories.get_event(
        owner, memory, _path(session_id, "sessionId"), _path(event_id, "eventId")
    )
    return _answer({"event": event_view(event)})


@router.delete(EVENT, include_in_schema=False)
def delete_event(memory_id: str, actor_id: str, session_id: str, event_id: str) -> Response[str]:
    wing, memory = _memory(memory_id)
    owner = _actor_owner(memory, actor_id)
    deleted = wing.memories.delete_event(
        owner, memory, _path(session_id, "sessionId"), _path(event_id, "eventId")
    )
    return _answer({"eventId": deleted})


@router.post(SESSION, include_in_schema=False)
def list_events(memory_id: str, actor_id: str, session_id: str) -> Response[str]:
    body = _body(ListEventsInput)
    wing, memory = _memory(memory_id)
    owner = _actor_owner(memory, actor_id)
    page = wing.memories.list_events(owner, memory, _path(session_id, "sessionId"), body)
    events = [event_view(event) for event in page.events]
    return _answer(_clean({"events": events, "nextToken": page.next_token}))


@router.post(f"{MEMORY}/actor/<actor_id>/sessions", include_in_schema=False)
def list_sessions(memory_id: str, actor_id: str) -> Response[str]:
    body = _body(ListSessionsInput)
    wing, memory = _memory(memory_id)
    owner = _actor_owner(memory, actor_id)
    with_events = body.filter is not None and body.filter.event_filter == "HAS_EVENTS"
    page = wing.memories.list_sessions(owner, body.max_results, body.next_token, with_events)
    summaries = [
        {"sessionId": s.session_id, "actorId": s.actor_id, "createdAt": s.created_at}
        for s in page.items
    ]
    return _answer(_clean({"sessionSummaries": summaries, "nextToken": page.next_token}))


@router.post(f"{MEMORY}/actors", include_in_schema=False)
def list_actors(memory_id: str) -> Response[str]:
    body = _body(ListActorsInput)
    wing, memory = _memory(memory_id)
    caller = caller_of(router)
    page = wing.memories.list_actors(
        caller.tenant, memory, listed_actor(caller), body.max_results, body.next_token
    )
    actors = [{"actorId": actor} for actor in page.items]
    return _answer(_clean({"actorSummaries": actors, "nextToken": page.next_token}))


# -- what memkit does not serve --------------------------------------------------------------

# (method, path, operation, what to do instead)
NOT_SERVED = (
    (
        "PUT",
        f"{MEMORY}/update",
        "UpdateMemory",
        "create another memory (memkit keeps a memory's configuration as it was created)",
    ),
    (
        "POST",
        f"{MEMORY}/ingest",
        "IngestData",
        "send the data as events (CreateEvent) or records (BatchCreateMemoryRecords)",
    ),
    (
        "POST",
        f"{MEMORY}/extractionJobs",
        "ListMemoryExtractionJobs",
        "memkit extracts from events in the background, without jobs",
    ),
    (
        "POST",
        f"{MEMORY}/extractionJobs/start",
        "StartMemoryExtractionJob",
        "memkit extracts from events in the background, without jobs",
    ),
)


def _not_served(operation: str, instead: str) -> Callable[[str], Response[str]]:
    def refuse(memory_id: str) -> Response[str]:
        raise NotServed(f"memkit does not serve {operation}: {instead} (docs/agentcore.md)")

    refuse.__name__ = f"not_served_{operation}"
    return refuse


for _method, _rule, _operation, _instead in NOT_SERVED:
    router.route(_rule, _method, include_in_schema=False)(_not_served(_operation, _instead))


def routable(event: dict[str, Any]) -> dict[str, Any]:
    """`event` with an AgentCore path the resolver can match: HTTP APIs hand the function
    the decoded path, and an event id's `#` (or any character the resolver's patterns lack)
    would match no route; escaped here, it is unescaped by `_path`."""
    from urllib.parse import quote

    path = str(event.get("rawPath") or "")
    escaped = quote(path, safe="/%-._~()'!*:@,;=+&$<>[]{}|^")
    if escaped == path:
        return event
    return {**event, "rawPath": escaped}
