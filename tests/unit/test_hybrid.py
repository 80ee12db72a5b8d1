"""Hybrid search: the vector and keyword rankings of an index fused into one, filters kept."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from memkit.vectors.conversation import drop_function_words
from memkit.vectors.filters import Condition, conditions_from
from memkit.vectors.hybrid import CANDIDATES, SPEAKER_BOOST, hybrid_search
from memkit.vectors.local import LocalVectorIndex
from memkit.vectors.protocol import Hit, VectorDoc

QUERY_VECTOR = [1.0, 0.0, 0.0]
QUERY_TEXT = "lighthouse"
ADA = conditions_from({"user_id": {"eq": "ada"}})


def _doc(doc_id: str, vector: list[float], text: str, user: str = "ada") -> VectorDoc:
    fields = {"user_id": user, "session_id": f"s-{user}"}
    return VectorDoc(id=doc_id, tenant="t", vector=vector, version=1, text=text, fields=fields)


@pytest.fixture
def index() -> LocalVectorIndex:
    index = LocalVectorIndex(dimensions=3)
    index.upsert(
        [
            _doc("near", [1, 0, 0], "a quiet harbour at dawn"),  # vector only
            _doc("both", [0.8, 0.6, 0], "the old lighthouse keeper and his harbour"),
            _doc("word", [0, 1, 0], "lighthouse"),  # keyword only
            _doc("far", [0, 0, 1], "nothing in common"),
            _doc("bob", [1, 0, 0], "lighthouse", user="bob"),  # best on both, another user
        ]
    )
    return index


def _ids(hits: Sequence[Hit]) -> list[str]:
    return [hit.id for hit in hits]


def test_a_doc_found_by_only_one_side_is_still_a_hit(index: LocalVectorIndex) -> None:
    # Given "near" shares no word with the query and "word" is orthogonal to its vector
    # When hybrid search runs with the default weight
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=ADA)

    # Then both are among the hits
    assert {"near", "word"} <= set(_ids(hits))


def test_alpha_one_ranks_as_semantic_search(index: LocalVectorIndex) -> None:
    # Given the vector ranking of ada's docs
    semantic = index.search("t", QUERY_VECTOR, 10, ADA)

    # When hybrid search runs with all the weight on the vector side
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=ADA, alpha=1.0)

    # Then it returns that ranking, cosines as scores
    assert _ids(hits) == _ids(semantic)
    assert [hit.score for hit in hits] == pytest.approx([max(0, h.score) for h in semantic])


def test_alpha_zero_ranks_as_keyword_search(index: LocalVectorIndex) -> None:
    # Given the BM25 ranking of ada's docs
    keyword = index.keyword("t", QUERY_TEXT, 10, ADA)

    # When hybrid search runs with all the weight on the keyword side
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=ADA, alpha=0.0)

    # Then it returns that ranking, the best match scoring 1
    assert _ids(hits) == _ids(keyword) == ["word", "both"]
    assert hits[0].score == pytest.approx(1.0)


@pytest.mark.parametrize("alpha", [None, 0.0, 0.3, 0.5, 1.0])
def test_scores_are_relevances_best_first(index: LocalVectorIndex, alpha: float | None) -> None:
    # When hybrid search runs with any weight
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, alpha=alpha)

    # Then every score is in [0, 1] and no hit outscores the one before it
    scores = [hit.score for hit in hits]
    assert hits
    assert all(0.0 <= score <= 1.0 for score in scores)
    assert scores == sorted(scores, reverse=True)


def test_a_doc_close_on_both_sides_outranks_one_close_on_one_side() -> None:
    # Given two docs as near the query vector as each other, one of them matching its words
    index = LocalVectorIndex(dimensions=2)
    index.upsert(
        [
            _doc("silent", [1, 0.1], "a quiet harbour at dawn"),
            _doc("matching", [1, 0.1], "the lighthouse at dawn"),
        ]
    )

    # When hybrid search runs with the default weight
    hits = hybrid_search(index, "t", QUERY_TEXT, [1.0, 0.0], k=2)

    # Then the matching one comes first
    assert _ids(hits) == ["matching", "silent"]


def test_filters_hold_on_both_sides(index: LocalVectorIndex) -> None:
    # Given bob's doc is the best match on both sides
    assert _ids(hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=1)) == ["bob"]

    # When ada's docs are searched
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=ADA)

    # Then bob's doc is not among them
    assert "bob" not in _ids(hits)
    assert all(hit.fields["user_id"] == "ada" for hit in hits)


def test_hits_carry_the_index_fields(index: LocalVectorIndex) -> None:
    hits = hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=ADA)

    assert {hit.id: hit.fields["session_id"] for hit in hits}["word"] == "s-ada"


def test_nothing_found_is_an_empty_list(index: LocalVectorIndex) -> None:
    nobody = conditions_from({"user_id": {"eq": "carol"}})

    assert hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=10, conditions=nobody) == []
    assert hybrid_search(index, "other-tenant", QUERY_TEXT, QUERY_VECTOR, k=10) == []


def test_no_more_than_k_hits(index: LocalVectorIndex) -> None:
    assert len(hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=2)) == 2
    assert hybrid_search(index, "t", QUERY_TEXT, QUERY_VECTOR, k=0) == []


class _RecordingIndex:
    """Answers nothing; remembers what each side was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, int, Sequence[Condition]]] = []

    def search(
        self, tenant: str, vector: Sequence[float], k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        self.asked.append(("search", k, conditions))
        return []

    def keyword(
        self, tenant: str, text: str, k: int, conditions: Sequence[Condition] = ()
    ) -> list[Hit]:
        self.asked.append(("keyword", k, conditions))
        return []

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"hybrid search used index.{name}")


