"""An AgentCore memory's deletion (DeleteMemory): everything it holds, in the background.

DeleteMemory marks the memory DELETING and answers at once, as AgentCore does. From then on
no AgentCore operation reads or writes its data (ResourceNotFoundException), GetMemory and
ListMemories show it DELETING, and its name is free for a new memory. A `delete_memory` job
(memkit.jobs.deletion: its item polled with GET /v1/jobs/{id}, its runs bounded and
resumable) then deletes every user's sessions (messages, pending memories, scratchpads),
user scratchpads and long-term records in the memory's namespace, their vectors, the
namespace's profiles and lifecycle policy, the memory's actor items, and last the memory
itself: GetMemory is ResourceNotFoundException once nothing of it is left.

The job's first run waits a grace period (the API function's timeout and more): a request
that found the memory ACTIVE just before it was marked has finished its writes by then, so
the sweep finds them. A strategy's extraction that found it ACTIVE just before, or the
indexer's promotion of a pending memory the sweep then removed, may write for as long as
its function runs (WRITER_SECONDS): so, just before the memory itself goes, the job queues
a follow-up sweep of the namespace for LATE_WRITES_SECONDS later (memkit.jobs.deletion's,
with its own job item, chained and bounded as a user's deletion's are), which deletes what
they wrote.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from memkit.agentcore.models import AgentMemory
from memkit.agentcore.table import agentcore_table
from memkit.errors import NotFound
from memkit.ids import new_ulid
from memkit.jobs.curation import Job
from memkit.jobs.deletion import (
    LATE_WRITES_SECONDS,
    BackgroundDeletion,
    DeletionRun,
    paged,
)
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts
from memkit.times import Deadline
from memkit.vectors.protocol import VectorIndex

if TYPE_CHECKING:
    from memkit.store.dynamodb import DynamoStore

# Longer than the API function's timeout (25 s): see the module's docstring.
DEFAULT_GRACE_SECONDS = 30


class MemoryDeletion(BackgroundDeletion):
    """Deletes an AgentCore memory and everything it holds, as a job."""

    kind = "delete_memory"
    metric = "MemoryDeletion"

    def __init__(
        self,
        store: DynamoStore,
        index: Callable[[], VectorIndex],
        send: Callable[[Job], None] | None,
        grace_seconds: int = DEFAULT_GRACE_SECONDS,
        **options: Any,
    ) -> None:
        """`options`: BackgroundDeletion's (clock, monotonic, window, wait)."""
        super().__init__(store, index, send, **options)
        self._agentcore = agentcore_table(store)
        self._users = store.users
        self._policies = store.policies
        self._grace = grace_seconds

    def start(self, tenant: str, memory: AgentMemory) -> AgentMemory:
        """Mark `memory` DELETING, free its name and queue its deletion; the memory as it now
        is. A memory being deleted already is answered as it is, unless its job failed or
        is gone (then another starts). Without a work queue the deletion runs now, whole."""
        if memory.deleting and self._send is not None and self._running(tenant, memory):
            return memory
        job_id = new_ulid(int(self._clock() * 1000))
        marked = self._agentcore.mark_agent_memory_deleting(
            tenant, memory.memory_id, job_id, memory.deletion_job
        )
        if marked is None:  # another request marked it first, or it is gone
            current = self._agentcore.get_agent_memory(tenant, memory.memory_id)
            if current is None:
                raise NotFound(f"memory {memory.memory_id} does not exist")
            return current
        # The name is freed before the job item is written: a failure here leaves no running
        # job behind, so a retried DeleteMemory marks, frees and queues again.
        self._agentcore.free_agent_memory_name(tenant, marked)
        scope = Owner(tenant=tenant, namespace=marked.memory_id)
        job = self._open(scope, DeletionCounts(), job_id)
        message = replace(self._message(scope, job.created_at, job_id), delay_seconds=self._grace)
        if self._send is None:
            self.resume(message, 0)
            return marked
        self._enqueue(tenant, job, message)
        self._report("queued", DeletionCounts(), job_id)
        return marked

    def _running(self, tenant: str, memory: AgentMemory) -> bool:
        assert memory.deletion_job is not None
        state = self._jobs.get_job(tenant, memory.deletion_job)
        return state is not None and state.status == "running"

    def _run(self, job: Job, deadline: Deadline) -> DeletionRun:
        tenant = job.tenant
        memory = self._agentcore.get_agent_memory(tenant, job.namespace)
        if memory is None or memory.deletion_job != job.job_id:
            return DeletionRun(DeletionCounts(), True)  # deleted, or by a later job
        memory_id = memory.memory_id
        # Every user's, and the scratchpads of each actor (and each user a listing names).
        owner = self._scope(job)
        actors = self._agentcore.agent_memory_actors(tenant, memory_id)
        run = self._sweep.run(owner, deadline, actors)
        if not run.done:
            return self._finished(run)
        items, done = paged(
            partial(self._agentcore.delete_agent_actors_page, tenant, memory_id), deadline
        )
        counts = run.counts + DeletionCounts(items=items)
        if not done:
            return self._finished(DeletionRun(counts, False))
        items = self._users.delete_namespace_profiles(tenant, memory_id)
        items += int(self._policies.delete_lifecycle_policy(tenant, memory_id))
        # What an extraction or a promotion that read the memory's data before the sweep
        # writes after it goes in a follow-up; queued while the memory is still here, so a
        # send that fails leaves the deletion to be run again.
        self._queue_follow_up(owner, self._clock() + LATE_WRITES_SECONDS, 1)
        # Last: until now GetMemory shows it DELETING, and a rerun finds it to finish.
        items += int(self._agentcore.delete_agent_memory(tenant, memory))
        return DeletionRun(counts + DeletionCounts(items=items), True)

    def _scope(self, job: Job) -> Owner:
        # Every user's in the memory's namespace (`namespace` is the memory's id).
        return Owner(tenant=job.tenant, namespace=job.namespace)

    def _message(self, owner: Owner, stamp: str, job_id: str | None) -> Job:
        return Job(self.kind, owner.tenant, owner.namespace, "", stamp, job_id=job_id)
