"""VectorStore dynamodb: the adapter (memkit.vectors.dynamodb) with boto3 against the local
stand-in for DynamoDB's vector indexes (memkit_dev.local.vector_dynamodb), which answers in
SearchVectors' request and response shapes and refuses what DynamoDB refuses. What every
backend shares is in test_vector_backends.py; here is what this one does its own way: one
scope a search, equality filters inside it and the rest after an over-fetch, eventual
consistency, generations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from memkit.errors import BadRequest, Misconfigured, StoreUnavailable, Throttled
from memkit.vectors.dynamodb import MAX_SCOPES, OVER_FETCH, TOP_K, DynamoVectorIndex, scope_of
from memkit.vectors.filters import conditions_from
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import Removal, VectorDoc
from tests.vector_tables import DynamoVectors, dynamodb_vectors

pytestmark = pytest.mark.integration

DIMENSIONS = 3


def _doc(doc_id: str, vector: list[float], tenant: str = "t", **fields: Any) -> VectorDoc:
    version = fields.pop("version", 1)
    text = fields.pop("text", "")
    return VectorDoc(doc_id, tenant, vector, version, text, fields)


@pytest.fixture
def vectors() -> Iterator[DynamoVectors]:
    with dynamodb_vectors(DIMENSIONS) as made:
        yield made
        assert made.standin.rejected == []
        assert made.standin.denied == []


@pytest.fixture
def index(vectors: DynamoVectors) -> DynamoVectorIndex:
    return vectors.index()


def _searches(vectors: DynamoVectors) -> list[dict[str, Any]]:
    return list(vectors.standin.searches)


def _ids(hits: Any) -> list[str]:
    return [hit.id for hit in hits]


# --- the table ------------------------------------------------------------------------------


def test_the_table_has_the_templates_vector_index_partitioned_by_scope(
    vectors: DynamoVectors,
) -> None:
    # Given the table created from template.yaml's VectorTable
    # When it is described
    [described] = vectors.client.describe_table(TableName=vectors.table)["Table"]["VectorIndexes"]

    # Then its vector index is partitioned by the scope, filters inline and is active
    assert described["IndexName"] == "memkit-vectors"
    assert described["Dimensions"] == DIMENSIONS
    assert described["DistanceFunction"] == "COSINE"
    assert described["SearchSchema"][0] == {
        "AttributeName": "scope",
        "SearchSchemaElementType": "HASH",
    }
    assert described["IndexStatus"] == "ACTIVE"


# --- scopes and isolation -------------------------------------------------------------------


def test_each_search_names_one_scope_of_the_searching_tenant(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given docs of two tenants in the same namespace, for the same user
    index.upsert(
        [
            _doc("mine", [1, 0, 0], namespace="n", user_id="ada"),
            _doc("theirs", [1, 0, 0], tenant="u", namespace="n", user_id="ada"),
        ]
    )
    vectors.settle()

    # When tenant t searches for that user and namespace
    conditions = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}})
    found = index.search("t", [1, 0, 0], 10, conditions)

    # Then one SearchVectors named t's scope alone, and only t's doc came back
    [search] = _searches(vectors)
    values = search["ExpressionAttributeValues"]
    assert values[":s"] == {"S": scope_of(0, "t", "n", "ada")}
    assert _ids(found) == ["mine"]


def test_an_id_holding_the_separator_cannot_reach_another_scope(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given tenant "t" with namespace "x#U#ada" and tenant "t#N#x" (ids that would spell
    # each other's scope unescaped)
    index.upsert([_doc("a", [1, 0, 0], namespace="x", user_id="ada")])
    vectors.settle()

    # When a tenant whose id forges the separators searches
    forged = index.search("t#N#x", [1, 0, 0], 10, conditions_from({"user_id": {"eq": "ada"}}))
    spoofed = index.search(
        "t", [1, 0, 0], 10, conditions_from({"namespace": {"eq": "x#U#ada"}, "user_id": {"eq": ""}})
    )

    # Then neither reaches the doc
    assert forged == []
    assert spoofed == []
    assert scope_of(0, "t#N#x", None, "ada") != scope_of(0, "t", "x", "ada")


def test_a_search_without_a_namespace_reads_each_of_the_users_scopes(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given a user's docs in two namespaces, and another user's
    index.upsert(
        [
            _doc("work", [1, 0, 0], namespace="work", user_id="ada"),
            _doc("home", [0.8, 0.2, 0], namespace="home", user_id="ada"),
            _doc("bob", [1, 0, 0], namespace="work", user_id="bob"),
        ]
    )
    vectors.settle()

    # When the user searches without a namespace
    found = index.search("t", [1, 0, 0], 10, conditions_from({"user_id": {"eq": "ada"}}))

    # Then both of the user's namespaces were searched (one request each), merged by score
    assert _ids(found) == ["work", "home"]
    scopes = sorted(s["ExpressionAttributeValues"][":s"]["S"] for s in _searches(vectors))
    assert scopes == sorted([scope_of(0, "t", "home", "ada"), scope_of(0, "t", "work", "ada")])


def test_a_search_reaching_too_many_scopes_is_a_400_saying_how_to_narrow_it(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given more users than one search reaches
    index.upsert(
        [_doc(f"d{n}", [1, 0, 0], namespace="n", user_id=f"u{n}") for n in range(MAX_SCOPES + 1)]
    )

    # When an admin searches the whole tenant
    with pytest.raises(BadRequest, match="filter by namespace and user_id"):
        index.search("t", [1, 0, 0], 10)

    # Then nothing was searched
    assert _searches(vectors) == []


# --- filters: inside the search, or after an over-fetch -------------------------------------


def test_equality_filters_go_inside_the_search(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    scoped = {"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}}
    conditions = conditions_from(
        {**scoped, "memory_type": {"eq": "episodic"}, "pinned": {"eq": True}}
    )

    index.search("t", [1, 0, 0], 5, conditions)

    [search] = _searches(vectors)
    assert search["TopK"] == 5  # nothing is left for after: no over-fetch
    expression = search["SearchConditionExpression"]
    names, values = search["ExpressionAttributeNames"], search["ExpressionAttributeValues"]
    tested = {
        names[name]: values[value]
        for name, value in (part.split(" = ") for part in expression.split(" AND "))
    }
    assert tested == {
        "scope": {"S": scope_of(0, "t", "n", "ada")},
        "f_memory_type": {"S": "episodic"},
        "f_pinned": {"N": "1"},
    }


def test_other_filters_apply_after_an_over_fetch(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given near docs without the topic, and farther ones with it
    docs = [
        _doc(f"near{n}", [1, 0.01 * n, 0], namespace="n", user_id="ada", topics=["other"])
        for n in range(6)
    ] + [
        _doc(f"far{n}", [0, 1, 0.01 * n], namespace="n", user_id="ada", topics=["tea"])
        for n in range(3)
    ]
    index.upsert(docs)
    vectors.settle()
    conditions = conditions_from(
        {"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}, "topics": {"any": ["tea"]}}
    )

    # When two are asked for with a topic filter
    found = index.search("t", [1, 0, 0], 2, conditions)

    # Then the index was asked for OVER_FETCH times as many, which left fewer than two with
    # the topic, so once more for its deepest; the two nearest with the topic come back
    assert [s["TopK"] for s in _searches(vectors)] == [OVER_FETCH * 2, TOP_K]
    assert _ids(found) == ["far0", "far1"]


@pytest.mark.parametrize(
    "filters",
    [
        {"topics": {"any": ["tea"]}},
        {"created_at": {"gte": 2}},
        {"user_id": {"ne": "ada"}},
        {"namespace": {"startswith": "wo"}},
        {"kind": {"eq": "record"}, "created_at": {"lt": 3}},
        {"pinned": {"eq": False}},
        {"session_id": {"any": ["s1", "s2"]}},
    ],
    ids=json.dumps,
)
def test_filters_find_what_the_exact_local_index_finds(
    vectors: DynamoVectors, index: DynamoVectorIndex, filters: dict[str, Any]
) -> None:
    docs = [
        _doc(
            "a",
            [1, 0, 0],
            namespace="work",
            user_id="ada",
            topics=["tea"],
            created_at=1,
            kind="record",
            pinned=True,
            session_id="s1",
        ),
        _doc(
            "b",
            [0.9, 0.1, 0],
            namespace="home",
            user_id="ada",
            created_at=2,
            kind="message",
            session_id="s2",
        ),
        _doc(
            "c",
            [0.5, 0.5, 0],
            namespace="work",
            user_id="bob",
            topics=["tea", "x"],
            created_at=3,
            kind="record",
            pinned=False,
        ),
        _doc("d", [0, 1, 0], namespace="work", created_at=4),
    ]
    index.upsert(docs)
    vectors.settle()
    reference = LocalVectorIndex(DIMENSIONS)
    reference.upsert(docs)
    conditions = conditions_from(filters)

    assert _ids(index.search("t", [1, 0, 0], 10, conditions)) == _ids(
        reference.search("t", [1, 0, 0], 10, conditions)
    )
    assert _ids(index.browse("t", 10, 0, conditions)) == _ids(
        reference.browse("t", 10, 0, conditions)
    )


# --- consistency ----------------------------------------------------------------------------


def test_the_index_is_eventually_consistent(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    scope = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}})

    # Given a write whose replication to the vector index lags
    with vectors.standin.held():
        assert index.upsert([_doc("late", [1, 0, 0], namespace="n", user_id="ada")]) == {}

        # Then a search right after does not see it yet
        assert index.search("t", [1, 0, 0], 10, scope) == []

    # And once the index caught up, it does
    vectors.settle()
    assert _ids(index.search("t", [1, 0, 0], 10, scope)) == ["late"]


def test_an_item_without_the_partition_attribute_is_written_but_never_indexed(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given an item with a vector but no scope (as DynamoDB documents: the write succeeds)
    vectors.client.put_item(
        TableName=vectors.table,
        Item={
            "PK": {"S": "x"},
            "SK": {"S": "DOC"},
            "vector": {"L": [{"N": "1"}, {"N": "0"}, {"N": "0"}]},
        },
    )
    vectors.settle()

    # Then the vector index does not hold it
    assert vectors.standin.index(vectors.table, "memkit-vectors").entries == {}


# --- versions -------------------------------------------------------------------------------


def test_a_removal_leaves_a_tombstone_that_expires_and_keeps_older_writes_out(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    scope = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}})
    written = _doc("memo", [1, 0, 0], namespace="n", user_id="ada", version=5)
    index.upsert([written])

    assert index.remove([Removal("memo", "t", 6)]) == {}
    assert index.upsert([written]) == {}
    vectors.settle()

    assert index.search("t", [1, 0, 0], 10, scope) == []
    [item] = vectors.client.scan(
        TableName=vectors.table, FilterExpression="attribute_exists(deleted)"
    )["Items"]
    assert item["version"] == {"N": "6"}
    assert int(item["expires_at"]["N"]) > 0


# --- the stand-in refuses what DynamoDB refuses ---------------------------------------------


def _raw_search(vectors: DynamoVectors, **request: Any) -> Any:
    body = {
        "TableName": vectors.table,
        "IndexName": "memkit-vectors",
        "SearchVector": [{"N": "1"}, {"N": "0"}, {"N": "0"}],
        "TopK": 3,
        "SearchConditionExpression": "#s = :s",
        "ExpressionAttributeNames": {"#s": "scope"},
        "ExpressionAttributeValues": {":s": {"S": "x"}},
        **request,
    }
    body = {key: value for key, value in body.items() if value is not None}
    return vectors.client.search_vectors(**body)


@pytest.mark.parametrize(
    ("request_", "message"),
    [
        ({"TopK": 101}, "Provided TopK value is out of valid range"),
        (
            {
                "SearchConditionExpression": None,
                "ExpressionAttributeNames": None,
                "ExpressionAttributeValues": None,
            },
            "SearchConditionExpression must be provided when SearchSchema has a HASH key",
        ),
        (
            {"SearchConditionExpression": "#s < :s"},
            "Invalid SearchConditionExpression: Invalid comparator used in "
            "SearchConditionExpression",
        ),
        (
            {
                "SearchConditionExpression": "#s BETWEEN :s AND :t",
                "ExpressionAttributeValues": {":s": {"S": "x"}, ":t": {"S": "y"}},
            },
            "Invalid SearchConditionExpression: Invalid operator used in SearchConditionExpression",
        ),
        (
            {
                "SearchConditionExpression": "#s IN (:s, :t)",
                "ExpressionAttributeValues": {":s": {"S": "x"}, ":t": {"S": "y"}},
            },
            "Invalid SearchConditionExpression: Invalid operator used in SearchConditionExpression",
        ),
        (
            {
                "SearchConditionExpression": "#s = :s OR #s = :t",
                "ExpressionAttributeValues": {":s": {"S": "x"}, ":t": {"S": "y"}},
            },
            "OR is not supported",
        ),
        (
            {"SearchConditionExpression": "#k = :s", "ExpressionAttributeNames": {"#k": "kind"}},
            "is not in the index's SearchSchema",
        ),
        ({"IndexName": "other"}, "The table does not have the specified index: other"),
        ({"SearchVector": [{"N": "1"}]}, "SearchVector must hold 3 numbers"),
    ],
)
def test_search_requests_dynamodb_refuses_are_refused(
    vectors: DynamoVectors, request_: dict[str, Any], message: str
) -> None:
    with pytest.raises(ClientError) as raised:
        _raw_search(vectors, **request_)

    assert raised.value.response["Error"]["Code"] == "ValidationException"
    assert message in raised.value.response["Error"]["Message"]
    vectors.standin.rejected.clear()


def test_a_vector_of_the_wrong_length_is_refused_and_nothing_is_written(
    vectors: DynamoVectors,
) -> None:
    item = {
        "PK": {"S": "x"},
        "SK": {"S": "DOC"},
        "scope": {"S": "s"},
        "vector": {"L": [{"N": "1"}]},
    }

    with pytest.raises(ClientError, match="dimensions"):
        vectors.client.put_item(TableName=vectors.table, Item=item)

    assert vectors.client.scan(TableName=vectors.table)["Items"] == []
    vectors.standin.rejected.clear()


def test_a_write_reports_the_bytes_it_replicates_to_the_vector_index(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    doc = index._doc_item(0, _doc("a", [1, 0, 0], namespace="n", user_id="ada"))

    answer = vectors.client.put_item(
        TableName=vectors.table, Item=doc, ReturnConsumedCapacity="INDEXES"
    )

    replicated = answer["ConsumedCapacity"]["VectorIndexes"]["memkit-vectors"]
    assert replicated["VectorWriteRequestBytes"] > DIMENSIONS * 4


# --- what the vector index meters, at Titan's 1,024 dimensions -------------------------------

WIDE = 1024


def _wide_item(key: str, scope: str) -> dict[str, Any]:
    return {
        "PK": {"S": key},
        "SK": {"S": "DOC"},
        "scope": {"S": scope},
        "vector": {"L": [{"N": "0.5"}] * WIDE},
    }


@pytest.fixture
def wide() -> Iterator[DynamoVectors]:
    with dynamodb_vectors(WIDE) as made:
        for key in ("d01", "d02", "d03"):
            made.client.put_item(TableName=made.table, Item=_wide_item(key, "s"))
        made.settle()
        yield made
        assert made.standin.rejected == []


def _search_bytes(wide: DynamoVectors, **request: Any) -> tuple[float, list[dict[str, Any]]]:
    answer = wide.client.search_vectors(
        TableName=wide.table,
        IndexName="memkit-vectors",
        SearchVector=[{"N": "1"}] * WIDE,
        TopK=100,
        SearchConditionExpression="#s = :s",
        ExpressionAttributeValues={":s": {"S": "s"}},
        ReturnConsumedCapacity="TOTAL",
        **request,
    )
    return answer["ConsumedCapacity"]["VectorSearchRequestBytes"], answer["SearchResults"]


def test_a_search_meters_the_bytes_dynamodb_was_measured_to(wide: DynamoVectors) -> None:
    # Given three docs of 16 bytes besides their vector (PK d0n: 5, SK DOC: 5, scope s: 6)

    # When TopK 100 finds them, projecting their keys
    metered, results = _search_bytes(
        wide, ProjectionExpression="#s, PK", ExpressionAttributeNames={"#s": "scope"}
    )

    # Then 30.6875 bytes a dimension, and 65 a result plus its 16 bytes
    assert len(results) == 3
    assert metered == 31_424 + 3 * (65 + 16)


def test_a_search_that_shows_the_vectors_meters_4_bytes_a_dimension_each(
    wide: DynamoVectors,
) -> None:
    metered, results = _search_bytes(
        wide, ProjectionExpression="#s, PK, vector", ExpressionAttributeNames={"#s": "scope"}
    )

    assert all(len(result["Item"]["vector"]["L"]) == WIDE for result in results)
    assert metered == 31_424 + 3 * (65 + 16) + 3 * 4 * WIDE


def test_a_search_without_a_projection_returns_no_vector_and_meters_none(
    wide: DynamoVectors,
) -> None:
    metered, results = _search_bytes(wide, ExpressionAttributeNames={"#s": "scope"})

    assert sorted(result["Item"]["PK"]["S"] for result in results) == ["d01", "d02", "d03"]
    assert all("vector" not in result["Item"] for result in results)
    assert metered == 31_424 + 3 * (65 + 16)


def test_a_small_search_meters_dynamodbs_floor_of_1024_bytes(vectors: DynamoVectors) -> None:
    answer = _raw_search(vectors, ReturnConsumedCapacity="TOTAL")

    assert answer["ConsumedCapacity"]["VectorSearchRequestBytes"] == 1024


def test_a_1024_dimension_write_meters_awss_example_4125_bytes(wide: DynamoVectors) -> None:
    # Given a doc of 29 bytes besides its vector (PK: 7, SK: 5, scope: 17)
    item = _wide_item("doc-1", "tenant#n#ada")

    answer = wide.client.put_item(TableName=wide.table, Item=item, ReturnConsumedCapacity="INDEXES")

    # Then its 4,096 bytes of float32 and those 29, as AWS's example of such a write reports
    replicated = answer["ConsumedCapacity"]["VectorIndexes"]["memkit-vectors"]
    assert replicated["VectorWriteRequestBytes"] == 4125


# --- errors ---------------------------------------------------------------------------------


def test_an_unreachable_table_is_the_503_domain_error() -> None:
    import boto3
    from botocore.config import Config

    client = boto3.client(
        "dynamodb",
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        config=Config(retries={"max_attempts": 1}, connect_timeout=1),
    )
    index = DynamoVectorIndex(client, "absent", DIMENSIONS, cache_seconds=0)

    with pytest.raises(StoreUnavailable):
        index.search(
            "t", [1, 0, 0], 3, conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "u"}})
        )
    assert set(index.upsert([_doc("a", [1, 0, 0])]).values()) == {"EndpointConnectionError"}


def test_a_missing_table_is_an_operators_fix(vectors: DynamoVectors) -> None:
    index = DynamoVectorIndex(vectors.client, "no-such-table", DIMENSIONS, cache_seconds=0)

    with pytest.raises(Misconfigured):
        index.search("t", [1, 0, 0], 3)


def test_throttling_is_the_429_domain_error(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    vectors.standin.throttle("SearchVectors", times=10)

    with pytest.raises(Throttled):
        index.search(
            "t", [1, 0, 0], 3, conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "u"}})
        )


def test_nothing_is_sent_once_the_invocations_deadline_has_passed(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    """As on OpenSearch, a request after the deadline the handler set is the 503 domain error,
    not one more call that could outlast the invocation; in time the same search is sent."""
    from memkit.times import Deadline, within

    scope = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "u"}})
    index.search("t", [1, 0, 0], 3, scope)
    sent = len(_searches(vectors))

    with within(Deadline(at=0.0)), pytest.raises(StoreUnavailable):
        index.search("t", [1, 0, 0], 3, scope)
    assert len(_searches(vectors)) == sent

    with within(Deadline.after(60)):
        index.search("t", [1, 0, 0], 3, scope)
    assert len(_searches(vectors)) == sent + 1


def test_a_search_of_several_scopes_sends_nothing_from_its_threads_past_the_deadline(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    """The scopes of one search are read in parallel threads; each of them is bound by the
    invocation's deadline as the caller's thread is (a thread sees no context variable it
    was not given, so a dead engine once held search and prompt for the gateway's 30 s)."""
    import threading

    from memkit.times import Deadline, within

    index.upsert(
        [
            _doc("h", [1, 0, 0], namespace="home", user_id="ada"),
            _doc("w", [1, 0, 0], namespace="work", user_id="ada"),
        ]
    )
    scopes = conditions_from({"user_id": {"eq": "ada"}})
    assert sorted(_ids(index.search("t", [1, 0, 0], 3, scopes))) == ["h", "w"]
    sent = len(_searches(vectors))
    caller = threading.current_thread()

    # Given a deadline that has passed for every thread but the caller's (the scope lookup
    # runs in time; the scope searches, in the pool's threads, run after it)
    def clock() -> float:
        return 0.0 if threading.current_thread() is caller else 100.0

    with within(Deadline(at=50.0, clock=clock)), pytest.raises(StoreUnavailable):
        index.search("t", [1, 0, 0], 3, scopes)
    assert len(_searches(vectors)) == sent


# --- generations (memkit reindex) -----------------------------------------------------------


def test_a_rebuild_fills_the_next_generation_and_the_switch_moves_every_read_to_it(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    scope = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}})
    index.upsert([_doc("old", [1, 0, 0], namespace="n", user_id="ada")])

    # When a rebuild writes another doc into its generation
    rebuild = index.rebuild(DIMENSIONS)
    assert rebuild.target.upsert([_doc("new", [1, 0, 0], namespace="n", user_id="ada")]) == {}
    vectors.settle()

    # Then until the switch searches read the old generation, after it the new one
    assert (rebuild.generation, rebuild.replaced) == ("g1", "g0")
    assert _ids(index.search("t", [1, 0, 0], 10, scope)) == ["old"]
    rebuild.switch()
    rebuild.retire()
    vectors.settle()
    assert _ids(index.search("t", [1, 0, 0], 10, scope)) == ["new"]
    keys = [item["PK"]["S"] for item in vectors.client.scan(TableName=vectors.table)["Items"]]
    assert not [key for key in keys if key.startswith("G0#")]


