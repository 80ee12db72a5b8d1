"""Everything the front doors call, built once per execution environment by the wiring
(memkit.handlers.wiring): the services, the background work a request may start, and the
caller's operations over them (`operations`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

from memkit.config import ApiSettings
from memkit.service.profiles import ProfileService
from memkit.service.scratchpad import ScratchpadService
from memkit.service.sessions import SessionService

if TYPE_CHECKING:
    from memkit.app.operations import Operations
    from memkit.embeddings.protocol import Embedder
    from memkit.jobs.compact import Compaction
    from memkit.jobs.curation import Job
    from memkit.jobs.forget import Forgetting
    from memkit.jobs.policies import PolicyService
    from memkit.jobs.users import UserDeletion
    from memkit.service.long_term import LongTermService
    from memkit.service.prompt import PromptService
    from memkit.service.tools import ToolService
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.protocol import VectorIndex


@dataclass(frozen=True)
class Lifecycle:
    """Background work that a request may start, each built on first use (memkit.jobs), and
    what a wing's background work is built with: the work queue's sender (None: no queue;
    the work runs within its request) and the clock."""

    forgetting: Callable[[], Forgetting]
    compaction: Callable[[LongTermService], Compaction]
    policies: Callable[[], PolicyService]
    deletion: Callable[[], UserDeletion]
    queue: Callable[[], Callable[[Job], None] | None]
    clock: Callable[[], float]


# eq=False: compared and hashed by identity (a wing keeps its own services per Services).
@dataclass(frozen=True, eq=False)
class Services:
    """The services, built once per execution environment by the wiring; the front doors
    reach them through `operations`, which confine each call to its caller."""

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
    def prompts(self) -> PromptService:
        """Prompt hydration (memkit.service.prompt), built once, on first use."""
        from memkit.service.prompt import PromptService

        return PromptService(self.sessions, self.long_term, self.store.records)

    @cached_property
    def operations(self) -> Operations:
        """What a caller may do (memkit.app.operations), confined to its scope."""
        from memkit.app.operations import Operations

        return Operations(self)

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
