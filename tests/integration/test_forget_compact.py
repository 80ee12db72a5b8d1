"""Forgetting, compaction and namespace lifecycle policies through the real API handler and
indexer on moto (tests/integration/memory_world), and the cleanup run's PolicyPhase."""

from __future__ import annotations

import itertools
import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from memkit.agentcore.mapping import record_tags
from memkit.jobs.compact import Compaction, CompactOptions
from memkit.jobs.forget import Forgetting
from memkit.jobs.phases import Deadline
from memkit.jobs.policies import PolicyPhase
from memkit.llm.local import LocalModel
from memkit.models.domain import Owner
from memkit.service.long_term import LongTermService
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

FORGET = "/v1/long-term-memory/forget"
COMPACT = "/v1/long-term-memory/compact"


def days_ago(days: float) -> str:
    return (datetime.now(UTC) - timedelta(days=days)).isoformat()


def record(record_id: str, text: str | None = None, **fields: Any) -> dict[str, Any]:
    return {"id": record_id, "text": text or f"Fact number {record_id}.", "user_id": "ada"} | fields


def remember(world: MemoryWorld, *records: dict[str, Any]) -> None:
    response = world.api(
        "POST", "/v1/long-term-memory/", body={"memories": list(records), "deduplicate": False}
    )
    assert response.status == 200, response.body
    world.settle()


def present(world: MemoryWorld, *record_ids: str) -> set[str]:
    """Those of `record_ids` the table still holds."""
    return {
        rid for rid in record_ids if world.api("GET", f"/v1/long-term-memory/{rid}").status == 200
    }


def read(world: MemoryWorld, record_id: str) -> dict[str, Any]:
    response = world.api("GET", f"/v1/long-term-memory/{record_id}")
    assert response.status == 200, response.body
    return dict(response.body)


def forget(world: MemoryWorld, policy: dict[str, Any], **query: Any) -> Any:
    return world.api("POST", FORGET, query=query, body={"policy": policy})


def long_term(world: MemoryWorld) -> LongTermService:
    store = world.store
    return LongTermService(
        store.records, store.sessions, lambda: world.vector_index, lambda: world.embedder
    )


# -- forgetting (AMS) ------------------------------------------------------------------------


def test_forget_is_a_dry_run_by_default_and_lists_what_it_would_delete(world: MemoryWorld) -> None:
    remember(world, record("old", created_at=days_ago(40)), record("new", created_at=days_ago(2)))

    response = forget(world, {"max_age_days": 30})

    assert response.status == 200, response.body
    assert response.body == {"scanned": 2, "deleted": 1, "deleted_ids": ["old"], "dry_run": True}
    assert present(world, "old", "new") == {"old", "new"}


def test_forget_deletes_the_records_and_then_their_vectors(world: MemoryWorld) -> None:
    remember(world, record("old", created_at=days_ago(40)), record("new", created_at=days_ago(2)))
    assert {"old", "new"} <= world.index_ids()

    response = forget(world, {"max_age_days": 30}, dry_run="false")
    world.settle()

    assert response.body == {"scanned": 2, "deleted": 1, "deleted_ids": ["old"], "dry_run": False}
    assert present(world, "old", "new") == {"new"}
    assert "old" not in world.index_ids()
    assert "new" in world.index_ids()


def test_a_forgotten_record_takes_its_history_with_it(world: MemoryWorld) -> None:
    # Given an old record edited (a version kept) and an old one a newer fact superseded
    remember(
        world,
        record("old", created_at=days_ago(40)),
        record("paris", "Ada lives in Paris", created_at=days_ago(40), key="home"),
    )
    assert world.api("PATCH", "/v1/long-term-memory/old", body={"pinned": False}).status == 200
    remember(world, record("berlin", "Ada lives in Berlin", key="home"))
    assert read(world, "paris")["superseded_by"] == "berlin"

    # When a policy forgets what is older than 30 days
    response = forget(world, {"max_age_days": 30}, dry_run="false")
    world.settle()

    # Then both are gone with their histories: nothing is left to read or restore
    assert sorted(response.body["deleted_ids"]) == ["old", "paris"]
    for record_id in ("old", "paris"):
        assert world.api("GET", f"/v1/long-term-memory/{record_id}/history").status == 404
    assert present(world, "old", "paris", "berlin") == {"berlin"}


