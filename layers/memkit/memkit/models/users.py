"""A full deletion (a user's, an AgentCore memory's): what it removed (domain), and the HTTP
bodies of DELETE /v1/users/{user_id} and GET /v1/jobs/{job_id}."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from pydantic import Field

from memkit.models.domain import Model

JobStatus = Literal["running", "done", "failed"]
JobKind = Literal["delete_user", "delete_memory"]


# -- domain -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class DeletionCounts:
    """What a deletion removed: sessions, table items (every item of those sessions, the
    user's scratchpads, records and their index states), records, vectors taken out of
    the index directly (the stream's removals of the same vectors are not counted), and API
    keys acting as the user that it revoked."""

    sessions: int = 0
    items: int = 0
    records: int = 0
    vectors: int = 0
    api_keys: int = 0

    def __add__(self, other: DeletionCounts) -> DeletionCounts:
        return DeletionCounts(
            sessions=self.sessions + other.sessions,
            items=self.items + other.items,
            records=self.records + other.records,
            vectors=self.vectors + other.vectors,
            api_keys=self.api_keys + other.api_keys,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "sessions": self.sessions,
            "items": self.items,
            "records": self.records,
            "vectors": self.vectors,
            "api_keys": self.api_keys,
        }


@dataclass(frozen=True)
class JobState:
    """A background job as stored: no user id or content, only what a poller is shown."""

    job_id: str
    kind: JobKind
    status: JobStatus
    created_at: str
    updated_at: str
    expires_at: int
    counts: DeletionCounts = field(default_factory=DeletionCounts)
    # Attempts that raised (the queue retries them); at the queue's limit the job failed.
    failures: int = 0
    # The SHA-256 of what the job deletes (memkit.jobs.deletion.scope_digest), never the
    # user's id; a message for the job runs only if its scope has this digest. None: a job
    # stored before jobs carried one.
    scope: str | None = None


# -- HTTP -------------------------------------------------------------------------------------


class DeletedCounts(Model):
    sessions: int = Field(description="sessions deleted")
    items: int = Field(
        description="table items deleted: the sessions' items, scratchpads, records and "
        "their index states"
    )
    records: int = Field(description="long-term records deleted")
    vectors: int = Field(description="vectors removed from the index")
    api_keys: int = Field(
        description="API keys acting as the user that were revoked (an AgentCore memory's "
        "deletion revokes none)"
    )


class UserDeleted(Model):
    """200: everything of the user in the namespace is gone (table and index)."""

    status: Literal["done"] = "done"
    deleted: DeletedCounts


class UserDeletionRunning(Model):
    """202: the deletion did not finish within the request; poll the job (Location)."""

    status: Literal["running"] = "running"
    job_id: str


class JobView(Model):
    job_id: str
    kind: JobKind
    status: JobStatus
    counts: DeletedCounts
    created_at: str
    updated_at: str


def deleted_counts(counts: DeletionCounts) -> DeletedCounts:
    return DeletedCounts(**counts.as_dict())


def job_view(job: JobState) -> JobView:
    return JobView(
        job_id=job.job_id,
        kind=job.kind,
        status=job.status,
        counts=deleted_counts(job.counts),
        created_at=job.created_at,
        updated_at=job.updated_at,
    )
