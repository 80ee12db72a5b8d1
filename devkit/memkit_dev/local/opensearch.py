"""A strict OpenSearch on loopback: the subset memkit.vectors.opensearch sends, nothing more.

The tests run the real adapter, opensearch-py and SigV4 signing against it, and the local
stack uses it as its vector index (flavour domain, no auth), so the production adapter runs
end to end on one machine. It answers like OpenSearch for what it implements:

- HEAD/PUT /{index}, PUT /{index}/_mapping, PUT /{index}/_settings (domain): the body must be
  memkit's mapping (k-NN on, a faiss HNSW innerproduct vector, every
  field of memkit.vectors.protocol with its type; gc_deletes on a domain, none on serverless).
  A text field takes the default analyzer or `analyzer: english`, and at most one multi-field,
  `english` (a text field with `analyzer: english`); memkit's `text` keeps the default with
  its `text.english`, and `context` is english. Another analyzer or parameter is refused. A
  create may leave out what memkit added in place later (`context`, `speaker`, the
  `text.english` multi-field: an index a release before issue 15 made); PUT _mapping adds
  fields and multi-fields as OpenSearch merges them (an analyzer never changes, a
  multi-field it leaves out stays), and docs indexed before a field was mapped have no value
  in it until they are written again.
- POST /_bulk and /{index}/_bulk: index and delete actions. A domain takes custom ids with
  external versions (409 for a version that is not newer, tombstones kept for the index's
  gc_deletes, 404 not_found for a delete of an absent doc); a serverless collection takes no
  custom id and no version in an index action and generates ids. Item errors (a vector of the
  wrong dimension, a value a field's type refuses) come back per item, the others are written.
- POST /{index}/_search: a knn query with its filter inside; a bool of `should` match
  clauses (each with an optional boost) on english-analysed fields, `minimum_should_match: 1`
  and a filter, scored as OpenSearch sums them (each clause's BM25 times its boost, over
  the docs the filter allows, best first); inside a filter, a bool's `should` with
  `minimum_should_match: 1` (any of its clauses: memkit's `or` conditions) and `exists`
  (in a must_not too); a bool filter with sort and from/size (a range
  on a keyword compares strings, as the orphan sweep's `doc_id > cursor` needs); a terms
  lookup. A match on an unmapped field matches nothing, as in OpenSearch; a match on another
  mapped field (the plain `text` among them), in a must, or a should without
  minimum_should_match 1 is refused.
- Generations (memkit reindex): PUT /{index} of any k-NN dimension (each index keeps its
  own), GET /_alias/{name}, POST /_aliases with add, remove and remove_index actions applied
  atomically (one index per alias, as memkit keeps them), DELETE /{index}. Every index path
  above also takes an alias that leads to one index, as OpenSearch resolves it.

Filters are evaluated with OpenSearch's rules, on the values each doc indexed, read from
postings (value -> ids) as an inverted index reads them, so a search costs what its filter
leaves, not the index's size; vectors are ranked exactly (the rows a filter allows, one matrix
product) and scored as faiss's innerproduct space scores them; BM25 comes from memkit's
KeywordIndex, one per english-analysed field (its `terms` mirror the english analyzer), so a
keyword search here ranks as LocalVectorIndex.keyword does.

Anything else (another path, method or query parameter, post_filter, a script, an unknown
clause or operator, _refresh, _delete_by_query, a custom _id on serverless) is answered 400
with an OpenSearch error body and recorded in `rejected`, so a test can assert the adapter
sent nothing outside the subset. With `require_sigv4`, a request whose AWS4-HMAC-SHA256
signature does not verify for the service, region and credentials given is answered 403.
Every search sees every write at once (no refresh interval).

`capacity.scale_to_zero()` makes every request wait until `capacity.wake()`, as the first
requests to a Serverless collection that scaled to zero wait while its capacity returns (10
to 30 s on AWS); a request its client gave up on meanwhile is still served on the wake, as a
timed-out request may have been applied on AWS.
"""

from __future__ import annotations

import heapq
import json
import math
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from werkzeug.wrappers import Request, Response

from memkit.vectors.keyword import KeywordIndex, terms, weighted_matches
from memkit.vectors.protocol import INDEX_TYPES, Removal
from memkit_dev.local.loopback import LoopbackServer
from memkit_dev.local.sigv4 import SignatureRejected, SigningKey, verify

Flavour = Literal["domain", "serverless"]
# A filter clause evaluated: the ids of the docs it matches.
Matches = set[str]

MAX_WINDOW = 10_000
# indices.query.bool.max_clause_count: the term clauses a whole query may hold.
MAX_CLAUSE_COUNT = 1024
# The fake credentials the tests and the local stack sign with (as moto's).
FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"  # noqa: S105
# The fields memkit's mapping must give, with their types (besides the vector).
EXPECTED_FIELDS: dict[str, str] = {
    "text": "text",
    "context": "text",
    "doc_id": "keyword",
    "version": "long",
    "deleted": "boolean",
    **INDEX_TYPES,
}
SCALAR_TYPES = frozenset({"text", "keyword", "double", "long", "boolean"})
# Fields memkit added to existing indexes by PUT _mapping (issue 15): a create may lack them.
ADDED_IN_PLACE = frozenset({"context", "speaker"})
# The one analyzer a text field may name here (memkit.vectors.keyword.terms mirrors it).
ENGLISH = "english"
DEFAULT_ANALYZER = "default"
ENGLISH_TEXT = {"type": "text", "analyzer": ENGLISH}
# The analyzer of each of memkit's text fields and multi-fields, by path.
EXPECTED_ANALYZERS = {"text": DEFAULT_ANALYZER, "text.english": ENGLISH, "context": ENGLISH}
VECTOR_METHOD = {"name": "hnsw", "engine": "faiss", "space_type": "innerproduct"}
_TIME_VALUE = re.compile(r"(\d+)(ms|s|m|h|d)")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_INDEX_NAME = re.compile(r"[a-z0-9][a-z0-9_.+-]{0,254}")
_SEARCH_KEYS = frozenset({"size", "from", "query", "_source", "sort"})
# OpenSearch's k-NN limit for a faiss vector's dimension.
MAX_DIMENSION = 16_000


