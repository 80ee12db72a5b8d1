"""Lambda event filtering (FilterCriteria) as the local stream pump applies it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memkit_dev.local.event_filter import matches, parse_pattern, passes

# The indexer's FilterCriteria in template.yaml: records and memories, record deletes (by
# OldImage: DynamoDB mappings filter on the `dynamodb` key only), stamped messages and theirs.
INDEXER_FILTERS = [
    '{"dynamodb": {"NewImage": {"kind": {"S": ["record", "memory"]}}}}',
    '{"dynamodb": {"OldImage": {"kind": {"S": ["record"]}}}}',
    '{"dynamodb": {"NewImage": {"kind": {"S": ["message"]}, "idx": {"S": ["1"]}}}}',
    '{"dynamodb": {"OldImage": {"kind": {"S": ["message"]}, "idx": {"S": ["1"]}}}}',
]


def stream_record(
    event_name: str,
    new: dict[str, str] | None = None,
    old: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Lambda DynamoDB stream record whose images hold string attributes."""
    dynamodb: dict[str, Any] = {
        "ApproximateCreationDateTime": 1_700_000_000.0,
        "Keys": {"PK": {"S": "t1#u1"}, "SK": {"S": "x"}},
        "SequenceNumber": "100",
        "SizeBytes": 120,
        "StreamViewType": "NEW_AND_OLD_IMAGES",
    }
    if new is not None:
        dynamodb["NewImage"] = {name: {"S": value} for name, value in new.items()}
    if old is not None:
        dynamodb["OldImage"] = {name: {"S": value} for name, value in old.items()}
    return {
        "eventID": "e1",
        "eventName": event_name,
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": dynamodb,
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/t/stream/1",
    }


# -- the indexer's patterns ---------------------------------------------------------------


@pytest.mark.parametrize(
    "record",
    [
        stream_record("INSERT", new={"kind": "record"}),
        stream_record("MODIFY", new={"kind": "record"}, old={"kind": "record"}),
        stream_record("INSERT", new={"kind": "memory"}),
        stream_record("REMOVE", old={"kind": "record"}),
        stream_record("INSERT", new={"kind": "message", "idx": "1"}),
        stream_record("MODIFY", new={"kind": "message", "idx": "1"}, old={"kind": "message"}),
        stream_record("REMOVE", old={"kind": "message", "idx": "1"}),
    ],
    ids=[
        "record-insert",
        "record-modify",
        "memory-insert",
        "record-remove",
        "message-part-1",
        "message-part-1-modify",
        "message-part-1-remove",
    ],
)
def test_indexer_filters_pass_indexable_items(record: dict[str, Any]) -> None:
    assert passes(INDEXER_FILTERS, record), "an indexable change must reach the indexer"


@pytest.mark.parametrize(
    "record",
    [
        stream_record("INSERT", new={"kind": "session"}),
        stream_record("MODIFY", new={"kind": "profile"}, old={"kind": "profile"}),
        stream_record("INSERT", new={"kind": "message"}),
        stream_record("INSERT", new={"kind": "message", "idx": "2"}),
        stream_record("REMOVE", old={"kind": "message", "idx": "2"}),
        stream_record("REMOVE", old={"kind": "memory"}),
        stream_record("REMOVE", old={"kind": "session"}),
        stream_record("INSERT", new={"kind": "Record"}),
    ],
    ids=[
        "session",
        "profile",
        "message-without-idx",
        "message-part-2",
        "message-part-2-remove",
        "memory-remove",
        "session-remove",
        "case-differs",
    ],
)
def test_indexer_filters_drop_everything_else(record: dict[str, Any]) -> None:
    assert not passes(INDEXER_FILTERS, record), "a non-indexable change must be filtered out"


def test_remove_is_judged_by_the_old_image_only() -> None:
    # A REMOVE has no NewImage: the first pattern cannot match it, the second must.
    record = stream_record("REMOVE", old={"kind": "record"})

    assert not passes(INDEXER_FILTERS[:1], record)
    assert passes(INDEXER_FILTERS[1:2], record)


def test_no_filters_pass_everything() -> None:
    assert passes([], stream_record("INSERT", new={"kind": "session"}))


def test_filters_are_ored() -> None:
    record = {"a": "x", "b": "y"}

    assert passes(['{"a": ["nope"]}', '{"b": ["y"]}'], record)
    assert not passes(['{"a": ["nope"]}', '{"b": ["nope"]}'], record)


# -- exact values --------------------------------------------------------------------------


def test_exact_string_is_case_sensitive() -> None:
    assert matches({"name": ["Alice"]}, {"name": "Alice"})
    assert not matches({"name": ["Alice"]}, {"name": "alice"})