def test_forget_by_inactivity_reads_the_last_access(world: MemoryWorld) -> None:
    remember(
        world,
        record("idle", created_at=days_ago(90), last_accessed=days_ago(60)),
        record("read", created_at=days_ago(90), last_accessed=days_ago(1)),
    )

    response = forget(world, {"max_inactive_days": 30, "max_age_days": 30.5}, dry_run="false")

    assert response.body["deleted_ids"] == ["idle"]
    assert present(world, "idle", "read") == {"read"}


def test_forget_budget_keeps_the_most_recent_of_the_user(world: MemoryWorld) -> None:
    remember(
        world,
        *[record(f"r{age}", created_at=days_ago(age)) for age in (1, 5, 9, 20)],
        record("bob1", user_id="bob", created_at=days_ago(30)),
    )

    response = forget(world, {"budget": 2}, user_id="ada", dry_run="false")

    assert response.body["scanned"] == 4
    assert sorted(response.body["deleted_ids"]) == ["r20", "r9"]
    assert present(world, "r1", "r5", "r9", "r20", "bob1") == {"r1", "r5", "bob1"}


def test_forget_is_scoped_to_the_namespace_and_session(world: MemoryWorld) -> None:
    remember(
        world,
        record("s1", session_id="chat-1", created_at=days_ago(40)),
        record("s2", session_id="chat-2", created_at=days_ago(40)),
        record("other-ns", namespace="work", created_at=days_ago(40)),
    )

    response = forget(world, {"max_age_days": 1}, session_id="chat-1", dry_run="false")

    assert response.body["deleted_ids"] == ["s1"]
    assert present(world, "s1", "s2", "other-ns") == {"s2", "other-ns"}


def test_limit_bounds_how_many_records_are_scanned(world: MemoryWorld) -> None:
    remember(world, *[record(f"r{i}", created_at=days_ago(40 + i)) for i in range(5)])

    response = forget(world, {"max_age_days": 30}, limit=3)

    assert response.body["scanned"] == 3
    assert len(response.body["deleted_ids"]) == 3


PINNED_POLICIES = [
    {"max_age_days": 1},
    {"max_inactive_days": 1},
    {"max_age_days": 1, "max_inactive_days": 1},
    {"budget": 0},
    {"memory_type_allowlist": ["semantic"], "max_age_days": 0},
]


@pytest.mark.parametrize("policy", PINNED_POLICIES)
def test_a_pinned_record_survives_every_forget_policy(
    world: MemoryWorld, policy: dict[str, Any]
) -> None:
    old = {"created_at": days_ago(400), "last_accessed": days_ago(400)}
    remember(
        world,
        record("pinned", pinned=True, **old),
        record("named", **old),
        record("plain", **old),
    )

    response = world.api(
        "POST",
        FORGET,
        query={"dry_run": "false"},
        body={"policy": policy, "pinned_ids": ["named"]},
    )

    assert response.body["deleted_ids"] == ["plain"]
    assert present(world, "pinned", "named", "plain") == {"pinned", "named"}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"policy": {"max_age_days": -1}}, "policy.max_age_days"),
        ({"policy": {"budget": "many"}}, "policy.budget"),
        ({"policy": {"memory_type_allowlist": ["facts"]}}, "policy.memory_type_allowlist.0"),
        ({"policy": {}, "pinned_ids": [""]}, "pinned_ids.0"),
        ({}, "policy"),
    ],
)
def test_a_bad_forget_request_is_a_422_naming_the_field(
    world: MemoryWorld, body: dict[str, Any], field: str
) -> None:
    remember(world, record("kept", created_at=days_ago(400)))

    response = world.api("POST", FORGET, query={"dry_run": "false"}, body=body)

    assert response.status == 422, response.body
    assert field in {e["field"] for e in response.body["errors"]}
    assert present(world, "kept") == {"kept"}


def test_dry_run_given_twice_must_agree(world: MemoryWorld) -> None:
    remember(world, record("kept", created_at=days_ago(400)))

    response = world.api(
        "POST",
        FORGET,
        query={"dry_run": "false"},
        body={"policy": {"max_age_days": 1}, "dry_run": True},
    )

    assert response.status == 422
    assert response.body["errors"] == [{"field": "dry_run", "reason": "query and body differ"}]
    assert present(world, "kept") == {"kept"}


