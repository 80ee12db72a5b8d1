"""Merge rules of API.md (PATCH and PUT of a scratchpad), as pure functions."""

from __future__ import annotations

import copy

import pytest

from memkit.models.domain import ArrayMerge, PadFormat
from memkit.scratchpad.merge import (
    append_text,
    deep_merge,
    drop_nulls,
    merge_content,
    replacement_content,
    sanitize,
    union,
)

FORBIDDEN = ["__proto__", "constructor", "prototype"]

# -- sanitize ---------------------------------------------------------------------------------


@pytest.mark.parametrize("key", FORBIDDEN)
def test_sanitize_drops_a_forbidden_key_at_the_top_level(key: str) -> None:
    # Given an object with a forbidden key next to a normal one
    value = {key: {"polluted": True}, "name": "Ada"}

    # When it is sanitized
    clean = sanitize(value)

    # Then only the normal key is left
    assert clean == {"name": "Ada"}, f"{key} is dropped at the top level"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_sanitize_drops_a_forbidden_key_in_a_nested_object(key: str) -> None:
    # Given a forbidden key two objects deep
    value = {"a": {"b": {key: 1, "keep": 2}}}

    # When it is sanitized
    clean = sanitize(value)

    # Then the nested forbidden key is gone and its siblings stay
    assert clean == {"a": {"b": {"keep": 2}}}, f"{key} is dropped in nested objects"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_sanitize_drops_a_forbidden_key_in_objects_inside_arrays(key: str) -> None:
    # Given objects with a forbidden key inside a (nested) array
    value = {"items": [{key: 1, "id": 1}, [{key: 2, "id": 2}], "text"]}

    # When it is sanitized
    clean = sanitize(value)

    # Then every object in the arrays lost the key; other items are untouched
    assert clean == {"items": [{"id": 1}, [{"id": 2}], "text"]}, f"{key} is dropped in arrays"


def test_sanitize_keeps_keys_that_merely_contain_a_forbidden_word() -> None:
    # Given keys that resemble but are not the forbidden ones
    value = {"constructors": 1, "proto": 2, "__proto": 3, "Prototype": 4}

    # When it is sanitized
    clean = sanitize(value)

    # Then nothing is dropped (only exact matches are forbidden)
    assert clean == value, "only the exact forbidden keys are dropped"


def test_sanitize_does_not_mutate_its_input() -> None:
    # Given a nested value with forbidden keys
    value = {"__proto__": 1, "a": [{"constructor": 2}]}
    before = copy.deepcopy(value)

    # When it is sanitized
    sanitize(value)

    # Then the input is as it was
    assert value == before, "sanitize leaves its input unchanged"


# -- drop_nulls -------------------------------------------------------------------------------


def test_drop_nulls_removes_null_members_at_every_depth() -> None:
    # Given null members at the top, nested, and in an object inside an array
    value = {"a": None, "b": {"c": None, "d": 1}, "e": [{"f": None, "g": 2}]}

    # When nulls are dropped
    result = drop_nulls(value)

    # Then every null member is gone and everything else is kept
    assert result == {"b": {"d": 1}, "e": [{"g": 2}]}, "null members are removed at every depth"


def test_drop_nulls_keeps_null_items_of_arrays() -> None:
    # Given an array with a null item (an item, not an object member)
    value = {"list": [1, None, 2]}

    # When nulls are dropped
    result = drop_nulls(value)

    # Then the array keeps its null item: only object members are deleted by null
    assert result == {"list": [1, None, 2]}, "array items are not object members"


# -- union ------------------------------------------------------------------------------------


def test_union_appends_only_the_new_items_in_order() -> None:
    # Given a base list and an extra list overlapping it
    base, extra = ["a", "b"], ["b", "c", "d"]

    # When they are united
    result = union(base, extra)

    # Then base comes first, then the new items of extra in their order
    assert result == ["a", "b", "c", "d"], "union is a deduplicated concatenation, order kept"


def test_union_deduplicates_within_the_extra_items() -> None:
    # Given an extra list repeating an item
    base, extra = ["a"], ["b", "b", "a"]

    # When they are united
    result = union(base, extra)

    # Then the repeated item is added once
    assert result == ["a", "b"], "an item repeated in extra is added once"


