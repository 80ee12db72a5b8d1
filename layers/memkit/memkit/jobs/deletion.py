"""What memkit's full deletions share: a user's in a namespace (memkit.jobs.users) and an
AgentCore memory's, every user's in its namespace (memkit.agentcore.deletion).

The sweep walks a scope's items as the table lists them now (its sessions, the users' own
scratchpads, its long-term records) and deletes each, a page at a time; a rerun finds only
what is left, so a deletion resumes by running again from the start, and deleting twice is
harmless. Then the scope's vectors go from the index directly (the stream's REMOVE records
would take them out too, later): "done" means nothing of the scope is searchable, even
before the stream catches up.

Messages that outlive their session (index_all_messages) are in no table listing once the
session's meta has gone; the index names them (message docs carry the user and session), so
each listing of the scope's docs deletes the table items it names before the docs go.

What a request does not finish becomes a job (stored in the table, polled with
GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one bounded run at a
time, queueing itself again until nothing is left.

A job that read the scope's data just before the sweep removed it may still write after
"done": an extraction (the memory worker) that read a session, a promotion (the stream
indexer) that read a pending memory. Each writes within its function's timeout
(WRITER_SECONDS), and one that starts later finds nothing to work on. So a deletion sweeps
the same scope again later, in a follow-up: a message of its kind with `not_before` and a
job item of its own (written when it was queued; the follow-up runs only while that item is
running), which, received early, queues itself again (chained past SQS's 900 s delay). A
follow-up revokes no key; one that finds a session queues the next before it deletes the
first, MAX_FOLLOW_UPS in all; one that has not finished after FOLLOW_UP_HOPS messages fails
(its job item says so) into the dead-letter queue. No write of the common path is made to
check for a deletion.

A job item names no user, so it keeps the SHA-256 of its scope (scope_digest: the kind, the
tenant, the namespace, the user if any): a message naming a running job's id with any other
scope is refused (into the dead-letter queue) and sweeps nothing. A job item stored before
job items kept it is not checked.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import chain, islice
from typing import TYPE_CHECKING, ClassVar

from memkit.errors import Forbidden, MemkitError, NotFound, StoreUnavailable
from memkit.ids import new_ulid
from memkit.jobs.curation import MAX_DELAY_SECONDS, Job
from memkit.models.api_keys import UserKeysRevoked
from memkit.models.domain import MessageRef, Owner
from memkit.models.users import DeletionCounts, JobKind, JobState
from memkit.observability import logger, metrics
from memkit.times import Deadline, bound, now_iso
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import Hit, VectorIndex, source_of
from memkit.vectors.removal import NEVER, VECTOR_WINDOW, remove_vectors

if TYPE_CHECKING:
    from memkit.store.base import PageCursor
    from memkit.store.dynamodb import DynamoStore
    from memkit.store.sessions import SessionTable
    from memkit.store.users import UserTable

JOB_LIFETIME_SECONDS = 7 * 24 * 3600
# A job that failed this many attempts has failed (the work queue's maxReceiveCount: the
# message then moves to the dead-letter queue).
MAX_FAILURES = 5
RECORDS_PER_BATCH = 50
# The longest a job that read a session (or a pending memory in it) just before a deletion
# removed it goes on writing what it made of it: the Timeout (template.yaml) of the memory
# worker, which extracts records, and of the stream indexer, which promotes pending
# memories (a template test holds the larger of the two to it).
WRITER_SECONDS = 120
# When a deletion's follow-up sweep catches what such a job wrote: WRITER_SECONDS after the
# run that removed it ended, and a margin for a read of the session that came a moment
# after its deletion (an extraction's reads are eventually consistent).
LATE_WRITES_SECONDS = WRITER_SECONDS + 30
# A deletion's chain of follow-ups ends after this many: the first sweeps what a cached key
# or a job running through the deletion wrote, the next what an extraction of that wrote,
# the third what raced the second. Later writes come from a credential the deletion did not
# revoke (a backend key, a new key, a JWT): new data.
MAX_FOLLOW_UPS = 3
# A follow-up gives up after this many messages (then fails into the dead-letter queue): its
# longest wait takes 4 (3630 s in 900 s steps), the rest are runs that did not finish.
FOLLOW_UP_HOPS = 12


def scope_digest(kind: JobKind, owner: Owner) -> str:
    """The SHA-256 (hex) of a deletion's kind and scope in a canonical encoding (a JSON
    array), as its job item keeps it: it tells whether a message is the job's without the
    item keeping the user's id."""
    scope = [kind, owner.tenant, owner.namespace, owner.user_id]
    return hashlib.sha256(json.dumps(scope, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class DeletionRun:
    """What one run did, and whether it reached the end; for a user's, when the newest of
    the user's API keys was revoked (ISO 8601; None: none is)."""

    counts: DeletionCounts
    done: bool
    keys_revoked_at: str | None = None


@dataclass
class _Progress:
    """What one run has done so far: its counts, and the sessions, records and users (their
    scratchpads) it dealt with (a later listing that names them again skips them)."""

    owner: Owner
    deadline: Deadline
    counts: DeletionCounts = field(default_factory=DeletionCounts)
    # Called once, before the run deletes its first session (ScopeSweep.run).
    before_sessions: Callable[[], None] | None = None
    sessions: set[str] = field(default_factory=set)
    records: set[str] = field(default_factory=set)
    users: set[str] = field(default_factory=set)


def _unseen(ids: Iterable[str], seen: set[str]) -> Iterator[str]:
    """The ids not in `seen`, each once (adding it to `seen`)."""
    for value in ids:
        if value not in seen:
            seen.add(value)
            yield value


def _chunks(pairs: Iterable[tuple[str, str | None]], size: int) -> Iterator[dict[str, str | None]]:
    iterator = iter(pairs)
    while chunk := dict(islice(iterator, size)):
        yield chunk


def paged(
    delete_page: Callable[[PageCursor | None], tuple[int, PageCursor | None]],
    deadline: Deadline,
) -> tuple[int, bool]:
    """A deletion run a page at a time until its end or the deadline: items deleted, and
    whether it reached the end."""
    count, cursor = delete_page(None)
    while cursor is not None and not deadline.passed():
        deleted, cursor = delete_page(cursor)
        count += deleted
    return count, cursor is None


class ScopeSweep:
    """Deletes everything of a scope: `owner.user_id` in `owner.namespace`, or without a
    user every user's in the namespace."""

    def __init__(
        self,
        users: UserTable,
        sessions: SessionTable,
        index: Callable[[], VectorIndex],
        clock: Callable[[], float] = time.time,
        window: int = VECTOR_WINDOW,
        wait: Callable[[float], None] = time.sleep,
    ) -> None:
        self._users = users
        self._sessions = sessions
        self._index = index
        self._clock = clock
        self._window = window
        self._wait = wait

    def run(
        self,
        owner: Owner,
        deadline: Deadline,
        users: Iterable[str] = (),
        revoke_keys: bool = True,
        before_sessions: Callable[[str | None], None] | None = None,
    ) -> DeletionRun:
        """One pass over everything of the scope, until done or the deadline. `users`: whose
        scratchpads in the namespace go too (the scope's own user, and every user a listing
        names, are added); each user's go before the items that named the user, so a pass
        cut short finds the user again. A user's API keys are revoked first, at every pass
        (unless not `revoke_keys`): from then on the authorizer lets no key in as the user
        (API Gateway's cached answers aside: memkit.jobs.users sweeps again once they have
        expired). A key that could not be revoked leaves the pass not done, whatever else
        it deleted: the next pass tries it again. `before_sessions` is called once, with
        when the user's newest key was revoked, before the pass deletes its first session
        (if it raises, the pass deletes none)."""
        keys = UserKeysRevoked()
        if owner.user_id is not None and revoke_keys:
            keys = self._users.revoke_user_keys(owner.tenant, owner.user_id)
            if keys.failed:
                # Counts only: never the user's id or a key's.
                logger.warning("api keys not revoked", extra={"api_keys_failed": keys.failed})
                metrics.add_metric(name="ApiKeyRevocationsFailed", unit="Count", value=keys.failed)
        hook = None if before_sessions is None else partial(before_sessions, keys.last_revoked_at)
        revoked = DeletionCounts(api_keys=keys.revoked)
        run = _Progress(owner, deadline, revoked, before_sessions=hook)
        done = (
            self._delete_pads(run, chain([owner.user_id], users))
            and self._delete_sessions(run)
            and self._delete_records(run, self._users.scope_records(owner))
            and self._delete_vectors(run)
        )
        if done and owner.user_id is None:  # a namespace: the slots of its records of no user
            slots = self._users.delete_namespace_slots(owner.tenant, owner.namespace)
            run.counts += DeletionCounts(items=slots)
        return DeletionRun(run.counts, done and not keys.failed, keys.last_revoked_at)

    def _delete_pads(self, run: _Progress, user_ids: Iterable[str | None]) -> bool:
        """Delete the scratchpads of the users not dealt with yet (the first at once: the
        callers look at the deadline before each item)."""
        owner = run.owner
        for n, user_id in enumerate(_unseen((u for u in user_ids if u), run.users)):
            if n and run.deadline.passed():
                return False
            pads = self._users.delete_user_pads(owner.tenant, owner.namespace, user_id)
            run.counts += DeletionCounts(items=pads)
        return True

    def _delete_sessions(self, run: _Progress) -> bool:
        for session_id, user_id in self._users.scope_sessions(run.owner):
            if run.deadline.passed() or not self._delete_pads(run, [user_id]):
                return False
            if run.before_sessions is not None:
                run.before_sessions()
                run.before_sessions = None
            if not self._delete_session(run, session_id):
                return False
        return True

    def _delete_session(self, run: _Progress, session_id: str) -> bool:
        """Delete the session a page at a time; its vectors go with the scope's."""
        owner = run.owner
        try:
            items, done = paged(
                partial(self._sessions.delete_session_page, owner, session_id), run.deadline
            )
        except Forbidden:
            # The listing was stale: the id now names another user's session. Only what
            # is the user's goes.
            return self._delete_owned_items(run, session_id)
        run.counts += DeletionCounts(sessions=1 if done and items else 0, items=items)
        if done:
            run.sessions.add(session_id)
        return done

    def _delete_owned_items(self, run: _Progress, session_id: str) -> bool:
        items, done = paged(
            partial(self._users.delete_owned_items_page, run.owner, session_id), run.deadline
        )
        run.counts += DeletionCounts(items=items)
        if done:
            run.sessions.add(session_id)
        return done

    def _delete_records(self, run: _Progress, records: Iterable[tuple[str, str | None]]) -> bool:
        unseen = ((rid, user) for rid, user in records if rid not in run.records)
        for chunk in _chunks(unseen, RECORDS_PER_BATCH):
            if run.deadline.passed() or not self._delete_pads(run, chunk.values()):
                return False
            run.records.update(chunk)
            deleted, items = self._users.delete_scope_records(run.owner, list(chunk))
            run.counts += DeletionCounts(records=deleted, items=items)
        return True

    def _delete_vectors(self, run: _Progress) -> bool:
        if run.deadline.passed():
            return False
        owner = run.owner
        conditions = [Condition("namespace", "eq", owner.namespace)]
        if owner.user_id is not None:
            conditions.append(Condition("user_id", "eq", owner.user_id))
        vectors, done = remove_vectors(
            self._index(),
            owner.tenant,
            conditions,
            self._clock,
            run.deadline,
            window=self._window,
            wait=self._wait,
            before=lambda hits: self._delete_indexed(run, hits),
        )
        run.counts += DeletionCounts(vectors=vectors)
        return done

    def _delete_indexed(self, run: _Progress, hits: list[Hit]) -> bool:
        """Delete the table items behind a listing's docs that no table listing named:
        messages kept after their session went (index_all_messages), records the lifecycle
        index does not list (yet). Each doc names the item it came from."""
        sessions: set[str] = set()
        records: list[tuple[str, str | None]] = []
        for hit in hits:
            source = source_of(run.owner.tenant, hit.fields)
            if isinstance(source, MessageRef):
                sessions.add(source.session_id)
            elif source is not None:
                records.append((source.record_id, None))
        for session_id in sorted(sessions - run.sessions):
            if run.deadline.passed() or not self._delete_owned_items(run, session_id):
                return False
        return self._delete_records(run, records)


class BackgroundDeletion(ABC):
    """A deletion that a job carries on in the background: the job's item (its status and
    counts, polled with GET /v1/jobs/{id}), its messages on the work queue, and the runs the
    memory worker makes of it, each a sweep of a scope (and what a kind adds)."""

    kind: ClassVar[JobKind]
    # The metrics' prefix (`<metric>_<outcome>`, `<metric>Items`).
    metric: ClassVar[str]

    def __init__(
        self,
        store: DynamoStore,
        index: Callable[[], VectorIndex],
        send: Callable[[Job], None] | None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        window: int = VECTOR_WINDOW,
        wait: Callable[[float], None] = time.sleep,
    ) -> None:
        self._jobs = store.users
        self._send = send
        self._clock = clock
        self._monotonic = monotonic
        self._sweep = ScopeSweep(store.users, store.sessions, index, clock, window, wait)

    def job(self, tenant: str, job_id: str) -> JobState:
        """The tenant's job, or NotFound (another tenant's job is not found either)."""
        job = self._jobs.get_job(tenant, job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    def resume(self, job: Job, budget_seconds: float) -> str:
        """Run a queued deletion for up to `budget_seconds`; queue it again if not done.
        What came of it, in a word (for logs and metrics). A failed attempt is counted on
        the job and raised, so the queue retries it; the last one marks the job failed.
        A message with `not_before` is a follow-up sweep, with its own job item: early, it
        only queues itself again, if its job item is still running."""
        if not job.job_id:
            raise ValueError(f"a {self.kind} job names its job")
        state = self._jobs.get_job(job.tenant, job.job_id)
        if state is not None and not self._of(state, job):
            # Neither an id nor the scope: a message was refused, of this kind.
            logger.warning("deletion message refused: not its job's", extra={"kind": self.kind})
            metrics.add_metric(name=f"{self.metric}_refused", unit="Count", value=1)
            raise ValueError("the message's scope is not its job's")
        is_follow_up = job.not_before is not None
        if is_follow_up and (state is None or state.status != "running"):
            # Never written by a deletion, expired (a week on), done or failed already.
            outcome = self._outcome(job, "gone" if state is None else f"{state.status}_already")
            self._report(outcome, DeletionCounts(), job.job_id)
            return outcome
        if state is None:
            return "job gone"
        if state.status != "running":
            return f"{state.status} already"
        if job.not_before is not None and job.hops < FOLLOW_UP_HOPS:
            wait = job.not_before - self._clock()
            if wait > 0:
                delay = min(MAX_DELAY_SECONDS, math.ceil(wait))
                self._queue(replace(job, delay_seconds=delay, hops=job.hops + 1))
                return self._outcome(job, "waiting")
        deadline = self._deadline(budget_seconds)
        try:
            run = self._sweep_again(job, deadline) if is_follow_up else self._run(job, deadline)
        except MemkitError:
            final = state.failures + 1 >= MAX_FAILURES
            self._jobs.record_job_failure(
                job.tenant, job.job_id, now_iso(self._clock()), final=final
            )
            raise
        self._jobs.record_job_progress(
            job.tenant, job.job_id, run.counts, now_iso(self._clock()), done=run.done
        )
        if not run.done:
            self._queue(replace(job, delay_seconds=0, hops=job.hops + 1))
        outcome = self._outcome(job, "done" if run.done else "continued")
        self._report(outcome, run.counts, job.job_id)
        return outcome

    def _of(self, state: JobState, job: Job) -> bool:
        """Whether the message `job` is one of the job `state`: of its kind and, unless the
        item was stored before items kept it, for the scope whose digest the item keeps."""
        if state.kind != self.kind:
            return False
        return state.scope is None or state.scope == scope_digest(self.kind, self._scope(job))

    def _outcome(self, job: Job, outcome: str) -> str:
        """What a run of `job` came to, as logged and counted."""
        return outcome if job.not_before is None else f"follow_up_{outcome}"

    @abstractmethod
    def _run(self, job: Job, deadline: Deadline) -> DeletionRun:
        """One run of the job's deletion, until done or the deadline."""

    @abstractmethod
    def _scope(self, job: Job) -> Owner:
        """What a message of this kind deletes (a follow-up sweeps it again)."""

    @abstractmethod
    def _message(self, owner: Owner, stamp: str, job_id: str | None) -> Job:
        """A message of this kind for the deletion of `owner` (the scope), as queued."""

    def _sweep_again(self, job: Job, deadline: Deadline) -> DeletionRun:
        """One run of a follow-up sweep, or, after FOLLOW_UP_HOPS messages, StoreUnavailable:
        the attempts fail into the dead-letter queue, whose alarm tells an operator."""
        if job.hops >= FOLLOW_UP_HOPS:
            # Counts and the job id only: never a user's id or a memory's.
            extra = {"kind": self.kind, "job_id": job.job_id, "hops": job.hops}
            logger.warning("follow-up sweep given up", extra={**extra, "follow_up": job.follow_up})
            metrics.add_metric(name=f"{self.metric}_follow_up_given_up", unit="Count", value=1)
            raise StoreUnavailable(f"the follow-up sweep did not finish in {job.hops} messages")
        run, _ = self._swept(self._scope(job), deadline, job.follow_up)
        return run

    def _swept(
        self, owner: Owner, deadline: Deadline, follow_up: int
    ) -> tuple[DeletionRun, float | None]:
        """One run of the sweep of `owner` (a follow-up's, numbered `follow_up`, revokes no
        key: one made for a user after "done" is the operator's), and when the follow-up it
        queued before deleting its first session is due (None: it queued none). A job that
        read a session just before this run removed it writes within LATE_WRITES_SECONDS of
        the run's end: the follow-up comes after that (and after the gateway's cached
        answers for the keys it revoked, if later). Queued before any session goes, a send
        that fails leaves the sessions to the retry, which queues it again."""
        queued: list[float] = []

        def before_sessions(keys_revoked_at: str | None) -> None:
            if follow_up >= MAX_FOLLOW_UPS:
                extra = {"kind": self.kind, "follow_up": follow_up}
                logger.warning("follow-up sweeps ended with sessions found", extra=extra)
                metrics.add_metric(name=f"{self.metric}_follow_ups_ended", unit="Count", value=1)
                return
            due = self._clock() + max(0.0, deadline.left()) + LATE_WRITES_SECONDS
            cached_until = self._keys_cached_until(keys_revoked_at)
            if cached_until is not None:
                due = max(due, cached_until)
            if self._queue_follow_up(owner, due, follow_up + 1):
                queued.append(due)

        run = self._sweep.run(
            owner, deadline, revoke_keys=not follow_up, before_sessions=before_sessions
        )
        return self._finished(run), (queued[0] if queued else None)

    def _keys_cached_until(self, revoked_at: str | None) -> float | None:
        """Until when the gateway may let in a request on a key revoked at `revoked_at` (and
        that request write); None: no key was."""
        return None

    def _queue_follow_up(self, owner: Owner, due: float, follow_up: int) -> bool:
        """Store a follow-up's job item (it runs only while that is running) and queue its
        message, due at `due` (rounded up to a second), numbered `follow_up` in its chain;
        whether it was (not without a work queue). A send that fails raises: the caller's
        retry, or the job's, queues it again."""
        if self._send is None:
            logger.warning("no work queue: no follow-up sweep", extra={"kind": self.kind})
            return False
        job = self._open(owner, DeletionCounts())
        not_before = math.ceil(due)
        delay = min(MAX_DELAY_SECONDS, math.ceil(not_before - self._clock()))
        message = self._message(owner, job.created_at, job.job_id)
        sent = replace(message, not_before=not_before, follow_up=follow_up, delay_seconds=delay)
        self._enqueue(owner.tenant, job, sent)
        self._report("follow_up_queued", DeletionCounts(), job.job_id)
        return True

    def _deadline(self, budget_seconds: float) -> Deadline:
        """The budget's end, or the deadline in force if sooner (memkit.times.bound: the
        invocation's, less the time to queue the rest and answer), so a budget longer than
        the invocation has left still ends in a job, not a request cut short; without a work
        queue to continue on, none: the run goes on until done (or the function's timeout,
        and a retry)."""
        if self._send is None:
            return NEVER
        in_force = bound()
        if in_force is not None:
            budget_seconds = min(budget_seconds, in_force.left())
        return Deadline.after(budget_seconds, self._monotonic)

    def _finished(self, run: DeletionRun) -> DeletionRun:
        if not run.done and self._send is None:
            # With no budget, only an index that never caught up with its removals, or an
            # API key that kept changing, stops a run short; nothing would finish the rest
            # later, a retry does.
            raise StoreUnavailable("the deletion could not finish yet; retry it")
        return run

    def _open(self, owner: Owner, counts: DeletionCounts, job_id: str | None = None) -> JobState:
        """A new running job of this kind for the scope `owner` (its item stored)."""
        now = self._clock()
        stamp = now_iso(now)
        job = JobState(
            job_id=job_id or new_ulid(int(now * 1000)),
            kind=self.kind,
            status="running",
            created_at=stamp,
            updated_at=stamp,
            expires_at=int(now) + JOB_LIFETIME_SECONDS,
            counts=counts,
            scope=scope_digest(self.kind, owner),
        )
        self._jobs.create_job(owner.tenant, job)
        return job

    def _enqueue(self, tenant: str, job: JobState, message: Job) -> None:
        """Send the job's first message; if that fails nothing will run it: the job says
        so (failed), and the client's retry starts another."""
        try:
            self._queue(message)
        except MemkitError:
            self._jobs.record_job_failure(tenant, job.job_id, job.created_at, final=True)
            raise

    def _queue(self, message: Job) -> None:
        assert self._send is not None
        self._send(message)

    def _report(self, outcome: str, counts: DeletionCounts, job_id: str | None = None) -> None:
        # Counts and the job id only: never a user's id, a memory's name or content.
        extra = {"kind": self.kind, "outcome": outcome, "job_id": job_id, **counts.as_dict()}
        logger.info("deletion", extra=extra)
        metrics.add_metric(name=f"{self.metric}_{outcome}", unit="Count", value=1)
        metrics.add_metric(name=f"{self.metric}Items", unit="Count", value=counts.items)
