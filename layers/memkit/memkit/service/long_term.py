"""Long-term memory: records created, read, edited and deleted in the table, and searched
through the vector index (API.md "Long-term memory").

The table is the source of truth; the index is how records are found. A search asks the
index for ids, then reads the records (and message hits) from the table: a hit whose item is
gone, or no longer meets the filters (the index lags a write by a moment), is dropped, so a
filter never widens. Writes reach the index through the stream (memkit.jobs.indexing); each record
shows `indexing` (pending, then indexed) so a client can tell when it became searchable.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, NamedTuple

from memkit.embeddings.protocol import Embedder, EmbeddingFailed
from memkit.errors import (
    BadRequest,
    FieldProblem,
    Forbidden,
    NotFound,
    StoreUnavailable,
    Throttled,
    TooLarge,
    ValidationFailed,
)
from memkit.identity import Caller
from memkit.models.budget import LIST_BYTE_BUDGET, envelope_bytes
from memkit.models.domain import (
    DEFAULT_NAMESPACE,
    MEMKIT,
    MessageRef,
    Owner,
    RecordHistory,
    RecordRef,
    RecordVersion,
    SessionMeta,
    StoredMessage,
    StoredRecord,
    Writer,
)
from memkit.models.memory import (
    Ack,
    CreatedAck,
    CreateMemories,
    MemoryEdit,
    MemoryHistoryView,
    MemoryHit,
    MemoryRecordIn,
    MemoryRecordView,
    MemoryRestoration,
    MemoryResults,
    MemoryRetirement,
    MemoryVersionView,
    RecordFields,
    SearchMode,
    SearchRequest,
    SurroundingMessage,
)
from memkit.models.session import MemoryType, as_utc, iso
from memkit.observability import logger, metrics
from memkit.service.truth import is_current, retired, truth_conditions
from memkit.service.versions import Versions, check_target
from memkit.store.records import RecordTable
from memkit.store.sessions import SessionTable
from memkit.text import words
from memkit.times import now_iso
from memkit.vectors.conversation import drop_function_words, meaning_of
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.hybrid import hybrid_search
from memkit.vectors.protocol import (
    FIELDS,
    SEARCH_FILTERS,
    FieldKind,
    Hit,
    VectorIndex,
    epoch_seconds,
    record_fields,
    source_of,
)

# Candidates a recency re-rank looks at (it can lift an older page's hit onto this page),
# and how deep it may page (each candidate is read from the table).
RECENCY_CANDIDATES = 100
MAX_RECENCY_WINDOW = 1_000
# Terms of a keyword query. It is two match clauses (a doc's text and its context), and
# OpenSearch counts every term of the whole query against its 1,024-clause limit.
MAX_QUERY_TERMS = 250
# A filter's list of values (OpenSearch's terms and bool clauses have limits).
MAX_FILTER_VALUES = 100
# AMS's recency defaults (RecencyConfig).
RECENCY_DEFAULTS = {
    "semantic": 0.8,
    "recency": 0.2,
    "freshness": 0.6,
    "novelty": 0.4,
    "half_life_access_days": 7.0,
    "half_life_created_days": 30.0,
}
# A DynamoDB item holds 400 KB: a record's fields, with room for its keys and attributes.
MAX_RECORD_BYTES = 350_000
# Query embeddings a service keeps (a prompt asks for the same one two or three times).
QUERY_CACHE = 64
# A search hit's `last_accessed` is written at most this often (seconds): enough for
# inactivity-based forgetting measured in days, without a write per search.
ACCESS_RESOLUTION_SECONDS = 3600
# What an edit that clears an owner field means: no user; the default namespace.
_UNSET_OWNER: dict[str, str | None] = {"user_id": None, "namespace": DEFAULT_NAMESPACE}


def memory_hash(text: str, user_id: str | None) -> str:
    """The content hash deduplication compares: the text (trimmed) and whose it is."""
    canonical = json.dumps([user_id or "", text.strip()], ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


def check_size(record: StoredRecord, where: str) -> None:
    """A record must fit one DynamoDB item (400 KB) with room for its keys: 413 before
    anything is written, never a half-written batch."""
    # The tenant is in the room left for the keys.
    fields = {name: value for name, value in vars(record).items() if name != "tenant"}
    size = len(json.dumps(fields, ensure_ascii=False, default=str).encode())
    if size > MAX_RECORD_BYTES:
        raise TooLarge(
            f"a long-term memory takes {size} bytes; at most {MAX_RECORD_BYTES} fit",
            [FieldProblem(where, "too large for one stored memory (text and metadata)")],
        )


def record_view(record: StoredRecord) -> MemoryRecordView:
    """A stored record as every route shows it: the view's fields, read by name."""
    shown: dict[str, Any] = {name: getattr(record, name) for name in MemoryRecordView.model_fields}
    return MemoryRecordView(
        **{
            **shown,
            "memory_type": MemoryType(record.memory_type),
            "topics": list(record.topics),
            "entities": list(record.entities),
            "extracted_from": list(record.extracted_from),
            "supersedes": list(record.supersedes),
            "discrete_memory_extracted": "t" if record.discrete_memory_extracted == "t" else "f",
        }
    )


