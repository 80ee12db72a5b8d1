"""JSON Schema checks: the profile's schema itself, and content against it."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.errors import FieldProblem
from memkit.scratchpad.schema import (
    MAX_BRANCHES,
    MAX_CHECK_STEPS,
    MAX_PROBLEMS,
    content_problems,
    schema_problems,
)
from memkit.tokens import content_tokens

DRAFT_07 = "http://json-schema.org/draft-07/schema#"

PREFERENCES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "preferences": {
            "type": "object",
            "properties": {"theme": {"enum": ["dark", "light"]}},
            "required": ["theme"],
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["name"],
}


def fields(problems: list[FieldProblem]) -> list[str]:
    return [p.field for p in problems]


# -- schema_problems --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "schema",
    [
        PREFERENCES,
        {},
        {"properties": {"a": {"type": "integer"}}},
        {"type": ["object", "null"]},
        {"$schema": DRAFT_07, "type": "object"},
    ],
)
def test_schema_problems_accepts_a_valid_object_schema(schema: dict[str, Any]) -> None:
    # Given a valid schema describing an object (or not restricting the type)
    # When it is checked
    problems = schema_problems(schema)

    # Then there is nothing to report
    assert problems == [], "a valid object schema has no problems"


def test_schema_problems_detects_an_unknown_type() -> None:
    # Given a schema with a type JSON Schema does not know
    schema = {"type": "nope"}

    # When it is checked
    problems = schema_problems(schema)

    # Then the problem is reported at schema.type
    assert fields(problems) == ["schema.type"], "an invalid type is reported at schema.type"


def test_schema_problems_names_the_path_of_a_nested_error() -> None:
    # Given a schema whose nested property has an invalid type
    schema = {"type": "object", "properties": {"age": {"type": "nope"}}}

    # When it is checked
    problems = schema_problems(schema)

    # Then the problem names the nested path inside the schema
    assert fields(problems) == ["schema.properties.age.type"], "nested schema errors name a path"


def test_schema_problems_rejects_a_non_object_keyword_value() -> None:
    # Given a schema whose `required` is not an array
    schema = {"type": "object", "required": "name"}

    # When it is checked
    problems = schema_problems(schema)

    # Then it is reported at schema.required
    assert fields(problems) == ["schema.required"], "a malformed keyword is reported"


@pytest.mark.parametrize("declared", ["array", "string", "integer", "null", ["string", "number"]])
def test_schema_problems_refuses_a_non_object_top_level_type(declared: Any) -> None:
    # Given a valid schema whose top level is not an object
    schema = {"type": declared}

    # When it is checked
    problems = schema_problems(schema)

    # Then it is refused at schema.type: a scratchpad holds an object
    assert fields(problems) == ["schema.type"], "a scratchpad schema must describe an object"


def test_schema_problems_honours_draft_07_declared_in_dollar_schema() -> None:
    # Given a draft-07 schema using tuple `items` (an array), valid only before 2020-12
    schema = {
        "$schema": DRAFT_07,
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
        },
    }

    # When it is checked
    problems = schema_problems(schema)

    # Then it is valid: the declared dialect is the one applied
    assert problems == [], "$schema draft-07 is honoured"


def test_schema_problems_defaults_to_draft_2020_12() -> None:
    # Given the same tuple `items` schema without `$schema`
    schema = {
        "type": "object",
        "properties": {
            "pair": {"type": "array", "items": [{"type": "string"}, {"type": "integer"}]}
        },
    }

    # When it is checked
    problems = schema_problems(schema)

    # Then 2020-12 applies and refuses an array for `items`
    assert fields(problems) == ["schema.properties.pair.items"], "without $schema, 2020-12 applies"


# -- content_problems -------------------------------------------------------------------------


def test_content_problems_accepts_valid_content() -> None:
    # Given content matching the schema
    content = {"name": "Ada", "preferences": {"theme": "dark"}, "tags": ["x"]}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then there is nothing to report
    assert problems == [], "valid content has no problems"


def test_content_problems_names_the_field_path_of_a_nested_value() -> None:
    # Given content with a nested value outside its enum
    content = {"name": "Ada", "preferences": {"theme": "blue"}}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then the problem names content.preferences.theme
    assert fields(problems) == ["content.preferences.theme"], "nested problems name their path"


def test_content_problems_gives_the_validator_reason() -> None:
    # Given content with a value of the wrong type
    content = {"name": 42}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then the reason says what is wrong
    assert problems == [FieldProblem("content.name", "42 is not of type 'string'")], (
        "the reason is the validator's message"
    )


def test_content_problems_names_array_items_by_index() -> None:
    # Given content with a wrong item in an array
    content = {"name": "Ada", "tags": ["ok", 7]}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then the item is named by its index
    assert fields(problems) == ["content.tags.1"], "array items are named by index"


def test_content_problems_names_a_missing_required_member() -> None:
    # Given content lacking a required top-level member
    content = {"tags": []}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then the missing member itself is named, as content.<name>
    assert problems == [FieldProblem("content.name", "is required")], "required members are named"


def test_content_problems_names_a_missing_nested_required_member() -> None:
    # Given content whose nested object lacks a required member
    content = {"name": "Ada", "preferences": {}}

    # When it is checked
    problems = content_problems(PREFERENCES, content)

    # Then the nested member is named with its full path
    assert problems == [FieldProblem("content.preferences.theme", "is required")], (
        "nested required members are named with their path"
    )


def test_content_problems_lists_each_missing_required_member_once() -> None:
    # Given a schema requiring three members and content with only one
    schema = {"type": "object", "required": ["a", "b", "c"]}

    # When it is checked
    problems = content_problems(schema, {"b": 1})

    # Then each missing member is listed exactly once, the present one not at all
    assert fields(problems) == ["content.a", "content.c"], "each missing member is listed once"


def test_content_problems_uses_the_prefix_given() -> None:
    # Given content with a nested problem
    content = {"name": "Ada", "preferences": {"theme": "blue"}}

    # When it is checked with another prefix
    problems = content_problems(PREFERENCES, content, prefix="patch")

    # Then the path starts with that prefix
    assert fields(problems) == ["patch.preferences.theme"], "the prefix starts the path"


def test_content_problems_without_prefix_names_the_bare_path() -> None:
    # Given content with a nested problem
    content = {"name": "Ada", "preferences": {"theme": "blue"}}

    # When it is checked with an empty prefix
    problems = content_problems(PREFERENCES, content, prefix="")

    # Then the path has no leading dot
    assert fields(problems) == ["preferences.theme"], "an empty prefix gives the bare path"


def test_content_problems_honours_draft_07_keywords() -> None:
    # Given a draft-07 schema using `dependencies` (dropped from 2020-12)
    schema = {"$schema": DRAFT_07, "type": "object", "dependencies": {"a": ["b"]}}

    # When content breaking the dependency is checked
    problems = content_problems(schema, {"a": 1})

    # Then the draft-07 keyword was enforced
    assert fields(problems) == ["content"], "draft-07 keywords apply when $schema says so"


def test_content_problems_ignores_draft_07_keywords_under_2020_12() -> None:
    # Given the same schema without `$schema` (2020-12 treats `dependencies` as unknown)
    schema = {"type": "object", "dependencies": {"a": ["b"]}}

    # When the same content is checked
    problems = content_problems(schema, {"a": 1})

    # Then nothing is reported
    assert problems == [], "2020-12 ignores the draft-07 keyword"


def test_content_problems_asserts_formats() -> None:
    # Given a schema with a string format
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}

    # When a value not in that format is checked
    problems = content_problems(schema, {"email": "not-an-address"})

    # Then the format is enforced, not just annotated
    assert fields(problems) == ["content.email"], "formats are asserted"


def test_content_problems_caps_missing_required_members() -> None:
    # Given a schema requiring more members than the cap
    names = [f"m{i:02d}" for i in range(MAX_PROBLEMS + 10)]
    schema = {"type": "object", "required": names}

    # When empty content is checked
    problems = content_problems(schema, {})

    # Then at most MAX_PROBLEMS are returned
    assert len(problems) == MAX_PROBLEMS, "problems are capped"


def test_content_problems_caps_type_errors() -> None:
    # Given content with more wrong values than the cap
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    content = {f"k{i:02d}": i for i in range(MAX_PROBLEMS + 10)}

    # When it is checked
    problems = content_problems(schema, content)

    # Then at most MAX_PROBLEMS are returned
    assert len(problems) == MAX_PROBLEMS, "problems are capped"


# -- $refs that fan out -------------------------------------------------------------------------


def fan_out(
    levels: int, applicator: str = "allOf", last: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Definitions each referring to the next one twice, `levels` deep, used by property x:
    2**levels copies of the last one (`last`, else an object) once the $refs are followed."""

    def twice(n: int) -> dict[str, Any]:
        ref = {"$ref": f"#/$defs/d{n + 1}"}
        if applicator == "allOf":
            return {"allOf": [ref, dict(ref)]}
        return {"properties": {"a": ref, "b": dict(ref)}}

    defs = {f"d{n}": twice(n) for n in range(levels)}
    defs[f"d{levels}"] = last if last is not None else {"type": "object"}
    return {"type": "object", "properties": {"x": {"$ref": "#/$defs/d0"}}, "$defs": defs}


