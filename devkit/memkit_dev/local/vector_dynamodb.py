"""DynamoDB with vector indexes, on loopback: what moto and DynamoDB Local lack (neither
implements vector indexes nor SearchVectors; DynamoDB Local's last release, 1.25.1, predates
them) in front of either.

Every request is DynamoDB's JSON protocol as botocore sends it (X-Amz-Target
DynamoDB_20120810.<Operation>). Most are forwarded unchanged to the engine (moto's server,
DynamoDB Local); this server adds:

- CreateTable with VectorIndexes: checked as DynamoDB checks them (on-demand tables only, at
  most five, 1 to 4,096 dimensions, a distance function, at most one HASH in a SearchSchema
  and every SearchSchema attribute in AttributeDefinitions, names unique), then the table is
  created without them and the indexes kept here. DescribeTable shows them (ACTIVE);
  DeleteTable drops them. `adopt` does the same for a table that already exists (a persisted
  DynamoDB Local), filling the indexes from a Scan. UpdateTable's VectorIndexUpdates is
  refused (memkit never sends it).
- Writes (PutItem, UpdateItem, DeleteItem, BatchWriteItem, TransactWriteItems) to such a
  table: a Put whose vector attribute is not a list of `dimensions` numbers, or whose
  SearchSchema attribute has another type than its definition or is an empty string, is
  refused as DynamoDB refuses it; a write that succeeds is read back from the engine and
  replicated to the indexes by a thread of this server, in write order: the index is
  eventually consistent, as DynamoDB's is (`settle()` waits until it caught up, `held()`
  stops replication for a while). An item is indexed only with a valid vector and the HASH
  attribute; an item that loses either, or is deleted, leaves the index. With
  ReturnConsumedCapacity INDEXES, a write's ConsumedCapacity gains `VectorIndexes` with
  VectorWriteRequestBytes: the bytes replicated to each index, 4 per dimension plus the
  names and values of the keys, the search attributes and the projection (AWS's example,
  4,125 for a 1,024-dimension write, is 4,096 and 29; aws/agent-toolkit-for-aws's DynamoDB
  skill measured 4,096 + 9 with keys alone, + 34 with a HASH and an INLINE_FILTER).
- SearchVectors, answered here from the replicated state: the table and the index must
  exist; TopK 1 to 100; the SearchVector's length is the index's; with a HASH in the
  SearchSchema the expression must name it with `=`. A SearchConditionExpression is
  conditions `attribute = :value` joined by AND (parentheses allowed): `<`, `<=`, `>`, `>=`
  and `<>` are refused with DynamoDB's "Invalid SearchConditionExpression: Invalid
  comparator used in SearchConditionExpression", BETWEEN and IN with its "... Invalid
  operator used in SearchConditionExpression" (both measured on an INLINE_FILTER attribute,
  us-west-2, August 2026: jus2024/serverless-poc-stock-management,
  docs/vector-search-comparison.md), OR, NOT and every function in this server's words;
  an attribute outside the SearchSchema, an unused or missing expression name or value, a
  ProjectionExpression naming what the index does not project: refused. Matching is exact
  (type and value). Vectors are ranked exactly (every vector of the partition), scored as
  the distance function says: COSINE and EUCLIDEAN distances ascending (COSINE from 0 to
  2), DOT_PRODUCT descending. A hit returns the ProjectionExpression's attributes or,
  without one, what the index projects (keys, HASH and INLINE_FILTER attributes,
  NonKeyAttributes or ALL) but the vector, as DynamoDB does. ConsumedCapacity's
  VectorSearchRequestBytes, when asked, is the model ExtendDB measured against DynamoDB
  (ExtendDB/extenddb, crates/engine/src/search_vectors.rs: us-east-1, 2026-08-11, unscoped
  searches of 16 to 512 dimensions): 30.6875 bytes a dimension of the index, plus 65 a
  result and the result's own bytes as the index holds them (its vector left out), plus 4
  a dimension for each result that shows its vector; at least 1,024. It is a model, not
  AWS's meter: ExtendDB saw a search confined to one HASH value (memkit's always are)
  report less than the dimension term alone (3,675 against 3,928 at 128 dimensions), and
  an unscoped search of a 15,000-item, 1,024-dimension index reported 61,307 bytes at TopK
  1, twice the model (jus2024/serverless-poc-stock-management, us-west-2): what the
  service's traversal reads grows with the index in a way no public sweep has pinned down.

Refusals carry DynamoDB's error type; their messages are AWS's where its documentation
quotes them, this server's own words otherwise. Each is also recorded in `rejected`, so a
test can assert that memkit sent nothing outside what DynamoDB takes. An engine that no
longer answers (DynamoDB Local killed) is DynamoDB's 500 InternalServerError, which clients
retry, then give up on.
"""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Self
from urllib.parse import urlsplit

import numpy as np
from werkzeug.wrappers import Request, Response

from memkit_dev.local.loopback import LoopbackServer
from memkit_dev.local.sigv4 import SignatureRejected, SigningKey, verify

