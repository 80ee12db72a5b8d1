"""The vector index in DynamoDB (VectorStore dynamodb): a table of its own whose native
vector index answers `SearchVectors`. Nothing in it bills while idle but storage.

Why a table of its own, not the vectors on the memory table's items: a vector (1,024 numbers
as an `L` of `N`, its size in docs/design-long-term.md) on a record or a message would be
read by every Query of a session's messages and rewritten by every touch of the item, would
ride every stream record the indexer and the curator read (Lambda's 6 MB batch), and would be
read by every parallel Scan of the table (`memkit reindex`, transfers). And a vector index
cannot be changed in place (CloudFormation: "Updates are not supported"): on a table of its
own, a change of dimensions replaces that table (the template names it by its dimensions) and
`memkit reindex` fills it, while the memory table is never touched. Only this module knows
this table, as only store/ knows the memory table (docs/design-long-term.md).

Items (PK, SK):

    doc        G<gen>#T#<tenant>#D#<doc id>    DOC         scope, order, vector, the doc
    tombstone  G<gen>#T#<tenant>#D#<doc id>    DOC         version, deleted, expires_at
    partition  G<gen>#T#<tenant>#SCOPES        U#<user>#N#<namespace>, N#<namespace>#U#<user>
    live gen   GENERATION                       LIVE        live

A doc item holds the doc: `tenant`, `doc_id`, `version`, `fields` (a map, as the doc has
them), `text` and `context` (for keyword search), `vector` (unit length, an `L` of `N`), and:

- `scope` = G<gen>#T#<tenant>#N#<namespace>#U#<user>, the vector index's HASH search
  attribute: every SearchVectors names one, so a search never reaches another tenant's (or
  user's, or namespace's) vectors. Components are escaped as the memory table's keys are
  (memkit.keyparts): no id can forge another scope. DynamoDB's `dynamodb:LeadingKeys` does
  not apply to SearchVectors; this is the isolation.
- INLINE_FILTER attributes for memkit's equality filters: f_session_id, f_memory_type,
  f_kind, f_speaker (strings) and f_pinned (1 or 0).
- `order` (created_at in microseconds, then the doc id): the sort key of the table's GSI1,
  whose partition key is `scope`, for listings newest first and keyword search.

Writes are versioned: a doc is written by a PutItem conditional on the stored version being
older (`attribute_not_exists(PK) OR version < :v`), so a replay or a late older write
changes nothing; a removal writes a tombstone in its place (no `scope`, no vector: it leaves
the vector index and GSI1) unless the stored version is newer, and the tombstone expires by
the table's TTL after TOMBSTONE_SECONDS (streams keep records a day). Deletes and TTL removals
of memory items reach here as removals through the stream, as on the other backends.

A search names one scope per request. Its namespace and user_id conditions choose the
scopes: eq/any values of both give them directly; otherwise they are read from the tenant's
partition items (written with the docs, once a process per scope: two small PutItems; read
by user, else by namespace, else whole) and filtered by those conditions. At most MAX_SCOPES
a search (an admin's search of a large tenant without user_id or namespace is a 400 saying
so, after reading no more than MAX_SCOPES + 1 matching items). Equality filters go inside
the search (SearchConditionExpression); every other condition (ranges, dates, ne, topics
any/all, startswith) is applied to the hits after an over-fetch: TopK = OVER_FETCH x k (at
most 100, DynamoDB's limit), and once more at 100 when the filter left fewer than k. Hits
from several scopes merge by score. What the over-fetch costs in recall is measured in
docs/benchmarks.md ("The DynamoDB vector table's over-fetch"). A search reaches at most 100
hits per scope.

Keyword search reads the searched scopes' texts from GSI1 (one Query page per MB), at most
KEYWORD_DOCS of each scope's newest (an older doc of a larger scope is found by its vector
alone), and ranks them with BM25 in process (memkit.vectors.keyword, the local index's
ranking): its statistics are those of the docs read, not the tenant's. A process keeps what it read
(analysed) for KEYWORD_CACHE_SECONDS, up to KEYWORD_CACHE_DOCS docs: an agent's searches in a
row read a partition's texts once, and a write reaches the keyword side of a search in that
process at most that much later (its vector side, as soon as the vector index has it).
Hybrid search is the same blend of the two as on the other backends (memkit.vectors.hybrid).
A listing is a GSI1 Query per scope, newest first.

Generations (memkit reindex): every key and scope starts with the generation. A rebuild
writes generation N+1 while N serves, then the switch writes the GENERATION item; each
process reads it at most every GENERATION_CACHE_SECONDS, and the switch returns after that
long, so the catch-up starts once every writer writes to N+1. The old generation is deleted
item by item (a Scan). A rebuild keeps the dimensions: others need a new vector table.

The vector index is eventually consistent, as DynamoDB documents: a doc just written may be
missing from a search for a moment, and one just removed may still show (the service reads
every hit back from the memory table, so a removed item is never shown).
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice, product
from typing import TYPE_CHECKING, Any

from memkit.errors import BadRequest, Misconfigured, StoreUnavailable, Throttled
from memkit.keyparts import part
from memkit.observability import logger
from memkit.times import DeadlinePool, in_time
from memkit.vectors.filters import Condition, meets_all
from memkit.vectors.keyword import KeywordIndex, weighted_search
from memkit.vectors.protocol import (
    CONTEXT_WEIGHT,
    FILTERABLE,
    Failures,
    Hit,
    Removal,
    Sampled,
    VectorDoc,
    unit_vector,
)

if TYPE_CHECKING:
    from memkit.config import IndexSettings

Item = dict[str, Any]

PK = "PK"
SK = "SK"
DOC_SK = "DOC"
SCOPE = "scope"
ORDER = "order"
VECTOR = "vector"
# GSI1: a scope's docs by `order` (what listings and keyword search read).
SCOPE_INDEX = "GSI1"
# memkit's equality filters the vector index evaluates itself (INLINE_FILTER attributes).
INLINE_STRINGS = {
    "session_id": "f_session_id",
    "memory_type": "f_memory_type",
    "kind": "f_kind",
    "speaker": "f_speaker",
}
PINNED = "f_pinned"
INLINE_ATTRIBUTES = (*INLINE_STRINGS.values(), PINNED)
# What SearchVectors returns of a hit (projected into the vector index).
PROJECTED = ("tenant", "doc_id", "version", "fields")
GENERATION_KEY = {PK: {"S": "GENERATION"}, SK: {"S": "LIVE"}}

TOP_K = 100  # SearchVectors' TopK: 1 to 100
OVER_FETCH = 3
MAX_SCOPES = 32
MAX_WINDOW = 10_000
TOMBSTONE_SECONDS = 2 * 86_400
GENERATION_CACHE_SECONDS = 10.0
WRITERS = 8
# A process keeps the texts it read for a keyword search this long, at most this many docs
# in all (the least recently used go first).
KEYWORD_CACHE_SECONDS = 30.0
KEYWORD_CACHE_DOCS = 20_000
# Keyword search reads at most this many of a scope's newest docs (what that reads and costs:
# docs/benchmarks.md, "On the DynamoDB vector table").
KEYWORD_DOCS = 2_000
THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}
# Refusals an operator fixes (the table, the index, the role), not the caller.
REFUSALS = {"ResourceNotFoundException", "AccessDeniedException", "UnrecognizedClientException"}
_INTEGER = re.compile(r"-?\d+")
_GENERATION = re.compile(r"g(\d+)")


# --- values ---------------------------------------------------------------------------------


def encode(value: Any) -> dict[str, Any]:
    """A field's value as a DynamoDB AttributeValue (ValueError: it cannot be one)."""
    if value is None:
        return {"NULL": True}
    if isinstance(value, bool):
        return {"BOOL": value}
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("invalid_number")
        return {"N": repr(float(value)) if isinstance(value, float) else str(value)}
    if isinstance(value, str):
        return {"S": value}
    if isinstance(value, list | tuple):
        return {"L": [encode(one) for one in value]}
    if isinstance(value, dict):
        return {"M": {str(key): encode(one) for key, one in value.items()}}
    raise ValueError("invalid_field")


