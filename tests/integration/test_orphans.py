"""The orphan sweep (memkit.jobs.orphans) on moto: vectors whose source item left the
table without a stream event reaching the indexer are found and removed; the others stay.
On the local exact index (the world), through the real OpenSearch adapter against the strict
loopback OpenSearch, as a managed domain and as a serverless collection, and on the DynamoDB
vector table through its local stand-in."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from memkit.jobs.orphans import EXAMINED, FOUND, REMOVED, OrphanPhase
from memkit.jobs.phases import Deadline
from memkit.store import keys
from memkit.vectors.protocol import VectorDoc
from memkit_dev.local.opensearch import LoopbackOpenSearch
from tests.integration.memory_world import (
    CountingEmbedder,
    MemoryWorld,
    backend_world,
    build_world,
)

pytestmark = pytest.mark.integration

LTM = "/v1/long-term-memory"
REGION = "us-east-1"
RECORDS = {
    "tea": "Ada drinks green tea every morning",
    "oslo": "Ada is flying to Oslo on Friday for a conference",
    "cat": "Bob has a grey cat called Pixel",
}
MESSAGES = {"m0": "Let's plan the trip to Lisbon", "m1": "My passport number ends in 4471"}
ALL_IDS = set(RECORDS) | set(MESSAGES)


def _stock(world: MemoryWorld) -> None:
    memories = [{"id": rid, "text": text, "user_id": "ada"} for rid, text in RECORDS.items()]
    assert world.api("POST", f"{LTM}/", body={"memories": memories}).status == 200
    messages = [{"id": mid, "role": "user", "content": text} for mid, text in MESSAGES.items()]
    response = world.api(
        "POST", "/v1/working-memory/chat-1/messages", body={"messages": messages, "user_id": "ada"}
    )
    assert response.status in (200, 201), response.body
    world.settle()


def _delete_behind_the_indexers_back(table: str, key: keys.Key) -> None:
    """Delete an item and never deliver its stream record (a lost REMOVE)."""
    client = boto3.client("dynamodb", region_name=REGION)
    client.delete_item(TableName=table, Key={"PK": {"S": key[0]}, "SK": {"S": key[1]}})


def _update_message(table: str, message_id: str, update: str, **values: dict[str, str]) -> None:
    """Change a message of chat-1 in the table directly (what no API route does); `role`,
    a reserved word, is written #role."""
    pk, sk = keys.message_key("default", "default", "chat-1", message_id)
    names = {"ExpressionAttributeNames": {"#role": "role"}} if "#role" in update else {}
    boto3.client("dynamodb", region_name=REGION).update_item(
        TableName=table,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression=update,
        ExpressionAttributeValues={f":{name}": value for name, value in values.items()},
        **names,
    )


def _stray_doc(world: MemoryWorld) -> None:
    """A vector whose pk/sk never existed in the table."""
    pk, sk = keys.record_key("default", "ghost")
    vector = world.embedder.embed(["a ghost of a record"], "document")[0]
    fields = {"record_id": "ghost", "pk": pk, "sk": sk, "namespace": "default"}
    doc = VectorDoc("ghost-doc", "default", vector, 1, "a ghost of a record", fields)
    assert world.vector_index.upsert([doc]) == {}


def _sweep(world: MemoryWorld, cursor: str | None = None, sample: int = 1000) -> Any:
    return OrphanPhase(world.store.reindex, world.vector_index, sample_size=sample).run(
        cursor, Deadline.after(60)
    )


def _ids(world: MemoryWorld) -> set[str]:
    return world.index_ids()


