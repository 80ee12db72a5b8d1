"""The indexer's logic: DynamoDB stream records in, vectors in the index out.

What reaches it (template.yaml's FilterCriteria): long-term records, session messages
stamped for indexing (`idx`), and pending memories of sessions, which it promotes to
long-term records (the record's own stream event then indexes it).

A batch is handled whole where providers allow it: every text embedded in as few calls as
the embedder takes (Cohere: 96 a call), one `upsert` and one `remove` on the index (one
`_bulk` each on OpenSearch). Each stream record still succeeds or fails alone: the outcome
maps sequence numbers to reasons, and the handler reports only those as batch item failures.

Idempotent and order-safe: a doc's version is the item's write time in microseconds
(`written_us`), a removal's is later than the write it removes, and the index keeps the
newest version, so replaying a batch or delivering versions out of order changes nothing.
A MODIFY that changes nothing the index holds (an expiry refresh) embeds nothing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from boto3.dynamodb.types import TypeDeserializer

from memkit.embeddings.bedrock import RETRYABLE, EmbeddingFailed
from memkit.embeddings.protocol import Embedder
from memkit.models.domain import DEFAULT_NAMESPACE, StoredRecord
from memkit.models.memory import MemoryRecordIn
from memkit.models.session import MemoryType
from memkit.observability import logger, metrics
from memkit.service.long_term import epoch_seconds, new_record
from memkit.store import keys
from memkit.vectors.protocol import Removal, VectorDoc, VectorIndex

TTL_PRINCIPAL = "dynamodb.amazonaws.com"
INDEXED_KINDS = frozenset({"record", "message"})
_deserializer = TypeDeserializer()


class IndexerStore(Protocol):
    """What the indexer writes back to the table (DynamoStore's RecordTable)."""

    def get_records(self, tenant: str, record_ids: Sequence[str]) -> dict[str, StoredRecord]: ...

    def put_records(self, tenant: str, records: Sequence[StoredRecord]) -> None: ...

    def mark_indexed(
        self, tenant: str, versions: dict[str, int], failures: dict[str, tuple[int, str]]
    ) -> None: ...

    def awaits_promotion(self, key: keys.Key, record_json: str) -> bool: ...

    def mark_promoted(self, key: keys.Key, record_json: str, persisted_at: str) -> bool: ...


def doc_id(pk: str, sk: str) -> str:
    """An item's id in the index: opaque, unique across tenants (the key holds the tenant)."""
    return hashlib.sha256(f"{pk}\x00{sk}".encode()).hexdigest()[:40]


def _image(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    return {name: _deserializer.deserialize(value) for name, value in raw.items()}


def _wanted(image: dict[str, Any]) -> bool:
    """What the stream filter should have let through; anything else is ignored here too
    (a deployment whose filters drifted must not index every message)."""
    kind = image["kind"]
    return kind in ("record", "memory") or (kind == "message" and image.get("idx") == "1")


def _iso_us(value: str | None) -> int:
    if not value:
        return 0
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1_000_000)


def _without_access(doc: tuple[str, dict[str, Any]]) -> tuple[str, dict[str, Any]]:
    text, fields = doc
    return text, {k: v for k, v in fields.items() if k != "last_accessed"}


def _version(image: dict[str, Any]) -> int:
    """The item's write time in µs (older items without written_us: their updated_at)."""
    written = image.get("written_us")
    return int(written) if written is not None else _iso_us(image.get("updated_at"))


def _text_and_fields(image: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What the index holds of an item: its text and its filter fields."""
    tenant = str(image["tenant"])
    pk, sk = str(image["PK"]), str(image["SK"])
    if image["kind"] == "record":
        fields = {
            "tenant": tenant,
            "namespace": image.get("namespace") or DEFAULT_NAMESPACE,
            "user_id": image.get("user_id"),
            "session_id": image.get("session_id"),
            "memory_type": image.get("memory_type") or MemoryType.SEMANTIC.value,
            "topics": sorted(image.get("topics") or []),
            "entities": sorted(image.get("entities") or []),
            "record_id": image["record_id"],
            "pk": pk,
            "sk": sk,
            "created_at": epoch_seconds(image.get("created_at")),
            "updated_at": epoch_seconds(image.get("updated_at")),
            "last_accessed": epoch_seconds(image.get("last_accessed")),
            "event_date": epoch_seconds(image.get("event_date")),
            "pinned": bool(image.get("pinned")),
        }
        return str(image["text"]), fields
    at = epoch_seconds(image.get("message_at"))
    fields = {
        "tenant": tenant,
        "namespace": image.get("namespace") or DEFAULT_NAMESPACE,
        "user_id": image.get("user_id"),
        "session_id": image.get("session_id"),
        "memory_type": MemoryType.MESSAGE.value,
        "topics": [],
        "entities": [],
        "record_id": image["message_id"],
        "pk": pk,
        "sk": sk,
        "created_at": at,
        "updated_at": at,
        "last_accessed": at,
        "event_date": None,
        "pinned": False,
    }
    return str(image["content"]), fields


@dataclass
class _Change:
    """The last stream record of one item in the batch, and every sequence number of it."""

    kind: str
    tenant: str
    key: keys.Key
    sequences: list[str] = field(default_factory=list)
    new: dict[str, Any] | None = None
    # The item before this batch touched it, when every record of it here is a MODIFY
    # (None otherwise: an INSERT or REMOVE in the batch always reaches the index).
    before: dict[str, Any] | None = None
    modified_only: bool = True
    removal_version: int = 0
    ttl: bool = False


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
        store: IndexerStore,
        index: VectorIndex,
        embedder: Embedder,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._store = store
        self._index = index
        self._embedder = embedder
        self._clock = clock

    def index_batch(self, records: Sequence[dict[str, Any]]) -> BatchOutcome:
        outcome = BatchOutcome()
        changes = self._changes(records, outcome)
        promotions = [c for c in changes if c.kind == "memory"]
        indexable = [c for c in changes if c.kind in INDEXED_KINDS]
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
                "records": len(records),
                "indexed": outcome.indexed,
                "removed": outcome.removed,
                "skipped": outcome.skipped,
                "promoted": outcome.promoted,
                "failed": len(outcome.failures),
            },
        )
        return outcome

    # -- reading the batch -------------------------------------------------------------------

    def _changes(self, records: Sequence[dict[str, Any]], outcome: BatchOutcome) -> list[_Change]:
        by_key: dict[keys.Key, _Change] = {}
        for record in records:
            dynamodb = record.get("dynamodb") or {}
            sequence = str(dynamodb.get("SequenceNumber", ""))
            try:
                new = _image(dynamodb.get("NewImage"))
                old = _image(dynamodb.get("OldImage"))
                image = new or old
                if image is None or "kind" not in image or not _wanted(image):
                    outcome.skipped += 1
                    continue
                key = (str(image["PK"]), str(image["SK"]))
                change = by_key.setdefault(
                    key, _Change(str(image["kind"]), str(image["tenant"]), key)
                )
            except (KeyError, TypeError, ValueError) as exc:
                outcome.fail([sequence], f"unreadable stream record: {type(exc).__name__}")
                continue
            try:
                self._add_record(change, record, new, old)
            except (KeyError, TypeError, ValueError) as exc:
                outcome.fail([sequence], f"unreadable stream record: {type(exc).__name__}")
                continue
            change.sequences.append(sequence)
        # An item whose every record was unreadable has nothing to apply.
        return [change for change in by_key.values() if change.sequences]

    @staticmethod
    def _add_record(
        change: _Change,
        record: dict[str, Any],
        new: dict[str, Any] | None,
        old: dict[str, Any] | None,
    ) -> None:
        """Fold one stream record of an item into the item's change (its last state wins)."""
        event = record.get("eventName")
        if not change.sequences:
            change.before = old if event == "MODIFY" else None
        change.modified_only = change.modified_only and event == "MODIFY"
        if event == "REMOVE":
            dynamodb = record["dynamodb"]
            approximate = float(dynamodb.get("ApproximateCreationDateTime") or 0)
            previous = _version(old) if old else 0
            change.new = None
            change.removal_version = max(previous + 1, int(approximate * 1_000_000))
            identity = record.get("userIdentity") or {}
            change.ttl = identity.get("principalId") == TTL_PRINCIPAL
        else:
            change.new = new

    # -- promotion ---------------------------------------------------------------------------

    def _promote(self, change: _Change, outcome: BatchOutcome) -> None:
        """A session's pending memory becomes a long-term record (same id), then shows
        `persisted_at`. An unchanged record is not rewritten, so a replay costs nothing."""
        image = change.new
        if image is None or image.get("persisted_at"):
            # Gone, or this is the write that marked it promoted: nothing to do.
            outcome.skipped += len(change.sequences)
            return
        try:
            pending = json.loads(image["record"])
            memory = MemoryRecordIn.model_validate(
                {
                    **pending,
                    "namespace": pending.get("namespace") or image.get("namespace"),
                    "user_id": pending.get("user_id") or image.get("user_id"),
                    "session_id": pending.get("session_id") or image.get("session_id"),
                }
            )
        except (KeyError, TypeError, ValueError) as exc:
            outcome.fail(change.sequences, f"unreadable pending memory: {type(exc).__name__}")
            return
        try:
            if not self._store.awaits_promotion(change.key, str(image["record"])):
                # A replay: promoted already, rewritten since (its own event follows), or
                # gone. Promoting again would undo an edit or a delete of the record.
                outcome.skipped += len(change.sequences)
                return
            stored = self._store.get_records(change.tenant, [memory.id]).get(memory.id)
            record = new_record(memory, self._clock(), stored)
            if stored is None or self._differs(stored, record):
                self._store.put_records(change.tenant, [record])
            self._store.mark_promoted(change.key, str(image["record"]), record.persisted_at or "")
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
            ident = doc_id(*change.key)
            if change.new is None:
                removals.append((change, Removal(ident, change.tenant, change.removal_version)))
                continue
            try:
                text, fields = _text_and_fields(change.new)
                unchanged = (
                    change.modified_only
                    and change.before is not None
                    and _without_access(_text_and_fields(change.before))
                    == _without_access((text, fields))
                )
                if unchanged:
                    outcome.skipped += len(change.sequences)
                    # Nothing the index holds changed (an expiry refresh), or only the last
                    # access (a search's touch: not worth an embedding; filters on it are
                    # re-checked against the table).
                    continue
                writes.append((change, text, fields, _version(change.new)))
            except (KeyError, TypeError, ValueError) as exc:
                outcome.fail(change.sequences, f"unreadable item: {type(exc).__name__}")

        vectors, embed_failures = self._embed([text for _, text, _, _ in writes])
        docs: list[VectorDoc] = []
        doc_changes: dict[str, tuple[_Change, int]] = {}
        states: dict[str, dict[str, Any]] = {}
        for position, (change, text, fields, version) in enumerate(writes):
            ident = doc_id(*change.key)
            if position in embed_failures:
                reason = embed_failures[position]
                outcome.fail(change.sequences, f"embedding failed: {reason}")
                if change.kind == "record" and reason not in RETRYABLE:
                    # the text itself is refused: say so on the record, not just in the DLQ
                    states.setdefault(change.tenant, {"ok": {}, "failed": {}})["failed"][
                        fields["record_id"]
                    ] = (version, reason)
                continue
            docs.append(VectorDoc(ident, change.tenant, vectors[position], version, text, fields))
            doc_changes[ident] = (change, version)

        for ident, reason in self._index.upsert(docs).items() if docs else ():
            change, _ = doc_changes.pop(ident)
            outcome.fail(change.sequences, f"index write failed: {reason}")
        for change, version in doc_changes.values():
            outcome.indexed += 1
            if change.kind == "record":
                assert change.new is not None
                states.setdefault(change.tenant, {"ok": {}, "failed": {}})["ok"][
                    str(change.new["record_id"])
                ] = version

        if removals:
            removed = {ident: change for change, ident in ((c, r.id) for c, r in removals)}
            for ident, reason in self._index.remove([r for _, r in removals]).items():
                outcome.fail(removed.pop(ident).sequences, f"index removal failed: {reason}")
            outcome.removed += len(removed)
            ttl = sum(1 for change in removed.values() if change.ttl)
            if ttl:
                metrics.add_metric(name="ExpiredDocsRemoved", unit="Count", value=ttl)

        for tenant, state in states.items():
            try:
                self._store.mark_indexed(tenant, state["ok"], state["failed"])
            except Exception as exc:
                logger.warning("index state not written", extra={"error_type": type(exc).__name__})
                for change, _ in doc_changes.values():
                    if change.kind == "record" and change.tenant == tenant:
                        outcome.fail(change.sequences, "index state not written")

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