def multiplying(depth: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """A recursive schema whose two allOf branches both descend into property a, and content
    nested `depth` levels in a: each level of the content doubles the schemas applied."""
    step = {"properties": {"a": {"$ref": "#/$defs/n"}}}
    schema = {"$defs": {"n": {"type": "object", "allOf": [step, dict(step)]}}, "$ref": "#/$defs/n"}
    content: dict[str, Any] = {}
    for _ in range(depth):
        content = {"a": content}
    return schema, content


LINKED_LIST: dict[str, Any] = {
    "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}},
    "type": "object",
    "properties": {"head": {"$ref": "#/$defs/node"}},
}
TREE: dict[str, Any] = {
    "$defs": {
        "tree": {
            "type": "object",
            "properties": {
                "value": {"type": "integer"},
                "left": {"$ref": "#/$defs/tree"},
                "right": {"$ref": "#/$defs/tree"},
            },
        }
    },
    "$ref": "#/$defs/tree",
}
EXPRESSION: dict[str, Any] = {  # mutual recursion: an expression, a sum of two, a negation
    "$defs": {
        "expr": {"anyOf": [{"$ref": "#/$defs/sum"}, {"$ref": "#/$defs/neg"}, {"type": "number"}]},
        "sum": {
            "type": "object",
            "properties": {"l": {"$ref": "#/$defs/expr"}, "r": {"$ref": "#/$defs/expr"}},
            "required": ["l", "r"],
        },
        "neg": {
            "type": "object",
            "properties": {"neg": {"$ref": "#/$defs/expr"}},
            "required": ["neg"],
        },
    },
    "type": "object",
    "properties": {"e": {"$ref": "#/$defs/expr"}},
}
ADDRESS = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
SHARED: dict[str, Any] = {
    "$defs": {"address": ADDRESS},
    "type": "object",
    "properties": {
        "home": {"$ref": "#/$defs/address"},
        "work": {"$ref": "#/$defs/address"},
        "past": {"type": "array", "items": {"$ref": "#/$defs/address"}},
    },
}


@pytest.mark.parametrize("applicator", ["allOf", "properties"])
def test_a_schema_whose_refs_fan_out_is_refused_at_the_outermost_ref(applicator: str) -> None:
    # Given definitions that each refer to the next one twice, 30 levels deep
    schema = fan_out(30, applicator)

    # When the schema is checked
    problems = schema_problems(schema)

    # Then the $ref that uses them is named, with the reason
    assert fields(problems) == ["schema.properties.x.$ref"], "the outermost $ref is named"
    assert "expands to more than 10000 JSON values" in problems[0].reason


def test_a_schema_that_fans_out_below_the_limit_is_accepted() -> None:
    assert schema_problems(fan_out(8)) == [], "2**8 copies of a small definition are fine"


def test_many_refs_that_each_stay_below_the_limit_are_refused_at_the_schema() -> None:
    # Given 40 properties each referring to a definition of 300 values (12,000 in all)
    big = {"enum": list(range(299))}
    schema = {
        "$defs": {"big": big},
        "properties": {f"p{n}": {"$ref": "#/$defs/big"} for n in range(40)},
    }

    assert fields(schema_problems(schema)) == ["schema"], "the sum is what is too large"


@pytest.mark.parametrize(
    ("schema", "content"),
    [
        (LINKED_LIST, {"head": {"next": {"next": {"next": {}}}}}),
        (TREE, {"value": 1, "left": {"value": 2, "right": {"value": 3}}}),
        (EXPRESSION, {"e": {"l": 1, "r": {"neg": {"l": 2, "r": 3}}}}),
        (SHARED, {"home": {"city": "Oslo"}, "work": {"city": "Bergen"}, "past": []}),
        (fan_out(8), {"x": {}}),
        ({"type": "object", "properties": {"self": {"$ref": "#"}}}, {"self": {"self": {}}}),
    ],
)
def test_ordinary_schemas_with_refs_are_accepted_and_check_content(
    schema: dict[str, Any], content: dict[str, Any]
) -> None:
    assert schema_problems(schema) == []
    assert content_problems(schema, content) == []


@pytest.mark.parametrize(
    ("last", "field"),
    [
        ({"$ref": "#"}, "schema.properties.x.$ref"),  # back to the top
        ({"$ref": "#/$defs/d0"}, "schema.$defs.d30.$ref"),  # back to the first definition
    ],
)
def test_a_fan_out_that_refers_back_to_where_it_starts_is_refused(
    last: dict[str, Any], field: str
) -> None:
    # Given the 30-level fan-out whose last definition refers back to the top, or to the
    # first definition: a cycle, in which every definition is part of one recursion
    schema = fan_out(30, last=last)

    # When it is checked, and content against it as if stored before the check
    problems = schema_problems(schema)
    stored = content_problems(schema, {"x": {}})

    # Then it is refused at the outermost $ref into the fan-out (2**30 copies, only the
    # $ref that closes the cycle counted once), and the content is never evaluated
    assert fields(problems) == [field]
    assert "expands to more than 10000 JSON values" in problems[0].reason
    assert stored == problems


def test_a_ref_to_one_large_definition_is_refused_at_the_ref() -> None:
    schema = {
        "$defs": {"big": {"enum": list(range(50_000))}},
        "properties": {"a": {"$ref": "#/$defs/big"}},
    }

    assert fields(schema_problems(schema)) == ["schema.properties.a.$ref"]


def test_mutual_recursion_is_counted_once_around() -> None:
    # Given an expression grammar used at 200 places: each use is a few dozen values
    schema = {**EXPRESSION, "properties": {f"e{n}": {"$ref": "#/$defs/expr"} for n in range(200)}}

    assert schema_problems(schema) == []


def test_many_refs_into_one_large_recursion_are_refused_at_the_schema() -> None:
    # Given a ring of 300 definitions, each referring to the next, and a property for each:
    # every property is the whole ring once around (about 1,800 values), 540,000 in all
    ring = {
        f"r{n}": {"properties": {"next": {"$ref": f"#/$defs/r{(n + 1) % 300}"}}} for n in range(300)
    }
    schema = {"$defs": ring, "properties": {f"p{n}": {"$ref": f"#/$defs/r{n}"} for n in range(300)}}

    assert fields(schema_problems(schema)) == ["schema"], "the sum is what is too large"


def test_content_is_checked_through_refs_naming_the_field() -> None:
    content = {"home": {"city": "Oslo"}, "past": [{"city": "Rome"}, {}]}

    problems = content_problems(SHARED, content)

    assert problems == [FieldProblem("content.past.1.city", "is required")]


def test_a_stored_schema_whose_refs_fan_out_is_not_evaluated() -> None:
    # Given a schema stored before the check (14 levels: 16,384 copies of the last one)
    schema = fan_out(14)

    # When content is checked against it
    problems = content_problems(schema, {"x": {}})

    # Then the schema is refused rather than evaluated
    assert fields(problems) == ["schema.properties.x.$ref"]
    assert "expands to more than" in problems[0].reason


def test_content_whose_check_multiplies_at_each_level_is_refused() -> None:
    # Given a recursive schema that passes the count (its recursion counts once) but applies
    # itself twice at each level of the content, and content 20 levels deep (2**20 checks)
    schema, content = multiplying(20)
    assert schema_problems(schema) == []

    # When the content is checked
    problems = content_problems(schema, content)

    # Then the check stops and says why
    assert fields(problems) == ["schema"]
    assert "multiply at each level of the content" in problems[0].reason


def test_a_check_stops_after_200_000_steps() -> None:
    # Given content 15 levels deep in the multiplying schema: about 330,000 keyword
    # evaluations, several times what a read of ordinary content costs
    schema, content = multiplying(15)

    # When it is checked, it is refused at the schema
    assert fields(content_problems(schema, content)) == ["schema"]


def test_the_largest_content_against_an_any_of_is_checked_within_the_steps() -> None:
    # Given six object variants and 64,000 tokens of items matching only the last one
    # (about 113,000 keyword evaluations)
    variants = [
        {
            "type": "object",
            "properties": {
                "kind": {"const": k},
                "text": {"type": "string"},
                "n": {"type": "integer"},
            },
            "required": ["kind", "text", "n"],
            "additionalProperties": False,
        }
        for k in "abcdef"
    ]
    schema = {
        "type": "object",
        "properties": {"items": {"type": "array", "items": {"anyOf": variants}}},
    }
    content = {"items": [{"kind": "f", "text": "word", "n": n} for n in range(2_660)]}
    assert 63_000 < content_tokens(content) <= 64_000

    # When it is checked, it passes, and a wrong item deep in it is named
    assert content_problems(schema, content) == []
    content["items"][2_000]["n"] = "x"
    assert fields(content_problems(schema, content)) == ["content.items.2000"]


def test_a_multiplying_schema_still_checks_shallow_content() -> None:
    schema, content = multiplying(5)

    assert content_problems(schema, content) == []
    assert fields(content_problems(schema, {"a": {"a": 1}}))[0] == "content.a.a"


# -- references: where they may point -----------------------------------------------------------

REFERENCE_KEYWORDS = ["$ref", "$dynamicRef", "$recursiveRef"]


@pytest.mark.parametrize("keyword", REFERENCE_KEYWORDS)
@pytest.mark.parametrize(
    ("reference", "reason"),
    [
        ("http://[::1", "only references within the schema (#...)"),  # urlsplit: Invalid IPv6
        ("#/allOf/x", "'#/allOf/x' points at nothing"),  # an array index that is no number
        ("#/type/0", "'#/type/0' points at a value that is not a schema"),  # "o" of "object"
        ("#/nowhere", "'#/nowhere' points at nothing"),
    ],
)
def test_every_reference_keyword_must_point_inside_the_schema_at_a_schema(
    keyword: str, reference: str, reason: str
) -> None:
    # Given a schema with a reference of each kind that leads out, nowhere, or at a non-schema
    schema = {"type": "object", "allOf": [{}], "properties": {"a": {keyword: reference}}}

    # When it is checked, and content is checked against it as if stored before the check
    problems = schema_problems(schema)
    stored = content_problems(schema, {"a": 1})

    # Then both name the reference with the reason, and neither raises
    assert problems == [FieldProblem(f"schema.properties.a.{keyword}", reason)]
    assert stored == problems, "a stored schema lists the same problem instead of failing"


def test_references_in_values_are_data_not_references() -> None:
    # Given objects shaped like references where the schema holds values, not schemas
    schema = {
        "type": "object",
        "default": {"$dynamicRef": "http://[::1"},
        "examples": [{"$ref": "#/nowhere"}],
        "properties": {
            "a": {"const": {"$ref": "https://example.com/a"}},
            "b": {"enum": [{"$recursiveRef": "http://[::1"}]},
        },
    }

    # When the schema is checked, and content holding those values
    problems = schema_problems(schema)
    content = {"a": {"$ref": "https://example.com/a"}, "b": {"$recursiveRef": "http://[::1"}}

    # Then nothing is refused: they are values the content may hold
    assert problems == [], "const, enum, default and examples hold values"
    assert content_problems(schema, content) == []


def test_references_in_values_do_not_count_toward_the_expansion() -> None:
    # Given 40 examples shaped like references to a definition of 300 values
    big = {"enum": list(range(299))}
    schema = {"type": "object", "$defs": {"big": big}, "examples": [{"$ref": "#/$defs/big"}] * 40}

    # When it is checked, it is accepted: examples are not applied
    assert schema_problems(schema) == []


def test_a_reference_into_values_must_point_at_a_valid_schema() -> None:
    # Given references to objects under `default` and an unknown keyword
    invalid = {"type": "object", "default": {"type": 5}, "properties": {"a": {"$ref": "#/default"}}}
    valid = {
        "type": "object",
        "x-defs": {"name": {"type": "string"}},
        "properties": {"a": {"$ref": "#/x-defs/name"}},
    }

    # When they are checked
    refused = schema_problems(invalid)

    # Then the one that is not a schema is refused at the reference, before a content check
    # trips over it; the other checks content through it
    assert fields(refused) == ["schema.properties.a.$ref"]
    assert refused[0].reason.startswith("'#/default' points at a value that is not a schema")
    assert content_problems(invalid, {"a": 1}) == refused
    assert schema_problems(valid) == []
    assert fields(content_problems(valid, {"a": 1})) == ["content.a"]


def test_references_resolve_against_the_id_of_the_part_they_are_in() -> None:
    # Given a part with its own $id and $defs, named like the schema's own
    schema = {
        "type": "object",
        "$defs": {"name": {"type": "integer"}},
        "properties": {
            "a": {
                "$id": "urn:example:a",
                "$defs": {"name": {"type": "string"}},
                "properties": {"name": {"$ref": "#/$defs/name"}},
            }
        },
    }

    # When it is checked, the reference is to the part's own definition, as jsonschema has it
    assert schema_problems(schema) == []
    assert fields(content_problems(schema, {"a": {"name": 1}})) == ["content.a.name"]


def test_an_id_that_is_no_uri_is_refused() -> None:
    schema = {"type": "object", "properties": {"a": {"$id": "http://[::1", "type": "string"}}}

    assert schema_problems(schema) == [FieldProblem("schema.properties.a.$id", "not a URI")]
    assert fields(content_problems(schema, {"a": "x"})) == ["schema.properties.a.$id"]


@pytest.mark.parametrize("declared", ["http://[::1", 5, None, []])
def test_a_dollar_schema_naming_no_dialect_is_refused(declared: Any) -> None:
    schema = {"$schema": declared, "type": "object"}

    assert fields(schema_problems(schema)) == ["schema.$schema"]
    assert fields(content_problems(schema, {})) == ["schema.$schema"]


@pytest.mark.parametrize("keyword", REFERENCE_KEYWORDS)
def test_references_that_only_come_back_are_refused(keyword: str) -> None:
    schema = {"type": "object", "$defs": {"a": {keyword: "#/$defs/a"}}}

    problems = schema_problems(schema)

    assert problems == [
        FieldProblem(f"schema.$defs.a.{keyword}", "'#/$defs/a' refers back to itself")
    ]


# -- one dialect, one validator ---------------------------------------------------------------

DRAFT_2020_12 = "https://json-schema.org/draft/2020-12/schema"


def test_a_dollar_schema_below_the_top_is_refused() -> None:
    # Given a part declaring its own dialect (jsonschema would check it with that dialect's
    # plain validator: Python's backtracking `re` for its patterns, and no step count)
    part = {"$schema": DRAFT_07, "type": "string", "pattern": "^(a+)+$"}
    schema = {"type": "object", "properties": {"a": part}}

    # When it is checked, and content against it as if stored before the check
    problems = schema_problems(schema)

    # Then the $schema is refused where it is
    assert fields(problems) == ["schema.properties.a.$schema"]
    assert content_problems(schema, {"a": "a" * 40 + "!"}) == problems


def test_a_ref_to_the_top_is_checked_by_the_same_validator() -> None:
    # Given a schema declaring its dialect at the top, and a $ref back to the top: jsonschema
    # would apply the top through the plain validator of the $schema it finds there
    schema = {
        "$schema": DRAFT_2020_12,
        "type": "object",
        "properties": {"again": {"$ref": "#"}, "p": {"type": "string", "pattern": "^x$"}},
    }

    # When content is checked where the $ref applies the top, and at the top
    through_ref = content_problems(schema, {"again": {"p": "x\n"}})
    at_top = content_problems(schema, {"p": "x\n"})

    # Then both go through RE2, whose `$` matches only at the very end (Python's `re` also
    # matches before a final newline)
    assert fields(at_top) == ["content.p"]
    assert fields(through_ref) == ["content.again.p"], "the $ref stays on RE2"


# -- enum, const, uniqueItems: the work they do, counted ------------------------------------------

UNIQUE = {"type": "object", "properties": {"a": {"type": "array", "uniqueItems": True}}}
# Content of 5,000 objects reads about 15,000 JSON values: well under a tenth of the steps.
A_TENTH = MAX_CHECK_STEPS // 10


def test_uniqueitems_over_5000_objects_is_checked_within_a_tenth_of_the_steps() -> None:
    # Given 5,000 distinct objects under uniqueItems (12.5 million pairs to compare)
    content = {"a": [{"id": n, "tag": "x"} for n in range(5_000)]}

    # When checked with a tenth of the steps, they pass; a repeat at the end is found
    assert content_problems(UNIQUE, content, steps=A_TENTH) == []
    content["a"].append({"tag": "x", "id": 17.0})
    problems = content_problems(UNIQUE, content, steps=A_TENTH)
    assert problems == [
        FieldProblem("content.a", "has non-unique elements: item 5000 equals item 17")
    ]


def test_enum_of_3000_objects_checks_3000_items_within_a_tenth_of_the_steps() -> None:
    # Given an enum of 3,000 objects applied to each of 3,000 items (9 million pairs)
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "array", "items": {"enum": [{"id": n} for n in range(3_000)]}}
        },
    }
    assert schema_problems(schema) == []
    content = {"a": [{"id": n} for n in range(3_000)]}

    # When checked with a tenth of the steps, they pass, and an item not listed is named
    assert content_problems(schema, content, steps=A_TENTH) == []
    content["a"][1_234] = {"id": 3_000}
    problems = content_problems(schema, content, steps=A_TENTH)
    assert fields(problems) == ["content.a.1234"]
    assert problems[0].reason == "{'id': 3000} is not one of the 3000 values of enum"


