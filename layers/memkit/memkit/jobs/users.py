"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps.

A run walks the user's items as the table lists them now (GSI2 sessions, GSI3 records, the
user's partition) and deletes each, a page at a time; a rerun finds only what is left, so a
deletion resumes by running again from the start, and deleting a user twice is harmless.
Then the user's vectors go from the index directly (the stream's REMOVE records would take
them out too, later): "done" means nothing of the user is searchable, even before the stream
catches up.

Messages that outlive their session (index_all_messages) are in no table listing once the
session's meta has gone; the index names them (message docs carry the user and session), so
each listing of the user's docs deletes the table items it names before the docs go.

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import islice
from typing import TYPE_CHECKING, Protocol

from memkit.errors import Forbidden, MemkitError, NotFound, StoreUnavailable
from memkit.ids import new_ulid
from memkit.jobs.curation import Job
from memkit.models.domain import MessageRef, Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.observability import logger, metrics
from memkit.times import Deadline, now_iso
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import Hit, VectorIndex, source_of
from memkit.vectors.removal import NEVER, VECTOR_WINDOW, remove_vectors

if TYPE_CHECKING:
    from memkit.store.sessions import PageCursor

# API Gateway gives a request 29 s and the API function times out at 15 s: a deletion
# stops starting work after this long and leaves the rest to a job.
DEFAULT_BUDGET_SECONDS = 10.0
JOB_LIFETIME_SECONDS = 7 * 24 * 3600
# A job that failed this many attempts has failed (the work queue's maxReceiveCount: the
# message then moves to the dead-letter queue).
MAX_FAILURES = 5
RECORDS_PER_BATCH = 50


class UserStore(Protocol):
    """What a user's deletion needs of the table (DynamoStore's UserTable)."""

    def user_session_ids(self, tenant: str, namespace: str, user_id: str) -> Iterator[str]: ...

    def delete_session_page(
        self, owner: Owner, session_id: str, after: PageCursor | None = None
    ) -> tuple[int, PageCursor | None]: ...

    def delete_user_items_page(
        self, owner: Owner, session_id: str, after: PageCursor | None = None
    ) -> tuple[int, PageCursor | None]: ...

    def delete_user_pads(self, tenant: str, namespace: str, user_id: str) -> int: ...

    def user_record_ids(self, tenant: str, namespace: str, user_id: str) -> Iterator[str]: ...

    def delete_user_records(
        self, tenant: str, namespace: str, user_id: str, record_ids: Sequence[str]
    ) -> tuple[int, int]: ...

    def create_job(self, tenant: str, job: JobState) -> None: ...

    def get_job(self, tenant: str, job_id: str) -> JobState | None: ...

    def record_job_progress(
        self, tenant: str, job_id: str, counts: DeletionCounts, updated_at: str, done: bool
    ) -> JobState | None: ...

    def record_job_failure(
        self, tenant: str, job_id: str, updated_at: str, final: bool
    ) -> JobState | None: ...


@dataclass(frozen=True)
class DeletionOutcome:
    """What a DELETE did: everything (`job` None), or this much and a job for the rest."""

    counts: DeletionCounts
    job: JobState | None = None


@dataclass(frozen=True)
class _Run:
    counts: DeletionCounts
    done: bool


@dataclass
class _Progress:
    """What one run has done so far: its counts, and the sessions and records it dealt with
    (a later listing that names them again skips them)."""

    owner: Owner
    deadline: Deadline
    counts: DeletionCounts = field(default_factory=DeletionCounts)
    sessions: set[str] = field(default_factory=set)
    records: set[str] = field(default_factory=set)


def _unseen(ids: Iterable[str], seen: set[str]) -> Iterator[str]:
    """The ids not in `seen`, each once (adding it to `seen`)."""
    for value in ids:
        if value not in seen:
            seen.add(value)
            yield value