# How a client's value of a record field is stored (the others are stored as given).
_STORED_AS: dict[str, Callable[[Any], Any]] = {
    "topics": lambda value: tuple(value or ()),
    "entities": lambda value: tuple(value or ()),
    "extracted_from": lambda value: tuple(value or ()),
    "memory_type": lambda value: (value or MemoryType.SEMANTIC).value,
    "supersedes": lambda value: tuple(value or ()),
    "event_date": lambda value: iso(value) if value is not None else None,
    "valid_from": lambda value: iso(value) if value is not None else None,
    "valid_until": lambda value: iso(value) if value is not None else None,
    "namespace": lambda value: value or DEFAULT_NAMESPACE,
    "pinned": bool,
    "metadata": lambda value: dict(value or {}),
}


def stored_fields(given: dict[str, Any]) -> dict[str, Any]:
    """A client's record fields (RecordFields' and the text) as a StoredRecord holds them:
    what a create writes and what an edit changes."""
    return {name: _STORED_AS.get(name, _as_given)(value) for name, value in given.items()}


def _as_given(value: Any) -> Any:
    return value


def new_record(
    tenant: str,
    memory: MemoryRecordIn,
    now: float,
    stored: StoredRecord | None = None,
    writer: Writer = MEMKIT,
) -> StoredRecord:
    """The record a create writes: the client's fields, the server's times. A record that
    replaces a stored one (same id) keeps its creation time unless the client gives one,
    and always its `recorded_at` (it is the same record's history). Valid from `valid_from`,
    else its event_date, else its creation."""
    stamp = now_iso(now)
    if memory.created_at is not None:
        created_at = iso(memory.created_at)
    else:
        created_at = stored.created_at if stored is not None else stamp
    given = {name: getattr(memory, name) for name in (*RecordFields.model_fields, "text")}
    fields = stored_fields(given)
    if fields["valid_from"] is None:
        fields["valid_from"] = fields["event_date"] or created_at
    if stored is not None:
        recorded_at = stored.recorded_at
    else:
        recorded_at = iso(memory.recorded_at) if memory.recorded_at is not None else stamp
    retired_at = iso(memory.retired_at) if memory.retired_at is not None else None
    return StoredRecord(
        tenant=tenant,
        id=memory.id,
        **fields,
        recorded_at=recorded_at,
        retired_at=retired_at,
        change="create" if stored is None else "edit",
        changed_by=writer.by,
        changed_via=writer.via,
        created_at=created_at,
        updated_at=stamp,
        last_accessed=iso(memory.last_accessed) if memory.last_accessed else stamp,
        persisted_at=stamp,
        memory_hash=memory_hash(memory.text, memory.user_id),
        discrete_memory_extracted=memory.discrete_memory_extracted,
        # Versions the vector: never behind the record it replaces, whatever the clocks.
        written_us=max(int(now * 1_000_000), stored.written_us + 1 if stored else 0),
        version=stored.version if stored is not None else 0,
    )


def _check_validity(record: StoredRecord) -> None:
    """A record's validity must end after it begins (an edit may move either end)."""
    start, end = epoch_seconds(record.valid_from), epoch_seconds(record.valid_until)
    if start is not None and end is not None and end <= start:
        raise ValidationFailed(
            "a memory's validity must end after it begins",
            [FieldProblem("valid_until", "must be after valid_from")],
        )


# What a version's `changed` compares with the version before it.
_COMPARED = (
    "text",
    "memory_type",
    "topics",
    "entities",
    "session_id",
    "event_date",
    "pinned",
    "metadata",
    "valid_from",
    "valid_until",
    "retired_at",
    "key",
    "supersedes",
    "superseded_by",
)


def version_view(version: RecordVersion, earlier: StoredRecord | None) -> MemoryVersionView:
    """One version as the history route shows it."""
    record = version.record
    if record is None:
        changed: list[str] = []
    elif earlier is None:
        changed = [name for name in _COMPARED if getattr(record, name) not in (None, (), {})]
    else:
        changed = [n for n in _COMPARED if getattr(record, n) != getattr(earlier, n)]
    return MemoryVersionView(
        version=version.number,
        change=version.change,
        at=version.at,
        by=version.by,
        via=version.via,
        changed=changed,
        memory=record_view(record) if record is not None else None,
    )


# -- filters ---------------------------------------------------------------------------------


