"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps (memkit.jobs.deletion's sweep).

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.

Each run revokes the API keys that act as the user first. The authorizer refuses a revoked
key at once, but API Gateway keeps a key's answer for ApiKeyCacheSeconds, and a request it
let in may still write as the user for as long as a request runs. So a deletion that leaves
a key of the user revoked less than that long ago queues a follow-up sweep of the same
scope for when the last such answer has expired (chained past SQS's 900 s delay): what a
cached key wrote after "done" goes then. The follow-up revokes no key (one made for the
user after "done" is the operator's).

An extraction job (memkit.jobs.curation) that read one of the user's sessions before the
sweep removed it may still write records after "done", until the memory worker's timeout.
So a deletion that removed a session also sweeps again once that has passed (the same
follow-up, at the later of the two times): no write of the common path is made to check for
a deletion. A user with no key revoked lately and no session costs no follow-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memkit.jobs.curation import MAX_DELAY_SECONDS, Job
from memkit.jobs.deletion import MAX_FAILURES, BackgroundDeletion, DeletionRun, DeletionStore
from memkit.jobs.forget import epoch
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.observability import logger
from memkit.times import Deadline, now_iso
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
# The memory worker's Timeout (template.yaml): an extraction job that read a session just
# before the deletion removed it writes its records within that long. Past it, a margin for
# a read of the session that came a moment after (reads are eventually consistent).
WORKER_SECONDS = 120
EXTRACTION_SECONDS = WORKER_SECONDS + 30


@dataclass(frozen=True)
class DeletionOutcome:
    """What a DELETE did: everything (`job` None), or this much and a job for the rest."""

    counts: DeletionCounts
    job: JobState | None = None


class UserDeletion(BackgroundDeletion):
    """Deletes everything of a user in a namespace, within a time budget or as a job, and
    again once the cached answers of the user's revoked API keys have expired."""

    kind = "delete_user"
    metric = "UserDeletion"

    def __init__(
        self,
        store: DeletionStore,
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
        run = self._finished(self._sweep.run(owner, self._deadline(budget_seconds)))
        if run.done:
            self._follow_up(owner, run, run.counts)
            self._report("done", run.counts)
            return DeletionOutcome(run.counts)
        job = self._open(owner.tenant, run.counts)
        self._enqueue(owner.tenant, job, self._message(owner, job.created_at, job.job_id))
        self._report("queued", run.counts, job.job_id)
        return DeletionOutcome(run.counts, job)

    def resume(self, job: Job, budget_seconds: float) -> str:
        """Run a queued deletion (BackgroundDeletion.resume), or a follow-up sweep (a
        message with `not_before`): early, it only queues itself again."""
        if job.not_before is None:
            return super().resume(job, budget_seconds)
        wait = job.not_before - self._clock()
        if wait > 0:
            self._queue(replace(job, delay_seconds=min(MAX_DELAY_SECONDS, math.ceil(wait))))
            return "follow_up_waiting"
        # Keys stay: one made for the user after "done" is the operator's to keep.
        deadline = self._deadline(budget_seconds)
        run = self._finished(self._sweep.run(self._owner(job), deadline, revoke_keys=False))
        if not run.done:
            self._queue(replace(job, delay_seconds=0))
        outcome = "follow_up_done" if run.done else "follow_up_continued"
        self._report(outcome, run.counts)
        return outcome

    def _run(self, job: Job, deadline: Deadline, so_far: DeletionCounts) -> DeletionRun:
        owner = self._owner(job)
        run = self._finished(self._sweep.run(owner, deadline))
        if run.done:
            self._follow_up(owner, run, so_far + run.counts)
        return run

    def _follow_up(self, owner: Owner, run: DeletionRun, deleted: DeletionCounts) -> None:
        """Queue a sweep of `owner` for when nothing let in before the deletion can write as
        the user any more, if that is still to come: the gateway's cached answers for the
        user's revoked keys (and a request one let in), and, if the deletion (`deleted`:
        all its runs') removed a session, an extraction job that had read it before. A send
        that fails raises: the caller's retry, or the job's, queues it again."""
        now = self._clock()
        until = [now]
        if run.keys_revoked_at is not None:
            until.append(epoch(run.keys_revoked_at) + self._keys_accepted_for)
        if deleted.sessions:
            until.append(now + EXTRACTION_SECONDS)
        due = max(until)
        if due <= now:  # before rounding: `now` has a fraction, so its ceiling is later
            return
        if self._send is None:
            logger.warning("no work queue: no follow-up sweep after the keys' cache")
            return
        message = self._message(owner, now_iso(now), None)
        not_before = math.ceil(due)
        delay = min(MAX_DELAY_SECONDS, math.ceil(not_before - now))
        self._queue(replace(message, not_before=not_before, delay_seconds=delay))

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

    @staticmethod
    def _owner(job: Job) -> Owner:
        if not job.user_id:
            raise ValueError("a delete_user job names its user")
        return Owner(tenant=job.tenant, namespace=job.namespace, user_id=job.user_id)
