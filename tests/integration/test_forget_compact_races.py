"""Forgetting, compaction and the policy phase under races and bad input: what the review of
issue 6 found, kept fixed.

A race is staged by running a client's request at the exact moment the lifecycle is between
its read and its write: the store's methods are wrapped on the instance the handler uses
(as in test_session_races).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import boto3
import pytest

from memkit.jobs.compact import Compaction, CompactOptions
from memkit.jobs.forget import Forgetting
from memkit.jobs.phases import Deadline
from memkit.jobs.policies import PolicyPhase
from memkit.llm.local import LocalModel
from memkit.models.domain import Owner
from memkit.models.lifecycle import ForgetPolicy, LifecyclePolicy, Listing
from memkit.store import keys
from tests.integration.memory_world import MemoryWorld
from tests.integration.test_forget_compact import (
    FORGET,
    _converse_model,
    days_ago,
    long_term,
    present,
    read,
    record,
    remember,
)

pytestmark = pytest.mark.integration

COMPACT = "/v1/long-term-memory/compact"
OLD = {"created_at": days_ago(400), "last_accessed": days_ago(400)}
DUP = "Ada takes her coffee black."


def _around(store: Any, method: str, action: Callable[[], Any], after: bool = False) -> list[bool]:
    """Run `action` once, the first time `store.<method>` is called: just before it runs, or
    with `after` just after it returned. The list holds True once it ran."""
    original = getattr(store, method)
    ran: list[bool] = []

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if not ran and not after:
            ran.append(True)
            action()
        result = original(*args, **kwargs)
        if not ran and after:
            ran.append(True)
            action()
        return result

    setattr(store, method, wrapped)
    return ran


def _patch(world: MemoryWorld, record_id: str, body: dict[str, Any]) -> Callable[[], None]:
    def action() -> None:
        response = world.api("PATCH", f"/v1/long-term-memory/{record_id}", body=body)
        assert response.status == 200, response.body

    return action


def _search(world: MemoryWorld, text: str) -> Callable[[], None]:
    """A client's search that shows the record: an access."""

    def action() -> None:
        response = world.api("POST", "/v1/long-term-memory/search", body={"text": text, "limit": 1})
        assert [m["id"] for m in response.body["memories"]] == ["p"]
        assert response.status == 200, response.body

    return action


def _partition(table: str, tenant: str, record_id: str) -> set[str]:
    """The sort keys of the items in a record's partition."""
    found = boto3.client("dynamodb", region_name="us-east-1").query(
        TableName=table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.record_pk(tenant, record_id)}},
        ConsistentRead=True,
    )
    return {item["SK"]["S"] for item in found["Items"]}


def _table(world: MemoryWorld) -> str:
    return str(world.store.table.items.base.Meta.table_name)


# -- forgetting: a record changed after it was listed stays ----------------------------------

CHANGES: list[tuple[str, Callable[[MemoryWorld], Callable[[], None]]]] = [
    ("pinned", lambda w: _patch(w, "p", {"pinned": True})),
    ("rewritten", lambda w: _patch(w, "p", {"text": "Ada now takes her coffee with milk."})),
    ("accessed", lambda w: _search(w, "Ada plays the cello on Sundays.")),
]


# Forget reads the records back right before deleting them: a change before that read, or
# after it (before the deletes).
@pytest.mark.parametrize("after_read", [False, True], ids=["before-read", "after-read"])
@pytest.mark.parametrize(("change", "make"), CHANGES, ids=[c[0] for c in CHANGES])
def test_forget_keeps_a_record_changed_after_it_was_listed(
    world: MemoryWorld, after_read: bool, change: str, make: Callable[[MemoryWorld], Any]
) -> None:
    remember(
        world,
        record("p", "Ada plays the cello on Sundays.", **OLD),
        record("q", "Bob sails to Porto every June.", **OLD),
    )
    ran = _around(world.store.records, "get_records", make(world), after=after_read)

    response = world.api(
        "POST", FORGET, query={"dry_run": "false"}, body={"policy": {"max_inactive_days": 30}}
    )

    assert ran
    assert response.status == 200, response.body
    assert response.body["deleted_ids"] == ["q"]
    assert response.body["deleted"] == 1
    assert present(world, "p", "q") == {"p"}


