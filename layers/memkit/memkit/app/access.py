"""The access rules every operation applies (memkit.app.operations): the scope a caller acts
in, and a search, a create or a prompt as the caller may run it. A refusal of a scope the
credential does not hold is an OutOfScope (memkit.identity's too: 403; the MCP tools answer it
as insufficient_scope, memory:admin may)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from memkit.errors import FieldProblem, OutOfScope, QuotaExceeded
from memkit.identity import Caller
from memkit.models.domain import DEFAULT_NAMESPACE, Owner, Writer
from memkit.models.memory import CreateMemories, SearchRequest
from memkit.models.prompt import PromptRequest

if TYPE_CHECKING:
    from memkit.app.services import Services


def owner_for(
    caller: Caller, namespace: str | None, user_id: str | None, field: str = "user_id"
) -> Owner:
    """The scope `caller` acts in when it names `namespace` and `user_id`: the caller's tenant
    (never the request's), the namespace named, and the user it may act for (memkit.identity:
    its own, or for an admin any of its tenant's, or none). A caller that is not an admin is
    confined to its user: items of another user, or of no user, are not its to read or
    change. `field`: what the request calls the user it names (its 403 names it)."""
    user = caller.acting_for(user_id, field)
    return Owner(
        tenant=caller.tenant,
        namespace=namespace or DEFAULT_NAMESPACE,
        user_id=user,
        confined=not caller.admin,
    )


def confined_search(
    caller: Caller, request: SearchRequest, field: str = "user_id"
) -> SearchRequest:
    """`request` as `caller` may run it: an admin's as asked (its tenant's records); anyone
    else's within its own user's records and messages: no user filter becomes the caller's
    user, a filter that admits only that user stays, any other is a 403."""
    if caller.admin:
        return request
    own = caller.acting_for(None)
    asked = request.user_id
    if asked is None or asked == {}:
        return request.model_copy(update={"user_id": {"eq": own}})
    if isinstance(asked, str):
        admitted: list[Any] = [asked]
    elif set(asked) <= {"eq", "any", "in_"}:
        admitted = [v for op, value in asked.items() for v in (value if op != "eq" else [value])]
    else:
        admitted = []
    if not admitted or any(value != own for value in admitted):
        raise OutOfScope(
            "this credential may search only its own user's memories",
            [FieldProblem(field, "admits another user (memory:admin may)")],
        )
    return request


def confined_memories(caller: Caller, body: CreateMemories) -> CreateMemories:
    """`body` with each memory's user as `caller` may write it (its own; an admin's as named)."""
    memories = [
        memory.model_copy(
            update={"user_id": caller.acting_for(memory.user_id, f"memories.{n}.user_id")}
        )
        for n, memory in enumerate(body.memories)
    ]
    return body.model_copy(update={"memories": memories})


def confined_prompt(caller: Caller, body: PromptRequest) -> tuple[Owner, PromptRequest]:
    """The scope of a prompt's session and `body` as `caller` may run it: its long-term
    search confined as a search is (confined_search)."""
    session = body.session
    owner = owner_for(
        caller, session.namespace if session else None, session.user_id if session else None
    )
    asked = body.long_term_search
    if isinstance(asked, SearchRequest):
        confined = confined_search(caller, asked, "long_term_search.user_id")
        body = body.model_copy(update={"long_term_search": confined})
    return owner, body


def charge(services: Services, caller: Caller) -> None:
    """One request against the caller's tenant's quota (tenant_requests_per_minute; 0: none):
    a 429 with Retry-After once this minute's are spent."""
    quota = services.settings.tenant_requests_per_minute
    if quota:
        wait = services.store.quota.take_request(caller.tenant, quota)
        if wait is not None:
            raise QuotaExceeded(
                f"this tenant's {quota} requests a minute are spent", math.ceil(wait)
            )


def writer_of(caller: Caller) -> Writer:
    """Who a caller's change to a record is, as its history shows: its credential's
    principal (else its user), through its front door."""
    by = caller.principal or (f"user:{caller.user_id}" if caller.user_id else None)
    return Writer(by, caller.door)
