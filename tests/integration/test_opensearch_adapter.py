"""The OpenSearch adapter, for real: opensearch-py with SigV4 signing against the strict
loopback OpenSearch, as a managed domain and as a serverless collection. The local exact
index is the reference for what a search must find."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest

from memkit.config import IndexSettings
from memkit.errors import StoreUnavailable, Throttled
from memkit.vectors.filters import Condition, conditions_from
from memkit.vectors.keyword import KeywordIndex
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.opensearch import (
    Flavour,
    OpenSearchIndex,
    cosine_from_score,
    index_body,
    opensearch_index,
)
from memkit.vectors.protocol import CONTEXT_WEIGHT, Hit, Removal, VectorDoc
from memkit_dev.local.opensearch import LoopbackOpenSearch

pytestmark = pytest.mark.integration

DIMENSIONS = 3
INDEX = "memkit-memories"
REGION = "us-east-1"


def _doc(
    doc_id: str,
    vector: list[float],
    version: int = 1,
    tenant: str = "t",
    text: str = "",
    **fields: Any,
) -> VectorDoc:
    return VectorDoc(
        id=doc_id, tenant=tenant, vector=vector, version=version, text=text, fields=fields
    )


DOCS = [
    _doc(
        "tea",
        [1, 0, 0],
        text="green tea in the morning",
        user_id="ada",
        topics=["drinks"],
        created_at=100.0,
        pinned=True,
        namespace="work",
    ),
    _doc(
        "coffee",
        [0.9, 0.1, 0],
        text="black coffee at the office, and some tea",
        user_id="ada",
        topics=["drinks", "work"],
        created_at=200.0,
        pinned=False,
        session_id="s1",
    ),
    _doc(
        "oslo",
        [0, 1, 0],
        text="a trip to oslo",
        user_id="bob",
        topics=["travel"],
        created_at=300.5,
        event_date=1000.0,
    ),
    _doc("bare", [0.1, 0.2, 1], text="nothing here"),
    _doc("south", [-1, 0.1, 0], text="tea", user_id="cy", created_at=50.0),
    _doc("other", [1, 0, 0], tenant="u", text="tea for another tenant", user_id="ada"),
]


def _message(doc_id: str, text: str, context: str, speaker: str, vector: list[float]) -> VectorDoc:
    """A message's doc: its text, the turn it follows (context) and its speaker."""
    fields = {"speaker": speaker, "kind": "message"}
    return VectorDoc(doc_id, "t", vector, 1, text=text, fields=fields, context=context)


# A conversation: "reply" says nothing of a promotion; only the turn before it does.
CONVERSATION = [
    _message("congrats", "Congrats on the promotion, John!", "", "ada", [1, 0, 0]),
    _message(
        "reply",
        "Thanks! I'm an assistant manager now.",
        "Congrats on the promotion, John!",
        "john",
        [0.9, 0.1, 0],
    ),
    _message("work", "Promotion season at work is stressful", "How is work?", "bob", [0, 1, 0]),
    _message("paint", "I painted a sunset last weekend", "What did you do?", "ada", [0, 0, 1]),
    _message("lake", "We went to the lake", "I painted a sunset last weekend", "john", [0.1, 0, 1]),
]


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


def _local(docs: list[VectorDoc]) -> LocalVectorIndex:
    """The local exact index holding `docs`: what a search must find."""
    local = LocalVectorIndex(DIMENSIONS)
    local.upsert(docs)
    return local


@pytest.fixture
def stocked(index: OpenSearchIndex) -> OpenSearchIndex:
    return _holding(index, DOCS)


@pytest.fixture
def reference() -> LocalVectorIndex:
    return _local(DOCS)


@pytest.fixture
def chat(index: OpenSearchIndex) -> OpenSearchIndex:
    return _holding(index, CONVERSATION)


@pytest.fixture
def chat_reference() -> LocalVectorIndex:
    return _local(CONVERSATION)


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
    assert index.upsert([_message("new", "I painted a door", "", "ada", [1, 0, 0])]) == {}
    by_keyword = _ids(index.keyword("t", "paint", k=10))
    by_speaker = _ids(
        index.keyword("t", "paint", k=10, conditions=[Condition("speaker", "eq", "ada")])
    )
    by_vector = sorted(_ids(index.search("t", [1, 0, 0], k=10)))

    # Then the mapping is taken in place; the new doc is found by its stem and its speaker,
    # the old one by its vector alone until it is written again (what memkit reindex does)
    assert (by_keyword, by_speaker, by_vector) == (["new"], ["new"], ["new", "old"])
    assert index.upsert([_doc("old", [1, 0, 0], version=2, text="I painted a fence")]) == {}
    assert sorted(_ids(index.keyword("t", "paint", k=10))) == ["new", "old"]
    assert server.created == [INDEX]