# -- compaction ------------------------------------------------------------------------------


def test_compaction_merges_exact_duplicates_into_the_oldest(world: MemoryWorld) -> None:
    text = "Ada takes her coffee black."
    remember(
        world,
        record("mid", text, created_at=days_ago(5), topics=["coffee"], extracted_from=["m2"]),
        record("first", text, created_at=days_ago(9), topics=["drinks"], entities=["Ada"]),
        record("last", text, created_at=days_ago(1), entities=["coffee"], extracted_from=["m7"]),
        record("bob", text, user_id="bob", created_at=days_ago(3)),
        record("other", "Ada lives in Lisbon.", created_at=days_ago(2)),
    )

    response = world.api("POST", COMPACT, query={"dry_run": "false"})
    world.settle()

    assert response.status == 200, response.body
    assert response.body["merged"] == [
        {"kept": "first", "removed": ["mid", "last"], "reason": "exact"}
    ]
    kept = read(world, "first")
    assert sorted(kept["topics"]) == ["coffee", "drinks"]
    assert sorted(kept["entities"]) == ["Ada", "coffee"]
    assert sorted(kept["extracted_from"]) == ["m2", "m7"]
    assert present(world, "first", "mid", "last", "bob", "other") == {"first", "bob", "other"}
    assert not {"mid", "last"} & world.index_ids()


def two_copies(world: MemoryWorld) -> None:
    """Records a (older, topic x) and b (topic y) that say the same of the same user."""
    text = "Ada takes her coffee black."
    remember(
        world,
        record("a", text, created_at=days_ago(5), topics=["x"]),
        record("b", text, created_at=days_ago(1), topics=["y"]),
    )


def test_a_compaction_without_dry_run_compacts_as_the_reference_server_does(
    world: MemoryWorld,
) -> None:
    # AMS's compact route has no dry run: a client that sends none expects the merge.
    two_copies(world)

    response = world.api("POST", COMPACT)
    world.settle()

    assert response.status == 200, response.body
    assert response.body["dry_run"] is False
    assert response.body["merged"] == [{"kept": "a", "removed": ["b"], "reason": "exact"}]
    assert present(world, "a", "b") == {"a"}
    assert sorted(read(world, "a")["topics"]) == ["x", "y"]
    assert "b" not in world.index_ids()


@pytest.mark.parametrize(
    "request_args",
    [{"query": {"dry_run": "true"}}, {"body": {"dry_run": True}}],
    ids=["query", "body"],
)
def test_a_compaction_dry_run_reports_and_changes_nothing(
    world: MemoryWorld, request_args: dict[str, Any]
) -> None:
    two_copies(world)

    response = world.api("POST", COMPACT, **request_args)

    assert response.status == 200, response.body
    assert response.body["dry_run"] is True
    assert response.body["merged"] == [{"kept": "a", "removed": ["b"], "reason": "exact"}]
    assert present(world, "a", "b") == {"a", "b"}
    assert read(world, "a")["topics"] == ["x"]


def test_a_pinned_duplicate_is_kept_and_the_others_merged_into_it(world: MemoryWorld) -> None:
    text = "Ada takes her coffee black."
    remember(
        world,
        record("oldest", text, created_at=days_ago(9)),
        record("pinned", text, created_at=days_ago(5), pinned=True),
        record("pinned-too", text, created_at=days_ago(3), pinned=True),
        record("newest", text, created_at=days_ago(1)),
    )

    response = world.api("POST", COMPACT, query={"dry_run": "false"})

    assert response.body["merged"] == [
        {"kept": "pinned", "removed": ["oldest", "newest"], "reason": "exact"}
    ]
    assert present(world, "oldest", "pinned", "pinned-too", "newest") == {"pinned", "pinned-too"}


def test_near_duplicates_are_flagged_not_merged_with_the_local_model(world: MemoryWorld) -> None:
    remember(
        world,
        record("tea", "Ada likes green tea.", created_at=days_ago(3)),
        record("tea2", "Ada really likes green tea.", created_at=days_ago(1)),
        record("cello", "Ada plays the cello on Sundays.", created_at=days_ago(2)),
    )

    response = world.api("POST", COMPACT, query={"dry_run": "false"})

    assert response.body["merged"] == []
    [pair] = response.body["flagged"]
    assert (pair["a"], pair["b"]) == ("tea", "tea2")
    assert 0 <= pair["distance"] < 0.15
    assert present(world, "tea", "tea2", "cello") == {"tea", "tea2", "cello"}


