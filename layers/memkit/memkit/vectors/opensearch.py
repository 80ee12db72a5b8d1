"""The vector index on OpenSearch: a managed domain, or an OpenSearch Serverless collection.

One index holds every tenant; every query carries a tenant term filter, inside the `knn`
clause (efficient filtering: filters apply during the search, so k hits come back whenever k
docs qualify; never post_filter). Vectors are made unit length here and indexed in a faiss
HNSW `innerproduct` space, so the inner product is the cosine; OpenSearch's score for it
(1 + ip when ip > 0, else 1 / (1 - ip), see the k-NN "Spaces" docs) is turned back into the
cosine, and Hit.distance is 1 - cosine, as in the local index.

Each doc's source is its fields plus `tenant`, `doc_id`, `version`, `deleted`, `text`,
`context` (the turn a message follows) and `vector`; hits return the fields without the
vector, the text and the context. A keyword search is one bool query whose two `should`
clauses add up among the docs its filter allows: BM25 on `text.english` (the text as the
built-in `english` analyzer makes it: stop words out, Porter stems) plus CONTEXT_WEIGHT times
BM25 on `context` (analysed the same way), the sum LocalVectorIndex computes
(memkit.vectors.keyword.weighted_search).

Versions (why the two flavours write differently):

- domain: the doc's id is the OpenSearch `_id`, and writes use external versioning in one
  `_bulk` per call. A 409 on a write means the index holds that id at a newer (or the same)
  version: a success. Deletes use `external_gte`, so a removal at the version the index holds
  deletes the doc, as in the local index. OpenSearch keeps a deleted doc's version only for
  `index.gc_deletes` (60 s by default); the index is made with GC_DELETES so that a replayed
  write older than the delete is refused for as long as a stream can replay it.
- serverless (a VECTORSEARCH collection): no custom `_id` in index requests, hence no
  external versioning; no `_refresh` and no `_delete_by_query` (AWS, "Supported operations
  and plugins in Amazon OpenSearch Serverless" and "Working with vector search collections").
  Each write first looks up the batch's doc ids (one terms query), skips docs the index holds
  at the same or a newer version, and then in one `_bulk` indexes the new docs (ids generated
  by the collection) and deletes the older copies by their generated `_id`. A removal writes
  a tombstone (`deleted: true`, the removal's version) in place of the doc, so a replayed
  older write still meets a newer version; searches leave tombstones out.

  The trade-off: a collection's search is not read-after-write. Classic collections refresh
  every 60 s, NextGen ones every 10 s ("Working with vector search collections"). A lookup
  misses copies written within that window, so a write can add a second copy of a doc id (or
  a live copy next to a newer tombstone), and a copy it should have deleted stays. Searches
  therefore ask for twice the hits they need, then look up every copy of the ids found and
  keep a hit only if it is the newest copy of its id and not a tombstone; any later write of
  the id deletes the stale copies. So results are exact for everything older than the
  refresh window and never show an older version once the newer one is searchable. Each
  search costs two requests; tombstones stay (one small doc per removed id).

Generations (memkit reindex): the configured index name is an alias once a rebuild has run.
A rebuild creates `<name>-gen<N>` (N one more than the live generation's), fills it, then
one POST /_aliases moves the alias from the old generation to the new one: searches and
writes, which name the alias, never see a missing or half-filled index. A deployment whose
configured name is still a plain index (every deployment before its first rebuild) is
migrated by the same request: `remove_index` deletes the plain index and `add` creates the
alias by its name, atomically (an alias cannot share a name with an index). Serverless
collections list POST _aliases among their supported operations ("Supported operations and
plugins in Amazon OpenSearch Serverless"), so both flavours rebuild the same way.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from memkit.errors import BadRequest, MemkitError, Misconfigured, StoreUnavailable, Throttled
from memkit.observability import logger
from memkit.times import bound
from memkit.vectors.filters import Condition, meets
from memkit.vectors.protocol import (
    BOOLEAN_FIELDS,
    CONTEXT_WEIGHT,
    FILTERABLE,
    INDEX_TYPES,
    KEYWORD_FIELDS,
    Failures,
    Hit,
    Removal,
    Sampled,
    VectorDoc,
    unit_vector,
)

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from memkit.config import IndexSettings

Flavour = Literal["domain", "serverless"]

# DynamoDB Streams keep records for 24 hours, so no replay is older than a day; two days of
# deleted versions cover it with a margin (index.gc_deletes, a dynamic index setting).
GC_DELETES = "2d"
# index.max_result_window's default: from + size beyond it is refused.
MAX_WINDOW = 10_000
# A serverless lookup reads at most this many copies of one doc id (normally one or two).
COPIES_PER_ID = 8
# What a doc's source adds to its fields; a doc whose fields use these names is refused.
INTERNAL_FIELDS = ("doc_id", "version", "deleted")
RESERVED_FIELDS = frozenset({*INTERNAL_FIELDS, "tenant", "vector", "text", "context"})
HIDDEN = ["vector", "text", "context"]
NEWEST_FIRST = [{"created_at": {"order": "desc"}}, {"doc_id": {"order": "asc"}}]
MATCH_NONE: dict[str, Any] = {"match_none": {}}
_IDENTIFIER = re.compile(r"[a-z][a-z0-9_]{0,80}")
# A rebuild's generations are named `<alias>-gen<N>`.
GENERATION_SUFFIX = "-gen"
# How long one request may take, resends included (IndexSettings.opensearch_timeout_seconds),
# and a bulk write at least (its items take longer than a search); either ends sooner when
# the deadline in force (memkit.times.bound) comes first.
DEFAULT_WAIT_SECONDS = 10.0
BULK_WAIT_SECONDS = 30.0
# A request refused for want of capacity, or whose connection was refused, is sent again at
# once (as opensearch-py resends), at most RESENDS times and only within the request's wait.
# A timed-out one is not: it may have been applied (a serverless write would add a copy).
RESENDS = 2
RESEND_STATUS = frozenset({429, 502, 503, 504})
# A wait of 0 would be the client's default: a resend at the deadline gets this much.
MIN_WAIT_SECONDS = 0.01


def _english_text() -> dict[str, Any]:
    """A text field analysed by the built-in `english` analyzer (what
    memkit.vectors.keyword.terms mirrors)."""
    return {"type": "text", "analyzer": "english"}


def scalar_properties() -> dict[str, dict[str, Any]]:
    """Every field's mapping except the vector's (what PUT _mapping may add to an index)."""
    properties: dict[str, dict[str, Any]] = {
        # `text` keeps the default analyzer: naming one would conflict with an existing
        # index's text field (an analyzer cannot be updated). Keyword search reads its
        # `english` multi-field, which PUT _mapping may add to an existing field ("new
        # multi-fields can be added to existing fields": the Elasticsearch 7.x "Put mapping"
        # API OpenSearch forked; OpenSearch 2.x's "Language analyzers" page maps this very
        # text + fields.<language> shape). Docs indexed before it have no value in it until
        # rewritten (memkit reindex). `english` is built in (no plugin), and Serverless
        # takes PUT _mapping (aoss:UpdateIndex, "Supported operations and plugins in Amazon
        # OpenSearch Serverless").
        "text": {"type": "text", "fields": {"english": _english_text()}},
        # A new field, so it may name its analyzer when PUT _mapping adds it.
        "context": _english_text(),
        "doc_id": {"type": "keyword"},
        "version": {"type": "long"},
        "deleted": {"type": "boolean"},
    }
    properties.update({name: {"type": kind} for name, kind in INDEX_TYPES.items()})
    return properties


def index_body(dimensions: int, flavour: Flavour = "domain") -> dict[str, Any]:
    """The index's settings and mappings (PUT /{index}); template.yaml is checked against it."""
    settings: dict[str, Any] = {"knn": True}
    if flavour == "domain":
        # Keep deleted docs' versions past the 60 s default, so a replayed older write
        # cannot bring a removed doc back (see GC_DELETES). Serverless takes no such setting.
        settings["gc_deletes"] = GC_DELETES
    properties: dict[str, dict[str, Any]] = {
        "vector": {
            "type": "knn_vector",
            "dimension": dimensions,
            # faiss HNSW: the one method a serverless vector collection supports; efficient
            # filtering since OpenSearch 2.9.
            "method": {"name": "hnsw", "engine": "faiss", "space_type": "innerproduct"},
        },
        **scalar_properties(),
    }
    # dynamic false: fields outside the mapping stay in _source but are not indexed.
    return {
        "settings": {"index": settings},
        "mappings": {"dynamic": False, "properties": properties},
    }


