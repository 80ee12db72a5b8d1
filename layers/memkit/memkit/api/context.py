"""What a route needs besides its parameters: services, and who the caller is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from memkit.config import ApiSettings
from memkit.errors import FieldProblem, ValidationFailed
from memkit.models.domain import DEFAULT_NAMESPACE, Owner
from memkit.service.profiles import ProfileService
from memkit.service.scratchpad import ScratchpadService
from memkit.service.sessions import SessionService
from memkit.store.protocol import RecordStore, SessionStore, Store

if TYPE_CHECKING:
    from memkit.embeddings.protocol import Embedder
    from memkit.jobs.compact import Compaction
    from memkit.jobs.forget import Forgetting
    from memkit.jobs.policies import PolicyService
    from memkit.jobs.users import UserDeletion
    from memkit.service.long_term import LongTermService
    from memkit.service.tools import ToolService
    from memkit.vectors.protocol import VectorIndex


class SessionsAndScratchpads(Store, SessionStore, RecordStore, Protocol):
    """A store that keeps all of them (DynamoStore)."""


@dataclass(frozen=True)
class Lifecycle:
    """Background work that a request may start, each built on first use (memkit.jobs)."""

    forgetting: Callable[[], Forgetting]
    compaction: Callable[[LongTermService], Compaction]
    policies: Callable[[], PolicyService]
    deletion: Callable[[], UserDeletion]


@dataclass(frozen=True)
class Services:
    """Everything the routes call, built once per execution environment by the wiring
    (memkit.handlers.wiring); every route receives it the same way, `services_of(router)`."""

    settings: ApiSettings
    profiles: ProfileService
    scratchpads: ScratchpadService
    sessions: SessionService
    store: SessionsAndScratchpads
    # The vector index and the embedder, built on first use (a session route needs neither).
    index: Callable[[], VectorIndex]
    embedder: Callable[[], Embedder]
    lifecycle: Lifecycle

    @cached_property
    def long_term(self) -> LongTermService:
        """Long-term memory, imported and built on its first request (cold starts of the
        other routes do not pay for it)."""
        from memkit.service.long_term import LongTermService

        return LongTermService(self.store, self.index, self.embedder)

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

    def tenant(self) -> str:
        """The caller's tenant. With auth off (the local stack's default) the configured one."""
        return self.settings.default_tenant

    def owner(
        self,
        namespace: str | None,
        user_id: str | None,
        body_namespace: str | None = None,
        body_user_id: str | None = None,
    ) -> Owner:
        """The caller's scope. With auth off (this issue) the tenant is the configured default."""
        return Owner(
            tenant=self.settings.default_tenant,
            namespace=_one("namespace", namespace, body_namespace) or DEFAULT_NAMESPACE,
            user_id=_one("user_id", user_id, body_user_id),
        )


def _one(field: str, query: str | None, body: str | None) -> str | None:
    if query is not None and body is not None and query != body:
        raise ValidationFailed(
            f"{field} differs between query and body",
            [FieldProblem(field, "query and body differ")],
        )
    return query if query is not None else body


def services_of(router: Any) -> Services:
    """The Services for this request, built on first use (a health check builds none)."""
    factory = router.context.get("services")
    assert callable(factory), "lambda_handler must append a services factory to the context"
    services = factory()
    assert isinstance(services, Services)
    return services