def test_a_list_of_values_is_an_or() -> None:
    assert matches({"pay": ["Credit", "Debit"]}, {"pay": "Debit"})
    assert not matches({"pay": ["Credit", "Debit"]}, {"pay": "Cash"})


def test_numbers_match_by_their_json_text() -> None:
    # Lambda: "300, 300.0 and 3.0e2 are not considered equal".
    assert passes(['{"price": [300]}'], {"price": 300})
    assert not passes(['{"price": [300]}'], {"price": 300.0})
    assert not passes(['{"price": [3.0e2]}'], {"price": 300.0})
    assert passes(['{"price": [300.0]}'], {"price": 300.0})


def test_a_number_never_equals_a_string() -> None:
    assert not matches({"n": [5]}, {"n": "5"})
    assert not matches({"n": ["5"]}, {"n": 5})


def test_null_matches_null_only() -> None:
    pattern = {"user": [None]}

    assert matches(pattern, {"user": None})
    assert not matches(pattern, {})
    assert not matches(pattern, {"user": ""})


def test_empty_string_matches_empty_string_only() -> None:
    pattern = {"last": [""]}

    assert matches(pattern, {"last": ""})
    assert not matches(pattern, {"last": None})
    assert not matches(pattern, {})


def test_booleans_match_booleans_not_numbers() -> None:
    assert matches({"ok": [True]}, {"ok": True})
    assert not matches({"ok": [True]}, {"ok": 1})
    assert not matches({"n": [1]}, {"n": True})


def test_a_missing_field_never_matches_a_value() -> None:
    assert not matches({"a": ["x"]}, {"b": "x"})


# -- nesting and arrays --------------------------------------------------------------------


def test_nested_objects_need_every_field() -> None:
    pattern = {"detail": {"state": ["on"], "zone": ["a"]}}

    assert matches(pattern, {"detail": {"state": "on", "zone": "a", "other": 1}})
    assert not matches(pattern, {"detail": {"state": "on", "zone": "b"}})
    assert not matches(pattern, {"detail": {"state": "on"}})


def test_a_value_pattern_does_not_match_an_object() -> None:
    assert not matches({"kind": ["record"]}, {"kind": {"S": "record"}})


def test_an_event_array_matches_when_any_element_does() -> None:
    assert matches({"tags": ["b"]}, {"tags": ["a", "b"]})
    assert not matches({"tags": ["c"]}, {"tags": ["a", "b"]})


def test_fields_under_an_array_of_objects_match_within_one_element() -> None:
    pattern = {"items": {"name": ["a"], "size": [1]}}
    event = {"items": [{"name": "a", "size": 2}, {"name": "b", "size": 1}]}

    assert not matches(pattern, event)
    assert matches(pattern, {"items": [{"name": "b"}, {"name": "a", "size": 1}]})


def test_or_across_fields() -> None:
    pattern = {"$or": [{"city": ["Paris"]}, {"day": ["Monday"]}]}

    assert matches(pattern, {"city": "Oslo", "day": "Monday"})
    assert not matches(pattern, {"city": "Oslo", "day": "Friday"})


# -- operators -----------------------------------------------------------------------------


def test_prefix_and_suffix() -> None:
    assert matches({"region": [{"prefix": "us-"}]}, {"region": "us-east-1"})
    assert not matches({"region": [{"prefix": "us-"}]}, {"region": "eu-west-1"})
    assert matches({"file": [{"suffix": ".png"}]}, {"file": "a.png"})
    assert not matches({"file": [{"suffix": ".png"}]}, {"file": "a.jpg"})
    assert not matches({"n": [{"prefix": "1"}]}, {"n": 12})


def test_prefix_ignoring_case() -> None:
    pattern = {"service": [{"prefix": {"equals-ignore-case": "EventB"}}]}

    assert matches(pattern, {"service": "eventbridge"})
    assert not matches(pattern, {"service": "lambda"})


def test_equals_ignore_case() -> None:
    pattern = {"name": [{"equals-ignore-case": "alice"}]}

    assert matches(pattern, {"name": "ALICE"})
    assert not matches(pattern, {"name": "alicia"})


def test_exists() -> None:
    assert matches({"p": [{"exists": True}]}, {"p": "x"})
    assert matches({"p": [{"exists": True}]}, {"p": None})
    assert not matches({"p": [{"exists": True}]}, {})
    assert matches({"p": [{"exists": False}]}, {})
    assert not matches({"p": [{"exists": False}]}, {"p": "x"})


