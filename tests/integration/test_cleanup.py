"""The scheduled cleanup run on moto: expired sessions are deleted with their items and, once
the stream is delivered to the indexer, their vectors; the run stops inside its time budget
and the next one resumes where it stopped (memkit.jobs)."""

from __future__ import annotations

import io
import itertools
import json
import time
from pathlib import Path
from typing import Any

import boto3
import pytest

from memkit.config import CleanupSettings
from memkit.handlers.cleanup import CleanupFailed, make_lambda_handler
from memkit.handlers.wiring import cleanup_phases as build_phases
from memkit.jobs.cleanup import CleanupRun, TableCursors, TimeBudget
from memkit.jobs.expiry import ExpiryPhase
from memkit.jobs.phases import Deadline, PhaseOutcome
from memkit.store import keys
from memkit.store.dynamodb import DynamoStore
from memkit.store.expiry import ExpiryTable
from tests.conftest import LambdaContextStub
from tests.events import load_event
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): these run on moto and on AWS's own engine.
ENGINES = ("moto", "dynamodb-local")

HOUR = 3600
# Every run below happens "an hour from now": sessions with a shorter TTL are due.
LATER = time.time() + HOUR


class CleanupContext(LambdaContextStub):
    """The context of a scheduled invocation of the cleanup function (Timeout 300 s)."""

    function_name = "memkit-test-cleanup"

    def get_remaining_time_in_millis(self) -> int:
        return 300_000


def _dynamo(table: str, clock: float = LATER) -> DynamoStore:
    return DynamoStore(CleanupSettings(table_name=table, region="us-east-1"), clock=lambda: clock)


def _store(table: str, clock: float = LATER) -> ExpiryTable:
    """The table's expiry part: what the expiry phase and the cleanup cursors use."""
    return _dynamo(table, clock).expiry


def _run(store: ExpiryTable, budget: TimeBudget | None = None, **kwargs: Any) -> CleanupRun:
    phase = ExpiryPhase(store, clock=lambda: LATER, **kwargs)
    return CleanupRun([phase], TableCursors(store), budget)


def _session(world: MemoryWorld, session_id: str, ttl: int | None, *texts: str) -> None:
    messages = [
        {"id": f"{session_id}-m{i}", "role": "user", "content": text}
        for i, text in enumerate(texts)
    ]
    body: dict[str, Any] = {"messages": messages, "ttl_seconds": ttl}
    assert world.api("PUT", f"/v1/working-memory/{session_id}", body=body).status == 200


def _partition(table: str, session_id: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return list(
        client.query(
            TableName=table,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={
                ":pk": {"S": keys.session_pk("default", "default", session_id)}
            },
            ConsistentRead=True,
        )["Items"]
    )


def _set_expiry(table: str, session_id: str, message_id: str, expires_at: int | None) -> None:
    """A message that expires with its session (`expires_at`), or that outlives it (None:
    what a session indexing all its messages keeps)."""
    pk, sk = keys.message_key("default", "default", session_id, message_id)
    update: dict[str, Any] = {"UpdateExpression": "REMOVE expires_at"}
    if expires_at is not None:
        update = {
            "UpdateExpression": "SET expires_at = :at",
            "ExpressionAttributeValues": {":at": {"N": str(expires_at)}},
        }
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=table, Key={"PK": {"S": pk}, "SK": {"S": sk}}, **update
    )


def _sks(items: list[dict[str, Any]]) -> set[str]:
    return {item["SK"]["S"] for item in items}


