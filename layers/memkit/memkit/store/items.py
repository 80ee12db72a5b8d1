"""PynamoDB item classes, bound to a table at run time (never at import).

One table, one base class with a `kind` discriminator; each kind is a subclass. The base
carries what every item has: keys, version (optimistic locking), timestamps and `expires_at`
(the TTL attribute). Content and specs are stored as JSON strings so floats and empty values
round-trip exactly. The same classes read the items of a stream or a Scan (`read_item`), and
a record item becomes a StoredRecord in one place (`stored_record`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any, cast

from pynamodb.attributes import (
    BooleanAttribute,
    DiscriminatorAttribute,
    ListAttribute,
    NumberAttribute,
    UnicodeAttribute,
    VersionAttribute,
)
from pynamodb.connection import Connection
from pynamodb.indexes import (
    AllProjection,
    GlobalSecondaryIndex,
    IncludeProjection,
    LocalSecondaryIndex,
)
from pynamodb.models import Model

from memkit.models.domain import DEFAULT_NAMESPACE, IndexState, StoredRecord

# What the listing indexes carry besides their keys (template.yaml: NonKeyAttributes).
LISTING_ATTRIBUTES = ["kind", "session_id", "expires_at"]
LIFECYCLE_ATTRIBUTES = [
    "kind",
    "tenant",
    "namespace",
    "session_id",
    "user_id",
    "expires_at",
    "record_id",
    "memory_type",
    "memory_hash",
    "pinned",
    "created_at",
    "last_accessed",
]


@dataclass(frozen=True)
class ItemClasses:
    """The item classes bound to one table, and the connection they share."""

    base: Any
    profile: Any
    session: Any
    scratchpad: Any
    message: Any
    memory: Any
    record: Any
    record_version: Any
    record_deleted: Any
    slot: Any
    index_state: Any
    # For TransactWrite: the same botocore client, timeouts and retries as the items.
    connection: Connection


@lru_cache(maxsize=8)
def bind_items(
    table_name: str,
    region: str,
    host: str | None,
    connect_timeout_seconds: float,
    read_timeout_seconds: float,
    max_retry_attempts: int,
) -> ItemClasses:
    """Item classes bound to `table_name` (cached: one set of classes per table)."""
    meta = {
        "table_name": table_name,
        "region": region,
        "host": host,
        "connect_timeout_seconds": connect_timeout_seconds,
        "read_timeout_seconds": read_timeout_seconds,
        "max_retry_attempts": max_retry_attempts,
    }
    classes = _declared(meta)
    # Connect the base class first: PynamoDB gives each subclass that connects before its base
    # a connection of its own, and each connection builds a botocore client (~60 ms).
    connection = classes["base"]._get_connection().connection
    return ItemClasses(**classes, connection=connection)


@lru_cache(maxsize=1)
def _unbound_base() -> Any:
    # Reading an image needs the classes, not a table: none is named, none is connected.
    return _declared({"table_name": "-"})["base"]


def read_item(image: dict[str, Any]) -> Any:
    """An item image (typed attribute values, as a stream record or a Scan holds them) as
    an instance of the item class its `kind` names. KeyError, TypeError or ValueError: the
    image is not what these classes write."""
    return _unbound_base().from_raw_data(image)


def _declared(meta: dict[str, Any]) -> dict[str, Any]:
    """The item classes, declared with `meta` as their table's (ItemClasses' names)."""

    def index_meta(name: str, projection: Any) -> Any:
        return type("Meta", (), {"index_name": name, "projection": projection})

    class ByOrder(LocalSecondaryIndex[Any]):  # type: ignore[no-untyped-call]
        """LSI1: a session's meta and messages, messages by created_at then id."""

        Meta = index_meta("LSI1", AllProjection())
        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        order = UnicodeAttribute(range_key=True, attr_name="LSI1SK")

    class ByNamespace(GlobalSecondaryIndex[Any]):  # type: ignore[no-untyped-call]
        """GSI1: a namespace's sessions, newest first."""

        Meta = index_meta("GSI1", IncludeProjection(LISTING_ATTRIBUTES))
        gsi1pk = UnicodeAttribute(hash_key=True, attr_name="GSI1PK")
        gsi1sk = UnicodeAttribute(range_key=True, attr_name="GSI1SK")

    class ByUser(GlobalSecondaryIndex[Any]):  # type: ignore[no-untyped-call]
        """GSI2: a user's sessions in a namespace, newest first."""

        Meta = index_meta("GSI2", IncludeProjection(LISTING_ATTRIBUTES))
        gsi2pk = UnicodeAttribute(hash_key=True, attr_name="GSI2PK")
        gsi2sk = UnicodeAttribute(range_key=True, attr_name="GSI2SK")

    class ByLifecycle(GlobalSecondaryIndex[Any]):  # type: ignore[no-untyped-call]
        """GSI3: sessions by expiry time, records by namespace then user (keys.py)."""

        Meta = index_meta("GSI3", IncludeProjection(LIFECYCLE_ATTRIBUTES))
        gsi3pk = UnicodeAttribute(hash_key=True, attr_name="GSI3PK")
        gsi3sk = UnicodeAttribute(range_key=True, attr_name="GSI3SK")

    class TableItem(Model):
        Meta = cast(Any, type("Meta", (), meta))  # PynamoDB reads these as class attributes

        pk = UnicodeAttribute(hash_key=True, attr_name="PK")
        sk = UnicodeAttribute(range_key=True, attr_name="SK")
        kind = DiscriminatorAttribute(attr_name="kind")
        version = VersionAttribute()
        tenant = UnicodeAttribute()
        namespace = UnicodeAttribute()
        created_at = UnicodeAttribute()
        updated_at = UnicodeAttribute()
        expires_at = NumberAttribute(null=True)
        order = UnicodeAttribute(null=True, attr_name="LSI1SK")
        # Which life of a session an item belongs to (a session recreated after it expired
        # starts a new generation; items of the old one are never shown again).
        gen = UnicodeAttribute(null=True)
        by_order = ByOrder()

    class ProfileItem(TableItem, discriminator="profile"):
        name = UnicodeAttribute()
        spec = UnicodeAttribute()

    class SessionItem(TableItem, discriminator="session"):
        session_id = UnicodeAttribute()
        user_id = UnicodeAttribute(null=True)
        profile = UnicodeAttribute(null=True)
        gsi1pk = UnicodeAttribute(null=True, attr_name="GSI1PK")
        gsi1sk = UnicodeAttribute(null=True, attr_name="GSI1SK")
        gsi2pk = UnicodeAttribute(null=True, attr_name="GSI2PK")
        gsi2sk = UnicodeAttribute(null=True, attr_name="GSI2SK")
        gsi3pk = UnicodeAttribute(null=True, attr_name="GSI3PK")
        gsi3sk = UnicodeAttribute(null=True, attr_name="GSI3SK")
        by_namespace = ByNamespace()
        by_user = ByUser()
        by_expiry = ByLifecycle()
        # The document, JSON where free-form (exact round trips of floats and empty values).
        data = UnicodeAttribute(null=True)
        context = UnicodeAttribute(null=True)
        tokens = NumberAttribute(default=0)
        ttl_seconds = NumberAttribute(null=True)
        strategy = UnicodeAttribute(null=True)
        title = UnicodeAttribute(null=True)
        metadata = UnicodeAttribute(null=True)
        last_accessed = UnicodeAttribute(null=True)
        message_count = NumberAttribute(default=0)
        memory_ids = ListAttribute(of=UnicodeAttribute, null=True)
        memory_digests = ListAttribute(of=UnicodeAttribute, null=True)
        # Messages ordered below this LSI1 key are in the log but out of the document.
        view_from = UnicodeAttribute(null=True)
        # The earliest expires_at of the session's other items (they must outlive it).
        children_expire_at = NumberAttribute(null=True)
        index_messages = BooleanAttribute(null=True)
        window_tokens = NumberAttribute(null=True)

    class ScratchpadItem(TableItem, discriminator="scratchpad"):
        profile = UnicodeAttribute()
        scope = UnicodeAttribute()
        format = UnicodeAttribute()
        content = UnicodeAttribute(null=True)
        tokens = NumberAttribute(default=0)
        session_id = UnicodeAttribute(null=True)
        user_id = UnicodeAttribute(null=True)

    class MessageItem(TableItem, discriminator="message"):
        message_id = UnicodeAttribute()
        role = UnicodeAttribute()
        content = UnicodeAttribute()
        message_at = UnicodeAttribute()
        tokens = NumberAttribute(default=0)
        name = UnicodeAttribute(null=True)
        tool_call_id = UnicodeAttribute(null=True)
        tool_calls = UnicodeAttribute(null=True)
        metadata = UnicodeAttribute(null=True)
        persisted_at = UnicodeAttribute(null=True)
        extracted = UnicodeAttribute(default="f")
        # Set on messages the indexer embeds ("1"; the stream filter passes only those),
        # with what the index filters on and the write time that versions the vector.
        idx = UnicodeAttribute(null=True)
        session_id = UnicodeAttribute(null=True)
        user_id = UnicodeAttribute(null=True)
        written_us = NumberAttribute(null=True)
        # When the turn before it last changed (removed or edited): the indexer reads its
        # context again (store/sessions.py touch_turns_after).
        ctx_us = NumberAttribute(null=True)

    class MemoryItem(TableItem, discriminator="memory"):
        memory_id = UnicodeAttribute()
        record = UnicodeAttribute()
        # Who the session belongs to, for the long-term record the indexer promotes it to.
        session_id = UnicodeAttribute(null=True)
        user_id = UnicodeAttribute(null=True)
        persisted_at = UnicodeAttribute(null=True)

    class ByHash(GlobalSecondaryIndex[Any]):  # type: ignore[no-untyped-call]
        """GSI1, overloaded: a user's records in a namespace by content hash (deduplication)."""

        Meta = index_meta("GSI1", IncludeProjection(LISTING_ATTRIBUTES))
        gsi1pk = UnicodeAttribute(hash_key=True, attr_name="GSI1PK")
        gsi1sk = UnicodeAttribute(range_key=True, attr_name="GSI1SK")

    class RecordItem(TableItem, discriminator="record"):
        """A long-term record: its own partition, keyed by the tenant and its id."""

        record_id = UnicodeAttribute()
        text = UnicodeAttribute()
        memory_type = UnicodeAttribute()
        topics = ListAttribute(of=UnicodeAttribute, null=True)
        entities = ListAttribute(of=UnicodeAttribute, null=True)
        session_id = UnicodeAttribute(null=True)
        user_id = UnicodeAttribute(null=True)
        event_date = UnicodeAttribute(null=True)
        pinned = BooleanAttribute(default=False)
        last_accessed = UnicodeAttribute(null=True)
        persisted_at = UnicodeAttribute(null=True)
        memory_hash = UnicodeAttribute()
        extracted_from = ListAttribute(of=UnicodeAttribute, null=True)
        metadata = UnicodeAttribute(null=True)
        extracted = UnicodeAttribute(default="f")
        # Microseconds of the write: the version of its vector (grows across re-creation).
        written_us = NumberAttribute()
        gsi1pk = UnicodeAttribute(null=True, attr_name="GSI1PK")
        gsi1sk = UnicodeAttribute(null=True, attr_name="GSI1SK")
        gsi3pk = UnicodeAttribute(null=True, attr_name="GSI3PK")
        gsi3sk = UnicodeAttribute(null=True, attr_name="GSI3SK")
        by_hash = ByHash()
        by_namespace = ByLifecycle()
        # Current truth (StoredRecord): valid and system time, the slot, the links.
        valid_from = UnicodeAttribute(null=True)
        valid_until = UnicodeAttribute(null=True)
        recorded_at = UnicodeAttribute(null=True)
        retired_at = UnicodeAttribute(null=True)
        held_until = UnicodeAttribute(null=True)
        key = UnicodeAttribute(null=True, attr_name="slot")  # KEY is a reserved word
        supersedes = ListAttribute(of=UnicodeAttribute, null=True)
        superseded_by = UnicodeAttribute(null=True)
        # What made this version, who and through which door (the history shows them).
        change = UnicodeAttribute(null=True)
        changed_by = UnicodeAttribute(null=True)
        changed_via = UnicodeAttribute(null=True)

    class RecordVersionItem(TableItem, discriminator="record_version"):
        """An earlier version of a record, in its partition (keys.record_version_key): the
        whole record as it was (`record`, JSON), kept when a change replaced it. The
        record's item is always its current version; a deleted record keeps its versions
        beside its tombstone until the tombstone expires."""

        record_id = UnicodeAttribute()
        user_id = UnicodeAttribute(null=True)
        record = UnicodeAttribute()
        life = NumberAttribute()
        number = NumberAttribute()

    class SlotItem(TableItem, discriminator="slot"):
        """Which record is current in a slot of a user (keys.slot_key: in the user's
        partition, so a user's deletion takes it) or of a namespace's records of no user."""

        slot = UnicodeAttribute()
        current = UnicodeAttribute()
        user_id = UnicodeAttribute(null=True)

    class DeletedRecordItem(TableItem, discriminator="record_deleted"):
        """What a delete leaves of a record: who deleted it, when and how, and the listing
        entry of the record (GSI3), so a user's deletion still finds its history. No text.
        It expires (and its history with it) after the retention a delete keeps."""

        record_id = UnicodeAttribute()
        user_id = UnicodeAttribute(null=True)
        life = NumberAttribute()
        number = NumberAttribute()
        changed_by = UnicodeAttribute(null=True)
        changed_via = UnicodeAttribute(null=True)
        gsi3pk = UnicodeAttribute(null=True, attr_name="GSI3PK")
        gsi3sk = UnicodeAttribute(null=True, attr_name="GSI3SK")
        by_namespace = ByLifecycle()

    class IndexStateItem(TableItem, discriminator="index_state"):
        """Beside a record: the newest version of it the indexer wrote (or failed to). Its
        own item, so the indexer's write is no change to the record (and no stream loop)."""

        indexed_us = NumberAttribute(default=0)
        failed_us = NumberAttribute(null=True)
        reason = UnicodeAttribute(null=True)

    return {
        "base": TableItem,
        "profile": ProfileItem,
        "session": SessionItem,
        "scratchpad": ScratchpadItem,
        "message": MessageItem,
        "memory": MemoryItem,
        "record": RecordItem,
        "record_version": RecordVersionItem,
        "record_deleted": DeletedRecordItem,
        "slot": SlotItem,
        "index_state": IndexStateItem,
    }