def test_forget_keeps_a_record_edited_after_its_version_was_read(world: MemoryWorld) -> None:
    remember(world, record("p", **OLD), record("q", **OLD))
    _around(
        world.store.records, "get_records", _patch(world, "p", {"topics": ["kept"]}), after=True
    )

    response = world.api(
        "POST", FORGET, query={"dry_run": "false"}, body={"policy": {"max_age_days": 30}}
    )

    assert response.body["deleted_ids"] == ["q"]
    assert read(world, "p")["topics"] == ["kept"]


def test_forget_deletes_the_index_state_only_of_records_it_deleted(world: MemoryWorld) -> None:
    remember(world, record("p", **OLD), record("q", **OLD))
    _around(world.store.records, "get_records", _patch(world, "p", {"pinned": True}), after=True)
    world.settle()

    world.api("POST", FORGET, query={"dry_run": "false"}, body={"policy": {"max_age_days": 30}})

    assert _partition(_table(world), "default", "q") == set()
    assert keys.INDEX_STATE_SK in _partition(_table(world), "default", "p")


# -- compaction: a duplicate or keeper changed meanwhile ---------------------------------------


def _duplicates(world: MemoryWorld) -> None:
    remember(
        world,
        record("keep", DUP, created_at=days_ago(9), topics=["drinks"]),
        record("dup", DUP, created_at=days_ago(1), topics=["coffee"]),
    )


@pytest.mark.parametrize(
    "body", [{"pinned": True}, {"topics": ["rewritten"]}], ids=["pinned", "rewritten"]
)
def test_compaction_keeps_a_duplicate_changed_before_its_delete(
    world: MemoryWorld, body: dict[str, Any]
) -> None:
    _duplicates(world)
    ran = _around(world.store.records, "replace_record", _patch(world, "dup", body), after=True)

    response = world.api("POST", COMPACT, query={"dry_run": "false"})

    assert ran
    assert response.status == 200, response.body
    assert response.body["merged"] == []
    assert present(world, "keep", "dup") == {"keep", "dup"}
    assert {k: read(world, "dup")[k] for k in body} == body


def test_compaction_merges_into_the_keeper_as_it_is_now(world: MemoryWorld) -> None:
    _duplicates(world)
    # After the window's read, before the merge: a client edits the keeper's topics.
    _around(
        world.store.records,
        "get_records",
        _patch(world, "keep", {"topics": ["edited"]}),
        after=True,
    )

    response = world.api("POST", COMPACT, query={"dry_run": "false"})

    assert response.body["merged"] == [{"kept": "keep", "removed": ["dup"], "reason": "exact"}]
    assert sorted(read(world, "keep")["topics"]) == ["coffee", "edited"]


def test_compaction_retries_a_merge_that_lost_to_an_edit(world: MemoryWorld) -> None:
    _duplicates(world)
    # Between the merge's read of the keeper and its write.
    _around(world.store.records, "replace_record", _patch(world, "keep", {"entities": ["Ada"]}))

    response = world.api("POST", COMPACT, query={"dry_run": "false"})

    assert response.body["merged"] == [{"kept": "keep", "removed": ["dup"], "reason": "exact"}]
    kept = read(world, "keep")
    assert (sorted(kept["topics"]), kept["entities"]) == (["coffee", "drinks"], ["Ada"])


def test_chained_merges_into_one_keeper_keep_every_union(world: MemoryWorld) -> None:
    remember(
        world,
        record("tea", "Ada likes green tea.", created_at=days_ago(5), topics=["x"]),
        record("tea-copy", "Ada likes green tea.", created_at=days_ago(4), topics=["y"]),
        record("tea2", "Ada really likes green tea.", created_at=days_ago(1), topics=["z"]),
    )
    model = _converse_model(["yes", "yes"])
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    result, _ = compaction.compact(Owner("default"), CompactOptions(dry_run=False))

    assert [(m.kept, m.removed, m.reason) for m in result.merged] == [
        ("tea", ["tea-copy"], "exact"),
        ("tea", ["tea2"], "judged"),
    ]
    assert sorted(read(world, "tea")["topics"]) == ["x", "y", "z"]


# -- an empty memory_type_allowlist ----------------------------------------------------------


