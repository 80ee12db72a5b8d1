"""What indexing and search need from a vector index (OpenSearch on AWS, exact in the local
stack). The table stays the source of truth: an index can be rebuilt from it at any time.

A doc is one indexed item of the table: a long-term record or a session message. Its `id` is
opaque and unique across tenants: a digest of memkit's ids (`record_doc_id`, `message_doc_id`),
never of the table's key strings, so a change of the table's key format needs no reindex, and
one OpenSearch index can hold every tenant. `fields` are what filters read and what a hit
carries back so the service can find the item in the table again (`source_of`). FIELDS
describes them once, each by its kind; the index mapping, the search filters and their
validation, a record's doc (`record_fields`) and the backends' filter clauses derive from it.

Writes are versioned (OpenSearch's external versioning): a write or a removal at a version
older than the one the index holds changes nothing, so replays and out-of-order deliveries
leave the index as the newest write made it.

Two lifecycle needs: `sample` reads the whole index in doc-id order a page at a time (the
orphan sweep, memkit.jobs.orphans), and a RebuildableIndex builds a new generation of
itself while the current one keeps serving, then makes it live in one step (memkit reindex).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from memkit.models.domain import ItemRef, MessageRef, RecordRef, StoredRecord
from memkit.models.session import MemoryType
from memkit.vectors.filters import Condition

# What a field holds: "scope" (whose and where: a string a search may give as it is),
# "keyword" (one string), "tag" (a list of strings), "date" (epoch seconds, a float),
# "number" (a float) or "bool".
FieldKind = Literal["scope", "keyword", "tag", "date", "number", "bool"]


@dataclass(frozen=True)
class IndexField:
    """A field of the index's docs. `searched`: a search request filters on it, and a
    record holds it under the same name; the others the indexer sets (the tenant, the id a
    client sees, the doc's kind, a message's speaker), or a record holds them for memkit's
    own filters alone (`of_record`: the truth conditions' held_until)."""

    kind: FieldKind
    searched: bool = True
    of_record: bool = False


FIELDS: dict[str, IndexField] = {
    "tenant": IndexField("keyword", searched=False),
    "namespace": IndexField("scope"),
    "user_id": IndexField("scope"),
    "session_id": IndexField("scope"),
    "memory_type": IndexField("keyword"),
    "topics": IndexField("tag"),
    "entities": IndexField("tag"),
    # the id a client sees: a record's, or a message's
    "record_id": IndexField("keyword", searched=False),
    "kind": IndexField("keyword", searched=False),  # record | message
    "speaker": IndexField("keyword", searched=False),  # a message's (vectors.conversation)
    "created_at": IndexField("date"),
    "updated_at": IndexField("date"),
    "last_accessed": IndexField("date"),
    "event_date": IndexField("date"),
    "pinned": IndexField("bool"),
    # current truth (memkit.service.truth): valid time, system time and the slot
    "valid_from": IndexField("date"),
    "valid_until": IndexField("date"),
    "recorded_at": IndexField("date"),
    "retired_at": IndexField("date"),
    "held_until": IndexField("date", searched=False, of_record=True),
    "key": IndexField("keyword"),
}


def fields_of(*kinds: FieldKind) -> tuple[str, ...]:
    """The fields of these kinds, in FIELDS' order."""
    return tuple(name for name, spec in FIELDS.items() if spec.kind in kinds)


KEYWORD_FIELDS = fields_of("scope", "keyword", "tag")
DATE_FIELDS = fields_of("date")
NUMBER_FIELDS = fields_of("number")
BOOLEAN_FIELDS = fields_of("bool")
FILTERABLE = frozenset(FIELDS)
# What a search request filters on (memkit.models.memory.SearchRequest; a unit test holds
# the request, this table and the MCP search tools to the same fields).
SEARCH_FILTERS = tuple(name for name, spec in FIELDS.items() if spec.searched)
# Each field's type in the index's mapping: numbers (dates too) are doubles, so range
# filters compare the exact floats the table holds (a `date` keeps milliseconds only).
MAPPED_TYPES: dict[FieldKind, str] = {
    "scope": "keyword",
    "keyword": "keyword",
    "tag": "keyword",
    "date": "double",
    "number": "double",
    "bool": "boolean",
}
INDEX_TYPES = {name: MAPPED_TYPES[spec.kind] for name, spec in FIELDS.items()}

# A keyword search scores a doc by BM25 on its own text plus this share of its BM25 on its
# `context` (for a message, the turn it follows): "Congrats on the promotion!" is what makes
# the reply "I'm an assistant manager now" the answer to "what was John promoted to?".
CONTEXT_WEIGHT = 0.4

RECORD_KIND = "record"
MESSAGE_KIND = "message"
# What a record's doc carried in `sk` before docs were named by memkit ids.
LEGACY_RECORD_SORT_KEY = "RECORD"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:40]


