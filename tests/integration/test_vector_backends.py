"""What every vector backend does the same: the OpenSearch adapter on a managed domain and
on a serverless collection (the strict loopback OpenSearch, SigV4 checked) and the DynamoDB
vector table (the local stand-in for its vector index, SigV4 checked), each against the local
exact index as the reference. A backend's own ways (OpenSearch's request subset, DynamoDB's
scopes and over-fetch) are in test_opensearch_adapter.py and test_dynamodb_vectors.py.

The DynamoDB vector index is eventually consistent: its reads here wait until it caught up
with the writes before them (`Settled`), which is what these tests compare; how it behaves
before that is in test_dynamodb_vectors.py."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from memkit.config import IndexSettings
from memkit.service.truth import truth_conditions
from memkit.vectors.filters import Condition, conditions_from
from memkit.vectors.keyword import KeywordIndex
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.opensearch import opensearch_index
from memkit.vectors.protocol import (
    CONTEXT_WEIGHT,
    Failures,
    Hit,
    Removal,
    Sampled,
    VectorDoc,
    VectorIndex,
)
from memkit_dev.local.opensearch import LoopbackOpenSearch
from tests.vector_cases import CONVERSATION, DOCS, FILTERS, TRUTH_DOCS, TRUTH_READS, vector_doc
from tests.vector_tables import dynamodb_vectors

pytestmark = pytest.mark.integration

DIMENSIONS = 3
REGION = "us-east-1"
BACKENDS = ("opensearch-domain", "opensearch-serverless", "dynamodb")


class Settled:
    """A VectorIndex whose reads first wait for `settle` (the writes before them in the
    index)."""

    def __init__(self, index: VectorIndex, settle: Callable[[], None]) -> None:
        self._index = index
        self._settle = settle

    def upsert(self, docs: Sequence[VectorDoc]) -> Failures:
        return self._index.upsert(docs)

    def remove(self, removals: Sequence[Removal]) -> Failures:
        return self._index.remove(removals)

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        self._settle()
        return self._index.search(tenant, vector, k, conditions)

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        self._settle()
        return self._index.keyword(tenant, text, k, conditions)

    def browse(
        self, tenant: str, k: int, offset: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        self._settle()
        return self._index.browse(tenant, k, offset, conditions)

    def sample(self, k: int, after: str | None = None) -> tuple[list[Sampled], str | None]:
        self._settle()
        return self._index.sample(k, after)


@dataclass
class Backend:
    name: str
    index: VectorIndex
    requests: Callable[[], int]


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    """One backend, empty; it must have refused nothing memkit sent by the end."""
    name: str = request.param
    if name == "dynamodb":
        with dynamodb_vectors(DIMENSIONS) as vectors:
            index = Settled(vectors.index(), vectors.settle)
            yield Backend(name, index, lambda: len(vectors.standin.requests))
            assert vectors.standin.rejected == []
            assert vectors.standin.denied == []
        return
    flavour = name.removeprefix("opensearch-")
    with LoopbackOpenSearch(
        DIMENSIONS, flavour=flavour, require_sigv4=True, region=REGION, session_token="testing"
    ) as server:
        settings = IndexSettings(opensearch_endpoint=server.url, opensearch_flavour=flavour)
        adapter = opensearch_index(settings, REGION, DIMENSIONS)
        yield Backend(name, adapter, lambda: len(server.requests))
        assert server.rejected == []


@pytest.fixture
def index(backend: Backend) -> VectorIndex:
    return backend.index


def _holding(index: VectorIndex, docs: list[VectorDoc]) -> VectorIndex:
    assert index.upsert(docs) == {}
    return index


def _local(docs: list[VectorDoc]) -> LocalVectorIndex:
    """The local exact index holding `docs`: what a search must find."""
    local = LocalVectorIndex(DIMENSIONS)
    local.upsert(docs)
    return local


@pytest.fixture
def stocked(index: VectorIndex) -> VectorIndex:
    return _holding(index, DOCS)


@pytest.fixture
def reference() -> LocalVectorIndex:
    return _local(DOCS)


@pytest.fixture
def chat(index: VectorIndex) -> VectorIndex:
    return _holding(index, CONVERSATION)


@pytest.fixture
def chat_reference() -> LocalVectorIndex:
    return _local(CONVERSATION)


def _ids(hits: list[Hit]) -> list[str]:
    return [hit.id for hit in hits]


# --- search, keyword and browse -------------------------------------------------------------


def test_search_ranks_by_cosine_and_returns_the_fields(stocked: VectorIndex) -> None:
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


def test_search_returns_at_most_k_hits(stocked: VectorIndex) -> None:
    assert _ids(stocked.search("t", [0, 1, 0], k=2)) == ["oslo", "bare"]


@pytest.mark.parametrize("filters", FILTERS, ids=[json.dumps(f) for f in FILTERS])
def test_filters_find_what_the_local_index_finds(
    stocked: VectorIndex, reference: LocalVectorIndex, filters: dict[str, dict[str, Any]]
) -> None:
    # Given the same docs in the backend and in the local exact index
    conditions = conditions_from(filters)

    # When both are searched with the filter
    found = stocked.search("t", [1, 0, 0], k=10, conditions=conditions)

    # Then the backend finds exactly what filters.meets accepts, in the same order
    assert _ids(found) == _ids(reference.search("t", [1, 0, 0], k=10, conditions=conditions))


@pytest.mark.parametrize(
    ("as_of", "known_at", "current_only", "expected"),
    TRUTH_READS,
    ids=[f"as_of={a}-known_at={k}-current_only={c}" for a, k, c, _ in TRUTH_READS],
)
def test_reads_in_time_find_what_memkit_held_true(
    backend: Backend,
    as_of: float | None,
    known_at: float | None,
    current_only: bool,
    expected: set[str],
) -> None:
    # Given a user's facts over time, some without the truth fields (written before them)
    index = _holding(backend.index, TRUTH_DOCS)
    conditions = truth_conditions(1000.0, as_of=as_of, known_at=known_at, current_only=current_only)
    index.search("t", [1, 0, 0], k=10)  # the index caught up
    plain = backend.requests()
    index.search("t", [1, 0, 0], k=10)
    plain = backend.requests() - plain

    # When the backend is searched and browsed with a read in time's conditions
    before = backend.requests()
    found = index.search("t", [1, 0, 0], k=10, conditions=conditions)
    requests = backend.requests() - before
    listed = index.browse("t", k=10, offset=0, conditions=conditions)

    # Then it finds what was held true then, as the local exact index does, with as many
    # requests as a search without them
    reference = _local(TRUTH_DOCS).search("t", [1, 0, 0], k=10, conditions=conditions)
    assert set(_ids(found)) == expected
    assert _ids(found) == _ids(reference)
    assert set(_ids(listed)) == expected
    assert requests == plain


def test_a_tenant_sees_only_its_own_docs(stocked: VectorIndex) -> None:
    # Given docs of tenants t and u
    # When u searches, matches and lists
    # Then it finds only its own doc
    assert _ids(stocked.search("u", [1, 0, 0], k=10)) == ["other"]
    assert _ids(stocked.keyword("u", "tea", k=10)) == ["other"]
    assert _ids(stocked.browse("u", k=10, offset=0)) == ["other"]


def test_a_filter_no_doc_meets_finds_nothing(stocked: VectorIndex) -> None:
    conditions = [Condition("user_id", "eq", "nobody")]

    assert stocked.search("t", [1, 0, 0], k=10, conditions=conditions) == []


def test_a_field_that_cannot_be_filtered_is_refused(stocked: VectorIndex, backend: Backend) -> None:
    # Given a condition on the text (not a filter field)
    sent = backend.requests()

    # When a search carries it, then it is refused before any request
    with pytest.raises(ValueError, match="cannot filter on 'text'"):
        stocked.search("t", [1, 0, 0], k=10, conditions=[Condition("text", "eq", "tea")])
    assert backend.requests() == sent


def test_keyword_ranks_bm25_matches_and_skips_the_rest(stocked: VectorIndex) -> None:
    # Given three of the tenant's docs that say "tea", a short one first
    # When the tenant looks for "tea"
    hits = stocked.keyword("t", "tea", k=10)

    # Then only those match, best BM25 first, with positive scores
    assert _ids(hits) == ["south", "tea", "coffee"]
    assert all(hit.score > 0 for hit in hits)


def test_keyword_applies_the_filters(stocked: VectorIndex) -> None:
    conditions = conditions_from({"user_id": {"eq": "ada"}})

    assert _ids(stocked.keyword("t", "tea", k=10, conditions=conditions)) == ["tea", "coffee"]


def test_keyword_finds_a_word_by_its_stem(
    chat: VectorIndex, chat_reference: LocalVectorIndex
) -> None:
    # Given "I painted a sunset", and a message that follows it
    # When the tenant asks about painting
    hits = chat.keyword("t", "when did she paint?", k=10)

    # Then the english analysis finds "painted" (and the next turn, by its context), in the
    # local index's order
    assert _ids(hits) == ["paint", "lake"]
    assert _ids(hits) == _ids(chat_reference.keyword("t", "when did she paint?", k=10))


def test_a_doc_matched_by_its_context_alone_scores_its_weighted_context_bm25(
    chat: VectorIndex, chat_reference: LocalVectorIndex
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


def test_no_hit_carries_the_context_or_the_text(chat: VectorIndex) -> None:
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
    chat: VectorIndex, chat_reference: LocalVectorIndex
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
    stocked: VectorIndex, reference: LocalVectorIndex
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


def test_browse_applies_the_filters(stocked: VectorIndex) -> None:
    conditions = conditions_from({"topics": {"any": ["drinks"]}})

    assert _ids(stocked.browse("t", k=10, offset=0, conditions=conditions)) == ["coffee", "tea"]


def test_an_older_write_after_a_newer_one_changes_nothing(index: VectorIndex) -> None:
    # Given version 3 of a doc
    index.upsert([vector_doc("tea", [0, 0, 1], version=3, text="new")])

    # When version 2 arrives late
    failures = index.upsert([vector_doc("tea", [1, 0, 0], version=2, text="old")])

    # Then that is no failure and version 3 stays
    assert failures == {}
    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["tea"]
    assert index.search("t", [0, 0, 1], k=1)[0].score == pytest.approx(1.0)
    assert _ids(index.keyword("t", "old", k=10)) == []


def test_a_removal_older_than_the_doc_is_ignored(stocked: VectorIndex) -> None:
    # Given the doc at version 1
    # When a removal at version 0 arrives
    failures = stocked.remove([Removal(id="tea", tenant="t", version=0)])

    # Then the doc is still found
    assert failures == {}
    assert "tea" in _ids(stocked.search("t", [1, 0, 0], k=10))


def test_a_removal_at_the_docs_version_removes_it(stocked: VectorIndex) -> None:
    assert stocked.remove([Removal(id="tea", tenant="t", version=1)]) == {}

    assert "tea" not in _ids(stocked.search("t", [1, 0, 0], k=10))


def test_a_removed_doc_stays_removed_when_its_older_write_is_replayed(
    index: VectorIndex,
) -> None:
    # Given a doc written at version 5 and removed at version 6
    written = [vector_doc("memo", [0, 0, 1], version=5, text="memo")]
    index.upsert(written)
    index.remove([Removal(id="memo", tenant="t", version=6)])

    # When the write is replayed
    failures = index.upsert(written)

    # Then nothing fails and the doc does not come back, in any kind of read
    assert failures == {}
    assert "memo" not in _ids(index.search("t", [0, 0, 1], k=10))
    assert "memo" not in _ids(index.keyword("t", "memo", k=10))
    assert "memo" not in _ids(index.browse("t", k=10, offset=0))


def test_a_doc_written_again_after_its_removal_comes_back(index: VectorIndex) -> None:
    index.upsert([vector_doc("memo", [0, 0, 1], version=5)])
    index.remove([Removal(id="memo", tenant="t", version=6)])

    index.upsert([vector_doc("memo", [0, 0, 1], version=7)])

    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["memo"]


def test_removing_an_absent_doc_is_a_success(index: VectorIndex) -> None:
    assert index.remove([Removal(id="never-written", tenant="t", version=3)]) == {}


# --- the orphan sweep's pages ---------------------------------------------------------------


def test_sampling_pages_through_every_live_doc_once(stocked: VectorIndex) -> None:
    # Given docs of two tenants, one of them removed
    stocked.remove([Removal("bare", "t", 2)])

    # When the index is sampled four docs at a time, to the end
    pages: list[Sampled] = []
    cursor: str | None = None
    for _ in range(10):
        page, cursor = stocked.sample(4, cursor)
        pages.extend(page)
        if cursor is None:
            break

    # Then every live doc came once, with its tenant, version and fields
    assert sorted(doc.id for doc in pages) == sorted({"tea", "coffee", "oslo", "south", "other"})
    assert cursor is None
    other = next(doc for doc in pages if doc.id == "other")
    assert (other.tenant, other.version, other.fields["user_id"]) == ("u", 1, "ada")
