"""BM25 keyword search and reciprocal rank fusion (the parts of hybrid search)."""

from __future__ import annotations

import pytest

from memkit.vectors.filters import conditions_from
from memkit.vectors.keyword import (
    KeywordIndex,
    plain_terms,
    reciprocal_rank_fusion,
    terms,
    weighted_search,
)
from memkit.vectors.protocol import Hit, Removal


@pytest.fixture
def index() -> KeywordIndex:
    index = KeywordIndex()
    docs = {
        "tea": ("Ada drinks green tea every morning", "ada"),
        "teas": ("Tea, tea and more tea: the tea shop on Main Street", "ada"),
        "oslo": ("The flight to Oslo leaves on Friday", "bob"),
        "café": ("Meet at the Café Noir near the station", "bob"),
    }
    for doc_id, (text, user) in docs.items():
        index.upsert("t", doc_id, text, 1, {"user_id": user})
    index.upsert("other", "tea", "green tea", 1, {"user_id": "ada"})
    return index


def _ids(hits: list[Hit]) -> list[str]:
    return [hit.id for hit in hits]


def test_plain_terms_are_lowercased_without_accents_or_punctuation() -> None:
    assert plain_terms("Café NOIR, naïve!") == ["cafe", "noir", "naive"]


def test_terms_are_the_english_analyzers() -> None:
    # possessive dropped, Lucene's English stop words dropped, Porter stems; pronouns stay
    assert terms("Caroline's paintings: she painted the sunrise, and it PAINTS itself") == [
        "carolin",
        "paint",
        "she",
        "paint",
        "sunris",
        "paint",
        "itself",
    ]
    assert terms("Melanie\u2019s kids") == ["melani", "kid"]


def test_a_question_finds_another_form_of_its_words() -> None:
    index = KeywordIndex()
    index.upsert("t", "painted", "Melanie: I painted that lake sunrise last year!", 1, {})
    index.upsert("t", "lake", "Caroline: The lake was cold", 1, {})
    plain = KeywordIndex(plain_terms)
    plain.upsert("t", "painted", "Melanie: I painted that lake sunrise last year!", 1, {})

    assert _ids(index.search("t", "When did Melanie paint a sunrise?", 5))[0] == "painted"
    assert index.search("t", "paintings", 5)[0].id == "painted"
    assert plain.search("t", "paintings", 5) == []


def test_weighted_search_sums_each_fields_bm25() -> None:
    own, context = KeywordIndex(), KeywordIndex()
    docs = {
        # the answer holds none of the question's words; the turn before it does
        "answer": ("I'm an assistant manager now", "Congrats on the promotion!"),
        "asked": ("Congrats on the promotion!", "I got good news at work"),
        "other": ("Lunch was great", "How was the weekend?"),
    }
    for doc_id, (text, before) in docs.items():
        own.upsert("t", doc_id, text, 1, {"user_id": "ada"})
        context.upsert("t", doc_id, before, 1, {})

    hits = weighted_search([(own, 1.0), (context, 0.4)], "t", "what promotion", 10)

    assert _ids(hits) == ["asked", "answer"]
    only_own = own.matches("t", "promotion")["asked"]
    assert hits[0].score == pytest.approx(only_own)
    assert hits[1].score == pytest.approx(0.4 * context.matches("t", "promotion")["answer"])
    assert hits[1].fields == {"user_id": "ada"}  # the first index's fields
    bob = conditions_from({"user_id": {"eq": "bob"}})
    assert weighted_search([(own, 1.0), (context, 0.4)], "t", "promotion", 10, bob) == []
    assert _ids(weighted_search([(own, 1.0)], "t", "promotion", 10, allowed={"answer"})) == []


def test_a_doc_without_terms_does_not_count_in_the_fields_statistics() -> None:
    # as Lucene counts a field's docs: an empty context changes no other doc's score
    index = KeywordIndex()
    index.upsert("t", "a", "green tea", 1, {})
    index.upsert("t", "b", "black coffee", 1, {})
    before = index.matches("t", "tea")["a"]
    index.upsert("t", "empty", "", 1, {})
    assert index.matches("t", "tea")["a"] == pytest.approx(before)