def test_agentcore_records_are_compacted_only_within_their_namespace(world: MemoryWorld) -> None:
    # Given near duplicates of one actor in a memory's namespace: two in one AgentCore
    # namespace, one in another (docs/agentcore.md "Record mapping": tags in topics)
    memory = "agent-0123456789"

    def tags(namespace: str) -> list[str]:
        return list(record_tags(namespace, "facts-0123456789", {}, None))

    remember(
        world,
        record("tea", "Ada likes green tea.", namespace=memory, topics=tags("/users/ada/facts")),
        record(
            "tea2", "Ada really likes green tea.", namespace=memory, topics=tags("/users/ada/facts")
        ),
        record(
            "tea3", "Ada likes green tea a lot.", namespace=memory, topics=tags("/users/ada/prefs")
        ),
    )

    response = world.api("POST", COMPACT, query={"namespace": memory, "dry_run": "false"})

    # Then only the pair of one namespace is a near duplicate
    assert response.status == 200, response.body
    assert [(p["a"], p["b"]) for p in response.body["flagged"]] == [("tea", "tea2")]


def test_compaction_of_one_user_leaves_the_others(world: MemoryWorld) -> None:
    text = "Likes the window seat."
    remember(
        world,
        record("a1", text, created_at=days_ago(2)),
        record("a2", text, created_at=days_ago(1)),
        record("b1", text, user_id="bob", created_at=days_ago(2)),
        record("b2", text, user_id="bob", created_at=days_ago(1)),
    )

    response = world.api("POST", COMPACT, query={"dry_run": "false", "user_id": "bob"})

    assert response.body["merged"] == [{"kept": "b1", "removed": ["b2"], "reason": "exact"}]
    assert present(world, "a1", "a2", "b1", "b2") == {"a1", "a2", "b1"}


def test_compaction_pages_through_the_namespace_with_a_cursor(world: MemoryWorld) -> None:
    text = "Likes the window seat."
    users = ["ann", "bob", "cat"]
    remember(
        world,
        *[
            record(f"{u}{i}", text, user_id=u, created_at=days_ago(5 - i))
            for u in users
            for i in range(2)
        ],
    )

    pages, cursor = [], None
    while True:
        query = {"limit": 3, "near_duplicates": "false", "dry_run": "false"}
        response = world.api("POST", COMPACT, query=query | ({"cursor": cursor} if cursor else {}))
        assert response.status == 200, response.body
        pages.append(response.body)
        cursor = response.body["next_cursor"]
        if cursor is None:
            break

    assert [p["scanned"] for p in pages] == [2, 2, 2]
    kept = {m["kept"] for p in pages for m in p["merged"]}
    assert kept == {"ann0", "bob0", "cat0"}
    assert present(world, *[f"{u}{i}" for u in users for i in range(2)]) == kept


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ({"limit": 0}, "limit"),
        ({"limit": 5000}, "limit"),
        ({"distance_threshold": -0.1}, "distance_threshold"),
        ({"distance_threshold": "inf"}, "distance_threshold"),
        ({"dry_run": "perhaps"}, "dry_run"),
    ],
)
def test_a_bad_compact_request_is_a_422_naming_the_field(
    world: MemoryWorld, query: dict[str, Any], field: str
) -> None:
    response = world.api("POST", COMPACT, query=query)

    assert response.status == 422, response.body
    assert field in {e["field"] for e in response.body["errors"]}


@pytest.mark.parametrize(
    ("body", "query", "field"),
    [
        ({"dry_run": True}, {"dry_run": "false"}, "dry_run"),
        ({"dry_run": "perhaps"}, {}, "dry_run"),
        ({"dryrun": True}, {}, "dryrun"),
        ([True], {}, "body"),
    ],
    ids=["disagreeing", "not-a-boolean", "unknown-field", "not-an-object"],
)
def test_a_bad_compact_body_is_a_422_and_nothing_is_merged(
    world: MemoryWorld, body: Any, query: dict[str, Any], field: str
) -> None:
    two_copies(world)

    response = world.api("POST", COMPACT, query=query, body=body)

    assert response.status == 422, response.body
    assert field in {e["field"] for e in response.body["errors"]}
    assert present(world, "a", "b") == {"a", "b"}