class Capacity:
    """What serves the requests: up, or scaled to zero until `wake()`. `waiting` is set once
    a request waits for it (so a test wakes it when a request is held, not after a delay)."""

    def __init__(self) -> None:
        self._up = threading.Event()
        self._up.set()
        self.waiting = threading.Event()

    def scale_to_zero(self) -> None:
        self.waiting.clear()
        self._up.clear()

    def wake(self) -> None:
        self._up.set()

    @property
    def asleep(self) -> bool:
        """Scaled to zero, and not woken since."""
        return not self._up.is_set()

    def serve(self) -> None:
        """Returns once there is capacity to serve a request."""
        if not self._up.is_set():
            self.waiting.set()
            self._up.wait()


@dataclass(frozen=True)
class Rejection:
    """A request the server refused: outside the subset, or malformed."""

    method: str
    path: str
    type: str
    reason: str


def _leaf_clauses(query: Any) -> int:
    """How many leaf queries (term, terms, range, exists, prefix...) a query tree holds."""
    if isinstance(query, list):
        return sum(_leaf_clauses(item) for item in query)
    if not isinstance(query, dict):
        return 0
    leaves = sum(1 for key in query if key in _LEAF_QUERIES)
    return leaves + sum(
        _leaf_clauses(value) for key, value in query.items() if key not in _LEAF_QUERIES
    )


_LEAF_QUERIES = frozenset({"term", "terms", "range", "exists", "prefix", "match_none", "ids"})


class _Problem(Exception):
    def __init__(self, status: int, type_: str, reason: str, *, rejected: bool = True) -> None:
        super().__init__(reason)
        self.status = status
        self.type = type_
        self.reason = reason
        self.rejected = rejected


def _unsupported(reason: str) -> _Problem:
    return _Problem(400, "illegal_argument_exception", reason)


def _parsing(reason: str) -> _Problem:
    return _Problem(400, "parsing_exception", reason)


def _json(payload: Any, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def _error_body(status: int, type_: str, reason: str) -> dict[str, Any]:
    return {"error": {"type": type_, "reason": reason}, "status": status}


def _seconds(value: Any) -> float:
    match = _TIME_VALUE.fullmatch(str(value))
    if match is None:
        raise _unsupported(f"failed to parse time value [{value}]")
    return int(match.group(1)) * _UNITS[match.group(2)]


def _single(spec: Any, what: str) -> tuple[str, Any]:
    if not isinstance(spec, dict) or len(spec) != 1:
        raise _parsing(f"[{what}] takes exactly one field")
    return next(iter(spec.items()))


# --- values as a field's type indexes them ---------------------------------------------------


def _typed(kind: str, value: Any) -> Any:
    """One value as a field of type `kind` indexes (or a query compares) it; ValueError if
    the type refuses it."""
    if kind == "keyword":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str | int | float):
            return str(value)
    elif kind == "double":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            return float(value)  # OpenSearch coerces numeric strings
    elif kind == "long":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
    elif kind == "boolean":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
    elif kind == "text" and isinstance(value, str):
        return value
    raise ValueError(f"failed to parse a value of type [{kind}]")


@dataclass
class _Doc:
    os_id: str
    source: dict[str, Any]
    version: int
    indexed: dict[str, list[Any]]
    has_vector: bool


@dataclass
class _Index:
    name: str
    dimensions: int
    fields: dict[str, str]
    gc_deletes: float
    # text field (or multi-field: text.english) -> its analyzer
    analyzers: dict[str, str]
    # english-analysed field -> BM25 over the values docs indexed in it
    searchable: dict[str, KeywordIndex] = field(default_factory=dict)
    # Raw vectors by row (a doc keeps its row); ranking reads only the rows a filter allows.
    matrix: np.ndarray = field(init=False)
    rows: dict[str, int] = field(default_factory=dict)
    docs: dict[str, _Doc] = field(default_factory=dict)
    tombstones: dict[str, tuple[int, float]] = field(default_factory=dict)
    sequence: int = 0
    # field -> indexed value -> ids of the docs holding it (filters read these, not docs)
    postings: dict[str, dict[Any, set[str]]] = field(default_factory=dict)
    vectorless: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.matrix = np.zeros((64, self.dimensions), dtype=np.float32)
        self._search_analysed()

    def extend(self, fields: dict[str, str], analyzers: dict[str, str]) -> None:
        """Map more fields (PUT _mapping); a newly searchable one holds no doc until a doc
        is written after it, as OpenSearch leaves docs indexed before a mapping change."""
        self.fields.update(fields)
        self.analyzers.update(analyzers)
        self._search_analysed()

    def _search_analysed(self) -> None:
        for path, analyzer in self.analyzers.items():
            if analyzer == ENGLISH:
                self.searchable.setdefault(path, KeywordIndex())

    def _store_vector(self, os_id: str, vector: list[float]) -> None:
        row = self.rows.setdefault(os_id, len(self.rows))
        if row == len(self.matrix):
            grown = np.zeros((2 * len(self.matrix), self.dimensions), dtype=np.float32)
            grown[:row] = self.matrix
            self.matrix = grown
        self.matrix[row] = vector

    def _post(self, doc: _Doc) -> None:
        for name, values in doc.indexed.items():
            for value in values:
                self.postings.setdefault(name, {}).setdefault(value, set()).add(doc.os_id)
        if not doc.has_vector:
            self.vectorless.add(doc.os_id)

    def _unpost(self, doc: _Doc) -> None:
        for name, values in doc.indexed.items():
            held = self.postings.get(name, {})
            for value in values:
                ids = held.get(value)
                if ids is not None:
                    ids.discard(doc.os_id)
                    if not ids:
                        del held[value]
        self.vectorless.discard(doc.os_id)

    def version_of(self, os_id: str) -> int | None:
        """The version a versioned write meets: the doc's, or a delete's for gc_deletes."""
        doc = self.docs.get(os_id)
        if doc is not None:
            return doc.version
        tombstone = self.tombstones.get(os_id)
        if tombstone is None:
            return None
        if time.monotonic() - tombstone[1] > self.gc_deletes:
            del self.tombstones[os_id]
            return None
        return tombstone[0]

    def parse(self, source: Any) -> tuple[dict[str, list[Any]], list[float] | None]:
        """The values a doc indexes, by field (ValueError: a mapper_parsing_exception)."""
        if not isinstance(source, dict):
            raise ValueError("the document must be an object")
        indexed: dict[str, list[Any]] = {}
        vector: list[float] | None = None
        for name, value in source.items():
            kind = self.fields.get(name)
            if kind is None or value is None:
                continue  # dynamic false: kept in _source, not indexed
            if kind == "knn_vector":
                if not isinstance(value, list) or not all(
                    isinstance(x, int | float) and not isinstance(x, bool) for x in value
                ):
                    raise ValueError(f"field [{name}] must be an array of numbers")
                if len(value) != self.dimensions:
                    raise ValueError(
                        f"Vector dimension mismatch. Expected: {self.dimensions}, "
                        f"Given: {len(value)}"
                    )
                vector = [float(x) for x in value]
                continue
            values = value if isinstance(value, list) else [value]
            indexed[name] = [_typed(kind, item) for item in values if item is not None]
        return indexed, vector

    def write(self, os_id: str, source: dict[str, Any], version: int) -> bool:
        """Store a doc; True if it replaced a live one."""
        indexed, vector = self.parse(source)
        replaced = os_id in self.docs
        self.sequence += 1
        if vector is not None:
            self._store_vector(os_id, vector)
        for path, keywords in self.searchable.items():
            value = source.get(path.split(".", 1)[0])  # text.english analyses `text`
            keywords.upsert("", os_id, value if isinstance(value, str) else "", self.sequence, {})
        previous = self.docs.get(os_id)
        if previous is not None:
            self._unpost(previous)
        doc = _Doc(os_id, source, version, indexed, vector is not None)
        self.docs[os_id] = doc
        self._post(doc)
        self.tombstones.pop(os_id, None)
        return replaced

    def delete(self, os_id: str, version: int) -> bool:
        """Delete a doc (its version stays for gc_deletes); True if it was there."""
        previous = self.docs.pop(os_id, None)
        if previous is not None:
            self._unpost(previous)
        self.sequence += 1
        for keywords in self.searchable.values():
            keywords.remove([Removal(id=os_id, tenant="", version=self.sequence)])
        self.tombstones[os_id] = (version, time.monotonic())
        return previous is not None


