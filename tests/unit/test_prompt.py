"""The scratchpad block for a system prompt (`?render=prompt`)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memkit.models.domain import Content, Profile
from memkit.scratchpad.prompt import UPDATE_TOOL, render_prompt

TEMPLATE = "# User\n- Name:\n- Goals:"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"theme": {"enum": ["dark", "light"]}},
    "required": ["theme"],
}


def profile(**fields: Any) -> Profile:
    return Profile.model_validate({"name": "test", **fields})


def block(prompt: str) -> str:
    """The text between the working_memory tags."""
    assert prompt.startswith("<working_memory>\n")
    return prompt.removeprefix("<working_memory>\n").split("\n</working_memory>\n", 1)[0]


def instructions(prompt: str) -> str:
    """The text after the working_memory block."""
    return prompt.split("</working_memory>\n", 1)[1]


def test_render_prompt_wraps_text_content_in_a_working_memory_block() -> None:
    # Given text content
    content = "Ada likes tea."

    # When the prompt is rendered
    prompt = render_prompt(content, profile())

    # Then it opens with the content inside <working_memory> tags
    assert prompt.startswith("<working_memory>\nAda likes tea.\n</working_memory>\n"), (
        "the content sits in a <working_memory> block"
    )


def test_render_prompt_shows_json_content_pretty_printed() -> None:
    # Given JSON content with a non-ASCII value
    content = {"city": "Zürich", "tags": ["a"]}

    # When the prompt is rendered
    prompt = render_prompt(content, profile(format="json"))

    # Then the block holds the indented JSON, characters unescaped
    assert block(prompt) == json.dumps(content, indent=2, ensure_ascii=False), (
        "JSON content is shown indented and unescaped"
    )


@pytest.mark.parametrize("empty", [None, ""])
def test_render_prompt_shows_the_template_while_empty(empty: Content) -> None:
    # Given a template profile with no content yet
    # When the prompt is rendered
    prompt = render_prompt(empty, profile(template=TEMPLATE))

    # Then the block shows the template
    assert block(prompt) == TEMPLATE, "the template is shown while the scratchpad is empty"


def test_render_prompt_shows_the_template_only_once_while_empty() -> None:
    # Given a template profile with no content yet
    # When the prompt is rendered
    prompt = render_prompt(None, profile(template=TEMPLATE))

    # Then the instructions point at the block instead of repeating the template
    assert prompt.count(TEMPLATE) == 1, "the empty template is not repeated in the instructions"


def test_render_prompt_shows_content_not_template_once_filled() -> None:
    # Given a template profile with content
    content = "# User\n- Name: Ada\n- Goals: ship"

    # When the prompt is rendered
    prompt = render_prompt(content, profile(template=TEMPLATE))

    # Then the block shows the content
    assert block(prompt) == content, "filled content replaces the template in the block"


def test_render_prompt_repeats_the_template_in_the_instructions_once_filled() -> None:
    # Given a template profile with content
    content = "# User\n- Name: Ada\n- Goals: ship"

    # When the prompt is rendered
    prompt = render_prompt(content, profile(template=TEMPLATE))

    # Then the instructions carry the template, every line intact and on its own
    template_lines = TEMPLATE.splitlines()
    lines = instructions(prompt).splitlines()
    start = lines.index(template_lines[0])
    assert lines[start : start + len(template_lines)] == template_lines, (
        "the template is shown verbatim on its own lines"
    )


def test_render_prompt_with_schema_shows_an_empty_object_while_empty() -> None:
    # Given a schema profile with no content yet
    # When the prompt is rendered
    prompt = render_prompt(None, profile(schema=SCHEMA))

    # Then the block shows an empty object
    assert block(prompt) == "{}", "an empty schema scratchpad shows {}"


@pytest.mark.parametrize("content", [None, {"theme": "dark"}])
def test_render_prompt_shows_the_schema_in_the_instructions(content: Content) -> None:
    # Given a schema profile, empty or filled
    # When the prompt is rendered
    prompt = render_prompt(content, profile(schema=SCHEMA))

    # Then the instructions include the schema
    assert json.dumps(SCHEMA, indent=2) in instructions(prompt), "the schema is in the instructions"


@pytest.mark.parametrize(
    "phrase", [f"call {UPDATE_TOOL}", '(mode "merge")', "set a field to null to remove it"]
)
def test_render_prompt_json_instructions_explain_merge_and_null(phrase: str) -> None:
    # Given a JSON profile
    # When the prompt is rendered
    text = instructions(render_prompt({"a": 1}, profile(format="json")))

    # Then they explain the update tool, merge mode, and null as the way to remove a field
    assert phrase in text, f"JSON instructions say: {phrase}"


@pytest.mark.parametrize("pad_format", ["markdown", "text"])
def test_render_prompt_text_instructions_explain_append(pad_format: str) -> None:
    # Given a markdown or text profile
    # When the prompt is rendered
    text = instructions(render_prompt("notes", profile(format=pad_format)))

    # Then they say a merge appends
    assert f'call {UPDATE_TOOL}: mode "merge" appends' in text, "text merges append"


@pytest.mark.parametrize(
    ("fields", "content"),
    [
        ({}, "notes"),
        ({"template": TEMPLATE}, None),
        ({"schema": SCHEMA}, {"theme": "dark"}),
    ],
)
def test_render_prompt_read_only_says_so(fields: dict[str, Any], content: Content) -> None:
    # Given a read-only profile
    # When the prompt is rendered
    text = instructions(render_prompt(content, profile(read_only=True, **fields)))

    # Then the instructions say it is read-only
    assert "read-only" in text, "read-only scratchpads are declared read-only"


@pytest.mark.parametrize(
    ("fields", "content"),
    [
        ({}, "notes"),
        ({"template": TEMPLATE}, None),
        ({"schema": SCHEMA}, {"theme": "dark"}),
    ],
)
def test_render_prompt_read_only_does_not_offer_the_update_tool(
    fields: dict[str, Any], content: Content
) -> None:
    # Given a read-only profile
    # When the prompt is rendered
    prompt = render_prompt(content, profile(read_only=True, **fields))

    # Then nothing invites the model to update it
    assert UPDATE_TOOL not in prompt, "read-only instructions do not mention the update tool"


def test_render_prompt_read_only_still_shows_the_content() -> None:
    # Given a read-only profile with content
    # When the prompt is rendered
    prompt = render_prompt("house rules", profile(read_only=True))

    # Then the block carries the content
    assert block(prompt) == "house rules", "read-only content is still shown"
