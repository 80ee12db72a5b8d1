"""What a route needs besides its parameters: services, the verified caller, and the scope
(tenant, namespace, user) the caller may act in."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from memkit.config import ApiSettings
from memkit.errors import FieldProblem, Forbidden, QuotaExceeded, ValidationFailed
from memkit.identity import Caller
from memkit.models.domain import DEFAULT_NAMESPACE, Owner
from memkit.models.memory import CreateMemories, SearchRequest
from memkit.models.prompt import PromptRequest
from memkit.service.profiles import ProfileService
from memkit.service.scratchpad import ScratchpadService
from memkit.service.sessions import SessionService

if TYPE_CHECKING:
    from memkit.embeddings.protocol import Embedder
    from memkit.jobs.agentcore_deletion import MemoryDeletion
    from memkit.jobs.compact import Compaction
    from memkit.jobs.forget import Forgetting
    from memkit.jobs.policies import PolicyService
    from memkit.jobs.users import UserDeletion
    from memkit.service.agentcore import AgentCoreService
    from memkit.service.long_term import LongTermService
    from memkit.service.tools import ToolService
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.protocol import VectorIndex


@dataclass(frozen=True)
class Lifecycle:
    """Background work that a request may start, each built on first use (memkit.jobs)."""

    forgetting: Callable[[], Forgetting]
    compaction: Callable[[LongTermService], Compaction]
    policies: Callable[[], PolicyService]
    deletion: Callable[[], UserDeletion]
    memory_deletion: Callable[[], MemoryDeletion]


@dataclass(frozen=True)
class Services:
    """Everything the routes call, built once per execution environment by the wiring
    (memkit.handlers.wiring); every route receives it the same way, `services_of(router)`."""

    settings: ApiSettings
    profiles: ProfileService
    scratchpads: ScratchpadService
    sessions: SessionService
    store: DynamoStore
    # The vector index and the embedder, built on first use (a session route needs neither).
    index: Callable[[], VectorIndex]
    embedder: Callable[[], Embedder]
    lifecycle: Lifecycle

    @cached_property
    def long_term(self) -> LongTermService:
        """Long-term memory, imported and built on its first request (cold starts of the
        other routes do not pay for it)."""
        from memkit.service.long_term import LongTermService

        return LongTermService(self.store.records, self.store.sessions, self.index, self.embedder)

    @cached_property
    def agentcore(self) -> AgentCoreService:
        """AgentCore Memory's operations (memkit.service.agentcore), built on first use."""
        from memkit.service.agentcore import AgentCoreService

        return AgentCoreService(self.store.agentcore, self.sessions)

    @cached_property
    def tools(self) -> ToolService:
        from memkit.service.tools import ToolService

        return ToolService(self.scratchpads, self.long_term, self.sessions.user_of)

    @cached_property
    def forgetting(self) -> Forgetting:
        return self.lifecycle.forgetting()

    @cached_property
    def compaction(self) -> Compaction:
        return self.lifecycle.compaction(self.long_term)

    @cached_property
    def policies(self) -> PolicyService:
        return self.lifecycle.policies()

    @cached_property
    def deletion(self) -> UserDeletion:
        return self.lifecycle.deletion()

    @cached_property
    def memory_deletion(self) -> MemoryDeletion:
        return self.lifecycle.memory_deletion()


def _one(field: str, query: str | None, body: str | None) -> str | None:
    if query is not None and body is not None and query != body:
        raise ValidationFailed(
            f"{field} differs between query and body",
            [FieldProblem(field, "query and body differ")],
        )
    return query if query is not None else body


def caller_of(router: Any) -> Caller:
    """The verified caller of this request (set by the app's authorize middleware)."""
    caller = router.context.get("caller")
    assert isinstance(caller, Caller), "the authorize middleware sets the caller first"
    return caller


def owner_of(
    router: Any,
    namespace: str | None,
    user_id: str | None,
    body_namespace: str | None = None,
    body_user_id: str | None = None,
) -> Owner:
    """The scope a request acts in: the caller's tenant (never the request's), the namespace
    it names, and the user it may act for (memkit.identity: its own, or for an admin any of
    its tenant's, or none). A caller that is not an admin is confined to its user: items of
    another user, or of no user, are not its to read or change."""
    caller = caller_of(router)
    named = _one("user_id", user_id, body_user_id)
    return owner_for(caller, _one("namespace", namespace, body_namespace), named)


def owner_for(caller: Caller, namespace: str | None, user_id: str | None) -> Owner:
    """The scope `caller` acts in when it names `namespace` and `user_id` (owner_of's rule,
    for a caller that is not a route's: the MCP tools)."""
    return Owner(
        tenant=caller.tenant,
        namespace=namespace or DEFAULT_NAMESPACE,
        user_id=caller.acting_for(user_id),
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
        raise Forbidden(
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


def services_of(router: Any) -> Services:
    """The Services for this request, built on first use (a health check builds none)."""
    factory = router.context.get("services")
    assert callable(factory), "lambda_handler must append a services factory to the context"
    services = factory()
    assert isinstance(services, Services)
    return services