def _number(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise ValueError
    return float(raw)


def _instant(raw: Any) -> float:
    if isinstance(raw, str):
        return as_utc(datetime.fromisoformat(raw.replace("Z", "+00:00"))).timestamp()
    return _number(raw)


def _range_check(
    read: Callable[[Any], float], what: str, takes: str
) -> Callable[[str, str, Any], Any]:
    """The check of a range filter's operand: one value `read` reads, or [from, to]."""

    def checked(field: str, op: str, value: Any) -> Any:
        try:
            if op == "between":
                if not isinstance(value, list) or len(value) != 2:
                    raise ValueError
                return [read(value[0]), read(value[1])]
            return read(value)
        except (ValueError, OverflowError) as exc:
            reason = "takes [from, to]" if op == "between" else takes
            raise ValidationFailed(
                f"a {what} filter is not valid", [FieldProblem(f"{field}.{op}", reason)]
            ) from exc

    return checked


_date_value = _range_check(_instant, "date", "takes an ISO 8601 time or epoch seconds")
_number_value = _range_check(_number, "number", "takes a number")


def _text_value(field: str, op: str, value: Any) -> Any:
    listed = op in ("any", "all", "none", "in_", "not_in")
    if listed:
        ok = (
            isinstance(value, list)
            and all(isinstance(v, str) for v in value)
            and len(value) <= MAX_FILTER_VALUES
        )
    else:
        ok = isinstance(value, str)
    if not ok:
        reason = (
            f"takes a list of at most {MAX_FILTER_VALUES} strings" if listed else "takes a string"
        )
        raise ValidationFailed("a filter is not valid", [FieldProblem(f"{field}.{op}", reason)])
    return value


# How a filter's operand is checked and read, by the kind of its field.
_FILTER_VALUES: dict[FieldKind, Callable[[str, str, Any], Any]] = {
    "scope": _text_value,
    "keyword": _text_value,
    "tag": _text_value,
    "date": _date_value,
    "number": _number_value,
}


def conditions_of(request: SearchRequest, now: float | None = None) -> list[Condition]:
    """The request's filters as index conditions (the tenant is added by the caller), and
    with `now` those of its time (memkit.service.truth: current truth by default)."""
    conditions: list[Condition] = []
    if now is not None:
        conditions += truth_conditions(
            now,
            as_of=request.as_of.timestamp() if request.as_of is not None else None,
            known_at=request.known_at.timestamp() if request.known_at is not None else None,
            current_only=request.current_only,
        )
    for name in SEARCH_FILTERS:
        value, kind = getattr(request, name), FIELDS[name].kind
        if value is None:
            continue
        if kind == "bool":
            conditions.append(Condition(name, "eq", value))
            continue
        operators = {"eq": value} if isinstance(value, str) else value
        checked = _FILTER_VALUES[kind]
        for op, operand in operators.items():
            conditions.append(Condition(name, op, checked(name, op, operand)))
    return conditions


# -- search ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Found:
    hit: Hit
    score: float
    record: StoredRecord | None = None
    message: StoredMessage | None = None
    source: MessageRef | None = None


class Match(NamedTuple):
    """A record a search found, its score, and its place among the index's hits."""

    record: StoredRecord
    score: float
    position: int


def _within(distance: float, threshold: float | None) -> bool:
    return threshold is None or distance <= threshold


def _keyword_text(text: str) -> str:
    """The query for BM25: its first words up to MAX_QUERY_TERMS terms (counted as the
    tokenizer splits them, at least as finely as OpenSearch's)."""
    kept: list[str] = []
    count = 0
    for word in text.split():
        count += len(words(word))
        if count > MAX_QUERY_TERMS:
            return " ".join(kept)
        kept.append(word)
    return text


def _response_bytes(view: MemoryHit) -> int:
    """What a hit adds to the response as Lambda counts it (its texts dominate)."""
    texts = [view.text, *(m.content for m in view.surrounding_messages or ())]
    return envelope_bytes([texts, view.metadata]) + 1_000


def _keyword_relevance(score: float) -> float:
    """BM25 is unbounded: squash it into [0, 1) so `dist` stays a distance."""
    return score / (score + 1.0) if score > 0 else 0.0


def _half_life(age_seconds: float, half_life_days: float) -> float:
    return float(0.5 ** (max(0.0, age_seconds) / (half_life_days * 86_400)))


class LongTermService:
    """Long-term records over the records table (and the sessions a record names),
    searched through a VectorIndex."""

    def __init__(
        self,
        records: RecordTable,
        sessions: SessionTable,
        index: Callable[[], VectorIndex],
        embedder: Callable[[], Embedder],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._records = records
        self._sessions = sessions
        self._versions = Versions(records, clock)
        # Built on first use: a GET of one record needs neither.
        self._index = index
        self._embedder = embedder
        self._clock = clock
        # Recent query vectors: a prompt's searches (recall, long-term) run concurrently
        # with one query, and each would otherwise call the embedder (Bedrock) again.
        self._queries: OrderedDict[str, Future[list[float]]] = OrderedDict()
        self._queries_lock = threading.Lock()

    def query_vector(self, text: str) -> list[float]:
        """The embedding of a search's text (what `_ranked` keeps of it), computed once for
        concurrent and repeated searches."""
        with self._queries_lock:
            pending = self._queries.get(text)
            owner = pending is None
            if pending is None:
                pending = Future()
                self._queries[text] = pending
                while len(self._queries) > QUERY_CACHE:
                    self._queries.popitem(last=False)
            else:
                self._queries.move_to_end(text)
        if owner:
            try:
                pending.set_result(self._embedded(text))
            except BaseException as exc:
                with self._queries_lock:
                    self._queries.pop(text, None)  # a failure is not remembered
                pending.set_exception(exc)
        return pending.result()

    def _embedded(self, text: str) -> list[float]:
        try:
            return self._embedder().embed([text], "query")[0]
        except EmbeddingFailed as exc:  # throttled or down: a 429 or 503, never a 500
            raise exc.domain_error() from exc

    # -- records -----------------------------------------------------------------------------

    def create(
        self,
        tenant: str,
        body: CreateMemories,
        *,
        confined: bool = False,
        writer: Writer = MEMKIT,
    ) -> CreatedAck:
        """Write `body`'s records. `confined`: the writer is a user and no admin (Owner's
        rule), so another user's record is as absent to it as to a read (a 404), and a
        session of no user is not its to name. A record that supersedes others or fills a
        slot is written with them in a transaction of its own (memkit.service.versions),
        after the others; what it names is checked before anything is written."""
        now = self._clock()
        stored = self._records.get_records(tenant, [m.id for m in body.memories])
        seen: dict[str, int] = {}
        for index, memory in enumerate(body.memories):
            if memory.id in seen:
                raise ValidationFailed(
                    "memory ids repeat", [FieldProblem(f"memories.{index}.id", "repeated")]
                )
            seen[memory.id] = index
            existing = stored.get(memory.id)
            owner = (memory.user_id, memory.namespace or DEFAULT_NAMESPACE)
            if existing is None or (existing.user_id, existing.namespace) == owner:
                continue
            if confined and existing.user_id != memory.user_id:
                # Ids are unique per tenant, so the id cannot be used: the answer is a read's.
                raise NotFound(f"no long-term memory {memory.id!r}")
            whose = (
                "a memory of another namespace"
                if existing.user_id == memory.user_id
                else "another user's memory"
            )
            raise Forbidden(
                "a memory never changes owner",
                [FieldProblem(f"memories.{index}.id", f"names {whose}")],
            )
        self._check_sessions(
            tenant,
            [
                (f"memories.{n}.session_id", m.namespace, m.session_id, m.user_id)
                for n, m in enumerate(body.memories)
            ],
            confined,
        )
        records = [new_record(tenant, m, now, stored.get(m.id), writer) for m in body.memories]
        for index, record in enumerate(records):
            check_size(record, f"memories.{index}")
        self._check_supersedes(tenant, records, stored)
        skipped: list[str] = []
        if body.deduplicate:
            records, skipped = self._without_duplicates(tenant, records, stored)
        plain = [r for r in records if not self._versions.needs_transaction(r, stored.get(r.id))]
        if plain:
            replaced = {r.id: stored[r.id] for r in plain if r.id in stored}
            self._records.put_records(tenant, plain, replaced)
        place = {memory.id: n for n, memory in enumerate(body.memories)}
        for record in records:
            if record not in plain:
                where = f"memories.{place[record.id]}.supersedes"
                self._versions.write(tenant, record, stored.get(record.id), writer, where=where)
        metrics.add_metric(name="LongTermRecordsWritten", unit="Count", value=len(records))
        return CreatedAck(status="ok", created=[r.id for r in records], duplicates=skipped)

    def _check_supersedes(
        self, tenant: str, records: Sequence[StoredRecord], stored: dict[str, StoredRecord]
    ) -> None:
        """Every record a create names in `supersedes` is one of the writer's (same user and
        namespace), stored or created earlier in the same request: else nothing is written
        (a 404 as a read's, or a 422)."""
        named = {i for r in records for i in r.supersedes if i not in stored}
        found = {**stored, **(self._records.get_records(tenant, sorted(named)) if named else {})}
        earlier: dict[str, StoredRecord] = {}
        for index, record in enumerate(records):
            for position, record_id in enumerate(record.supersedes):
                target = earlier.get(record_id) or found.get(record_id)
                check_target(record, record_id, target, f"memories.{index}.supersedes.{position}")
            earlier[record.id] = record

    def _check_sessions(
        self,
        tenant: str,
        named: Sequence[tuple[str, str | None, str | None, str | None]],
        confined: bool,
    ) -> None:
        """A record names only a session of its own user, or one that does not exist (yet):
        another user's session is refused as the session routes refuse it (a 403), so no
        search by that session finds a record its owner never wrote. `named`: (field,
        namespace, session id, record's user) of each record."""
        sessions: dict[tuple[str, str], SessionMeta | None] = {}
        for field, namespace, session_id, user_id in named:
            if session_id is None:
                continue
            place = (namespace or DEFAULT_NAMESPACE, session_id)
            if place not in sessions:
                sessions[place] = self._sessions.session_meta(Owner(tenant, place[0]), session_id)
            meta = sessions[place]
            if meta is not None and Owner(tenant, place[0], user_id, confined).refuses(
                meta.user_id
            ):
                raise Forbidden(
                    "this session belongs to another user",
                    [FieldProblem(field, "names another user's session")],
                )

    def _without_duplicates(
        self, tenant: str, records: list[StoredRecord], stored: dict[str, StoredRecord]
    ) -> tuple[list[StoredRecord], list[str]]:
        """Records whose text the user already has (another id, same hash) are skipped;
        a record replacing its own id is never a duplicate of itself."""
        fresh = [r for r in records if r.id not in stored]
        others = self._records.duplicates(
            tenant, [(r.id, r.namespace, r.memory_hash) for r in fresh]
        )
        # A text held only by records no longer current (superseded, retired, validity
        # over) is new again: the user moved back to Paris.
        held = self._records.records_at({pk for pks in others.values() for pk in pks})
        now = self._clock()
        others = {
            rid: {pk for pk in pks if pk in held and is_current(held[pk], now)}
            for rid, pks in others.items()
        }
        kept: list[StoredRecord] = []
        skipped: list[str] = []
        # Texts the request writes under stored ids are taken first, whatever the order.
        hashes = {(r.namespace, r.memory_hash) for r in records if r.id in stored}
        for record in records:
            scope = (record.namespace, record.memory_hash)
            if others.get(record.id) or (record.id not in stored and scope in hashes):
                skipped.append(record.id)
                continue
            hashes.add(scope)
            kept.append(record)
        return kept, skipped

    def _reachable(self, tenant: str, record_id: str, reader: Caller | None) -> StoredRecord:
        """The record, when `reader` (None: memkit itself) may see it; another user's record
        is as absent as one that never was (a 404 that says nothing of its existence)."""
        record = self._records.get_record(tenant, record_id)
        if reader is not None and not reader.may_see(record.user_id):
            raise NotFound(f"no long-term memory {record_id!r}")
        return record

    def get(self, tenant: str, record_id: str, reader: Caller | None = None) -> MemoryRecordView:
        return record_view(self._reachable(tenant, record_id, reader))

    def edit(
        self,
        tenant: str,
        record_id: str,
        edit: MemoryEdit,
        reader: Caller | None = None,
        writer: Writer = MEMKIT,
    ) -> MemoryRecordView:
        changes = {name: getattr(edit, name) for name in edit.model_fields_set}
        if not changes:
            raise BadRequest("nothing to change: name at least one field")
        record = self._reachable(tenant, record_id, reader)
        moved = [
            name
            for name, current in (("user_id", record.user_id), ("namespace", record.namespace))
            if name in changes and (changes[name] or _UNSET_OWNER[name]) != current
        ]
        if moved:
            raise Forbidden(
                "a memory never changes owner: create a new one instead",
                [FieldProblem(name, "differs from the memory's") for name in moved],
            )
        if changes.get("session_id") not in (None, record.session_id):
            confined = reader is not None and not reader.admin
            named = [("session_id", record.namespace, changes["session_id"], record.user_id)]
            self._check_sessions(tenant, named, confined)
        now = self._clock()
        edited = replace(record, **stored_fields(changes))
        edited = replace(
            edited,
            memory_hash=memory_hash(edited.text, edited.user_id),
            updated_at=now_iso(now),
            written_us=max(int(now * 1_000_000), record.written_us + 1),
            indexing="pending",
            change="edit",
            changed_by=writer.by,
            changed_via=writer.via,
        )
        _check_validity(edited)
        check_size(edited, "body")
        if self._versions.needs_transaction(edited, record):
            saved = self._versions.write(tenant, edited, record, writer)
        else:
            saved = self._records.replace_record(tenant, edited, record)
        return record_view(replace(saved, indexing="pending"))

    def delete(
        self,
        tenant: str,
        record_ids: Sequence[str],
        reader: Caller | None = None,
        writer: Writer = MEMKIT,
        *,
        erase: bool = False,
    ) -> Ack:
        """Delete the records; each keeps its history (a restore can bring it back) unless
        `erase`: then its history goes too, and what an earlier delete of it kept."""
        ids = list(dict.fromkeys(record_ids))
        found = self._records.get_records(tenant, ids)
        if reader is not None and not reader.admin:
            # Only the reader's own: another user's ids are as absent as unknown ones.
            owners = {i: r.user_id for i, r in found.items()}
            if erase:  # a deleted record's history is found through what its delete kept
                for record_id in (i for i in ids if i not in found):
                    history = self._records.history(tenant, record_id)
                    if history is not None:
                        owners[record_id] = history.user_id
            ids = [i for i in ids if i in owners and reader.may_see(owners[i])]
        if not ids:
            return Ack(status="ok, deleted 0 memories")
        if erase:
            self._records.erase(tenant, ids)
            return Ack(status=f"ok, deleted {sum(i in found for i in ids)} memories")
        deleted = self._records.delete_records(tenant, ids, writer)
        return Ack(status=f"ok, deleted {deleted} memories")

    # -- current truth -----------------------------------------------------------------------

    def retire(
        self,
        tenant: str,
        record_id: str,
        retirement: MemoryRetirement,
        reader: Caller | None = None,
        writer: Writer = MEMKIT,
    ) -> MemoryRecordView:
        """The record no longer current: retired now, its validity closed (at the time given,
        else now). A record retired already is answered as it is."""
        record = self._reachable(tenant, record_id, reader)
        if record.retired_at is not None:
            return record_view(record)
        until = iso(retirement.valid_until) if retirement.valid_until is not None else None
        saved = self._records.replace_record(
            tenant, retired(record, self._clock(), writer, until), record
        )
        return record_view(replace(saved, indexing="pending"))

    def _history(self, tenant: str, record_id: str, reader: Caller | None) -> RecordHistory:
        history = self._records.history(tenant, record_id)
        if history is None or (reader is not None and not reader.may_see(history.user_id)):
            raise NotFound(f"no long-term memory {record_id!r}")
        return history

    def history(
        self,
        tenant: str,
        record_id: str,
        reader: Caller | None = None,
        *,
        limit: int = 50,
        before: int | None = None,
    ) -> MemoryHistoryView:
        """The record's versions, newest first: each with what made it, when, who and
        through which door, the fields it changed, and the record as it was then (none for
        a delete). Pages: `before` a version number."""
        history = self._history(tenant, record_id, reader)
        versions = list(history.versions)
        views: list[MemoryVersionView] = []
        for position in range(len(versions) - 1, -1, -1):
            version = versions[position]
            if before is not None and version.number >= before:
                continue
            if len(views) == limit:
                break
            earlier = versions[position - 1].record if position else None
            views.append(version_view(version, earlier))
        older = [v for v in versions if v.number < views[-1].version] if views else []
        return MemoryHistoryView(
            id=record_id,
            versions=views,
            next_before=views[-1].version if older else None,
        )

    def restore(
        self,
        tenant: str,
        record_id: str,
        restoration: MemoryRestoration,
        reader: Caller | None = None,
        writer: Writer = MEMKIT,
    ) -> MemoryRecordView:
        """Version `restoration.version` made current again (a new version)."""
        history = self._history(tenant, record_id, reader)
        saved = self._versions.restore(tenant, history, restoration.version, writer)
        return record_view(replace(saved, indexing="pending"))

    # -- search ------------------------------------------------------------------------------

    def search(self, tenant: str, request: SearchRequest, *, access: bool = True) -> MemoryResults:
        """Hits in the index's order from `offset` (positions count the index's hits, so
        pages never overlap or skip), each read back from the table and re-checked.

        With `access` (a client's search, a prompt's recall), the records shown count as
        accessed: their `last_accessed` moves to now when it is over an hour old (what
        inactivity-based forgetting reads). Memkit's own searches (deduplication,
        compaction) pass access=False."""
        conditions = conditions_of(request, self._clock())
        recency = self._recency(request)
        if recency and request.offset + request.limit > MAX_RECENCY_WINDOW:
            raise ValidationFailed(
                "a recency re-rank looks at the first 1,000 hits",
                [FieldProblem("offset", f"offset + limit must be at most {MAX_RECENCY_WINDOW}")],
            )
        text = request.text.strip()
        window = request.offset + request.limit + 1
        depth = max(window, RECENCY_CANDIDATES) if recency else window
        hits, scores, score_type = self._ranked(tenant, request, text, depth, conditions)
        found = [_Found(hit, score) for hit, score in zip(hits, scores, strict=True)]
        more = len(found) > request.offset + request.limit
        if recency:
            found = self._by_recency(self._load(tenant, found, conditions), recency)
            score_type = "recency" if text else score_type
            more = len(found) > request.offset + request.limit
            page = found[request.offset : request.offset + request.limit]
        else:
            page = self._load(
                tenant, found[request.offset : request.offset + request.limit], conditions
            )
        memories, shown = self._views(page, score_type, request.message_range)
        if access:
            memories = self._mark_accessed(tenant, page[:shown], memories)
        if shown < len(page):  # the response would be too large: the rest on the next page
            more = True
        next_offset = request.offset + (shown if shown < len(page) else request.limit)
        metrics.add_metric(name="LongTermSearches", unit="Count", value=1)
        return MemoryResults(
            memories=memories,
            total=len(found),
            next_offset=next_offset if more else None,
        )

    def matching(
        self,
        tenant: str,
        conditions: Sequence[Condition],
        *,
        query: str = "",
        depth: int,
        offset: int = 0,
        current_only: bool = True,
    ) -> tuple[list[Match], int]:
        """Records meeting every condition, read back from the table and re-checked: with
        a `query`, the `depth` nearest by meaning (cosine similarity as the score, counted
        as accessed); without one, `depth` of them newest first from `offset` (score 0).
        Also how many index hits were read: each match's `position` counts among them (a
        hit whose record is gone, or no longer meets the conditions, is left out). Only
        current records unless `current_only` is False."""
        index = self._index()
        text = query.strip()
        now = self._clock()
        conditions = [
            *conditions,
            *truth_conditions(now, as_of=None, known_at=None, current_only=current_only),
        ]
        if text:
            vector = self.query_vector(drop_function_words(text))
            hits = index.search(tenant, vector, depth, conditions)
        else:
            hits = index.browse(tenant, depth, offset, conditions)
        found = [_Found(h, max(0.0, min(1.0, h.score)) if text else 0.0) for h in hits]
        loaded = {
            item.hit.id: item.record
            for item in self._load(tenant, found, conditions)
            if item.record is not None
        }
        stamp, stale = self._touch(tenant, list(loaded.values())) if text else ("", set())
        matches = []
        for position, item in enumerate(found):
            record = loaded.pop(item.hit.id, None)
            if record is not None:
                if record.id in stale:
                    record = replace(record, last_accessed=stamp)
                matches.append(Match(record, item.score, position))
        return matches, len(hits)

    def _ranked(
        self,
        tenant: str,
        request: SearchRequest,
        text: str,
        depth: int,
        conditions: Sequence[Condition],
    ) -> tuple[list[Hit], list[float], Any]:
        """The index's hits best first, their relevance in [0, 1], and its name. The
        distance threshold applies to the vector distance (AMS's meaning) in semantic and
        hybrid modes, and to the keyword relevance in keyword mode; a listing has none."""
        index = self._index()
        threshold = request.distance_threshold
        if not text:
            hits = index.browse(tenant, depth, 0, conditions)
            return hits, [0.0 for _ in hits], "none"
        if request.search_mode is SearchMode.KEYWORD:
            hits = index.keyword(tenant, _keyword_text(text), depth, conditions)
            scores = [_keyword_relevance(h.score) for h in hits]
            kept = [
                (h, s) for h, s in zip(hits, scores, strict=True) if _within(1.0 - s, threshold)
            ]
            return [h for h, _ in kept], [s for _, s in kept], "keyword"
        if request.search_mode is SearchMode.SEMANTIC:
            vector = self.query_vector(drop_function_words(text))
            hits = [
                h
                for h in index.search(tenant, vector, depth, conditions)
                if _within(h.distance, threshold)
            ]
            return hits, [max(0.0, min(1.0, h.score)) for h in hits], "semantic"

        def vector_of(speakers: frozenset[str]) -> list[float]:
            return self.query_vector(meaning_of(text, speakers))

        hits = hybrid_search(
            index,
            tenant,
            _keyword_text(text),
            vector_of,
            depth,
            conditions,
            request.hybrid_alpha,
            max_distance=threshold,
        )
        return hits, [max(0.0, min(1.0, h.score)) for h in hits], "hybrid"

    def _views(
        self, page: list[_Found], score_type: Any, message_range: int
    ) -> tuple[list[MemoryHit], int]:
        """The page's hits as shown, stopping before the response outgrows Lambda's 6 MB;
        how many of the page that is (at least one)."""
        views: list[MemoryHit] = []
        size = 0
        for item in page:
            view = self._hit_view(item, score_type, message_range)
            size += _response_bytes(view)
            if views and size > LIST_BYTE_BUDGET:
                break
            views.append(view)
        return views, len(views)

    def _load(
        self, tenant: str, found: list[_Found], conditions: Sequence[Condition]
    ) -> list[_Found]:
        """The hits whose items still exist and still meet the filters, as stored now."""
        sources = [source_of(tenant, f.hit.fields) for f in found]
        record_ids = [s.record_id for s in sources if isinstance(s, RecordRef)]
        records = self._records.get_records(tenant, record_ids) if record_ids else {}
        message_refs = [s for s in sources if isinstance(s, MessageRef)]
        messages = self._records.messages_by_ref(message_refs) if message_refs else {}
        loaded: list[_Found] = []
        shown: set[object] = set()
        for item, source in zip(found, sources, strict=True):
            # One item, one hit: an index written before docs were named by memkit's ids
            # holds a second doc of an item written again since (until `memkit reindex`).
            if source in shown:
                continue
            shown.add(source)
            if isinstance(source, RecordRef):
                record = records.get(source.record_id)
                if record is not None and meets_all(record_fields(tenant, record), conditions):
                    loaded.append(replace(item, record=record))
            elif source is not None:
                message = messages.get(source)
                if message is not None and meets_all(item.hit.fields, conditions):
                    loaded.append(replace(item, message=message, source=source))
        return loaded

    def _mark_accessed(
        self, tenant: str, shown: list[_Found], memories: list[MemoryHit]
    ) -> list[MemoryHit]:
        """Mark the records shown as accessed now (see `search`); the views say so too."""
        stamp, stale = self._touch(tenant, [item.record for item in shown if item.record])
        if not stale:
            return memories
        return [
            m.model_copy(update={"last_accessed": stamp})
            if m.memory_type != "message" and m.id in stale
            else m
            for m in memories
        ]

    def _touch(self, tenant: str, records: Sequence[StoredRecord]) -> tuple[str, set[str]]:
        """Set `last_accessed` to now on the records last accessed over an hour ago: the
        time written, and the ids it was written on (none when the table refused)."""
        now = self._clock()
        stamp, before = now_iso(now), now_iso(now - ACCESS_RESOLUTION_SECONDS)
        stale = {r.id for r in records if r.last_accessed is None or r.last_accessed < before}
        if not stale:
            return stamp, stale
        try:
            self._records.touch_records(tenant, sorted(stale), stamp, before)
        except (StoreUnavailable, Throttled):
            logger.warning("record access not recorded", extra={"records": len(stale)})
            return stamp, set()
        return stamp, stale

    def _recency(self, request: SearchRequest) -> dict[str, float] | None:
        if not request.recency_boost:
            return None
        given = {
            "semantic": request.recency_semantic_weight,
            "recency": request.recency_recency_weight,
            "freshness": request.recency_freshness_weight,
            "novelty": request.recency_novelty_weight,
            "half_life_access_days": request.recency_half_life_last_access_days,
            "half_life_created_days": request.recency_half_life_created_days,
        }
        return {k: v if v is not None else RECENCY_DEFAULTS[k] for k, v in given.items()}

    def _by_recency(self, found: list[_Found], weights: dict[str, float]) -> list[_Found]:
        """AMS's recency re-rank: relevance blended with freshness (created) and novelty
        (last accessed), each halving over its half-life."""
        now = self._clock()

        def boosted(item: _Found) -> float:
            created = epoch_seconds(self._created(item)) or now
            accessed = epoch_seconds(self._accessed(item)) or created
            freshness = _half_life(now - created, weights["half_life_created_days"])
            novelty = _half_life(now - accessed, weights["half_life_access_days"])
            recency = weights["freshness"] * freshness + weights["novelty"] * novelty
            return weights["semantic"] * item.score + weights["recency"] * recency

        rescored = [replace(item, score=boosted(item)) for item in found]
        return sorted(rescored, key=lambda item: -item.score)

    @staticmethod
    def _created(item: _Found) -> str:
        if item.record is not None:
            return item.record.created_at
        assert item.message is not None
        return item.message.created_at

    @staticmethod
    def _accessed(item: _Found) -> str:
        if item.record is not None:
            return item.record.last_accessed
        assert item.message is not None
        return item.message.created_at

    def _hit_view(self, item: _Found, score_type: Any, message_range: int) -> MemoryHit:
        score = round(item.score, 6)
        if item.record is not None:
            view = record_view(item.record).model_dump()
            return MemoryHit(**view, dist=round(1.0 - score, 6), score=score, score_type=score_type)
        message = item.message
        assert message is not None
        fields = item.hit.fields
        surrounding = None
        if message_range:
            assert item.source is not None
            around = self._records.messages_around(item.source, message.order, message_range)
            surrounding = [
                SurroundingMessage(id=m.id, role=m.role, content=m.content, created_at=m.created_at)
                for m in around
            ]
        return MemoryHit(
            id=message.id,
            text=message.content,
            memory_type=MemoryType.MESSAGE,
            topics=[],
            entities=[],
            session_id=fields.get("session_id"),
            user_id=fields.get("user_id"),
            namespace=str(fields.get("namespace") or DEFAULT_NAMESPACE),
            event_date=None,
            pinned=False,
            created_at=message.created_at,
            updated_at=message.created_at,
            last_accessed=message.created_at,
            persisted_at=message.persisted_at,
            memory_hash=None,
            extracted_from=[],
            metadata={},
            discrete_memory_extracted="t" if message.discrete_memory_extracted == "t" else "f",
            indexing="indexed",
            valid_from=message.created_at,
            valid_until=None,
            recorded_at=message.created_at,
            retired_at=None,
            key=None,
            supersedes=[],
            superseded_by=None,
            role=message.role,
            dist=round(1.0 - score, 6),
            score=score,
            score_type=score_type,
            surrounding_messages=surrounding,
        )
