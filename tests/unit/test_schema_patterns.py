"""Schema patterns run in linear time (RE2): what a schema author may write, and what it matches.

The first tests use patterns on which Python's backtracking `re` takes exponential time: with
it, 40 characters would take hours. Their assertions are about the answer, never the clock
(bench/patterns.py measures the time).
"""

from __future__ import annotations

from typing import Any

import pytest

from memkit.errors import FieldProblem
from memkit.scratchpad.schema import content_problems, schema_problems

BACKTRACKING = ["^(a+)+$", "^((a+))+$", "^(a|a)*$"]
MATCHING = "a" * 40
NOT_MATCHING = "a" * 40 + "!"


def fields(problems: list[FieldProblem]) -> list[str]:
    return [p.field for p in problems]


def string_pattern(pattern: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}}


# -- patterns Python's `re` backtracks on ------------------------------------------------------


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_a_backtracking_pattern_is_accepted_in_a_schema(pattern: str) -> None:
    # Given a schema whose pattern would backtrack for ever in Python's engine
    # When it is checked, Then it is a valid schema: RE2 evaluates it in linear time
    assert schema_problems(string_pattern(pattern)) == [], "linear-time patterns are accepted"


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_a_backtracking_pattern_refuses_a_string_it_does_not_match(pattern: str) -> None:
    # Given 40 a's and a "!", which the pattern cannot match
    # When the content is checked
    problems = content_problems(string_pattern(pattern), {"x": NOT_MATCHING})

    # Then the value is refused at its field, with the validator's reason
    assert problems == [FieldProblem("content.x", f"{NOT_MATCHING!r} does not match {pattern!r}")]


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_a_backtracking_pattern_accepts_a_string_it_matches(pattern: str) -> None:
    # Given 40 a's, when the content is checked, then nothing is reported
    assert content_problems(string_pattern(pattern), {"x": MATCHING}) == [], "a match passes"


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_pattern_properties_and_additional_properties_match_names_in_linear_time(
    pattern: str,
) -> None:
    # Given names matching the pattern must be integers, and no other name is allowed
    schema = {
        "type": "object",
        "patternProperties": {pattern: {"type": "integer"}},
        "additionalProperties": False,
    }

    # When names that do and do not match are checked
    matching_wrong_type = content_problems(schema, {MATCHING: "x"})
    not_matching = content_problems(schema, {NOT_MATCHING: 1})
    matching = content_problems(schema, {MATCHING: 1})

    # Then a matching name gets the pattern's subschema, the other is an additional property
    assert fields(matching_wrong_type) == [f"content.{MATCHING}"], "the subschema applies"
    assert not_matching == [
        FieldProblem("content", f"{NOT_MATCHING!r} does not match any of the regexes: {pattern!r}")
    ], "a name no pattern matches is refused as additionalProperties says"
    assert matching == [], "a matching name with a valid value passes"


@pytest.mark.parametrize("pattern", BACKTRACKING)
def test_property_names_are_matched_in_linear_time(pattern: str) -> None:
    # Given every property name must match the pattern
    schema = {"type": "object", "propertyNames": {"pattern": pattern}}

    # When a name that does not match is checked, Then it is refused; a matching one passes
    assert fields(content_problems(schema, {NOT_MATCHING: 1})) == ["content"]
    assert content_problems(schema, {MATCHING: 1}) == [], "a matching name passes"


def test_additional_properties_without_patterns_names_the_unexpected_members() -> None:
    # Given a closed object, When it gets two members it does not declare
    schema = {"type": "object", "properties": {"a": {}}, "additionalProperties": False}
    problems = content_problems(schema, {"a": 1, "c": 2, "b": 3})

    # Then both are named, as jsonschema names them
    assert problems == [
        FieldProblem("content", "Additional properties are not allowed ('b', 'c' were unexpected)")
    ]


def test_additional_properties_as_a_schema_applies_to_the_members_no_pattern_matches() -> None:
    # Given x- names are free and every other member must be a string
    schema = {
        "type": "object",
        "patternProperties": {"^x-": {}},
        "additionalProperties": {"type": "string"},
    }

    # When an x- member and another hold numbers
    problems = content_problems(schema, {"x-a": 1, "b": 2})

    # Then only the other member is refused
    assert fields(problems) == ["content.b"], "patternProperties members are not additional"


# -- syntax RE2 cannot run in linear time -------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "field", "what"),
    [
        (string_pattern("^(?=a)"), "schema.properties.x.pattern", "lookahead"),
        (string_pattern("^(?!a)"), "schema.properties.x.pattern", "negative lookahead"),
        (string_pattern("(?<=a)b"), "schema.properties.x.pattern", "lookbehind"),
        (string_pattern("(?<!a)b"), "schema.properties.x.pattern", "negative lookbehind"),
        (string_pattern("^(a)\\1$"), "schema.properties.x.pattern", "backreferences"),
        (
            {"patternProperties": {"(?<n>a)\\k<n>": {}}},
            "schema.patternProperties",
            "backreferences",
        ),
        ({"propertyNames": {"pattern": "(?=x)"}}, "schema.propertyNames.pattern", "lookahead"),
        ({"$defs": {"d": {"pattern": "a(?<=a)"}}}, "schema.$defs.d.pattern", "lookbehind"),
        (string_pattern("(?>a)"), "schema.properties.x.pattern", "atomic groups"),
    ],
)
def test_patterns_that_need_backtracking_are_refused_with_the_field_and_reason(
    schema: dict[str, Any], field: str, what: str
) -> None:
    # Given a schema whose pattern needs a backtracking engine
    # When it is checked
    problems = schema_problems(schema)

    # Then the pattern's field is named, with what is not supported and why
    assert fields(problems) == [field]
    assert f"not supported: {what} (" in problems[0].reason, problems[0].reason
    assert "memkit evaluates patterns in linear time" in problems[0].reason


