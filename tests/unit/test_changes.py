"""The store's typed changes (memkit.store.changes): what the jobs get of a stream record."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from memkit.models.domain import MessageRef, PendingMemoryRef, RecordRef
from memkit.models.domain import StoredRecord as RecordValue  # a record's change: a read's record
from memkit.store.changes import (
    MessageValue,
    PendingMemoryValue,
    SessionValue,
    UnreadableChange,
    scanned_changes,
    stream_change,
)
from memkit.vectors.protocol import message_doc_id, record_doc_id, source_of
from tests.events import load_event


def _record(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_event(name)["Records"][0])


def test_an_inserted_record_arrives_as_its_value_named_by_memkit_ids() -> None:
    change = stream_change(_record("stream_insert_record.json"))

    assert change is not None
    assert change.event == "INSERT"
    assert change.old is None
    assert isinstance(change.new, RecordValue)
    assert change.new.ref == RecordRef("default", change.new.ref.record_id)
    assert change.new.text
    assert change.new.version > 0
    assert change.sequence == _record("stream_insert_record.json")["dynamodb"]["SequenceNumber"]


def test_a_modify_carries_both_values() -> None:
    change = stream_change(_record("stream_modify_record.json"))

    assert change is not None
    assert isinstance(change.old, RecordValue)
    assert isinstance(change.new, RecordValue)
    assert change.old.ref == change.new.ref


def test_a_ttl_removal_is_told_apart_from_a_delete() -> None:
    expired = stream_change(_record("stream_ttl_remove_message.json"))
    deleted = stream_change(_record("stream_remove_record.json"))

    assert expired is not None
    assert deleted is not None
    assert expired.ttl is True
    assert isinstance(expired.old, MessageValue)
    assert expired.new is None
    assert expired.at_us == 1739530000 * 1_000_000
    assert deleted.ttl is False


def test_a_message_names_its_session_and_whether_it_is_indexed() -> None:
    raw = _record("stream_ttl_remove_message.json")

    change = stream_change(raw)

    assert change is not None
    message = change.value
    assert isinstance(message, MessageValue)
    image = raw["dynamodb"]["OldImage"]
    assert message.ref == MessageRef(
        "default", "default", image["session_id"]["S"], image["message_id"]["S"]
    )
    assert message.indexed is (image.get("idx", {}).get("S") == "1")


def test_items_the_jobs_do_not_follow_decode_to_nothing() -> None:
    raw = _record("stream_insert_record.json")
    raw["dynamodb"]["NewImage"]["kind"] = {"S": "scratchpad"}

    assert stream_change(raw) is None


@pytest.mark.parametrize(
    "damage",
    [
        lambda r: r["dynamodb"]["NewImage"].pop("kind"),
        lambda r: r["dynamodb"]["NewImage"].pop("tenant"),
        lambda r: r["dynamodb"]["NewImage"].update(text={"Q": "?"}),
        lambda r: r.update(eventName="TRUNCATE"),
    ],
)
def test_a_record_memkit_did_not_write_is_unreadable_with_its_sequence(damage: Any) -> None:
    raw = _record("stream_insert_record.json")
    damage(raw)

    with pytest.raises(UnreadableChange) as caught:
        stream_change(raw)

    assert caught.value.sequence == raw["dynamodb"]["SequenceNumber"]
    assert "likes" not in str(caught.value)  # a reason names no content


def test_scanned_items_become_numbered_inserts_and_a_bad_one_is_only_counted() -> None:
    item = _record("stream_insert_record.json")["dynamodb"]["NewImage"]
    pending = {
        "kind": {"S": "memory"},
        "tenant": {"S": "t"},
        "namespace": {"S": "ns"},
        "session_id": {"S": "s1"},
        "memory_id": {"S": "m1"},
        "record": {"S": '{"id": "m1", "text": "x"}'},
    }
    session = {
        "kind": {"S": "session"},
        "tenant": {"S": "t"},
        "session_id": {"S": "s1"},
        "message_count": {"N": "3"},
    }
    profile = {"kind": {"S": "profile"}}
    broken = {"kind": {"S": "record"}}  # no tenant, no text: not what memkit writes

    changes, unreadable = scanned_changes([item, profile, pending, broken, session])

    assert unreadable == 1  # counted, and the rest of the page still decoded
    assert [c.sequence for c in changes] == ["0", "2", "4"]
    assert all(c.event == "INSERT" and c.old is None for c in changes)
    assert isinstance(changes[1].new, PendingMemoryValue)
    assert changes[1].new.ref == PendingMemoryRef("t", "ns", "s1", "m1")
    assert isinstance(changes[2].new, SessionValue)
    assert changes[2].new.message_count == 3


def test_doc_ids_come_from_memkit_ids_alone() -> None:
    record, message = RecordRef("t", "r1"), MessageRef("t", "ns", "s1", "m1")

    assert record_doc_id(record) == record_doc_id(RecordRef("t", "r1"))
    assert record_doc_id(record) != record_doc_id(RecordRef("u", "r1"))
    assert message_doc_id(message) != message_doc_id(MessageRef("t", "ns", "s2", "m1"))
    assert record_doc_id(RecordRef("t", "m1")) != message_doc_id(message)
    # A doc's fields name its item again, with or without `kind` (docs before memkit ids).
    fields = {"record_id": "m1", "namespace": "ns", "session_id": "s1", "memory_type": "message"}
    assert source_of("t", fields) == message
    assert source_of("t", {**fields, "kind": "message"}) == message
    assert source_of("t", {"record_id": "r1", "kind": "record"}) == record
    assert source_of("t", {"namespace": "ns"}) is None
    # A record a client typed "message", written before `kind`: its old sort key says record
    legacy = {"record_id": "r1", "memory_type": "message", "session_id": "s1", "sk": "RECORD"}
    assert source_of("t", legacy) == record
    assert source_of("t", {**fields, "sk": "MSG#m1"}) == message