def test_vectors_of_deleted_items_are_found_and_removed(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a record and a message deleted without their stream events, and a stray vector
    _stock(world)
    _delete_behind_the_indexers_back(dynamodb_table, keys.record_key("default", "oslo"))
    _delete_behind_the_indexers_back(
        dynamodb_table, keys.message_key("default", "default", "chat-1", "m0")
    )
    _stray_doc(world)
    assert _ids(world) == ALL_IDS | {"ghost"}

    # When the sweep runs over the whole index
    outcome = _sweep(world)

    # Then the three orphans are gone, the live vectors stay, and the counts say so
    assert outcome.done
    assert outcome.cursor is None
    assert outcome.counts == {EXAMINED: 6, FOUND: 3, REMOVED: 3}
    assert _ids(world) == ALL_IDS - {"oslo", "m0"}


def test_a_sweep_with_nothing_orphaned_removes_nothing(world: MemoryWorld) -> None:
    _stock(world)

    outcome = _sweep(world)

    assert outcome.counts == {EXAMINED: 5, FOUND: 0, REMOVED: 0}
    assert _ids(world) == ALL_IDS


def test_an_orphan_found_again_later_is_written_back_by_a_newer_write(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given a record removed as an orphan
    _stock(world)
    _delete_behind_the_indexers_back(dynamodb_table, keys.record_key("default", "tea"))
    _sweep(world)

    # When a record of that id is created again
    memory = {"id": "tea", "text": "Ada switched to black tea", "user_id": "ada"}
    assert world.api("POST", f"{LTM}/", body={"memories": [memory]}).status == 200
    world.settle()

    # Then its new version is indexed: the removal's version was just above the old doc's
    assert "tea" in _ids(world)


def test_the_sweep_covers_the_index_over_runs_from_its_cursor(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given orphans among the vectors, and runs that sample two vectors each
    _stock(world)
    _delete_behind_the_indexers_back(dynamodb_table, keys.record_key("default", "cat"))
    _stray_doc(world)
    cursors: list[str | None] = []
    found = examined = 0

    # When runs follow each other from the saved cursor until one reaches the end
    cursor: str | None = None
    for _ in range(10):
        outcome = _sweep(world, cursor, sample=2)
        examined += outcome.counts[EXAMINED]
        found += outcome.counts[FOUND]
        cursors.append(outcome.cursor)
        if outcome.done:
            break
        cursor = outcome.cursor

    # Then every vector was examined once and every orphan found, in increasing doc ids
    assert examined == 6
    assert found == 2
    assert cursors[-1] is None
    assert len(cursors) == 3
    assert str(cursors[0]) < str(cursors[1])
    assert _ids(world) == ALL_IDS - {"cat"}


def test_an_expired_session_message_is_an_orphan(world: MemoryWorld, dynamodb_table: str) -> None:
    # Given a message whose item expired (TTL has not deleted it yet)
    _stock(world)
    _update_message(dynamodb_table, "m1", "SET expires_at = :past", past={"N": "1000"})

    outcome = _sweep(world)

    assert outcome.counts[FOUND] == 1
    assert "m1" not in _ids(world)


def test_a_system_message_indexed_before_they_were_left_out_is_an_orphan(
    world: MemoryWorld, dynamodb_table: str
) -> None:
    # Given an indexed message that is now a system message in the table (as one indexed
    # before memkit left system messages out of the index)
    _stock(world)
    _update_message(dynamodb_table, "m0", "SET #role = :system", system={"S": "system"})
    world.settle()
    assert _ids(world) == ALL_IDS

    # When the sweep runs
    outcome = _sweep(world)

    # Then its vector is removed and every other stays
    assert outcome.counts[REMOVED] == 1
    assert _ids(world) == ALL_IDS - {"m0"}


def test_the_cleanup_run_includes_the_orphan_phase(dynamodb_table: str) -> None:
    from memkit.config import CleanupSettings
    from memkit.handlers.wiring import cleanup_phases as build_phases
    from memkit.store.dynamodb import DynamoStore

    settings = CleanupSettings(table_name=dynamodb_table, region=REGION)

    phases = build_phases(settings, DynamoStore(settings))

    assert [phase.name for phase in phases][-1] == "orphans"


DAY = 86_400


def test_after_a_pass_the_scheduled_runs_leave_the_index_alone_for_a_week(
    dynamodb_table: str,
) -> None:
    from memkit.config import CleanupSettings
    from memkit.handlers.wiring import cleanup_phases
    from memkit.jobs.cleanup import CleanupRun, TableCursors
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.opensearch import opensearch_index

    # Given a Serverless collection holding Ada's vectors, and the cleanup run as deployed
    # (its default settings), started once a day
    embedder = CountingEmbedder()
    with LoopbackOpenSearch(embedder.dimensions, flavour="serverless") as server:
        settings = CleanupSettings(
            table_name=dynamodb_table,
            region=REGION,
            opensearch_endpoint=server.url,
            opensearch_auth="none",
            opensearch_flavour="serverless",
        )
        index = opensearch_index(settings, REGION, embedder.dimensions)
        _stock(build_world(dynamodb_table, index=index, embedder=embedder))
        now = [1_800_000_000.0]
        store = DynamoStore(settings)
        run = CleanupRun(
            cleanup_phases(settings, store, clock=lambda: now[0]), TableCursors(store.expiry)
        )

        # When it runs on eight days in a row
        sent: list[int] = []
        for _ in range(8):
            before = len(server.requests)
            assert run.run(remaining_ms=60_000).done
            sent.append(len(server.requests) - before)
            now[0] += DAY

    # Then the first run swept the index, the next six asked it nothing (a collection that
    # scaled to zero stays asleep), and the run a week after the pass starts the next one
    assert sent[0] > 0
    assert sent[1:7] == [0] * 6
    assert sent[7] > 0


def test_an_interval_of_0_ends_a_rest_saved_under_a_longer_one(world: MemoryWorld) -> None:
    # Given a pass over the index that ended resting a week (the default interval)
    _stock(world)
    week = 7 * DAY
    rested = OrphanPhase(world.store.reindex, world.vector_index, interval_seconds=week).run(
        None, Deadline.after(60)
    )

    # When the next run's sweep has an interval of 0 (no rest)
    outcome = OrphanPhase(world.store.reindex, world.vector_index, interval_seconds=0).run(
        rested.cursor, Deadline.after(60)
    )

    # Then it starts a pass at once, over the whole index, and leaves no rest behind
    assert rested.cursor is not None
    assert outcome.counts[EXAMINED] == 5
    assert (outcome.done, outcome.cursor) == (True, None)


def test_a_sweep_resting_on_a_cursor_it_cannot_read_starts_a_pass(world: MemoryWorld) -> None:
    from memkit.jobs.orphans import RESTING

    _stock(world)

    outcome = _sweep(world, f"{RESTING}soon")

    assert outcome.counts[EXAMINED] == 5


# -- through the OpenSearch adapter, and on the DynamoDB vector table ----------------------


@pytest.fixture(params=["domain", "serverless", "dynamodb"])
def os_world(request: pytest.FixtureRequest, dynamodb_table: str) -> Iterator[MemoryWorld]:
    from memkit.config import IndexSettings
    from memkit.vectors.opensearch import opensearch_index

    if request.param == "dynamodb":
        with backend_world("dynamodb", dynamodb_table) as world:
            yield world
        return
    embedder = CountingEmbedder()
    with LoopbackOpenSearch(embedder.dimensions, flavour=request.param) as server:
        index = opensearch_index(
            IndexSettings(
                opensearch_endpoint=server.url,
                opensearch_auth="none",
                opensearch_flavour=request.param,
            ),
            REGION,
            embedder.dimensions,
        )
        yield build_world(dynamodb_table, index=index, embedder=embedder)
    assert server.rejected == []


def test_orphans_are_removed_through_the_adapter(
    os_world: MemoryWorld, dynamodb_table: str
) -> None:
    _stock(os_world)
    _delete_behind_the_indexers_back(dynamodb_table, keys.record_key("default", "oslo"))
    _stray_doc(os_world)

    first = _sweep(os_world, sample=4)
    second = _sweep(os_world, first.cursor, sample=4)

    assert not first.done
    assert second.done
    assert first.counts[EXAMINED] + second.counts[EXAMINED] == 6
    assert first.counts[REMOVED] + second.counts[REMOVED] == 2
    assert _ids(os_world) == ALL_IDS - {"oslo"}
    # a second sweep finds nothing: removed vectors (serverless: tombstones) are not sampled
    assert _sweep(os_world).counts == {EXAMINED: 4, FOUND: 0, REMOVED: 0}