PREFIX = "DynamoDB_20120810."
CONTENT_TYPE = "application/x-amz-json-1.0"
VALIDATION = "com.amazonaws.dynamodb.v20120810#ValidationException"
THROTTLING = "com.amazonaws.dynamodb.v20120810#ThrottlingException"
INTERNAL = "com.amazonaws.dynamodb.v20120810#InternalServerError"
MAX_VECTOR_INDEXES = 5
MAX_DIMENSIONS = 4096
MAX_TOP_K = 100
MAX_PROJECTED = 20
SEARCHES_KEPT = 1_000
DISTANCES = ("COSINE", "EUCLIDEAN", "DOT_PRODUCT")
WRITES = ("PutItem", "UpdateItem", "DeleteItem", "BatchWriteItem", "TransactWriteItems")
# VectorSearchRequestBytes, as swept against DynamoDB by ExtendDB (us-east-1, 2026-08-11,
# unscoped searches, 16 to 512 dimensions): per dimension of the index, per result returned
# (besides the result's own bytes), per dimension of each vector a result shows; a floor.
SEARCH_BYTES_PER_DIMENSION = 30.6875
SEARCH_BYTES_PER_RESULT = 65
SEARCH_BYTES_PER_SHOWN_DIMENSION = 4
SEARCH_BYTES_FLOOR = 1024
FAKE_ACCESS_KEY = "testing"
FAKE_SECRET_KEY = "testing"  # noqa: S105 (moto's fake credentials)

Item = dict[str, Any]
Key = tuple[tuple[str, str], ...]


class Refused(Exception):
    """A request DynamoDB would refuse: its error type and a message."""

    def __init__(self, error: str, message: str, status: int = 400, recorded: bool = True) -> None:
        super().__init__(message)
        self.error = error
        self.message = message
        self.status = status
        self.recorded = recorded  # a refusal of what memkit sent (not a throttled request)


def _validation(message: str) -> Refused:
    return Refused(VALIDATION, message)


# --- indexes --------------------------------------------------------------------------------


@dataclass
class _Entry:
    vector: np.ndarray
    item: Item  # the indexed item's projected attributes


@dataclass
class VectorIndex:
    """One vector index of a table and what it holds (key -> entry, HASH value -> keys)."""

    name: str
    attribute: str
    dimensions: int
    distance: str
    hash: str | None
    inline: tuple[str, ...]
    projection: dict[str, Any]
    arn: str
    entries: dict[Key, _Entry] = field(default_factory=dict)
    partitions: dict[str, set[Key]] = field(default_factory=dict)

    @property
    def schema(self) -> tuple[str, ...]:
        return ((self.hash,) if self.hash else ()) + self.inline

    def projected(self, item: Item, key_names: tuple[str, ...]) -> Item:
        """What the index keeps of `item`: keys, search attributes, vector, projection."""
        names = set(key_names) | set(self.schema) | {self.attribute}
        if self.projection.get("ProjectionType") == "ALL":
            return dict(item)
        if self.projection.get("ProjectionType") == "INCLUDE":
            names |= set(self.projection.get("NonKeyAttributes", []))
        return {name: value for name, value in item.items() if name in names}

    def describe(self) -> Item:
        schema = [{"AttributeName": self.hash, "SearchSchemaElementType": "HASH"}] * bool(
            self.hash
        ) + [
            {"AttributeName": name, "SearchSchemaElementType": "INLINE_FILTER"}
            for name in self.inline
        ]
        description: Item = {
            "IndexName": self.name,
            "VectorAttribute": {"AttributeName": self.attribute},
            "Dimensions": self.dimensions,
            "DistanceFunction": self.distance,
            "Projection": self.projection,
            "IndexStatus": "ACTIVE",
            "IndexSizeBytes": len(self.entries) * self.dimensions * 4,
            "ItemCount": len(self.entries),
            "IndexArn": self.arn,
        }
        if schema:
            description["SearchSchema"] = schema
        return description


@dataclass
class _Table:
    name: str
    key_names: tuple[str, ...]
    types: dict[str, str]
    indexes: dict[str, VectorIndex]


def _key(item: Item, key_names: tuple[str, ...]) -> Key:
    return tuple((name, json.dumps(item[name], sort_keys=True)) for name in key_names)


def _vector(value: Any, dimensions: int) -> np.ndarray | None:
    """An attribute as a vector of `dimensions` 32-bit floats, or None (not one)."""
    if not isinstance(value, dict) or set(value) != {"L"}:
        return None
    members = value["L"]
    if len(members) != dimensions or any(set(m) != {"N"} for m in members):
        return None
    try:
        numbers = np.array([float(m["N"]) for m in members], dtype=np.float32)
    except (TypeError, ValueError, OverflowError):
        return None
    return numbers if bool(np.all(np.isfinite(numbers))) else None


def _size(value: Any) -> int:
    """An AttributeValue's size as DynamoDB counts it (roughly: its text and numbers)."""
    ((kind, raw),) = value.items()
    if kind in ("S", "N", "B"):
        return len(str(raw).encode())
    if kind in ("L",):
        return 3 + sum(1 + _size(one) for one in raw)
    if kind == "M":
        return 3 + sum(1 + len(name.encode()) + _size(one) for name, one in raw.items())
    if kind in ("SS", "NS", "BS"):
        return sum(len(str(one).encode()) for one in raw)
    return 1


def _bytes_besides(item: Item, vector_attribute: str) -> int:
    """An item's attributes (names and values) other than its vector, in bytes."""
    return sum(
        len(name.encode()) + _size(value)
        for name, value in item.items()
        if name != vector_attribute
    )


def replicated_bytes(index: VectorIndex, item: Item, key_names: tuple[str, ...]) -> int:
    """What writing `item` replicates to `index`: 4 bytes a dimension plus the other
    projected attributes (names and values)."""
    return index.dimensions * 4 + _bytes_besides(index.projected(item, key_names), index.attribute)