def decode(value: dict[str, Any]) -> Any:
    """An AttributeValue as the Python value `encode` made it from."""
    ((kind, raw),) = value.items()
    if kind == "N":
        return int(raw) if _INTEGER.fullmatch(raw) else float(raw)
    if kind == "L":
        return [decode(one) for one in raw]
    if kind == "M":
        return {key: decode(one) for key, one in raw.items()}
    if kind == "NULL":
        return None
    return raw  # S, BOOL (and sets, which memkit never writes)


def _numbers(vector: Sequence[float]) -> list[dict[str, str]]:
    # Nine significant digits: what a 32-bit float (the index's precision) holds.
    return [{"N": format(x, ".9g")} for x in vector]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _owner(value: Any) -> str | None:
    """A namespace or user id as a scope holds it ("" and None are the same: no one)."""
    return value if isinstance(value, str) and value else None


def _created(fields: dict[str, Any]) -> float:
    value = fields.get("created_at")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _order(fields: dict[str, Any], doc_id: str) -> str:
    micros = min(max(int(_created(fields) * 1_000_000), 0), 10**20 - 1)
    return f"{micros:020d}#{doc_id}"


# --- scopes ---------------------------------------------------------------------------------


def _tenant_prefix(generation: int, tenant: str) -> str:
    return f"G{generation}#T#{part(tenant)}"


def scope_of(generation: int, tenant: str, namespace: str | None, user_id: str | None) -> str:
    """The HASH search attribute of a doc of `tenant`, `namespace`, `user_id`."""
    return f"{_tenant_prefix(generation, tenant)}#N#{part(namespace or '')}#U#{part(user_id or '')}"