def record_doc_id(ref: RecordRef) -> str:
    """A record's doc id: opaque, unique across tenants (record ids are unique per tenant)."""
    return _digest(RECORD_KIND, ref.tenant, ref.record_id)


def message_doc_id(ref: MessageRef) -> str:
    """A message's doc id: opaque, unique across tenants and sessions."""
    return _digest(MESSAGE_KIND, ref.tenant, ref.namespace, ref.session_id, ref.message_id)


def doc_id_of(ref: ItemRef) -> str:
    return record_doc_id(ref) if isinstance(ref, RecordRef) else message_doc_id(ref)


def epoch_seconds(value: str | None) -> float | None:
    """An ISO 8601 time as epoch seconds (what the index filters dates on)."""
    if value is None:
        return None
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _field_value(kind: FieldKind, value: Any) -> Any:
    if kind == "tag":
        return sorted(value or ())
    if kind == "date":
        return epoch_seconds(value)
    if kind == "bool":
        return bool(value)
    return value


def record_fields(tenant: str, record: StoredRecord) -> dict[str, Any]:
    """A record's doc fields: what the indexer writes, and what the service re-checks a
    stored record against (a search's filters)."""
    fields: dict[str, Any] = {
        name: _field_value(spec.kind, getattr(record, name))
        for name, spec in FIELDS.items()
        if spec.searched or spec.of_record
    }
    fields["memory_type"] = fields["memory_type"] or MemoryType.SEMANTIC.value
    return {"tenant": tenant, **fields, "record_id": record.id, "kind": RECORD_KIND}


def is_message(fields: dict[str, Any]) -> bool:
    """Whether a doc is a session's message. A doc written before `kind` existed carries
    the table's sort key instead (a record's was "RECORD"; a client may give a record the
    memory type "message", so that cannot tell)."""
    kind = fields.get("kind")
    if kind is not None:
        return bool(kind == MESSAGE_KIND)
    if "sk" in fields:
        return bool(fields["sk"] != LEGACY_RECORD_SORT_KEY)
    return fields.get("memory_type") == MESSAGE_KIND


def source_of(tenant: str, fields: dict[str, Any]) -> ItemRef | None:
    """The item a doc of `tenant` was made from, by memkit's ids (None: its fields do not
    say)."""
    item_id = fields.get("record_id")
    if not isinstance(item_id, str) or not item_id:
        return None
    if not is_message(fields):
        return RecordRef(tenant, item_id)
    namespace, session_id = fields.get("namespace"), fields.get("session_id")
    if not isinstance(namespace, str) or not isinstance(session_id, str):
        return None
    return MessageRef(tenant, namespace, session_id, item_id)


# What a failed write says about a doc: its id -> a reason without content (logged, reported).
Failures = dict[str, str]


@dataclass(frozen=True)
class VectorDoc:
    """One indexed item: its vector, its text (for keyword search), what it means in its
    conversation (`context`: for a message, the text of the turn before it, searched by
    keywords at CONTEXT_WEIGHT, never shown) and its filter fields."""

    id: str
    tenant: str
    vector: Sequence[float]
    version: int
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)
    context: str = ""