# --- search --------------------------------------------------------------------------------


def test_search_ranks_by_cosine_and_returns_the_fields(stocked: OpenSearchIndex) -> None:
    # Given the docs indexed
    # When the tenant searches near [1, 0, 0]
    hits = stocked.search("t", [1, 0, 0], k=10)

    # Then the hits are its docs, nearest first, scored by cosine, with fields only
    assert _ids(hits) == ["tea", "coffee", "bare", "oslo", "south"]
    coffee = 0.9 / (0.9**2 + 0.1**2) ** 0.5
    assert [hit.score for hit in hits[:2]] == pytest.approx([1.0, coffee])
    assert hits[-1].score < 0  # an opposite direction: a negative cosine survives the score
    assert hits[0].distance == pytest.approx(0.0)
    assert hits[1].fields == {**DOCS[1].fields, "tenant": "t"}


def test_search_returns_at_most_k_hits(stocked: OpenSearchIndex) -> None:
    assert _ids(stocked.search("t", [0, 1, 0], k=2)) == ["oslo", "bare"]


def test_a_score_converts_back_to_the_cosine() -> None:
    # faiss innerproduct scores: 1 + ip above zero, 1 / (1 - ip) at or below it
    assert cosine_from_score(1.75) == pytest.approx(0.75)
    assert cosine_from_score(1 / (1 + 0.5)) == pytest.approx(-0.5)
    assert cosine_from_score(1.0) == pytest.approx(0.0)


FILTERS: list[dict[str, dict[str, Any]]] = [
    {"user_id": {"eq": "ada"}},
    {"user_id": {"ne": "ada"}},  # docs without a user_id meet it
    {"user_id": {"any": ["bob", "cy"]}},
    {"user_id": {"none": ["ada", "bob"]}},
    {"user_id": {"startswith": "b"}},
    {"user_id": {"eq": 5}},  # a number never equals a keyword
    {"user_id": {"gt": "a"}},  # nor does a range hold strings
    {"topics": {"all": ["drinks", "work"]}},
    {"topics": {"all": []}},  # all of nothing: the field is there
    {"topics": {"any": []}},
    {"topics": {"none": ["work"]}},
    {"created_at": {"gte": 200}},
    {"created_at": {"gt": 200}},
    {"created_at": {"lte": 100}},
    {"created_at": {"lt": 100}},
    {"created_at": {"between": [60, 250]}},
    {"created_at": {"eq": 300.5}},  # a number on a date compares numbers
    {"created_at": {"eq": "300.5"}},
    {"created_at": {"ne": 100}},
    {"created_at": {"any": [100, 300.5]}},
    {"created_at": {"none": [100, 200]}},
    {"event_date": {"gt": 0}},
    {"pinned": {"eq": True}},
    {"pinned": {"eq": False}},
    {"pinned": {"ne": True}},
    {"pinned": {"eq": 1}},  # True == 1, as meets compares
    {"session_id": {"eq": "s1"}},
    {"namespace": {"startswith": "wo"}},
    {"record_id": {"eq": "r1"}},  # no doc has it: nothing, never a wider list
    {"user_id": {"eq": "ada"}, "created_at": {"lt": 150}},
]


@pytest.mark.parametrize("filters", FILTERS, ids=[json.dumps(f) for f in FILTERS])
def test_filters_find_what_the_local_index_finds(
    stocked: OpenSearchIndex, reference: LocalVectorIndex, filters: dict[str, dict[str, Any]]
) -> None:
    # Given the same docs in OpenSearch and in the local exact index
    conditions = conditions_from(filters)

    # When both are searched with the filter
    found = stocked.search("t", [1, 0, 0], k=10, conditions=conditions)

    # Then OpenSearch finds exactly what filters.meets accepts, in the same order
    assert _ids(found) == _ids(reference.search("t", [1, 0, 0], k=10, conditions=conditions))


def test_a_tenant_sees_only_its_own_docs(stocked: OpenSearchIndex) -> None:
    # Given docs of tenants t and u
    # When u searches, matches and lists
    # Then it finds only its own doc
    assert _ids(stocked.search("u", [1, 0, 0], k=10)) == ["other"]
    assert _ids(stocked.keyword("u", "tea", k=10)) == ["other"]
    assert _ids(stocked.browse("u", k=10, offset=0)) == ["other"]


def test_a_filter_no_doc_meets_finds_nothing(stocked: OpenSearchIndex) -> None:
    conditions = [Condition("user_id", "eq", "nobody")]

    assert stocked.search("t", [1, 0, 0], k=10, conditions=conditions) == []