def test_union_compares_objects_by_json_value_not_key_order() -> None:
    # Given an object in base and the same object with its keys in another order
    base, extra = [{"a": 1, "b": [1, 2]}], [{"b": [1, 2], "a": 1}, {"a": 2}]

    # When they are united
    result = union(base, extra)

    # Then the equal object is not added again, the different one is
    assert result == [{"a": 1, "b": [1, 2]}, {"a": 2}], "objects are compared by JSON value"


@pytest.mark.parametrize(
    ("present", "candidate"),
    [(1, "1"), (1, True), (0, False), (None, 0), ([1, 2], [2, 1]), ({"a": 1}, {"a": "1"})],
)
def test_union_treats_different_json_values_as_different(
    present: object, candidate: object
) -> None:
    # Given two values that differ as JSON
    base, extra = [present], [candidate]

    # When they are united
    result = union(base, extra)

    # Then both are kept
    assert result == [present, candidate], "values that differ as JSON are both kept"


def test_union_does_not_mutate_its_inputs() -> None:
    # Given two lists
    base, extra = [1, {"a": 1}], [2]

    # When they are united
    union(base, extra)

    # Then neither input list changed
    assert (base, extra) == ([1, {"a": 1}], [2]), "union leaves its inputs unchanged"


# -- deep_merge -------------------------------------------------------------------------------


def test_deep_merge_merges_nested_objects_key_by_key() -> None:
    # Given nested objects in both base and patch
    base = {"user": {"name": "Ada", "prefs": {"theme": "dark", "lang": "en"}}, "n": 1}
    patch = {"user": {"prefs": {"lang": "fr"}, "age": 36}}

    # When the patch is merged
    merged = deep_merge(base, patch, ArrayMerge.UNION)

    # Then untouched keys stay, changed keys change, new keys are added, at every depth
    assert merged == {
        "user": {"name": "Ada", "prefs": {"theme": "dark", "lang": "fr"}, "age": 36},
        "n": 1,
    }, "objects deep-merge"


def test_deep_merge_null_deletes_a_top_level_key() -> None:
    # Given a base with two keys
    base = {"a": 1, "b": 2}

    # When a patch sets one of them to null
    merged = deep_merge(base, {"a": None}, ArrayMerge.UNION)

    # Then that key is deleted
    assert merged == {"b": 2}, "null deletes the key"


def test_deep_merge_null_deletes_a_nested_key() -> None:
    # Given a nested object
    base = {"prefs": {"theme": "dark", "lang": "en"}}

    # When a patch sets a nested member to null
    merged = deep_merge(base, {"prefs": {"theme": None}}, ArrayMerge.UNION)

    # Then only that nested member is deleted
    assert merged == {"prefs": {"lang": "en"}}, "null deletes a nested key"


def test_deep_merge_null_for_a_missing_key_is_a_no_op() -> None:
    # Given a base without the key
    base = {"a": 1}

    # When a patch deletes a key that is not there
    merged = deep_merge(base, {"ghost": None}, ArrayMerge.UNION)

    # Then nothing changes (and no null is stored)
    assert merged == {"a": 1}, "deleting a missing key changes nothing"


def test_deep_merge_drops_nulls_inside_a_new_object() -> None:
    # Given a base without the key
    base: dict[str, object] = {}

    # When a patch adds an object carrying null members
    merged = deep_merge(base, {"prefs": {"theme": None, "lang": "en"}}, ArrayMerge.UNION)

    # Then the null members are not stored
    assert merged == {"prefs": {"lang": "en"}}, "null members of a new object are not stored"


def test_deep_merge_union_concatenates_arrays_without_duplicates() -> None:
    # Given an array in base
    base = {"tags": ["a", "b"]}

    # When a patch brings an overlapping array under union
    merged = deep_merge(base, {"tags": ["b", "c"]}, ArrayMerge.UNION)

    # Then the arrays are united, order kept
    assert merged == {"tags": ["a", "b", "c"]}, "arrays union under array_merge=union"


def test_deep_merge_union_deduplicates_objects_inside_arrays() -> None:
    # Given an array of objects in base
    base = {"pets": [{"name": "Rex", "kind": "dog"}]}

    # When a patch brings the same object (other key order) and a new one
    patch = {"pets": [{"kind": "dog", "name": "Rex"}, {"name": "Tom", "kind": "cat"}]}
    merged = deep_merge(base, patch, ArrayMerge.UNION)

    # Then the same object is kept once and the new one appended
    assert merged == {"pets": [{"name": "Rex", "kind": "dog"}, {"name": "Tom", "kind": "cat"}]}, (
        "objects inside union-merged arrays are deduplicated by value"
    )