def search_request_bytes(index: VectorIndex, hits: list[Item], vectors_shown: int) -> float:
    """VectorSearchRequestBytes of a search of `index` that returned `hits` (the items as
    the index holds them), `vectors_shown` of them with their vector: the model measured on
    DynamoDB (SEARCH_BYTES_*), at least SEARCH_BYTES_FLOOR."""
    returned = sum(SEARCH_BYTES_PER_RESULT + _bytes_besides(hit, index.attribute) for hit in hits)
    return max(
        SEARCH_BYTES_FLOOR,
        SEARCH_BYTES_PER_DIMENSION * index.dimensions
        + returned
        + SEARCH_BYTES_PER_SHOWN_DIMENSION * index.dimensions * vectors_shown,
    )


def _checked_index(spec: Item, definitions: dict[str, str], table_arn: str) -> VectorIndex:
    """A CreateTable VectorIndexes element as DynamoDB validates it."""
    name = spec.get("IndexName")
    if not isinstance(name, str) or not re.fullmatch(r"[a-zA-Z0-9_.-]{3,255}", name):
        raise _validation("Invalid vector index name")
    dimensions = spec.get("Dimensions")
    if not isinstance(dimensions, int) or not 1 <= dimensions <= MAX_DIMENSIONS:
        raise _validation(f"Dimensions must be between 1 and {MAX_DIMENSIONS}")
    distance = spec.get("DistanceFunction")
    if distance not in DISTANCES:
        raise _validation(f"DistanceFunction must be one of {', '.join(DISTANCES)}")
    attribute = (spec.get("VectorAttribute") or {}).get("AttributeName")
    if not isinstance(attribute, str) or not attribute:
        raise _validation("VectorAttribute needs an AttributeName")
    projection = spec.get("Projection")
    if not isinstance(projection, dict) or projection.get("ProjectionType") not in (
        "ALL",
        "KEYS_ONLY",
        "INCLUDE",
    ):
        raise _validation("Projection needs a ProjectionType")
    schema = spec.get("SearchSchema") or []
    hashes = [e["AttributeName"] for e in schema if e.get("SearchSchemaElementType") == "HASH"]
    inline = [
        e["AttributeName"] for e in schema if e.get("SearchSchemaElementType") == "INLINE_FILTER"
    ]
    if len(hashes) > 1:
        raise _validation("A SearchSchema holds at most one HASH element")
    if len(set(hashes + inline)) != len(hashes) + len(inline):
        raise _validation("A SearchSchema names each attribute once")
    if any(attribute_name not in definitions for attribute_name in hashes + inline):
        raise _validation("One element in SearchSchema is not defined in attribute definitions")
    extra = (
        projection.get("NonKeyAttributes", []) if projection["ProjectionType"] == "INCLUDE" else []
    )
    if 1 + len(inline) + len(extra) > MAX_PROJECTED:
        raise _validation(f"A vector index projects at most {MAX_PROJECTED} non-key attributes")
    return VectorIndex(
        name,
        attribute,
        dimensions,
        distance,
        hashes[0] if hashes else None,
        tuple(inline),
        projection,
        f"{table_arn}/index/{name}",
    )


# --- search expressions ---------------------------------------------------------------------

_TOKEN = re.compile(r"\s*(<>|<=|>=|=|<|>|\(|\)|,|[#:]?[A-Za-z0-9_.\-\[\]]+)")
_KEYWORDS = {"OR", "NOT", "IN", "BETWEEN"}


def _tokens(expression: str) -> list[str]:
    tokens: list[str] = []
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            if expression[position:].strip():
                raise _validation("Invalid SearchConditionExpression: Syntax error")
            break
        tokens.append(match.group(1))
        position = match.end()
    return tokens


def parse_condition(expression: str) -> list[tuple[str, str]]:
    """A SearchConditionExpression as (attribute operand, value placeholder) pairs, all
    required; anything but equalities joined by AND is refused."""
    tokens = [token for token in _tokens(expression) if token not in ("(", ")")]
    conditions: list[tuple[str, str]] = []
    position = 0
    while position < len(tokens):
        if position:
            if tokens[position].upper() in _KEYWORDS:
                raise _validation(
                    f"Invalid SearchConditionExpression: {tokens[position].upper()} is not "
                    "supported; join equality conditions with AND"
                )
            if tokens[position].upper() != "AND":
                raise _validation("Invalid SearchConditionExpression: Syntax error")
            position += 1
        if position + 2 >= len(tokens):
            raise _validation("Invalid SearchConditionExpression: Syntax error")
        left, operator = tokens[position], tokens[position + 1]
        if operator == "(" or left.upper() in _KEYWORDS or operator == ",":
            raise _validation("Invalid SearchConditionExpression: functions are not supported")
        if operator.upper() in ("BETWEEN", "IN"):
            raise _validation(
                "Invalid SearchConditionExpression: Invalid operator used in "
                "SearchConditionExpression"
            )
        if operator.upper() in _KEYWORDS or operator in ("<>", "<", "<=", ">", ">="):
            raise _validation(
                "Invalid SearchConditionExpression: Invalid comparator used in "
                "SearchConditionExpression"
            )
        if operator != "=":
            raise _validation("Invalid SearchConditionExpression: Syntax error")
        right = tokens[position + 2]
        if left.startswith(":") or not right.startswith(":"):
            raise _validation(
                "Invalid SearchConditionExpression: compare an attribute to a value (:name)"
            )
        conditions.append((left, right))
        position += 3
    if not conditions:
        raise _validation("Invalid SearchConditionExpression: Syntax error")
    return conditions