@pytest.mark.parametrize(("k", "depth"), [(10, CANDIDATES), (CANDIDATES + 50, CANDIDATES + 50)])
def test_each_side_is_asked_for_the_candidate_depth_under_the_same_filters(
    k: int, depth: int
) -> None:
    recording = _RecordingIndex()

    hybrid_search(recording, "t", QUERY_TEXT, QUERY_VECTOR, k=k, conditions=ADA)

    assert recording.asked == [("keyword", depth, ADA), ("search", depth, ADA)]


@pytest.mark.parametrize(("alpha", "side"), [(1.0, "search"), (0.0, "keyword")])
def test_a_side_without_weight_is_not_asked(alpha: float, side: str) -> None:
    recording = _RecordingIndex()

    hybrid_search(recording, "t", QUERY_TEXT, QUERY_VECTOR, k=5, alpha=alpha)

    assert [asked[0] for asked in recording.asked] == [side]


def test_function_words_are_dropped_from_what_is_embedded() -> None:
    assert drop_function_words("What's my dog's name?") == "dog name"
    assert drop_function_words("Where did I stay in Lisbon?") == "stay lisbon"


def test_a_text_of_function_words_only_is_embedded_as_it_is() -> None:
    assert drop_function_words("What did I do?") == "What did I do?"


def _turn(doc_id: str, vector: list[float], text: str, speaker: str | None) -> VectorDoc:
    fields = {"user_id": "ada", "session_id": "s-ada", "speaker": speaker}
    return VectorDoc(id=doc_id, tenant="t", vector=vector, version=1, text=text, fields=fields)


@pytest.fixture
def dialogue() -> LocalVectorIndex:
    index = LocalVectorIndex(dimensions=2)
    index.upsert(
        [
            _turn("caroline-1", [1, 0], "Caroline: I researched adoption agencies", "caroline"),
            _turn("melanie-1", [1, 0], "Melanie: I researched adoption agencies", "melanie"),
            _turn("melanie-2", [0, 1], "Melanie: Caroline, how was the weekend?", "melanie"),
            _turn("note", [0, 1], "a note without a speaker", None),
        ]
    )
    return index


def test_the_vector_is_made_without_the_speakers_the_question_names(
    dialogue: LocalVectorIndex,
) -> None:
    # Given a query vector made from the speakers the keyword side found named
    asked: list[frozenset[str]] = []

    def vector_of(speakers: frozenset[str]) -> list[float]:
        asked.append(speakers)
        return [1.0, 0.0]

    # When the question names Caroline (a speaker) and Lisbon (no one's name)
    hybrid_search(dialogue, "t", "What did Caroline research in Lisbon?", vector_of, k=3)
    # Then the vector is asked for once, without Caroline; and with no speaker named, bare
    hybrid_search(dialogue, "t", "adoption agencies", vector_of, k=3)
    assert asked == [frozenset({"caroline"}), frozenset()]


def test_a_message_said_by_the_person_asked_about_ranks_first_among_equals(
    dialogue: LocalVectorIndex,
) -> None:
    # Given two messages alike in words and vector, said by Caroline and by Melanie
    hits = hybrid_search(dialogue, "t", "What did Caroline research?", [1.0, 0.0], k=4)
    by_id = {hit.id: hit.score for hit in hits}

    # Then Caroline's comes first, by the boost (its keyword share differs a little: the
    # other message holds the name too), scores still in [0, 1] and best first
    assert _ids(hits)[0] == "caroline-1"
    assert by_id["caroline-1"] - by_id["melanie-1"] >= SPEAKER_BOOST - 0.05
    assert all(0.0 <= hit.score <= 1.0 for hit in hits)
    assert [hit.score for hit in hits] == sorted((hit.score for hit in hits), reverse=True)
    # And a question naming no speaker ranks them as equals (ties by id)
    plain = hybrid_search(dialogue, "t", "research adoption", [1.0, 0.0], k=2)
    assert _ids(plain) == ["caroline-1", "melanie-1"]
    assert plain[0].score == pytest.approx(plain[1].score)