def test_an_expired_session_goes_with_its_items_and_its_vectors(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given an expired session with indexed messages (and a scratchpad), and a live one
    _session(world, "old", 60, "I moved to Lisbon", "My locker is 12")
    _set_expiry(dynamodb_table, "old", "old-m0", int(time.time()) + 120)
    _set_expiry(dynamodb_table, "old", "old-m1", int(time.time()) + 120)
    pad = world.api("PUT", "/v1/working-memory/old/scratchpad", body={"content": "likes tea"})
    assert pad.status == 200
    _session(world, "live", 2 * HOUR, "The office opens at nine")
    world.settle()
    assert {"old-m0", "old-m1", "live-m0"} <= world.index_ids()

    # When a cleanup run happens after it expired, and its deletes reach the indexer
    result = _run(_store(dynamodb_table)).run(remaining_ms=60_000)
    world.settle()

    # Then the session, its messages and its scratchpad are gone, with their vectors
    assert _partition(dynamodb_table, "old") == []
    assert "old-m0" not in world.index_ids()
    assert "old-m1" not in world.index_ids()
    counts = result.phases[0].counts
    assert counts["ExpiredSessionsDeleted"] == 1
    assert counts["ExpiryItemsDeleted"] == 4  # meta, two messages, the scratchpad
    # And the live session is untouched
    assert _sks(_partition(dynamodb_table, "live")) == {"META", "MSG#live-m0"}
    assert "live-m0" in world.index_ids()


def test_items_without_an_expiry_outlive_their_session(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given an expired session one of whose messages carries no expiry (kept for long-term
    # memory), the other expiring with the session
    _session(world, "old", 60, "Kept as a memory", "Goes with the session")
    _set_expiry(dynamodb_table, "old", "old-m0", None)
    _set_expiry(dynamodb_table, "old", "old-m1", int(time.time()) + 120)
    world.settle()

    # When the cleanup run deletes the session
    result = _run(_store(dynamodb_table)).run(remaining_ms=60_000)
    world.settle()

    # Then the message without an expiry stays, with its vector
    assert _sks(_partition(dynamodb_table, "old")) == {"MSG#old-m0"}
    assert "old-m0" in world.index_ids()
    assert "old-m1" not in world.index_ids()
    assert result.phases[0].counts["ExpiryItemsKept"] == 1


def test_a_session_renewed_after_it_was_listed_is_not_deleted(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given an expired session the lifecycle index lists as due
    _session(world, "s1", 60, "hello")
    store = _store(dynamodb_table)
    now = int(LATER)
    [due] = [
        d for shard in range(keys.EXPIRY_SHARDS) for d in store.due_sessions(shard, now, None, 10)
    ]

    # When a client writes to it before the run deletes it (a new expiry)
    _session(world, "s1", 2 * HOUR, "hello", "still here")
    purge = store.purge_expired_session(due, now)

    # Then nothing of it is deleted
    assert purge.purged is False
    assert purge.deleted == 0
    assert _sks(_partition(dynamodb_table, "s1")) == {"META", "MSG#s1-m0", "MSG#s1-m1"}


def test_a_session_without_a_ttl_or_not_yet_due_is_never_read(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given sessions that do not expire, or expire after the run
    _session(world, "forever", None, "no ttl")
    _session(world, "later", 2 * HOUR, "not yet")

    # When a run happens
    result = _run(_store(dynamodb_table)).run(remaining_ms=60_000)

    # Then it read nothing and deleted nothing
    assert result.phases[0].counts["ExpiryItemsExamined"] == 0
    assert result.done
    assert _partition(dynamodb_table, "forever")
    assert _partition(dynamodb_table, "later")


def _order(session_ids: list[str]) -> list[str]:
    """The order a run handles expired sessions in: by shard, then by expiry."""

    def position(session_id: str) -> tuple[int, str]:
        pk = keys.session_pk("default", "default", session_id)
        return keys.expiry_shard(pk), keys.expiry_entry(pk, 0)[1]

    return sorted(session_ids, key=position)


def _alive(table: str, session_ids: list[str]) -> set[str]:
    return {s for s in session_ids if _partition(table, s)}


def test_a_run_out_of_time_saves_its_cursor_and_the_next_resumes_there(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given twelve expired sessions (all expiring at the same second: ordered by shard and key)
    session_ids = [f"s{i:02d}" for i in range(12)]
    for session_id in session_ids:
        _session(world, session_id, 60, "bye")
    store = _store(dynamodb_table)
    # A clock that moves one second each time it is read: the run gets twelve readings
    ticks = itertools.count()
    budget = TimeBudget(margin_seconds=0, margin_fraction=0, budget_seconds=12)
    first = CleanupRun(
        [ExpiryPhase(store, page_size=2, clock=lambda: LATER)],
        TableCursors(store),
        budget,
        clock=lambda: float(next(ticks)),
    )

    # When a run stops at its deadline
    stopped = first.run(remaining_ms=300_000)

    # Then it deleted the first sessions in its order, stopped cleanly and saved its cursor
    deleted_first = set(session_ids) - _alive(dynamodb_table, session_ids)
    order = _order(session_ids)
    assert stopped.phases[0].status == "stopped"
    assert 0 < len(deleted_first) < len(session_ids)
    assert deleted_first == set(order[: len(deleted_first)])
    assert TableCursors(store).load()["expiry"]

    # When the next run has time enough
    finished = _run(store).run(remaining_ms=300_000)

    # Then it deleted exactly the rest, and the phase starts over next time (no cursor)
    assert _alive(dynamodb_table, session_ids) == set()
    assert finished.phases[0].counts["ExpiredSessionsDeleted"] == len(session_ids) - len(
        deleted_first
    )
    assert finished.phases[0].status == "done"
    assert "expiry" not in TableCursors(store).load()


def test_a_run_resumes_from_the_saved_shard_and_starts_over_once_done(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given an expired session, and a cursor saved past its shard by an earlier run
    _session(world, "early", 60, "bye")
    pk = keys.session_pk("default", "default", "early")
    store = _store(dynamodb_table)
    past = {"shard": keys.expiry_shard(pk) + 1, "after": None}
    TableCursors(store).save("expiry", json.dumps(past))

    # When a run resumes there, it reaches the end without coming back to the session
    resumed = _run(store).run(remaining_ms=60_000)
    assert resumed.done
    assert _partition(dynamodb_table, "early")

    # Then the next run starts over and deletes it
    _run(store).run(remaining_ms=60_000)
    assert _partition(dynamodb_table, "early") == []


class Broken:
    """A phase that always fails (its message quotes content, as a careless one might)."""

    name = "broken"

    def run(self, cursor: str | None, deadline: Deadline) -> PhaseOutcome:
        raise RuntimeError("failed on 'I moved to Lisbon'")


def test_a_failing_phase_fails_the_invocation_after_the_others_ran(
    world: MemoryWorld, dynamodb_table: str, debug_log: io.StringIO
) -> None:
    # Given a run whose first phase fails and an expired session for the second
    _session(world, "old", 60, "I moved to Lisbon")
    store = _store(dynamodb_table)
    TableCursors(store).save("broken", "where-it-was")
    run = CleanupRun([Broken(), ExpiryPhase(store, clock=lambda: LATER)], TableCursors(store))
    handler = make_lambda_handler(lambda: run)

    # When the scheduled invocation runs
    with pytest.raises(CleanupFailed, match="broken"):
        handler(load_event("schedule.json"), CleanupContext())

    # Then the expiry phase still ran, the broken phase keeps its cursor, and the logs name
    # the failure without its message
    assert _partition(dynamodb_table, "old") == []
    assert TableCursors(store).load() == {"broken": "where-it-was"}
    logs = debug_log.getvalue()
    assert '"error":"RuntimeError"' in logs.replace(" ", "")
    assert "Lisbon" not in logs


def test_logs_and_metrics_carry_counts_and_never_content(
    world: MemoryWorld,
    dynamodb_table: str,
    debug_log: io.StringIO,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Given an expired session holding a secret, and metrics on
    secret = "canary-5b1e"
    _session(world, "old", 60, f"my pin is {secret}")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    store = _store(dynamodb_table)
    handler = make_lambda_handler(lambda: _run(store))
    capsys.readouterr()

    # When the scheduled invocation runs
    summary = handler(load_event("schedule.json"), CleanupContext())

    # Then it reports counts, logs the schedule's ids, and nothing carries the content
    emitted = capsys.readouterr().out
    [blob] = [json.loads(line) for line in emitted.splitlines() if "_aws" in line]
    metric = {name: sum(v) if isinstance(v, list) else v for name, v in blob.items()}
    assert metric["ExpiredSessionsDeleted"] == 1
    assert metric["CleanupPhasesFailed"] == 0
    assert summary["phases"]["expiry"]["status"] == "done"
    logs = debug_log.getvalue()
    assert "d32c5kddcf5bb8c3" in logs  # the schedule's execution id
    assert secret not in logs
    assert secret not in emitted


def test_the_production_phases_start_with_expiry(dynamodb_table: str) -> None:
    settings = CleanupSettings(table_name=dynamodb_table, region="us-east-1")

    phases = build_phases(settings, _dynamo(dynamodb_table))

    assert phases[0].name == "expiry"


def test_the_local_stack_runs_the_cleanup_function_on_its_timer() -> None:
    import httpx

    from memkit_dev.local.stack import LocalStack, LocalStackConfig

    # Given the local stack, its cleanup timer set far apart (the test ticks it), and a
    # session that expires in a second
    root = Path(__file__).resolve().parents[2]
    config = LocalStackConfig(
        port=0, concurrency=1, template=root / "template.yaml", cleanup_interval_seconds=3600
    )
    with LocalStack(config) as stack, httpx.Client(base_url=stack.url, timeout=30) as http:
        body = {"messages": [{"id": "m1", "role": "user", "content": "bye"}], "ttl_seconds": 1}
        assert http.put("/v1/working-memory/brief", json=body).status_code == 200
        time.sleep(2.1)  # past its expiry (epoch seconds)
        assert stack.cleanup_timer is not None

        # When the schedule fires
        stack.cleanup_timer.run_once()

        # Then the cleanup function ran in its own environment and deleted the session
        [(summary, error)] = stack.cleanup_timer.runs
        assert error is None
        assert summary["phases"]["expiry"]["counts"]["ExpiredSessionsDeleted"] == 1
        client = boto3.client(
            "dynamodb", endpoint_url=stack.dynamodb_endpoint, region_name="us-east-1"
        )
        left = client.query(
            TableName=config.table_name,
            KeyConditionExpression="PK = :pk",
            ExpressionAttributeValues={
                ":pk": {"S": keys.session_pk("default", "default", "brief")}
            },
        )
        assert left["Items"] == []