def _name(operand: str, names: dict[str, str], used: set[str]) -> str:
    if operand.startswith("#"):
        if operand not in names:
            raise _validation(
                f"Value provided in ExpressionAttributeNames is missing for: {operand}"
            )
        used.add(operand)
        return names[operand]
    if any(ch in operand for ch in ".[]"):
        raise _validation("SearchConditionExpression supports top-level attributes only")
    return operand


def _score(distance: str, vectors: np.ndarray, query: np.ndarray) -> np.ndarray:
    if distance == "DOT_PRODUCT":
        return np.asarray(vectors @ query)
    if distance == "EUCLIDEAN":
        return np.asarray(np.linalg.norm(vectors - query, axis=1))
    norms = np.linalg.norm(vectors, axis=1) * float(np.linalg.norm(query))
    with np.errstate(divide="ignore", invalid="ignore"):
        cosine = np.where(norms > 0, (vectors @ query) / norms, 0.0)
    return 1.0 - cosine


# --- the server -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    operation: str
    error: str
    message: str


class VectorDynamoDB(LoopbackServer):
    """DynamoDB with vector indexes on 127.0.0.1 (port 0: any free port), in front of the
    DynamoDB-compatible `engine` endpoint, in a thread of this process; thread-safe."""

    def __init__(
        self,
        engine: str,
        *,
        region: str = "us-east-1",
        account: str = "123456789012",
        require_sigv4: bool = False,
        access_key: str = FAKE_ACCESS_KEY,
        secret_key: str = FAKE_SECRET_KEY,
        session_token: str | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
    ) -> None:
        self.engine = engine.rstrip("/")
        self.region = region
        self._account = account
        self._key = SigningKey(access_key, secret_key, session_token) if require_sigv4 else None
        self._tables: dict[str, _Table] = {}
        self._lock = threading.RLock()
        # One write at a time through this server, so replication follows the writes' order.
        self._write_lock = threading.Lock()
        self._pending: deque[tuple[str, Key, Item | None]] = deque()
        self._changed = threading.Condition()
        self._held = 0
        self._stopping = False
        self.rejected: list[Rejection] = []
        self.denied: list[Rejection] = []
        self.requests: list[str] = []
        # The last SearchVectors requests, as sent, and how many there were in all.
        self.searches: deque[Item] = deque(maxlen=SEARCHES_KEPT)
        self.searched = 0
        self._throttled: dict[str, int] = {}
        super().__init__("vector-dynamodb", host, port)
        self._replicator = threading.Thread(
            target=self._replicate, name="vector-dynamodb-replication", daemon=True
        )

    def start(self) -> Self:
        self._replicator.start()
        return super().start()

    def stop(self) -> None:
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        super().stop()
        self._replicator.join(timeout=5)

    # --- for tests and the local stack ---------------------------------------------------

    def settle(self, timeout: float = 10.0) -> None:
        """Wait until every write so far is in the indexes (TimeoutError: it was not)."""
        with self._changed:
            if not self._changed.wait_for(lambda: not self._pending or self._held, timeout):
                raise TimeoutError("the vector index did not catch up")
            if self._pending:
                raise TimeoutError("replication is held")

    @contextmanager
    def held(self) -> Iterator[None]:
        """Writes reach the table but not the indexes until the block ends (a replication
        lag, as DynamoDB's indexes may have)."""
        with self._changed:
            self._held += 1
        try:
            yield
        finally:
            with self._changed:
                self._held -= 1
                self._changed.notify_all()

    def throttle(self, operation: str, times: int) -> None:
        """Answer the next `times` requests of `operation` with a ThrottlingException (as
        DynamoDB does past a partition's or an account's throughput)."""
        with self._lock:
            self._throttled[operation] = times

    def index(self, table: str, name: str) -> VectorIndex:
        with self._lock:
            return self._tables[table].indexes[name]

    def adopt(self, definition: Item) -> None:
        """Give a table the engine already has (a persisted DynamoDB Local) the vector
        indexes and attribute definitions of `definition` (CreateTable's arguments), filled
        from a Scan."""
        table = definition["TableName"]
        description = self._engine("DescribeTable", {"TableName": table})["Table"]
        description["AttributeDefinitions"] = definition["AttributeDefinitions"]
        registered = self._register(description, definition.get("VectorIndexes", []))
        start: Item | None = None
        while True:
            request: Item = {"TableName": table}
            if start:
                request["ExclusiveStartKey"] = start
            page = self._engine("Scan", request)
            for item in page.get("Items", []):
                self._apply(registered, _key(item, registered.key_names), item)
            start = page.get("LastEvaluatedKey")
            if not start:
                return

    # --- WSGI ----------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        request = Request(environ)
        body = request.get_data(cache=True)
        target = request.headers.get("X-Amz-Target", "")
        operation = target[len(PREFIX) :] if target.startswith(PREFIX) else target
        try:
            if self._key is not None:
                self._verify(request, body)
            with self._lock:
                self.requests.append(operation)
                throttled = self._throttled.get(operation, 0)
                if throttled:
                    self._throttled[operation] = throttled - 1
            if throttled:
                raise Refused(THROTTLING, "Throughput exceeds the current capacity", 400, False)
            try:
                response = self._route(operation, request, body)
            except OSError as exc:
                # The engine behind this server is gone (DynamoDB Local killed): DynamoDB's
                # own 500, which clients retry. Raised on, a ConnectionError would read to
                # werkzeug as the client's dropped connection, and it would answer nothing.
                raise Refused(INTERNAL, "Internal server error", 500, False) from exc
        except Refused as refusal:
            if refusal.status == 400 and refusal.recorded:
                with self._lock:
                    self.rejected.append(Rejection(operation, refusal.error, refusal.message))
            response = _error(refusal)
        return response(environ, start_response)

    def _verify(self, request: Request, body: bytes) -> None:
        key = self._key
        try:
            verify(
                request,
                body,
                service="dynamodb",
                region=self.region,
                key_for=lambda access: key if key and access == key.access_key else None,
            )
        except SignatureRejected as exc:
            with self._lock:
                self.denied.append(Rejection("", exc.error_type, exc.message))
            raise Refused(exc.error_type, exc.message, 403) from exc

    def _route(self, operation: str, request: Request, body: bytes) -> Response:
        payload = json.loads(body or b"{}")
        if operation == "SearchVectors":
            return _ok(self._search(payload))
        if operation == "CreateTable":
            return self._create_table(request, body, payload)
        if operation == "UpdateTable" and "VectorIndexUpdates" in payload:
            raise _validation("VectorIndexUpdates is not implemented by the local stand-in")
        if operation in WRITES and self._touches_vectors(operation, payload):
            return self._write(operation, request, body, payload)
        response = self._forward(request, body)
        if response.status_code == 200 and operation in ("DescribeTable", "DeleteTable"):
            return self._described(operation, payload, response)
        return response

    # --- forwarding ----------------------------------------------------------------------

    def _forward(self, request: Request, body: bytes) -> Response:
        headers = {
            name: value
            for name, value in request.headers.items()
            if name.lower() not in ("host", "content-length", "connection")
        }
        status, content, answer_headers = self._send(body, headers)
        return Response(content, status=status, headers=answer_headers)

    def _send(self, body: bytes, headers: dict[str, str]) -> tuple[int, bytes, dict[str, str]]:
        parts = urlsplit(self.engine)
        connection = http.client.HTTPConnection(
            parts.hostname or "127.0.0.1", parts.port, timeout=30
        )
        try:
            connection.request("POST", parts.path or "/", body=body, headers=headers)
            answer = connection.getresponse()
            content = answer.read()
            kept = {
                name: value
                for name, value in answer.getheaders()
                if name.lower() in ("content-type", "x-amzn-requestid", "x-amz-crc32")
            }
            return answer.status, content, kept
        finally:
            connection.close()

    def _engine(self, operation: str, payload: Item) -> Item:
        """One request of this server's own to the engine, signed with the fake credentials
        (the engines do not verify signatures; moto picks its default account for them)."""
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest
        from botocore.credentials import Credentials

        body = json.dumps(payload).encode()
        aws_request = AWSRequest(
            method="POST",
            url=self.engine + "/",
            data=body,
            headers={"Content-Type": CONTENT_TYPE, "X-Amz-Target": PREFIX + operation},
        )
        SigV4Auth(Credentials(FAKE_ACCESS_KEY, FAKE_SECRET_KEY), "dynamodb", self.region).add_auth(
            aws_request
        )
        status, content, _ = self._send(body, dict(aws_request.headers.items()))
        answer: Item = json.loads(content or b"{}")
        if status != 200:
            error = str(answer.get("__type", "InternalServerError"))
            raise Refused(error, str(answer.get("message") or answer.get("Message") or ""), status)
        return answer

    # --- tables --------------------------------------------------------------------------

    def _register(self, description: Item, vector_indexes: list[Item]) -> _Table:
        name = description["TableName"]
        definitions = {
            d["AttributeName"]: d["AttributeType"] for d in description["AttributeDefinitions"]
        }
        key_names = tuple(k["AttributeName"] for k in description["KeySchema"])
        arn = description.get("TableArn") or (
            f"arn:aws:dynamodb:{self.region}:{self._account}:table/{name}"
        )
        indexes: dict[str, VectorIndex] = {}
        for spec in vector_indexes:
            index = _checked_index(spec, definitions, arn)
            if index.name in indexes:
                raise _validation("Duplicate vector index name: " + index.name)
            indexes[index.name] = index
        if len(indexes) > MAX_VECTOR_INDEXES:
            raise _validation(f"A table has at most {MAX_VECTOR_INDEXES} vector indexes")
        table = _Table(name, key_names, definitions, indexes)
        with self._lock:
            self._tables[name] = table
        return table

    def _create_table(self, request: Request, body: bytes, payload: Item) -> Response:
        specs = payload.pop("VectorIndexes", None)
        if not specs:
            return self._forward(request, body)
        if payload.get("BillingMode") != "PAY_PER_REQUEST":
            raise _validation("Vector indexes are supported only on on-demand tables")
        definitions = {
            d["AttributeName"]: d["AttributeType"] for d in payload["AttributeDefinitions"]
        }
        for spec in specs:  # refused before anything is created
            _checked_index(spec, definitions, "")
        # The engine refuses attribute definitions no key uses: it gets those of its keys.
        keyed = {k["AttributeName"] for k in payload.get("KeySchema", [])}
        for group in ("GlobalSecondaryIndexes", "LocalSecondaryIndexes"):
            for index in payload.get(group, []):
                keyed |= {k["AttributeName"] for k in index["KeySchema"]}
        engine_payload = {
            **payload,
            "AttributeDefinitions": [
                d for d in payload["AttributeDefinitions"] if d["AttributeName"] in keyed
            ],
        }
        answer = self._engine("CreateTable", engine_payload)
        description = answer["TableDescription"]
        table = self._register(
            {**description, "AttributeDefinitions": payload["AttributeDefinitions"]}, specs
        )
        description["AttributeDefinitions"] = payload["AttributeDefinitions"]
        description["VectorIndexes"] = [index.describe() for index in table.indexes.values()]
        return _ok(answer)

    def _described(self, operation: str, payload: Item, response: Response) -> Response:
        name = payload.get("TableName")
        with self._lock:
            table = self._tables.get(name) if isinstance(name, str) else None
            if table is not None and operation == "DeleteTable":
                del self._tables[table.name]
        if table is None or operation == "DeleteTable":
            return response
        answer = json.loads(response.get_data())
        answer["Table"]["AttributeDefinitions"] = [
            {"AttributeName": name, "AttributeType": kind} for name, kind in table.types.items()
        ]
        answer["Table"]["VectorIndexes"] = [index.describe() for index in table.indexes.values()]
        return _ok(answer)

    def _table(self, name: Any) -> _Table | None:
        with self._lock:
            return self._tables.get(name) if isinstance(name, str) else None

    # --- writes --------------------------------------------------------------------------

    def _touches_vectors(self, operation: str, payload: Item) -> bool:
        return any(self._table(name) is not None for name, _ in _targets(operation, payload))

    def _write(self, operation: str, request: Request, body: bytes, payload: Item) -> Response:
        targets = _targets(operation, payload)
        for name, put in targets:
            table = self._table(name)
            if table is not None and put is not None:
                _check_put(table, put)
        with self._write_lock:
            touched = _keys(operation, payload, self._table)
            before = {
                (name, json.dumps(key, sort_keys=True)): self._read(name, key)
                for name, key in touched
            }
            response = self._forward(request, body)
            if response.status_code != 200:
                return response
            answer = json.loads(response.get_data() or b"{}")
            unprocessed = answer.get("UnprocessedItems") or {}
            written: dict[str, dict[str, int]] = {}
            for name, key in touched:
                table = self._table(name)
                if table is None or _unprocessed(unprocessed.get(name, []), key, table):
                    continue
                after = self._read(name, key)
                previous = before.get((name, json.dumps(key, sort_keys=True)))
                for index in table.indexes.values():
                    moved = [s for s in (previous, after) if s and _indexable(index, s)]
                    if moved:
                        written.setdefault(name, {}).setdefault(index.name, 0)
                        written[name][index.name] += replicated_bytes(
                            index, moved[-1], table.key_names
                        )
                self._enqueue(name, _key(key, table.key_names), after)
        if payload.get("ReturnConsumedCapacity") == "INDEXES" and written:
            _add_vector_capacity(answer, operation, written)
            return _ok(answer)
        return response

    def _read(self, table: str, key: Item) -> Item | None:
        answer = self._engine("GetItem", {"TableName": table, "Key": key, "ConsistentRead": True})
        item = answer.get("Item")
        return item if isinstance(item, dict) else None

    def _enqueue(self, table: str, key: Key, item: Item | None) -> None:
        with self._changed:
            self._pending.append((table, key, item))
            self._changed.notify_all()

    def _replicate(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._stopping or (self._pending and not self._held))
                if self._stopping:
                    return
                name, key, item = self._pending[0]
            table = self._table(name)
            if table is not None:
                self._apply(table, key, item)
            with self._changed:
                self._pending.popleft()
                self._changed.notify_all()

    def _apply(self, table: _Table, key: Key, item: Item | None) -> None:
        with self._lock:
            for index in table.indexes.values():
                old = index.entries.pop(key, None)
                if old is not None and index.hash:
                    index.partitions.get(_hash_value(old.item, index.hash), set()).discard(key)
                if item is None or not _indexable(index, item):
                    continue
                vector = _vector(item[index.attribute], index.dimensions)
                assert vector is not None
                entry = _Entry(vector, index.projected(item, table.key_names))
                index.entries[key] = entry
                if index.hash:
                    index.partitions.setdefault(_hash_value(item, index.hash), set()).add(key)

    # --- search --------------------------------------------------------------------------

    def _search(self, payload: Item) -> Item:
        with self._lock:
            self.searches.append(payload)
            self.searched += 1
        table = self._table(payload.get("TableName"))
        if table is None:
            self._engine("DescribeTable", {"TableName": payload.get("TableName")})
            raise _validation(
                f"The table does not have the specified index: {payload.get('IndexName')}"
            )
        index = table.indexes.get(payload.get("IndexName", ""))
        if index is None:
            raise _validation(
                f"The table does not have the specified index: {payload.get('IndexName')}"
            )
        top_k = payload.get("TopK")
        if not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise _validation("Provided TopK value is out of valid range")
        query = _vector({"L": payload.get("SearchVector", [])}, index.dimensions)
        if query is None:
            raise _validation(
                f"SearchVector must hold {index.dimensions} numbers, the index's dimensions"
            )
        names: dict[str, str] = payload.get("ExpressionAttributeNames") or {}
        values: dict[str, Any] = payload.get("ExpressionAttributeValues") or {}
        used_names: set[str] = set()
        used_values: set[str] = set()
        expression = payload.get("SearchConditionExpression")
        required: dict[str, Any] = {}
        if expression is None:
            if index.hash:
                raise _validation(
                    "SearchConditionExpression must be provided when SearchSchema has a HASH key"
                )
        else:
            for operand, placeholder in parse_condition(expression):
                attribute = _name(operand, names, used_names)
                if attribute not in index.schema:
                    raise _validation(
                        f"SearchConditionExpression: {attribute} is not in the index's SearchSchema"
                    )
                if placeholder not in values:
                    raise _validation(
                        "An expression attribute value used in expression is not defined; "
                        f"attribute value: {placeholder}"
                    )
                used_values.add(placeholder)
                if required.setdefault(attribute, values[placeholder]) != values[placeholder]:
                    required[attribute] = None  # two values: nothing can match
            if index.hash and index.hash not in required:
                raise _validation(
                    "SearchConditionExpression must test the vector index partition key "
                    f"{index.hash} for equality"
                )
        projection = self._projection(payload, index, table, names, used_names)
        _unused("ExpressionAttributeNames", set(names) - used_names)
        _unused("ExpressionAttributeValues", set(values) - used_values)
        with self._lock:
            keys = (
                index.partitions.get(json.dumps(required[index.hash], sort_keys=True), set())
                if index.hash and required.get(index.hash) is not None
                else (set(index.entries) if not index.hash else set())
            )
            candidates = [
                (key, index.entries[key])
                for key in sorted(keys)
                if all(
                    wanted is not None and _same(index.entries[key].item.get(name), wanted)
                    for name, wanted in required.items()
                )
            ]
        results: list[Item] = []
        hits: list[Item] = []
        if candidates:
            matrix = np.stack([entry.vector for _, entry in candidates])
            scores = _score(index.distance, matrix, query)
            order = np.argsort(
                -scores if index.distance == "DOT_PRODUCT" else scores, kind="stable"
            )
            for row in order[:top_k]:
                entry = candidates[int(row)][1]
                hits.append(entry.item)
                shown = {
                    name: value
                    for name, value in entry.item.items()
                    if (name in projection if projection is not None else name != index.attribute)
                }
                results.append({"Item": shown, "Score": float(scores[int(row)])})
        answer: Item = {"SearchResults": results}
        if payload.get("ReturnConsumedCapacity") in ("TOTAL", "INDEXES"):
            shown_vectors = sum(index.attribute in result["Item"] for result in results)
            answer["ConsumedCapacity"] = {
                "VectorSearchRequestBytes": search_request_bytes(index, hits, shown_vectors)
            }
        return answer

    @staticmethod
    def _projection(
        payload: Item, index: VectorIndex, table: _Table, names: dict[str, str], used: set[str]
    ) -> set[str] | None:
        """The attributes a hit shows: those ProjectionExpression names, or (None) without
        one, everything the index holds but the vector, which DynamoDB returns only when
        asked for (ExtendDB's measurement of 2026-08-10, even under ProjectionType ALL)."""
        expression = payload.get("ProjectionExpression")
        if expression is None:
            return None
        every = set(table.key_names) | set(index.schema) | {index.attribute}
        if index.projection.get("ProjectionType") == "INCLUDE":
            every |= set(index.projection.get("NonKeyAttributes", []))
        asked = {_name(operand.strip(), names, used) for operand in expression.split(",")}
        outside = sorted(
            name
            for name in asked
            if name not in every and index.projection.get("ProjectionType") != "ALL"
        )
        if outside:
            raise _validation(
                f"ProjectionExpression names attributes the index does not project: {outside}"
            )
        return asked


