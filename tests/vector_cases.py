"""The docs every vector backend is tested with (test_vector_backends.py, and each
backend's own suite): a tenant's records with assorted filter fields, another tenant's, a
conversation whose replies say what they answer only through the turn before, and the filters
whose results must be the local exact index's."""

from __future__ import annotations

from typing import Any

from memkit.vectors.protocol import VectorDoc


def vector_doc(
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
    vector_doc(
        "tea",
        [1, 0, 0],
        text="green tea in the morning",
        user_id="ada",
        topics=["drinks"],
        created_at=100.0,
        pinned=True,
        namespace="work",
    ),
    vector_doc(
        "coffee",
        [0.9, 0.1, 0],
        text="black coffee at the office, and some tea",
        user_id="ada",
        topics=["drinks", "work"],
        created_at=200.0,
        pinned=False,
        session_id="s1",
    ),
    vector_doc(
        "oslo",
        [0, 1, 0],
        text="a trip to oslo",
        user_id="bob",
        topics=["travel"],
        created_at=300.5,
        event_date=1000.0,
    ),
    vector_doc("bare", [0.1, 0.2, 1], text="nothing here"),
    vector_doc("south", [-1, 0.1, 0], text="tea", user_id="cy", created_at=50.0),
    vector_doc("other", [1, 0, 0], tenant="u", text="tea for another tenant", user_id="ada"),
]


def chat_message(
    doc_id: str, text: str, context: str, speaker: str, vector: list[float]
) -> VectorDoc:
    """A message's doc: its text, the turn it follows (context) and its speaker."""
    fields = {"speaker": speaker, "kind": "message"}
    return VectorDoc(doc_id, "t", vector, 1, text=text, fields=fields, context=context)


# A conversation: "reply" says nothing of a promotion; only the turn before it does.
CONVERSATION = [
    chat_message("congrats", "Congrats on the promotion, John!", "", "ada", [1, 0, 0]),
    chat_message(
        "reply",
        "Thanks! I'm an assistant manager now.",
        "Congrats on the promotion, John!",
        "john",
        [0.9, 0.1, 0],
    ),
    chat_message("work", "Promotion season at work is stressful", "How is work?", "bob", [0, 1, 0]),
    chat_message("paint", "I painted a sunset last weekend", "What did you do?", "ada", [0, 0, 1]),
    chat_message(
        "lake", "We went to the lake", "I painted a sunset last weekend", "john", [0.1, 0, 1]
    ),
]


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


# A user's home over time (epoch seconds), as memkit.service.truth keeps it: "old_home"
# valid from 100 until a move at 500, superseded (retired) when memkit learned of the move
# at 510; "legacy" written before records had times (no truth fields: valid and recorded
# since its creation); a planned fact valid from 2000; a fact whose validity ended at 300;
# one retired by hand at 400.
TRUTH_DOCS = [
    vector_doc(
        "old_home",
        [1, 0, 0],
        created_at=100.0,
        valid_from=100.0,
        recorded_at=100.0,
        valid_until=500.0,
        retired_at=510.0,
    ),
    vector_doc("new_home", [0.9, 0.1, 0], created_at=510.0, valid_from=500.0, recorded_at=510.0),
    vector_doc("legacy", [0.8, 0.2, 0], created_at=50.0),
    vector_doc("planned", [0.7, 0.3, 0], created_at=600.0, valid_from=2000.0, recorded_at=600.0),
    vector_doc("expired", [0.6, 0.4, 0], created_at=200.0, recorded_at=200.0, valid_until=300.0),
    vector_doc(
        "retired",
        [0.5, 0.5, 0],
        created_at=250.0,
        valid_from=250.0,
        recorded_at=250.0,
        valid_until=400.0,
        retired_at=400.0,
    ),
]
# (as_of, known_at, current_only) at now=1000, and what each read finds.
TRUTH_READS: list[tuple[float | None, float | None, bool, set[str]]] = [
    (None, None, True, {"new_home", "legacy", "planned"}),
    (None, None, False, {d.id for d in TRUTH_DOCS}),
    (150.0, None, True, {"old_home", "legacy"}),
    (350.0, None, True, {"old_home", "legacy", "retired"}),
    (None, 450.0, True, {"old_home", "legacy"}),
    (None, 505.0, True, {"old_home", "legacy"}),  # moved at 500, learned only at 510
    (None, 600.0, True, {"new_home", "legacy", "planned"}),
    (250.0, 450.0, True, {"old_home", "legacy", "expired", "retired"}),
]