def test_an_abandoned_rebuild_deletes_its_generation(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    rebuild = index.rebuild(DIMENSIONS)
    rebuild.target.upsert([_doc("new", [1, 0, 0], namespace="n", user_id="ada")])

    rebuild.abandon()

    assert vectors.client.scan(TableName=vectors.table)["Items"] == []


def test_a_rebuild_to_other_dimensions_is_refused(index: DynamoVectorIndex) -> None:
    with pytest.raises(Misconfigured, match="new vector table"):
        index.rebuild(DIMENSIONS + 1)


def test_a_paused_rebuild_resumes_only_while_the_live_generation_is_unchanged(
    index: DynamoVectorIndex,
) -> None:
    rebuild = index.rebuild(DIMENSIONS)

    resumed = index.resume_rebuild(rebuild.generation, rebuild.replaced, DIMENSIONS)
    assert resumed.generation == "g1"
    rebuild.switch()
    with pytest.raises(BadRequest, match="out of date"):
        index.resume_rebuild("g1", "g0", DIMENSIONS)


def test_every_process_reads_the_switch_within_its_cache_time(
    vectors: DynamoVectors,
) -> None:
    waited: list[float] = []
    cached = vectors.index(cache_seconds=30.0, wait=waited.append)
    cached.generation()

    cached.rebuild(DIMENSIONS).switch()

    # the switch returns once every process's cached generation has expired
    assert waited == [30.0]
    assert cached.generation() == 1


def test_a_search_by_namespace_alone_reads_only_that_namespaces_partitions(
    vectors: DynamoVectors, index: DynamoVectorIndex
) -> None:
    # Given more users than a search reaches, in another namespace, and two in this one
    index.upsert(
        [_doc(f"d{n}", [1, 0, 0], namespace="big", user_id=f"u{n}") for n in range(MAX_SCOPES + 1)]
        + [
            _doc("a", [1, 0, 0], namespace="small", user_id="ada"),
            _doc("b", [0.5, 0.5, 0], namespace="small", user_id="bob"),
        ]
    )
    vectors.settle()

    # When an admin searches one namespace without a user
    found = index.search("t", [1, 0, 0], 10, conditions_from({"namespace": {"eq": "small"}}))

    # Then that namespace's two users were searched, not refused for the other's many
    assert _ids(found) == ["a", "b"]
    assert len(_searches(vectors)) == 2


def test_a_process_reads_a_partitions_texts_once_for_searches_in_a_row(
    vectors: DynamoVectors,
) -> None:
    # Given a process that keeps the texts it read for a while
    index = vectors.index(keyword_cache_seconds=3600.0)
    scope = conditions_from({"namespace": {"eq": "n"}, "user_id": {"eq": "ada"}})
    index.upsert([_doc("tea", [1, 0, 0], namespace="n", user_id="ada", text="green tea")])
    vectors.settle()

    def queries() -> int:
        return vectors.standin.requests.count("Query")

    # When it searches by keywords twice, a doc written in between
    first = index.keyword("t", "tea", 10, scope)
    read = queries()
    index.upsert([_doc("mint", [0, 1, 0], namespace="n", user_id="ada", text="mint tea")])
    second = index.keyword("t", "tea", 10, scope)

    # Then the second search read nothing and ranks what the first read; a process that
    # keeps nothing finds the new doc at once
    assert queries() == read
    assert _ids(first) == _ids(second) == ["tea"]
    assert sorted(_ids(vectors.index().keyword("t", "tea", 10, scope))) == ["mint", "tea"]


def test_keyword_search_reads_a_scopes_newest_docs_alone(
    vectors: DynamoVectors, index: DynamoVectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memkit.vectors import dynamodb

    # Given a scope of three docs, and keyword search bounded to its two newest
    monkeypatch.setattr(dynamodb, "KEYWORD_DOCS", 2)
    scope = {"namespace": "n", "user_id": "ada"}
    index.upsert(
        [
            _doc(f"tea{n}", [1, 0, 0], text=f"tea number {n}", created_at=n, **scope)
            for n in range(3)
        ]
    )
    vectors.settle()

    # When the scope is searched by keywords, then the oldest is found by its vector alone
    found = index.keyword("t", "tea", 10, conditions_from({k: {"eq": v} for k, v in scope.items()}))
    assert sorted(_ids(found)) == ["tea1", "tea2"]