def test_deep_merge_union_in_nested_objects() -> None:
    # Given an array inside a nested object
    base = {"user": {"tags": [1, 2]}}

    # When a nested patch brings more items
    merged = deep_merge(base, {"user": {"tags": [2, 3]}}, ArrayMerge.UNION)

    # Then the nested arrays are united too
    assert merged == {"user": {"tags": [1, 2, 3]}}, "union applies at every depth"


def test_deep_merge_replace_swaps_arrays() -> None:
    # Given an array in base
    base = {"tags": ["a", "b"]}

    # When a patch brings another array under replace
    merged = deep_merge(base, {"tags": ["b", "c"]}, ArrayMerge.REPLACE)

    # Then the patch's array replaces the old one
    assert merged == {"tags": ["b", "c"]}, "arrays are replaced under array_merge=replace"


def test_deep_merge_replace_can_empty_an_array() -> None:
    # Given an array in base
    base = {"tags": ["a"]}

    # When a patch brings an empty array under replace
    merged = deep_merge(base, {"tags": []}, ArrayMerge.REPLACE)

    # Then the array is empty
    assert merged == {"tags": []}, "an empty array replaces under array_merge=replace"


def test_deep_merge_union_with_an_empty_array_keeps_the_old_items() -> None:
    # Given an array in base
    base = {"tags": ["a"]}

    # When a patch brings an empty array under union
    merged = deep_merge(base, {"tags": []}, ArrayMerge.UNION)

    # Then nothing is removed
    assert merged == {"tags": ["a"]}, "union never removes items"


@pytest.mark.parametrize(
    ("old", "new"),
    [(1, 2), ("a", "b"), (True, False), (1, "one"), ("x", 0), ([1], "now a string"), ("s", [1])],
)
def test_deep_merge_scalars_and_mismatched_types_replace(old: object, new: object) -> None:
    # Given a value in base
    base = {"k": old}

    # When a patch brings a scalar, or an array for a scalar (or vice versa)
    merged = deep_merge(base, {"k": new}, ArrayMerge.UNION)

    # Then the patch's value replaces the old one
    assert merged == {"k": new}, "scalars (and mismatched types) replace"


def test_deep_merge_object_replaces_a_scalar() -> None:
    # Given a scalar in base
    base = {"k": "plain"}

    # When a patch brings an object for it
    merged = deep_merge(base, {"k": {"a": 1}}, ArrayMerge.UNION)

    # Then the object replaces the scalar
    assert merged == {"k": {"a": 1}}, "an object replaces a scalar"


def test_deep_merge_scalar_replaces_an_object() -> None:
    # Given an object in base
    base = {"k": {"a": 1, "b": 2}}

    # When a patch brings a scalar for it
    merged = deep_merge(base, {"k": 7}, ArrayMerge.UNION)

    # Then the scalar replaces the whole object
    assert merged == {"k": 7}, "a scalar replaces an object"


def test_deep_merge_array_replaces_an_object() -> None:
    # Given an object in base
    base = {"k": {"a": 1}}

    # When a patch brings an array for it
    merged = deep_merge(base, {"k": [1]}, ArrayMerge.UNION)

    # Then the array replaces the object
    assert merged == {"k": [1]}, "an array replaces an object"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_deep_merge_drops_a_forbidden_top_level_key(key: str) -> None:
    # Given any base
    base = {"a": 1}

    # When a patch carries a forbidden key at the top level
    merged = deep_merge(base, {key: {"polluted": True}, "b": 2}, ArrayMerge.UNION)

    # Then the forbidden key is not merged, the rest is
    assert merged == {"a": 1, "b": 2}, f"{key} is dropped at the top level"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_deep_merge_drops_a_forbidden_key_in_an_object_being_merged(key: str) -> None:
    # Given an object in base
    base = {"prefs": {"theme": "dark"}}

    # When a patch merges into it with a forbidden key
    merged = deep_merge(base, {"prefs": {key: {"x": 1}, "lang": "en"}}, ArrayMerge.UNION)

    # Then the forbidden key is dropped inside the merged object
    assert merged == {"prefs": {"theme": "dark", "lang": "en"}}, f"{key} dropped when merging"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_deep_merge_drops_a_forbidden_key_in_a_new_nested_object(key: str) -> None:
    # Given a base without the key
    base: dict[str, object] = {}

    # When a patch adds a nested object with a forbidden key deep inside
    merged = deep_merge(base, {"a": {"b": {key: 1, "c": 2}}}, ArrayMerge.UNION)

    # Then the forbidden key is dropped
    assert merged == {"a": {"b": {"c": 2}}}, f"{key} is dropped in new nested objects"


