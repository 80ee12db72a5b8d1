"""What a route needs besides its parameters: services, and who the caller is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import ValidationError

from memkit.config import ENV_PREFIX, ApiSettings, api_settings
from memkit.errors import FieldProblem, Misconfigured, ValidationFailed
from memkit.models.domain import DEFAULT_NAMESPACE, Owner
from memkit.service.profiles import ProfileService
from memkit.service.scratchpad import ScratchpadService
from memkit.service.sessions import SessionService
from memkit.store.protocol import RecordStore, SessionStore, Store

if TYPE_CHECKING:
    from memkit.embeddings.protocol import Embedder
    from memkit.service.long_term import LongTermService
    from memkit.service.tools import ToolService
    from memkit.vectors.protocol import VectorIndex


class SessionsAndScratchpads(Store, SessionStore, RecordStore, Protocol):
    """A store that keeps all of them (DynamoStore)."""


@dataclass(frozen=True)
class Services:
    """Everything the routes call, built once per execution environment."""

    settings: ApiSettings
    profiles: ProfileService
    scratchpads: ScratchpadService
    sessions: SessionService
    store: SessionsAndScratchpads
    # The vector index and the embedder, built on first use (a session route needs neither).
    index: Callable[[], VectorIndex]
    embedder: Callable[[], Embedder]

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

    @classmethod
    def over(
        cls,
        store: SessionsAndScratchpads,
        settings: ApiSettings,
        index: Callable[[], VectorIndex] | None = None,
        embedder: Callable[[], Embedder] | None = None,
    ) -> Services:
        """The services over `store`; the index and embedder default to the configured
        ones, built on first use (a session route never loads a model)."""
        scratchpads = ScratchpadService(store, max_attempts=settings.merge_max_attempts)

        def configured_embedder() -> Embedder:
            from memkit.embeddings.factory import embedder_for

            return embedder_for(settings, settings.region)

        chosen_embedder = embedder or configured_embedder

        def configured_index() -> VectorIndex:
            from memkit.vectors.factory import vector_index_for

            return vector_index_for(settings, settings.region, chosen_embedder().dimensions)

        chosen_index = index or configured_index
        return cls(
            settings=settings,
            profiles=ProfileService(store),
            scratchpads=scratchpads,
            # A session's DELETE takes its messages' vectors out of the index at once.
            sessions=SessionService(store, scratchpads, index=chosen_index),
            store=store,
            index=chosen_index,
            embedder=chosen_embedder,
        )

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


@lru_cache(maxsize=1)
def production_services() -> Services:
    """Services over DynamoDB, from the environment (first request, not import)."""
    from memkit.store.dynamodb import DynamoStore

    try:
        settings = api_settings()
    except ValidationError as exc:
        names = sorted(
            {f"{ENV_PREFIX}{str(e['loc'][0]).upper()}" for e in exc.errors() if e["loc"]}
        )
        raise Misconfigured(f"invalid or missing settings: {', '.join(names)}") from exc
    store = DynamoStore(
        settings,
        index_messages=settings.index_messages,
        index_all_messages=settings.index_all_messages,
    )
    return Services.over(store, settings)


def services_of(router: Any) -> Services:
    """The Services for this request, built on first use (a health check builds none)."""
    factory = router.context.get("services")
    assert callable(factory), "lambda_handler must append a services factory to the context"
    services = factory()
    assert isinstance(services, Services)
    return services