def test_a_field_that_cannot_be_filtered_is_refused(
    stocked: OpenSearchIndex, server: LoopbackOpenSearch
) -> None:
    # Given a condition on the text (not a filter field)
    sent = len(server.requests)

    # When a search carries it, then it is refused before any request
    with pytest.raises(ValueError, match="cannot filter on 'text'"):
        stocked.search("t", [1, 0, 0], k=10, conditions=[Condition("text", "eq", "tea")])
    assert len(server.requests) == sent


# --- keyword and browse --------------------------------------------------------------------


def test_keyword_ranks_bm25_matches_and_skips_the_rest(stocked: OpenSearchIndex) -> None:
    # Given three of the tenant's docs that say "tea", a short one first
    # When the tenant looks for "tea"
    hits = stocked.keyword("t", "tea", k=10)

    # Then only those match, best BM25 first, with positive scores
    assert _ids(hits) == ["south", "tea", "coffee"]
    assert all(hit.score > 0 for hit in hits)


def test_keyword_applies_the_filters(stocked: OpenSearchIndex) -> None:
    conditions = conditions_from({"user_id": {"eq": "ada"}})

    assert _ids(stocked.keyword("t", "tea", k=10, conditions=conditions)) == ["tea", "coffee"]


def test_keyword_finds_a_word_by_its_stem(
    chat: OpenSearchIndex, chat_reference: LocalVectorIndex
) -> None:
    # Given "I painted a sunset", and a message that follows it
    # When the tenant asks about painting
    hits = chat.keyword("t", "when did she paint?", k=10)

    # Then the english analysis finds "painted" (and the next turn, by its context), in the
    # local index's order
    assert _ids(hits) == ["paint", "lake"]
    assert _ids(hits) == _ids(chat_reference.keyword("t", "when did she paint?", k=10))


def test_a_doc_matched_by_its_context_alone_scores_its_weighted_context_bm25(
    chat: OpenSearchIndex, chat_reference: LocalVectorIndex
) -> None:
    # Given a reply that never says "promotion", after a turn that does
    contexts = KeywordIndex()
    for doc in CONVERSATION:
        contexts.upsert("t", doc.id, doc.context, doc.version, {})

    # When the tenant searches for the promotion
    hits = chat.keyword("t", "the promotion", k=10)
    expected = chat_reference.keyword("t", "the promotion", k=10)

    # Then the reply is found, scored CONTEXT_WEIGHT times its context's BM25, and every
    # hit ranks and scores as in the local index
    reply = next(hit for hit in hits if hit.id == "reply")
    context_bm25 = contexts.matches("t", "the promotion")["reply"]
    assert reply.score == pytest.approx(CONTEXT_WEIGHT * context_bm25)
    assert _ids(hits) == _ids(expected) == ["congrats", "work", "reply"]
    assert [hit.score for hit in hits] == pytest.approx([hit.score for hit in expected])


def test_a_keyword_search_is_one_request(chat: OpenSearchIndex, server: LoopbackOpenSearch) -> None:
    before = len(server.requests)

    chat.keyword("t", "promotion", k=3)

    # a serverless search adds its lookup of the hits' copies, as every search there does
    assert len(server.requests) - before == (1 if server.flavour == "domain" else 2)


def test_no_hit_carries_the_context_or_the_text(chat: OpenSearchIndex) -> None:
    # Given messages with a context
    # When they are found by vector, by keyword, listed and sampled
    found = [
        *chat.search("t", [1, 0, 0], k=10),
        *chat.keyword("t", "promotion", k=10),
        *chat.browse("t", k=10, offset=0),
    ]
    sampled, _ = chat.sample(10)

    # Then every hit carries the fields alone
    for fields in [hit.fields for hit in found] + [doc.fields for doc in sampled]:
        assert "context" not in fields
        assert "text" not in fields
        assert "vector" not in fields
    assert found[0].fields == {"speaker": "ada", "kind": "message", "tenant": "t"}


def test_speaker_is_filterable_and_returned(
    chat: OpenSearchIndex, chat_reference: LocalVectorIndex
) -> None:
    conditions = conditions_from({"speaker": {"eq": "john"}})

    by_keyword = chat.keyword("t", "promotion lake", k=10, conditions=conditions)
    by_vector = chat.search("t", [1, 0, 0], k=10, conditions=conditions)

    assert _ids(by_keyword) == ["lake", "reply"]
    assert _ids(by_keyword) == _ids(
        chat_reference.keyword("t", "promotion lake", k=10, conditions=conditions)
    )
    assert _ids(by_vector) == ["reply", "lake"]
    assert {hit.fields["speaker"] for hit in by_keyword + by_vector} == {"john"}


