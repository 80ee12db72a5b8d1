"""The indexer's logic: DynamoDB stream records in, vectors in the index out.

What reaches it (template.yaml's FilterCriteria): long-term records, session messages
stamped for indexing (`idx`), and pending memories of sessions, which it promotes to
long-term records (the record's own stream event then indexes it). A system (or developer)
message is never indexed: it is the assistant's instructions, not something said in the
conversation, and a search for the user's messages must not find it (nor a prompt show it
as one of the user's memories).

A batch is handled whole where providers allow it: every text embedded in as few calls as
the embedder takes (Cohere: 96 a call), one `upsert` and one `remove` on the index (one
`_bulk` each on OpenSearch). Each stream record still succeeds or fails alone: the outcome
maps sequence numbers to reasons, and the handler reports only those as batch item failures.

Idempotent and order-safe: a doc's version is the item's write time in microseconds
(`written_us`), a removal's is later than the write it removes, and the index keeps the
newest version, so replaying a batch or delivering versions out of order changes nothing.
A MODIFY that changes nothing the index holds (an expiry refresh) embeds nothing.

A message's doc also says who said it (`speaker`) and carries the turn before it in its
session as `context` (memkit.vectors.conversation): one Query of the table a session a batch
reads them. When a message is removed (not by expiry) or its text changes, the message after
it is marked in the table (touch_turns_after), and the stream brings it back to be indexed
with its new turn before it: a removed turn's words never stay findable through its reply.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from memkit.embeddings.protocol import RETRYABLE, Embedder, EmbeddingFailed
from memkit.models.domain import MessageRef, StoredRecord
from memkit.models.memory import MemoryRecordIn
from memkit.models.session import MemoryType
from memkit.observability import logger, metrics
from memkit.service.long_term import new_record
from memkit.store.changes import (
    DeletedRecordValue,
    ItemChange,
    MessageValue,
    PendingMemoryValue,
    UnreadableChange,
    Value,
    stream_change,
)
from memkit.store.records import RecordTable
from memkit.store.sessions import SessionTable
from memkit.vectors.conversation import context_of, speaker_of
from memkit.vectors.protocol import (
    MESSAGE_KIND,
    Removal,
    VectorDoc,
    VectorIndex,
    doc_id_of,
    epoch_seconds,
    record_fields,
)

Indexed = StoredRecord | MessageValue


def _wanted(value: Value) -> TypeGuard[StoredRecord | MessageValue | PendingMemoryValue]:
    """What the stream filter should have let through; anything else is ignored here too
    (a deployment whose filters drifted must not index every message)."""
    return isinstance(value, StoredRecord | PendingMemoryValue) or (
        isinstance(value, MessageValue) and value.indexed
    )


def _version(value: Indexed) -> int:
    """The version of an item's doc: the time of its write (µs)."""
    return value.written_us if isinstance(value, StoredRecord) else value.version


