"""AgentCore records as memkit records: the tags the index filters on, read back exactly, and
the conditions of a retrieval, evaluated as the index and the table re-check evaluate them."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from memkit.agentcore.mapping import (
    MetadataFilter,
    Template,
    actors_at,
    derived_record_id,
    metadata_conditions,
    new_record_id,
    owner_of,
    read_tags,
    record_tags,
    scope_conditions,
    stored_metadata,
    under,
    wire_metadata,
)
from memkit.agentcore.record_models import CREATED_AT_KEY
from memkit.models.domain import StoredRecord
from memkit.vectors.filters import meets_all
from memkit.vectors.opensearch import condition_clause
from memkit.vectors.protocol import record_fields

MEMORY = "support-abcdefghij"
RECORD_ID = re.compile(r"mem-[a-zA-Z0-9_-]*")


def _record(
    namespace: str | None,
    *,
    strategy: str | None = None,
    metadata: dict[str, dict[str, object]] | None = None,
    user: str | None = "ada",
    created: str = "2026-01-02T03:04:05.000Z",
) -> StoredRecord:
    kept = stored_metadata(metadata)  # type: ignore[arg-type]
    return StoredRecord(
        id=new_record_id(),
        namespace=MEMORY,
        text="Ada drinks green tea",
        memory_type="semantic",
        created_at=created,
        updated_at=created,
        last_accessed=created,
        memory_hash="h",
        written_us=1,
        topics=record_tags(namespace, strategy, kept, None),
        user_id=user,
        metadata=kept,
    )


def _found(records: list[StoredRecord], **scope: object) -> set[str | None]:
    filters = scope.pop("filters", [])
    conditions = scope_conditions(MEMORY, **scope)  # type: ignore[arg-type]
    extra, post = metadata_conditions(filters)  # type: ignore[arg-type]
    every = [*conditions, *extra]
    for condition in every:  # the OpenSearch adapter takes each one as a filter clause
        condition_clause(condition)
    kept = [
        r
        for r in records
        if meets_all(record_fields("t", r), every) and all(p.passes(r) for p in post)
    ]
    return {read_tags(r.topics).namespace for r in kept}


SCOPE = {"namespace": None, "namespace_path": None, "strategy_id": None, "user_id": None}


def test_a_namespace_path_takes_whole_segments() -> None:
    # Given records in namespaces that share a string prefix but not a path
    records = [
        _record(n)
        for n in ("/users/ada", "/users/ada/", "/users/ada/facts", "/users/adam/facts", "x/y")
    ]

    # When listed under /users/ada (with or without its trailing slash), and under the root
    found = _found(records, **{**SCOPE, "namespace_path": "/users/ada"})
    found_slash = _found(records, **{**SCOPE, "namespace_path": "/users/ada/"})
    found_root = _found(records, **{**SCOPE, "namespace_path": "/"})

    # Then /users/adam is never under /users/ada, and the root holds every `/...` namespace
    assert found == found_slash == {"/users/ada", "/users/ada/", "/users/ada/facts"}
    assert found_root == {"/users/ada", "/users/ada/", "/users/ada/facts", "/users/adam/facts"}
    assert under("/users/ada/facts", "/users")
    assert not under("/users/adam", "/users/ada")


def test_a_namespace_matches_exactly() -> None:
    records = [_record(n) for n in ("/users/ada", "/users/ada/", "/users/ada/facts")]

    assert _found(records, **{**SCOPE, "namespace": "/users/ada"}) == {"/users/ada"}
    assert _found(records, **{**SCOPE, "namespace": "/users/ada/"}) == {"/users/ada/"}


def test_a_retrieval_sees_only_its_memory_its_strategy_and_its_user() -> None:
    mine = _record("/a", strategy="facts-0123456789")
    other_strategy = _record("/b", strategy="prefs-0123456789")
    other_user = _record("/c", strategy="facts-0123456789", user="bob")
    other_memory = replace(_record("/d", strategy="facts-0123456789"), namespace="x-abcdefghij")
    plain = replace(_record("/e"), topics=("tea",))  # a memkit record, not AgentCore's
    records = [mine, other_strategy, other_user, other_memory, plain]

    found = _found(
        records,
        **{**SCOPE, "namespace_path": "/", "strategy_id": "facts-0123456789", "user_id": "ada"},
    )

    assert found == {"/a"}


def test_tags_read_back_as_written_whatever_the_characters() -> None:
    # Metadata keys may hold `=`, `:`, `/` and spaces; namespaces `:` and `*`
    metadata = {"a=b": {"stringValue": "c"}, "a": {"stringValue": "b=c"}}
    tags = record_tags("/x:y/*", "s-1", stored_metadata(metadata), 40)

    read = read_tags(tags)

    assert (read.namespace, read.strategy_id, read.expiry_days) == ("/x:y/*", "s-1", 40)
    assert len(set(tags)) == len(tags)
    assert {"agentcore|meta|a=b|c", "agentcore|meta|a|b=c"} <= set(tags)


def test_string_filters_run_inside_the_index() -> None:
    high = _record("/h", metadata={"priority": {"stringValue": "high"}})
    low = _record("/l", metadata={"priority": {"stringValue": "low"}})
    none = _record("/n")
    tagged = _record("/t", metadata={"tags": {"stringListValue": ["billing", "urgent"]}})
    records = [high, low, none, tagged]

    def found(*filters: MetadataFilter) -> set[str | None]:
        return _found(records, **{**SCOPE, "namespace_path": "/", "filters": list(filters)})

    assert found(MetadataFilter("priority", "EQUALS_TO", {"stringValue": "high"})) == {"/h"}
    assert found(MetadataFilter("priority", "EXISTS")) == {"/h", "/l"}
    assert found(MetadataFilter("priority", "NOT_EXISTS")) == {"/n", "/t"}
    contains = {"stringListValue": ["urgent", "billing"]}
    assert found(MetadataFilter("tags", "CONTAINS", contains)) == {"/t"}
    assert found(MetadataFilter("tags", "CONTAINS", {"stringListValue": ["urgent", "x"]})) == set()
    _, post = metadata_conditions([MetadataFilter("priority", "EXISTS")])
    assert post == []


def test_numbers_are_compared_after_the_index_narrows_to_records_with_the_key() -> None:
    records = [_record(f"/{n}", metadata={"score": {"numberValue": n}}) for n in (1, 5, 9)]
    records.append(_record("/none"))

    def found(operator: str, number: float) -> set[str | None]:
        expression = MetadataFilter("score", operator, {"numberValue": number})
        return _found(records, **{**SCOPE, "namespace_path": "/", "filters": [expression]})

    assert found("GREATER_THAN", 5) == {"/9"}
    assert found("GREATER_THAN_OR_EQUALS", 5) == {"/5", "/9"}
    assert found("LESS_THAN", 5) == {"/1"}
    assert found("LESS_THAN_OR_EQUALS", 5) == {"/1", "/5"}
    assert found("EQUALS_TO", 5) == {"/5"}


def test_the_system_times_are_filtered_inside_the_index() -> None:
    old = _record("/old", created="2025-01-01T00:00:00.000Z")
    new = _record("/new", created="2026-06-01T00:00:00.000Z")
    cut = datetime(2026, 1, 1, tzinfo=UTC).timestamp()

    def found(operator: str) -> set[str | None]:
        expression = MetadataFilter(CREATED_AT_KEY, operator, {"dateTimeValue": cut})
        return _found([old, new], **{**SCOPE, "namespace_path": "/", "filters": [expression]})

    assert found("BEFORE") == {"/old"}
    assert found("AFTER") == {"/new"}


def test_metadata_reads_back_in_its_wire_form() -> None:
    sent = {
        "s": {"stringValue": "x"},
        "l": {"stringListValue": ["a", "b"]},
        "n": {"numberValue": 2.5},
        "d": {"dateTimeValue": 1_767_225_600.25},
    }

    assert wire_metadata(stored_metadata(sent)) == sent
    assert wire_metadata({"plain": "memkit's own metadata"}) == {}


TEMPLATES = [
    Template("facts-0123456789", "/users/{actorId}/facts"),
    Template("sums-0123456789", "/summaries/{actorId}/{sessionId}"),
    Template("prefs-0123456789", "/strategies/{memoryStrategyId}/actors/{actorId}/"),
    Template("global-0123456789", "/global/knowledge"),
]


def test_a_record_belongs_to_the_actor_its_namespace_names() -> None:
    assert owner_of("/users/ada/facts", TEMPLATES) == "ada"
    assert owner_of("/users/org/ada/facts", TEMPLATES) == "org/ada"  # actor ids may hold `/`
    assert owner_of("/summaries/ada/s-1", TEMPLATES) == "ada"
    assert owner_of("/strategies/prefs-0123456789/actors/ada/", TEMPLATES) == "ada"
    # another strategy's id in its place, a shared namespace, no namespace: nobody's
    assert owner_of("/strategies/facts-0123456789/actors/ada/", TEMPLATES) is None
    assert owner_of("/global/knowledge", TEMPLATES) is None
    assert owner_of(None, TEMPLATES) is None


def test_a_retrieval_path_names_the_actor_at_its_level() -> None:
    assert actors_at("/users/bob", TEMPLATES) == {"bob"}
    assert "bob" in actors_at("/users/bob/facts", TEMPLATES)
    assert actors_at("/summaries/bob/", TEMPLATES) == {"bob"}
    assert actors_at("/users", TEMPLATES) == set()
    assert actors_at("/", TEMPLATES) == set()


def test_an_extraction_resolves_its_templates() -> None:
    assert TEMPLATES[1].resolve("ada", "s-1") == "/summaries/ada/s-1"
    assert TEMPLATES[2].resolve("ada", "s-1") == "/strategies/prefs-0123456789/actors/ada/"


# Named ids: a random id in a test's name differs between pytest-xdist's workers, which
# then refuse to run (each must collect the same tests).
@pytest.mark.parametrize(
    "record_id", [new_record_id(), derived_record_id("m", "token", "r1")], ids=["new", "derived"]
)
def test_record_ids_take_agentcore_s_form(record_id: str) -> None:
    assert RECORD_ID.fullmatch(record_id)
    assert 40 <= len(record_id) <= 50


def test_a_derived_id_is_the_same_for_the_same_parts_only() -> None:
    assert derived_record_id("m", "t", "r1") == derived_record_id("m", "t", "r1")
    assert derived_record_id("m", "t", "r1") != derived_record_id("m", "t", "r2")
    assert derived_record_id("m", "t1", "r") != derived_record_id("m", "t", "1r")