def test_an_empty_allowlist_is_a_422_on_forget_and_on_a_policy(world: MemoryWorld) -> None:
    remember(world, record("old", **OLD))
    empty = {"max_age_days": 1, "memory_type_allowlist": []}

    forgot = world.api("POST", FORGET, query={"dry_run": "false"}, body={"policy": empty})
    put = world.api("PUT", "/v1/namespaces/work/lifecycle", body={"forget": empty})

    assert (forgot.status, put.status) == (422, 422)
    assert "policy.memory_type_allowlist" in {e["field"] for e in forgot.body["errors"]}
    assert "forget.memory_type_allowlist" in {e["field"] for e in put.body["errors"]}
    assert world.api("GET", "/v1/namespaces/work/lifecycle").status == 404
    assert present(world, "old") == {"old"}


def test_a_listing_of_no_types_lists_nothing(world: MemoryWorld) -> None:
    remember(world, record("old", **OLD))

    listing = Listing(tenant="default", namespace="default", memory_types=frozenset())

    assert list(world.store.records.list_records(listing)) == []


def test_a_policy_that_fails_does_not_stop_the_next_namespaces(world: MemoryWorld) -> None:
    remember(world, record("w-old", namespace="work", **OLD))
    # A policy stored before empty allowlists were refused: it can no longer be applied.
    broken = LifecyclePolicy.model_construct(
        forget=ForgetPolicy.model_construct(max_age_days=1, memory_type_allowlist=[]),
        compact=False,
    )
    world.store.policies.put_lifecycle_policy("default", "aaa", broken, days_ago(1))
    response = world.api(
        "PUT", "/v1/namespaces/work/lifecycle", body={"forget": {"max_age_days": 30}}
    )
    assert response.status == 200, response.body
    phase = PolicyPhase(
        world.store.policies,
        Forgetting(world.store.records),
        Compaction(world.store.records, long_term(world), LocalModel),
    )

    outcome = phase.run(None, Deadline.after(300))

    assert outcome.done
    assert outcome.counts["LifecyclePolicyFailures"] == 1
    assert outcome.counts["LifecycleRecordsForgotten"] == 1
    assert present(world, "w-old") == set()


# -- the indexer never leaves the index state of a deleted record ------------------------------


def test_a_replayed_insert_of_a_deleted_record_leaves_no_index_state(world: MemoryWorld) -> None:
    remember(world, record("gone"))
    inserts = world.last_batch
    assert keys.INDEX_STATE_SK in _partition(_table(world), "default", "gone")
    # The record item alone goes (its state stays, as when a deletion raced the indexer).
    boto3.client("dynamodb", region_name="us-east-1").delete_item(
        TableName=_table(world),
        Key={"PK": {"S": keys.record_pk("default", "gone")}, "SK": {"S": keys.RECORD_SK}},
    )

    world.index(inserts)

    assert _partition(_table(world), "default", "gone") == set()


def test_an_insert_indexed_after_its_record_was_deleted_leaves_nothing(world: MemoryWorld) -> None:
    response = world.api(
        "POST", "/v1/long-term-memory/", body={"memories": [record("late"), record("stays")]}
    )
    assert response.status == 200, response.body
    inserts = world.read_stream()
    query = {"memory_ids": "late", "erase": "true"}  # a plain delete keeps the history
    assert world.api("DELETE", "/v1/long-term-memory", query=query).status == 200

    world.index(inserts)

    assert _partition(_table(world), "default", "late") == set()
    assert read(world, "stays")["indexing"] == "indexed"


def test_an_insert_indexed_after_its_record_was_deleted_leaves_only_its_history(
    world: MemoryWorld,
) -> None:
    response = world.api("POST", "/v1/long-term-memory/", body={"memories": [record("late")]})
    assert response.status == 200, response.body
    inserts = world.read_stream()
    assert world.api("DELETE", "/v1/long-term-memory", query={"memory_ids": "late"}).status == 200

    world.index(inserts)

    world.settle()  # the delete's own changes

    kept = _partition(_table(world), "default", "late")
    assert {sk.split("#")[0] for sk in kept} == {"V", "DELETED"}  # no record, no index state
    assert world.index_ids() == set()