def test_a_cursor_of_another_scope_is_refused(world: MemoryWorld) -> None:
    remember(world, *[record(f"r{i}", user_id=f"u{i}") for i in range(3)])
    cursor = world.api("POST", COMPACT, query={"limit": 1}).body["next_cursor"]

    response = world.api("POST", COMPACT, query={"cursor": cursor, "user_id": "zed"})
    garbage = world.api("POST", COMPACT, query={"cursor": "not-a-cursor"})

    assert cursor is not None
    assert (response.status, garbage.status) == (400, 400)
    assert response.body["errors"][0]["field"] == "cursor"


# -- near duplicates judged by Bedrock Converse (botocore's Stubber, real shapes) -------------


def _converse_model(answers: list[str]) -> Any:
    from memkit.llm.bedrock import ConverseModel

    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    stubber = Stubber(client)
    for answer in answers:
        stubber.add_response(
            "converse",
            {
                "output": {"message": {"role": "assistant", "content": [{"text": answer}]}},
                "stopReason": "end_turn",
                "usage": {"inputTokens": 60, "outputTokens": 1, "totalTokens": 61},
                "metrics": {"latencyMs": 120},
            },
        )
    stubber.activate()
    model = ConverseModel(client, "amazon.nova-lite-v1:0", sleep=lambda _: None)
    model._stubber = stubber  # type: ignore[attr-defined]  # kept alive with the model
    return model


def _near_pair(world: MemoryWorld, **tea2: Any) -> None:
    remember(
        world,
        record("tea", "Ada likes green tea.", created_at=days_ago(3), topics=["tea"]),
        record(
            "tea2",
            "Ada really likes green tea.",
            created_at=days_ago(1),
            topics=["drinks"],
            extracted_from=["m9"],
            **tea2,
        ),
    )


def test_near_duplicates_are_merged_when_the_model_says_they_are_the_same(
    world: MemoryWorld,
) -> None:
    _near_pair(world)
    model = _converse_model(["yes"])
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    result, after = compaction.compact(Owner("default"), CompactOptions(dry_run=False))
    world.settle()

    assert [m.model_dump() for m in result.merged] == [
        {"kept": "tea", "removed": ["tea2"], "reason": "judged"}
    ]
    assert (result.flagged, after) == ([], None)
    kept = read(world, "tea")
    assert (sorted(kept["topics"]), kept["extracted_from"]) == (["drinks", "tea"], ["m9"])
    assert present(world, "tea", "tea2") == {"tea"}
    assert "tea2" not in world.index_ids()
    model._stubber.assert_no_pending_responses()


def test_near_duplicates_the_model_tells_apart_stay_and_are_not_flagged(
    world: MemoryWorld,
) -> None:
    _near_pair(world)
    model = _converse_model(["no"])
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    result, _ = compaction.compact(Owner("default"), CompactOptions(dry_run=False))

    assert (result.merged, result.flagged) == ([], [])
    assert present(world, "tea", "tea2") == {"tea", "tea2"}


def test_a_model_that_fails_leaves_near_duplicates_flagged(world: MemoryWorld) -> None:
    from memkit.llm.bedrock import ConverseModel

    _near_pair(world)
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    model = ConverseModel(client, "amazon.nova-lite-v1:0", max_attempts=1, sleep=lambda _: None)
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    with Stubber(client) as stub:
        stub.add_client_error("converse", "AccessDeniedException", "not allowed", 403)
        result, _ = compaction.compact(Owner("default"), CompactOptions(dry_run=False))

    assert result.merged == []
    assert [(p.a, p.b) for p in result.flagged] == [("tea", "tea2")]
    assert present(world, "tea", "tea2") == {"tea", "tea2"}


