"""What changed in the table, as memkit's background jobs see it: a typed change per item.

The table's stream (and a rebuild's Scan) speaks in DynamoDB items: `NewImage`/`OldImage`,
typed attribute values, table keys. Only this module reads them. It hands the jobs an
`ItemChange`: which item (by memkit's ids), what it was and is now as plain values (a
record as the `StoredRecord` a table read gives, through the table's own item class;
`MessageValue`, `PendingMemoryValue`, `SessionValue`), and whether a TTL expiry removed it.
Items the jobs do not follow (profiles, scratchpads, index states, system items) decode to
None.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from boto3.dynamodb.types import TypeDeserializer

from memkit.models.domain import (
    DEFAULT_NAMESPACE,
    MessageRef,
    PendingMemoryRef,
    StoredRecord,
    is_instruction,
)
from memkit.store.items import read_item, stored_record, write_version

# Who deletes an item whose TTL passed (a stream record's userIdentity.principalId).
TTL_PRINCIPAL = "dynamodb.amazonaws.com"
_deserializer = TypeDeserializer()

Event = Literal["INSERT", "MODIFY", "REMOVE"]


class UnreadableChange(ValueError):
    """A stream record or item that is not what memkit writes (the reason names no content;
    `sequence` is the stream record's, to report it as failed)."""

    def __init__(self, reason: str, sequence: str = "") -> None:
        super().__init__(reason)
        self.sequence = sequence


@dataclass(frozen=True)
class MessageValue:
    """A session's message, and whether the index holds it (stamped for indexing, and not
    a system message)."""

    ref: MessageRef
    user_id: str | None
    content: str
    message_at: str | None
    indexed: bool
    version: int
    # Its place in the session's log (LSI1SK), the life of the session it belongs to, and
    # its author's name when the client gave one (what the indexer reads the turn before
    # it and its speaker by).
    order: str | None = None
    gen: str | None = None
    name: str | None = None
    # Set when the turn before it changed (its context must be read again).
    touched: int | None = None


@dataclass(frozen=True)
class PendingMemoryValue:
    """A session's pending structured memory (JSON), promoted to a record by the indexer."""

    ref: PendingMemoryRef
    record_json: str
    user_id: str | None
    persisted: bool


@dataclass(frozen=True)
class SessionValue:
    """A session document's counters, as the curator reads them."""

    tenant: str
    namespace: str
    session_id: str
    updated_at: str
    message_count: int
    title: str | None
    # The session's own summary window (SessionMeta.window_tokens; None: the server's).
    window_tokens: int | None = None


@dataclass(frozen=True)
class DeletedRecordValue:
    """What a delete left of a record (its tombstone): when the tombstone expires, the
    record's history of that life goes with it (memkit.jobs.indexing)."""

    tenant: str
    record_id: str
    life: int


Value = StoredRecord | MessageValue | PendingMemoryValue | SessionValue | DeletedRecordValue


@dataclass(frozen=True)
class ItemChange:
    """One stream record of an item (or one item a rebuild read, as an INSERT)."""

    sequence: str
    event: Event
    old: Value | None
    new: Value | None
    # Removed by TTL expiry, not by a caller.
    ttl: bool = False
    # When the change happened, as the stream saw it (µs since the epoch; 0: unknown).
    at_us: int = 0

    @property
    def value(self) -> Value:
        """The item as it is now, or as it was before a removal."""
        value = self.new or self.old
        assert value is not None
        return value


def stream_change(record: Mapping[str, Any]) -> ItemChange | None:
    """A DynamoDB stream record (as Lambda delivers it) as a typed change; None for an item
    the jobs do not follow. Raises UnreadableChange for a record memkit did not write."""
    dynamodb = record.get("dynamodb") or {}
    sequence = str(dynamodb.get("SequenceNumber", ""))
    event = record.get("eventName")
    try:
        if event not in ("INSERT", "MODIFY", "REMOVE"):
            raise ValueError("unknown event")
        new = _value(dynamodb.get("NewImage"))
        old = _value(dynamodb.get("OldImage"))
        at = float(dynamodb.get("ApproximateCreationDateTime") or 0)
    except (KeyError, TypeError, ValueError, ArithmeticError) as exc:
        raise UnreadableChange(type(exc).__name__, sequence) from exc
    if new is None and old is None:
        return None
    identity = record.get("userIdentity") or {}
    return ItemChange(
        sequence=sequence,
        event=event,
        old=old,
        new=new,
        ttl=event == "REMOVE" and identity.get("principalId") == TTL_PRINCIPAL,
        at_us=int(at * 1_000_000),
    )


def scanned_changes(items: Sequence[Mapping[str, Any]]) -> tuple[list[ItemChange], int]:
    """Items read by a Scan (typed attribute values) as INSERTs of what they hold, each
    numbered as a stream record would be; items the jobs do not follow are left out. Also
    how many items were unreadable (left out, counted: one never stops a rebuild)."""
    changes: list[ItemChange] = []
    unreadable = 0
    for number, item in enumerate(items):
        try:
            value = _value(item)
        except (KeyError, TypeError, ValueError, ArithmeticError):
            unreadable += 1
            continue
        if value is not None:
            changes.append(ItemChange(sequence=str(number), event="INSERT", old=None, new=value))
    return changes, unreadable


def _plain(raw: Mapping[str, Any]) -> dict[str, Any]:
    return {name: _deserializer.deserialize(value) for name, value in raw.items()}


def _text(image: dict[str, Any], name: str) -> str | None:
    value = image.get(name)
    return None if value is None else str(value)


def _whole(value: Any) -> int | None:
    return int(value) if isinstance(value, Decimal | int) else None


def _version(image: dict[str, Any]) -> int:
    return write_version(image.get("written_us"), _text(image, "updated_at"))


def _record(raw: Mapping[str, Any]) -> StoredRecord:
    item = read_item(dict(raw))
    for name in ("tenant", "record_id", "text"):  # what every record of memkit's holds
        if getattr(item, name) is None:
            raise KeyError(name)
    return stored_record(item)


def _value(raw: Mapping[str, Any] | None) -> Value | None:
    if not raw:
        return None
    if raw.get("kind") == {"S": "record"}:
        return _record(raw)
    image = _plain(raw)
    kind = image.get("kind")
    tenant = str(image["tenant"]) if kind in ("message", "memory", "session") else ""
    namespace = str(image.get("namespace") or DEFAULT_NAMESPACE)
    if kind == "message":
        return MessageValue(
            ref=MessageRef(tenant, namespace, str(image["session_id"]), str(image["message_id"])),
            user_id=_text(image, "user_id"),
            content=str(image["content"]),
            message_at=_text(image, "message_at"),
            # a system message is kept with the session's, never searchable
            indexed=image.get("idx") == "1" and not is_instruction(_text(image, "role")),
            version=_version(image),
            order=_text(image, "LSI1SK"),
            gen=_text(image, "gen"),
            name=_text(image, "name"),
            touched=int(image["ctx_us"]) if image.get("ctx_us") is not None else None,
        )
    if kind == "memory":
        return PendingMemoryValue(
            ref=PendingMemoryRef(
                tenant, namespace, str(image.get("session_id") or ""), str(image["memory_id"])
            ),
            record_json=str(image["record"]),
            user_id=_text(image, "user_id"),
            persisted=bool(image.get("persisted_at")),
        )
    if kind == "record_deleted":
        return DeletedRecordValue(
            tenant=str(image["tenant"]), record_id=str(image["record_id"]), life=int(image["life"])
        )
    if kind == "session":
        return SessionValue(
            tenant=tenant,
            namespace=namespace,
            session_id=str(image["session_id"]),
            updated_at=str(image.get("updated_at") or ""),
            message_count=int(image.get("message_count") or 0),
            title=_text(image, "title"),
            window_tokens=_whole(image.get("window_tokens")),
        )
    if kind is None:
        raise KeyError("kind")
    return None