@dataclass(frozen=True)
class Removal:
    """An item gone from the table at `version` (a delete, or a TTL expiry)."""

    id: str
    tenant: str
    version: int


@dataclass(frozen=True)
class Hit:
    """A doc found: its id, its score and its fields (without the vector or the text)."""

    id: str
    score: float  # search: cosine similarity (1 = same direction); keyword: BM25; browse: 0
    fields: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def distance(self) -> float:
        """What AMS clients read as `dist` (cosine distance, 0 = identical)."""
        return 1.0 - self.score


@dataclass(frozen=True)
class Sampled:
    """A doc read by a sweep: its id, tenant and version, and its fields (`source_of`)."""

    id: str
    tenant: str
    version: int
    fields: dict[str, Any] = field(default_factory=dict, compare=False)


class VectorIndex(Protocol):
    def upsert(self, docs: Sequence[VectorDoc]) -> Failures:
        """Write each doc unless the index holds the same id at a newer version (that is a
        success, not a failure). Returns the docs that could not be written."""
        ...

    def remove(self, removals: Sequence[Removal]) -> Failures:
        """Delete each id unless the index holds it at a newer version; an absent id is a
        success. Returns the removals that could not be applied."""
        ...

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k nearest of the tenant's docs that meet every condition, nearest first."""
        ...

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k best BM25 matches of `text` among the tenant's docs that meet every
        condition, best first (no match: an empty list)."""
        ...

    def browse(
        self, tenant: str, k: int, offset: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The tenant's docs that meet every condition, newest `created_at` first, from
        `offset` (a listing by filters alone; scores are 0)."""
        ...

    def sample(self, k: int, after: str | None = None) -> tuple[list[Sampled], str | None]:
        """Up to k docs of every tenant in doc-id order, after `after` (None: from the
        first); and the cursor of the next page (None: the sweep reached the end)."""
        ...


class Rebuild(Protocol):
    """A new generation of an index, built while the live one keeps answering searches."""

    @property
    def target(self) -> VectorIndex:
        """Writes to the new generation alone (the copy, then the catch-up)."""
        ...

    @property
    def generation(self) -> str:
        """The new generation's name (an OpenSearch index name; "local" in process)."""
        ...

    @property
    def replaced(self) -> str | None:
        """The generation the switch will replace (None: there is none, or in process)."""
        ...

    def switch(self) -> None:
        """Make the new generation the one searches and writes use, in one atomic step."""
        ...

    def retire(self) -> None:
        """Delete the generation the switch replaced (after the catch-up)."""
        ...

    def abandon(self) -> None:
        """Delete the new generation (a rebuild that failed before its switch)."""
        ...


class RebuildableIndex(VectorIndex, Protocol):
    def rebuild(self, dimensions: int) -> Rebuild:
        """Start a new, empty generation for vectors of `dimensions`."""
        ...

    def resume_rebuild(self, generation: str, replaced: str | None, dimensions: int) -> Rebuild:
        """The rebuild into `generation` that a paused run left, unless it is out of date
        (the live generation is no longer `replaced`, or `generation` is gone)."""
        ...


def unit_vector(vector: Sequence[float], dimensions: int | None = None) -> list[float]:
    """`vector` scaled to length 1 (a zero vector as it is): what every backend indexes and
    searches with. ValueError("invalid_vector") for a NaN or infinity, and for a length other
    than `dimensions` when it is given."""
    values = [float(x) for x in vector]
    if dimensions is not None and len(values) != dimensions:
        raise ValueError(f"expected {dimensions} dimensions, got {len(values)}")
    if not all(math.isfinite(x) for x in values):
        raise ValueError("invalid_vector")
    norm = math.sqrt(math.fsum(x * x for x in values))
    return [x / norm for x in values] if norm > 0 else values
