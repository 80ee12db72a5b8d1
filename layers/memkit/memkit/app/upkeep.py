"""Memory over time, as a caller may run it: forgetting (AMS), compaction, a namespace's
scheduled lifecycle policy, a user's deletion and the jobs that carry one on
(memkit.jobs.forget, .compact, .policies, .users)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memkit.app.access import owner_for
from memkit.identity import Caller
from memkit.models.lifecycle import (
    CompactResult,
    ForgetPolicy,
    ForgetResult,
    LifecyclePolicy,
    LifecyclePolicyView,
    Listing,
)
from memkit.models.users import JobState

if TYPE_CHECKING:
    from memkit.app.services import Services
    from memkit.jobs.users import DeletionOutcome

# Near duplicates judged by the model in one request (each a model call; the rest are
# flagged, and the scheduled run judges them without this limit).
API_JUDGEMENTS = 10


class Upkeep:
    """Forgetting, compaction, policies and deletions in the caller's scope."""

    def __init__(self, services: Services) -> None:
        self._services = services

    def forget(
        self,
        caller: Caller,
        policy: ForgetPolicy,
        *,
        pinned_ids: Sequence[str],
        limit: int,
        dry_run: bool,
        namespace: str | None = None,
        user_id: str | None = None,
        session_id: str | None = None,
    ) -> ForgetResult:
        owner = owner_for(caller, namespace, user_id)
        return self._services.forgetting.forget(
            owner,
            policy,
            pinned_ids=pinned_ids,
            session_id=session_id,
            limit=limit,
            dry_run=dry_run,
        )

    def compact(
        self,
        caller: Caller,
        *,
        limit: int,
        dry_run: bool,
        near_duplicates: bool,
        distance_threshold: float,
        cursor: str | None = None,
        namespace: str | None = None,
        user_id: str | None = None,
    ) -> CompactResult:
        """One request's compaction of the scope's records (the REST route's and the MCP
        tool's): `limit` records after `cursor`."""
        from memkit.jobs.compact import CompactOptions, decode_cursor  # loads on first use

        owner = owner_for(caller, namespace, user_id)
        listing = Listing(owner.tenant, owner.namespace, owner.user_id, owner.user_id is not None)
        after = decode_cursor(cursor, listing)
        options = CompactOptions(
            limit=limit,
            dry_run=dry_run,
            near_duplicates=near_duplicates,
            distance=distance_threshold,
            judgements=API_JUDGEMENTS,
        )
        result, _ = self._services.compaction.compact(owner, options, after)
        return result

    def put_policy(
        self, caller: Caller, namespace: str, policy: LifecyclePolicy
    ) -> LifecyclePolicyView:
        owner = owner_for(caller, namespace, None)
        return self._services.policies.put(owner.tenant, owner.namespace, policy)

    def get_policy(self, caller: Caller, namespace: str) -> LifecyclePolicyView:
        owner = owner_for(caller, namespace, None)
        return self._services.policies.get(owner.tenant, owner.namespace)

    def delete_policy(self, caller: Caller, namespace: str) -> None:
        owner = owner_for(caller, namespace, None)
        self._services.policies.delete(owner.tenant, owner.namespace)

    def delete_user(
        self, caller: Caller, user_id: str, namespace: str | None = None
    ) -> DeletionOutcome:
        """Everything of the user in the namespace, within the configured budget; a job
        carries on what is left."""
        owner = owner_for(caller, namespace, user_id)
        budget = self._services.settings.user_deletion_budget_seconds
        return self._services.deletion.delete(owner, budget)

    def job(self, caller: Caller, job_id: str) -> JobState:
        """A background job of the caller's tenant."""
        return self._services.deletion.job(caller.tenant, job_id)