def cosine_from_score(score: float) -> float:
    """The inner product (the cosine of unit vectors) behind faiss's innerproduct score."""
    if score >= 1.0:
        return score - 1.0
    return 1.0 - 1.0 / score if score > 0 else -1.0


# --- filters -------------------------------------------------------------------------------


def _listed(value: Any) -> list[Any]:
    """A filter value as a list, as filters.meets reads it."""
    if value is None:
        return []
    return list(value) if isinstance(value, list | tuple | set | frozenset) else [value]


def _number(value: Any) -> float | None:
    """A value as a date field compares it (Python compares True as 1), or None."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def _terms(field: str, values: Iterable[Any]) -> dict[str, Any]:
    unique = list(dict.fromkeys(values))
    return {"term": {field: unique[0]}} if len(unique) == 1 else {"terms": {field: unique}}


def _every(field: str, values: list[Any]) -> dict[str, Any]:
    if not values:
        return {"exists": {"field": field}}  # all of nothing: the field is there
    return {"bool": {"filter": [{"term": {field: value}} for value in dict.fromkeys(values)]}}


def _excluded(field: str, values: list[Any]) -> dict[str, Any] | None:
    return {"bool": {"must_not": [_terms(field, values)]}} if values else None


def _range(field: str, op: str, value: Any) -> dict[str, Any]:
    if op == "between":
        bounds = _listed(value)
        if len(bounds) != 2:
            raise ValueError(f"filter {field} between needs two bounds")
        low, high = (_number(bound) for bound in bounds)
        if low is None or high is None:
            raise ValueError(f"filter {field} between needs numbers")
        return {"range": {field: {"gte": low, "lte": high}}}
    bound = _number(value)
    if bound is None:
        raise ValueError(f"filter {field} {op} needs a number")
    return {"range": {field: {op: bound}}}


def _keyword_clause(condition: Condition) -> dict[str, Any] | None:
    # Keyword fields hold strings: meets never finds a number, a bool or a range there.
    field, op, value = condition.field, condition.op, condition.value
    strings = [v for v in _listed(value) if isinstance(v, str)]
    if op in ("ne", "none"):
        return _excluded(field, strings)
    if op == "eq":
        return {"term": {field: value}} if isinstance(value, str) else MATCH_NONE
    if op == "any":
        return _terms(field, strings) if strings else MATCH_NONE
    if op == "all":
        return _every(field, strings) if len(strings) == len(_listed(value)) else MATCH_NONE
    if op == "startswith":
        return {"prefix": {field: str(value)}}
    return MATCH_NONE  # gt, gte, lt, lte, between: strings are never numbers


def _number_clause(condition: Condition) -> dict[str, Any] | None:
    field, op, value = condition.field, condition.op, condition.value
    listed = _listed(value)
    numbers = [n for n in (_number(v) for v in listed) if n is not None]
    if op in ("ne", "none"):
        return _excluded(field, numbers)
    if op == "eq":
        number = _number(value)
        return {"term": {field: number}} if number is not None else MATCH_NONE
    if op == "any":
        return _terms(field, numbers) if numbers else MATCH_NONE
    if op == "all":
        return _every(field, numbers) if len(numbers) == len(listed) else MATCH_NONE
    if op == "startswith":
        return MATCH_NONE  # numbers have no prefix
    return _range(field, op, value)


def _boolean_clause(condition: Condition) -> dict[str, Any] | None:
    # Two possible values: ask meets which of them qualify, so the answer is meets' own.
    field = condition.field
    try:
        passing = [b for b in (False, True) if meets({field: b}, condition)]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"filter {field} {condition.op}: unusable value") from exc
    failing = [b for b in (False, True) if b not in passing]
    if condition.op in ("ne", "none"):
        return _excluded(field, failing)  # a doc without the field meets a negative filter
    if not passing:
        return MATCH_NONE
    return _terms(field, passing) if failing else {"exists": {"field": field}}


def condition_clause(condition: Condition) -> dict[str, Any] | None:
    """One condition as an OpenSearch filter clause that matches exactly the docs
    filters.meets accepts (None: every doc does), given that keyword fields hold strings,
    dates numbers and `pinned` a bool, as the indexer writes them. A field that cannot be
    filtered on is refused: filters never widen silently."""
    if condition.op == "or":
        return _either_clause(condition)
    if condition.field not in FILTERABLE:
        raise ValueError(f"cannot filter on {condition.field!r}")
    if condition.op == "exists":
        present = {"exists": {"field": condition.field}}
        return present if condition.value else {"bool": {"must_not": [present]}}
    if condition.field in KEYWORD_FIELDS:
        return _keyword_clause(condition)
    if condition.field in BOOLEAN_FIELDS:
        return _boolean_clause(condition)
    return _number_clause(condition)  # dates are numbers too (epoch seconds)


def _either_clause(condition: Condition) -> dict[str, Any] | None:
    """An `or` of groups: a bool `should` of each group's filter (None: a group every doc
    meets, so the whole condition holds for every doc)."""
    groups: list[dict[str, Any]] = []
    for group in condition.value:
        clauses = [c for c in map(condition_clause, group) if c is not None]
        if not clauses:
            return None
        groups.append(clauses[0] if len(clauses) == 1 else {"bool": {"filter": clauses}})
    if not groups:
        return MATCH_NONE
    return {"bool": {"should": groups, "minimum_should_match": 1}}


def filter_query(
    tenant: str, conditions: Sequence[Condition], *, hide_tombstones: bool = False
) -> dict[str, Any]:
    """The bool filter of a search: the tenant, then every condition."""
    clauses: list[dict[str, Any]] = [{"term": {"tenant": tenant}}]
    clauses.extend(c for c in map(condition_clause, conditions) if c is not None)
    query: dict[str, Any] = {"filter": clauses}
    if hide_tombstones:
        query["must_not"] = [{"term": {"deleted": True}}]
    return {"bool": query}


# --- requests ------------------------------------------------------------------------------


class _RequestFailed(Exception):
    """A request OpenSearch (or the way to it) refused; carries no content."""

    def __init__(self, operation: str, status: int | None, error: str) -> None:
        super().__init__(f"{operation}: {status or 'no status'} {error}")
        self.operation = operation
        self.status = status
        self.error = error

    @property
    def reason(self) -> str:
        """What a Failures entry says: the error type, or the HTTP status."""
        if _IDENTIFIER.fullmatch(self.error):
            return self.error
        return f"http_{self.status}" if self.status else "request_failed"

    def domain_error(self) -> MemkitError:
        """The error an API client sees: retry later (503, 429) or an operator's fix (500)."""
        details = {"operation": self.operation, "status": self.status, "error": self.reason}
        transient = self.status is None or self.status == 429 or self.status >= 500
        if transient:
            logger.warning("vector index request failed", extra=details)
        else:
            logger.error("vector index refused a request", extra=details)  # an operator's fix
        if self.status == 429:
            return Throttled("the vector index is busy; retry later")
        # 401/403: the service's own credentials or access policy (not the caller's), which
        # may also be a role's credentials expiring: the client can retry.
        if transient or self.status in (401, 403):
            return StoreUnavailable("the vector index is unavailable; retry later")
        return Misconfigured("the vector index refused the request")


