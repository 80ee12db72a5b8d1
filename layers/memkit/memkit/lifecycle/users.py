"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps.

A run walks the user's items as the table lists them now (GSI2 sessions, GSI3 records, the
user's partition) and deletes each; a rerun finds only what is left, so a deletion resumes
by running again from the start, and deleting a user twice is harmless. Then the user's
vectors go from the index directly (the stream's REMOVE records would take them out too,
later): "done" means nothing of the user is searchable, even before the stream catches up.

Messages that outlive their session (index_all_messages) are in no table listing once the
session's meta has gone; the index names them (message docs carry the user and session), so
their partitions are found there.

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, islice
from typing import TYPE_CHECKING, Protocol

from memkit.errors import Forbidden, MemkitError, NotFound, StoreUnavailable
from memkit.ids import new_ulid
from memkit.lifecycle.phases import Deadline
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.observability import logger, metrics
from memkit.store import keys
from memkit.times import now_iso
from memkit.vectors.filters import Condition
from memkit.vectors.protocol import Removal, VectorIndex

if TYPE_CHECKING:
    from memkit.curation import Job

# API Gateway gives a request 29 s and the API function times out at 15 s: a deletion
# stops starting work after this long and leaves the rest to a job.
DEFAULT_BUDGET_SECONDS = 10.0
JOB_LIFETIME_SECONDS = 7 * 24 * 3600
# A job that failed this many attempts has failed (the work queue's maxReceiveCount: the
# message then moves to the dead-letter queue).
MAX_FAILURES = 5
RECORDS_PER_BATCH = 50
# Docs per browse of the index, and how deep one listing reaches (OpenSearch's default
# max_result_window): a user with more docs is listed again after the first are removed.
VECTOR_PAGE = 500
VECTOR_WINDOW = 10_000
NEVER = Deadline(math.inf)