def _without_access(doc: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    text, fields = doc
    return text, {k: v for k, v in fields.items() if k != "last_accessed"}


def _touched(value: Indexed) -> int | None:
    """When a message's turn before it last changed (None for records)."""
    return value.touched if isinstance(value, MessageValue) else None


def _text_and_fields(value: Indexed) -> tuple[str, dict[str, Any]]:
    """What the index holds of an item: its text and its filter fields."""
    if isinstance(value, StoredRecord):
        return value.text, record_fields(value.tenant, value)
    at = epoch_seconds(value.message_at)
    ref = value.ref
    fields: dict[str, Any] = {
        "tenant": ref.tenant,
        "namespace": ref.namespace,
        "user_id": value.user_id,
        "session_id": ref.session_id,
        "memory_type": MemoryType.MESSAGE.value,
        "topics": [],
        "entities": [],
        "record_id": ref.message_id,
        "kind": MESSAGE_KIND,
        "created_at": at,
        "updated_at": at,
        "last_accessed": at,
        "event_date": None,
        "pinned": False,
        "speaker": speaker_of(value.content, value.name),
    }
    return value.content, fields


@dataclass
class _Change:
    """The last stream record of one item in the batch, and every sequence number of it."""

    tenant: str
    subject: Value
    sequences: list[str] = field(default_factory=list)
    new: Value | None = None
    # The item before this batch touched it, when every record of it here is a MODIFY
    # (None otherwise: an INSERT or REMOVE in the batch always reaches the index).
    before: Value | None = None
    modified_only: bool = True
    removal_version: int = 0
    ttl: bool = False
    doc_id: str = ""
    removed: Value | None = None  # the item as its last REMOVE's old image shows it


@dataclass
class _Contexts:
    found: dict[str, str] = field(default_factory=dict)  # doc id -> context
    failed: set[str] = field(default_factory=set)  # doc ids whose context was not read


@dataclass
class BatchOutcome:
    """Per stream record: None = done, else why it failed (no content)."""

    failures: dict[str, str] = field(default_factory=dict)
    indexed: int = 0
    removed: int = 0
    skipped: int = 0
    promoted: int = 0

    def fail(self, sequences: Sequence[str], reason: str) -> None:
        for sequence in sequences:
            self.failures[sequence] = reason


class Indexer:
    """Stream records -> embeddings -> the vector index, and pending memories -> records."""

    def __init__(
        self,
        records: RecordTable,
        sessions: SessionTable,
        index: VectorIndex,
        embedder: Embedder,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records = records
        self._sessions = sessions
        self._index = index
        self._embedder = embedder
        self._clock = clock

    def index_batch(self, records: Sequence[dict[str, Any]]) -> BatchOutcome:
        """A batch of DynamoDB stream records (as Lambda delivers them)."""
        outcome = BatchOutcome()
        changes: list[ItemChange] = []
        for record in records:
            try:
                change = stream_change(record)
            except UnreadableChange as exc:
                outcome.fail([exc.sequence], f"unreadable stream record: {exc}")
                continue
            if change is None:
                outcome.skipped += 1
            else:
                changes.append(change)
        return self.index_changes(changes, outcome, len(records))

    def index_changes(
        self,
        changes: Sequence[ItemChange],
        outcome: BatchOutcome | None = None,
        records: int | None = None,
    ) -> BatchOutcome:
        """Typed changes of the table (the stream's, or a rebuild's Scan)."""
        outcome = outcome or BatchOutcome()
        changes = self._erase_deleted(changes, outcome)
        items = self._fold(changes, outcome)
        promotions = [c for c in items if isinstance(c.subject, PendingMemoryValue)]
        indexable = [c for c in items if not isinstance(c.subject, PendingMemoryValue)]
        for change in promotions:
            self._promote(change, outcome)
        self._apply(indexable, outcome)
        metrics.add_metric(name="IndexedDocs", unit="Count", value=outcome.indexed)
        metrics.add_metric(name="RemovedDocs", unit="Count", value=outcome.removed)
        metrics.add_metric(name="PromotedMemories", unit="Count", value=outcome.promoted)
        metrics.add_metric(name="IndexFailures", unit="Count", value=len(outcome.failures))
        logger.info(
            "indexed a batch",
            extra={
                "records": len(changes) if records is None else records,
                "indexed": outcome.indexed,
                "removed": outcome.removed,
                "skipped": outcome.skipped,
                "promoted": outcome.promoted,
                "failed": len(outcome.failures),
            },
        )
        return outcome

    # -- reading the batch -------------------------------------------------------------------

    def _fold(self, changes: Sequence[ItemChange], outcome: BatchOutcome) -> list[_Change]:
        """One change per item (its last state wins), in the order items first appear."""
        by_item: dict[object, _Change] = {}
        for change in changes:
            value = change.value
            if not _wanted(value):
                outcome.skipped += 1
                continue
            item = by_item.setdefault(value.ref, _Change(value.ref.tenant, subject=value))
            if not isinstance(value, PendingMemoryValue):
                item.doc_id = doc_id_of(value.ref)
            self._add(item, change)
        return list(by_item.values())

    @staticmethod
    def _add(item: _Change, change: ItemChange) -> None:
        """Fold one stream record of an item into the item's change (its last state wins)."""
        if not item.sequences:
            item.before = change.old if change.event == "MODIFY" else None
        item.modified_only = item.modified_only and change.event == "MODIFY"
        if change.event == "REMOVE":
            old = change.old
            previous = _version(old) if isinstance(old, StoredRecord | MessageValue) else 0
            item.new = None
            item.removal_version = max(previous + 1, change.at_us)
            item.ttl = change.ttl
            item.removed = old
        else:
            item.new = change.new
        item.sequences.append(change.sequence)

    # -- promotion ---------------------------------------------------------------------------

    def _promote(self, change: _Change, outcome: BatchOutcome) -> None:
        """A session's pending memory becomes a long-term record (same id), then shows
        `persisted_at`. An unchanged record is not rewritten, so a replay costs nothing."""
        pending = change.new
        if not isinstance(pending, PendingMemoryValue) or pending.persisted:
            # Gone, or this is the write that marked it promoted: nothing to do.
            outcome.skipped += len(change.sequences)
            return
        try:
            given = json.loads(pending.record_json)
            memory = MemoryRecordIn.model_validate(
                {
                    **given,
                    "namespace": given.get("namespace") or pending.ref.namespace,
                    "user_id": given.get("user_id") or pending.user_id,
                    "session_id": given.get("session_id") or pending.ref.session_id or None,
                }
            )
        except (KeyError, TypeError, ValueError) as exc:
            outcome.fail(change.sequences, f"unreadable pending memory: {type(exc).__name__}")
            return
        try:
            if not self._records.awaits_promotion(pending.ref, pending.record_json):
                # A replay: promoted already, rewritten since (its own event follows), or
                # gone. Promoting again would undo an edit or a delete of the record.
                outcome.skipped += len(change.sequences)
                return
            stored = self._records.get_records(change.tenant, [memory.id]).get(memory.id)
            if stored is not None and (stored.user_id, stored.namespace) != (
                memory.user_id,
                memory.namespace,
            ):
                # A record never changes owner (a create over it is refused): a pending
                # memory under another owner's record id is not promoted over it.
                logger.warning("pending memory names another owner's record; not promoted")
                outcome.skipped += len(change.sequences)
                return
            record = new_record(change.tenant, memory, self._clock(), stored)
            if stored is None or self._differs(stored, record):
                self._records.put_records(change.tenant, [record])
            self._records.mark_promoted(pending.ref, pending.record_json, record.persisted_at or "")
        except Exception as exc:
            outcome.fail(change.sequences, f"promotion failed: {type(exc).__name__}")
            return
        outcome.promoted += 1

    @staticmethod
    def _differs(stored: StoredRecord, record: StoredRecord) -> bool:
        # Times and versions differ on every write; the content is what decides.
        ignored = {"created_at", "updated_at", "last_accessed", "persisted_at", "written_us"}
        ignored |= {"version", "indexing"}
        ours = {k: v for k, v in vars(record).items() if k not in ignored}
        theirs = {k: v for k, v in vars(stored).items() if k not in ignored}
        return ours != theirs

    # -- indexing ----------------------------------------------------------------------------

    def _apply(self, changes: list[_Change], outcome: BatchOutcome) -> None:
        writes: list[tuple[_Change, str, dict[str, Any], int]] = []
        removals: list[tuple[_Change, Removal]] = []
        for change in changes:
            if change.new is None:
                removal = Removal(change.doc_id, change.tenant, change.removal_version)
                removals.append((change, removal))
                continue
            new, before = change.new, change.before
            try:
                assert isinstance(new, StoredRecord | MessageValue)
                text, fields = _text_and_fields(new)
                unchanged = (
                    change.modified_only
                    and isinstance(before, StoredRecord | MessageValue)
                    and _without_access(_text_and_fields(before)) == _without_access((text, fields))
                    and _touched(before) == _touched(new)
                )
                if unchanged:
                    outcome.skipped += len(change.sequences)
                    # Nothing the index holds changed (an expiry refresh), or only the last
                    # access (a search's touch: not worth an embedding; filters on it are
                    # re-checked against the table).
                    continue
                writes.append((change, text, fields, _version(new)))
            except (AssertionError, KeyError, TypeError, ValueError) as exc:
                outcome.fail(change.sequences, f"unreadable item: {type(exc).__name__}")

        # the messages this batch writes or removes: their contexts need no touch
        handled = {
            change.subject.ref
            for change in [w[0] for w in writes] + [r[0] for r in removals]
            if isinstance(change.subject, MessageValue)
        }
        self._touch_turns_after(changes, outcome, handled)
        contexts = self._contexts([change for change, _, _, _ in writes], outcome)
        writes = [w for w in writes if w[0].doc_id not in contexts.failed]
        vectors, embed_failures = self._embed([text for _, text, _, _ in writes])
        docs: list[VectorDoc] = []
        doc_changes: dict[str, tuple[_Change, int]] = {}
        states: dict[str, dict[str, Any]] = {}
        for position, (change, text, fields, version) in enumerate(writes):
            ident = change.doc_id
            if position in embed_failures:
                reason = embed_failures[position]
                outcome.fail(change.sequences, f"embedding failed: {reason}")
                if isinstance(change.subject, StoredRecord) and reason not in RETRYABLE:
                    # the text itself is refused: say so on the record, not just in the DLQ
                    states.setdefault(change.tenant, {"ok": {}, "failed": {}})["failed"][
                        fields["record_id"]
                    ] = (version, reason)
                continue
            context = contexts.found.get(ident, "")
            docs.append(
                VectorDoc(ident, change.tenant, vectors[position], version, text, fields, context)
            )
            doc_changes[ident] = (change, version)

        for ident, reason in self._index.upsert(docs).items() if docs else ():
            change, _ = doc_changes.pop(ident)
            outcome.fail(change.sequences, f"index write failed: {reason}")
        for change, version in doc_changes.values():
            outcome.indexed += 1
            if isinstance(change.new, StoredRecord):
                states.setdefault(change.tenant, {"ok": {}, "failed": {}})["ok"][
                    change.new.ref.record_id
                ] = version

        if removals:
            removed = {ident: change for change, ident in ((c, r.id) for c, r in removals)}
            for ident, reason in self._index.remove([r for _, r in removals]).items():
                outcome.fail(removed.pop(ident).sequences, f"index removal failed: {reason}")
            outcome.removed += len(removed)
            ttl = sum(1 for change in removed.values() if change.ttl)
            if ttl:
                metrics.add_metric(name="ExpiredDocsRemoved", unit="Count", value=ttl)
            self._drop_expired_states(list(removed.values()), outcome)

        for tenant, state in states.items():
            try:
                self._records.mark_indexed(tenant, state["ok"], state["failed"])
            except Exception as exc:
                logger.warning("index state not written", extra={"error_type": type(exc).__name__})
                for change, _ in doc_changes.values():
                    if isinstance(change.subject, StoredRecord) and change.tenant == tenant:
                        outcome.fail(change.sequences, "index state not written")

    def _drop_expired_states(self, removed: Sequence[_Change], outcome: BatchOutcome) -> None:
        """Erase what the table's TTL left of the records it removed: their index states and
        histories (a deletion by a caller takes its record's state with it; an expiry takes
        only the record, and erasure beats history). A failure fails the change's records,
        so the batch is retried: a history must not outlive its record's expiry."""
        for change in removed:
            record = change.removed
            if not (change.ttl and isinstance(record, StoredRecord)):
                continue
            try:
                self._records.erase(change.tenant, [record.id], life=record.life)
            except Exception as exc:
                outcome.fail(change.sequences, f"history not erased: {type(exc).__name__}")

    def _erase_deleted(
        self, changes: Sequence[ItemChange], outcome: BatchOutcome
    ) -> list[ItemChange]:
        """A deleted record's tombstone expired (its retention is over): its history of that
        life goes too. The other changes, to index as usual."""
        rest: list[ItemChange] = []
        for change in changes:
            old = change.old
            if not isinstance(old, DeletedRecordValue | None) or not isinstance(
                change.new, DeletedRecordValue | None
            ):
                rest.append(change)
                continue
            if change.event != "REMOVE" or not isinstance(old, DeletedRecordValue):
                outcome.skipped += 1  # a tombstone written: nothing to index
                continue
            try:
                self._records.erase(old.tenant, [old.record_id], life=old.life)
                outcome.removed += 1
            except Exception as exc:
                outcome.fail([change.sequence], f"history not erased: {type(exc).__name__}")
        return rest

    def _touch_turns_after(
        self, changes: Sequence[_Change], outcome: BatchOutcome, handled: Collection[object]
    ) -> None:
        """A message removed (not by expiry) or whose content changed: the message after it
        must read its context again (the store marks it, and the stream brings it back).
        On failure the change's records fail, and the batch is retried."""
        triggers: list[tuple[_Change, MessageValue]] = []
        for change in changes:
            if isinstance(change.removed, MessageValue) and change.new is None and not change.ttl:
                triggers.append((change, change.removed))
            elif (
                isinstance(change.new, MessageValue)
                and isinstance(change.before, MessageValue)
                and change.before.content != change.new.content
            ):
                triggers.append((change, change.new))
        if not triggers:
            return
        skip = [ref for ref in handled if isinstance(ref, MessageRef)]
        try:
            self._sessions.touch_turns_after([value for _, value in triggers], skip)
        except Exception as exc:
            reason = f"next turn not marked: {type(exc).__name__}"
            for change, _ in triggers:
                outcome.fail(change.sequences, reason)

    def _contexts(self, changes: Sequence[_Change], outcome: BatchOutcome) -> _Contexts:
        """The turn before each message of the batch (doc id -> its context); a session
        whose log could not be read fails its messages' records (the batch is retried)."""
        contexts = _Contexts()
        messages = [c for c in changes if isinstance(c.new, MessageValue)]
        if not messages:
            return contexts
        values = [c.new for c in messages if isinstance(c.new, MessageValue)]
        try:
            before = self._sessions.turns_before(values)
        except Exception as exc:
            reason = f"context read failed: {type(exc).__name__}"
            for change in messages:
                outcome.fail(change.sequences, reason)
                contexts.failed.add(change.doc_id)
            return contexts
        for change in messages:
            assert isinstance(change.new, MessageValue)
            contexts.found[change.doc_id] = context_of(before.get(change.new.ref))
        return contexts

    def _embed(self, texts: list[str]) -> tuple[list[list[float]], dict[int, str]]:
        if not texts:
            return [], {}
        try:
            return self._embedder.embed(texts, "document"), {}
        except EmbeddingFailed as exc:
            vectors = [v if v is not None else [] for v in exc.vectors]
            return vectors, dict(exc.failures)
        except Exception as exc:
            reason = type(exc).__name__
            return [[] for _ in texts], dict.fromkeys(range(len(texts)), reason)