def _failure(operation: str, exc: Exception) -> _RequestFailed:
    from opensearchpy.exceptions import ConnectionError, ConnectionTimeout, TransportError

    if isinstance(exc, ConnectionTimeout):
        return _RequestFailed(operation, None, "timeout")
    if isinstance(exc, ConnectionError):
        return _RequestFailed(operation, None, "connection_error")
    if isinstance(exc, TransportError):
        status = exc.status_code if isinstance(exc.status_code, int) else None
        error = exc.error if isinstance(exc.error, str) else ""
        return _RequestFailed(operation, status, error)
    return _RequestFailed(operation, None, type(exc).__name__.lower())


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list | tuple):
        return all(_finite(item) for item in value)
    return True


# One line pair of a _bulk body: the doc id it serves, the action, the source (index only).
_Action = tuple[str, dict[str, Any], dict[str, Any] | None]


class _Copy(NamedTuple):
    """One stored copy of a doc id in a serverless collection."""

    os_id: str
    version: int
    deleted: bool

    @property
    def rank(self) -> tuple[int, bool]:
        # At equal versions a removal wins, as in the local index.
        return (self.version, self.deleted)


class OpenSearchIndex:
    """VectorIndex over an OpenSearch index: a managed domain or a serverless collection
    (see the module docstring for how each keeps versions). Thread-safe."""

    def __init__(
        self,
        client: OpenSearch,
        index: str,
        dimensions: int,
        flavour: Flavour = "domain",
        wait_seconds: float = DEFAULT_WAIT_SECONDS,
    ) -> None:
        self._client = client
        self._index = index
        self._dimensions = dimensions
        self._flavour: Flavour = flavour
        self._wait = wait_seconds
        self._serverless = flavour == "serverless"
        self._ready = False
        self._ready_lock = threading.Lock()

    @property
    def dimensions(self) -> int:
        return self._dimensions

    def _call(
        self, operation: str, request: Callable[[float], Any], wait: float | None = None
    ) -> Any:
        """`request(seconds it may take)`, resent (RESENDS) while `wait` (the index's wait by
        default) lasts, and never past the deadline in force (memkit.times.bound: the
        invocation's, or a caller's tighter one): one request never takes longer, so a
        collection still waking up after it scaled to zero is a domain error the caller can
        retry, not a timed-out function. Past that deadline nothing is sent."""
        from opensearchpy.exceptions import (
            ConnectionError,
            ConnectionTimeout,
            OpenSearchException,
            TransportError,
        )

        now = time.monotonic()
        deadline = now + (self._wait if wait is None else wait)
        limit = bound()
        if limit is not None:
            left = limit.left()
            if left <= 0:
                raise _RequestFailed(operation, None, "out_of_time")
            deadline = min(deadline, now + left)
        resends = RESENDS
        while True:
            try:
                return request(max(MIN_WAIT_SECONDS, deadline - time.monotonic()))
            except OpenSearchException as exc:
                refused = isinstance(exc, TransportError) and exc.status_code in RESEND_STATUS
                unconnected = isinstance(exc, ConnectionError) and not isinstance(
                    exc, ConnectionTimeout
                )
                if not (refused or unconnected) or resends == 0 or time.monotonic() >= deadline:
                    raise _failure(operation, exc) from exc
                resends -= 1

    # --- the index -----------------------------------------------------------------------

    def ensure_index(self) -> None:
        """Create the index (index_body) if it is absent, tolerating a concurrent creator.
        On an index that exists, add the field mappings it lacks (CloudFormation's index
        resource types only some of them) and, on a domain, keep deletes' versions for
        GC_DELETES. Raises a domain error when OpenSearch refuses."""
        try:
            with self._ready_lock:
                self._ensure_index()
                self._ready = True
        except _RequestFailed as failure:
            raise failure.domain_error() from failure

    def _ensure_index(self) -> None:
        indices = self._client.indices
        if not self._call(
            "ensure_index", lambda wait: indices.exists(index=self._index, request_timeout=wait)
        ):
            try:
                body = index_body(self._dimensions, self._flavour)
                self._call(
                    "ensure_index",
                    lambda wait: indices.create(index=self._index, body=body, request_timeout=wait),
                )
                return
            except _RequestFailed as failure:
                # Another process created it first, or a rebuild's switch made the name an
                # alias meanwhile (OpenSearch: invalid_index_name_exception, "already exists
                # as alias"): update it like any index. A name invalid in itself stays absent.
                exists_now = failure.error == "resource_already_exists_exception" or (
                    failure.error == "invalid_index_name_exception"
                    and self._call(
                        "ensure_index",
                        lambda wait: indices.exists(index=self._index, request_timeout=wait),
                    )
                )
                if not exists_now:
                    raise
        mapping = {"dynamic": False, "properties": scalar_properties()}
        self._call(
            "ensure_index",
            lambda wait: indices.put_mapping(index=self._index, body=mapping, request_timeout=wait),
        )
        if not self._serverless:
            settings = {"index": {"gc_deletes": GC_DELETES}}
            self._call(
                "ensure_index",
                lambda wait: indices.put_settings(
                    index=self._index, body=settings, request_timeout=wait
                ),
            )

    def _ensure_once(self) -> None:
        # A write to an absent index would create it with dynamic mappings (no k-NN).
        if self._ready:
            return
        with self._ready_lock:
            if not self._ready:
                self._ensure_index()
                self._ready = True

    # --- writes --------------------------------------------------------------------------

    def _source(self, doc: VectorDoc) -> dict[str, Any]:
        if RESERVED_FIELDS.intersection(doc.fields) - {"tenant"}:
            raise ValueError("reserved_field")
        if doc.fields.get("tenant", doc.tenant) != doc.tenant:
            raise ValueError("tenant_mismatch")
        if not _finite(list(doc.fields.values())):
            raise ValueError("invalid_field")
        return {
            **doc.fields,
            "tenant": doc.tenant,
            "doc_id": doc.id,
            "version": doc.version,
            "deleted": False,
            "text": doc.text,
            "context": doc.context,
            "vector": unit_vector(doc.vector),
        }

    def upsert(self, docs: Sequence[VectorDoc]) -> Failures:
        """Write each doc unless the index holds its id at the same or a newer version."""
        failures: Failures = {}
        newest: dict[str, tuple[VectorDoc, dict[str, Any]]] = {}
        for doc in docs:
            try:
                source = self._source(doc)
            except ValueError as exc:
                failures[doc.id] = str(exc)
                continue
            held = newest.get(doc.id)
            if held is None or held[0].version < doc.version:
                newest[doc.id] = (doc, source)
        if not newest:
            return failures
        actions: list[_Action] = []
        try:
            self._ensure_once()
            if self._serverless:
                copies = self._copies(list(newest))
                for doc_id, (doc, source) in newest.items():
                    actions.extend(self._replace(doc_id, doc.version, False, source, copies))
            else:
                for doc_id, (doc, source) in newest.items():
                    meta = {"_id": doc_id, "version": doc.version, "version_type": "external"}
                    actions.append((doc_id, {"index": meta}, source))
            failures.update(self._bulk("upsert", actions))
        except _RequestFailed as failure:
            failures.update(dict.fromkeys(newest, failure.reason))
        return failures

    def remove(self, removals: Sequence[Removal]) -> Failures:
        """Delete each id unless the index holds it at a newer version; an absent id is a
        success, and the removal's version stays behind for later writes to meet."""
        newest: dict[str, Removal] = {}
        for removal in removals:
            held = newest.get(removal.id)
            if held is None or held.version < removal.version:
                newest[removal.id] = removal
        if not newest:
            return {}
        actions: list[_Action] = []
        try:
            self._ensure_once()
            if self._serverless:
                copies = self._copies(list(newest))
                for doc_id, removal in newest.items():
                    tombstone = {
                        "tenant": removal.tenant,
                        "doc_id": doc_id,
                        "version": removal.version,
                        "deleted": True,
                    }
                    actions.extend(self._replace(doc_id, removal.version, True, tombstone, copies))
            else:
                for doc_id, removal in newest.items():
                    # external_gte: a removal at the version the index holds still deletes.
                    meta = {
                        "_id": doc_id,
                        "version": removal.version,
                        "version_type": "external_gte",
                    }
                    actions.append((doc_id, {"delete": meta}, None))
            return self._bulk("remove", actions)
        except _RequestFailed as failure:
            return dict.fromkeys(newest, failure.reason)

    def _replace(
        self,
        doc_id: str,
        version: int,
        deleted: bool,
        source: dict[str, Any],
        copies: dict[str, list[_Copy]],
    ) -> list[_Action]:
        """Serverless: index `source` unless a copy at least as new is there, and delete
        every copy older than the newest (so stale copies heal on any later write)."""
        found = copies.get(doc_id, [])
        newest = max(found, key=lambda copy: copy.rank, default=None)
        actions: list[_Action] = []
        if newest is None or newest.rank < (version, deleted):
            actions.append((doc_id, {"index": {}}, source))
            keep: _Copy | None = None
        else:
            keep = newest
        actions.extend(
            (doc_id, {"delete": {"_id": copy.os_id}}, None) for copy in found if copy != keep
        )
        return actions

    def _bulk(self, operation: str, actions: list[_Action]) -> Failures:
        """One _bulk request; every item error becomes a failure of its doc, except a
        version conflict (the index holds a newer version: the write is not needed)."""
        if not actions:
            return {}
        body: list[dict[str, Any]] = []
        for _, action, source in actions:
            body.append(action)
            if source is not None:
                body.append(source)
        response = self._call(
            operation,
            lambda wait: self._client.bulk(body=body, index=self._index, request_timeout=wait),
            max(BULK_WAIT_SECONDS, self._wait),
        )
        items = response.get("items") if isinstance(response, dict) else None
        if not isinstance(items, list) or len(items) != len(actions):
            return {doc_id: "bad_bulk_response" for doc_id, _, _ in actions}
        failures: Failures = {}
        for (doc_id, _, _), entry in zip(actions, items, strict=True):
            item: dict[str, Any] = next(iter(entry.values()), {}) if isinstance(entry, dict) else {}
            error = item.get("error")
            if error is None:
                continue  # includes a delete's 404 not_found: nothing to delete is a success
            kind = error.get("type", "") if isinstance(error, dict) else ""
            if item.get("status") == 409 and kind == "version_conflict_engine_exception":
                continue
            failures.setdefault(doc_id, kind if _IDENTIFIER.fullmatch(kind) else "bulk_error")
        if failures:
            logger.warning(
                "vector index bulk items failed",
                extra={"operation": operation, "failed": len(failures), "actions": len(actions)},
            )
        return failures

    def _copies(self, doc_ids: list[str]) -> dict[str, list[_Copy]]:
        """Serverless: every copy (tombstones included) of `doc_ids` the index shows."""
        found: dict[str, list[_Copy]] = {}
        chunk = MAX_WINDOW // COPIES_PER_ID
        for start in range(0, len(doc_ids), chunk):
            ids = doc_ids[start : start + chunk]
            size = COPIES_PER_ID * len(ids)
            body = {
                "size": size,
                "query": {"bool": {"filter": [{"terms": {"doc_id": ids}}]}},
                "_source": list(INTERNAL_FIELDS),
            }
            hits, total = self._hits("lookup", body)
            if total > len(hits):
                raise _RequestFailed("lookup", None, "too_many_copies")
            for raw in hits:
                source = raw.get("_source") or {}
                copy = _Copy(str(raw["_id"]), int(source["version"]), bool(source["deleted"]))
                found.setdefault(str(source["doc_id"]), []).append(copy)
        return found

    # --- reads ---------------------------------------------------------------------------

    def _hits(self, operation: str, body: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
        response = self._call(
            operation,
            lambda wait: self._client.search(index=self._index, body=body, request_timeout=wait),
        )
        hits = response["hits"]
        total = hits.get("total", {})
        count = total.get("value", 0) if isinstance(total, dict) else int(total or 0)
        return list(hits["hits"]), int(count)

    def _read(
        self,
        operation: str,
        body: dict[str, Any],
        score: Callable[[dict[str, Any]], float],
        k: int,
        offset: int = 0,
    ) -> list[Hit]:
        try:
            try:
                raw_hits, _ = self._hits(operation, body)
            except _RequestFailed as failure:
                if failure.status == 404 and failure.error == "index_not_found_exception":
                    return []  # nothing indexed yet
                raise
            if self._serverless:
                raw_hits = self._current(raw_hits)
        except _RequestFailed as failure:
            raise failure.domain_error() from failure
        hits = []
        for raw in raw_hits[offset : offset + k]:
            source = raw.get("_source") or {}
            fields = {key: value for key, value in source.items() if key not in INTERNAL_FIELDS}
            hits.append(Hit(str(source.get("doc_id", raw["_id"])), score(raw), fields))
        return hits

    def _current(self, raw_hits: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Serverless: the hits that are the newest live copy of their doc id, once each."""
        ids = list(dict.fromkeys(str((raw.get("_source") or {}).get("doc_id")) for raw in raw_hits))
        if not ids:
            return []
        newest = {
            doc_id: max(copies, key=lambda copy: copy.rank)
            for doc_id, copies in self._copies(ids).items()
        }
        kept: list[dict[str, Any]] = []
        seen: set[str] = set()
        for raw in raw_hits:
            source = raw.get("_source") or {}
            doc_id = str(source.get("doc_id"))
            best = newest.get(doc_id)
            if doc_id in seen or best is None or best.deleted:
                continue
            if best.version == source.get("version"):
                kept.append(raw)
                seen.add(doc_id)
        return kept

    def _fetch(self, wanted: int) -> int:
        # Serverless: room for stale copies the post-check drops.
        return min(MAX_WINDOW, 2 * wanted if self._serverless else wanted)

    def _filter(self, tenant: str, conditions: Sequence[Condition]) -> dict[str, Any]:
        return filter_query(tenant, conditions, hide_tombstones=self._serverless)

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k nearest of the tenant's docs that meet every condition (cosine scores)."""
        if k <= 0:
            return []
        if len(vector) != self._dimensions:
            raise ValueError(f"expected {self._dimensions} dimensions, got {len(vector)}")
        fetch = self._fetch(k)
        knn = {
            "vector": unit_vector(vector),
            "k": fetch,
            "filter": self._filter(tenant, conditions),
        }
        body = {"size": fetch, "query": {"knn": {"vector": knn}}, "_source": {"excludes": HIDDEN}}
        return self._read("search", body, lambda raw: cosine_from_score(raw["_score"]), k)

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k best matches of `text` among the tenant's docs: BM25 on their english-
        analysed text plus CONTEXT_WEIGHT times BM25 on their context (OpenSearch's scores),
        in one search request."""
        if k <= 0 or not text.strip():
            return []
        fetch = self._fetch(k)
        query = {
            "bool": {
                "should": [
                    {"match": {"text.english": {"query": text}}},
                    {"match": {"context": {"query": text, "boost": CONTEXT_WEIGHT}}},
                ],
                "minimum_should_match": 1,
                "filter": [self._filter(tenant, conditions)],
            }
        }
        body = {"size": fetch, "query": query, "_source": {"excludes": HIDDEN}}
        return self._read("keyword", body, lambda raw: float(raw["_score"]), k)

    def browse(
        self, tenant: str, k: int, offset: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The tenant's docs that meet every condition, newest created_at first."""
        if k <= 0:
            return []
        if offset < 0:
            raise ValueError("offset must not be negative")
        if offset + k > MAX_WINDOW:
            raise BadRequest(f"a listing reaches at most {MAX_WINDOW} records deep")
        query = self._filter(tenant, conditions)
        body: dict[str, Any] = {
            "query": query,
            "sort": NEWEST_FIRST,
            "_source": {"excludes": HIDDEN},
        }
        if self._serverless:
            # Stale copies before the offset would shift the page: read from the start.
            body.update({"from": 0, "size": min(MAX_WINDOW, offset + 2 * k)})
            return self._read("browse", body, lambda raw: 0.0, k, offset)
        body.update({"from": offset, "size": k})
        return self._read("browse", body, lambda raw: 0.0, k)

    # --- sweeps and generations ----------------------------------------------------------

    def sample(self, k: int, after: str | None = None) -> tuple[list[Sampled], str | None]:
        """Up to k docs of every tenant in doc_id order after `after` (a range on the
        keyword doc_id, so a page costs one search at any depth); tombstones left out."""
        if k <= 0:
            return [], after
        clauses: list[dict[str, Any]] = []
        if after is not None:
            clauses.append({"range": {"doc_id": {"gt": after}}})
        query: dict[str, Any] = {"filter": clauses}
        if self._serverless:
            query["must_not"] = [{"term": {"deleted": True}}]
        body = {
            "size": min(k, MAX_WINDOW),
            "query": {"bool": query},
            "sort": [{"doc_id": {"order": "asc"}}],
            "_source": {"excludes": HIDDEN},
        }
        try:
            try:
                raw_hits, total = self._hits("sample", body)
            except _RequestFailed as failure:
                if failure.status == 404 and failure.error == "index_not_found_exception":
                    return [], None  # nothing indexed yet
                raise
        except _RequestFailed as failure:
            raise failure.domain_error() from failure
        page: list[Sampled] = []
        for raw in raw_hits:
            source = raw.get("_source") or {}
            fields = {key: value for key, value in source.items() if key not in INTERNAL_FIELDS}
            doc_id = str(source.get("doc_id", raw["_id"]))
            tenant = str(source.get("tenant", ""))
            page.append(Sampled(doc_id, tenant, int(source.get("version") or 0), fields))
        more = total > len(raw_hits)
        return page, (page[-1].id if page and more else None)

    def rebuild(self, dimensions: int) -> AliasRebuild:
        """Create the next generation `<name>-gen<N>`, empty, mapped for `dimensions`; the
        live index keeps serving until the rebuild's switch. Raises a domain error when
        OpenSearch refuses."""
        indices = self._client.indices
        try:
            live = self._live_generation()
            name = f"{self._index}{GENERATION_SUFFIX}{_generation_number(self._index, live) + 1}"
            if self._call("rebuild", lambda wait: indices.exists(index=name, request_timeout=wait)):
                # Left by a rebuild that stopped before its switch: nothing serves from it.
                self._call("rebuild", lambda wait: indices.delete(index=name, request_timeout=wait))
            body = index_body(dimensions, self._flavour)
            self._call(
                "rebuild", lambda wait: indices.create(index=name, body=body, request_timeout=wait)
            )
        except _RequestFailed as failure:
            raise failure.domain_error() from failure
        target = OpenSearchIndex(self._client, name, dimensions, self._flavour, self._wait)
        target._ready = True
        return AliasRebuild(self, target, live)

    def resume_rebuild(
        self, generation: str, replaced: str | None, dimensions: int
    ) -> AliasRebuild:
        """The paused rebuild into `generation` (one of this name's generations), if the
        live index is still the one it will replace and the generation still exists."""
        prefix = f"{self._index}{GENERATION_SUFFIX}"
        if not generation.startswith(prefix) or not generation[len(prefix) :].isdigit():
            raise BadRequest(f"{generation!r} is not a generation of {self._index!r}")
        indices = self._client.indices
        try:
            live = self._live_generation()
            exists = self._call(
                "rebuild", lambda wait: indices.exists(index=generation, request_timeout=wait)
            )
        except _RequestFailed as failure:
            raise failure.domain_error() from failure
        if live != replaced or not exists:
            raise BadRequest("the paused rebuild is out of date (the index changed): start anew")
        target = OpenSearchIndex(self._client, generation, dimensions, self._flavour, self._wait)
        target._ready = True
        return AliasRebuild(self, target, live)

    def _live_generation(self) -> str | None:
        """The index the configured name leads to: the alias's index, the name itself while
        it is a plain index, or None when neither exists."""
        indices = self._client.indices
        # 404 (no such alias) is an answer here, not a failure to log.
        found = self._call(
            "rebuild",
            lambda wait: indices.get_alias(name=self._index, ignore=404, request_timeout=wait),
        )
        if not isinstance(found, dict) or found.get("status") == 404:
            exists = self._call(
                "rebuild", lambda wait: indices.exists(index=self._index, request_timeout=wait)
            )
            return self._index if exists else None
        names = sorted(found)
        if len(names) != 1:
            raise _RequestFailed("rebuild", None, "alias_not_single") from None
        return str(names[0])

    def _switch(self, new: str, old: str | None) -> None:
        actions: list[dict[str, Any]] = []
        if old == self._index:
            actions.append({"remove_index": {"index": old}})  # a plain index: the migration
        elif old is not None:
            actions.append({"remove": {"index": old, "alias": self._index}})
        actions.append({"add": {"index": new, "alias": self._index}})
        indices = self._client.indices
        self._call(
            "switch",
            lambda wait: indices.update_aliases(body={"actions": actions}, request_timeout=wait),
        )

    def _drop(self, name: str) -> None:
        indices = self._client.indices
        try:
            self._call("drop", lambda wait: indices.delete(index=name, request_timeout=wait))
        except _RequestFailed as failure:
            if failure.status != 404:
                raise


def _generation_number(alias: str, live: str | None) -> int:
    """The generation number of `live` (0 for a plain index, or none)."""
    prefix = f"{alias}{GENERATION_SUFFIX}"
    if live is None or not live.startswith(prefix) or not live[len(prefix) :].isdigit():
        return 0
    return int(live[len(prefix) :])


class AliasRebuild:
    """A rebuild of an OpenSearch index behind its alias (implements Rebuild)."""

    def __init__(self, owner: OpenSearchIndex, target: OpenSearchIndex, old: str | None) -> None:
        self._owner = owner
        self._target = target
        self._old = old
        self._switched = False

    @property
    def target(self) -> OpenSearchIndex:
        return self._target

    @property
    def generation(self) -> str:
        return self._target._index

    @property
    def replaced(self) -> str | None:
        """The generation the switch replaces (the plain index itself, or None)."""
        return self._old

    @staticmethod
    def _domain(operation: Callable[[], None]) -> None:
        try:
            operation()
        except _RequestFailed as failure:
            raise failure.domain_error() from failure

    def switch(self) -> None:
        """One POST /_aliases: the alias leaves the old generation for the new one."""
        if self._old is None:
            self._domain(self._first_switch)
        else:
            self._domain(lambda: self._owner._switch(self.generation, self._old))
        self._switched = True

    def _first_switch(self) -> None:
        """Nothing held the name when the rebuild began, but a writer (the stream indexer)
        may create it as a plain index at any moment until the alias exists: the switch
        replaces what the name is when it is sent, and is sent again if a plain index
        appeared between that look and the switch (OpenSearch refuses an alias over an
        index: invalid_alias_name_exception). Once the alias exists, no writer creates an
        index of that name, so one more try is always enough. The plain index's docs were
        written after the rebuild began: the catch-up's."""
        for attempt in range(2):
            self._take_over_a_plain_index()
            try:
                self._owner._switch(self.generation, self._old)
                return
            except _RequestFailed as failure:
                if failure.error != "invalid_alias_name_exception" or attempt == 1:
                    raise

    def _take_over_a_plain_index(self) -> None:
        if self._owner._live_generation() == self._owner._index:
            self._old = self._owner._index

    def retire(self) -> None:
        """Delete the replaced generation (a plain index went with the switch itself)."""
        old = self._old
        if self._switched and old is not None and old != self._owner._index:
            self._domain(lambda: self._owner._drop(old))

    def abandon(self) -> None:
        if not self._switched:
            self._domain(lambda: self._owner._drop(self.generation))


def opensearch_index(settings: IndexSettings, region: str, dimensions: int) -> OpenSearchIndex:
    """The configured OpenSearch index: SigV4 (service es for a domain, aoss for a
    collection) with the Lambda role's credentials, or no auth for a loopback endpoint."""
    import logging

    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    endpoint = settings.opensearch_endpoint
    if not endpoint:
        raise Misconfigured("MEMKIT_OPENSEARCH_ENDPOINT is not set")
    auth: AWSV4SignerAuth | None = None
    if settings.opensearch_auth == "sigv4":
        import boto3

        service = "aoss" if settings.opensearch_flavour == "serverless" else "es"
        credentials = boto3.Session().get_credentials()
        if credentials is None:
            raise Misconfigured("no AWS credentials to sign OpenSearch requests with")
        auth = AWSV4SignerAuth(credentials, region, service)
    # The client logs request bodies (doc text) at DEBUG: keep it at WARNING unless told.
    client_logger = logging.getLogger("opensearch")
    if client_logger.level == logging.NOTSET:
        client_logger.setLevel(logging.WARNING)
    wait = settings.opensearch_timeout_seconds
    client = OpenSearch(
        hosts=[endpoint],
        http_auth=auth,
        use_ssl=endpoint.startswith("https://"),
        verify_certs=True,
        connection_class=RequestsHttpConnection,
        timeout=wait,
        # OpenSearchIndex._call resends, within each request's wait (RESENDS).
        max_retries=0,
        retry_on_timeout=False,
    )
    return OpenSearchIndex(
        client, settings.opensearch_index, dimensions, settings.opensearch_flavour, wait
    )