# --- helpers of writes ----------------------------------------------------------------------


def _targets(operation: str, payload: Item) -> list[tuple[str, Item | None]]:
    """The tables a write touches, each with the item it puts (None: not a Put)."""
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        return [
            (payload.get("TableName", ""), payload.get("Item") if operation == "PutItem" else None)
        ]
    if operation == "BatchWriteItem":
        return [
            (name, (request.get("PutRequest") or {}).get("Item"))
            for name, requests in (payload.get("RequestItems") or {}).items()
            for request in requests
        ]
    found: list[tuple[str, Item | None]] = []
    for action in payload.get("TransactItems") or []:
        for kind, body in action.items():
            if kind != "ConditionCheck":
                found.append(
                    (body.get("TableName", ""), body.get("Item") if kind == "Put" else None)
                )
    return found


def _keys(
    operation: str, payload: Item, table_of: Callable[[Any], _Table | None]
) -> list[tuple[str, Item]]:
    """The key of every item a write touches (of the tables with vector indexes)."""
    found: list[tuple[str, Item]] = []

    def add(name: str, item: Item | None, key: Item | None) -> None:
        table = table_of(name)
        if table is None:
            return
        source = key if key is not None else item or {}
        found.append((name, {k: source[k] for k in table.key_names if k in source}))

    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        add(payload.get("TableName", ""), payload.get("Item"), payload.get("Key"))
    elif operation == "BatchWriteItem":
        for name, requests in (payload.get("RequestItems") or {}).items():
            for request in requests:
                put, delete = request.get("PutRequest"), request.get("DeleteRequest")
                add(name, (put or {}).get("Item"), (delete or {}).get("Key"))
    else:
        for action in payload.get("TransactItems") or []:
            for kind, body in action.items():
                if kind != "ConditionCheck":
                    add(body.get("TableName", ""), body.get("Item"), body.get("Key"))
    return found