def write_version(written_us: Any, updated_at: str | None) -> int:
    """The version of an item's last write: its written_us (µs), or for an item written
    before written_us existed, its updated_at's µs (0: it has neither)."""
    if isinstance(written_us, Decimal | int | float):
        return int(written_us)
    if not updated_at:
        return 0
    return int(datetime.fromisoformat(updated_at.replace("Z", "+00:00")).timestamp() * 1_000_000)


def _index_state(item: Any | None, written_us: int) -> IndexState:
    if item is None:
        return "pending"
    if int(item.indexed_us or 0) >= written_us:
        return "indexed"
    if item.failed_us is not None and int(item.failed_us) >= written_us:
        return "failed"
    return "pending"


def stored_record(item: Any, state: Any | None = None) -> StoredRecord:
    """A record item as a StoredRecord, with its index state (`state`: the item beside it,
    None: none is read, or there is none)."""
    written_us = write_version(item.written_us, item.updated_at)
    return StoredRecord(
        tenant=item.tenant,
        id=item.record_id,
        namespace=item.namespace or DEFAULT_NAMESPACE,
        text=item.text,
        memory_type=item.memory_type,
        topics=tuple(item.topics or ()),
        entities=tuple(item.entities or ()),
        session_id=item.session_id,
        user_id=item.user_id,
        event_date=item.event_date,
        pinned=bool(item.pinned),
        created_at=item.created_at,
        updated_at=item.updated_at,
        last_accessed=item.last_accessed or item.updated_at,
        persisted_at=item.persisted_at,
        memory_hash=item.memory_hash,
        extracted_from=tuple(item.extracted_from or ()),
        metadata=json.loads(item.metadata) if item.metadata else {},
        discrete_memory_extracted=item.extracted or "f",
        written_us=written_us,
        version=int(item.version or 0),
        indexing=_index_state(state, written_us),
        expires_at=int(item.expires_at) if item.expires_at is not None else None,
        valid_from=item.valid_from,
        valid_until=item.valid_until,
        recorded_at=item.recorded_at,
        retired_at=item.retired_at,
        held_until=item.held_until,
        key=item.key,
        supersedes=tuple(item.supersedes or ()),
        superseded_by=item.superseded_by,
        change=item.change or "create",
        changed_by=item.changed_by,
        changed_via=item.changed_via,
    )
