"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps (memkit.jobs.deletion's sweep).

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.

Each run revokes the API keys that act as the user first. The authorizer refuses a revoked
key at once, but API Gateway keeps a key's answer for ApiKeyCacheSeconds, and a request it
let in may still write as the user for as long as a request runs. An extraction job
(memkit.jobs.curation) that read one of the user's sessions, or a promotion
(memkit.jobs.indexing) that read a pending memory in one, before the sweep removed it may
still write records after "done", until its function's timeout. So a deletion sweeps the
same scope again later, in follow-ups (memkit.jobs.deletion):

- A run that finds a session queues a follow-up before it deletes the first, due once an
  extraction or a promotion that read it has finished after the run's end
  (LATE_WRITES_SECONDS), or once the cached answers of the user's revoked keys have expired
  if later. A send that fails leaves the sessions to the retry, which queues it again.
- The run that finishes the deletion queues one for the keys' cached answers, unless that
  is past or a follow-up it queued comes later.
- A follow-up sweeps everything of the user in the namespace, whoever wrote it, except that
  it revokes no key (one made for the user after "done" is the operator's). If it finds a
  session it queues the next the same way, MAX_FOLLOW_UPS in all. One that has not finished
  after FOLLOW_UP_HOPS messages fails (its job item says so) into the dead-letter queue.

A deletion that finds no session and revoked no key lately costs no follow-up.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from memkit.jobs.curation import Job
from memkit.jobs.deletion import MAX_FAILURES, BackgroundDeletion, DeletionRun
from memkit.jobs.forget import epoch
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.store.dynamodb import DynamoStore
from memkit.times import Deadline
from memkit.vectors.protocol import VectorIndex

__all__ = [
    "DEFAULT_BUDGET_SECONDS",
    "DEFAULT_KEY_CACHE_SECONDS",
    "MAX_FAILURES",
    "DeletionOutcome",
    "UserDeletion",
]

# API Gateway gives a request 30 s and the API function times out at 25 s: a deletion
# stops starting work after this long and leaves the rest to a job.
DEFAULT_BUDGET_SECONDS = 10.0
# The template's ApiKeyCacheSeconds default: how long API Gateway keeps a key's answer.
DEFAULT_KEY_CACHE_SECONDS = 300
# The longest a request runs (the HTTP API's integration timeout): one let in on a cached
# answer just before it expired can write until then.
REQUEST_SECONDS = 30


@dataclass(frozen=True)
class DeletionOutcome:
    """What a DELETE did: everything (`job` None), or this much and a job for the rest."""

    counts: DeletionCounts
    job: JobState | None = None


class UserDeletion(BackgroundDeletion):
    """Deletes everything of a user in a namespace, within a time budget or as a job, and
    again in follow-ups once what was let in before "done" can no longer write."""

    kind = "delete_user"
    metric = "UserDeletion"

    def __init__(
        self,
        store: DynamoStore,
        index: Callable[[], VectorIndex],
        send: Callable[[Job], None] | None,
        key_cache_seconds: int = DEFAULT_KEY_CACHE_SECONDS,
        **options: Any,
    ) -> None:
        """`key_cache_seconds`: the gateway's ApiKeyCacheSeconds; `options`:
        BackgroundDeletion's (clock, monotonic, window, wait)."""
        super().__init__(store, index, send, **options)
        self._keys_accepted_for = key_cache_seconds + REQUEST_SECONDS

    def delete(self, owner: Owner, budget_seconds: float) -> DeletionOutcome:
        """Delete everything of `owner.user_id` in `owner.namespace`; what is left when the
        budget runs out becomes a queued job. Without a work queue the run goes on until
        done (a request cut by the function's timeout is safe to repeat)."""
        if not owner.user_id:
            raise ValueError("a user's deletion names the user")
        run, queued = self._swept(owner, self._deadline(budget_seconds), follow_up=0)
        if run.done:
            self._follow_up(owner, run, queued)
            self._report("done", run.counts)
            return DeletionOutcome(run.counts)
        job = self._open(owner, run.counts)
        self._enqueue(owner.tenant, job, self._message(owner, job.created_at, job.job_id))
        self._report("queued", run.counts, job.job_id)
        return DeletionOutcome(run.counts, job)

    def _run(self, job: Job, deadline: Deadline) -> DeletionRun:
        owner = self._scope(job)
        run, queued = self._swept(owner, deadline, follow_up=0)
        if run.done:
            self._follow_up(owner, run, queued)
        return run

    def _keys_cached_until(self, revoked_at: str | None) -> float | None:
        return None if revoked_at is None else epoch(revoked_at) + self._keys_accepted_for

    def _follow_up(self, owner: Owner, run: DeletionRun, queued: float | None) -> None:
        """At the end of a deletion (`run` its last), queue a sweep of `owner` for when the
        gateway's cached answers for the user's revoked keys (and a request one let in) have
        expired, if that is still to come and no follow-up this run `queued` is due by then.
        A send that fails raises: the caller's retry, or the job's, queues it again."""
        due = self._keys_cached_until(run.keys_revoked_at)
        if due is None or due <= self._clock() or (queued is not None and queued >= due):
            return
        self._queue_follow_up(owner, due, 1)

    def _message(self, owner: Owner, stamp: str, job_id: str | None) -> Job:
        assert owner.user_id is not None
        return Job(
            self.kind,
            owner.tenant,
            owner.namespace,
            session_id="",
            stamp=stamp,
            user_id=owner.user_id,
            job_id=job_id,
        )

    def _scope(self, job: Job) -> Owner:
        if not job.user_id:
            raise ValueError("a delete_user job names its user")
        return Owner(tenant=job.tenant, namespace=job.namespace, user_id=job.user_id)
