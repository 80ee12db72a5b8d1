"""AgentCore memory records over memkit's long-term records (docs/agentcore.md "Record
mapping", "Retrieval and filters"): no second store, the same table, index and search.

Who may do what: a caller acts for its own actor (memkit user). A record belongs to the
actor its namespace names by the memory's namespace templates (memkit.service.
agentcore_mapping.owner_of); a caller without memory:admin reads, writes and deletes only its
own actor's records (another actor's: AccessDeniedException), and its retrievals and
listings see only them. A namespace that names no actor holds shared records: memory:admin
only. Another tenant's memories do not exist for the caller.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memkit.agentcore.mapping import (
    MetadataFilter,
    PostFilter,
    Template,
    actors_at,
    derived_record_id,
    epoch_of,
    iso_of,
    metadata_conditions,
    new_record_id,
    owner_of,
    read_tags,
    record_tags,
    scope_conditions,
    scope_hash,
    stored_metadata,
    wire_metadata,
)
from memkit.agentcore.models import AgentMemory, StrategyKind
from memkit.agentcore.record_models import (
    SYSTEM_KEYS,
    BatchCreateInput,
    BatchDeleteInput,
    BatchUpdateInput,
    FilterExpression,
    ListRecordsInput,
    RecordCreate,
    RecordExpiry,
    RecordUpdate,
    RetrieveInput,
)
from memkit.errors import (
    FieldProblem,
    Forbidden,
    IdempotencyMismatch,
    MemkitError,
    NotFound,
    ValidationFailed,
    VersionConflict,
)
from memkit.identity import Caller
from memkit.models.domain import StoredRecord
from memkit.models.memory import MAX_OFFSET
from memkit.models.session import MAX_FUTURE_SECONDS
from memkit.observability import metrics
from memkit.service.long_term import LongTermService, check_size
from memkit.store.records import RecordTable
from memkit.times import now_iso
from memkit.vectors.filters import Condition

DAY_SECONDS = 86_400
# A retrieval with a number or time filter asks the index for this many times topK
# candidates (at most MAX_CANDIDATES) and keeps the topK best that pass: a record ranked
# below that window is not found even if it passes (docs/agentcore.md).
OVERFETCH = 5
MAX_CANDIDATES = 500
# A listing reads the index in chunks of this many hits, and at most LIST_BUDGET hits a
# call (a sparse filter may skip many): then the page ends early, with a nextToken.
LIST_CHUNK = 100
LIST_BUDGET = 2_000
# How deep a listing reaches (offset + size within OpenSearch's 10,000-hit window).
LIST_DEPTH = MAX_OFFSET
INDEXED_OPERATORS = {
    "STRING": {"EQUALS_TO", "EXISTS", "NOT_EXISTS"},
    "STRINGLIST": {"EQUALS_TO", "CONTAINS", "EXISTS", "NOT_EXISTS"},
    "NUMBER": {
        "EQUALS_TO",
        "EXISTS",
        "NOT_EXISTS",
        "GREATER_THAN",
        "GREATER_THAN_OR_EQUALS",
        "LESS_THAN",
        "LESS_THAN_OR_EQUALS",
    },
}
MEMORY_TYPES = {StrategyKind.EPISODIC: "episodic"}


@dataclass(frozen=True)
class AgentRecord:
    """A memory record as AgentCore shows it (times in epoch seconds)."""

    record_id: str
    text: str
    strategy_id: str | None
    namespace: str | None
    created_at: float
    timestamp: float
    metadata: dict[str, Any]
    expires_at: float | None = None
    score: float | None = None


@dataclass(frozen=True)
class RecordPage:
    records: list[AgentRecord]
    next_token: str | None


@dataclass(frozen=True)
class Outcome:
    """One record of a batch: SUCCEEDED, or FAILED with an HTTP-like code and a reason."""

    record_id: str
    request_identifier: str | None = None
    error_code: int | None = None
    error_message: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.error_code is None


@dataclass(frozen=True)
class BatchResult:
    outcomes: list[Outcome]

    @property
    def successful(self) -> list[Outcome]:
        return [o for o in self.outcomes if o.succeeded]

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.succeeded]


class _Refused(Exception):
    """One record of a batch cannot be done (the batch goes on with the others)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def templates_of(memory: AgentMemory) -> list[Template]:
    return [Template(s.strategy_id, t) for s in memory.strategies for t in s.namespaces]


