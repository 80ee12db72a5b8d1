"""The OpenSearch adapter, for real: opensearch-py with SigV4 signing against the strict
loopback OpenSearch, as a managed domain and as a serverless collection: what OpenSearch does
its own way (the index and its mappings, the request subset, serverless copies, aliases). What
every backend does the same (search, filters, keyword, listings, versions) is in
test_vector_backends.py, with the local exact index as the reference."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from memkit.config import IndexSettings
from memkit.errors import StoreUnavailable, Throttled
from memkit.vectors.filters import Condition
from memkit.vectors.opensearch import (
    Flavour,
    OpenSearchIndex,
    cosine_from_score,
    index_body,
    opensearch_index,
)
from memkit.vectors.protocol import Hit, Removal, VectorDoc
from memkit_dev.local.opensearch import LoopbackOpenSearch
from tests.vector_cases import CONVERSATION, DOCS, chat_message, vector_doc

pytestmark = pytest.mark.integration

DIMENSIONS = 3
INDEX = "memkit-memories"
REGION = "us-east-1"


def _ids(hits: list[Hit]) -> list[str]:
    return [hit.id for hit in hits]


def _start(flavour: str) -> LoopbackOpenSearch:
    server = LoopbackOpenSearch(
        DIMENSIONS, flavour=flavour, require_sigv4=True, region=REGION, session_token="testing"
    )
    server.start()
    return server


@pytest.fixture(params=["domain", "serverless"])
def server(request: pytest.FixtureRequest) -> Iterator[LoopbackOpenSearch]:
    """The loopback OpenSearch of one flavour; it must have refused nothing by the end."""
    server = _start(request.param)
    yield server
    server.stop()
    assert server.rejected == []


@pytest.fixture(params=["domain", "serverless"])
def lenient_server(request: pytest.FixtureRequest) -> Iterator[LoopbackOpenSearch]:
    """The same, for tests that send it requests outside the subset on purpose."""
    server = _start(request.param)
    yield server
    server.stop()


def _adapter(server: LoopbackOpenSearch) -> OpenSearchIndex:
    settings = IndexSettings(
        opensearch_endpoint=server.url, opensearch_flavour=server.flavour, opensearch_index=INDEX
    )
    return opensearch_index(settings, REGION, DIMENSIONS)


@pytest.fixture
def index(server: LoopbackOpenSearch) -> OpenSearchIndex:
    return _adapter(server)


def _holding(index: OpenSearchIndex, docs: list[VectorDoc]) -> OpenSearchIndex:
    assert index.upsert(docs) == {}
    return index


@pytest.fixture
def stocked(index: OpenSearchIndex) -> OpenSearchIndex:
    return _holding(index, DOCS)


@pytest.fixture
def chat(index: OpenSearchIndex) -> OpenSearchIndex:
    return _holding(index, CONVERSATION)


def _raw_client(server: LoopbackOpenSearch) -> Any:
    """A signed client of our own, for requests the adapter would never send."""
    import boto3
    from opensearchpy import AWSV4SignerAuth, OpenSearch, RequestsHttpConnection

    service = "aoss" if server.flavour == "serverless" else "es"
    auth = AWSV4SignerAuth(boto3.Session().get_credentials(), REGION, service)
    return OpenSearch(
        hosts=[server.url], http_auth=auth, connection_class=RequestsHttpConnection, max_retries=0
    )


# --- the index -----------------------------------------------------------------------------


def test_ensure_index_creates_the_index_once(
    index: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given an endpoint without the index
    # When the index is ensured twice and then written to
    index.ensure_index()
    index.ensure_index()
    index.upsert(DOCS[:1])

    # Then it was created once
    assert server.created == [INDEX]


def test_ensure_index_tolerates_a_concurrent_creator(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given another process that created the index after this one saw it absent
    _adapter(server).ensure_index()
    client = _raw_client(server)
    monkeypatch.setattr(client.indices, "exists", lambda **_: False)
    late = OpenSearchIndex(client, INDEX, DIMENSIONS, server.flavour)

    # When this one ensures it, its create meets resource_already_exists
    late.ensure_index()

    # Then that is a success, and the index was created once
    assert server.created == [INDEX]


def test_ensure_index_tolerates_the_name_becoming_an_alias_meanwhile(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given a rebuild that made the name an alias of its new index after this process saw
    # the name absent (a cold indexer during a first reindex)
    client = _raw_client(server)
    client.indices.create(index=f"{INDEX}-v2", body=index_body(DIMENSIONS, server.flavour))
    client.indices.update_aliases(
        body={"actions": [{"add": {"index": f"{INDEX}-v2", "alias": INDEX}}]}
    )
    looks: list[bool] = []
    real_exists = client.indices.exists

    def exists(**kwargs: Any) -> bool:  # absent at the first look, the truth afterwards
        looks.append(bool(looks) and real_exists(**kwargs))
        return looks[-1]

    monkeypatch.setattr(client.indices, "exists", exists)
    late = OpenSearchIndex(client, INDEX, DIMENSIONS, server.flavour)

    # When this one ensures it, its create meets invalid_index_name_exception
    late.ensure_index()

    # Then that is a success: no index of the alias's name, and writes reach the new index
    late.upsert(DOCS[:1])
    assert server.created == [f"{INDEX}-v2"]
    assert looks == [False, True]
    assert server.indices() == {f"{INDEX}-v2": [INDEX]}
    assert len(server.documents(f"{INDEX}-v2")) == 1


def _made_before_issue_15(flavour: Flavour) -> dict[str, Any]:
    """The index a release before issue 15 made: `text` without its english multi-field,
    no `context`, no `speaker`."""
    body = index_body(DIMENSIONS, flavour)
    properties = body["mappings"]["properties"]
    properties["text"] = {"type": "text"}
    del properties["context"], properties["speaker"]
    return body


def test_ensure_index_adds_the_english_fields_to_an_index_made_before_them(
    server: LoopbackOpenSearch,
) -> None:
    # Given an index an earlier release made, holding a doc it wrote
    client = _raw_client(server)
    client.indices.create(index=INDEX, body=_made_before_issue_15(server.flavour))
    old = {"doc_id": "old", "tenant": "t", "version": 1, "deleted": False}
    old |= {"text": "I painted a fence", "vector": [1.0, 0.0, 0.0]}
    meta = {"_id": "old", "version": 1, "version_type": "external"}
    action = {"index": meta if server.flavour == "domain" else {}}
    assert not client.bulk(body=[action, old], index=INDEX)["errors"]

    # When this release ensures the index (PUT _mapping) and writes a message
    index = _adapter(server)
    index.ensure_index()
    assert index.upsert([chat_message("new", "I painted a door", "", "ada", [1, 0, 0])]) == {}
    by_keyword = _ids(index.keyword("t", "paint", k=10))
    by_speaker = _ids(
        index.keyword("t", "paint", k=10, conditions=[Condition("speaker", "eq", "ada")])
    )
    by_vector = sorted(_ids(index.search("t", [1, 0, 0], k=10)))

    # Then the mapping is taken in place; the new doc is found by its stem and its speaker,
    # the old one by its vector alone until it is written again (what memkit reindex does)
    assert (by_keyword, by_speaker, by_vector) == (["new"], ["new"], ["new", "old"])
    assert index.upsert([vector_doc("old", [1, 0, 0], version=2, text="I painted a fence")]) == {}
    assert sorted(_ids(index.keyword("t", "paint", k=10))) == ["new", "old"]
    assert server.created == [INDEX]


# --- search --------------------------------------------------------------------------------


def test_a_score_converts_back_to_the_cosine() -> None:
    # faiss innerproduct scores: 1 + ip above zero, 1 / (1 - ip) at or below it
    assert cosine_from_score(1.75) == pytest.approx(0.75)
    assert cosine_from_score(1 / (1 + 0.5)) == pytest.approx(-0.5)
    assert cosine_from_score(1.0) == pytest.approx(0.0)


# --- keyword and browse --------------------------------------------------------------------


def test_a_keyword_search_is_one_request(chat: OpenSearchIndex, server: LoopbackOpenSearch) -> None:
    before = len(server.requests)

    chat.keyword("t", "promotion", k=3)

    # a serverless search adds its lookup of the hits' copies, as every search there does
    assert len(server.requests) - before == (1 if server.flavour == "domain" else 2)


# --- versions ------------------------------------------------------------------------------


def test_a_replayed_batch_changes_nothing(
    index: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given a batch written once
    index.upsert(DOCS)
    before = sorted(json.dumps(source, sort_keys=True) for _, source in server.documents(INDEX))

    # When the same batch is delivered again
    failures = index.upsert(DOCS)

    # Then nothing fails and the stored docs are the same ones (no second copies)
    after = sorted(json.dumps(source, sort_keys=True) for _, source in server.documents(INDEX))
    assert failures == {}
    assert after == before


# --- failures ------------------------------------------------------------------------------


def test_a_bulk_item_error_fails_that_doc_alone(index: OpenSearchIndex) -> None:
    # Given a batch where one vector has the wrong dimension
    batch = [
        vector_doc("good", [1, 0, 0]),
        vector_doc("bad", [1, 0]),
        vector_doc("fine", [0, 1, 0]),
    ]

    # When it is written in one _bulk
    failures = index.upsert(batch)

    # Then OpenSearch's item error is that doc's failure, and the others are written
    assert failures == {"bad": "mapper_parsing_exception"}
    assert sorted(_ids(index.search("t", [1, 0, 0], k=10))) == ["fine", "good"]


@pytest.mark.parametrize("name", ["deleted", "context"])
def test_a_doc_using_a_reserved_field_fails_without_a_request(
    index: OpenSearchIndex, server: LoopbackOpenSearch, name: str
) -> None:
    odd = VectorDoc("odd", "t", [1, 0, 0], 1, text="odd", fields={name: "mine"})

    failures = index.upsert([odd])

    assert failures == {"odd": "reserved_field"}
    assert server.requests == []


def test_wrong_credentials_become_the_domain_error(
    server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Given the service's credentials are not the ones OpenSearch knows
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    index = _adapter(server)

    # When it searches, and when it writes
    with pytest.raises(StoreUnavailable) as raised:
        index.search("t", [1, 0, 0], k=3)
    failures = index.upsert(DOCS[:2])

    # Then the search raises the 503 domain error (never OpenSearch's own), every doc of the
    # write fails with the status (its first request, a HEAD, has no error body), and the
    # server saw bad signatures
    assert raised.value.status == 503
    assert "signature" not in str(raised.value)
    assert failures == {"tea": "http_403", "coffee": "http_403"}
    assert server.denied


def test_an_unreachable_index_becomes_the_domain_error() -> None:
    # Given an endpoint nothing listens on
    settings = IndexSettings(opensearch_endpoint="http://127.0.0.1:9", opensearch_auth="none")
    index = opensearch_index(settings, REGION, DIMENSIONS)

    # When it is searched and written to
    # Then the search is unavailable (503) and each doc fails with the reason
    with pytest.raises(StoreUnavailable):
        index.search("t", [1, 0, 0], k=3)
    assert index.upsert(DOCS[:1]) == {"tea": "connection_error"}


def test_a_throttled_search_becomes_the_domain_error() -> None:
    from opensearchpy.exceptions import TransportError

    # Given an OpenSearch that still answers 429 after the client's retries
    class Throttling:
        def search(self, **_: Any) -> Any:
            raise TransportError(429, "too_many_requests", {})

    index = OpenSearchIndex(Throttling(), INDEX, DIMENSIONS)

    # When the tenant searches, then the API's 429 error is raised
    with pytest.raises(Throttled):
        index.search("t", [1, 0, 0], k=3)


class _Refusing:
    """A client whose every search fails with `error` (as opensearch-py raises it), counted."""

    def __init__(self, error: Exception) -> None:
        self.error, self.searches = error, 0

    def search(self, **_: Any) -> Any:
        self.searches += 1
        raise self.error


def test_a_refused_request_is_resent_and_a_timed_out_one_is_not() -> None:
    from opensearchpy.exceptions import ConnectionTimeout, TransportError

    # Given a collection that answers 503, and one that does not answer in time
    refusing = _Refusing(TransportError(503, "unavailable", {}))
    silent = _Refusing(ConnectionTimeout("TIMEOUT", "read timed out", Exception()))

    # When each is searched
    for client in (refusing, silent):
        with pytest.raises(StoreUnavailable):
            OpenSearchIndex(client, INDEX, DIMENSIONS).search("t", [1, 0, 0], k=3)

    # Then the refused search went out three times in all, the timed-out one once (it may
    # have been applied: a serverless write sent again would add a copy)
    assert (refusing.searches, silent.searches) == (3, 1)


class _Sleeping:
    """A collection that never answers in time (one waking from zero): every search and bulk
    write records the wait the adapter gave it, then times out; the index exists."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, float]] = []
        self.indices = self

    def exists(self, **_: Any) -> bool:
        return True

    def put_mapping(self, **_: Any) -> Any:
        return {}

    def put_settings(self, **_: Any) -> Any:
        return {}

    def _timed_out(self, request: str, request_timeout: float) -> Any:
        from opensearchpy.exceptions import ConnectionTimeout

        self.waits.append((request, request_timeout))
        raise ConnectionTimeout("TIMEOUT", "read timed out", Exception())

    def search(self, request_timeout: float, **_: Any) -> Any:
        return self._timed_out("search", request_timeout)

    def bulk(self, request_timeout: float, **_: Any) -> Any:
        return self._timed_out("bulk", request_timeout)