def test_the_values_uniqueitems_compares_count_toward_the_steps() -> None:
    # Given more items under uniqueItems than the check has steps: each is read once
    content = {"a": list(range(MAX_CHECK_STEPS + 1))}

    # When checked, the check stops and says why
    problems = content_problems(UNIQUE, content)
    assert fields(problems) == ["schema"]
    assert "each JSON value that enum, const or uniqueItems compares" in problems[0].reason


def test_the_content_const_compares_counts_toward_the_steps() -> None:
    schema = {"type": "object", "properties": {"a": {"const": list(range(100))}}}
    content = {"a": list(range(100))}

    assert content_problems(schema, content, steps=200) == []
    assert fields(content_problems(schema, content, steps=50)) == ["schema"]


@pytest.mark.parametrize(
    ("items", "unique"),
    [
        ([1, 1.0], False),
        ([True, 1], True),
        ([False, 0, None, "", [], {}], True),
        ([[1], [True], [1]], False),  # jsonschema's sorted comparison misses this repeat
        ([{"a": 1, "b": [2.0]}, {"b": [2], "a": 1.0}], False),
        ([{"a": True}, {"a": 1}], True),
        (["1", 1], True),
        ([[1, 2], [2, 1]], True),
        ([2**53 + 1, float(2**53)], True),  # Python compares them exactly, as jsonschema does
        ([-0.0, 0], False),
        ([0.1, 0.30000000000000004 - 0.2], True),
    ],
)
def test_uniqueitems_holds_values_equal_as_json_schema_does(items: list[Any], unique: bool) -> None:
    problems = content_problems(UNIQUE, {"a": items})

    assert (problems == []) is unique


