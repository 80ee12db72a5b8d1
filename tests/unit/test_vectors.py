"""The local vector index and the search filters: exact, filtered before ranking, versioned."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.vectors.filters import Condition, conditions_from, meets
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import Removal, VectorDoc


def _doc(
    doc_id: str, vector: list[float], version: int = 1, tenant: str = "t", **fields: Any
) -> VectorDoc:
    return VectorDoc(id=doc_id, tenant=tenant, vector=vector, version=version, fields=fields)


@pytest.fixture
def index() -> LocalVectorIndex:
    index = LocalVectorIndex(dimensions=3)
    index.upsert(
        [
            _doc("tea", [1, 0, 0], user_id="ada", topics=["drinks"], created_at=100),
            _doc("coffee", [0.9, 0.1, 0], user_id="ada", topics=["drinks", "work"], created_at=200),
            _doc("oslo", [0, 1, 0], user_id="bob", topics=["travel"], created_at=300),
            _doc("other-tenant", [1, 0, 0], tenant="u", user_id="ada"),
        ]
    )
    return index


def _ids(hits: list[Any]) -> list[str]:
    return [hit.id for hit in hits]


def test_search_ranks_by_cosine_within_the_tenant(index: LocalVectorIndex) -> None:
    hits = index.search("t", [1, 0, 0], k=10)

    assert _ids(hits) == ["tea", "coffee", "oslo"]
    assert hits[0].score == pytest.approx(1.0)
    assert hits[0].distance == pytest.approx(0.0)
    assert _ids(index.search("t", [1, 0, 0], k=1)) == ["tea"]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"user_id": {"eq": "ada"}}, ["tea", "coffee"]),
        ({"topics": {"any": ["travel", "work"]}}, ["coffee", "oslo"]),
        ({"topics": {"all": ["drinks", "work"]}}, ["coffee"]),
        ({"topics": {"none": ["work"]}}, ["tea", "oslo"]),
        ({"topics": {"not_in": ["work"]}}, ["tea", "oslo"]),  # agent-memory-client's name
        ({"user_id": {"in_": ["bob"]}}, ["oslo"]),
        ({"user_id": {"ne": "ada"}}, ["oslo"]),
        ({"created_at": {"gte": 200}}, ["coffee", "oslo"]),
        ({"created_at": {"between": [150, 250]}}, ["coffee"]),
        ({"user_id": {"startswith": "b"}}, ["oslo"]),
        ({"session_id": {"eq": "s1"}}, []),  # no record has it: no hit, never a wider list
        ({"user_id": {"eq": "ada"}, "created_at": {"lt": 150}}, ["tea"]),
    ],
)
def test_filters_apply_before_ranking_and_never_widen(
    index: LocalVectorIndex, filters: dict[str, dict[str, Any]], expected: list[str]
) -> None:
    hits = index.search("t", [1, 0, 0], k=10, conditions=conditions_from(filters))

    assert _ids(hits) == expected


def test_an_unknown_operator_is_refused_not_ignored() -> None:
    with pytest.raises(ValueError, match="unknown filter operator"):
        Condition("topics", "contains", "x")


def test_negative_conditions_are_met_by_a_missing_field() -> None:
    assert meets({}, Condition("session_id", "ne", "s1"))
    assert not meets({}, Condition("session_id", "eq", "s1"))


def test_an_older_version_never_overwrites_a_newer_one(index: LocalVectorIndex) -> None:
    index.upsert([_doc("tea", [0, 0, 1], version=3)])
    index.upsert([_doc("tea", [1, 0, 0], version=2)])  # arrives late

    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["tea"]


def test_a_removal_is_final_for_older_writes_and_a_replay_changes_nothing(
    index: LocalVectorIndex,
) -> None:
    batch = [_doc("new", [0, 0, 1], version=5)]
    index.upsert(batch)
    index.upsert(batch)  # a replayed batch
    assert len(index) == 5

    index.remove([Removal(id="new", tenant="t", version=6)])
    index.upsert(batch)  # the old INSERT replayed after the delete
    assert "new" not in _ids(index.search("t", [0, 0, 1], k=10))

    index.upsert([_doc("new", [0, 0, 1], version=7)])  # written again, later
    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["new"]


def test_a_removal_older_than_the_doc_is_ignored(index: LocalVectorIndex) -> None:
    index.remove([Removal(id="tea", tenant="t", version=0)])

    assert "tea" in _ids(index.search("t", [1, 0, 0], k=10))


def test_the_index_grows_past_its_first_block() -> None:
    index = LocalVectorIndex(dimensions=2)
    index.upsert([_doc(f"d{i}", [1, i / 1000], version=1) for i in range(200)])

    assert len(index) == 200
    assert _ids(index.search("t", [1, 0], k=1)) == ["d0"]


def test_a_vector_of_the_wrong_length_fails_alone(index: LocalVectorIndex) -> None:
    failures = index.upsert([_doc("bad", [1, 0], version=9), _doc("good", [0, 0, 1], version=9)])

    assert set(failures) == {"bad"}
    assert "3 dimensions" in failures["bad"]
    assert _ids(index.search("t", [0, 0, 1], k=1)) == ["good"]
    with pytest.raises(ValueError, match="3 dimensions"):
        index.search("t", [1, 0], k=1)


def test_keyword_and_browse_read_the_same_docs(index: LocalVectorIndex) -> None:
    index.upsert(
        [
            VectorDoc("note", "t", [0, 0, 1], 1, "green tea in Oslo", {"created_at": 400}),
            VectorDoc("gone", "t", [0, 0, 1], 1, "tea", {"created_at": 500}),
        ]
    )
    index.remove([Removal("gone", "t", 2)])

    assert _ids(index.keyword("t", "tea", k=5)) == ["note"]
    assert _ids(index.browse("t", k=2, offset=0)) == ["note", "oslo"]
    assert _ids(index.browse("t", k=2, offset=2)) == ["coffee", "tea"]
    assert index.browse("t", k=5, offset=0)[0].fields == {"created_at": 400}


def test_a_rewritten_doc_is_found_by_its_new_fields_only(index: LocalVectorIndex) -> None:
    index.upsert([_doc("tea", [1, 0, 0], version=2, user_id="bob", topics=["drinks"])])

    assert "tea" not in _ids(
        index.search("t", [1, 0, 0], k=10, conditions=[Condition("user_id", "eq", "ada")])
    )
    assert _ids(
        index.search("t", [1, 0, 0], k=1, conditions=[Condition("user_id", "any", ["bob"])])
    ) == ["tea"]