@pytest.mark.parametrize("flavour", ["domain", "serverless"])
def test_every_request_a_bulk_write_included_ends_by_the_deadline_in_force(
    flavour: Flavour,
) -> None:
    from memkit.times import Deadline, within

    # Given a collection that does not answer, an adapter that would wait 20 s a request
    # (a bulk write 30 s), and a deadline 2 s away
    client = _Sleeping()
    index = OpenSearchIndex(client, INDEX, DIMENSIONS, flavour, wait_seconds=20)

    # When it searches and removes under that deadline
    with within(Deadline.after(2.0)):
        with pytest.raises(StoreUnavailable):
            index.search("t", [1, 0, 0], k=3)
        failures = index.remove([Removal("a", "t", 1)])

    # Then every request it sent was given no more than the deadline left, the bulk write
    # too (serverless: its lookup gave up first), and the removal failed as timed out
    assert [request for request, _ in client.waits] == [
        "search",
        "search" if flavour == "serverless" else "bulk",
    ]
    assert all(0 < wait <= 2.0 for _, wait in client.waits)
    assert failures == {"a": "timeout"}


def test_past_the_deadline_in_force_nothing_is_sent() -> None:
    from memkit.times import Deadline, within

    # Given an adapter, and a deadline that has passed
    client = _Sleeping()
    index = OpenSearchIndex(client, INDEX, DIMENSIONS, "serverless", wait_seconds=20)

    # When it is asked to search and to remove
    with within(Deadline.after(0)):
        with pytest.raises(StoreUnavailable):
            index.search("t", [1, 0, 0], k=3)
        failures = index.remove([Removal("a", "t", 1)])

    # Then nothing went out: the search is the domain error to retry, the removal a failure
    assert client.waits == []
    assert failures == {"a": "out_of_time"}