@pytest.mark.parametrize("array_merge", list(ArrayMerge))
@pytest.mark.parametrize("key", FORBIDDEN)
def test_deep_merge_drops_a_forbidden_key_in_objects_inside_a_new_array(
    key: str, array_merge: ArrayMerge
) -> None:
    # Given a base without the array
    base: dict[str, object] = {}

    # When a patch adds an array of objects with a forbidden key
    merged = deep_merge(base, {"list": [{key: 1, "id": 1}]}, array_merge)

    # Then the objects in the array lost the key
    assert merged == {"list": [{"id": 1}]}, f"{key} is dropped in objects inside arrays"


@pytest.mark.parametrize("key", FORBIDDEN)
def test_deep_merge_drops_a_forbidden_key_in_a_union_merged_array(key: str) -> None:
    # Given an array of objects in base
    base = {"list": [{"id": 1}]}

    # When a patch unions in objects with a forbidden key, one equal to an existing one
    patch = {"list": [{"id": 1, key: "x"}, {"id": 2, key: {"y": 1}}]}
    merged = deep_merge(base, patch, ArrayMerge.UNION)

    # Then the key is dropped before deduplication: the first is a duplicate, the second is new
    assert merged == {"list": [{"id": 1}, {"id": 2}]}, f"{key} is dropped in union-merged arrays"


def test_deep_merge_does_not_mutate_base_or_patch() -> None:
    # Given nested base and patch with arrays, nulls and a forbidden key
    base = {"a": {"b": [1, {"c": 1}], "d": 1}, "e": "x"}
    patch = {"a": {"b": [2, {"c": None}], "d": None, "__proto__": 1}, "f": {"g": None}}
    base_before, patch_before = copy.deepcopy(base), copy.deepcopy(patch)

    # When the patch is merged
    deep_merge(base, patch, ArrayMerge.UNION)

    # Then neither input changed
    assert (base, patch) == (base_before, patch_before), "deep_merge leaves its inputs unchanged"


def test_deep_merge_result_does_not_alias_the_patch() -> None:
    # Given a patch with a nested object
    patch = {"a": {"b": 1}}

    # When it is merged and the result is changed afterwards
    merged = deep_merge({}, patch, ArrayMerge.UNION)
    merged["a"]["b"] = 2

    # Then the patch still holds its own value
    assert patch == {"a": {"b": 1}}, "the result shares no objects with the patch"


# -- append_text ------------------------------------------------------------------------------


def test_append_text_markdown_uses_a_blank_line() -> None:
    # Given markdown content
    base = "# Notes\n- one"

    # When text is appended
    result = append_text(base, "- two", PadFormat.MARKDOWN)

    # Then a blank line separates the two
    assert result == "# Notes\n- one\n\n- two", 'markdown appends after "\\n\\n"'


def test_append_text_text_uses_a_newline() -> None:
    # Given text content
    base = "one"

    # When text is appended
    result = append_text(base, "two", PadFormat.TEXT)

    # Then a single newline separates the two
    assert result == "one\ntwo", 'text appends after "\\n"'


@pytest.mark.parametrize("pad_format", [PadFormat.MARKDOWN, PadFormat.TEXT])
@pytest.mark.parametrize("empty", [None, ""])
def test_append_text_to_empty_is_just_the_addition(
    empty: str | None, pad_format: PadFormat
) -> None:
    # Given empty content
    # When text is appended
    result = append_text(empty, "first", pad_format)

    # Then the result is the addition alone, with no leading separator
    assert result == "first", "appending to empty gives just the addition"


@pytest.mark.parametrize(
    ("pad_format", "expected"),
    [(PadFormat.MARKDOWN, "one\n\ntwo"), (PadFormat.TEXT, "one\ntwo")],
)
def test_append_text_keeps_exactly_one_separator(pad_format: PadFormat, expected: str) -> None:
    # Given content ending in newlines and an addition starting with newlines
    base, addition = "one\n\n\n", "\n\ntwo"

    # When it is appended
    result = append_text(base, addition, pad_format)

    # Then exactly one separator joins them
    assert result == expected, "surrounding newlines collapse into one separator"


