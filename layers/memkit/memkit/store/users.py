"""Everything of one user, or of a whole namespace (an AgentCore memory's): sessions,
scratchpads, records (full deletion), and the jobs that finish a deletion in the background.

A user's items are found without a Scan: sessions by GSI2 (the user's sessions in a
namespace), records by the lifecycle index GSI3 (a namespace's records, then the user's),
user-scoped scratchpads in the user's own partition; a namespace's sessions by GSI1, its
records by GSI3, its profiles in their partition. The indexes are eventually consistent:
a listing may still name an item just deleted (deleting it again is harmless) or miss one
written a moment ago (the next run of the deletion finds it).

A job item (PK T#<tenant>#JOB#<id>, SK JOB) holds a background job's status and counts,
and the SHA-256 of its scope (`scope_digest`), never the user's id or content, and expires
a week after it was created. It carries no `kind`: it is nothing the item classes, the
stream's readers or the lifecycle index know.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any

from pynamodb.models import BatchWrite

from memkit.errors import VersionConflict
from memkit.models.api_keys import UserKeysRevoked
from memkit.models.domain import Owner
from memkit.models.users import DeletionCounts, JobState
from memkit.store import keys
from memkit.store.apikeys import ApiKeyTable
from memkit.store.base import BATCH_GET_LIMIT, PageCursor, Table
from memkit.store.failures import translated
from memkit.times import now_iso

# Items per Query page when listing a user's sessions or records.
PAGE_SIZE = 200
JOB_SK = "JOB"
COUNTERS = ("sessions", "items", "records", "vectors", "api_keys")


def job_key(tenant: str, job_id: str) -> keys.Key:
    return f"T#{keys.part(tenant)}#JOB#{keys.part(job_id)}", JOB_SK


def _number(value: int) -> dict[str, str]:
    return {"N": str(value)}


def _everything(item: Any) -> bool:
    return True


class UserTable:
    """Everything of one user, or of a whole namespace: sessions, scratchpads, records (full
    deletion), and jobs."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    # -- a user's items, or a namespace's ----------------------------------------------------

    def scope_sessions(self, owner: Owner) -> Iterator[tuple[str, str | None]]:
        """The sessions of `owner.user_id` in the namespace (GSI2), or without a user every
        session of the namespace (GSI1, then one BatchGetItem a page for their users):
        (session id, its user), expired ones included."""
        session_cls = self._items.session
        if owner.user_id is not None:
            hash_key = keys.sessions_by_user(owner.tenant, owner.namespace, owner.user_id)
            with translated("list a user's sessions"):
                for item in session_cls.by_user.query(hash_key, page_size=PAGE_SIZE):
                    yield item.session_id, owner.user_id
            return
        hash_key = keys.sessions_by_namespace(owner.tenant, owner.namespace)
        with translated("list a namespace's sessions"):
            listed = (item.session_id for item in session_cls.by_namespace.query(hash_key))
            while page := list(islice(listed, BATCH_GET_LIMIT)):
                metas = self._table.batch_get(
                    keys.session_key(owner.tenant, owner.namespace, one) for one in page
                )
                for session_id in page:
                    meta = metas.get(keys.session_key(owner.tenant, owner.namespace, session_id))
                    yield session_id, getattr(meta, "user_id", None)

    def scope_records(self, owner: Owner) -> Iterator[tuple[str, str | None]]:
        """The long-term records of `owner.user_id` in the namespace, or without a user every
        record of the namespace (GSI3): (record id, its user)."""
        # The records, then what deletes left of others (their histories are the user's too).
        for item_cls in (self._items.record, self._items.record_deleted):
            condition = None
            if owner.user_id is not None:
                condition = item_cls.gsi3sk.startswith(keys.user_records_prefix(owner.user_id))
            with translated("list records to delete"):
                for item in item_cls.by_namespace.query(
                    keys.records_by_namespace(owner.tenant, owner.namespace),
                    range_key_condition=condition,
                    page_size=PAGE_SIZE,
                ):
                    yield item.record_id, item.user_id

    def delete_owned_items_page(
        self, owner: Owner, session_id: str, after: PageCursor | None = None
    ) -> tuple[int, PageCursor | None]:
        """One page of the items of a session's partition that are the user's (messages kept
        after their session went; a session id another user has since taken), or without a
        user all of them: the items deleted and where the next page starts (None: the end)."""
        pk = keys.session_pk(owner.tenant, owner.namespace, session_id)

        def doomed(item: Any) -> bool:
            return owner.user_id is None or getattr(item, "user_id", None) == owner.user_id

        return self._table.delete_page(pk, doomed, after, "delete a user's items")

    def delete_user_pads(self, tenant: str, namespace: str, user_id: str) -> int:
        """Delete every item of the user's partition (user-scoped scratchpads); how many."""
        return self._delete_partition(keys.user_pk(tenant, namespace, user_id), "delete pads")

    def revoke_user_keys(self, tenant: str, user_id: str) -> UserKeysRevoked:
        """Revoke the tenant's API keys that act as the user (memkit.store.apikeys: keys are
        the tenant's, in no namespace): how many were live until now, how many could not be
        revoked, and when the newest of the user's keys was revoked."""
        table = ApiKeyTable(self._items.connection.client, self._items.base.Meta.table_name)
        now = self._clock()
        return table.revoke_keys_of(tenant, user_id, now_iso(now), now)

    def delete_namespace_slots(self, tenant: str, namespace: str) -> int:
        """Delete the slots of the namespace's records of no user; how many."""
        pk = keys.namespace_slots_pk(tenant, namespace)
        return self._delete_partition(pk, "delete slots")

    def delete_namespace_profiles(self, tenant: str, namespace: str) -> int:
        """Delete the profiles defined in the namespace; how many."""
        pk = keys.profiles_pk(tenant, namespace)
        return self._delete_partition(pk, "delete profiles")

    def _delete_partition(self, pk: str, operation: str) -> int:
        count, cursor = 0, None
        while True:
            deleted, cursor = self._table.delete_page(pk, _everything, cursor, operation)
            count += deleted
            if cursor is None:
                return count

    def delete_scope_records(self, owner: Owner, record_ids: Sequence[str]) -> tuple[int, int]:
        """Delete those of `record_ids` that are records of the namespace and of
        `owner.user_id` (without a user: of any), or what deletes left of such records, with
        everything in their partitions: index states, histories (a consistent Query of each
        first: a listing may be stale). Returns (records deleted, items deleted)."""
        tenant = owner.tenant

        def whose(item: Any) -> bool:
            return item.namespace == owner.namespace and (
                owner.user_id is None or item.user_id == owner.user_id
            )

        records = items = 0
        for record_id in dict.fromkeys(record_ids):
            with translated("delete records"):
                found = list(
                    self._items.base.query(keys.record_pk(tenant, record_id), consistent_read=True)
                )
            heads = [
                item
                for item in found
                if isinstance(item, self._items.record | self._items.record_deleted)
            ]
            if not heads or not all(whose(item) for item in heads):
                continue
            with translated("delete records"), BatchWrite(self._items.base) as batch:
                for item in found:
                    batch.delete(item)
            records += sum(1 for item in heads if isinstance(item, self._items.record))
            items += len(found)
        return records, items

    # -- jobs --------------------------------------------------------------------------------

    def create_job(self, tenant: str, job: JobState) -> None:
        """Store a new job (a job id is never reused: a second create is a VersionConflict)."""
        pk, sk = job_key(tenant, job.job_id)
        item: dict[str, Any] = {
            "PK": {"S": pk},
            "SK": {"S": sk},
            "tenant": {"S": tenant},
            "job_id": {"S": job.job_id},
            "job_kind": {"S": job.kind},
            "status": {"S": job.status},
            "created_at": {"S": job.created_at},
            "updated_at": {"S": job.updated_at},
            "expires_at": _number(job.expires_at),
            "failures": _number(job.failures),
            **{name: _number(value) for name, value in job.counts.as_dict().items()},
        }
        if job.scope is not None:
            item["scope_digest"] = {"S": job.scope}
        with translated("create job"):
            self._items.connection.client.put_item(
                TableName=self._items.base.Meta.table_name,
                Item=item,
                ConditionExpression="attribute_not_exists(PK)",
            )

    def get_job(self, tenant: str, job_id: str) -> JobState | None:
        """The job (a consistent read), or None when absent or expired."""
        item = self._table.consistent_item(job_key(tenant, job_id), "read job")
        if item is None or int(item["expires_at"]["N"]) <= self._clock():
            return None
        return _to_job(item)

    def record_job_progress(
        self, tenant: str, job_id: str, counts: DeletionCounts, updated_at: str, done: bool
    ) -> JobState | None:
        """Add a run's `counts` to the job's (and mark it done); None when the job is gone."""
        return self._update_job(
            tenant, job_id, updated_at, "done" if done else None, counts.as_dict()
        )

    def record_job_failure(
        self, tenant: str, job_id: str, updated_at: str, final: bool
    ) -> JobState | None:
        """Count a failed attempt (the last one marks the job failed); None when it is gone."""
        return self._update_job(
            tenant, job_id, updated_at, "failed" if final else None, {"failures": 1}
        )

    def _update_job(
        self, tenant: str, job_id: str, updated_at: str, status: str | None, add: dict[str, int]
    ) -> JobState | None:
        """Add to the job's counters, set its status (if given) and `updated_at`; one atomic
        UpdateItem."""
        pk, sk = job_key(tenant, job_id)
        # Attribute names by placeholder: `status`, `items` and the like are reserved words.
        names = {f"#{name}": name for name in add}
        values: dict[str, Any] = {":at": {"S": updated_at}}
        values.update({f":{name}": _number(value) for name, value in add.items()})
        expression = "SET updated_at = :at"
        if status is not None:
            names["#status"] = "status"
            values[":status"] = {"S": status}
            expression += ", #status = :status"
        expression += " ADD " + ", ".join(f"#{name} :{name}" for name in add)
        update: dict[str, Any] = {
            "TableName": self._items.base.Meta.table_name,
            "Key": {"PK": {"S": pk}, "SK": {"S": sk}},
            "UpdateExpression": expression,
            "ConditionExpression": "attribute_exists(PK)",
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
            "ReturnValues": "ALL_NEW",
        }
        try:
            with translated("update job"):
                response = self._items.connection.client.update_item(**update)
        except VersionConflict:
            return None  # expired and deleted meanwhile
        return _to_job(response["Attributes"])


def _to_job(item: dict[str, Any]) -> JobState:
    counts = DeletionCounts(**{name: int(item.get(name, {"N": "0"})["N"]) for name in COUNTERS})
    return JobState(
        job_id=item["job_id"]["S"],
        kind=item["job_kind"]["S"],
        status=item["status"]["S"],
        created_at=item["created_at"]["S"],
        updated_at=item["updated_at"]["S"],
        expires_at=int(item["expires_at"]["N"]),
        counts=counts,
        failures=int(item.get("failures", {"N": "0"})["N"]),
        scope=item["scope_digest"]["S"] if "scope_digest" in item else None,
    )