def _chunks(ids: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(ids)
    while chunk := list(islice(iterator, size)):
        yield chunk


def _paged(
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


class UserDeletion:
    """Deletes everything of a user in a namespace, within a time budget or as a job."""

    def __init__(
        self,
        store: UserStore,
        index: Callable[[], VectorIndex],
        send: Callable[[Job], None] | None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
        window: int = VECTOR_WINDOW,
        wait: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._index = index
        self._send = send
        self._clock = clock
        self._monotonic = monotonic
        self._window = window
        self._wait = wait

    # -- the API -----------------------------------------------------------------------------

    def delete(self, owner: Owner, budget_seconds: float) -> DeletionOutcome:
        """Delete everything of `owner.user_id` in `owner.namespace`; what is left when the
        budget runs out becomes a queued job. Without a work queue the run goes on until
        done (a request cut by the function's timeout is safe to repeat)."""
        if not owner.user_id:
            raise ValueError("a user's deletion names the user")
        deadline = Deadline.after(budget_seconds, self._monotonic) if self._send else NEVER
        run = self._run(owner, deadline)
        if run.done:
            self._report("done", run.counts)
            return DeletionOutcome(run.counts)
        now = self._clock()
        stamp = now_iso(now)
        job = JobState(
            job_id=new_ulid(int(now * 1000)),
            kind="delete_user",
            status="running",
            created_at=stamp,
            updated_at=stamp,
            expires_at=int(now) + JOB_LIFETIME_SECONDS,
            counts=run.counts,
        )
        self._store.create_job(owner.tenant, job)
        try:
            self._queue(owner, job.job_id, stamp)
        except MemkitError:
            # Nothing will run it: the job says so, and the client's retry starts another.
            self._store.record_job_failure(owner.tenant, job.job_id, stamp, final=True)
            raise
        self._report("queued", run.counts, job.job_id)
        return DeletionOutcome(run.counts, job)

    def job(self, tenant: str, job_id: str) -> JobState:
        """The tenant's job, or NotFound (another tenant's job is not found either)."""
        job = self._store.get_job(tenant, job_id)
        if job is None:
            raise NotFound(f"no job {job_id!r}")
        return job

    # -- the worker --------------------------------------------------------------------------

    def resume(self, job: Job, budget_seconds: float) -> str:
        """Run a queued deletion for up to `budget_seconds`; queue it again if not done.
        What came of it, in a word (for logs and metrics). A failed attempt is counted on
        the job and raised, so the queue retries it; the last one marks the job failed."""
        if not job.job_id or not job.user_id:
            raise ValueError("a delete_user job names its job and user")
        state = self._store.get_job(job.tenant, job.job_id)
        if state is None:
            return "job gone"
        if state.status != "running":
            return f"{state.status} already"
        owner = Owner(tenant=job.tenant, namespace=job.namespace, user_id=job.user_id)
        # Without a queue to continue on, the run goes on until done (or the timeout, and the
        # queue's retry).
        deadline = Deadline.after(budget_seconds, self._monotonic) if self._send else NEVER
        try:
            run = self._run(owner, deadline)
        except MemkitError:
            final = state.failures + 1 >= MAX_FAILURES
            self._store.record_job_failure(
                job.tenant, job.job_id, now_iso(self._clock()), final=final
            )
            raise
        self._store.record_job_progress(
            job.tenant, job.job_id, run.counts, now_iso(self._clock()), done=run.done
        )
        if not run.done:
            self._queue(owner, job.job_id, job.stamp)
        outcome = "done" if run.done else "continued"
        self._report(outcome, run.counts, job.job_id)
        return outcome

    # -- the steps ---------------------------------------------------------------------------

    def _run(self, owner: Owner, deadline: Deadline) -> _Run:
        """One pass over everything of the user, until done or the deadline. Each step says
        whether it finished before the deadline."""
        run = _Progress(owner, deadline)
        assert owner.user_id is not None
        listed = self._store.user_record_ids(owner.tenant, owner.namespace, owner.user_id)
        done = (
            self._delete_sessions(run)
            and self._delete_pads(run)
            and self._delete_records(run, listed)
            and self._delete_vectors(run)
        )
        if not done and self._send is None:
            # With no budget, only an index that never caught up with its removals stops a
            # run short; nothing would finish the rest later, a retry does.
            raise StoreUnavailable("the vector index is behind on removals; retry the deletion")
        return _Run(run.counts, done)

    def _delete_sessions(self, run: _Progress) -> bool:
        owner = run.owner
        assert owner.user_id is not None
        for session_id in self._store.user_session_ids(
            owner.tenant, owner.namespace, owner.user_id
        ):
            if run.deadline.passed() or not self._delete_session(run, session_id):
                return False
        return True

    def _delete_session(self, run: _Progress, session_id: str) -> bool:
        """Delete the session a page at a time; its vectors go with the user's."""
        owner = run.owner
        try:
            items, done = _paged(
                partial(self._store.delete_session_page, owner, session_id), run.deadline
            )
        except Forbidden:
            # The listing was stale: the id now names another user's session. Only what
            # is the user's goes.
            return self._delete_user_items(run, session_id)
        run.counts += DeletionCounts(sessions=1 if done and items else 0, items=items)
        if done:
            run.sessions.add(session_id)
        return done

    def _delete_user_items(self, run: _Progress, session_id: str) -> bool:
        items, done = _paged(
            partial(self._store.delete_user_items_page, run.owner, session_id), run.deadline
        )
        run.counts += DeletionCounts(items=items)
        if done:
            run.sessions.add(session_id)
        return done

    def _delete_pads(self, run: _Progress) -> bool:
        owner = run.owner
        assert owner.user_id is not None
        if run.deadline.passed():
            return False
        pads = self._store.delete_user_pads(owner.tenant, owner.namespace, owner.user_id)
        run.counts += DeletionCounts(items=pads)
        return True

    def _delete_records(self, run: _Progress, record_ids: Iterable[str]) -> bool:
        owner = run.owner
        assert owner.user_id is not None
        for chunk in _chunks(_unseen(record_ids, run.records), RECORDS_PER_BATCH):
            if run.deadline.passed():
                return False
            records, items = self._store.delete_user_records(
                owner.tenant, owner.namespace, owner.user_id, chunk
            )
            run.counts += DeletionCounts(records=records, items=items)
        return True

    def _delete_vectors(self, run: _Progress) -> bool:
        if run.deadline.passed():
            return False
        vectors, done = remove_vectors(
            self._index(),
            run.owner.tenant,
            self._user_conditions(run.owner),
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
        records: list[str] = []
        for hit in hits:
            source = source_of(run.owner.tenant, hit.fields)
            if isinstance(source, MessageRef):
                sessions.add(source.session_id)
            elif source is not None:
                records.append(source.record_id)
        for session_id in sorted(sessions - run.sessions):
            if run.deadline.passed() or not self._delete_user_items(run, session_id):
                return False
        return self._delete_records(run, records)

    @staticmethod
    def _user_conditions(owner: Owner) -> list[Condition]:
        return [
            Condition("namespace", "eq", owner.namespace),
            Condition("user_id", "eq", owner.user_id),
        ]

    def _queue(self, owner: Owner, job_id: str, stamp: str) -> None:
        assert self._send is not None
        self._send(
            Job(
                "delete_user",
                owner.tenant,
                owner.namespace,
                session_id="",
                stamp=stamp,
                user_id=owner.user_id,
                job_id=job_id,
            )
        )

    @staticmethod
    def _report(outcome: str, counts: DeletionCounts, job_id: str | None = None) -> None:
        # Counts and the job id only: never the user's id or content.
        logger.info(
            "user deletion", extra={"outcome": outcome, "job_id": job_id, **counts.as_dict()}
        )
        metrics.add_metric(name=f"UserDeletion_{outcome}", unit="Count", value=1)
        metrics.add_metric(name="UserDeletionItems", unit="Count", value=counts.items)