def test_near_duplicates_past_the_judgement_budget_are_flagged(world: MemoryWorld) -> None:
    _near_pair(world)
    remember(
        world,
        record("seat", "Ada prefers the window seat.", created_at=days_ago(5)),
        record("seat2", "Ada prefers a window seat.", created_at=days_ago(4)),
    )
    model = _converse_model(["yes"])
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    result, _ = compaction.compact(Owner("default"), CompactOptions(dry_run=False, judgements=1))

    assert len(result.merged) == 1
    assert len(result.flagged) == 1
    merged, flagged = result.merged[0], result.flagged[0]
    assert {merged.kept, *merged.removed} | {flagged.a, flagged.b} == {
        "tea",
        "tea2",
        "seat",
        "seat2",
    }


def test_a_pinned_near_duplicate_is_never_the_one_merged_away(world: MemoryWorld) -> None:
    _near_pair(world, pinned=True)
    model = _converse_model(["yes"])
    compaction = Compaction(world.store.records, long_term(world), lambda: model)

    result, _ = compaction.compact(Owner("default"), CompactOptions(dry_run=False))

    assert [m.model_dump() for m in result.merged] == [
        {"kept": "tea2", "removed": ["tea"], "reason": "judged"}
    ]
    assert present(world, "tea", "tea2") == {"tea2"}


# -- namespace policies ----------------------------------------------------------------------

POLICY = "/v1/namespaces/work/lifecycle"


def test_a_namespace_policy_is_put_read_and_deleted(world: MemoryWorld) -> None:
    body = {"forget": {"max_age_days": 30.5, "budget": 100}, "compact": True}

    put = world.api("PUT", POLICY, body=body)
    got = world.api("GET", POLICY)
    deleted = world.api("DELETE", POLICY)
    gone = world.api("GET", POLICY)
    again = world.api("DELETE", POLICY)

    assert put.status == 200, put.body
    assert got.body == put.body
    assert got.body["namespace"] == "work"
    assert got.body["forget"] == {
        "max_age_days": 30.5,
        "max_inactive_days": None,
        "budget": 100,
        "memory_type_allowlist": None,
    }
    assert got.body["compact"] is True
    assert deleted.body == {"status": "ok"}
    assert (gone.status, again.status) == (404, 404)


def test_a_bad_namespace_policy_is_refused_and_nothing_stored(world: MemoryWorld) -> None:
    response = world.api("PUT", POLICY, body={"forget": {"max_inactive_days": -3}})

    assert response.status == 422
    assert "forget.max_inactive_days" in {e["field"] for e in response.body["errors"]}
    assert world.api("GET", POLICY).status == 404


# -- the scheduled run ----------------------------------------------------------------------


def _phase(world: MemoryWorld, **windows: int) -> PolicyPhase:
    return PolicyPhase(
        world.store.policies,
        Forgetting(world.store.records),
        Compaction(world.store.records, long_term(world), LocalModel),
        **windows,
    )


def _policy(world: MemoryWorld, namespace: str, body: dict[str, Any]) -> None:
    response = world.api("PUT", f"/v1/namespaces/{namespace}/lifecycle", body=body)
    assert response.status == 200, response.body


def test_the_policy_phase_forgets_and_compacts_each_namespace(world: MemoryWorld) -> None:
    dup = "Ada takes her coffee black."
    remember(
        world,
        record("w-old", namespace="work", created_at=days_ago(40)),
        record("w-new", namespace="work", created_at=days_ago(2)),
        record("w-pinned", namespace="work", created_at=days_ago(400), pinned=True),
        record("h-dup1", dup, namespace="home", created_at=days_ago(4)),
        record("h-dup2", dup, namespace="home", created_at=days_ago(3)),
        record("h-old", namespace="home", created_at=days_ago(40)),
        record("free", namespace="free", created_at=days_ago(400)),
    )
    _policy(world, "work", {"forget": {"max_age_days": 30}})
    _policy(world, "home", {"compact": True})

    outcome = _phase(world).run(None, Deadline.after(300))

    assert outcome.done, outcome
    assert outcome.counts["LifecyclePolicies"] == 2
    assert outcome.counts["LifecycleRecordsForgotten"] == 1
    assert outcome.counts["LifecycleRecordsMerged"] == 1
    all_ids = ("w-old", "w-new", "w-pinned", "h-dup1", "h-dup2", "h-old", "free")
    assert present(world, *all_ids) == {"w-new", "w-pinned", "h-dup1", "h-old", "free"}