def _doc_key(generation: int, tenant: str, doc_id: str) -> Item:
    return {PK: {"S": f"{_tenant_prefix(generation, tenant)}#D#{part(doc_id)}"}, SK: {"S": DOC_SK}}


def _scopes_pk(generation: int, tenant: str) -> str:
    return f"{_tenant_prefix(generation, tenant)}#SCOPES"


def _scope_sks(namespace: str | None, user_id: str | None) -> tuple[str, str]:
    """A scope's partition items' sort keys: by user then namespace, and the other way."""
    user, space = part(user_id or ""), part(namespace or "")
    return f"U#{user}#N#{space}", f"N#{space}#U#{user}"


Owner = tuple[str | None, str | None]  # (namespace, user_id) of a scope


def _allowed(conditions: Sequence[Condition], field: str) -> set[str] | None:
    """The values eq/any conditions on `field` allow (None: no such condition)."""
    allowed: set[str] | None = None
    for condition in conditions:
        if condition.field != field or condition.op not in ("eq", "any"):
            continue
        values = condition.value if condition.op == "any" else [condition.value]
        if not isinstance(values, list | tuple | set | frozenset):
            values = [values]
        strings = {value for value in values if isinstance(value, str)}
        allowed = strings if allowed is None else allowed & strings
    return allowed


def _inline(conditions: Sequence[Condition]) -> tuple[dict[str, dict[str, str]], bool]:
    """The conditions the vector index evaluates (attribute -> value), and False when two of
    them cannot both hold."""
    inline: dict[str, dict[str, str]] = {}
    for condition in conditions:
        value = condition.value
        if condition.op == "any" and isinstance(value, list | tuple) and len(value) == 1:
            value = value[0]
        elif condition.op != "eq":
            continue
        if condition.field in INLINE_STRINGS and isinstance(value, str) and value:
            name, wanted = INLINE_STRINGS[condition.field], {"S": value}
        elif condition.field == "pinned" and isinstance(value, bool):
            name, wanted = PINNED, {"N": "1" if value else "0"}
        else:
            continue
        if inline.setdefault(name, wanted) != wanted:
            return {}, False
    return inline, True


def _after_search(conditions: Sequence[Condition]) -> list[Condition]:
    """The conditions neither the scope nor the vector index evaluates."""
    return [
        condition
        for condition in conditions
        if condition.field not in ("namespace", "user_id") and not _inline([condition])[0]
    ]


def _checked(conditions: Sequence[Condition]) -> None:
    for condition in (each for c in conditions for each in c.parts()):
        if condition.op != "or" and condition.field not in FILTERABLE:
            raise ValueError(f"cannot filter on {condition.field!r}")


# --- errors ---------------------------------------------------------------------------------


