"""What the vector index is rebuilt from, read from the table in pages, and what the orphan
sweep asks of the table.

A full rebuild reads every indexable item, so it is the one place memkit Scans: every item
of every tenant is wanted, and no index lists them all (GSI3 lists records but not
messages, and a GSI holding every item would double the table's write cost to serve a rare
operation). A parallel Scan (Segment/TotalSegments) splits the table among workers, and its
filter keeps only indexable, live items, so the pages carry little else. Pages come back as
DynamoDB's own item format, the NewImage a stream record carries, so the indexer's code
reads them as it reads its stream.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from memkit.errors import BadRequest, Throttled
from memkit.models.domain import ItemRef, RecordRef, is_instruction
from memkit.store import keys
from memkit.store.base import BATCH_GET_LIMIT, Table
from memkit.store.changes import ItemChange, scanned_changes
from memkit.store.failures import translated

# Items a Scan page evaluates (before its filter); 1 MB of items ends a page sooner.
SCAN_PAGE = 500
# BatchGetItem's unprocessed keys are asked for again this many times.
BATCH_GET_ROUNDS = 8

# What the index holds: records, and session messages stamped for indexing (idx "1"),
# as the indexer's stream filter lets through; live ones only (TTL deletes days late).
# System messages pass this filter and are left out as the indexer leaves them out.
_INDEXABLE = (
    "(#kind = :record OR (#kind = :message AND #idx = :one)) "
    "AND (attribute_not_exists(#expires) OR #expires > :now)"
)


def _encode(last_key: dict[str, Any] | None) -> str | None:
    if not last_key:
        return None
    return base64.urlsafe_b64encode(json.dumps(last_key, sort_keys=True).encode()).decode()


def _decode(cursor: str | None) -> dict[str, Any] | None:
    if cursor is None:
        return None
    try:
        key = json.loads(base64.urlsafe_b64decode(cursor.encode()))
    except ValueError as exc:
        raise BadRequest("unreadable reindex cursor") from exc
    if not isinstance(key, dict) or set(key) != {"PK", "SK"}:
        raise BadRequest("unreadable reindex cursor")
    return key


class ReindexTable:
    """What the vector index is rebuilt from (a parallel Scan) and what the orphan sweep
    checks (BatchGet by the keys the index holds)."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    def indexable_page(
        self,
        segment: int,
        segments: int,
        cursor: str | None = None,
        *,
        since_us: int | None = None,
        limit: int = SCAN_PAGE,
    ) -> tuple[list[ItemChange], int, str | None, int]:
        """One page of segment `segment` of `segments`: the indexable live items (each as
        the INSERT that would have indexed it), how many items the page read, the cursor of
        the next page (None: the segment is done), and how many items were unreadable.
        `since_us` keeps only items written at or after it (a rebuild's catch-up)."""
        if not 0 <= segment < segments:
            raise BadRequest("segment must be from 0 to segments - 1")
        names = {"#kind": "kind", "#idx": "idx", "#expires": "expires_at"}
        values: dict[str, Any] = {
            ":record": {"S": "record"},
            ":message": {"S": "message"},
            ":one": {"S": "1"},
            ":now": {"N": str(int(self._clock()))},
        }
        expression = _INDEXABLE
        if since_us is not None:
            names["#written"] = "written_us"
            values[":since"] = {"N": str(since_us)}
            expression += " AND #written >= :since"
        request: dict[str, Any] = {
            "TableName": self._items.base.Meta.table_name,
            "Segment": segment,
            "TotalSegments": segments,
            "Limit": limit,
            "ConsistentRead": True,
            "FilterExpression": expression,
            "ExpressionAttributeNames": names,
            "ExpressionAttributeValues": values,
        }
        start = _decode(cursor)
        if start is not None:
            request["ExclusiveStartKey"] = start
        with translated("scan for reindex"):
            page = self._items.connection.client.scan(**request)
        last = page.get("LastEvaluatedKey")
        next_cursor = _encode({"PK": last["PK"], "SK": last["SK"]} if last else None)
        changes, unreadable = scanned_changes(page.get("Items", []))
        return changes, int(page.get("ScannedCount", 0)), next_cursor, unreadable

    def approximate_item_count(self) -> int:
        """The table's item count as DynamoDB last computed it (about every six hours):
        what a rebuild's progress is measured against."""
        with translated("describe table"):
            table = self._items.connection.client.describe_table(
                TableName=self._items.base.Meta.table_name
            )
        return int(table.get("Table", {}).get("ItemCount", 0))

    def indexed_sources(self, wanted: Sequence[ItemRef]) -> set[ItemRef]:
        """Which of these items the index may hold: they exist, are live, and are still
        indexable (a record; a message stamped idx "1" that is not a system message). One
        BatchGet per 100 keys."""
        refs = {_key_of(ref): ref for ref in wanted}
        unique = list(refs)
        client = self._items.connection.client
        table = self._items.base.Meta.table_name
        now = self._clock()
        found: set[ItemRef] = set()
        for start in range(0, len(unique), BATCH_GET_LIMIT):
            chunk = unique[start : start + BATCH_GET_LIMIT]
            request: dict[str, Any] = {
                table: {
                    "Keys": [{"PK": {"S": pk}, "SK": {"S": sk}} for pk, sk in chunk],
                    "ConsistentRead": True,
                    "ProjectionExpression": "PK, SK, #kind, #idx, #role, expires_at",
                    "ExpressionAttributeNames": {"#kind": "kind", "#idx": "idx", "#role": "role"},
                }
            }
            for _ in range(BATCH_GET_ROUNDS):
                with translated("read"):
                    response = client.batch_get_item(RequestItems=request)
                for item in response.get("Responses", {}).get(table, []):
                    if _indexable(item, now):
                        found.add(refs[(item["PK"]["S"], item["SK"]["S"])])
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    break
            else:
                # Throttled round after round: a sweep must not take the keys for gone.
                raise Throttled("DynamoDB kept keys unprocessed; retry later")
        return found


def _key_of(ref: ItemRef) -> keys.Key:
    if isinstance(ref, RecordRef):
        return keys.record_key(ref.tenant, ref.record_id)
    return keys.message_key(ref.tenant, ref.namespace, ref.session_id, ref.message_id)


def _indexable(item: dict[str, Any], now: float) -> bool:
    expires = item.get("expires_at", {}).get("N")
    if expires is not None and float(expires) <= now:
        return False
    kind = item.get("kind", {}).get("S")
    if kind == "record":
        return True
    # a system message is kept with the session's, never searchable (one indexed before
    # memkit left them out is an orphan)
    stamped = item.get("idx", {}).get("S") == "1"
    return kind == "message" and stamped and not is_instruction(item.get("role", {}).get("S"))