def _unprocessed(requests: list[Item], key: Item, table: _Table) -> bool:
    for request in requests:
        source = (
            (request.get("PutRequest") or {}).get("Item")
            or (request.get("DeleteRequest") or {}).get("Key")
            or {}
        )
        if all(source.get(name) == key.get(name) for name in table.key_names):
            return True
    return False


def _same(have: Any, wanted: Item) -> bool:
    """DynamoDB's equality of two AttributeValues (numbers by value: 1 = 1.0)."""
    if isinstance(have, dict) and set(have) == set(wanted) == {"N"}:
        return Decimal(have["N"]) == Decimal(wanted["N"])
    return bool(have == wanted)


def _hash_value(item: Item, attribute: str) -> str:
    return json.dumps(item.get(attribute), sort_keys=True)


def _indexable(index: VectorIndex, item: Item) -> bool:
    """Whether DynamoDB indexes the item: a valid vector, and the HASH attribute if any."""
    if index.attribute not in item or _vector(item[index.attribute], index.dimensions) is None:
        return False
    return index.hash is None or index.hash in item


def _check_put(table: _Table, item: Item) -> None:
    """A Put DynamoDB refuses for what the table's vector indexes need."""
    for index in table.indexes.values():
        if index.attribute in item:
            value = item[index.attribute]
            if not isinstance(value, dict) or set(value) != {"L"}:
                raise _validation(
                    f"One or more parameter values were invalid: Invalid type for vector "
                    f"attribute {index.attribute}: expected a list of numbers"
                )
            for position, member in enumerate(value["L"]):
                if set(member) != {"N"}:
                    raise _validation(
                        "One or more parameter values were invalid: Invalid type for vector "
                        f"attribute {index.attribute} at index {position}"
                    )
            if len(value["L"]) != index.dimensions:
                raise _validation(
                    f"One or more parameter values were invalid: vector attribute "
                    f"{index.attribute} has {len(value['L'])} dimensions, the index "
                    f"{index.name} {index.dimensions}"
                )
            if _vector(value, index.dimensions) is None:
                raise _validation(
                    "One or more parameter values were invalid: a vector holds numbers a "
                    "32-bit float cannot"
                )
        for name in index.schema:
            if name not in item:
                continue
            ((kind, raw),) = item[name].items()
            expected = table.types[name]
            if kind != expected:
                raise _validation(
                    "One or more parameter values were invalid: Type mismatch for Index Key "
                    f"{name} Expected: {expected} Actual: {kind} IndexName: {index.name}"
                )
            if kind in ("S", "B") and raw == "":
                raise _validation(
                    "One or more parameter values are not valid. A value specified for a "
                    "secondary index key is not supported. The AttributeValue for a key "
                    f"attribute cannot contain an empty string value. IndexName: {index.name}, "
                    f"IndexKey: {name}"
                )


