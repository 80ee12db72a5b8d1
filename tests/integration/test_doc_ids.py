"""Vector docs are addressed by memkit's ids, not the table's keys (memkit.vectors.protocol),
and an index written before that (docs with `pk`/`sk` fields and other ids) keeps working:
search shows each item once and never a deleted one; the orphan sweep clears its leftovers;
`memkit reindex` replaces it. Real handlers on moto, the real indexer, the local index."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.jobs.orphans import REMOVED, OrphanPhase
from memkit.models.domain import MessageRef, RecordRef
from memkit.times import Deadline
from memkit.vectors.protocol import VectorDoc, message_doc_id, record_doc_id
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

LTM = "/v1/long-term-memory"
TEA = "Ada drinks green tea every morning"


def _stock(world: MemoryWorld) -> None:
    body = {"memories": [{"id": "tea", "text": TEA, "user_id": "ada"}]}
    assert world.api("POST", f"{LTM}/", body=body).status == 200
    messages = {"messages": [{"id": "m1", "role": "user", "content": "Book the Lisbon train"}]}
    response = world.api("POST", "/v1/working-memory/chat-1/messages", body=messages)
    assert response.status in (200, 201), response.body
    world.settle()


def _legacy_doc(world: MemoryWorld, record_id: str, text: str) -> str:
    """A record's doc as releases before memkit ids wrote it: its own id, the table's key
    in `pk`/`sk`, no `kind`."""
    vector = world.embedder.embed([text], "document")[0]
    fields: dict[str, Any] = {
        "tenant": "default",
        "namespace": "default",
        "user_id": "ada",
        "session_id": None,
        "memory_type": "semantic",
        "topics": [],
        "entities": [],
        "record_id": record_id,
        "pk": f"T#default#R#{record_id}",
        "sk": "RECORD",
        "created_at": 1.0,
        "updated_at": 1.0,
        "last_accessed": 1.0,
        "event_date": None,
        "pinned": False,
    }
    doc_id = f"legacy-{record_id}"
    assert world.vector_index.upsert([VectorDoc(doc_id, "default", vector, 1, text, fields)]) == {}
    return doc_id


def _doc_ids(world: MemoryWorld) -> set[str]:
    return {hit.id for hit in world.vector_index.browse("default", 10_000, 0)}


def test_docs_are_named_by_memkit_ids(world: MemoryWorld) -> None:
    _stock(world)

    assert _doc_ids(world) == {
        record_doc_id(RecordRef("default", "tea")),
        message_doc_id(MessageRef("default", "default", "chat-1", "m1")),
    }
    kinds = {
        hit.fields["record_id"]: hit.fields["kind"]
        for hit in world.vector_index.browse("default", 10, 0)
    }
    assert kinds == {"tea": "record", "m1": "message"}


def test_an_item_with_an_old_doc_beside_its_new_one_is_found_once(world: MemoryWorld) -> None:
    _stock(world)
    _legacy_doc(world, "tea", TEA)

    found = world.api("POST", f"{LTM}/search", body={"text": "green tea", "limit": 10})

    assert found.status == 200, found.body
    ids = [memory["id"] for memory in found.body["memories"]]
    assert ids.count("tea") == 1


def test_an_old_doc_of_a_deleted_record_is_never_shown_and_the_sweep_removes_it(
    world: MemoryWorld,
) -> None:
    _stock(world)
    legacy = _legacy_doc(world, "tea", TEA)
    assert world.api("DELETE", f"{LTM}", query={"memory_ids": "tea"}).status == 200
    world.settle()  # the stream's REMOVE takes out the doc of the new name only
    assert legacy in _doc_ids(world)

    found = world.api("POST", f"{LTM}/search", body={"text": "green tea", "limit": 10})
    outcome = OrphanPhase(world.store.reindex, world.vector_index).run(None, Deadline.after(60))

    assert "tea" not in [memory["id"] for memory in found.body["memories"]]
    assert outcome.counts[REMOVED] == 1
    assert legacy not in _doc_ids(world)


def test_deleting_a_session_removes_its_message_docs_at_once(world: MemoryWorld) -> None:
    _stock(world)

    assert world.api("DELETE", "/v1/working-memory/chat-1").status == 200

    # Before the stream's REMOVE records reach the indexer.
    assert _doc_ids(world) == {record_doc_id(RecordRef("default", "tea"))}