def test_the_policy_budget_counts_each_user(world: MemoryWorld) -> None:
    remember(
        world,
        *[
            record(f"{u}{age}", namespace="work", user_id=u, created_at=days_ago(age))
            for u in ("ann", "bob")
            for age in (1, 2, 3)
        ],
    )
    _policy(world, "work", {"forget": {"budget": 2}})

    outcome = _phase(world, forget_window=4).run(None, Deadline.after(300))

    assert outcome.done
    ids = [f"{u}{age}" for u in ("ann", "bob") for age in (1, 2, 3)]
    assert present(world, *ids) == {"ann1", "ann2", "bob1", "bob2"}


def test_a_policy_run_that_hits_its_deadline_resumes_where_it_stopped(world: MemoryWorld) -> None:
    remember(
        world,
        *[
            record(f"{u}-old", namespace="work", user_id=u, created_at=days_ago(40))
            for u in "abcdef"
        ],
    )
    _policy(world, "work", {"forget": {"max_age_days": 30}})
    ticks = itertools.count()
    # Deadline checks: one before the first window (of two users), one before the second.
    deadline = Deadline(at=1.5, clock=lambda: float(next(ticks)))

    first = _phase(world, forget_window=2).run(None, deadline)
    left_after_first = present(world, *[f"{u}-old" for u in "abcdef"])
    second = _phase(world, forget_window=2).run(first.cursor, Deadline.after(300))

    assert not first.done
    assert first.cursor is not None
    assert first.counts["LifecycleRecordsForgotten"] == 4
    assert left_after_first == {"e-old", "f-old"}
    assert second.done
    assert second.counts["LifecycleRecordsExamined"] == 2  # nothing read twice
    assert present(world, *[f"{u}-old" for u in "abcdef"]) == set()


def test_a_compaction_stopped_by_the_deadline_resumes_after_the_last_record_searched(
    world: MemoryWorld,
) -> None:
    dup = "Ada takes her coffee black."
    remember(
        world,
        record("a", "Ada plays the cello on Sundays.", namespace="home", created_at=days_ago(9)),
        record("b", "Ada lives in Lisbon.", namespace="home", created_at=days_ago(8)),
        record("c", dup, namespace="home", created_at=days_ago(7)),
        record("d", dup, namespace="home", created_at=days_ago(6)),
    )
    _policy(world, "home", {"compact": True})
    ticks = itertools.count()
    # Checks: before the window, then before each record's search; the third one stops it.
    deadline = Deadline(at=1.5, clock=lambda: float(next(ticks)))

    first = _phase(world).run(None, deadline)
    second = _phase(world).run(first.cursor, Deadline.after(300))

    assert not first.done
    assert first.counts["LifecycleRecordsMerged"] == 1  # exact duplicates: the whole window
    assert second.done
    assert second.counts["LifecycleRecordsExamined"] == 2  # b and c: a was searched already
    assert present(world, "a", "b", "c", "d") == {"a", "b", "c"}


def test_a_deleted_policy_is_no_longer_applied(world: MemoryWorld) -> None:
    remember(world, record("old", namespace="work", created_at=days_ago(40)))
    _policy(world, "work", {"forget": {"max_age_days": 30}})
    world.api("DELETE", POLICY)

    outcome = _phase(world).run(None, Deadline.after(300))

    assert outcome.done
    assert outcome.counts["LifecyclePolicies"] == 0
    assert present(world, "old") == {"old"}


def test_the_cleanup_run_includes_the_policy_phase(dynamodb_table: str) -> None:
    from memkit.config import CleanupSettings
    from memkit.handlers.wiring import cleanup_phases as build_phases
    from memkit.store.dynamodb import DynamoStore

    settings = CleanupSettings(table_name=dynamodb_table, region="us-east-1", orphan_sample_size=0)

    names = [phase.name for phase in build_phases(settings, DynamoStore(settings), time.time)]

    assert "policies" in names


def test_policy_cursors_survive_a_json_round_trip() -> None:
    from memkit.jobs.policies import PolicyCursor

    cursor = PolicyCursor("default#work", "compact", "ada#")

    assert PolicyCursor.decode(cursor.encode()) == cursor
    assert PolicyCursor.decode("garbage") is None
    assert PolicyCursor.decode(json.dumps({"s": "x"})) is None