# --- queries -------------------------------------------------------------------------------


def _value(spec: Any) -> Any:
    return spec.get("value") if isinstance(spec, dict) and set(spec) == {"value"} else spec


class _Query:
    """A search body's query, compiled against an index's mapping and evaluated on its
    postings (the ids holding each value), as an inverted index answers a filter: a term is
    a lookup, a bool is set algebra, a range or prefix reads the field's distinct values."""

    def __init__(self, index: _Index) -> None:
        self._index = index

    def _kind(self, name: Any) -> str | None:
        if not isinstance(name, str):
            raise _parsing("a field name must be a string")
        kind = self._index.fields.get(name)
        if kind in ("text", "knn_vector"):
            raise _unsupported(f"this server does not filter on [{kind}] field [{name}]")
        return kind

    def _compare(self, kind: str, value: Any) -> Any:
        try:
            return _typed(kind, value)
        except ValueError as exc:
            raise _Problem(400, "query_shard_exception", str(exc)) from exc

    def _holding(self, name: str, accepts: Callable[[Any], bool]) -> Matches:
        """The docs holding a value of field `name` that `accepts`."""
        found: Matches = set()
        for value, ids in self._index.postings.get(name, {}).items():
            if accepts(value):
                found |= ids
        return found

    def all(self) -> Matches:
        return set(self._index.docs)

    def clause(self, clause: Any) -> Matches:
        """The docs a filter clause matches, by the values each doc indexed."""
        kind, spec = _single(clause, "query")
        if kind == "bool":
            return self._bool(spec)
        if kind in ("match_all", "match_none"):
            if spec != {}:
                raise _parsing(f"[{kind}] takes no parameters")
            return self.all() if kind == "match_all" else set()
        if kind == "exists":
            if not isinstance(spec, dict) or set(spec) != {"field"}:
                raise _parsing("[exists] takes one field")
            name = spec["field"]
            self._kind(name)
            return self._holding(name, lambda value: True)
        leaves: dict[str, Callable[[str, Any], Matches]] = {
            "term": self._term,
            "terms": self._terms,
            "prefix": self._prefix,
            "range": self._range,
        }
        if kind in leaves:
            name, argument = _single(spec, kind)
            return leaves[kind](name, argument)
        raise _parsing(f"unknown query [{kind}]")

    def _bool(self, spec: Any) -> Matches:
        occurs = {"filter", "must", "must_not", "should", "minimum_should_match"}
        if not isinstance(spec, dict) or not set(spec) <= occurs:
            raise _parsing("[bool] takes filter, must, must_not and should here")
        spec = dict(spec)
        minimum = spec.pop("minimum_should_match", None)
        if ("should" in spec) != (minimum is not None) or minimum not in (None, 1):
            # a filter's should: any of its clauses (what memkit's `or` conditions send)
            raise _unsupported("a filter's [should] takes minimum_should_match 1 here")
        parts: dict[str, list[Matches]] = {}
        for occur, clauses in spec.items():
            listed = clauses if isinstance(clauses, list) else [clauses]
            parts[occur] = [self.clause(clause) for clause in listed]
        required = sorted(parts.get("filter", []) + parts.get("must", []), key=len)
        found = set(required[0]) if required else self.all()
        for matches in required[1:]:
            found &= matches
        if "should" in parts:
            found &= set().union(*parts["should"])
        for matches in parts.get("must_not", []):
            found -= matches
        return found

    def _term(self, name: str, argument: Any) -> Matches:
        kind = self._kind(name)
        if kind is None:
            return set()  # an unmapped field matches nothing
        wanted = self._compare(kind, _value(argument))
        return set(self._index.postings.get(name, {}).get(wanted, ()))

    def _terms(self, name: str, argument: Any) -> Matches:
        kind = self._kind(name)
        if not isinstance(argument, list):
            raise _parsing("[terms] takes an array of values")
        if kind is None:
            return set()
        held = self._index.postings.get(name, {})
        found: Matches = set()
        for value in {self._compare(kind, value) for value in argument}:
            found |= held.get(value, set())
        return found

    def _prefix(self, name: str, argument: Any) -> Matches:
        kind = self._kind(name)
        prefix = _value(argument)
        if kind not in (None, "keyword") or not isinstance(prefix, str):
            raise _Problem(400, "query_shard_exception", f"[prefix] on [{name}] needs a keyword")
        return self._holding(name, lambda value: value.startswith(prefix))

    def _range(self, name: str, argument: Any) -> Matches:
        kind = self._kind(name)
        if kind == "keyword":
            return self._keyword_range(name, argument)
        if kind not in (None, "double", "long"):
            raise _unsupported("this server ranges over numeric and keyword fields only")
        if (
            not isinstance(argument, dict)
            or not argument
            or not set(argument)
            <= {
                "gt",
                "gte",
                "lt",
                "lte",
            }
        ):
            raise _parsing("[range] takes gt, gte, lt and lte")
        bounds = {op: self._compare("double", bound) for op, bound in argument.items()}
        tests = {
            "gt": lambda have, bound: have > bound,
            "gte": lambda have, bound: have >= bound,
            "lt": lambda have, bound: have < bound,
            "lte": lambda have, bound: have <= bound,
        }
        return self._holding(
            name, lambda have: all(tests[op](have, bound) for op, bound in bounds.items())
        )

    def _keyword_range(self, name: str, argument: Any) -> Matches:
        """A range on a keyword: terms compared as strings (OpenSearch compares bytes)."""
        if (
            not isinstance(argument, dict)
            or not argument
            or not set(argument) <= {"gt", "gte", "lt", "lte"}
            or not all(isinstance(bound, str) for bound in argument.values())
        ):
            raise _parsing("[range] on a keyword takes gt, gte, lt and lte strings")
        tests: dict[str, Callable[[bytes, bytes], bool]] = {
            "gt": lambda have, bound: have > bound,
            "gte": lambda have, bound: have >= bound,
            "lt": lambda have, bound: have < bound,
            "lte": lambda have, bound: have <= bound,
        }
        bounds = {op: bound.encode() for op, bound in argument.items()}

        def within(have: str) -> bool:
            raw = have.encode()
            return all(tests[op](raw, bound) for op, bound in bounds.items())

        return self._holding(name, within)