def test_browse_lists_newest_first_from_an_offset(
    stocked: OpenSearchIndex, reference: LocalVectorIndex
) -> None:
    # Given docs created at 50, 100, 200, 300.5 and one without a created_at
    # When the tenant lists two from offset 1, and everything
    page = stocked.browse("t", k=2, offset=1)
    everything = stocked.browse("t", k=10, offset=0)

    # Then the page skips the newest, the doc without a date comes last, scores are 0
    assert _ids(page) == ["coffee", "tea"]
    assert _ids(everything) == ["oslo", "coffee", "tea", "south", "bare"]
    assert _ids(everything) == _ids(reference.browse("t", k=10, offset=0))
    assert {hit.score for hit in everything} == {0.0}


def test_browse_applies_the_filters(stocked: OpenSearchIndex) -> None:
    conditions = conditions_from({"topics": {"any": ["drinks"]}})

    assert _ids(stocked.browse("t", k=10, offset=0, conditions=conditions)) == ["coffee", "tea"]


# --- versions ------------------------------------------------------------------------------


def test_an_older_write_after_a_newer_one_changes_nothing(index: OpenSearchIndex) -> None:
    # Given version 3 of a doc
    index.upsert([_doc("tea", [0, 0, 1], version=3, text="new")])

    # When version 2 arrives late
    failures = index.upsert([_doc("tea", [1, 0, 0], version=2, text="old")])

    # Then that is no failure and version 3 stays
    assert failures == {}
    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["tea"]
    assert index.search("t", [0, 0, 1], k=1)[0].score == pytest.approx(1.0)
    assert _ids(index.keyword("t", "old", k=10)) == []


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


def test_a_removal_older_than_the_doc_is_ignored(stocked: OpenSearchIndex) -> None:
    # Given the doc at version 1
    # When a removal at version 0 arrives
    failures = stocked.remove([Removal(id="tea", tenant="t", version=0)])

    # Then the doc is still found
    assert failures == {}
    assert "tea" in _ids(stocked.search("t", [1, 0, 0], k=10))


def test_a_removal_at_the_docs_version_removes_it(stocked: OpenSearchIndex) -> None:
    assert stocked.remove([Removal(id="tea", tenant="t", version=1)]) == {}

    assert "tea" not in _ids(stocked.search("t", [1, 0, 0], k=10))


def test_a_removed_doc_stays_removed_when_its_older_write_is_replayed(
    index: OpenSearchIndex,
) -> None:
    # Given a doc written at version 5 and removed at version 6
    written = [_doc("memo", [0, 0, 1], version=5, text="memo")]
    index.upsert(written)
    index.remove([Removal(id="memo", tenant="t", version=6)])

    # When the write is replayed
    failures = index.upsert(written)

    # Then nothing fails and the doc does not come back, in any kind of read
    assert failures == {}
    assert "memo" not in _ids(index.search("t", [0, 0, 1], k=10))
    assert "memo" not in _ids(index.keyword("t", "memo", k=10))
    assert "memo" not in _ids(index.browse("t", k=10, offset=0))


def test_a_doc_written_again_after_its_removal_comes_back(index: OpenSearchIndex) -> None:
    index.upsert([_doc("memo", [0, 0, 1], version=5)])
    index.remove([Removal(id="memo", tenant="t", version=6)])

    index.upsert([_doc("memo", [0, 0, 1], version=7)])

    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["memo"]


def test_removing_an_absent_doc_is_a_success(index: OpenSearchIndex) -> None:
    assert index.remove([Removal(id="never-written", tenant="t", version=3)]) == {}


# --- failures ------------------------------------------------------------------------------


def test_a_bulk_item_error_fails_that_doc_alone(index: OpenSearchIndex) -> None:
    # Given a batch where one vector has the wrong dimension
    batch = [_doc("good", [1, 0, 0]), _doc("bad", [1, 0]), _doc("fine", [0, 1, 0])]

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
    stocked.upsert([_doc("n1", [1, 0, 0], version=2), _doc("n2", [0, 1, 0], version=2)])
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
    assert index.upsert([_doc("p", [1, 0, 0], text="I painted")]) == {}
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
    index.upsert([_doc("memo", [1, 0, 0], version=2, text="memo")])
    stale = {"doc_id": "memo", "tenant": "t", "version": 1, "deleted": False, "text": "memo"}
    _stale_copy(server, {**stale, "vector": [1.0, 0.0, 0.0]})

    # When it is searched, and then written again
    found = index.search("t", [1, 0, 0], k=10)
    index.upsert([_doc("memo", [1, 0, 0], version=3, text="memo")])

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
    assert rebuild.target.upsert([_doc("flat", [1, 0])]) == {}
    rebuild.switch()

    # a function started after the switch ensures the index through the alias, then writes
    redeployed = OpenSearchIndex(stocked._client, INDEX, 2, server.flavour)
    assert redeployed.upsert([_doc("tilted", [1, 1])]) == {}
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