@pytest.mark.parametrize(
    ("allowed", "value", "matches"),
    [
        ([1, "a"], 1.0, True),
        ([1], True, False),
        ([{"x": [1, {"y": None}]}], {"x": [1.0, {"y": None}]}, True),
        ([{"x": 1}], {"x": 1, "y": 2}, False),
        ([[0]], [False], False),
    ],
)
def test_enum_and_const_hold_values_equal_as_json_schema_does(
    allowed: list[Any], value: Any, matches: bool
) -> None:
    enum = {"type": "object", "properties": {"v": {"enum": allowed}}}
    const = {"type": "object", "properties": {"v": {"const": allowed[0]}}}

    assert (content_problems(enum, {"v": value}) == []) is matches
    if len(allowed) == 1:
        assert (content_problems(const, {"v": value}) == []) is matches


def test_an_all_of_of_5000_subschemas_is_refused_before_any_metaschema_work() -> None:
    schema = {"type": "object", "allOf": [{"type": "object"} for _ in range(5_000)]}

    problems = schema_problems(schema)

    assert problems == [
        FieldProblem(
            "schema.allOf",
            f"lists 5000 subschemas; at most {MAX_BRANCHES}, as each is applied to the same value",
        )
    ]


def test_a_schema_of_more_than_10000_values_is_refused_by_its_size() -> None:
    schema = {"type": "object", "properties": {f"p{n}": {"type": "string"} for n in range(6_000)}}

    problems = schema_problems(schema)

    assert fields(problems) == ["schema"]
    assert problems[0].reason.startswith("holds more than 10000 JSON values")


def test_a_content_checked_once_is_not_checked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Given content checked against a schema (as its write checks it)
    from memkit.scratchpad import schema as module

    content = {"a": [{"id": n} for n in range(1_000)]}
    assert content_problems(UNIQUE, content) == []
    checks: list[int] = []
    real = module._content_problems
    monkeypatch.setattr(module, "_content_problems", lambda *a: checks.append(1) or real(*a))

    # When it is read again, and then changed
    again = content_problems(UNIQUE, content)
    content["a"].append({"id": 0})
    changed = content_problems(UNIQUE, content)

    # Then only the changed content is checked
    assert again == []
    assert fields(changed) == ["content.a"]
    assert checks == [1]