class UserStore(Protocol):
    """What a user's deletion needs of the table (DynamoStore's UserTable)."""

    def user_session_ids(self, tenant: str, namespace: str, user_id: str) -> Iterator[str]: ...

    def delete_session(self, owner: Owner, session_id: str) -> int: ...

    def delete_user_items(self, owner: Owner, session_id: str) -> int: ...

    def delete_user_pads(self, tenant: str, namespace: str, user_id: str) -> int: ...

    def user_record_ids(self, tenant: str, namespace: str, user_id: str) -> Iterator[str]: ...

    def delete_user_records(
        self, tenant: str, namespace: str, user_id: str, record_ids: Sequence[str]
    ) -> tuple[int, int]: ...

    def create_job(self, tenant: str, job: JobState) -> None: ...

    def get_job(self, tenant: str, job_id: str) -> JobState | None: ...

    def record_job_progress(
        self,
        tenant: str,
        job_id: str,
        counts: DeletionCounts,
        updated_at: str,
        status: str | None = None,
        failed: bool = False,
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


def remove_vectors(
    index: VectorIndex,
    tenant: str,
    conditions: Sequence[Condition],
    clock: Callable[[], float] = time.time,
    deadline: Deadline = NEVER,
) -> tuple[int, bool]:
    """Remove the tenant's docs that meet `conditions` from the index, at a version newer
    than any write so far (a late stream record cannot bring one back). Returns how many
    were removed and whether all were (False: the deadline came first).

    A listing is read whole before anything is removed (removing while paging would shift
    the pages); an index that shows removed docs until its next refresh may list one again,
    which is removed again but counted once."""
    removed: set[str] = set()
    while True:
        found: dict[str, None] = {}
        for offset in range(0, VECTOR_WINDOW, VECTOR_PAGE):
            if deadline.passed():
                break
            page = index.browse(tenant, VECTOR_PAGE, offset, conditions)
            found.update(dict.fromkeys(hit.id for hit in page))
            if len(page) < VECTOR_PAGE:
                break
        fresh = [doc_id for doc_id in found if doc_id not in removed]
        if fresh:
            version = int(clock() * 1_000_000)
            failures = index.remove([Removal(doc_id, tenant, version) for doc_id in fresh])
            if failures:
                raise StoreUnavailable("the vector index did not remove every vector; retry")
            removed.update(fresh)
        if deadline.passed():
            return len(removed), False
        if len(found) < VECTOR_WINDOW or not fresh:
            return len(removed), True


def session_vector_conditions(owner: Owner, session_id: str) -> list[Condition]:
    """The docs of a session's partition (its indexed messages). A request that names a
    user removes only that user's: another user's messages kept from an earlier life of the
    session id stay (store.delete_session keeps them too); messages of no user go through
    the stream's REMOVE records a moment later."""
    conditions = [Condition("pk", "eq", keys.session_pk(owner.tenant, owner.namespace, session_id))]
    if owner.user_id:
        conditions.append(Condition("user_id", "eq", owner.user_id))
    return conditions


@lru_cache(maxsize=4)
def sqs_job_sender(queue_url: str, region: str, endpoint: str | None) -> Callable[[Job], None]:
    """Sends a job to the memory work queue (one SQS client per process and queue)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    sqs = boto3.client("sqs", region_name=region, endpoint_url=endpoint)

    def send(job: Job) -> None:
        try:
            sqs.send_message(QueueUrl=queue_url, MessageBody=job.to_json())
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable("the work queue is unavailable; retry later") from exc

    return send


def _unique(ids: Iterable[str]) -> Iterator[str]:
    seen: set[str] = set()
    for value in ids:
        if value not in seen:
            seen.add(value)
            yield value


def _chunks(ids: Iterable[str], size: int) -> Iterator[list[str]]:
    iterator = iter(ids)
    while chunk := list(islice(iterator, size)):
        yield chunk


class UserDeletion:
    """Deletes everything of a user in a namespace, within a time budget or as a job."""

    def __init__(
        self,
        store: UserStore,
        index: Callable[[], VectorIndex],
        send: Callable[[Job], None] | None,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._index = index
        self._send = send
        self._clock = clock
        self._monotonic = monotonic

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
            self._store.record_job_progress(
                owner.tenant, job.job_id, DeletionCounts(), stamp, status="failed", failed=True
            )
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
            failed = state.failures + 1 >= MAX_FAILURES
            self._store.record_job_progress(
                job.tenant,
                job.job_id,
                DeletionCounts(),
                now_iso(self._clock()),
                status="failed" if failed else None,
                failed=True,
            )
            raise
        status = "done" if run.done else None
        self._store.record_job_progress(
            job.tenant, job.job_id, run.counts, now_iso(self._clock()), status=status
        )
        if not run.done:
            self._queue(owner, job.job_id, job.stamp)
        self._report("done" if run.done else "continued", run.counts, job.job_id)
        return "done" if run.done else "continued"

    # -- the steps ---------------------------------------------------------------------------

    def _run(self, owner: Owner, deadline: Deadline) -> _Run:
        """One pass over everything of the user, until done or the deadline."""
        assert owner.user_id is not None
        tenant, namespace, user_id = owner.tenant, owner.namespace, owner.user_id
        store = self._store
        counts = DeletionCounts()
        done_sessions: set[str] = set()
        for session_id in store.user_session_ids(tenant, namespace, user_id):
            if deadline.passed():
                return _Run(counts, False)
            counts += self._delete_session(owner, session_id)
            done_sessions.add(session_id)

        # What the index holds of the user that no table listing may name: messages kept
        # after their session went (index_all_messages), records the lifecycle index does
        # not list (yet).
        kept_sessions, indexed_records = self._indexed(owner, deadline)
        for session_id in kept_sessions - done_sessions:
            if deadline.passed():
                return _Run(counts, False)
            counts += DeletionCounts(items=store.delete_user_items(owner, session_id))

        if deadline.passed():
            return _Run(counts, False)
        counts += DeletionCounts(items=store.delete_user_pads(tenant, namespace, user_id))

        listed = store.user_record_ids(tenant, namespace, user_id)
        record_ids = chain(listed, sorted(indexed_records))
        for chunk in _chunks(_unique(record_ids), RECORDS_PER_BATCH):
            if deadline.passed():
                return _Run(counts, False)
            records, items = store.delete_user_records(tenant, namespace, user_id, chunk)
            counts += DeletionCounts(records=records, items=items)

        if deadline.passed():
            return _Run(counts, False)
        vectors, done = remove_vectors(
            self._index(), tenant, self._user_conditions(owner), self._clock, deadline
        )
        return _Run(counts + DeletionCounts(vectors=vectors), done)

    def _delete_session(self, owner: Owner, session_id: str) -> DeletionCounts:
        try:
            items = self._store.delete_session(owner, session_id)
        except Forbidden:
            # The listing was stale: the id now names another user's session. Only what
            # is the user's goes.
            return DeletionCounts(items=self._store.delete_user_items(owner, session_id))
        vectors, _ = remove_vectors(
            self._index(), owner.tenant, session_vector_conditions(owner, session_id), self._clock
        )
        return DeletionCounts(sessions=1 if items else 0, items=items, vectors=vectors)

    def _indexed(self, owner: Owner, deadline: Deadline) -> tuple[set[str], set[str]]:
        """The sessions the index holds the user's messages of, and the user's records it
        holds (by the partition each doc came from)."""
        index = self._index()
        session_partitions = keys.sessions_prefix(owner.tenant)
        sessions: set[str] = set()
        records: set[str] = set()
        for offset in range(0, VECTOR_WINDOW, VECTOR_PAGE):
            if deadline.passed():
                break
            page = index.browse(owner.tenant, VECTOR_PAGE, offset, self._user_conditions(owner))
            for hit in page:
                if str(hit.fields.get("pk", "")).startswith(session_partitions):
                    if hit.fields.get("session_id"):
                        sessions.add(str(hit.fields["session_id"]))
                elif hit.fields.get("record_id"):
                    records.add(str(hit.fields["record_id"]))
            if len(page) < VECTOR_PAGE:
                break
        return sessions, records

    @staticmethod
    def _user_conditions(owner: Owner) -> list[Condition]:
        return [
            Condition("namespace", "eq", owner.namespace),
            Condition("user_id", "eq", owner.user_id),
        ]

    def _queue(self, owner: Owner, job_id: str, stamp: str) -> None:
        from memkit.curation import Job

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