def test_append_text_of_nothing_leaves_the_content_unchanged() -> None:
    # Given some content
    base = "one"

    # When an empty string is appended
    result = append_text(base, "", PadFormat.MARKDOWN)

    # Then no dangling separator is added
    assert result == "one", "appending nothing changes nothing"


# -- merge_content / replacement_content --------------------------------------------------------


def test_merge_content_json_into_empty_starts_from_an_empty_object() -> None:
    # Given no content yet
    current = None

    # When a JSON patch with a null and a forbidden key is merged
    patch = {"a": 1, "b": None, "__proto__": {"x": 1}}
    merged = merge_content(current, patch, PadFormat.JSON, ArrayMerge.UNION)

    # Then the result is the patch without nulls and forbidden keys
    assert merged == {"a": 1}, "a patch on empty JSON content is sanitized and stored"


def test_merge_content_json_follows_the_array_merge_setting() -> None:
    # Given JSON content with an array
    current = {"tags": ["a"]}

    # When a patch is merged under replace
    merged = merge_content(current, {"tags": ["b"]}, PadFormat.JSON, ArrayMerge.REPLACE)

    # Then the array_merge setting was applied
    assert merged == {"tags": ["b"]}, "merge_content passes array_merge on"


@pytest.mark.parametrize(
    ("pad_format", "expected"),
    [(PadFormat.MARKDOWN, "old\n\nnew"), (PadFormat.TEXT, "old\nnew")],
)
def test_merge_content_text_formats_append(pad_format: PadFormat, expected: str) -> None:
    # Given text content
    current = "old"

    # When a patch is merged
    merged = merge_content(current, "new", pad_format, ArrayMerge.UNION)

    # Then it is appended after the format's separator
    assert merged == expected, f"{pad_format} merges by appending"


@pytest.mark.parametrize("pad_format", [PadFormat.MARKDOWN, PadFormat.TEXT])
def test_merge_content_text_into_empty_is_the_patch(pad_format: PadFormat) -> None:
    # Given no content yet
    # When text is merged
    merged = merge_content(None, "first", pad_format, ArrayMerge.UNION)

    # Then the content is the patch alone
    assert merged == "first", "merging into empty text gives the patch"


def test_merge_content_does_not_mutate_the_current_content() -> None:
    # Given stored JSON content
    current = {"a": {"b": [1]}, "c": 1}
    before = copy.deepcopy(current)

    # When a patch is merged
    merge_content(current, {"a": {"b": [2]}, "c": None}, PadFormat.JSON, ArrayMerge.UNION)

    # Then the stored content object is unchanged
    assert current == before, "merge_content leaves the current content unchanged"


def test_replacement_content_json_drops_nulls_and_forbidden_keys_at_every_depth() -> None:
    # Given a replacement object with nulls and forbidden keys at several depths
    content = {
        "a": None,
        "constructor": 1,
        "b": {"c": None, "prototype": 2, "d": 3},
        "e": [{"__proto__": 4, "f": None, "g": 5}],
    }

    # When it is prepared for storage
    stored = replacement_content(content, PadFormat.JSON)

    # Then only the clean members are stored
    assert stored == {"b": {"d": 3}, "e": [{"g": 5}]}, "a replace is sanitized and null-free"


@pytest.mark.parametrize("pad_format", [PadFormat.MARKDOWN, PadFormat.TEXT])
def test_replacement_content_text_is_stored_as_is(pad_format: PadFormat) -> None:
    # Given replacement text with surrounding whitespace
    content = "\n  # Title\n\n"

    # When it is prepared for storage
    stored = replacement_content(content, pad_format)

    # Then it is stored unchanged
    assert stored == content, "text replaces verbatim"


def test_replacement_content_does_not_mutate_its_input() -> None:
    # Given a replacement object with a null and a forbidden key
    content = {"a": None, "b": {"__proto__": 1}}
    before = copy.deepcopy(content)

    # When it is prepared for storage
    replacement_content(content, PadFormat.JSON)

    # Then the input is unchanged
    assert content == before, "replacement_content leaves its input unchanged"
