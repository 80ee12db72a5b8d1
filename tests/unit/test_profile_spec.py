"""ProfileSpec: the rules of a scratchpad profile (API.md, Scratchpad)."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest

from memkit.errors import ValidationFailed
from memkit.models.domain import MAX_TOKENS_LIMIT, PadFormat, Profile, ProfileSpec

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"theme": {"type": "string"}}}
TEMPLATE = "# User\n- Name:"


def problem_fields(exc: ValidationFailed) -> list[str]:
    return [p.field for p in exc.errors]


def test_template_and_schema_together_are_refused_naming_template() -> None:
    # Given a spec with both a template and a schema
    spec = {"template": TEMPLATE, "schema": SCHEMA}

    # When it is validated
    with pytest.raises(ValidationFailed) as caught:
        ProfileSpec.model_validate(spec)

    # Then the problem names the template field
    assert problem_fields(caught.value) == ["template"], "template and schema are exclusive"


@pytest.mark.parametrize("pad_format", ["markdown", "text"])
def test_schema_with_a_text_format_is_refused_naming_format(pad_format: str) -> None:
    # Given a schema with a non-JSON format
    spec = {"schema": SCHEMA, "format": pad_format}

    # When it is validated
    with pytest.raises(ValidationFailed) as caught:
        ProfileSpec.model_validate(spec)

    # Then the problem names the format field
    assert problem_fields(caught.value) == ["format"], "a schema implies format json"


def test_template_with_json_format_is_refused_naming_template() -> None:
    # Given a template with format json
    spec = {"template": TEMPLATE, "format": "json"}

    # When it is validated
    with pytest.raises(ValidationFailed) as caught:
        ProfileSpec.model_validate(spec)

    # Then the problem names the template field
    assert problem_fields(caught.value) == ["template"], "a template needs markdown or text"


def test_every_inconsistency_is_reported_at_once() -> None:
    # Given a template, a schema and a text format together
    spec = {"template": TEMPLATE, "schema": SCHEMA, "format": "text"}

    # When it is validated
    with pytest.raises(ValidationFailed) as caught:
        ProfileSpec.model_validate(spec)

    # Then both problems are listed
    assert problem_fields(caught.value) == ["template", "format"], "all problems are reported"


def test_profile_inherits_the_consistency_rules() -> None:
    # Given a stored profile with both a template and a schema
    data = {"name": "p", "template": TEMPLATE, "schema": SCHEMA}

    # When it is validated
    # Then it is refused like a spec
    with pytest.raises(ValidationFailed):
        Profile.model_validate(data)


@pytest.mark.parametrize(
    ("spec", "resolved"),
    [
        ({"schema": SCHEMA}, PadFormat.JSON),
        ({"template": TEMPLATE}, PadFormat.MARKDOWN),
        ({}, PadFormat.TEXT),
    ],
    ids=["schema->json", "template->markdown", "neither->text"],
)
def test_format_is_resolved_when_not_given(spec: dict[str, Any], resolved: PadFormat) -> None:
    # Given a spec without a format
    # When it is validated
    profile = ProfileSpec.model_validate(spec)

    # Then the format is resolved from what it has
    assert profile.pad_format is resolved, f"format resolves to {resolved.value}"


@pytest.mark.parametrize(
    ("spec", "kept"),
    [
        ({"schema": SCHEMA, "format": "json"}, PadFormat.JSON),
        ({"template": TEMPLATE, "format": "text"}, PadFormat.TEXT),
        ({"format": "json"}, PadFormat.JSON),
        ({"format": "markdown"}, PadFormat.MARKDOWN),
    ],
)
def test_a_consistent_explicit_format_is_kept(spec: dict[str, Any], kept: PadFormat) -> None:
    # Given a spec with a consistent explicit format
    # When it is validated
    profile = ProfileSpec.model_validate(spec)

    # Then that format is kept
    assert profile.format is kept, "an explicit format is kept"


def test_resolved_format_is_part_of_the_dump() -> None:
    # Given a spec with a schema and no format
    profile = ProfileSpec.model_validate({"schema": SCHEMA})

    # When it is dumped
    dumped = profile.model_dump(by_alias=True)

    # Then the dump carries the resolved format
    assert dumped["format"] is PadFormat.JSON, "the dump shows the resolved format"


@pytest.mark.parametrize("max_tokens", [0, -1, MAX_TOKENS_LIMIT + 1])
def test_max_tokens_out_of_bounds_is_refused(max_tokens: int) -> None:
    # Given max_tokens outside 1..MAX_TOKENS_LIMIT
    spec = {"max_tokens": max_tokens}

    # When it is validated
    # Then pydantic refuses it
    with pytest.raises(pydantic.ValidationError, match="max_tokens"):
        ProfileSpec.model_validate(spec)


@pytest.mark.parametrize("max_tokens", [1, MAX_TOKENS_LIMIT])
def test_max_tokens_at_the_bounds_is_accepted(max_tokens: int) -> None:
    # Given max_tokens at a bound
    # When it is validated
    profile = ProfileSpec.model_validate({"max_tokens": max_tokens})

    # Then it is kept
    assert profile.max_tokens == max_tokens, "the bounds are inclusive"


def test_unknown_fields_are_refused() -> None:
    # Given a spec with a misspelt field
    spec = {"readonly": True}

    # When it is validated
    # Then pydantic refuses it rather than silently ignoring it
    with pytest.raises(pydantic.ValidationError, match="readonly"):
        ProfileSpec.model_validate(spec)