def test_exists_sees_leaves_not_objects() -> None:
    # EventBridge: operators work on leaf nodes; an object is an intermediate node.
    event = {"NewImage": {"idx": {"S": "1"}}}

    assert not matches({"NewImage": {"idx": [{"exists": True}]}}, event)
    assert matches({"NewImage": {"idx": [{"exists": False}]}}, event)
    assert matches({"NewImage": {"idx": {"S": [{"exists": True}]}}}, event)


def test_does_not_exist_under_a_missing_parent() -> None:
    assert matches({"NewImage": {"idx": {"S": [{"exists": False}]}}}, {"OldImage": {}})


def test_exists_or_a_value() -> None:
    pattern = {"p": ["x", {"exists": False}]}

    assert matches(pattern, {"p": "x"})
    assert matches(pattern, {})
    assert not matches(pattern, {"p": "y"})


def test_anything_but_values() -> None:
    assert matches({"w": [{"anything-but": ["Rain", "Snow"]}]}, {"w": "Sun"})
    assert not matches({"w": [{"anything-but": ["Rain", "Snow"]}]}, {"w": "Snow"})
    assert not matches({"w": [{"anything-but": "Rain"}]}, {"w": "Rain"})
    assert matches({"n": [{"anything-but": [1, 2]}]}, {"n": 3})
    assert not matches({"n": [{"anything-but": 2}]}, {"n": 2})


def test_anything_but_needs_the_field() -> None:
    assert not matches({"w": [{"anything-but": ["Rain"]}]}, {})


def test_anything_but_prefix_suffix_and_case() -> None:
    assert matches({"r": [{"anything-but": {"prefix": "us-"}}]}, {"r": "eu-west-1"})
    assert not matches({"r": [{"anything-but": {"prefix": "us-"}}]}, {"r": "us-east-1"})
    assert not matches({"f": [{"anything-but": {"suffix": ".png"}}]}, {"f": "a.png"})
    assert not matches({"s": [{"anything-but": {"equals-ignore-case": "init"}}]}, {"s": "INIT"})
    assert matches({"s": [{"anything-but": {"equals-ignore-case": ["a", "b"]}}]}, {"s": "c"})


def test_anything_but_on_an_event_array_matches_if_any_element_is_not_excluded() -> None:
    assert matches({"tags": [{"anything-but": ["a"]}]}, {"tags": ["a", "b"]})
    assert not matches({"tags": [{"anything-but": ["a"]}]}, {"tags": ["a"]})


def test_numeric_range() -> None:
    pattern = {"price": [{"numeric": [">", 0, "<=", 5]}]}

    assert matches(pattern, {"price": 5})
    assert matches(pattern, {"price": 0.5})
    assert not matches(pattern, {"price": 0})
    assert not matches(pattern, {"price": 5.01})


def test_numeric_equals() -> None:
    assert matches({"price": [{"numeric": ["=", 100]}]}, {"price": 100.0})
    assert not matches({"price": [{"numeric": ["=", 100]}]}, {"price": 101})


def test_numeric_ignores_strings_such_as_dynamodb_numbers() -> None:
    assert not matches({"n": {"N": [{"numeric": [">", 0]}]}}, {"n": {"N": "5"}})


# -- refused patterns ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern",
    [
        {"a": [{"wildcard": "*x"}]},
        {"a": [{"cidr": "10.0.0.0/24"}]},
        {"a": [{"contains": "x"}]},
        {"a": [{"prefix": "x", "suffix": "y"}]},
        {"a": [{"anything-but": {"wildcard": "*"}}]},
        {"a": [{"anything-but": []}]},
        {"a": [{"anything-but": [None]}]},
        {"a": [{"exists": "yes"}]},
        {"a": [{"prefix": 1}]},
        {"a": [{"numeric": [">", "1"]}]},
        {"a": [{"numeric": ["<", 5, ">", 1]}]},
        {"a": [{"numeric": [">", 5, "<", 1]}]},
        {"a": [{"numeric": ["!=", 5]}]},
        {"a": [{"numeric": [">", 1, "<"]}]},
        {"a": []},
        {"a": "x"},
        {"a": 1},
        {"a": [["x"]]},
        {"$or": [{"a": ["x"]}]},
        {},
    ],
    ids=lambda pattern: json.dumps(pattern),
)
def test_unsupported_patterns_are_refused(pattern: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        matches(pattern, {"a": "x"})


def test_an_unknown_operator_is_refused_when_parsed_not_when_matched() -> None:
    with pytest.raises(ValueError, match="wildcard"):
        parse_pattern('{"a": [{"wildcard": "x*"}]}')


def test_a_pattern_that_is_not_json_is_refused() -> None:
    with pytest.raises(ValueError, match="JSON"):
        passes(["{not json"], {"a": "x"})