def test_the_local_stack_index_needs_no_signing() -> None:
    # Given the local stack's index: a domain on loopback, without auth
    with LoopbackOpenSearch(DIMENSIONS) as server:
        settings = IndexSettings(opensearch_endpoint=server.url, opensearch_auth="none")
        index = opensearch_index(settings, REGION, DIMENSIONS)

        # When docs are written and searched
        failures = index.upsert(DOCS)
        found = index.search("t", [1, 0, 0], k=1)

    # Then the production adapter works end to end, inside the subset
    assert (failures, _ids(found), server.rejected) == ({}, ["tea"], [])


# --- the subset ----------------------------------------------------------------------------


def test_one_bulk_request_per_write_call(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given the index in use
    def bulks() -> int:
        return sum(1 for method, path in server.requests if path.endswith("/_bulk"))

    before = bulks()

    # When a batch is written and a batch removed
    stocked.upsert([vector_doc("n1", [1, 0, 0], version=2), vector_doc("n2", [0, 1, 0], version=2)])
    stocked.remove([Removal(id="n1", tenant="t", version=3), Removal("n2", "t", 3)])

    # Then each call sent one _bulk
    assert bulks() == before + 2


def test_a_search_with_post_filter_is_rejected(lenient_server: LoopbackOpenSearch) -> None:
    from opensearchpy.exceptions import RequestError

    # Given the index
    _adapter(lenient_server).ensure_index()
    body = {
        "query": {"knn": {"vector": {"vector": [1, 0, 0], "k": 3}}},
        "post_filter": {"term": {"tenant": "t"}},
    }

    # When a hand-made search filters after the k-NN search
    with pytest.raises(RequestError) as raised:
        _raw_client(lenient_server).search(index=INDEX, body=body)

    # Then it is refused with an OpenSearch error body, and recorded
    assert raised.value.status_code == 400
    assert [rejection.path for rejection in lenient_server.rejected] == [f"/{INDEX}/_search"]


def test_serverless_refuses_custom_ids_refresh_and_delete_by_query() -> None:
    from opensearchpy.exceptions import RequestError

    # Given a serverless collection's index
    server = _start("serverless")
    try:
        _adapter(server).ensure_index()
        client = _raw_client(server)
        calls = [
            lambda: client.bulk(body=[{"index": {"_id": "mine"}}, {"doc_id": "x"}], index=INDEX),
            lambda: client.indices.refresh(index=INDEX),
            lambda: client.delete_by_query(index=INDEX, body={"query": {"match_all": {}}}),
        ]

        # When each is sent, then each is refused and recorded
        for call in calls:
            with pytest.raises(RequestError):
                call()
        assert len(server.rejected) == 3
    finally:
        server.stop()


def test_the_server_denies_unsigned_and_tampered_requests(server: LoopbackOpenSearch) -> None:
    import requests
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    # Given a search signed for the server's service and region
    _adapter(server).ensure_index()
    url = f"{server.url}/{INDEX}/_search"
    body = json.dumps({"query": {"bool": {"filter": [{"term": {"tenant": "t"}}]}}}).encode()
    signed = AWSRequest(
        method="POST",
        url=url,
        data=body,
        headers={
            "Content-Type": "application/json",
            "X-Amz-Content-SHA256": hashlib.sha256(body).hexdigest(),
        },
    )
    service = "aoss" if server.flavour == "serverless" else "es"
    SigV4Auth(Credentials("testing", "testing", "testing"), service, REGION).add_auth(signed)
    headers = dict(signed.headers.items())

    # When it is sent as signed, with another body, and without a signature
    genuine = requests.post(url, data=body, headers=headers, timeout=5)
    tampered = requests.post(url, data=body.replace(b'"t"', b'"u"'), headers=headers, timeout=5)
    unsigned = requests.post(
        url, data=body, headers={"Content-Type": "application/json"}, timeout=5
    )

    # Then only the genuine one is answered
    assert (genuine.status_code, tampered.status_code, unsigned.status_code) == (200, 403, 403)
    assert tampered.json()["error"]["type"] == "security_exception"


# --- the loopback server's own answers ------------------------------------------------------


def _raw_write(server: LoopbackOpenSearch, docs: dict[str, dict[str, Any]], version: int) -> None:
    """Docs written as a domain client of our own would write them (any vector length)."""
    body: list[dict[str, Any]] = []
    for doc_id, source in docs.items():
        body += [{"index": {"_id": doc_id, "version": version, "version_type": "external"}}]
        body += [{"doc_id": doc_id, "tenant": "t", **source}]
    assert not _raw_client(server).bulk(body=body, index=INDEX)["errors"]


def test_the_loopback_ranks_raw_inner_products_as_faiss_innerproduct_does() -> None:
    # Given docs whose vectors are not unit length (the adapter sends unit vectors; a
    # client of its own may not): "long" points away from the query more than "short" does
    with LoopbackOpenSearch(DIMENSIONS) as server:
        _adapter(server).ensure_index()
        _raw_write(
            server,
            {
                "short": {"vector": [1, 0, 0]},
                "long": {"vector": [3, 3, 0]},
                "away": {"vector": [-2, 0, 0]},
                "tie": {"vector": [1, 0, 0]},
            },
            version=1,
        )

        # When the server is asked for the nearest by inner product
        body = {"size": 4, "query": {"knn": {"vector": {"vector": [1, 0, 0], "k": 4}}}}
        hits = _raw_client(server).search(index=INDEX, body=body)["hits"]["hits"]

    # Then the longer vector wins (ip 3 against 1: cosine would put it second), ties go by
    # id, and scores are faiss's: 1 + ip above zero, 1 / (1 - ip) below it
    assert [(h["_id"], h["_score"]) for h in hits] == [
        ("long", 4.0),
        ("short", 2.0),
        ("tie", 2.0),
        ("away", pytest.approx(1 / 3)),
    ]


def _match(text: str, field: str = "text.english") -> dict[str, Any]:
    return {"match": {field: {"query": text}}}


def test_loopback_filters_follow_rewrites_and_deletes_and_totals_count_every_match() -> None:
    with LoopbackOpenSearch(DIMENSIONS) as server:
        _adapter(server).ensure_index()
        client = _raw_client(server)
        # Given three docs about tea, one of them rewritten to another user, one deleted
        docs = {f"d{n}": {"vector": [1, 0, 0], "text": "tea", "user_id": "ada"} for n in range(3)}
        _raw_write(server, docs, version=1)
        _raw_write(server, {"d1": {**docs["d1"], "user_id": "bob"}}, version=2)
        deleted = [{"delete": {"_id": "d2", "version": 3, "version_type": "external"}}]
        assert not client.bulk(body=deleted, index=INDEX)["errors"]

        # When ada's docs are searched by keyword (a page of one) and by vector
        ada = [{"term": {"user_id": "ada"}}]
        tea: dict[str, Any] = {"should": [_match("tea")], "minimum_should_match": 1}
        by_text = client.search(
            index=INDEX, body={"size": 1, "query": {"bool": {**tea, "filter": ada}}}
        )["hits"]
        knn = {"vector": [1, 0, 0], "k": 10, "filter": {"bool": {"filter": ada}}}
        by_vector = client.search(index=INDEX, body={"size": 10, "query": {"knn": {"vector": knn}}})
        everyone = client.search(index=INDEX, body={"size": 1, "query": {"bool": tea}})["hits"]

    # Then the rewritten doc left ada's filter and the deleted one left every answer; a
    # keyword search's total counts every match, not the page
    assert [h["_id"] for h in by_text["hits"]] == ["d0"]
    assert by_text["total"]["value"] == 1
    assert [h["_id"] for h in by_vector["hits"]["hits"]] == ["d0"]
    assert (len(everyone["hits"]), everyone["total"]["value"]) == (1, 2)


REFUSED_MAPPINGS: list[dict[str, Any]] = [
    {"context": {"type": "text", "analyzer": "french"}},
    {"context": {"type": "text", "analyzer": "my_custom_analyzer"}},
    {"context": {"type": "text"}},  # memkit's context is english
    {"context": {"type": "text", "analyzer": "english", "search_analyzer": "standard"}},
    {"text": {"type": "text", "analyzer": "english"}},  # text keeps the default analyzer
    {"text": {"type": "text", "fields": {"english": {"type": "text", "analyzer": "simple"}}}},
    {"text": {"type": "text", "fields": {"raw": {"type": "keyword"}}}},
    {"notes": {"type": "text", "analyzer": "standard"}},
]


@pytest.mark.parametrize(
    "properties", REFUSED_MAPPINGS, ids=[json.dumps(m) for m in REFUSED_MAPPINGS]
)
def test_text_mappings_outside_the_subset_are_refused(
    lenient_server: LoopbackOpenSearch, properties: dict[str, Any]
) -> None:
    from opensearchpy.exceptions import RequestError

    # Given memkit's index
    _adapter(lenient_server).ensure_index()

    # When a mapping memkit never sends names another analyzer or parameter
    with pytest.raises(RequestError) as raised:
        _raw_client(lenient_server).indices.put_mapping(
            index=INDEX, body={"properties": properties}
        )

    # Then it is refused with an OpenSearch error body, and recorded
    assert raised.value.status_code == 400
    assert [r.path for r in lenient_server.rejected] == [f"/{INDEX}/_mapping"]


def test_put_mapping_merges_multi_fields_and_never_changes_an_analyzer(
    lenient_server: LoopbackOpenSearch,
) -> None:
    from opensearchpy.exceptions import RequestError

    # Given memkit's index, and a text field of someone else's with the default analyzer
    index = _adapter(lenient_server)
    index.ensure_index()
    client = _raw_client(lenient_server)
    client.indices.put_mapping(index=INDEX, body={"properties": {"notes": {"type": "text"}}})

    # When a mapping leaves text's multi-field out, and another gives notes an analyzer
    client.indices.put_mapping(index=INDEX, body={"properties": {"text": {"type": "text"}}})
    english_notes = {"properties": {"notes": {"type": "text", "analyzer": "english"}}}
    with pytest.raises(RequestError):
        client.indices.put_mapping(index=INDEX, body=english_notes)

    # Then the multi-field stays (stems still match), and the analyzer change is refused
    assert index.upsert([vector_doc("p", [1, 0, 0], text="I painted")]) == {}
    assert _ids(index.keyword("t", "paint", k=10)) == ["p"]
    reasons = [rejection.reason for rejection in lenient_server.rejected]
    assert len(reasons) == 1
    assert "Cannot update parameter [analyzer] from [default] to [english]" in reasons[0]


def test_an_index_with_another_analyzer_is_not_created(lenient_server: LoopbackOpenSearch) -> None:
    from opensearchpy.exceptions import RequestError

    body = index_body(DIMENSIONS, lenient_server.flavour)
    body["mappings"]["properties"]["context"]["analyzer"] = "whitespace"

    with pytest.raises(RequestError):
        _raw_client(lenient_server).indices.create(index=INDEX, body=body)

    assert lenient_server.indices() == {}


TENANT_FILTER = [{"term": {"tenant": "t"}}]
REFUSED_QUERIES: list[dict[str, Any]] = [
    # without minimum_should_match, a bool with a filter matches every doc the filter allows
    {"bool": {"should": [_match("tea")], "filter": TENANT_FILTER}},
    {"bool": {"should": [_match("tea")], "minimum_should_match": 2, "filter": TENANT_FILTER}},
    {"bool": {"should": [_match("tea")], "minimum_should_match": "1"}},
    {"bool": {"minimum_should_match": 1, "filter": TENANT_FILTER}},
    {"bool": {"should": [_match("tea", "text")], "minimum_should_match": 1}},  # the plain text
    {"bool": {"should": [_match("tea", "user_id")], "minimum_should_match": 1}},
    {"bool": {"must": [_match("tea")], "filter": TENANT_FILTER}},
    {"bool": {"should": [{"term": {"user_id": "ada"}}], "minimum_should_match": 1}},
    {"bool": {"should": [], "minimum_should_match": 1}},
    {
        "bool": {
            "should": [{"match": {"context": {"query": "tea", "boost": -1}}}],
            "minimum_should_match": 1,
        }
    },
    {
        "bool": {
            "should": [{"match": {"context": {"query": "tea", "operator": "and"}}}],
            "minimum_should_match": 1,
        }
    },
]


@pytest.mark.parametrize("query", REFUSED_QUERIES, ids=[json.dumps(q) for q in REFUSED_QUERIES])
def test_keyword_queries_outside_the_subset_are_refused(
    lenient_server: LoopbackOpenSearch, query: dict[str, Any]
) -> None:
    from opensearchpy.exceptions import RequestError

    _adapter(lenient_server).ensure_index()

    with pytest.raises(RequestError):
        _raw_client(lenient_server).search(index=INDEX, body={"query": query})

    assert [r.path for r in lenient_server.rejected] == [f"/{INDEX}/_search"]


def test_a_match_on_an_unmapped_field_finds_nothing_as_in_opensearch(
    chat: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given messages about a promotion
    # When a search matches "promotion" on a field the index does not map, and on text.english
    should = [_match("promotion", "nowhere"), _match("promotion")]
    query = {"bool": {"should": should, "minimum_should_match": 1, "filter": TENANT_FILTER}}
    hits = _raw_client(server).search(index=INDEX, body={"query": query})["hits"]["hits"]

    # Then the unmapped field adds nothing (no error), and the text finds its docs
    assert [hit["_source"]["doc_id"] for hit in hits] == ["congrats", "work"]


# --- serverless copies ---------------------------------------------------------------------


@pytest.fixture
def collection() -> Iterator[tuple[LoopbackOpenSearch, OpenSearchIndex]]:
    server = _start("serverless")
    yield server, _adapter(server)
    server.stop()
    assert server.rejected == []


def _stale_copy(server: LoopbackOpenSearch, source: dict[str, Any]) -> None:
    """A copy the adapter's lookup could not see yet (written within the refresh interval)."""
    _raw_client(server).bulk(body=[{"index": {}}, source], index=INDEX)


def test_serverless_search_hides_an_older_copy_and_the_next_write_deletes_it(
    collection: tuple[LoopbackOpenSearch, OpenSearchIndex],
) -> None:
    server, index = collection
    # Given version 2 of a doc, and an older copy that slipped in beside it
    index.upsert([vector_doc("memo", [1, 0, 0], version=2, text="memo")])
    stale = {"doc_id": "memo", "tenant": "t", "version": 1, "deleted": False, "text": "memo"}
    _stale_copy(server, {**stale, "vector": [1.0, 0.0, 0.0]})

    # When it is searched, and then written again
    found = index.search("t", [1, 0, 0], k=10)
    index.upsert([vector_doc("memo", [1, 0, 0], version=3, text="memo")])

    # Then the search shows it once, and the next write leaves one copy
    assert _ids(found) == ["memo"]
    copies = [source for _, source in server.documents(INDEX) if source["doc_id"] == "memo"]
    assert [copy["version"] for copy in copies] == [3]


def test_serverless_search_hides_a_copy_that_a_newer_tombstone_removed(
    collection: tuple[LoopbackOpenSearch, OpenSearchIndex],
) -> None:
    server, index = collection
    # Given a doc removed at version 6, and its version 5 written where the removal could
    # not see it
    index.remove([Removal(id="memo", tenant="t", version=6)])
    copy = {"doc_id": "memo", "tenant": "t", "version": 5, "deleted": False, "text": "memo"}
    _stale_copy(server, {**copy, "vector": [1.0, 0.0, 0.0]})

    # When the tenant searches, matches and lists
    # Then the removed doc is nowhere
    assert _ids(index.search("t", [1, 0, 0], k=10)) == []
    assert _ids(index.keyword("t", "memo", k=10)) == []
    assert _ids(index.browse("t", k=10, offset=0)) == []


# --- sweeps and generations (memkit reindex, the orphan sweep) ------------------------------


def test_sample_pages_through_every_doc_in_id_order(stocked: OpenSearchIndex) -> None:
    # Given docs of two tenants, one of them removed
    stocked.remove([Removal("bare", "t", 2)])

    # When the index is sampled four docs at a time
    first, cursor = stocked.sample(4)
    second, last = stocked.sample(4, cursor)

    # Then the pages hold every live doc once, in id order, with tenant, version and keys
    ids = [doc.id for doc in first + second]
    assert ids == sorted({"tea", "coffee", "oslo", "south", "other"})
    assert cursor == first[-1].id
    assert last is None
    other = next(doc for doc in first + second if doc.id == "other")
    assert (other.tenant, other.version, other.fields["user_id"]) == ("u", 1, "ada")


def test_sampling_an_absent_index_finds_nothing(index: OpenSearchIndex) -> None:
    assert index.sample(10) == ([], None)


def test_a_rebuild_switches_the_alias_in_one_step(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given the index as a plain index, and a new generation being filled
    rebuild = stocked.rebuild(DIMENSIONS)
    assert rebuild.target.upsert(DOCS[:2]) == {}

    # Then until the switch, searches through the name see the old index
    assert len(stocked.search("t", [1, 0, 0], k=10)) == 5
    assert server.indices() == {INDEX: [], f"{INDEX}-gen1": []}

    # When it switches and retires the old generation
    switches_before = sum(1 for _, path in server.requests if path == "/_aliases")
    rebuild.switch()
    rebuild.retire()

    # Then one _aliases request made the name an alias of the new index, and searches
    # and writes through the name reach it
    assert sum(1 for _, path in server.requests if path == "/_aliases") == switches_before + 1
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert _ids(stocked.search("t", [1, 0, 0], k=10)) == ["tea", "coffee"]
    assert stocked.upsert(DOCS[2:3]) == {}
    assert len(server.documents(f"{INDEX}-gen1")) == 3


def test_a_first_rebuild_takes_over_the_plain_index_a_writer_created_meanwhile(
    index: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    """The first rebuild of a name that held nothing (a new collection, or the local stack's
    start-up rebuild) races the stream indexer, whose first write creates a plain index of
    that name: the switch replaces what the name is when it switches, not what it was."""
    # Given a rebuild begun while nothing existed, being filled
    rebuild = index.rebuild(DIMENSIONS)
    assert rebuild.replaced is None
    assert rebuild.target.upsert(DOCS[:2]) == {}

    # When a writer creates the plain index meanwhile, and the rebuild then switches
    assert index.upsert(DOCS[2:3]) == {}
    assert server.indices() == {INDEX: [], f"{INDEX}-gen1": []}
    rebuild.switch()
    rebuild.retire()

    # Then the name is the new generation's alias (the plain index went with the switch;
    # its writes, made since the rebuild began, are the catch-up's), and writes reach it
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert sorted(_ids(index.search("t", [1, 0, 0], k=10))) == sorted(d.id for d in DOCS[:2])
    assert index.upsert(DOCS[2:3]) == {}
    assert len(server.documents(f"{INDEX}-gen1")) == 3


def test_a_first_rebuild_switches_again_when_a_plain_index_appears_as_it_switches(
    index: OpenSearchIndex, server: LoopbackOpenSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writer's plain index may appear after the switch looked at the name and before
    its request arrives (OpenSearch refuses that alias: invalid_alias_name_exception)."""
    # Given a rebuild begun while nothing existed, being filled
    rebuild = index.rebuild(DIMENSIONS)
    assert rebuild.target.upsert(DOCS[:2]) == {}

    # When a writer creates the plain index just after the switch's look at the name
    real_live = index._live_generation
    looks: list[str | None] = []

    def live_then_written() -> str | None:
        looks.append(real_live())
        if len(looks) == 1:
            assert index.upsert(DOCS[2:3]) == {}
        return looks[-1]

    monkeypatch.setattr(index, "_live_generation", live_then_written)
    rebuild.switch()
    rebuild.retire()

    # Then the refused switch was sent again over what the name had become, and it holds
    assert looks == [None, INDEX]
    assert [r.type for r in server.rejected] == ["invalid_alias_name_exception"]
    server.rejected.clear()
    assert server.indices() == {f"{INDEX}-gen1": [INDEX]}
    assert sorted(_ids(index.search("t", [1, 0, 0], k=10))) == sorted(d.id for d in DOCS[:2])


def test_the_next_rebuild_moves_the_alias_and_deletes_the_old_generation(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    first = stocked.rebuild(DIMENSIONS)
    first.switch()
    first.retire()

    second = stocked.rebuild(DIMENSIONS)
    second.target.upsert(DOCS[:1])
    second.switch()
    second.retire()

    assert second.generation == f"{INDEX}-gen2"
    assert server.indices() == {f"{INDEX}-gen2": [INDEX]}
    assert _ids(stocked.search("t", [1, 0, 0], k=10)) == ["tea"]


def test_an_abandoned_rebuild_leaves_the_live_index_alone(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    rebuild = stocked.rebuild(DIMENSIONS)
    rebuild.target.upsert(DOCS[:1])

    rebuild.abandon()

    assert server.indices() == {INDEX: []}
    assert len(stocked.search("t", [1, 0, 0], k=10)) == 5


def test_a_rebuild_replaces_a_generation_left_by_a_dead_rebuild(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given a rebuild that stopped before its switch (its process died)
    stocked.rebuild(DIMENSIONS).target.upsert(DOCS[:1])

    # When the next rebuild starts
    rebuild = stocked.rebuild(DIMENSIONS)

    # Then it starts its generation afresh
    assert rebuild.generation == f"{INDEX}-gen1"
    assert server.documents(f"{INDEX}-gen1") == []


def test_a_rebuild_may_change_the_dimensions(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    rebuild = stocked.rebuild(2)
    assert rebuild.target.upsert([vector_doc("flat", [1, 0])]) == {}
    rebuild.switch()

    # a function started after the switch ensures the index through the alias, then writes
    redeployed = OpenSearchIndex(stocked._client, INDEX, 2, server.flavour)
    assert redeployed.upsert([vector_doc("tilted", [1, 1])]) == {}
    assert _ids(redeployed.search("t", [1, 0], k=5)) == ["flat", "tilted"]
    assert server.created == [INDEX, f"{INDEX}-gen1"]


ALIAS_SHAPES: list[dict[str, Any]] = [
    {
        "actions": [
            {"add": {"index": "a", "alias": "both"}},
            {"add": {"index": "b", "alias": "both"}},
        ]
    },
    {"actions": [{"add": {"indices": ["a", "b"], "alias": "x"}}]},
    {"actions": [{"add": {"index": "a", "alias": "x", "is_write_index": True}}]},
    {"actions": [{"remove_alias": {"index": "a", "alias": "x"}}]},
    {"actions": []},
]


@pytest.mark.parametrize("body", ALIAS_SHAPES, ids=[json.dumps(b) for b in ALIAS_SHAPES])
def test_alias_requests_outside_the_subset_are_rejected_whole(
    lenient_server: LoopbackOpenSearch, body: dict[str, Any]
) -> None:
    from opensearchpy.exceptions import RequestError

    # Given two indexes
    client = _raw_client(lenient_server)
    for name in ("a", "b"):
        OpenSearchIndex(client, name, DIMENSIONS, lenient_server.flavour).ensure_index()

    # When an alias request memkit never sends arrives
    with pytest.raises(RequestError):
        client.indices.update_aliases(body=body)

    # Then it is refused, recorded, and nothing of it applied
    assert [r.path for r in lenient_server.rejected] == ["/_aliases"]
    assert lenient_server.indices() == {"a": [], "b": []}


def test_deleting_an_alias_as_an_index_is_rejected(lenient_server: LoopbackOpenSearch) -> None:
    from opensearchpy.exceptions import RequestError

    index = _adapter(lenient_server)
    index.rebuild(DIMENSIONS).switch()

    with pytest.raises(RequestError):
        _raw_client(lenient_server).indices.delete(index=INDEX)

    assert lenient_server.indices() == {f"{INDEX}-gen1": [INDEX]}