def agent_record(record: StoredRecord, score: float | None = None) -> AgentRecord:
    tags = read_tags(record.topics)
    stamp = record.event_date or record.created_at
    return AgentRecord(
        record_id=record.id,
        text=record.text,
        strategy_id=tags.strategy_id,
        namespace=tags.namespace,
        created_at=epoch_of(record.created_at),
        timestamp=epoch_of(stamp),
        metadata=wire_metadata(record.metadata),
        expires_at=float(record.expires_at) if record.expires_at is not None else None,
        score=score,
    )


def _token(offset: int, digest: str) -> str:
    raw = json.dumps({"o": offset, "d": digest}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _offset(token: str | None, digest: str) -> int:
    """Where a nextToken of this same request goes on (0 without one)."""
    if token is None:
        return 0
    try:
        raw = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        offset, made_for = raw["o"], raw["d"]
    except (ValueError, KeyError, TypeError, binascii.Error) as exc:
        raise ValidationFailed(
            "nextToken is not one this service gave", [FieldProblem("nextToken", "unreadable")]
        ) from exc
    if not isinstance(offset, int) or offset < 0 or made_for != digest:
        raise ValidationFailed(
            "nextToken belongs to another request",
            [FieldProblem("nextToken", "give it with the parameters that returned it")],
        )
    return offset


def _digest(*parts: Any) -> str:
    text = json.dumps(parts, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class AgentCoreRecords:
    """RetrieveMemoryRecords, ListMemoryRecords, Get/DeleteMemoryRecord and the batch
    operations over memkit's long-term records."""

    def __init__(
        self,
        records: RecordTable,
        long_term: LongTermService,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records = records
        self._long_term = long_term
        self._clock = clock

    # -- reading ------------------------------------------------------------------------------

    def retrieve(self, caller: Caller, memory: AgentMemory, body: RetrieveInput) -> RecordPage:
        """The topK records closest in meaning to the query, in the namespace (or under the
        path), of the strategy, passing the metadata filters; a page of maxResults."""
        criteria = body.search_criteria
        conditions, post = self._scope(
            caller,
            memory,
            body.namespace,
            body.namespace_path,
            criteria.memory_strategy_id,
            criteria.metadata_filters,
            "searchCriteria.metadataFilters",
        )
        top_k = criteria.top_k
        depth = min(MAX_CANDIDATES, top_k * OVERFETCH) if post else top_k
        matches, _ = self._long_term.matching(
            caller.tenant, conditions, query=criteria.search_query, depth=depth
        )
        ranked = [m for m in matches if all(p.passes(m.record) for p in post)][:top_k]
        digest = _digest("retrieve", memory.memory_id, body.model_dump(exclude={"next_token"}))
        offset = _offset(body.next_token, digest)
        page = ranked[offset : offset + body.max_results]
        more = offset + body.max_results < len(ranked)
        metrics.add_metric(name="AgentCoreRetrievals", unit="Count", value=1)
        return RecordPage(
            [agent_record(m.record, round(m.score, 6)) for m in page],
            _token(offset + body.max_results, digest) if more else None,
        )

    def list_records(
        self, caller: Caller, memory: AgentMemory, body: ListRecordsInput
    ) -> RecordPage:
        """The records in the namespace (or under the path), of the strategy, passing the
        filters, newest first, a page of maxResults."""
        conditions, post = self._scope(
            caller,
            memory,
            body.namespace,
            body.namespace_path,
            body.memory_strategy_id,
            body.metadata_filters,
            "metadataFilters",
        )
        digest = _digest("list", memory.memory_id, body.model_dump(exclude={"next_token"}))
        position = _offset(body.next_token, digest)
        page: list[StoredRecord] = []
        read = 0
        while read < LIST_BUDGET:
            chunk = min(LIST_CHUNK, LIST_DEPTH - position)
            if chunk <= 0:  # as deep as the index lists
                return self._page(page, None)
            matches, hits = self._long_term.matching(
                caller.tenant, conditions, depth=chunk, offset=position
            )
            read += hits
            for match in matches:
                if all(p.passes(match.record) for p in post):
                    page.append(match.record)
                    if len(page) == body.max_results:
                        return self._page(page, _token(position + match.position + 1, digest))
            position += hits
            if hits < chunk:
                return self._page(page, None)
        return self._page(page, _token(position, digest))

    @staticmethod
    def _page(records: list[StoredRecord], token: str | None) -> RecordPage:
        metrics.add_metric(name="AgentCoreListings", unit="Count", value=1)
        return RecordPage([agent_record(r) for r in records], token)

    def get(
        self, caller: Caller, memory: AgentMemory, record_id: str, namespace: str | None
    ) -> AgentRecord:
        record = self._reachable(caller, memory, record_id, namespace)
        return agent_record(record)

    def delete(
        self, caller: Caller, memory: AgentMemory, record_id: str, namespace: str | None
    ) -> str:
        record = self._reachable(caller, memory, record_id, namespace)
        self._records.delete_records(caller.tenant, [record.id])
        metrics.add_metric(name="AgentCoreRecordsDeleted", unit="Count", value=1)
        return record.id

    def _reachable(
        self, caller: Caller, memory: AgentMemory, record_id: str, namespace: str | None
    ) -> StoredRecord:
        record = self._records.get_records(caller.tenant, [record_id]).get(record_id)
        if record is None or not _in_memory(record, memory):
            raise NotFound(f"memory record {record_id} does not exist in this memory")
        problem = _access_problem(caller, record, namespace)
        if problem is not None:
            raise Forbidden(problem, [FieldProblem("memoryRecordId", problem)])
        return record

    def _scope(
        self,
        caller: Caller,
        memory: AgentMemory,
        namespace: str | None,
        namespace_path: str | None,
        strategy_id: str | None,
        filters: Sequence[FilterExpression] | None,
        where: str,
    ) -> tuple[list[Condition], list[PostFilter]]:
        user = caller.acting_for(None)  # memory:admin: the whole memory; else its actor's
        named = actors_at(namespace or namespace_path or "", templates_of(memory))
        if user is not None and named and user not in named:
            field = "namespace" if namespace is not None else "namespacePath"
            raise Forbidden(
                f"{field} names another actor's records",
                [FieldProblem(field, "this credential may read only its own actor's records")],
            )
        conditions = scope_conditions(
            memory.memory_id,
            namespace=namespace,
            namespace_path=namespace_path,
            strategy_id=strategy_id,
            user_id=user,
        )
        checked = [_checked_filter(memory, f, f"{where}.{n}") for n, f in enumerate(filters or [])]
        extra, post = metadata_conditions(checked)
        return [*conditions, *extra], post

    # -- writing ------------------------------------------------------------------------------

    def batch_create(
        self, caller: Caller, memory: AgentMemory, body: BatchCreateInput
    ) -> BatchResult:
        """Create each record the caller may write; report each, done or not. With a
        clientToken, the ids are derived from it, so a retry writes (and reports) the same
        records again and a retry with other parameters is refused."""
        now = self._clock()
        expiry = body.record_expiry_specification
        ids = {
            r.request_identifier: (
                derived_record_id(
                    caller.tenant, memory.memory_id, body.client_token, r.request_identifier
                )
                if body.client_token
                else new_record_id()
            )
            for r in body.records
        }
        stored = self._records.get_records(caller.tenant, list(ids.values()))
        outcomes: list[Outcome] = []
        writes: list[StoredRecord] = []
        for item in body.records:
            record_id = ids[item.request_identifier]
            try:
                record = self._created(caller, memory, item, record_id, now, expiry)
                previous = stored.get(record_id)
                if previous is not None:
                    if not _same_content(previous, record):
                        raise IdempotencyMismatch(
                            "this clientToken was used with other records",
                            [FieldProblem("clientToken", "already used for another batch")],
                        )
                else:
                    writes.append(record)
                outcomes.append(Outcome(record_id, item.request_identifier))
            except _Refused as refused:
                outcomes.append(
                    Outcome(record_id, item.request_identifier, refused.code, refused.message)
                )
        if writes:
            self._records.put_records(caller.tenant, writes)
        metrics.add_metric(name="AgentCoreRecordsWritten", unit="Count", value=len(writes))
        return BatchResult(outcomes)

    def _created(
        self,
        caller: Caller,
        memory: AgentMemory,
        item: RecordCreate,
        record_id: str,
        now: float,
        expiry: RecordExpiry | None,
    ) -> StoredRecord:
        namespace = item.namespaces[0] if item.namespaces else None
        owner = self._writable(caller, memory, namespace)
        kind = _strategy_kind(memory, item.memory_strategy_id)
        _not_ahead(item.timestamp.timestamp(), now)
        days = expiry.record_expiry_duration_days if expiry is not None else None
        metadata = stored_metadata({k: v.wire() for k, v in (item.metadata or {}).items()})
        stamp = now_iso(now)
        record = StoredRecord(
            id=record_id,
            namespace=memory.memory_id,
            text=item.content.text,
            memory_type=MEMORY_TYPES.get(kind, "semantic") if kind else "semantic",
            created_at=stamp,
            updated_at=stamp,
            last_accessed=stamp,
            persisted_at=stamp,
            memory_hash=scope_hash(item.content.text, owner, namespace),
            written_us=int(now * 1_000_000),
            topics=record_tags(namespace, item.memory_strategy_id, metadata, days),
            user_id=owner,
            event_date=iso_of(item.timestamp),
            metadata=metadata,
            expires_at=int(now) + days * DAY_SECONDS if days else None,
        )
        _fits(record)
        return record

    def batch_update(
        self, caller: Caller, memory: AgentMemory, body: BatchUpdateInput
    ) -> BatchResult:
        """Change each record as asked (the members given replace the record's), when the
        caller may: its own actor's record, into its own actor's namespace."""
        now = self._clock()
        wanted = [r.memory_record_id for r in body.records]
        stored = self._records.get_records(caller.tenant, wanted)
        outcomes: list[Outcome] = []
        changed = 0
        for item in body.records:
            try:
                record = stored.get(item.memory_record_id)
                if record is None or not _in_memory(record, memory):
                    raise _Refused(404, "the record does not exist in this memory")
                sources = item.source_namespaces
                problem = _access_problem(caller, record, sources[0] if sources else None)
                if problem is not None:
                    raise _Refused(403, problem)
                edited = self._updated(
                    caller, memory, record, item, now, body.record_expiry_specification
                )
                stored[record.id] = self._records.replace_record(caller.tenant, edited, record)
                changed += 1
                outcomes.append(Outcome(record.id))
            except _Refused as refused:
                outcomes.append(Outcome(item.memory_record_id, None, refused.code, refused.message))
            except VersionConflict:
                message = "the record changed meanwhile; send the update again"
                outcomes.append(Outcome(item.memory_record_id, None, 409, message))
            except NotFound:
                message = "the record was deleted meanwhile"
                outcomes.append(Outcome(item.memory_record_id, None, 404, message))
        metrics.add_metric(name="AgentCoreRecordsUpdated", unit="Count", value=changed)
        return BatchResult(outcomes)

    def _updated(
        self,
        caller: Caller,
        memory: AgentMemory,
        record: StoredRecord,
        item: RecordUpdate,
        now: float,
        expiry: RecordExpiry | None,
    ) -> StoredRecord:
        tags = read_tags(record.topics)
        namespace = tags.namespace
        if item.namespaces is not None:
            namespace = item.namespaces[0] if item.namespaces else None
        owner = self._writable(caller, memory, namespace)
        strategy = item.memory_strategy_id or tags.strategy_id
        if item.memory_strategy_id is not None:
            _strategy_kind(memory, item.memory_strategy_id)
        _not_ahead(item.timestamp.timestamp(), now)
        metadata = record.metadata
        if item.metadata is not None:
            metadata = stored_metadata({k: v.wire() for k, v in item.metadata.items()})
        days = tags.expiry_days  # reapplied from now when the request names no expiry
        if expiry is not None:
            days = expiry.record_expiry_duration_days  # None: REMOVE
        text = item.content.text if item.content is not None else record.text
        edited = replace(
            record,
            text=text,
            user_id=owner,
            topics=record_tags(namespace, strategy, metadata, days),
            metadata=metadata,
            event_date=iso_of(item.timestamp),
            memory_hash=scope_hash(text, owner, namespace),
            updated_at=now_iso(now),
            written_us=max(int(now * 1_000_000), record.written_us + 1),
            expires_at=int(now) + days * DAY_SECONDS if days else None,
            indexing="pending",
        )
        _fits(edited)
        return edited

    def batch_delete(
        self, caller: Caller, memory: AgentMemory, body: BatchDeleteInput
    ) -> BatchResult:
        """Delete each record the caller may delete; report each."""
        wanted = [r.memory_record_id for r in body.records]
        stored = self._records.get_records(caller.tenant, wanted)
        outcomes: list[Outcome] = []
        deleting: list[str] = []
        for item in body.records:
            record = stored.get(item.memory_record_id)
            if record is None or not _in_memory(record, memory):
                message = "the record does not exist in this memory"
                outcomes.append(Outcome(item.memory_record_id, None, 404, message))
                continue
            problem = _access_problem(caller, record, item.namespace)
            if problem is not None:
                outcomes.append(Outcome(item.memory_record_id, None, 403, problem))
                continue
            if record.id not in deleting:
                deleting.append(record.id)
            outcomes.append(Outcome(record.id))
        if deleting:
            self._records.delete_records(caller.tenant, deleting)
        metrics.add_metric(name="AgentCoreRecordsDeleted", unit="Count", value=len(deleting))
        return BatchResult(outcomes)

    def _writable(self, caller: Caller, memory: AgentMemory, namespace: str | None) -> str | None:
        """The owner a record of `namespace` gets, if the caller may write it there."""
        owner = owner_of(namespace, templates_of(memory))
        if caller.admin or (owner is not None and owner == caller.user_id):
            return owner
        if owner is None:
            raise _Refused(
                403,
                "the namespace names no actor by this memory's namespace templates: a shared "
                "record, which only memory:admin may write",
            )
        raise _Refused(403, "the namespace is another actor's")


def _in_memory(record: StoredRecord, memory: AgentMemory) -> bool:
    return record.namespace == memory.memory_id and read_tags(record.topics).agentcore


def _access_problem(caller: Caller, record: StoredRecord, namespace: str | None) -> str | None:
    """Why the caller may not touch the record (None: it may). `namespace` is what the
    caller says the record's namespace is (AgentCore checks IAM conditions on it)."""
    if not caller.may_see(record.user_id):
        return "the record belongs to another actor"
    if namespace is not None and namespace != read_tags(record.topics).namespace:
        return "the record is not in the namespace named"
    return None


def _checked_filter(
    memory: AgentMemory, expression: FilterExpression, where: str
) -> MetadataFilter:
    """A metadata filter on a key the memory indexes (or a system time), with an operator
    that key's type takes; else a ValidationException naming the filter."""
    key, operator = expression.left.metadata_key, expression.operator
    value = expression.right.metadata_value.wire() if expression.right is not None else None
    if key in SYSTEM_KEYS:
        return MetadataFilter(key, operator, value)
    types = {k.get("key"): k.get("type") for k in memory.indexed_keys}
    if key not in types:
        raise ValidationFailed(
            f"metadata key {key} is not an indexed key of this memory",
            [FieldProblem(f"{where}.left.metadataKey", "declare it in the memory's indexedKeys")],
        )
    allowed = INDEXED_OPERATORS.get(str(types[key]), set())
    wanted_number = value is not None and "numberValue" in value
    if operator not in allowed or (
        operator == "EQUALS_TO" and wanted_number != (types[key] == "NUMBER")
    ):
        raise ValidationFailed(
            f"{operator} does not apply to {types[key]} key {key}",
            [FieldProblem(f"{where}.operator", f"takes one of {', '.join(sorted(allowed))}")],
        )
    return MetadataFilter(key, operator, value)


def _strategy_kind(memory: AgentMemory, strategy_id: str | None) -> StrategyKind | None:
    if strategy_id is None:
        return None
    for strategy in memory.strategies:
        if strategy.strategy_id == strategy_id:
            return strategy.kind
    raise _Refused(400, f"memoryStrategyId {strategy_id} is not a strategy of this memory")


def _not_ahead(stamp: float, now: float) -> None:
    if stamp > now + MAX_FUTURE_SECONDS:
        raise _Refused(400, f"timestamp is more than {MAX_FUTURE_SECONDS} s in the future")


def _fits(record: StoredRecord) -> None:
    try:
        check_size(record, "content")
    except MemkitError as exc:
        raise _Refused(400, exc.detail) from exc


def _same_content(stored: StoredRecord, record: StoredRecord) -> bool:
    """Whether a record written by an earlier try of a batch is the one this try asks for."""
    return (stored.text, stored.topics, stored.metadata, stored.event_date, stored.user_id) == (
        record.text,
        record.topics,
        record.metadata,
        record.event_date,
        record.user_id,
    )