def test_bm25_ranks_by_term_weight_and_ignores_other_tenants(index: KeywordIndex) -> None:
    hits = index.search("t", "green tea", k=10)

    assert _ids(hits) == ["tea", "teas"]  # "green" is rare: it outweighs repeated "tea"
    assert hits[0].score > hits[1].score > 0


def test_accents_and_case_do_not_matter(index: KeywordIndex) -> None:
    assert _ids(index.search("t", "CAFE", k=10)) == ["café"]


def test_filters_apply_and_no_match_is_an_empty_list(index: KeywordIndex) -> None:
    only_bob = conditions_from({"user_id": {"eq": "bob"}})

    assert _ids(index.search("t", "tea station", k=10, conditions=only_bob)) == ["café"]
    assert index.search("t", "submarine", k=10) == []
    assert index.search("t", "   ", k=10) == []


def test_versions_and_removals_follow_the_vector_index_rules(index: KeywordIndex) -> None:
    index.upsert("t", "oslo", "The flight to Bergen", 3, {"user_id": "bob"})
    index.upsert("t", "oslo", "The flight to Oslo", 2, {"user_id": "bob"})  # late, older
    assert _ids(index.search("t", "bergen", k=10)) == ["oslo"]

    index.remove([Removal(id="oslo", tenant="t", version=4)])
    index.upsert("t", "oslo", "The flight to Bergen", 3, {"user_id": "bob"})  # replayed
    assert index.search("t", "bergen", k=10) == []


def test_rank_fusion_rewards_agreement_between_rankings() -> None:
    semantic = [Hit("a", 0.9), Hit("b", 0.8), Hit("c", 0.7)]
    keyword = [Hit("c", 9.0), Hit("a", 5.0), Hit("d", 1.0)]

    fused = reciprocal_rank_fusion([semantic, keyword], k=3)

    assert _ids(fused) == ["a", "c", "b"]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 62)
    weighted = reciprocal_rank_fusion([semantic, keyword], k=1, weights=[0.1, 1.0])
    assert _ids(weighted) == ["c"]


def test_a_rewritten_doc_is_found_by_its_new_words_only(index: KeywordIndex) -> None:
    index.upsert("t", "oslo", "The train to Bergen", 2, {"user_id": "bob"})

    assert _ids(index.search("t", "oslo", k=10)) == []
    assert _ids(index.search("t", "bergen train", k=10)) == ["oslo"]


def test_a_caller_can_narrow_the_candidates_to_ids_it_allows(index: KeywordIndex) -> None:
    assert _ids(index.search("t", "tea", k=10, allowed={"teas"})) == ["teas"]
    assert index.search("t", "tea", k=10, allowed=set()) == []


def test_a_word_every_doc_holds_ranks_them_all_with_ties_by_id() -> None:
    # Given many docs of one tenant, every one holding "note" once (and two holding "tea")
    index = KeywordIndex()
    for n in range(300):
        text = "note tea" if n in (7, 250) else f"note number {n}"
        index.upsert("t", f"doc-{n:03d}", text, 1, {"user_id": "ada" if n % 2 else "bob"})

    # When a few are asked for by a common word and a rare one
    hits = index.search("t", "note tea", k=4)

    # Then the rare word ranks first; the rest tie and come in id order; count sees all
    assert _ids(hits) == ["doc-007", "doc-250", "doc-000", "doc-001"]
    assert index.count("t", "note tea") == 300
    assert index.count("t", "tea", allowed={"doc-007", "doc-008"}) == 1
    assert index.count("t", "absent") == index.count("nobody", "note") == 0

    # And a filter that rejects half the best still fills k from further down (doc-007,
    # shorter, scores "note" higher than the three-word notes)
    odd = index.search("t", "note", k=3, conditions=conditions_from({"user_id": {"eq": "ada"}}))
    assert _ids(odd) == ["doc-007", "doc-001", "doc-003"]