def _add_vector_capacity(answer: Item, operation: str, written: dict[str, dict[str, int]]) -> None:
    indexes = {
        table: {name: {"VectorWriteRequestBytes": float(size)} for name, size in sizes.items()}
        for table, sizes in written.items()
    }
    consumed = answer.get("ConsumedCapacity")
    if operation in ("BatchWriteItem", "TransactWriteItems"):
        listed = consumed if isinstance(consumed, list) else []
        for table, by_index in indexes.items():
            entry = next((c for c in listed if c.get("TableName") == table), None)
            if entry is None:
                entry = {"TableName": table}
                listed.append(entry)
            entry["VectorIndexes"] = by_index
        answer["ConsumedCapacity"] = listed
        return
    ((table, by_index),) = indexes.items()
    entry = consumed if isinstance(consumed, dict) else {"TableName": table}
    entry["VectorIndexes"] = by_index
    answer["ConsumedCapacity"] = entry


def _unused(parameter: str, keys: set[str]) -> None:
    if keys:
        listed = ", ".join(sorted(keys))
        raise _validation(
            f"Value provided in {parameter} unused in expressions: keys: {{{listed}}}"
        )


def _ok(payload: Item) -> Response:
    return Response(json.dumps(payload), status=200, content_type=CONTENT_TYPE)