def test_a_pattern_property_refused_names_the_pattern() -> None:
    # Given two patternProperties, one with a lookahead
    schema = {"patternProperties": {"^ok$": {}, "^(?=x)": {}}}

    # When it is checked, Then the reason names the pattern refused
    [problem] = schema_problems(schema)
    assert problem.reason.startswith("'^(?=x)': not supported: lookahead"), problem.reason


@pytest.mark.parametrize(("pattern", "error"), [("(", "missing )"), ("\\cA", "\\c"), ("a**", "**")])
def test_a_malformed_pattern_is_refused_with_the_engine_reason(pattern: str, error: str) -> None:
    [problem] = schema_problems(string_pattern(pattern))

    assert problem.field == "schema.properties.x.pattern"
    assert problem.reason.startswith("not a valid pattern:"), problem.reason
    assert error in problem.reason


def test_unevaluated_properties_is_refused_beside_pattern_properties() -> None:
    # Given unevaluatedProperties in a schema that also has patternProperties (jsonschema would
    # find the unevaluated names with Python's engine)
    schema = {
        "allOf": [{"patternProperties": {"^x-": {}}}],
        "unevaluatedProperties": False,
    }

    # When it is checked, Then unevaluatedProperties is refused, with the reason
    [problem] = schema_problems(schema)
    assert problem.field == "schema.unevaluatedProperties"
    assert "patternProperties" in problem.reason


def test_unevaluated_properties_alone_still_works() -> None:
    # Given unevaluatedProperties with no patternProperties
    schema = {"allOf": [{"properties": {"a": {}}}], "unevaluatedProperties": False}

    # When it is checked and used
    # Then the schema is valid and an undeclared member is refused
    assert schema_problems(schema) == []
    assert fields(content_problems(schema, {"a": 1, "b": 2})) == ["content"]
    assert content_problems(schema, {"a": 1}) == []


@pytest.mark.parametrize(
    ("schema", "field"),
    [
        (string_pattern("^(?=a)"), "schema.properties.x.pattern"),
        (
            {"patternProperties": {"^x": {}}, "unevaluatedProperties": False},
            "schema.unevaluatedProperties",
        ),
    ],
)
def test_a_schema_stored_before_patterns_were_checked_is_reported_not_evaluated(
    schema: dict[str, Any], field: str
) -> None:
    # Given a schema stored before this check (content_problems is what reads and writes use)
    # When content is checked against it
    problems = content_problems(schema, {"x": "a"})

    # Then the schema's part is reported, as a problem of the schema, and nothing crashes
    assert fields(problems) == [field], "the schema's field is named"


# -- what the accepted dialect matches ----------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("b", "abc", True),  # a pattern matches anywhere unless anchored, as in ECMA-262
        ("^a$", "a\n", False),  # $ is the end of the text (Python's re also allows a final \n)
        ("^\\d+$", "\u0661\u0662", False),  # \d is [0-9], as in ECMA-262
        ("^\\w+$", "\u00e9", False),  # \w is [0-9A-Za-z_]
        ("^\\u00e9$", "\u00e9", True),  # ECMA's \uXXXX escape
        ("^\\uD83D\\uDE00$", "\U0001f600", True),  # a surrogate pair is one code point
        ("^\\u{1F600}$", "\U0001f600", True),  # ECMA's \u{...}
        ("^\\\\u0041$", "\\u0041", True),  # an escaped backslash, then u0041: no escape
        ("^\\p{L}+$", "\u00e9t\u00e9", True),  # Unicode classes
        ("^(?<year>\\d{4})-\\d{2}$", "2024-05", True),  # named groups
        ("^[a-z]{2,3}$", "abcd", False),
    ],
)
def test_the_accepted_dialect_matches_as_ecma_262_does(
    pattern: str, text: str, matches: bool
) -> None:
    # Given a schema with the pattern, When a string is checked
    schema = string_pattern(pattern)
    assert schema_problems(schema) == [], "the pattern is accepted"
    problems = content_problems(schema, {"x": text})

    # Then it passes exactly when the pattern matches
    assert (problems == []) is matches, problems


@pytest.mark.parametrize(("value", "valid"), [("^(a|a)*$", True), ("(?=a)", False), ("(", False)])
def test_format_regex_accepts_the_patterns_memkit_can_evaluate(value: str, valid: bool) -> None:
    # Given a member that must hold a regular expression
    schema = {"type": "object", "properties": {"r": {"type": "string", "format": "regex"}}}

    # When a value is checked, Then it is valid when memkit could evaluate it as a pattern
    problems = content_problems(schema, {"r": value})
    assert (problems == []) is valid, problems