def _code(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code") or "client_error")
    return type(exc).__name__


def _message(exc: Exception) -> str:
    from botocore.exceptions import ClientError

    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Message") or "")
    return ""


def _domain_error(operation: str, exc: Exception) -> Exception:
    """A failed request as the error an API client sees (retry, or an operator's fix)."""
    code = _code(exc)
    message = _message(exc)
    # An index still backfilling, or not yet served by the search endpoint: retry later.
    warming = "backfilling" in message or "does not have the specified index" in message
    details = {"operation": operation, "error": code}
    if code in THROTTLING:
        logger.warning("vector table throttled", extra=details)
        return Throttled("the vector index is busy; retry later")
    if code in REFUSALS or (code == "ValidationException" and not warming):
        logger.error("vector table refused a request", extra=details)
        return Misconfigured("the vector index refused the request")
    logger.warning("vector table request failed", extra=details)
    return StoreUnavailable("the vector index is unavailable; retry later")


# --- the index ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Texts:
    """What a process read of some scopes for keyword search, and when."""

    read_at: float
    docs: int
    texts: KeywordIndex
    contexts: KeywordIndex


class DynamoVectorIndex:
    """VectorIndex over a DynamoDB table with a vector index (see the module docstring).
    Thread-safe: one boto3 client, used from a pool for a batch's writes."""

    def __init__(
        self,
        client: Any,
        table: str,
        dimensions: int,
        index_name: str = "memkit-vectors",
        *,
        generation: int | None = None,
        cache_seconds: float = GENERATION_CACHE_SECONDS,
        clock: Callable[[], float] = time.time,
        wait: Callable[[float], None] = time.sleep,
        over_fetch: int = OVER_FETCH,
        deepen: bool = True,
        keyword_cache_seconds: float = KEYWORD_CACHE_SECONDS,
    ) -> None:
        self._client = client
        self._table = table
        self._dimensions = dimensions
        self._index_name = index_name
        self._fixed = generation
        self._cache_seconds = cache_seconds
        self._clock = clock
        self._wait = wait
        # TopK of a search whose conditions leave some for after it: over_fetch x k; and
        # (deepen) once more at TOP_K when those left fewer than k (bench/vector_filters.py
        # measures both).
        self._over_fetch = over_fetch
        self._deepen = deepen
        self._keyword_cache_seconds = keyword_cache_seconds
        self._keyword_cache: OrderedDict[tuple[str, ...], _Texts] = OrderedDict()
        self._lock = threading.Lock()
        self._live: tuple[int, float] | None = None  # generation, when read (monotonic)
        self._registered: set[tuple[int, str, str]] = set()

    @property
    def dimensions(self) -> int:
        return self._dimensions

    @property
    def table(self) -> str:
        return self._table

    def _call(self, operation: str, method: Callable[..., Any], **request: Any) -> Any:
        """`method` of the client with `request`; its failure as a domain error. Nothing is
        sent once the invocation's deadline (memkit.times.bound) has passed."""
        from botocore.exceptions import BotoCoreError, ClientError

        if not in_time():
            logger.warning(
                "vector table request not sent: out of time", extra={"operation": operation}
            )
            raise StoreUnavailable("the vector index is unavailable; retry later")
        try:
            return method(**request)
        except (ClientError, BotoCoreError) as exc:
            raise _domain_error(operation, exc) from exc

    # --- generations ---------------------------------------------------------------------

    def generation(self, *, fresh: bool = False) -> int:
        """The generation this index reads and writes (the live one, read at most every
        cache_seconds; a rebuild's target keeps its own)."""
        if self._fixed is not None:
            return self._fixed
        now = time.monotonic()
        with self._lock:
            cached = self._live
        if not fresh and cached is not None and now - cached[1] < self._cache_seconds:
            return cached[0]
        response = self._call(
            "generation",
            self._client.get_item,
            TableName=self._table,
            Key=GENERATION_KEY,
            ConsistentRead=True,
        )
        item = response.get("Item")
        live = int(item["live"]["N"]) if item else 0
        with self._lock:
            self._live = (live, now)
        return live

    def _writing_generation(self, ids: Sequence[str]) -> tuple[int, Failures]:
        """The generation to write to, or every id failed with why it could not be read."""
        try:
            return self.generation(), {}
        except (StoreUnavailable, Throttled, Misconfigured) as exc:
            reason = _code(exc.__cause__) if isinstance(exc.__cause__, Exception) else "failed"
            return -1, dict.fromkeys(ids, reason)

    def _forget_generation(self) -> None:
        with self._lock:
            self._live = None

    # --- writes --------------------------------------------------------------------------

    def _doc_item(self, generation: int, doc: VectorDoc) -> Item:
        fields = dict(doc.fields)
        namespace, user_id = _owner(fields.get("namespace")), _owner(fields.get("user_id"))
        item: Item = {
            **_doc_key(generation, doc.tenant, doc.id),
            SCOPE: {"S": scope_of(generation, doc.tenant, namespace, user_id)},
            ORDER: {"S": _order(fields, doc.id)},
            VECTOR: {"L": _numbers(unit_vector(doc.vector, self._dimensions))},
            "tenant": {"S": doc.tenant},
            "doc_id": {"S": doc.id},
            "version": {"N": str(doc.version)},
            "fields": encode(fields),
            "text": {"S": doc.text},
            "context": {"S": doc.context},
        }
        for name, attribute in INLINE_STRINGS.items():
            value = fields.get(name)
            if isinstance(value, str) and value:  # an index attribute is never empty
                item[attribute] = {"S": value}
        if isinstance(fields.get("pinned"), bool):
            item[PINNED] = {"N": "1" if fields["pinned"] else "0"}
        return item

    def _put(self, item: Item, condition: str) -> str | None:
        """A conditional PutItem: None when written or when the condition kept the stored
        item (a newer version), else why it failed (an error code, no content)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_item(
                TableName=self._table,
                Item=item,
                ConditionExpression=condition,
                ExpressionAttributeNames={"#pk": PK, "#v": "version"},
                ExpressionAttributeValues={":v": item["version"]},
            )
        except ClientError as exc:
            code = _code(exc)
            return None if code == "ConditionalCheckFailedException" else code
        except BotoCoreError as exc:
            return type(exc).__name__
        return None

    def _each(self, work: Callable[[Any], str | None], jobs: Sequence[tuple[str, Any]]) -> Failures:
        """`work` on each (doc id, job), several at a time; the ids it failed, and why."""
        if not jobs:
            return {}
        if len(jobs) == 1:
            results = [work(jobs[0][1])]
        else:
            with DeadlinePool(max_workers=min(WRITERS, len(jobs))) as pool:
                results = list(pool.map(lambda job: work(job[1]), jobs))
        return {ident: reason for (ident, _), reason in zip(jobs, results, strict=True) if reason}

    def _register(self, generation: int, tenant: str, owner: Owner) -> str | None:
        """The tenant's partition item for a scope, once per process (a PutItem of the same
        item is idempotent); why it failed, or None."""
        namespace, user_id = owner
        sort_keys = _scope_sks(namespace, user_id)
        key = (generation, tenant, sort_keys[0])
        with self._lock:
            if key in self._registered:
                return None
        from botocore.exceptions import BotoCoreError, ClientError

        for sort_key in sort_keys:
            item: Item = {PK: {"S": _scopes_pk(generation, tenant)}, SK: {"S": sort_key}}
            if namespace is not None:
                item["namespace"] = {"S": namespace}
            if user_id is not None:
                item["user_id"] = {"S": user_id}
            try:
                self._client.put_item(TableName=self._table, Item=item)
            except (ClientError, BotoCoreError) as exc:
                return _code(exc)
        with self._lock:
            self._registered.add(key)
        return None

    def upsert(self, docs: Sequence[VectorDoc]) -> Failures:
        """Each doc written unless the table holds it at the same or a newer version (one
        conditional PutItem a doc, several at a time); the docs that failed."""
        if not docs:
            return {}
        generation, unread = self._writing_generation([doc.id for doc in docs])
        if unread:
            return unread
        failures: Failures = {}
        items: list[tuple[VectorDoc, Item]] = []
        for doc in docs:
            try:
                items.append((doc, self._doc_item(generation, doc)))
            except ValueError as exc:
                failures[doc.id] = str(exc)
        owners = {
            (doc.tenant, (_owner(doc.fields.get("namespace")), _owner(doc.fields.get("user_id"))))
            for doc, _ in items
        }
        unregistered: dict[tuple[str, Owner], str] = {}
        for tenant, owner in owners:
            reason = self._register(generation, tenant, owner)
            if reason:
                unregistered[(tenant, owner)] = reason
        writes: list[tuple[str, Any]] = []
        for doc, item in items:
            owner = (_owner(doc.fields.get("namespace")), _owner(doc.fields.get("user_id")))
            reason = unregistered.get((doc.tenant, owner))
            if reason:
                failures[doc.id] = reason  # searched only once its partition is listed
            else:
                writes.append((doc.id, item))
        condition = "attribute_not_exists(#pk) OR #v < :v"
        failures.update(self._each(lambda item: self._put(item, condition), writes))
        return failures

    def remove(self, removals: Sequence[Removal]) -> Failures:
        """A tombstone in each doc's place unless the table holds it at a newer version (a
        removal of an absent doc leaves one too: a late older write then changes nothing)."""
        if not removals:
            return {}
        generation, unread = self._writing_generation([removal.id for removal in removals])
        if unread:
            return unread
        expires = int(self._clock()) + TOMBSTONE_SECONDS
        jobs = [
            (
                removal.id,
                {
                    **_doc_key(generation, removal.tenant, removal.id),
                    "tenant": {"S": removal.tenant},
                    "doc_id": {"S": removal.id},
                    "version": {"N": str(removal.version)},
                    "deleted": {"BOOL": True},
                    "expires_at": {"N": str(expires)},
                },
            )
            for removal in removals
        ]
        condition = "attribute_not_exists(#pk) OR #v <= :v"
        return self._each(lambda item: self._put(item, condition), jobs)

    # --- scopes --------------------------------------------------------------------------

    def _scopes(self, generation: int, tenant: str, conditions: Sequence[Condition]) -> list[str]:
        """The scopes a search with `conditions` must read (see the module docstring)."""
        namespaces = _allowed(conditions, "namespace")
        users = _allowed(conditions, "user_id")
        owners: Iterable[Owner]
        if namespaces is not None and users is not None:
            owners = product(sorted(namespaces), sorted(users))
        else:
            owners = self._owners(generation, tenant, users, namespaces)
        scoped = [
            condition for condition in conditions if condition.field in ("namespace", "user_id")
        ]
        chosen: set[Owner] = set()
        for namespace, user_id in owners:
            fields = {"namespace": namespace, "user_id": user_id}
            if meets_all({name: v for name, v in fields.items() if v is not None}, scoped):
                chosen.add((namespace, user_id))
            if len(chosen) > MAX_SCOPES:  # read no further: the search is refused
                raise BadRequest(
                    f"on this vector store a search reaches at most {MAX_SCOPES} pairs of "
                    "namespace and user, and this one reaches more: filter by namespace and "
                    "user_id"
                )
        ordered = sorted(chosen, key=lambda owner: (owner[0] or "", owner[1] or ""))
        return [scope_of(generation, tenant, namespace, user) for namespace, user in ordered]

    def _owners(
        self,
        generation: int,
        tenant: str,
        users: set[str] | None,
        namespaces: set[str] | None,
    ) -> Iterator[Owner]:
        """The tenant's (namespace, user) pairs, from its partition items: those of `users`,
        else of `namespaces`, when given (read as they are needed)."""
        if users is not None:
            prefixes = [f"U#{part(user)}#N#" for user in sorted(users)]
        elif namespaces is not None:
            prefixes = [f"N#{part(namespace)}#U#" for namespace in sorted(namespaces)]
        else:
            prefixes = ["U#"]
        for prefix in prefixes:
            for item in self._query(
                "scopes",
                KeyConditionExpression="#pk = :pk AND begins_with(#sk, :sk)",
                ExpressionAttributeNames={"#pk": PK, "#sk": SK},
                ExpressionAttributeValues={
                    ":pk": {"S": _scopes_pk(generation, tenant)},
                    ":sk": {"S": prefix},
                },
            ):
                yield (
                    _owner(decode(item["namespace"])) if "namespace" in item else None,
                    _owner(decode(item["user_id"])) if "user_id" in item else None,
                )

    def _query(self, operation: str, **request: Any) -> Iterator[Item]:
        """Every item a Query returns, page after page."""
        start: Item | None = None
        while True:
            page_request = {"TableName": self._table, **request}
            if start is not None:
                page_request["ExclusiveStartKey"] = start
            response = self._call(operation, self._client.query, **page_request)
            yield from response.get("Items", [])
            start = response.get("LastEvaluatedKey")
            if not start:
                return

    def _parallel(self, work: Callable[[str], list[Hit]], scopes: Sequence[str]) -> list[Hit]:
        if len(scopes) <= 1:
            return [hit for scope in scopes for hit in work(scope)]
        with DeadlinePool(max_workers=min(WRITERS, len(scopes))) as pool:
            return [hit for hits in pool.map(work, scopes) for hit in hits]

    # --- reads ---------------------------------------------------------------------------

    @staticmethod
    def _hit(item: Item, tenant: str, score: float) -> Hit | None:
        if decode(item.get("tenant", {"S": ""})) != tenant:
            return None  # never another tenant's (the scope already rules it out)
        fields = decode(item["fields"]) if "fields" in item else {}
        return Hit(decode(item["doc_id"]), score, {**fields, "tenant": tenant})

    def _search_scope(
        self, scope: str, tenant: str, vector: list[float], top_k: int, inline: dict[str, Any]
    ) -> tuple[list[Hit], int]:
        """The nearest docs of one scope (cosine similarity as the score), and how many the
        index returned."""
        names = {"#s": SCOPE, **{f"#p{n}": name for n, name in enumerate(PROJECTED)}}
        values: Item = {":s": {"S": scope}}
        expression = ["#s = :s"]
        for n, (name, wanted) in enumerate(sorted(inline.items())):
            names[f"#f{n}"] = name
            values[f":f{n}"] = wanted
            expression.append(f"#f{n} = :f{n}")
        response = self._call(
            "search",
            self._client.search_vectors,
            TableName=self._table,
            IndexName=self._index_name,
            SearchVector=_numbers(vector),
            TopK=top_k,
            SearchConditionExpression=" AND ".join(expression),
            ExpressionAttributeNames=names,
            ExpressionAttributeValues=values,
            ProjectionExpression=", ".join(f"#p{n}" for n in range(len(PROJECTED))),
        )
        results = response.get("SearchResults", [])
        hits = []
        for result in results:
            # COSINE: a distance from 0 (same direction) to 2.
            hit = self._hit(result.get("Item", {}), tenant, 1.0 - float(result["Score"]))
            if hit is not None:
                hits.append(hit)
        return hits, len(results)

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k nearest of the tenant's docs that meet every condition (cosine scores),
        at most 100 per scope searched."""
        if k <= 0:
            return []
        query = unit_vector(vector, self._dimensions)
        _checked(conditions)
        inline, possible = _inline(conditions)
        if not possible:
            return []
        generation = self.generation()
        scopes = self._scopes(generation, tenant, conditions)
        later = _after_search(conditions)
        first = min(TOP_K, max(k, self._over_fetch * k) if later else k)

        def nearest(scope: str) -> list[Hit]:
            hits, returned = self._search_scope(scope, tenant, query, first, inline)
            kept = [hit for hit in hits if meets_all(hit.fields, later)]
            if self._deepen and len(kept) < k and returned == first < TOP_K:
                # the filter left too few: the scope's deepest search
                hits, _ = self._search_scope(scope, tenant, query, TOP_K, inline)
                kept = [hit for hit in hits if meets_all(hit.fields, later)]
            return kept

        found = self._parallel(nearest, scopes)
        found.sort(key=lambda hit: (-hit.score, hit.id))
        return found[:k]

    def _scope_docs(self, scope: str, *, newest_first: bool, with_text: bool) -> Iterator[Item]:
        names = {"#s": SCOPE, **{f"#p{n}": name for n, name in enumerate(PROJECTED)}}
        projected = [f"#p{n}" for n in range(len(PROJECTED))]
        if with_text:
            names.update({"#text": "text", "#context": "context"})
            projected += ["#text", "#context"]
        return self._query(
            "read_scope",
            IndexName=SCOPE_INDEX,
            KeyConditionExpression="#s = :s",
            ExpressionAttributeNames=names,
            ExpressionAttributeValues={":s": {"S": scope}},
            ProjectionExpression=", ".join(projected),
            ScanIndexForward=not newest_first,
        )

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The k best BM25 matches of `text` (its own text, plus CONTEXT_WEIGHT times its
        context's) among the docs of the scopes searched, read from GSI1 and ranked here."""
        if k <= 0 or not text.strip():
            return []
        _checked(conditions)
        scopes = self._scopes(self.generation(), tenant, conditions)
        texts, contexts = self._texts_of(tenant, tuple(scopes))
        return weighted_search(
            [(texts, 1.0), (contexts, CONTEXT_WEIGHT)], tenant, text, k, conditions
        )

    def _texts_of(self, tenant: str, scopes: tuple[str, ...]) -> tuple[KeywordIndex, KeywordIndex]:
        """BM25 over the scopes' texts and contexts: read from GSI1 and analysed, or as this
        process did less than keyword_cache_seconds ago (see the module docstring)."""
        now = time.monotonic()
        with self._lock:
            cached = self._keyword_cache.get(scopes)
            if cached is not None and now - cached.read_at < self._keyword_cache_seconds:
                self._keyword_cache.move_to_end(scopes)
                return cached.texts, cached.contexts
        texts, contexts = KeywordIndex(), KeywordIndex()
        held = [0]

        def read(scope: str) -> list[Hit]:
            docs = self._scope_docs(scope, newest_first=True, with_text=True)
            for item in islice(docs, KEYWORD_DOCS):
                hit = self._hit(item, tenant, 0.0)
                if hit is not None:
                    version = decode(item["version"])
                    texts.upsert(tenant, hit.id, _text(decode(item["text"])), version, hit.fields)
                    contexts.upsert(tenant, hit.id, _text(decode(item["context"])), version, {})
                    held[0] += 1
            return []

        self._parallel(read, scopes)
        if self._keyword_cache_seconds > 0 and held[0] <= KEYWORD_CACHE_DOCS:
            with self._lock:
                self._keyword_cache[scopes] = _Texts(now, held[0], texts, contexts)
                self._keyword_cache.move_to_end(scopes)
                while sum(e.docs for e in self._keyword_cache.values()) > KEYWORD_CACHE_DOCS:
                    self._keyword_cache.popitem(last=False)
        return texts, contexts

    def browse(
        self, tenant: str, k: int, offset: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        """The tenant's docs that meet every condition, newest created_at first (a GSI1
        Query per scope, read until the page is certain)."""
        if k <= 0:
            return []
        if offset < 0:
            raise ValueError("offset must not be negative")
        if offset + k > MAX_WINDOW:
            raise BadRequest(f"a listing reaches at most {MAX_WINDOW} records deep")
        _checked(conditions)
        scopes = self._scopes(self.generation(), tenant, conditions)
        wanted = offset + k

        def newest(scope: str) -> list[Hit]:
            kept: list[Hit] = []
            last: float | None = None
            for item in self._scope_docs(scope, newest_first=True, with_text=False):
                hit = self._hit(item, tenant, 0.0)
                if hit is None:
                    continue
                created = _created(hit.fields)
                if last is not None and created != last:
                    break  # the page holds every doc as new as its last one
                if meets_all(hit.fields, conditions):
                    kept.append(hit)
                    if len(kept) >= wanted:
                        last = created
            return kept

        found = self._parallel(newest, scopes)
        found.sort(key=lambda hit: (-_created(hit.fields), hit.id))
        return found[offset : offset + k]

    def sample(self, k: int, after: str | None = None) -> tuple[list[Sampled], str | None]:
        """Up to k docs of every tenant, in GSI1's Scan order (the table's, not doc ids'),
        after the cursor `after` (an opaque page key); the next cursor."""
        if k <= 0:
            return [], after
        generation = self.generation()
        start: Item | None = json.loads(after) if after else None
        page: list[Sampled] = []
        while len(page) < k:
            request: Item = {
                "TableName": self._table,
                "IndexName": SCOPE_INDEX,
                "Limit": k - len(page),
                "FilterExpression": "begins_with(#s, :g)",
                "ExpressionAttributeNames": {"#s": SCOPE},
                "ExpressionAttributeValues": {":g": {"S": f"G{generation}#"}},
            }
            if start is not None:
                request["ExclusiveStartKey"] = start
            response = self._call("sample", self._client.scan, **request)
            for item in response.get("Items", []):
                tenant = decode(item["tenant"])
                hit = self._hit(item, tenant, 0.0)
                if hit is not None:
                    page.append(Sampled(hit.id, tenant, decode(item["version"]), hit.fields))
            start = response.get("LastEvaluatedKey")
            if not start:
                return page, None
        return page, json.dumps(start, sort_keys=True)

    # --- rebuilds ------------------------------------------------------------------------

    def _target(self, generation: int) -> DynamoVectorIndex:
        return DynamoVectorIndex(
            self._client,
            self._table,
            self._dimensions,
            self._index_name,
            generation=generation,
            clock=self._clock,
        )

    def _same_dimensions(self, dimensions: int) -> None:
        if dimensions != self._dimensions:
            raise Misconfigured(
                f"this vector table's index holds {self._dimensions} dimensions, not "
                f"{dimensions}: deploy with the new embedder (a new vector table), then "
                "run memkit reindex"
            )

    def rebuild(self, dimensions: int) -> DynamoRebuild:
        """The next generation, emptied of what a rebuild that died left in it; the live one
        keeps serving until the switch."""
        self._same_dimensions(dimensions)
        live = self.generation(fresh=True)
        self.drop_generation(live + 1)
        return DynamoRebuild(self, self._target(live + 1), live)

    def resume_rebuild(
        self, generation: str, replaced: str | None, dimensions: int
    ) -> DynamoRebuild:
        """The paused rebuild into `generation` ("g<N>"), if the live generation is still
        the one it will replace."""
        self._same_dimensions(dimensions)
        match = _GENERATION.fullmatch(generation)
        live = self.generation(fresh=True)
        if match is None or int(match.group(1)) != live + 1 or replaced != f"g{live}":
            raise BadRequest("the paused rebuild is out of date (the index changed): start anew")
        return DynamoRebuild(self, self._target(live + 1), live)

    def switch_generation(self, new: int, old: int) -> None:
        """Make `new` the live generation, if `old` still is; return once every process
        reads it (its cached generation has expired)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self._client.put_item(
                TableName=self._table,
                Item={**GENERATION_KEY, "live": {"N": str(new)}},
                ConditionExpression="attribute_not_exists(#pk) OR #live = :old",
                ExpressionAttributeNames={"#pk": PK, "#live": "live"},
                ExpressionAttributeValues={":old": {"N": str(old)}},
            )
        except ClientError as exc:
            if _code(exc) == "ConditionalCheckFailedException":
                raise BadRequest("another rebuild switched the index meanwhile") from exc
            raise _domain_error("switch", exc) from exc
        except BotoCoreError as exc:
            raise _domain_error("switch", exc) from exc
        self._forget_generation()
        self._wait(self._cache_seconds)

    def drop_generation(self, generation: int) -> int:
        """Delete every item of `generation` (a Scan of the table, deletes 25 at a time);
        how many."""
        prefix = f"G{generation}#"
        keys: list[Item] = []
        start: Item | None = None
        while True:
            request: Item = {
                "TableName": self._table,
                "FilterExpression": "begins_with(#pk, :g)",
                "ProjectionExpression": "#pk, #sk",
                "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
                "ExpressionAttributeValues": {":g": {"S": prefix}},
            }
            if start is not None:
                request["ExclusiveStartKey"] = start
            response = self._call("drop_generation", self._client.scan, **request)
            keys.extend(response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                break
        for first in range(0, len(keys), 25):
            requests = [{"DeleteRequest": {"Key": key}} for key in keys[first : first + 25]]
            for attempt in range(8):
                batch = {self._table: requests}
                response = self._call(
                    "drop_generation", self._client.batch_write_item, RequestItems=batch
                )
                requests = response.get("UnprocessedItems", {}).get(self._table, [])
                if not requests:
                    break
                self._wait(min(0.05 * 2**attempt, 2.0))
            if requests:
                raise StoreUnavailable("the vector table kept refusing deletes; retry later")
        return len(keys)


class DynamoRebuild:
    """A rebuild of a DynamoVectorIndex into its next generation (implements Rebuild)."""

    def __init__(self, owner: DynamoVectorIndex, target: DynamoVectorIndex, old: int) -> None:
        self._owner = owner
        self._target = target
        self._old = old
        self._new = old + 1
        self._switched = False

    @property
    def target(self) -> DynamoVectorIndex:
        return self._target

    @property
    def generation(self) -> str:
        return f"g{self._new}"

    @property
    def replaced(self) -> str | None:
        return f"g{self._old}"

    def switch(self) -> None:
        self._owner.switch_generation(self._new, self._old)
        self._switched = True

    def retire(self) -> None:
        if self._switched:
            self._owner.drop_generation(self._old)

    def abandon(self) -> None:
        if not self._switched:
            self._owner.drop_generation(self._new)


def dynamodb_index(settings: IndexSettings, region: str, dimensions: int) -> DynamoVectorIndex:
    """The configured vector table, with the function's credentials (SearchVectors goes to
    the search endpoint by itself; a configured endpoint takes every request)."""
    import boto3
    from botocore.config import Config

    if not settings.vector_table:
        raise Misconfigured("MEMKIT_VECTOR_TABLE is not set")
    # The memory table's client settings when the function's settings have them
    # (StoreSettings: the local stack waits longer for a busy machine), else DynamoDB's.
    client = boto3.client(
        "dynamodb",
        region_name=region,
        endpoint_url=settings.vector_endpoint,
        config=Config(
            connect_timeout=float(getattr(settings, "connect_timeout_seconds", 2.0)),
            read_timeout=float(getattr(settings, "read_timeout_seconds", 5.0)),
            retries={
                "max_attempts": int(getattr(settings, "max_retry_attempts", 3)),
                "mode": "standard",
            },
            max_pool_connections=WRITERS * 2,
        ),
    )
    return DynamoVectorIndex(client, settings.vector_table, dimensions, settings.vector_index_name)