def _best_first(item: tuple[str, float]) -> tuple[float, str]:
    """A scored doc's place: best score first, ties by id."""
    return -item[1], item[0]


def _text_analyzers(name: str, mapping: dict[str, Any]) -> dict[str, str]:
    """The analyzer of a text field and of its multi-field (`<name>.english`), by path."""
    if not set(mapping) <= {"type", "analyzer", "fields"}:
        raise _unsupported(f"unsupported mapping for [{name}]: {mapping}")
    analyzer = mapping.get("analyzer", DEFAULT_ANALYZER)
    if "analyzer" in mapping and analyzer != ENGLISH:
        raise _unsupported(
            f"this server analyses text with the built-in [{ENGLISH}] analyzer alone, "
            f"not [{analyzer}] ([{name}])"
        )
    found = {name: str(analyzer)}
    if "fields" in mapping:
        if mapping["fields"] != {ENGLISH: ENGLISH_TEXT}:
            raise _unsupported(f"[{name}] takes one multi-field here: english, {ENGLISH_TEXT}")
        found[f"{name}.{ENGLISH}"] = ENGLISH
    return found


def _source_filter(spec: Any) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
    if spec is None or spec is True:
        return lambda source: source
    if spec is False:
        return lambda source: None
    if isinstance(spec, list) and all(isinstance(name, str) for name in spec):
        return lambda source: {k: v for k, v in source.items() if k in spec}
    if isinstance(spec, dict) and set(spec) <= {"includes", "excludes"}:
        includes, excludes = spec.get("includes"), spec.get("excludes", [])
        return lambda source: {
            k: v
            for k, v in source.items()
            if (includes is None or k in includes) and k not in excludes
        }
    raise _parsing("[_source] takes a boolean, a list of fields, or includes/excludes")


# --- SigV4 ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Signer:
    """The one key and scope the server's SigV4 check accepts (memkit_dev.local.sigv4)."""

    service: str
    region: str
    key: SigningKey

    def problem(self, request: Request, body: bytes) -> str | None:
        """Why the request's signature does not verify (None: it does)."""
        try:
            verify(
                request,
                body,
                service=self.service,
                region=self.region,
                key_for=lambda access_key: self.key if access_key == self.key.access_key else None,
                require_payload_hash=self.service == "aoss",
            )
        except SignatureRejected as rejected:
            return rejected.message
        return None


# --- the server ----------------------------------------------------------------------------


