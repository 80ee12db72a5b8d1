"""Full deletion of a user in a namespace: sessions (every item of each), scratchpads,
long-term records and vectors. DELETE /v1/users/{user_id} and the memory worker's
`delete_user` jobs run the same steps (memkit.jobs.deletion's sweep).

A request has a time budget: what is not done within it becomes a job (stored in the table,
polled with GET /v1/jobs/{id}) that the memory worker resumes from the work queue, one
bounded run at a time, queueing itself again until nothing is left.
"""

from __future__ import annotations

from dataclasses import dataclass

from memkit.jobs.curation import Job
from memkit.jobs.deletion import MAX_FAILURES, BackgroundDeletion, DeletionRun
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.times import Deadline

__all__ = ["DEFAULT_BUDGET_SECONDS", "MAX_FAILURES", "DeletionOutcome", "UserDeletion"]

# API Gateway gives a request 30 s and the API function times out at 25 s: a deletion
# stops starting work after this long and leaves the rest to a job.
DEFAULT_BUDGET_SECONDS = 10.0


@dataclass(frozen=True)
class DeletionOutcome:
    """What a DELETE did: everything (`job` None), or this much and a job for the rest."""

    counts: DeletionCounts
    job: JobState | None = None


class UserDeletion(BackgroundDeletion):
    """Deletes everything of a user in a namespace, within a time budget or as a job."""

    kind = "delete_user"
    metric = "UserDeletion"

    def delete(self, owner: Owner, budget_seconds: float) -> DeletionOutcome:
        """Delete everything of `owner.user_id` in `owner.namespace`; what is left when the
        budget runs out becomes a queued job. Without a work queue the run goes on until
        done (a request cut by the function's timeout is safe to repeat)."""
        if not owner.user_id:
            raise ValueError("a user's deletion names the user")
        run = self._finished(self._sweep.run(owner, self._deadline(budget_seconds)))
        if run.done:
            self._report("done", run.counts)
            return DeletionOutcome(run.counts)
        job = self._open(owner.tenant, run.counts)
        self._enqueue(
            owner.tenant,
            job,
            Job(
                self.kind,
                owner.tenant,
                owner.namespace,
                session_id="",
                stamp=job.created_at,
                user_id=owner.user_id,
                job_id=job.job_id,
            ),
        )
        self._report("queued", run.counts, job.job_id)
        return DeletionOutcome(run.counts, job)

    def _run(self, job: Job, deadline: Deadline) -> DeletionRun:
        if not job.user_id:
            raise ValueError("a delete_user job names its user")
        owner = Owner(tenant=job.tenant, namespace=job.namespace, user_id=job.user_id)
        return self._finished(self._sweep.run(owner, deadline))