def _error(refusal: Refused) -> Response:
    body = {"__type": refusal.error, "message": refusal.message}
    return Response(json.dumps(body), status=refusal.status, content_type=CONTENT_TYPE)


@contextmanager
def vector_table_on_moto(
    template: Item, table: str, dimensions: int, region: str = "us-east-1"
) -> Iterator[tuple[VectorDynamoDB, Any]]:
    """The template's VectorTable (of `dimensions`) on this stand-in in front of moto's
    server (which shares moto's in-process backends), and a boto3 client of it; the stand-in
    checks the signatures of the credentials boto3 finds here."""
    import boto3

    from memkit_dev.local.dynamodb import MotoDynamoDB
    from memkit_dev.local.template import VECTOR_TABLE_RESOURCE, create_table

    # The credentials boto3 signs with here (moto's mock sets its own while it runs).
    credentials = boto3.Session().get_credentials().get_frozen_credentials()
    engine = MotoDynamoDB().start()
    try:
        with VectorDynamoDB(
            engine.endpoint,
            require_sigv4=True,
            access_key=credentials.access_key,
            secret_key=credentials.secret_key,
            session_token=credentials.token,
            region=region,
        ) as standin:
            client = boto3.client("dynamodb", region_name=region, endpoint_url=standin.url)
            if table in client.list_tables()["TableNames"]:
                client.delete_table(TableName=table)
            create_table(client, template, table, VECTOR_TABLE_RESOURCE, dimensions)
            yield standin, client
    finally:
        engine.stop()
