"""Long-term records on DynamoDB (keys.py): one partition per record, holding the record and
its index state. A GET is one BatchGetItem of both; the stream carries the record to the
indexer, which writes the index state beside it. A namespace's records are also listed user
by user (GSI3), for forgetting and compaction.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pynamodb.exceptions import DoesNotExist
from pynamodb.models import BatchWrite

from memkit.errors import NotFound, VersionConflict
from memkit.models.domain import (
    MEMKIT,
    MessageRef,
    PendingMemoryRef,
    RecordHistory,
    RecordVersion,
    StoredMessage,
    StoredRecord,
    Writer,
)
from memkit.models.lifecycle import Listing, RecordEntry, Unchanged
from memkit.store import keys
from memkit.store.base import BATCH_GET_LIMIT, Table
from memkit.store.failures import translated
from memkit.store.items import stored_record
from memkit.store.sessions import to_message
from memkit.times import now_iso

# Entries a listing Query asks for at a time (a GSI3 entry takes ~300 bytes).
LISTING_PAGE = 500
# Sorts after every character a key component holds after its prefix.
TOP = "\uffff"
# Concurrent requests when a batch needs one each (hash lookups, index-state updates).
WORKERS = 8
# How long a deleted record's history stays (restorable) unless its own expiry is sooner:
# a delete keeps the versions beside a tombstone; the tombstone's expiry erases them all.
DELETED_HISTORY_SECONDS = 30 * 86_400
# What a record's version keeps of it (the rest is its item's, or derived).
_NOT_KEPT = ("tenant", "indexing")
T = TypeVar("T")
R = TypeVar("R")


def _concurrently(work: Callable[[T], R], args: Sequence[T]) -> list[R]:
    """`work` done on each of `args` (a request each), results in order: in threads when
    there is more than one."""
    if len(args) <= 1:
        return [work(arg) for arg in args]
    with ThreadPoolExecutor(max_workers=min(WORKERS, len(args))) as pool:
        return list(pool.map(work, args))


def _dumps(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _kept(record: StoredRecord) -> str:
    """A record as its version item keeps it (JSON of its fields)."""
    fields = {k: v for k, v in dataclasses.asdict(record).items() if k not in _NOT_KEPT}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def _unkept(tenant: str, raw: str) -> StoredRecord:
    fields = json.loads(raw)
    for name in ("topics", "entities", "extracted_from", "supersedes"):
        fields[name] = tuple(fields.get(name) or ())
    known = {f.name for f in dataclasses.fields(StoredRecord)}
    return StoredRecord(tenant=tenant, **{k: v for k, v in fields.items() if k in known})


@dataclass(frozen=True)
class SlotClaim:
    """A record taking a slot: the slot, and the record it held when read (None: empty)."""

    namespace: str
    user_id: str | None
    key: str
    held: str | None


class RecordTable:
    """Long-term record reads and writes; items never leave this class."""

    def __init__(self, table: Table) -> None:
        self._table = table
        self._items = table.items
        self._clock = table.clock

    # -- conversions -------------------------------------------------------------------------

    def _record_item(self, tenant: str, record: StoredRecord) -> Any:
        pk, sk = keys.record_key(tenant, record.id)
        return self._items.record(
            pk,
            sk,
            tenant=tenant,
            namespace=record.namespace,
            created_at=record.created_at,
            updated_at=record.updated_at,
            record_id=record.id,
            text=record.text,
            memory_type=record.memory_type,
            topics=list(record.topics) or None,
            entities=list(record.entities) or None,
            session_id=record.session_id,
            user_id=record.user_id,
            event_date=record.event_date,
            pinned=record.pinned,
            last_accessed=record.last_accessed,
            persisted_at=record.persisted_at,
            memory_hash=record.memory_hash,
            extracted_from=list(record.extracted_from) or None,
            metadata=_dumps(record.metadata) if record.metadata else None,
            extracted=record.discrete_memory_extracted,
            written_us=record.written_us,
            expires_at=record.expires_at,
            gsi1pk=keys.records_by_hash(tenant, record.namespace, record.memory_hash),
            gsi1sk=f"{record.created_us:0{keys.TIME_DIGITS}d}#{keys.part(record.id)}",
            gsi3pk=keys.records_by_namespace(tenant, record.namespace),
            gsi3sk=keys.record_listing_sk(record.user_id, record.created_us, record.id),
            valid_from=record.valid_from,
            valid_until=record.valid_until,
            recorded_at=record.recorded_at,
            retired_at=record.retired_at,
            held_until=record.held_until,
            key=record.key,
            supersedes=list(record.supersedes) or None,
            superseded_by=record.superseded_by,
            change=record.change,
            changed_by=record.changed_by,
            changed_via=record.changed_via,
        )

    def _version_item(self, tenant: str, record: StoredRecord) -> Any:
        """`record` kept as an earlier version (its number is its item's version)."""
        pk, sk = keys.record_version_key(tenant, record.id, record.life, record.version)
        return self._items.record_version(
            pk,
            sk,
            tenant=tenant,
            namespace=record.namespace,
            created_at=record.created_at,
            updated_at=record.updated_at,
            record_id=record.id,
            user_id=record.user_id,
            record=_kept(record),
            life=record.life,
            number=record.version,
        )

    @staticmethod
    def _to_record(item: Any, state: Any | None) -> StoredRecord:
        return stored_record(item, state)

    # -- reads -------------------------------------------------------------------------------

    def get_records(self, tenant: str, record_ids: Iterable[str]) -> dict[str, StoredRecord]:
        """The records found among `record_ids`, with their index state (one BatchGetItem
        per 50 ids)."""
        ids = list(dict.fromkeys(record_ids))
        wanted = [
            k for i in ids for k in (keys.record_key(tenant, i), keys.index_state_key(tenant, i))
        ]
        found = self._table.batch_get(wanted)
        records: dict[str, StoredRecord] = {}
        for record_id in ids:
            item = found.get(keys.record_key(tenant, record_id))
            if isinstance(item, self._items.record) and self._table.live(item):
                state = found.get(keys.index_state_key(tenant, record_id))
                records[record_id] = self._to_record(item, state)
        return records

    def get_record(self, tenant: str, record_id: str) -> StoredRecord:
        record = self.get_records(tenant, [record_id]).get(record_id)
        if record is None:
            raise NotFound(f"no long-term memory {record_id!r}")
        return record

    def records_with_hash(self, tenant: str, namespace: str, memory_hash: str) -> set[str]:
        """The partition keys of the records holding `memory_hash` (GSI1: eventually
        consistent, so two simultaneous creates of one text may both pass)."""
        with translated("find duplicates"):
            found = self._items.record.by_hash.query(
                keys.records_by_hash(tenant, namespace, memory_hash), limit=10
            )
            return {item.pk for item in found if self._table.live(item)}

    def records_at(self, pks: Iterable[str]) -> dict[str, StoredRecord]:
        """The live records in these partitions, by partition key (what `records_with_hash`
        finds; one BatchGetItem per 100)."""
        found = self._table.batch_get((pk, keys.RECORD_SK) for pk in pks)
        return {
            pk: self._to_record(item, None)
            for (pk, _), item in found.items()
            if isinstance(item, self._items.record) and self._table.live(item)
        }

    def duplicates(
        self, tenant: str, wanted: Sequence[tuple[str, str, str]]
    ) -> dict[str, set[str]]:
        """For each (record id, namespace, hash): the other records with that hash."""

        def one(entry: tuple[str, str, str]) -> tuple[str, set[str]]:
            record_id, namespace, memory_hash = entry
            own = keys.record_pk(tenant, record_id)
            return record_id, self.records_with_hash(tenant, namespace, memory_hash) - {own}

        return dict(_concurrently(one, wanted))

    def messages_by_ref(self, wanted: Iterable[MessageRef]) -> dict[MessageRef, StoredMessage]:
        """Session messages by their ids (search hits), live ones only (one BatchGet a 100)."""
        by_key = {
            keys.message_key(ref.tenant, ref.namespace, ref.session_id, ref.message_id): ref
            for ref in wanted
        }
        found = self._table.batch_get(by_key)
        return {
            by_key[key]: to_message(item)
            for key, item in found.items()
            if isinstance(item, self._items.message) and self._table.live(item)
        }

    def messages_around(self, ref: MessageRef, order: str, count: int) -> list[StoredMessage]:
        """Up to `count` live messages before and after the one at LSI1 key `order` in the
        message's session partition, oldest first (two Queries)."""
        pk = keys.session_pk(ref.tenant, ref.namespace, ref.session_id)
        index = self._items.base.by_order
        item_cls = self._items.base
        with translated("read messages"):
            before = index.query(
                pk,
                item_cls.order.between(keys.ORDER_PREFIX, order),
                scan_index_forward=False,
                limit=count + 1,
            )
            after = index.query(
                pk,
                item_cls.order.between(order, keys.ORDER_PREFIX + "\uffff"),
                limit=count + 1,
            )
            earlier = [
                i for i in before if i.order != order and isinstance(i, self._items.message)
            ][:count]
            later = [i for i in after if i.order != order and isinstance(i, self._items.message)][
                :count
            ]
        return [to_message(i) for i in [*reversed(earlier), *later] if self._table.live(i)]

    # -- writes ------------------------------------------------------------------------------

    def list_records(self, listing: Listing, after: str | None = None) -> Iterator[RecordEntry]:
        """The listing's live records in index order (user, then creation time), from just
        after position `after` (None: the start), a page at a time as the caller reads on.
        Session and type filters are applied by DynamoDB (FilterExpression)."""
        if listing.memory_types is not None and not listing.memory_types:
            return  # no type allowed: nothing to list (and `IN ()` is no valid filter)
        record_cls = self._items.record
        sk = record_cls.gsi3sk
        pk = keys.records_by_namespace(listing.tenant, listing.namespace)
        if listing.one_user:
            prefix = keys.user_records_prefix(listing.user_id)
            low = after if after is not None and after > prefix else prefix
            range_condition: Any = sk.between(low, prefix + TOP)
        else:
            range_condition = sk > after if after is not None else None
        condition: Any = None
        if listing.session_id is not None:
            condition = record_cls.session_id == listing.session_id
        if listing.memory_types is not None:
            types = record_cls.memory_type.is_in(*sorted(listing.memory_types))
            condition = types if condition is None else condition & types
        with translated("list long-term memories"):
            results = record_cls.by_namespace.query(
                pk,
                range_key_condition=range_condition,
                filter_condition=condition,
                page_size=LISTING_PAGE,
            )
            for item in results:
                if item.gsi3sk == after or not self._table.live(item):
                    continue
                yield RecordEntry(
                    id=item.record_id,
                    user_id=item.user_id,
                    session_id=item.session_id,
                    memory_type=item.memory_type,
                    memory_hash=item.memory_hash,
                    pinned=bool(item.pinned),
                    created_at=item.created_at,
                    last_accessed=item.last_accessed or item.created_at,
                    position=item.gsi3sk,
                )

    # -- lifecycle policies ------------------------------------------------------------------

    def put_records(
        self,
        tenant: str,
        records: Sequence[StoredRecord],
        replaced: Mapping[str, StoredRecord] | None = None,
    ) -> None:
        """Write `records` whole (BatchWriteItem; a record with a stored id replaces it, at
        the next version, so an edit that read the one it replaced gets a conflict). The
        stored records they replace (`replaced`, by id: what the caller read) are kept as
        their earlier versions, in the same batch."""
        earlier = replaced or {}
        with translated("write long-term memories"), BatchWrite(self._items.base) as batch:
            for record in records:
                item = self._record_item(tenant, record)
                item.version = record.version + 1  # a batch write sets no version itself
                batch.save(item)
                if record.id in earlier:
                    batch.save(self._version_item(tenant, earlier[record.id]))

    def replace_record(
        self, tenant: str, record: StoredRecord, previous: StoredRecord | None = None
    ) -> StoredRecord:
        """Write `record` if the stored one still exists at `record.version`, keeping
        `previous` (the stored one, as read; None: read now) as its earlier version, in one
        transaction: else NotFound when it is gone, VersionConflict when another write came
        first."""
        if previous is None:
            previous = self.get_record(tenant, record.id)
            if previous.version != record.version:
                raise VersionConflict(f"long-term memory {record.id!r} changed since it was read")
        try:
            return self.commit(tenant, [(previous, record)])[0]
        except VersionConflict:
            self.get_record(tenant, record.id)  # NotFound when it was deleted meanwhile
            raise

    def commit(
        self,
        tenant: str,
        writes: Sequence[tuple[StoredRecord | None, StoredRecord]],
        slot: SlotClaim | None = None,
        revived: int | None = None,
    ) -> list[StoredRecord]:
        """One TransactWriteItems: each (stored as read, or None for a new id; as written)
        record written if its item is still at the version read (or absent), the stored one
        kept as its earlier version; the slot moved to the first record if it still holds
        the record it held when read; with `revived`, the first record's tombstone of that
        life deleted (a restore of a deleted record). VersionConflict when anything changed
        since it was read. The records as stored."""
        table = self._items.base.Meta.table_name
        actions: list[dict[str, Any]] = []
        saved: list[StoredRecord] = []
        for previous, record in writes:
            item = self._record_item(tenant, record)
            if previous is None:  # new, numbered after record.version (0, or a delete's)
                condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(PK)"}
                item.version = record.version + 1
            elif previous.version:
                condition = {
                    "ConditionExpression": "attribute_exists(PK) AND version = :v",
                    "ExpressionAttributeValues": {":v": {"N": str(previous.version)}},
                }
                item.version = previous.version + 1
            else:  # written before records carried versions
                condition = {
                    "ConditionExpression": "attribute_exists(PK) AND attribute_not_exists(version)"
                }
                item.version = 1
            actions.append({"Put": {"TableName": table, "Item": item.serialize(), **condition}})
            if previous is not None:
                kept = self._version_item(tenant, previous).serialize()
                actions.append({"Put": {"TableName": table, "Item": kept}})
            saved.append(self._to_record(item, None))
        if slot is not None:
            actions.append(self._slot_action(tenant, table, slot, writes[0][1].id))
        if revived is not None:
            pk, sk = keys.deleted_record_key(tenant, writes[0][1].id, revived)
            key = {"PK": {"S": pk}, "SK": {"S": sk}}
            actions.append({"Delete": {"TableName": table, "Key": key}})
        with translated("write long-term memories"):
            self._items.connection.client.transact_write_items(TransactItems=actions)
        return saved

    def _slot_action(
        self, tenant: str, table: str, slot: SlotClaim, record_id: str
    ) -> dict[str, Any]:
        pk, sk = keys.slot_key(tenant, slot.namespace, slot.user_id, slot.key)
        stamp = now_iso(self._clock())
        item = self._items.slot(
            pk,
            sk,
            tenant=tenant,
            namespace=slot.namespace,
            created_at=stamp,
            updated_at=stamp,
            slot=slot.key,
            current=record_id,
            user_id=slot.user_id,
        ).serialize()
        item.pop("version", None)  # the slot's condition is on who holds it
        if slot.held is None:
            condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(PK)"}
        else:
            condition = {
                "ConditionExpression": "#current = :held",
                "ExpressionAttributeNames": {"#current": "current"},
                "ExpressionAttributeValues": {":held": {"S": slot.held}},
            }
        return {"Put": {"TableName": table, "Item": item, **condition}}

    def slot_holder(self, tenant: str, namespace: str, user_id: str | None, key: str) -> str | None:
        """The id of the record a slot holds (a consistent read; None: empty). The record
        may be gone or no longer current since: the writer that takes the slot checks."""
        item = self._table.consistent_item(
            keys.slot_key(tenant, namespace, user_id, key), "read slot"
        )
        current = (item or {}).get("current", {}).get("S")
        return str(current) if current else None

    # -- history -----------------------------------------------------------------------------

    def history(self, tenant: str, record_id: str) -> RecordHistory | None:
        """The record's versions (its newest life, oldest first): the earlier ones kept in
        its partition, then the record itself, or what its delete left. None: no such
        record, nor a deleted one whose history is kept (a consistent Query)."""
        record_pk = keys.record_pk(tenant, record_id)
        current: StoredRecord | None = None
        kept: dict[int, list[Any]] = {}
        tombstones: dict[int, Any] = {}
        with translated("read a memory's history"):
            for item in self._items.base.query(record_pk, consistent_read=True):
                if isinstance(item, self._items.record) and self._table.live(item):
                    current = self._to_record(item, None)
                elif isinstance(item, self._items.record_version):
                    kept.setdefault(int(item.life), []).append(item)
                elif isinstance(item, self._items.record_deleted) and self._table.live(item):
                    tombstones[int(item.life)] = item
        if current is not None:
            life = current.life
        elif tombstones:
            life = max(tombstones)
        else:
            return None
        versions = [
            self._version_of(tenant, item) for item in sorted(kept.get(life, []), key=_number)
        ]
        if current is not None:
            versions.append(_as_version(current))
            owner = (current.user_id, current.namespace)
        else:
            tombstone = tombstones[life]
            versions.append(
                RecordVersion(
                    number=int(tombstone.number),
                    change="delete",
                    at=tombstone.updated_at,
                    by=tombstone.changed_by,
                    via=tombstone.changed_via,
                    record=None,
                )
            )
            owner = (tombstone.user_id, tombstone.namespace)
        return RecordHistory(record_id, owner[0], owner[1], tuple(versions))

    def _version_of(self, tenant: str, item: Any) -> RecordVersion:
        record = _unkept(tenant, item.record)
        return _as_version(record)

    def erase(
        self,
        tenant: str,
        record_ids: Sequence[str],
        *,
        life: int | None = None,
        leftovers: bool = False,
    ) -> int:
        """Delete everything of these records' partitions: the record, its index state, its
        history and what a delete left. With `leftovers`, all but a record item (the record
        was deleted already; one there now was created since); with `life`, only that
        life's history and tombstone, and the index state when no record is left (what a
        TTL expiry leaves). How many items went."""

        def one(record_id: str) -> int:
            def doomed(item: Any) -> bool:
                if life is None:
                    return not (leftovers and isinstance(item, self._items.record))
                if isinstance(item, self._items.record_version | self._items.record_deleted):
                    return int(item.life) == life
                return isinstance(item, self._items.index_state) and not any(
                    isinstance(other, self._items.record) for other in items
                )

            with translated("erase long-term memory"):
                items = list(self._items.base.query(keys.record_pk(tenant, record_id)))
            gone = [item for item in items if doomed(item)]
            if gone:
                with translated("erase long-term memory"), BatchWrite(self._items.base) as batch:
                    for item in gone:
                        batch.delete(item)
            return len(gone)

        return sum(_concurrently(one, list(dict.fromkeys(record_ids))))

    def delete_records(
        self, tenant: str, record_ids: Sequence[str], writer: Writer = MEMKIT
    ) -> int:
        """Delete the records and their index states; how many records existed. Each
        record's history stays, with its last version and a tombstone saying who deleted
        it (one transaction a record), until the tombstone expires (DELETED_HISTORY_SECONDS,
        or the record's own expiry when sooner): a restore can bring it back until then."""
        ids = list(dict.fromkeys(record_ids))
        existing = self.get_records(tenant, ids)

        def delete(record: StoredRecord) -> bool:
            for _ in range(3):
                try:
                    self._bury(tenant, record, writer)
                    return True
                except VersionConflict:  # changed since read: bury what is there now
                    fresh = self.get_records(tenant, [record.id]).get(record.id)
                    if fresh is None:
                        return False
                    record = fresh
            return False

        _concurrently(delete, list(existing.values()))
        with translated("delete long-term memories"), BatchWrite(self._items.base) as batch:
            for record_id in ids:
                batch.delete(self._items.base(*keys.index_state_key(tenant, record_id)))
        return len(existing)

    def _bury(self, tenant: str, record: StoredRecord, writer: Writer) -> None:
        """Delete `record` if still at its version, keep it as its last version, and leave
        its tombstone (one transaction)."""
        table = self._items.base.Meta.table_name
        now = self._clock()
        expiry = int(now) + DELETED_HISTORY_SECONDS
        if record.expires_at is not None:
            expiry = min(expiry, record.expires_at)
        pk, sk = keys.deleted_record_key(tenant, record.id, record.life)
        tombstone = self._items.record_deleted(
            pk,
            sk,
            tenant=tenant,
            namespace=record.namespace,
            created_at=record.created_at,
            updated_at=now_iso(now),
            expires_at=expiry,
            record_id=record.id,
            user_id=record.user_id,
            life=record.life,
            number=record.version + 1,
            changed_by=writer.by,
            changed_via=writer.via,
            gsi3pk=keys.records_by_namespace(tenant, record.namespace),
            gsi3sk=keys.record_listing_sk(record.user_id, record.created_us, record.id),
        )
        tombstone.version = 1
        if record.version:
            condition: dict[str, Any] = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(record.version)}},
            }
        else:
            condition = {"ConditionExpression": "attribute_not_exists(version)"}
        record_pk, record_sk = keys.record_key(tenant, record.id)
        actions = [
            {
                "Delete": {
                    "TableName": table,
                    "Key": {"PK": {"S": record_pk}, "SK": {"S": record_sk}},
                    **condition,
                }
            },
            {"Put": {"TableName": table, "Item": self._version_item(tenant, record).serialize()}},
            {"Put": {"TableName": table, "Item": tombstone.serialize()}},
        ]
        with translated("delete long-term memory"):
            self._items.connection.client.transact_write_items(TransactItems=actions)

    def delete_records_if_unchanged(
        self, tenant: str, expected: Mapping[str, Unchanged]
    ) -> list[str]:
        """Delete each record still as the caller saw it (`expected`: not pinned, at that
        version, with that hash and type, accessed no later), then the index states of those
        deleted: one conditional DeleteItem each, concurrently, then a BatchWriteItem. A
        lifecycle deletion decided on an earlier read thus never takes a record pinned,
        edited or accessed since. The ids deleted, in `expected`'s order."""

        def delete(record_id: str) -> bool:
            seen = expected[record_id]
            values: dict[str, Any] = {
                ":false": {"BOOL": False},
                ":hash": {"S": seen.memory_hash},
                ":type": {"S": seen.memory_type},
            }
            condition = (
                "attribute_exists(PK) AND (attribute_not_exists(pinned) OR pinned = :false)"
                " AND memory_hash = :hash AND memory_type = :type AND "
            )
            if seen.version:
                condition += "version = :version"
                values[":version"] = {"N": str(seen.version)}
            else:  # written before records carried versions
                condition += "attribute_not_exists(version)"
            if seen.last_accessed is not None:
                condition += (
                    " AND (attribute_not_exists(last_accessed) OR last_accessed <= :accessed)"
                )
                values[":accessed"] = {"S": seen.last_accessed}
            return self._write_if(  # False: gone, or changed since it was read
                "forget long-term memory",
                "delete_item",
                keys.record_key(tenant, record_id),
                ConditionExpression=condition,
                ExpressionAttributeValues=values,
            )

        ids = list(expected)
        done = _concurrently(delete, ids)
        deleted = [record_id for record_id, ok in zip(ids, done, strict=True) if ok]
        if deleted:  # only what records deleted leave: a kept record keeps its state
            self.erase(tenant, deleted, leftovers=True)  # a forget takes the history too
        return deleted

    def touch_records(self, tenant: str, record_ids: Sequence[str], now: str, before: str) -> None:
        """Set `last_accessed` to `now` on each record last accessed before `before` (or
        never): one conditional UpdateItem each, concurrently. Best effort: a record deleted
        meanwhile, or touched by another search, is left as it is. Nothing else changes, so
        the indexer skips the stream record (memkit.jobs.indexing) and no edit is lost (no
        version bump: an edit racing a touch wins)."""

        def touch(record_id: str) -> bool:
            return self._write_if(  # False: gone, or accessed since
                "record access",
                "update_item",
                keys.record_key(tenant, record_id),
                UpdateExpression="SET last_accessed = :now",
                ConditionExpression="attribute_exists(PK) AND "
                "(attribute_not_exists(last_accessed) OR last_accessed < :before)",
                ExpressionAttributeValues={":now": {"S": now}, ":before": {"S": before}},
            )

        _concurrently(touch, record_ids)

    def mark_indexed(
        self, tenant: str, versions: dict[str, int], failures: dict[str, tuple[int, str]]
    ) -> None:
        """Record that these record versions are searchable (`versions`) or could not be
        indexed (`failures`: version, reason without content). A state never goes back to
        an older version (each UpdateItem is conditional on it), and a record deleted
        meanwhile keeps none (`drop_orphan_states`)."""

        def update(record_id: str, field: str, version: int, reason: str | None) -> bool:
            values: dict[str, Any] = {
                ":v": {"N": str(version)},
                ":kind": {"S": "index_state"},
                ":tenant": {"S": tenant},
            }
            expression = f"SET {field} = :v, kind = :kind, tenant = :tenant"
            if reason is not None:
                values[":reason"] = {"S": reason[:200]}
                expression += ", reason = :reason"
            return self._write_if(  # False: a newer version is already recorded
                "write index state",
                "update_item",
                keys.index_state_key(tenant, record_id),
                UpdateExpression=expression,
                ConditionExpression=f"attribute_not_exists({field}) OR {field} < :v",
                ExpressionAttributeValues=values,
            )

        jobs: list[tuple[str, str, int, str | None]] = [
            (rid, "indexed_us", v, None) for rid, v in versions.items()
        ]
        jobs += [(rid, "failed_us", v, why) for rid, (v, why) in failures.items()]
        if not jobs:
            return
        _concurrently(lambda job: update(*job), jobs)
        self.drop_orphan_states(tenant, list(dict.fromkeys(job[0] for job in jobs)))

    def drop_orphan_states(self, tenant: str, record_ids: Sequence[str]) -> None:
        """Delete the index states just written for records that are gone (an UpdateItem
        creates the state item; the record may have been deleted after the indexer read
        it). Checked after the write, with a consistent read (one BatchGetItem per 100
        records): a deletion either came before the check, which sees it, or after the
        write, and then deleted the state itself. Cheaper than a transaction's
        ConditionCheck on every write, which would also make a client's edit of a record
        being indexed fail with TransactionConflict."""
        found = self._existing([keys.record_key(tenant, rid) for rid in record_ids])
        gone = [rid for rid in record_ids if keys.record_key(tenant, rid) not in found]
        if not gone:
            return
        with translated("delete index state"), BatchWrite(self._items.base) as batch:
            for record_id in gone:
                batch.delete(self._items.base(*keys.index_state_key(tenant, record_id)))

    def _existing(self, wanted: Sequence[keys.Key]) -> set[keys.Key]:
        """Which of `wanted` exist: consistent reads of their keys alone (a BatchGetItem
        per 100; keys DynamoDB leaves unprocessed are asked again)."""
        client = self._items.connection.client
        table = self._items.base.Meta.table_name
        pending = [{"PK": {"S": pk}, "SK": {"S": sk}} for pk, sk in dict.fromkeys(wanted)]
        found: set[keys.Key] = set()
        with translated("read"):
            while pending:
                chunk, pending = pending[:BATCH_GET_LIMIT], pending[BATCH_GET_LIMIT:]
                request = {"Keys": chunk, "ConsistentRead": True, "ProjectionExpression": "PK, SK"}
                response = client.batch_get_item(RequestItems={table: request})
                items = response.get("Responses", {}).get(table, [])
                found.update((item["PK"]["S"], item["SK"]["S"]) for item in items)
                pending += response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
        return found

    def awaits_promotion(self, ref: PendingMemoryRef, record_json: str) -> bool:
        """Whether the pending memory still holds `record_json` and is not marked promoted
        yet (a consistent read)."""
        key = keys.memory_key(ref.tenant, ref.namespace, ref.session_id, ref.memory_id)
        with translated("read pending memory"):
            try:
                item = self._items.memory.get(*key, consistent_read=True)
            except DoesNotExist:
                return False
        return bool(item.record == record_json and not item.persisted_at)

    def mark_promoted(self, ref: PendingMemoryRef, record_json: str, persisted_at: str) -> bool:
        """Set `persisted_at` on a session's pending memory, if it still holds `record_json`
        (a rewrite since then will be promoted on its own). False when it changed or went."""
        return self._write_if(
            "mark memory promoted",
            "update_item",
            keys.memory_key(ref.tenant, ref.namespace, ref.session_id, ref.memory_id),
            UpdateExpression="SET persisted_at = :at",
            ConditionExpression="attribute_exists(PK) AND #record = :record",
            ExpressionAttributeNames={"#record": "record"},
            ExpressionAttributeValues={":at": {"S": persisted_at}, ":record": {"S": record_json}},
        )

    def _write_if(self, operation: str, action: str, key: keys.Key, **request: Any) -> bool:
        """One conditional write (`action`: the client's "update_item" or "delete_item") of
        the item at `key`; False when its condition failed."""
        client = self._items.connection.client
        try:
            with translated(operation):
                getattr(client, action)(
                    TableName=self._items.base.Meta.table_name,
                    Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}},
                    **request,
                )
        except VersionConflict:
            return False
        return True


def _number(item: Any) -> int:
    return int(item.number)


def _as_version(record: StoredRecord) -> RecordVersion:
    return RecordVersion(
        number=record.version,
        change=record.change,
        at=record.updated_at,
        by=record.changed_by,
        via=record.changed_via,
        record=record,
    )
