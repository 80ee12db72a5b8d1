"""AgentCore as a wing: what the composition root (memkit.handlers.wiring) plugs into the core
through its declared hooks, and nothing in the core names.

- the HTTP API: AgentCore's routers, their scopes and AgentCore's error shape
  (`api_wing`, a memkit.api.wings.Wing);
- curation: a memory's sessions are extracted by its strategies (`strategy`, a
  memkit.jobs.curation.WingExtraction) whatever the model, since summaries need no facts
  (`Policy.extracted_anyway`: `names_a_memory`);
- compaction: an AgentCore record merges only with records of its own namespace and
  strategy (`compaction_scope`);
- the memory worker: DeleteMemory's job (`DELETE_MEMORY`, run by `deletion`).

Per execution environment the wing's services hang off the core's (`AgentCore.of`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable
from functools import cached_property
from typing import TYPE_CHECKING
from weakref import WeakKeyDictionary

from memkit.identity import ADMIN, READ, WRITE

if TYPE_CHECKING:
    from memkit.agentcore.deletion import MemoryDeletion
    from memkit.agentcore.extraction import StrategyExtraction
    from memkit.agentcore.records import AgentCoreRecords
    from memkit.agentcore.service import AgentCoreService
    from memkit.api.wings import Wing
    from memkit.app.services import Services
    from memkit.identity import Caller
    from memkit.jobs.curation import Job
    from memkit.llm.protocol import MemoryModel
    from memkit.models.domain import Owner
    from memkit.service.long_term import LongTermService
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.protocol import VectorIndex

# The worker's job kind of a memory's deletion (memkit.agentcore.deletion).
DELETE_MEMORY = "delete_memory"

# The scope each AgentCore route needs (memkit.api.scopes says what each scope allows).
SCOPES: dict[str, str | None] = {
    # AgentCore Memory: the control plane's memory configuration (an agent reads its memory's
    # strategies; making and deleting memories is an admin's) ...
    "POST /memories/create": ADMIN,
    "POST /memories": READ,
    "POST /memories/": READ,
    "GET /memories/{memory_id}/details": READ,
    "DELETE /memories/{memory_id}/delete": ADMIN,
    "PUT /memories/{memory_id}/update": ADMIN,
    # ... and the data plane's events, sessions and actors (actorId is a user: memory:admin
    # may name any of its tenant's)
    "POST /memories/{memory_id}/events": WRITE,
    "GET /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}/events/{event_id}": READ,
    "DELETE /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}/events/{event_id}": WRITE,
    "POST /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}": READ,
    "POST /memories/{memory_id}/actor/{actor_id}/sessions": READ,
    "POST /memories/{memory_id}/actors": READ,
    "POST /memories/{memory_id}/ingest": WRITE,
    "POST /memories/{memory_id}/extractionJobs": READ,
    "POST /memories/{memory_id}/extractionJobs/start": WRITE,
    # ... and its long-term records (a caller without memory:admin: its own actor's)
    "POST /memories/{memory_id}/retrieve": READ,
    "POST /memories/{memory_id}/memoryRecords": READ,
    "GET /memories/{memory_id}/memoryRecord/{record_id}": READ,
    "DELETE /memories/{memory_id}/memoryRecords/{record_id}": WRITE,
    "POST /memories/{memory_id}/memoryRecords/batchCreate": WRITE,
    "POST /memories/{memory_id}/memoryRecords/batchUpdate": WRITE,
    "POST /memories/{memory_id}/memoryRecords/batchDelete": WRITE,
}


def api_wing() -> Wing:
    """AgentCore's routes on the HTTP API: botocore's paths, scopes, AgentCore's errors."""
    from memkit.agentcore import record_routes, routes
    from memkit.agentcore.errors import agentcore_error, speaks_agentcore
    from memkit.api.wings import Wing

    return Wing(
        name="agentcore",
        routers=(routes.router, record_routes.router),
        scopes=SCOPES,
        owns=speaks_agentcore,
        error=agentcore_error,
        routable=routes.routable,
    )


def compaction_scope(topics: Iterable[str]) -> Hashable:
    """Compaction's scope of a record (memkit.jobs.compact): an AgentCore record's namespace
    and strategy; None for memkit's own records."""
    from memkit.agentcore.mapping import agentcore_scope

    return agentcore_scope(topics)


def names_a_memory(namespace: str) -> bool:
    """Whether a namespace is an AgentCore memory's (curation extracts its sessions)."""
    from memkit.agentcore.extraction import names_a_memory as named

    return named(namespace)


def strategy(
    store: DynamoStore,
    long_term: LongTermService,
    model: MemoryModel,
) -> StrategyExtraction:
    """The curator's extraction of AgentCore memories' sessions, by their strategies."""
    from memkit.agentcore.extraction import StrategyExtraction
    from memkit.agentcore.table import agentcore_table

    return StrategyExtraction(agentcore_table(store), store.records, long_term, model)


def deletion(
    store: DynamoStore,
    index: Callable[[], VectorIndex],
    send: Callable[[Job], None] | None,
    grace_seconds: int | None = None,
    clock: Callable[[], float] | None = None,
) -> MemoryDeletion:
    """DeleteMemory's background deletion (grace: the default; clock: the wall clock)."""
    from memkit.agentcore.deletion import DEFAULT_GRACE_SECONDS, MemoryDeletion

    grace = DEFAULT_GRACE_SECONDS if grace_seconds is None else grace_seconds
    options = {} if clock is None else {"clock": clock}
    return MemoryDeletion(store, index, send, grace, **options)


def actor_owner(caller: Caller, memory_id: str, actor_id: str) -> Owner:
    """The scope an operation on `actor_id`'s data in memory `memory_id` acts in: the actor
    is a memkit user, so a caller without memory:admin may name only its own (403)."""
    from memkit.app.access import owner_for

    return owner_for(caller, memory_id, actor_id, "actorId")


def listed_actor(caller: Caller) -> str | None:
    """The one actor `caller` may list (its own user), or None: an admin lists them all."""
    from memkit.app.access import owner_for

    return None if caller.admin else owner_for(caller, None, None).user_id


class AgentCore:
    """The wing's services over one execution environment's core services, each built on
    first use (`AgentCore.of(services)`: one per Services)."""

    _of: WeakKeyDictionary[Services, AgentCore] = WeakKeyDictionary()

    def __init__(self, services: Services) -> None:
        self._services = services

    @classmethod
    def of(cls, services: Services) -> AgentCore:
        found = cls._of.get(services)
        if found is None:
            found = cls._of[services] = cls(services)
        return found

    @property
    def region(self) -> str:
        """The region memories' ARNs name."""
        return self._services.settings.region

    @cached_property
    def memories(self) -> AgentCoreService:
        """Memories' configuration and their events (memkit.agentcore.service)."""
        from memkit.agentcore.service import AgentCoreService
        from memkit.agentcore.table import agentcore_table

        return AgentCoreService(agentcore_table(self._services.store), self._services.sessions)

    @cached_property
    def records(self) -> AgentCoreRecords:
        """Memory records over long-term memory (memkit.agentcore.records)."""
        from memkit.agentcore.records import AgentCoreRecords

        return AgentCoreRecords(self._services.store.records, self._services.long_term)

    @cached_property
    def deletion(self) -> MemoryDeletion:
        """DeleteMemory's deletion, queued on the work queue the core's deletions use."""
        services = self._services
        lifecycle = services.lifecycle
        grace = services.settings.agentcore_deletion_grace_seconds
        return deletion(services.store, services.index, lifecycle.queue(), grace, lifecycle.clock)