class LoopbackOpenSearch(LoopbackServer):
    """An OpenSearch-subset server on 127.0.0.1 (port 0: any free port), in a thread of
    this process, for a managed domain or a serverless collection; thread-safe."""

    def __init__(
        self,
        dimensions: int,
        *,
        flavour: Flavour = "domain",
        require_sigv4: bool = False,
        service: str | None = None,
        region: str = "us-east-1",
        access_key: str = FAKE_ACCESS_KEY,
        secret_key: str = FAKE_SECRET_KEY,
        session_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.dimensions = dimensions
        self.flavour: Flavour = flavour
        self._signer = (
            _Signer(
                service or ("aoss" if flavour == "serverless" else "es"),
                region,
                SigningKey(access_key, secret_key, session_token),
            )
            if require_sigv4
            else None
        )
        self._lock = threading.RLock()
        self._indices: dict[str, _Index] = {}
        # alias -> the one index it leads to
        self._aliases: dict[str, str] = {}
        self.rejected: list[Rejection] = []
        self.denied: list[Rejection] = []
        self.requests: list[tuple[str, str]] = []
        self.created: list[str] = []
        self.capacity = Capacity()
        super().__init__("loopback-opensearch", host, port)

    def stop(self) -> None:
        self.capacity.wake()  # no request thread stays parked
        super().stop()

    def documents(self, index: str) -> list[tuple[str, dict[str, Any]]]:
        """The stored docs of `index` (or of the index an alias leads to) as (_id,
        _source), for tests."""
        with self._lock:
            found = self._indices.get(self._aliases.get(index, index))
            return [(doc.os_id, dict(doc.source)) for doc in (found.docs.values() if found else ())]

    def indices(self) -> dict[str, list[str]]:
        """Every index with the aliases that lead to it, for tests."""
        with self._lock:
            return {
                name: sorted(alias for alias, to in self._aliases.items() if to == name)
                for name in sorted(self._indices)
            }

    # --- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        body = request.get_data(cache=True)
        if self._signer is not None:
            reason = self._signer.problem(request, body)
            if reason is not None:
                with self._lock:
                    self.denied.append(
                        Rejection(request.method, request.path, "security_exception", reason)
                    )
                response = _json(_error_body(403, "security_exception", reason), 403)
                return response(environ, start_response)
        self.capacity.serve()
        try:
            with self._lock:
                self.requests.append((request.method, request.path))
                response = self._route(request, body)
        except _Problem as problem:
            if problem.rejected:
                with self._lock:
                    self.rejected.append(
                        Rejection(request.method, request.path, problem.type, problem.reason)
                    )
            payload = _error_body(problem.status, problem.type, problem.reason)
            response = _json(payload, problem.status)
        except Exception as exc:  # a bug here: answer like OpenSearch, and make tests see it
            reason = f"{type(exc).__name__} in the loopback server"
            with self._lock:
                self.rejected.append(Rejection(request.method, request.path, "exception", reason))
            response = _json(_error_body(500, "exception", reason), 500)
        return response(environ, start_response)

    def _route(self, request: Request, body: bytes) -> Response:
        if request.args:
            raise _unsupported(f"unsupported query parameters {sorted(request.args)}")
        segments = request.path.strip("/").split("/")
        method = request.method
        if segments == ["_bulk"] and method == "POST":
            return self._bulk(None, body)
        if segments == ["_aliases"] and method == "POST":
            return self._update_aliases(self._object(body))
        if len(segments) == 2 and segments[0] == "_alias" and method == "GET":
            return self._get_alias(segments[1])
        target = segments[0]
        if target.startswith("_") or not _INDEX_NAME.fullmatch(target):
            raise _unsupported(f"no handler for [{method} {request.path}]")
        action = segments[1] if len(segments) == 2 else None
        if len(segments) == 1 and method in ("HEAD", "PUT", "DELETE"):
            if body and method != "PUT":
                raise _unsupported(f"[{method} {request.path}] takes no body")
            if method == "HEAD":
                exists = target in self._indices or target in self._aliases
                return Response(status=200 if exists else 404)
            if method == "DELETE":
                return self._delete_index(target)
            return self._create(target, self._object(body))
        if len(segments) != 2:
            raise _unsupported(f"no handler for [{method} {request.path}]")
        if (method, action) == ("POST", "_bulk"):
            return self._bulk(target, body)
        if (method, action) == ("POST", "_search"):
            return self._search(self._existing(target), self._object(body))
        if (method, action) == ("PUT", "_mapping"):
            return self._put_mapping(self._existing(target), self._object(body))
        if (method, action) == ("PUT", "_settings") and self.flavour == "domain":
            return self._put_settings(self._existing(target), self._object(body))
        if action == "_refresh" and self.flavour == "serverless":
            raise _unsupported("serverless vector collections do not support _refresh")
        raise _unsupported(f"no handler for [{method} {request.path}] in this server")

    def _object(self, body: bytes) -> dict[str, Any]:
        try:
            parsed = json.loads(body)
        except ValueError as exc:
            raise _parsing("the body is not JSON") from exc
        if not isinstance(parsed, dict):
            raise _parsing("the body must be a JSON object")
        return parsed

    def _existing(self, name: str) -> _Index:
        index = self._indices.get(self._aliases.get(name, name))
        if index is None:  # OpenSearch's own answer, not a request outside the subset
            missing = f"no such index [{name}]"
            raise _Problem(404, "index_not_found_exception", missing, rejected=False)
        return index

    # --- index management ------------------------------------------------------------------

    def _settings(self, spec: Any, *, creating: bool) -> dict[str, Any]:
        if not isinstance(spec, dict):
            raise _parsing("[settings] must be an object")
        flat: dict[str, Any] = {}
        for key, value in spec.items():
            if key == "index" and isinstance(value, dict):
                flat.update({f"index.{k}": v for k, v in value.items()})
            else:
                flat[key] = value
        allowed = {"index.gc_deletes"} if self.flavour == "domain" else set()
        if creating:
            allowed.add("index.knn")
            if flat.get("index.knn") not in (True, "true"):
                raise _unsupported("memkit's index needs index.knn true")
            if self.flavour == "domain" and "index.gc_deletes" not in flat:
                raise _unsupported("a domain index must keep deletes' versions (gc_deletes)")
        unknown = set(flat) - allowed
        if unknown:
            raise _unsupported(f"unsupported settings {sorted(unknown)} ({self.flavour})")
        return flat

    def _properties(
        self, spec: Any, *, vector_allowed: bool
    ) -> tuple[dict[str, str], dict[str, str]]:
        """A mapping's fields with their types (multi-fields by path: text.english), and
        the analyzer of each text field."""
        if not isinstance(spec, dict) or not set(spec) <= {"dynamic", "properties"}:
            raise _parsing("[mappings] takes dynamic and properties")
        if spec.get("dynamic", False) not in (False, "false"):
            raise _unsupported("memkit's mapping sets dynamic false")
        properties = spec.get("properties")
        if not isinstance(properties, dict):
            raise _parsing("[mappings] needs properties")
        fields: dict[str, str] = {}
        analyzers: dict[str, str] = {}
        for name, mapping in properties.items():
            kind = mapping.get("type") if isinstance(mapping, dict) else None
            if not isinstance(name, str) or "." in name:
                raise _unsupported(f"this server maps top-level fields by plain names: [{name}]")
            if kind == "text":
                analysed = _text_analyzers(name, mapping)
                analyzers.update(analysed)
                fields.update(dict.fromkeys(analysed, "text"))
            elif kind == "knn_vector" and vector_allowed:
                dimension = mapping.get("dimension")
                expected = {"type": kind, "dimension": dimension, "method": VECTOR_METHOD}
                valid = isinstance(dimension, int) and not isinstance(dimension, bool)
                if mapping != expected or not valid or not 0 < dimension <= MAX_DIMENSION:
                    raise _unsupported(
                        f"[{name}] must be a faiss hnsw innerproduct knn_vector of a "
                        f"dimension from 1 to {MAX_DIMENSION}"
                    )
            elif kind not in SCALAR_TYPES or set(mapping) != {"type"}:
                raise _unsupported(f"unsupported mapping for [{name}]: {mapping}")
            fields[name] = str(kind)
        wrong = {
            name: kind for name, kind in EXPECTED_FIELDS.items() if fields.get(name, kind) != kind
        }
        if wrong:
            raise _unsupported(f"fields with the wrong type: {sorted(wrong)}")
        misanalysed = [
            path
            for path, analyzer in EXPECTED_ANALYZERS.items()
            if analyzers.get(path, analyzer) != analyzer
        ]
        if misanalysed:
            raise _unsupported(f"text fields with the wrong analyzer: {misanalysed}")
        return fields, analyzers

    def _create(self, name: str, body: dict[str, Any]) -> Response:
        if not set(body) <= {"settings", "mappings"}:
            raise _parsing("an index body takes settings and mappings")
        settings = self._settings(body.get("settings"), creating=True)
        fields, analyzers = self._properties(body.get("mappings"), vector_allowed=True)
        missing = set(EXPECTED_FIELDS) - ADDED_IN_PLACE - set(fields)
        if missing or fields.get("vector") != "knn_vector":
            raise _unsupported(f"the mapping lacks {sorted(missing | {'vector'} - set(fields))}")
        if name in self._aliases:  # OpenSearch's MetadataCreateIndexService says this
            raise _Problem(
                400,
                "invalid_index_name_exception",
                f"Invalid index name [{name}], already exists as alias",
                rejected=False,
            )
        if name in self._indices:
            raise _Problem(
                400,
                "resource_already_exists_exception",
                f"index [{name}] already exists",
                rejected=False,
            )
        gc_deletes = _seconds(settings.get("index.gc_deletes", "60s"))
        dimension = int(body["mappings"]["properties"]["vector"]["dimension"])
        self._indices[name] = _Index(name, dimension, fields, gc_deletes, analyzers)
        self.created.append(name)
        return _json({"acknowledged": True, "shards_acknowledged": True, "index": name})

    def _delete_index(self, name: str) -> Response:
        if name in self._aliases:
            raise _unsupported(
                f"The provided expression [{name}] matches an alias, specify the corresponding "
                "concrete indices instead."
            )
        if name not in self._indices:
            raise _Problem(
                404, "index_not_found_exception", f"no such index [{name}]", rejected=False
            )
        self._drop(name)
        return _json({"acknowledged": True})

    def _drop(self, name: str) -> None:
        del self._indices[name]
        for alias in [alias for alias, to in self._aliases.items() if to == name]:
            del self._aliases[alias]

    def _get_alias(self, name: str) -> Response:
        if not _INDEX_NAME.fullmatch(name):
            raise _unsupported(f"this server looks up one alias by name, not [{name}]")
        index = self._aliases.get(name)
        if index is None:
            # OpenSearch's answer for a name that is no alias (an index's name included).
            return _json({"error": f"alias [{name}] missing", "status": 404}, 404)
        return _json({index: {"aliases": {name: {}}}})

    def _update_aliases(self, body: dict[str, Any]) -> Response:
        """Every action checked first, then all applied: one atomic switch."""
        actions = body.get("actions")
        if set(body) != {"actions"} or not isinstance(actions, list) or not actions:
            raise _parsing("[_aliases] takes a non-empty list of actions")
        indices = set(self._indices)
        aliases = dict(self._aliases)
        for entry in actions:
            kind, spec = _single(entry, "alias action")
            if kind == "remove_index":
                if not isinstance(spec, dict) or set(spec) != {"index"}:
                    raise _parsing("[remove_index] takes an index")
                name = spec["index"]
                if name not in indices:
                    raise _Problem(404, "index_not_found_exception", f"no such index [{name}]")
                indices.discard(name)
                aliases = {alias: to for alias, to in aliases.items() if to != name}
                continue
            if kind not in ("add", "remove") or not isinstance(spec, dict):
                raise _unsupported(f"this server takes add, remove and remove_index, not [{kind}]")
            if set(spec) != {"index", "alias"} or not all(
                isinstance(value, str) and _INDEX_NAME.fullmatch(value) for value in spec.values()
            ):
                raise _unsupported(f"[{kind}] takes one concrete index and one alias here")
            name, alias = spec["index"], spec["alias"]
            if name not in indices:
                raise _Problem(404, "index_not_found_exception", f"no such index [{name}]")
            if kind == "remove":
                if aliases.get(alias) != name:
                    raise _Problem(404, "aliases_not_found_exception", f"aliases [{alias}] missing")
                del aliases[alias]
                continue
            if alias in indices:
                raise _Problem(
                    400,
                    "invalid_alias_name_exception",
                    f"Invalid alias name [{alias}]: an index or data stream exists with the "
                    "same name as the alias",
                )
            if aliases.get(alias, name) != name:
                raise _unsupported(f"this server keeps one index per alias: [{alias}]")
            aliases[alias] = name
        for name in set(self._indices) - indices:
            del self._indices[name]
        self._aliases = aliases
        return _json({"acknowledged": True})

    def _put_mapping(self, index: _Index, body: dict[str, Any]) -> Response:
        fields, analyzers = self._properties(body, vector_allowed=False)
        for name, kind in fields.items():
            if index.fields.get(name, kind) != kind:
                raise _unsupported(
                    f"mapper [{name}] cannot be changed from type [{index.fields[name]}] "
                    f"to [{kind}]"
                )
        for path, analyzer in analyzers.items():
            held = index.analyzers.get(path, analyzer)
            if held != analyzer:
                raise _unsupported(
                    f"Mapper for [{path}] conflicts with existing mapper:\n\tCannot update "
                    f"parameter [analyzer] from [{held}] to [{analyzer}]"
                )
        index.extend(fields, analyzers)
        return _json({"acknowledged": True})

    def _put_settings(self, index: _Index, body: dict[str, Any]) -> Response:
        settings = self._settings(body, creating=False)
        if "index.gc_deletes" in settings:
            index.gc_deletes = _seconds(settings["index.gc_deletes"])
        return _json({"acknowledged": True})

    # --- _bulk -----------------------------------------------------------------------------

    def _actions(
        self, path_index: str | None, body: bytes
    ) -> list[tuple[str, str, dict[str, Any], Any]]:
        if not body.endswith(b"\n"):
            raise _unsupported("the bulk request must be terminated by a newline [\\n]")
        lines = [line for line in body.split(b"\n") if line.strip()]
        actions: list[tuple[str, str, dict[str, Any], Any]] = []
        position = 0
        while position < len(lines):
            try:
                kind, meta = _single(json.loads(lines[position]), "bulk action")
            except ValueError as exc:
                raise _parsing("a bulk action line is not JSON") from exc
            if kind not in ("index", "delete") or not isinstance(meta, dict):
                raise _unsupported(f"this server takes index and delete actions, not [{kind}]")
            if not set(meta) <= {"_index", "_id", "version", "version_type"}:
                raise _unsupported(f"unsupported bulk metadata {sorted(meta)}")
            index = meta.get("_index", path_index)
            if index is None or (path_index is not None and index != path_index):
                raise _unsupported("each action needs the index of the path")
            index = self._aliases.get(str(index), index)
            self._check_meta(kind, meta)
            source: Any = None
            if kind == "index":
                position += 1
                if position >= len(lines):
                    raise _unsupported("an index action needs a source line")
                try:
                    source = json.loads(lines[position])
                except ValueError as exc:
                    raise _parsing("a bulk source line is not JSON") from exc
            actions.append((kind, str(index), meta, source))
            position += 1
        return actions

    def _check_meta(self, kind: str, meta: dict[str, Any]) -> None:
        if self.flavour == "serverless":
            if kind == "index" and "_id" in meta:
                raise _unsupported("Document ID is not supported in create/index operation request")
            if "version" in meta or "version_type" in meta:
                raise _unsupported("serverless vector collections take no external versions")
            if kind == "delete" and not isinstance(meta.get("_id"), str):
                raise _unsupported("a delete needs an _id")
            return
        version = meta.get("version")
        if not isinstance(meta.get("_id"), str) or not meta["_id"]:
            raise _unsupported("memkit's domain writes name each doc's _id")
        if not isinstance(version, int) or isinstance(version, bool) or version < 0:
            raise _unsupported("memkit's domain writes carry an external version")
        if meta.get("version_type") not in ("external", "external_gte"):
            raise _unsupported("memkit's domain writes use external versioning")

    def _bulk(self, path_index: str | None, body: bytes) -> Response:
        actions = self._actions(path_index, body)
        for _, name, _, _ in actions:
            if name not in self._indices:
                # OpenSearch would create it with dynamic mappings: never what memkit wants.
                raise _Problem(404, "index_not_found_exception", f"no such index [{name}]")
        items = [
            self._apply(kind, self._indices[name], meta, source)
            for kind, name, meta, source in actions
        ]
        errors = any("error" in next(iter(item.values())) for item in items)
        return _json({"took": 1, "errors": errors, "items": items})

    def _apply(self, kind: str, index: _Index, meta: dict[str, Any], source: Any) -> dict[str, Any]:
        os_id = str(meta.get("_id") or f"1%3A0%3A{secrets.token_urlsafe(15)}")
        version = int(meta.get("version", 1))
        base: dict[str, Any] = {"_index": index.name, "_id": os_id}
        if self.flavour == "domain":
            held = index.version_of(os_id)
            too_old = held is not None and (
                version < held if meta["version_type"] == "external_gte" else version <= held
            )
            if too_old:
                reason = (
                    f"[{os_id}]: version conflict, current version [{held}] is higher or "
                    f"equal to the one provided [{version}]"
                )
                error = {"type": "version_conflict_engine_exception", "reason": reason}
                return {kind: {**base, "status": 409, "error": error}}
        if kind == "delete":
            found = index.delete(os_id, version)
            result, status = ("deleted", 200) if found else ("not_found", 404)
            return {kind: {**base, "_version": version, "result": result, "status": status}}
        try:
            replaced = index.write(os_id, source, version)
        except ValueError as exc:
            error = {"type": "mapper_parsing_exception", "reason": str(exc)}
            return {kind: {**base, "status": 400, "error": error}}
        result, status = ("updated", 200) if replaced else ("created", 201)
        return {kind: {**base, "_version": version, "result": result, "status": status}}

    # --- _search ---------------------------------------------------------------------------

    def _search(self, index: _Index, body: dict[str, Any]) -> Response:
        unknown = set(body) - _SEARCH_KEYS
        if unknown:
            raise _parsing(f"this server does not take {sorted(unknown)} in a search")
        size, start = body.get("size", 10), body.get("from", 0)
        for name, number in (("size", size), ("from", start)):
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise _parsing(f"[{name}] must be a non-negative integer")
        if start + size > MAX_WINDOW:
            raise _unsupported(f"Result window is too large, from + size must be <= {MAX_WINDOW}")
        shown = _source_filter(body.get("_source"))
        query = body.get("query")
        kind, spec = _single(query, "query")
        compiler = _Query(index)
        sort_values: Callable[[_Doc], list[Any]] | None = None
        if kind == "knn":
            if "sort" in body:
                raise _unsupported("this server does not sort k-NN results")
            ranked = self._knn(index, compiler, spec)[:size]
            total = len(ranked)
        else:
            clauses, matches = self._scored_bool(index, compiler, query)
            if clauses is not None:
                # The filter's docs first, then each clause's BM25 among them only.
                scores = weighted_matches(clauses, "", matches) if matches else {}
                total = len(scores)  # every match, not the page
                if "sort" in body:
                    best = sorted(scores.items(), key=_best_first)
                else:
                    best = heapq.nsmallest(start + size, scores.items(), key=_best_first)
                pairs = [(index.docs[os_id], score) for os_id, score in best]
            else:
                pairs = [(doc, 0.0) for doc in index.docs.values() if doc.os_id in matches]
                total = len(pairs)
            if "sort" in body:
                pairs, sort_values = self._sorted(index, pairs, body["sort"])
            ranked = pairs[start : start + size]
        hits = []
        for doc, score in ranked:
            hit: dict[str, Any] = {"_index": index.name, "_id": doc.os_id, "_score": score}
            source = shown(doc.source)
            if source is not None:
                hit["_source"] = source
            if sort_values is not None:
                hit["_score"] = None
                hit["sort"] = sort_values(doc)
            hits.append(hit)
        top = max((hit["_score"] for hit in hits if hit["_score"] is not None), default=None)
        return _json(
            {
                "took": 1,
                "timed_out": False,
                "_shards": {"total": 1, "successful": 1, "skipped": 0, "failed": 0},
                "hits": {
                    "total": {"value": total, "relation": "eq"},
                    "max_score": top,
                    "hits": hits,
                },
            }
        )

    def _knn(self, index: _Index, compiler: _Query, spec: Any) -> list[tuple[_Doc, float]]:
        name, knn = _single(spec, "knn")
        if index.fields.get(name) != "knn_vector":
            raise _unsupported(f"[{name}] is not a knn_vector field")
        if not isinstance(knn, dict) or not {"vector", "k"} <= set(knn) <= {
            "vector",
            "k",
            "filter",
        }:
            raise _parsing("[knn] takes vector, k and filter here")
        vector, k = knn["vector"], knn["k"]
        if not isinstance(vector, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vector
        ):
            raise _parsing("[vector] must be an array of numbers")
        if len(vector) != index.dimensions:
            raise _unsupported(f"Query vector has invalid dimension: expected {index.dimensions}")
        if not isinstance(k, int) or isinstance(k, bool) or not 0 < k <= MAX_WINDOW:
            raise _unsupported("[k] must be between 1 and 10000")
        allowed = compiler.clause(knn["filter"]) if "filter" in knn else compiler.all()
        allowed -= index.vectorless
        if not allowed:
            return []
        ids = sorted(allowed)
        rows = np.fromiter((index.rows[os_id] for os_id in ids), dtype=np.int64, count=len(ids))
        products = index.matrix[rows] @ np.asarray(vector, dtype=np.float32)
        # faiss's innerproduct space scores the raw inner product: 1 + ip when it is
        # positive, else 1 / (1 - ip) (monotonic: the best products are the best scores).
        best = np.argsort(-products, kind="stable")[:k]  # ids are sorted: ties by id
        ranked = []
        for at in best.tolist():
            product = float(products[at])
            ranked.append(
                (index.docs[ids[at]], 1.0 + product if product > 0 else 1.0 / (1.0 - product))
            )
        return ranked

    def _scored_bool(
        self, index: _Index, compiler: _Query, query: Any
    ) -> tuple[list[tuple[KeywordIndex, float, str]] | None, Matches]:
        """A top-level bool: its scoring clauses (the matches of its should, each an
        (index, boost, text); None without a should) and the docs the rest allows."""
        kind, spec = _single(query, "query")
        if kind != "bool":
            raise _parsing(f"this server takes knn or bool at the top of a search, not [{kind}]")
        if not isinstance(spec, dict):
            raise _parsing("[bool] must be an object")
        must = spec.get("must", [])
        for clause in must if isinstance(must, list) else [must]:
            if isinstance(clause, dict) and "match" in clause:
                raise _unsupported("this server scores match clauses in a should, not a must")
        rest = {key: value for key, value in spec.items() if key != "should"}
        minimum = rest.pop("minimum_should_match", None)
        if "should" not in spec:
            if minimum is not None:
                raise _unsupported("[minimum_should_match] without should clauses")
            return None, compiler.clause({"bool": rest})
        if type(minimum) is not int or minimum != 1:
            # Without it, a bool with a filter would match every doc the filter allows.
            raise _unsupported("this server takes a should with minimum_should_match 1")
        should = spec["should"]
        listed = should if isinstance(should, list) else [should]
        if not listed:
            raise _parsing("[should] needs a clause")
        clauses = [self._match(index, clause) for clause in listed]
        # Lucene counts the term clauses of the whole query against maxClauseCount (1,024
        # by default; OpenSearch's indices.query.bool.max_clause_count).
        term_clauses = sum(len(terms(c[2])) for c in clauses if c is not None)
        term_clauses += _leaf_clauses(rest)
        if term_clauses > MAX_CLAUSE_COUNT:
            raise _Problem(
                400,
                "too_many_clauses",
                f"too_many_clauses: maxClauseCount is set to {MAX_CLAUSE_COUNT}",
            )
        return [c for c in clauses if c is not None], compiler.clause({"bool": rest})

    @staticmethod
    def _match(index: _Index, clause: Any) -> tuple[KeywordIndex, float, str] | None:
        """A should clause: a match on an english-analysed field, as (index, boost, text);
        None on an unmapped field, where OpenSearch's match finds nothing."""
        kind, spec = _single(clause, "should")
        if kind != "match":
            raise _unsupported(f"this server takes match clauses in a should, not [{kind}]")
        name, argument = _single(spec, "match")
        text, boost = argument, 1.0
        if isinstance(argument, dict):
            if "query" not in argument or not set(argument) <= {"query", "boost"}:
                raise _parsing("[match] takes query and boost here")
            text, boost = argument["query"], argument.get("boost", 1.0)
        if not isinstance(text, str):
            raise _unsupported("this server matches a string")
        number = isinstance(boost, int | float) and not isinstance(boost, bool)
        if not number or not math.isfinite(boost):
            raise _parsing("[boost] must be a number")
        if boost < 0:
            raise _unsupported("negative [boost] are not allowed.")
        if name not in index.fields:
            return None
        keywords = index.searchable.get(name)
        if keywords is None:
            raise _unsupported(f"this server matches english-analysed text fields, not [{name}]")
        return keywords, float(boost), text

    def _sorted(
        self, index: _Index, pairs: list[tuple[_Doc, float]], spec: Any
    ) -> tuple[list[tuple[_Doc, float]], Callable[[_Doc], list[Any]]]:
        if not isinstance(spec, list) or not spec:
            raise _parsing("[sort] takes a list")
        keys: list[tuple[str, bool]] = []
        for entry in spec:
            name, order = _single(entry, "sort")
            order = (
                order.get("order") if isinstance(order, dict) and set(order) == {"order"} else order
            )
            if order not in ("asc", "desc"):
                raise _parsing("a sort order is asc or desc")
            if index.fields.get(name) not in ("keyword", "double", "long", "boolean"):
                raise _unsupported(f"this server cannot sort on [{name}]")
            keys.append((name, order == "desc"))

        def value(doc: _Doc, name: str, descending: bool) -> Any:
            values = doc.indexed.get(name)
            if not values:
                return None
            return max(values) if descending else min(values)

        ordered = list(pairs)
        # Stable sorts from the last key to the first; docs without a value go last.
        for name, descending in reversed(keys):
            present = [p for p in ordered if value(p[0], name, descending) is not None]
            absent = [p for p in ordered if value(p[0], name, descending) is None]
            present.sort(key=lambda p: value(p[0], name, descending), reverse=descending)
            ordered = present + absent
        return ordered, lambda doc: [value(doc, name, descending) for name, descending in keys]
