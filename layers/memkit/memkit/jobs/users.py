"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps (memkit.jobs.deletion's sweep).

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.

Each run revokes the API keys that act as the user first. The authorizer refuses a revoked
key at once, but API Gateway keeps a key's answer for ApiKeyCacheSeconds, and a request it
let in may still write as the user for as long as a request runs. An extraction job
(memkit.jobs.curation) that read one of the user's sessions before the sweep removed it may
still write records after "done", until the memory worker's timeout. So a deletion sweeps
the same scope again later, in a follow-up: a `delete_user` message with `not_before` and a
job item of its own (written when it was queued; the follow-up runs only while that item is
running), which, received early, queues itself again (chained past SQS's 900 s delay).

- A run that finds a session queues a follow-up before it deletes the first, due once an
  extraction that read it has finished after the run's end, or once the cached answers of
  the user's revoked keys have expired if later. A send that fails leaves the sessions to
  the retry, which queues it again.
- The run that finishes the deletion queues one for the keys' cached answers, unless that
  is past or a follow-up it queued comes later.
- A follow-up sweeps everything of the user in the namespace, whoever wrote it, except that
  it revokes no key (one made for the user after "done" is the operator's). If it finds a
  session it queues the next the same way, MAX_FOLLOW_UPS in all. One that has not finished
  after FOLLOW_UP_HOPS messages fails (its job item says so) into the dead-letter queue.

No write of the common path is made to check for a deletion. A deletion that finds no
session and revoked no key lately costs no follow-up.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from memkit.errors import StoreUnavailable
from memkit.jobs.curation import MAX_DELAY_SECONDS, Job
from memkit.jobs.deletion import MAX_FAILURES, BackgroundDeletion, DeletionRun, DeletionStore
from memkit.jobs.forget import epoch
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.observability import logger, metrics
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
# The memory worker's Timeout (template.yaml): an extraction job that read a session just
# before the deletion removed it writes its records within that long. Past it, a margin for
# a read of the session that came a moment after (reads are eventually consistent).
WORKER_SECONDS = 120
EXTRACTION_SECONDS = WORKER_SECONDS + 30
# A deletion's chain of follow-ups ends after this many: the first sweeps what a cached key
# or an extraction running through the deletion wrote, the next what an extraction of that
# wrote, the third what raced the second. Later writes come from a credential the deletion
# did not revoke (a backend key, a new key, a JWT): new data.
MAX_FOLLOW_UPS = 3
# A follow-up gives up after this many messages (then fails into the dead-letter queue): its
# longest wait takes 4 (3630 s in 900 s steps), the rest are runs that did not finish.
FOLLOW_UP_HOPS = 12


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
        run, queued = self._swept(owner, self._deadline(budget_seconds), follow_up=0)
        if run.done:
            self._follow_up(owner, run, queued)
            self._report("done", run.counts)
            return DeletionOutcome(run.counts)
        job = self._open(owner.tenant, run.counts)
        self._enqueue(owner.tenant, job, self._message(owner, job.created_at, job.job_id))
        self._report("queued", run.counts, job.job_id)
        return DeletionOutcome(run.counts, job)

    def resume(self, job: Job, budget_seconds: float) -> str:
        """Run a queued deletion (BackgroundDeletion.resume), or a follow-up sweep (a
        message with `not_before`, and its own job item): early, it only queues itself
        again, if its job item is still running."""
        if job.not_before is None or not job.job_id:
            return super().resume(job, budget_seconds)
        state = self._jobs.get_job(job.tenant, job.job_id)
        if state is None or state.status != "running":
            # Never written by a deletion, expired (a week on), done or failed already.
            outcome = self._outcome(job, "gone" if state is None else f"{state.status}_already")
            self._report(outcome, DeletionCounts(), job.job_id)
            return outcome
        wait = job.not_before - self._clock()
        if wait <= 0 or job.hops >= FOLLOW_UP_HOPS:
            return super().resume(job, budget_seconds)  # _run sweeps, or gives up
        delay = min(MAX_DELAY_SECONDS, math.ceil(wait))
        self._queue(replace(job, delay_seconds=delay, hops=job.hops + 1))
        return self._outcome(job, "waiting")

    def _run(self, job: Job, deadline: Deadline, so_far: DeletionCounts) -> DeletionRun:
        owner = self._owner(job)
        if job.not_before is not None and job.hops >= FOLLOW_UP_HOPS:
            # Counts and the job id only: never the user's id.
            extra = {"job_id": job.job_id, "hops": job.hops, "follow_up": job.follow_up}
            logger.warning("follow-up sweep given up", extra=extra)
            metrics.add_metric(name=f"{self.metric}_follow_up_given_up", unit="Count", value=1)
            raise StoreUnavailable(f"the follow-up sweep did not finish in {job.hops} messages")
        run, queued = self._swept(owner, deadline, job.follow_up)
        if run.done and not job.follow_up:
            self._follow_up(owner, run, queued)
        return run

    def _outcome(self, job: Job, outcome: str) -> str:
        return outcome if job.not_before is None else f"follow_up_{outcome}"

    def _swept(
        self, owner: Owner, deadline: Deadline, follow_up: int
    ) -> tuple[DeletionRun, float | None]:
        """One run of the sweep (a follow-up's revokes no key: one made for the user after
        "done" is the operator's), and when the follow-up it queued before deleting its first
        session is due (None: it queued none). An extraction job that read a session just
        before this run removed it writes its records within EXTRACTION_SECONDS of the run's
        end: the follow-up comes after that (and after the cached answers of the user's keys
        revoked, if later). Queued before any session goes, a send that fails leaves the
        sessions to the retry, which queues it again."""
        queued: list[float] = []

        def before_sessions(keys_revoked_at: str | None) -> None:
            if self._send is None:
                logger.warning("no work queue: no follow-up sweep")
                return
            if follow_up >= MAX_FOLLOW_UPS:
                extra = {"follow_up": follow_up}
                logger.warning("follow-up sweeps ended with sessions found", extra=extra)
                metrics.add_metric(name=f"{self.metric}_follow_ups_ended", unit="Count", value=1)
                return
            due = self._clock() + max(0.0, deadline.left()) + EXTRACTION_SECONDS
            if keys_revoked_at is not None:
                due = max(due, epoch(keys_revoked_at) + self._keys_accepted_for)
            self._queue_follow_up(owner, due, follow_up + 1)
            queued.append(due)

        run = self._sweep.run(
            owner, deadline, revoke_keys=not follow_up, before_sessions=before_sessions
        )
        return self._finished(run), (queued[0] if queued else None)

    def _follow_up(self, owner: Owner, run: DeletionRun, queued: float | None) -> None:
        """At the end of a deletion (`run` its last), queue a sweep of `owner` for when the
        gateway's cached answers for the user's revoked keys (and a request one let in) have
        expired, if that is still to come and no follow-up this run `queued` is due by then.
        A send that fails raises: the caller's retry, or the job's, queues it again."""
        if run.keys_revoked_at is None:
            return
        due = epoch(run.keys_revoked_at) + self._keys_accepted_for
        if due <= self._clock() or (queued is not None and queued >= due):
            return
        if self._send is None:
            logger.warning("no work queue: no follow-up sweep")
            return
        self._queue_follow_up(owner, due, 1)

    def _queue_follow_up(self, owner: Owner, due: float, follow_up: int) -> None:
        """Store the follow-up's job item (it runs only while that is running) and queue its
        message, due at `due` (rounded up to a second)."""
        job = self._open(owner.tenant, DeletionCounts())
        not_before = math.ceil(due)
        delay = min(MAX_DELAY_SECONDS, math.ceil(not_before - self._clock()))
        message = self._message(owner, job.created_at, job.job_id)
        sent = replace(message, not_before=not_before, follow_up=follow_up, delay_seconds=delay)
        self._enqueue(owner.tenant, job, sent)
        self._report("follow_up_queued", DeletionCounts(), job.job_id)

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
