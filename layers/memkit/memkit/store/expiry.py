"""Expired sessions found by the lifecycle index (GSI3), read and deleted by the cleanup run,
and the cleanup run's saved cursors.

DynamoDB's TTL deletes an expired item days late, so the cleanup run deletes what is due
itself: a session meta that expires is listed in GSI3 under EXP#<shard> by its expiry time
(keys.expiry_entry), so a run reads only the due entries, never the table. For each one it
reads the session's partition once (a Query) and deletes that life of the session.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from memkit.errors import VersionConflict
from memkit.store import keys
from memkit.store.base import Table
from memkit.store.failures import translated
from memkit.times import now_iso

# The cleanup run's cursors: a system item that belongs to no tenant (so its key does not
# start with one, and no tenant's Query, listing or deletion can ever reach it). Its `kind`
# is none of the item classes', so PynamoDB reads and the stream filters skip it too.
CLEANUP_PK = "SYS#cleanup"
CLEANUP_SK = "CURSORS"
SYSTEM_KIND = "system"

# Items per Query page of a session's partition, and concurrent deletes of its items.
PARTITION_PAGE = 500
DELETE_WORKERS = 8


@dataclass(frozen=True)
class DueSession:
    """A session meta the lifecycle index lists as expired: its partition, its GSI3 sort
    key (where a run resumes) and the expiry the index saw."""

    pk: str
    sort_key: str
    expires_at: int


@dataclass(frozen=True)
class Purge:
    """What deleting one expired session did. `purged` is False when the session was
    renewed, re-created or deleted since the index listed it: then nothing was deleted."""

    examined: int
    deleted: int
    kept: int
    purged: bool


@dataclass(frozen=True)
class SavedCursors:
    """Each phase's saved cursor (phases that are done have none), and the item's version."""

    cursors: dict[str, str]
    version: int


def _condition_on_gen(gen: str | None) -> tuple[str, dict[str, Any]]:
    """A condition that the item is still of life `gen` (no `gen`: a session stored before
    generations existed)."""
    if gen is None:
        return "attribute_not_exists(gen)", {}
    return "gen = :gen", {":gen": {"S": gen}}


class ExpiryTable:
    """Expired sessions found by the lifecycle index (GSI3), read and deleted by the cleanup run."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    def _expiry_table_name(self) -> str:
        return str(self._items.base.Meta.table_name)

    # -- the lifecycle index -----------------------------------------------------------------

    def due_sessions(self, shard: int, now: int, after: str | None, limit: int) -> list[DueSession]:
        """Up to `limit` session metas of expiry shard `shard` that expired at or before
        `now`, oldest expiry first, from after GSI3 sort key `after` (None: the start)."""
        before = keys.expiry_before(now + 1)
        low = after or keys.expiry_before(0)
        # BETWEEN includes `after`: ask for one more and drop it.
        wanted = limit + 1 if after else limit
        with translated("read expired sessions"):
            page = self._items.connection.client.query(
                TableName=self._expiry_table_name(),
                IndexName="GSI3",
                KeyConditionExpression="GSI3PK = :shard AND GSI3SK BETWEEN :low AND :before",
                ExpressionAttributeValues={
                    ":shard": {"S": keys.expiry_pk(shard)},
                    ":low": {"S": low},
                    ":before": {"S": before},
                },
                ProjectionExpression="PK, GSI3SK, expires_at",
                Limit=wanted,
            )
        due = [
            DueSession(item["PK"]["S"], item["GSI3SK"]["S"], int(item["expires_at"]["N"]))
            for item in page.get("Items", [])
            if "expires_at" in item and item["GSI3SK"]["S"] != after
        ]
        return due[:limit]

    # -- purging one session -----------------------------------------------------------------

    def _expiry_partition(self, pk: str) -> list[dict[str, Any]]:
        """Every item of the partition: its keys, life and expiry alone (no content)."""
        client = self._items.connection.client
        items: list[dict[str, Any]] = []
        start: dict[str, Any] | None = None
        with translated("read expired session"):
            while True:
                request: dict[str, Any] = {
                    "TableName": self._expiry_table_name(),
                    "KeyConditionExpression": "PK = :pk",
                    "ExpressionAttributeValues": {":pk": {"S": pk}},
                    "ProjectionExpression": "PK, SK, gen, expires_at",
                    "ConsistentRead": True,
                    "Limit": PARTITION_PAGE,
                }
                if start:
                    request["ExclusiveStartKey"] = start
                page = client.query(**request)
                items.extend(page.get("Items", []))
                start = page.get("LastEvaluatedKey")
                if not start:
                    return items

    def _delete_expired_if(
        self, item: dict[str, Any], condition: str, values: dict[str, Any]
    ) -> bool:
        """Delete `item` if `condition` still holds; False if it no longer does."""
        request: dict[str, Any] = {
            "TableName": self._expiry_table_name(),
            "Key": {"PK": item["PK"], "SK": item["SK"]},
            "ConditionExpression": condition,
        }
        if values:
            request["ExpressionAttributeValues"] = values
        try:
            with translated("delete expired session"):
                self._items.connection.client.delete_item(**request)
        except VersionConflict:
            return False
        return True

    def purge_expired_session(self, due: DueSession, now: int) -> Purge:
        """Delete the session `due` names and its items of that life, if it is still the one
        the index listed and still expired at `now`.

        The meta goes first, on condition that its `expires_at` is still the one seen and
        not after `now`: a session a client renewed or re-created meanwhile is never touched.
        Then every other item of the partition that carries `expires_at` (items of that life,
        and leftovers of earlier lives, which no read shows again), each on condition that it
        is still of the life it was read in, so an item a new life of the session rewrote
        under the same key survives. Items without `expires_at` outlive the session by
        design (messages kept for long-term memory) and are kept. If the run stops between
        the two steps, the leftovers carry `expires_at` and DynamoDB's TTL deletes them."""
        items = self._expiry_partition(due.pk)
        meta = next((i for i in items if i["SK"]["S"] == keys.SESSION_META), None)
        seen = int(meta["expires_at"]["N"]) if meta and "expires_at" in meta else None
        if meta is None or seen != due.expires_at or seen > now:
            return Purge(examined=len(items), deleted=0, kept=len(items), purged=False)
        life, values = _condition_on_gen(meta.get("gen", {}).get("S"))
        deleted_meta = self._delete_expired_if(
            meta,
            f"expires_at = :seen AND expires_at <= :now AND {life}",
            {**values, ":seen": {"N": str(seen)}, ":now": {"N": str(now)}},
        )
        if not deleted_meta:
            return Purge(examined=len(items), deleted=0, kept=len(items), purged=False)

        expiring = [i for i in items if i is not meta and "expires_at" in i]

        def delete_child(item: dict[str, Any]) -> bool:
            condition, child_values = _condition_on_gen(item.get("gen", {}).get("S"))
            return self._delete_expired_if(
                item, f"attribute_exists(expires_at) AND {condition}", child_values
            )

        deleted = 1
        if expiring:
            with ThreadPoolExecutor(max_workers=min(DELETE_WORKERS, len(expiring))) as pool:
                deleted += sum(pool.map(delete_child, expiring))
        return Purge(examined=len(items), deleted=deleted, kept=len(items) - deleted, purged=True)

    # -- the cleanup run's cursors -----------------------------------------------------------

    def cleanup_cursors(self) -> SavedCursors:
        """The cursors the last cleanup run saved (none before the first run)."""
        with translated("read cleanup cursors"):
            found = self._items.connection.client.get_item(
                TableName=self._expiry_table_name(),
                Key={"PK": {"S": CLEANUP_PK}, "SK": {"S": CLEANUP_SK}},
                ConsistentRead=True,
            ).get("Item")
        if not found:
            return SavedCursors({}, 0)
        cursors = json.loads(found["cursors"]["S"])
        return SavedCursors(
            {str(k): str(v) for k, v in cursors.items() if v is not None},
            int(found["version"]["N"]),
        )

    def save_cleanup_cursors(self, cursors: dict[str, str], expected_version: int) -> int:
        """Replace the saved cursors if they are still at `expected_version` (else
        VersionConflict: another run saved since). The new version."""
        version = expected_version + 1
        condition: dict[str, Any] = (
            {
                "ConditionExpression": "#v = :v",
                "ExpressionAttributeNames": {"#v": "version"},
                "ExpressionAttributeValues": {":v": {"N": str(expected_version)}},
            }
            if expected_version
            else {"ConditionExpression": "attribute_not_exists(PK)"}
        )
        item = {
            "PK": {"S": CLEANUP_PK},
            "SK": {"S": CLEANUP_SK},
            "kind": {"S": SYSTEM_KIND},
            "cursors": {"S": json.dumps(cursors, sort_keys=True, separators=(",", ":"))},
            "version": {"N": str(version)},
            "updated_at": {"S": now_iso(self._clock())},
        }
        with translated("save cleanup cursors"):
            self._items.connection.client.put_item(
                TableName=self._expiry_table_name(), Item=item, **condition
            )
        return version
