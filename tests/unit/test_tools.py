"""Agent tools: definitions per model API, the partial schema, and tool-call arguments."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from memkit.models.domain import Profile
from memkit.scratchpad.tools import (
    ALIASES,
    ToolArgumentError,
    ToolFormat,
    ToolName,
    parse_arguments,
    partial_schema,
    render_tools,
    tool_schemas,
    update_arguments,
)

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "preferences": {
            "type": "object",
            "properties": {"theme": {"enum": ["dark", "light"]}, "lang": {"type": "string"}},
            "required": ["theme", "lang"],
        },
    },
    "required": ["name", "preferences"],
}
ALL_TOOLS = [ToolName.GET.value, ToolName.UPDATE.value, ToolName.CLEAR.value]


def profile(**fields: Any) -> Profile:
    return Profile.model_validate({"name": "test", **fields})


def parameters_of(tool: dict[str, Any], tool_format: ToolFormat) -> dict[str, Any]:
    if tool_format is ToolFormat.OPENAI:
        return tool["function"]["parameters"]  # type: ignore[no-any-return]
    if tool_format is ToolFormat.ANTHROPIC:
        return tool["input_schema"]  # type: ignore[no-any-return]
    return tool["toolSpec"]["inputSchema"]["json"]  # type: ignore[no-any-return]


def name_of(tool: dict[str, Any], tool_format: ToolFormat) -> str:
    if tool_format is ToolFormat.OPENAI:
        return tool["function"]["name"]  # type: ignore[no-any-return]
    if tool_format is ToolFormat.ANTHROPIC:
        return tool["name"]  # type: ignore[no-any-return]
    return tool["toolSpec"]["name"]  # type: ignore[no-any-return]


def update_parameters(p: Profile, tool_format: ToolFormat = ToolFormat.OPENAI) -> dict[str, Any]:
    tools = render_tools(p, tool_format)
    return parameters_of(tools[ALL_TOOLS.index(ToolName.UPDATE.value)], tool_format)


def is_valid(schema: dict[str, Any], instance: Any) -> bool:
    return Draft202012Validator(schema).is_valid(instance)


# -- render_tools: wire formats ---------------------------------------------------------------


def test_render_tools_openai_shape() -> None:
    # Given a profile
    p = profile()

    # When the tools are rendered for OpenAI
    tools = render_tools(p, ToolFormat.OPENAI)

    # Then each is {"type": "function", "function": {name, description, parameters}}
    assert tools == [
        {"type": "function", "function": {"name": n, "description": d, "parameters": s}}
        for n, d, s in tool_schemas(p)
    ], "OpenAI tools are function objects"


def test_render_tools_anthropic_shape() -> None:
    # Given a profile
    p = profile()

    # When the tools are rendered for Anthropic
    tools = render_tools(p, ToolFormat.ANTHROPIC)

    # Then each is {name, description, input_schema}
    assert tools == [
        {"name": n, "description": d, "input_schema": s} for n, d, s in tool_schemas(p)
    ], "Anthropic tools carry input_schema"


def test_render_tools_bedrock_shape() -> None:
    # Given a profile
    p = profile()

    # When the tools are rendered for Bedrock Converse
    tools = render_tools(p, ToolFormat.BEDROCK)

    # Then each is {"toolSpec": {name, description, inputSchema: {"json": ...}}}
    assert tools == [
        {"toolSpec": {"name": n, "description": d, "inputSchema": {"json": s}}}
        for n, d, s in tool_schemas(p)
    ], "Bedrock tools are toolSpec objects"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_every_tool_takes_an_object_parameter_schema(tool_format: ToolFormat) -> None:
    # Given a profile
    # When the tools are rendered
    tools = render_tools(profile(), tool_format)

    # Then every tool's parameters are an object schema valid as JSON Schema
    for tool in tools:
        parameters = parameters_of(tool, tool_format)
        Draft202012Validator.check_schema(parameters)
        assert parameters["type"] == "object", "tool parameters are an object schema"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_read_only_profile_exposes_only_the_get_tool(tool_format: ToolFormat) -> None:
    # Given a read-only profile
    p = profile(read_only=True)

    # When the tools are rendered
    tools = render_tools(p, tool_format)

    # Then only get_working_memory is offered
    names = [name_of(tool, tool_format) for tool in tools]
    assert names == [ToolName.GET.value], "a read-only scratchpad offers only the get tool"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_writable_profile_exposes_get_update_and_clear(tool_format: ToolFormat) -> None:
    # Given a writable profile
    p = profile()

    # When the tools are rendered
    tools = render_tools(p, tool_format)

    # Then get, update and clear are offered, in that order
    names = [name_of(tool, tool_format) for tool in tools]
    assert names == ALL_TOOLS, "a writable scratchpad offers get, update and clear"


def test_update_tool_requires_content() -> None:
    # Given a profile
    # When the update tool's parameters are rendered
    parameters = update_parameters(profile())

    # Then content is the one required argument
    assert parameters["required"] == ["content"], "update requires content"


def test_update_tool_mode_is_merge_or_replace() -> None:
    # Given a profile
    # When the update tool's parameters are rendered
    mode = update_parameters(profile())["properties"]["mode"]

    # Then mode is an enum of merge and replace
    assert mode["enum"] == ["merge", "replace"], "mode is merge or replace"


def test_update_tool_mode_defaults_to_merge() -> None:
    # Given a profile
    # When the update tool's parameters are rendered
    mode = update_parameters(profile())["properties"]["mode"]

    # Then merge is the advertised default
    assert mode["default"] == "merge", "mode defaults to merge"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_update_tool_content_is_typed_by_the_profile_schema(tool_format: ToolFormat) -> None:
    # Given a schema profile
    # When the update tool is rendered
    content = update_parameters(profile(schema=SCHEMA), tool_format)["properties"]["content"]

    # Then its content parameter is the schema made partial (plus a description)
    expected = partial_schema(SCHEMA) | {"description": content["description"]}
    assert content == expected, "content is typed from the profile schema via partial_schema"


def test_update_tool_accepts_a_partial_patch_for_a_schema_profile() -> None:
    # Given a schema profile requiring name and preferences.theme/lang
    parameters = update_parameters(profile(schema=SCHEMA))

    # When a patch changes one nested field and removes another
    arguments = {"content": {"preferences": {"lang": "fr", "theme": None}}, "mode": "merge"}

    # Then the arguments are valid for the tool
    assert is_valid(parameters, arguments), "a partial patch with nulls passes the tool schema"


def test_update_tool_still_checks_types_for_a_schema_profile() -> None:
    # Given a schema profile
    parameters = update_parameters(profile(schema=SCHEMA))

    # When a patch carries a value outside the schema's enum
    arguments = {"content": {"preferences": {"theme": "blue"}}}

    # Then the arguments are invalid
    assert not is_valid(parameters, arguments), "the partial schema keeps value types"


DEFS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "$defs": {
        "Pet": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "kind": {"type": "string"}},
            "required": ["name", "kind"],
        }
    },
    "properties": {"pet": {"$ref": "#/$defs/Pet"}},
    "required": ["pet"],
}
DRAFT_07_SCHEMA: dict[str, Any] = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "definitions": {
        "Pet": {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "required": ["name"],
        }
    },
    "properties": {"pet": {"$ref": "#/definitions/Pet"}},
}


@pytest.mark.parametrize("tool_format", list(ToolFormat))
@pytest.mark.parametrize("schema", [DEFS_SCHEMA, DRAFT_07_SCHEMA], ids=["$defs", "definitions"])
def test_update_tool_resolves_references_of_the_profile_schema(
    schema: dict[str, Any], tool_format: ToolFormat
) -> None:
    # Given a schema profile whose properties use "#/..." references to its definitions
    parameters = update_parameters(profile(schema=schema), tool_format)

    # When a partial patch through the reference is checked against the tool parameters
    arguments = {"content": {"pet": {"name": "Rex"}}}

    # Then the reference resolves within the tool's parameters document and the patch passes
    assert is_valid(parameters, arguments), "references resolve inside the tool parameters"


@pytest.mark.parametrize("schema", [DEFS_SCHEMA, DRAFT_07_SCHEMA], ids=["$defs", "definitions"])
def test_update_tool_references_keep_types(schema: dict[str, Any]) -> None:
    # Given a schema profile whose properties use references
    parameters = update_parameters(profile(schema=schema))

    # When a patch carries a wrongly typed value behind the reference
    arguments = {"content": {"pet": {"name": 5}}}

    # Then the arguments are invalid: the referenced definition is applied
    assert not is_valid(parameters, arguments), "referenced definitions are enforced"


def test_update_tool_content_is_an_object_for_json_without_schema() -> None:
    # Given a JSON profile without a schema
    # When the update tool is rendered
    content = update_parameters(profile(format="json"))["properties"]["content"]

    # Then content is any object
    assert content["type"] == "object", "JSON content is an object"


@pytest.mark.parametrize("pad_format", ["markdown", "text"])
def test_update_tool_content_is_a_string_for_text_formats(pad_format: str) -> None:
    # Given a markdown or text profile
    # When the update tool is rendered
    content = update_parameters(profile(format=pad_format))["properties"]["content"]

    # Then content is a string
    assert content["type"] == "string", "text content is a string"


def test_update_tool_description_carries_the_template() -> None:
    # Given a template profile
    template = "# User\n- Name:"

    # When the update tool is rendered
    content = update_parameters(profile(template=template))["properties"]["content"]

    # Then the content description shows the template
    assert content["description"].endswith(template), "the template is in the description"


# -- partial_schema ---------------------------------------------------------------------------


def test_partial_schema_removes_required_at_the_top_level() -> None:
    # Given a schema with top-level required members
    # When it is made partial
    partial = partial_schema(SCHEMA)

    # Then nothing is required at the top
    assert "required" not in partial, "top-level required is removed"


def test_partial_schema_removes_required_in_nested_objects() -> None:
    # Given a schema with a nested required list
    # When it is made partial
    partial = partial_schema(SCHEMA)

    # Then a nested object lacking its required members is accepted
    assert is_valid(partial, {"preferences": {}}), "nested required is removed"


def required_a() -> dict[str, Any]:
    return {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}


@pytest.mark.parametrize(
    ("schema", "instance"),
    [
        ({"properties": {"f": {"type": "array", "items": required_a()}}}, {"f": [{}]}),
        ({"properties": {"f": {"additionalProperties": required_a()}}}, {"f": {"x": {}}}),
        ({"$defs": {"D": required_a()}, "properties": {"f": {"$ref": "#/$defs/D"}}}, {"f": {}}),
        ({"definitions": {"D": required_a()}, "$ref": "#/definitions/D"}, {}),
        ({"properties": {"f": {"anyOf": [required_a(), {"type": "null"}]}}}, {"f": {}}),
        ({"properties": {"f": {"oneOf": [required_a(), {"type": "string"}]}}}, {"f": {}}),
        ({"properties": {"f": {"allOf": [required_a()]}}}, {"f": {}}),
        ({"properties": {"f": {"prefixItems": [required_a()]}}}, {"f": [{}]}),
    ],
    ids=[
        "items",
        "additionalProperties",
        "$defs",
        "definitions",
        "anyOf",
        "oneOf",
        "allOf",
        "prefixItems",
    ],
)
def test_partial_schema_removes_required_at_every_depth(
    schema: dict[str, Any], instance: Any
) -> None:
    # Given a schema requiring a member somewhere below the top, and an instance lacking it
    assert not is_valid(schema, instance)

    # When the schema is made partial
    partial = partial_schema(schema)

    # Then the instance lacking that member is accepted
    assert is_valid(partial, instance), "required is removed at every depth"


def test_partial_schema_makes_every_property_nullable() -> None:
    # Given a schema with typed properties at two depths
    # When it is made partial
    partial = partial_schema(SCHEMA)

    # Then null is accepted for each of them (null deletes in a merge)
    assert is_valid(partial, {"name": None, "preferences": {"theme": None, "lang": None}}), (
        "every property accepts null"
    )


def test_partial_schema_keeps_property_types() -> None:
    # Given a schema with typed properties
    # When it is made partial
    partial = partial_schema(SCHEMA)

    # Then a wrongly typed value is still refused
    assert not is_valid(partial, {"name": 42}), "property types are kept"


def test_partial_schema_drops_the_dialect() -> None:
    # Given a schema declaring its dialect
    # When it is made partial (to be embedded in tool parameters)
    partial = partial_schema(SCHEMA)

    # Then `$schema` is gone (it is only allowed at a document root)
    assert "$schema" not in partial, "$schema is dropped"


def test_partial_schema_does_not_mutate_the_profile_schema() -> None:
    # Given a profile schema
    schema = copy.deepcopy(SCHEMA)

    # When it is made partial
    partial_schema(schema)

    # Then the original is unchanged
    assert schema == SCHEMA, "partial_schema works on a copy"


# -- aliases ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("update_working_memory", ToolName.UPDATE),
        ("updateWorkingMemory", ToolName.UPDATE),
        ("working-memory/update", ToolName.UPDATE),
        ("get_working_memory", ToolName.GET),
        ("clear_working_memory", ToolName.CLEAR),
    ],
)
def test_aliases_map_framework_names_to_tools(name: str, tool: ToolName) -> None:
    # Given a tool name some framework's model emits
    # When it is looked up
    found = ALIASES.get(name)

    # Then it names the memkit tool
    assert found is tool, f"{name} is {tool.value}"


# -- parse_arguments --------------------------------------------------------------------------


def test_parse_arguments_takes_an_object() -> None:
    # Given arguments sent as an object
    arguments = {"content": "x"}

    # When they are parsed
    parsed = parse_arguments(arguments)

    # Then they are used as they are
    assert parsed == {"content": "x"}, "an object is taken as is"


def test_parse_arguments_takes_a_json_string() -> None:
    # Given arguments sent as a JSON string (as OpenAI does)
    arguments = '{"content": {"a": 1}, "mode": "replace"}'

    # When they are parsed
    parsed = parse_arguments(arguments)

    # Then the decoded object is returned
    assert parsed == {"content": {"a": 1}, "mode": "replace"}, "a JSON string is decoded"


@pytest.mark.parametrize("arguments", [None, ""])
def test_parse_arguments_treats_missing_arguments_as_empty(arguments: Any) -> None:
    # Given no arguments at all
    # When they are parsed
    parsed = parse_arguments(arguments)

    # Then they are an empty object
    assert parsed == {}, "no arguments are an empty object"


def test_parse_arguments_refuses_invalid_json() -> None:
    # Given a string that is not JSON
    arguments = '{"content": '

    # When it is parsed
    # Then the model is told the arguments are not valid JSON
    with pytest.raises(ToolArgumentError, match="not valid JSON"):
        parse_arguments(arguments)


@pytest.mark.parametrize("arguments", ["[1, 2]", '"text"', "null", "3", [1], 3, True])
def test_parse_arguments_refuses_a_non_object(arguments: Any) -> None:
    # Given arguments that are valid JSON but not an object
    # When they are parsed
    # Then the model is told they must be an object
    with pytest.raises(ToolArgumentError, match="must be a JSON object"):
        parse_arguments(arguments)


# -- update_arguments -------------------------------------------------------------------------


@pytest.mark.parametrize("pad_format", ["markdown", "text", "json"])
def test_update_arguments_content_defaults_to_merge(pad_format: str) -> None:
    # Given `content` without a mode
    content = {"a": 1} if pad_format == "json" else "note"

    # When the update arguments are read
    _, mode = update_arguments({"content": content}, profile(format=pad_format))

    # Then the mode is merge
    assert mode == "merge", "content without mode merges"


def test_update_arguments_returns_the_content() -> None:
    # Given `content` and a mode
    arguments = {"content": "note", "mode": "replace"}

    # When the update arguments are read
    result = update_arguments(arguments, profile())

    # Then content and mode come back as sent
    assert result == ("note", "replace"), "content and mode are returned"


@pytest.mark.parametrize("pad_format", ["markdown", "text"])
def test_update_arguments_memory_without_mode_replaces_text(pad_format: str) -> None:
    # Given Mastra's `memory` argument (the whole block) for a text scratchpad, no mode
    arguments = {"memory": "# User\n- Name: Ada"}

    # When the update arguments are read
    result = update_arguments(arguments, profile(format=pad_format))

    # Then it replaces the scratchpad
    assert result == ("# User\n- Name: Ada", "replace"), "memory without mode replaces text"


def test_update_arguments_memory_without_mode_merges_json() -> None:
    # Given Mastra's `memory` argument for a schema scratchpad, no mode
    arguments = {"memory": {"name": "Ada"}}

    # When the update arguments are read
    result = update_arguments(arguments, profile(schema=SCHEMA))

    # Then it merges
    assert result == ({"name": "Ada"}, "merge"), "memory without mode merges JSON"


def test_update_arguments_memory_with_a_mode_keeps_that_mode() -> None:
    # Given `memory` with an explicit mode
    arguments = {"memory": "more", "mode": "merge"}

    # When the update arguments are read
    _, mode = update_arguments(arguments, profile(format="markdown"))

    # Then the explicit mode wins
    assert mode == "merge", "an explicit mode overrides the memory default"


def test_update_arguments_prefers_content_over_memory() -> None:
    # Given both `content` and `memory`
    arguments = {"content": "from content", "memory": "from memory"}

    # When the update arguments are read
    content, _ = update_arguments(arguments, profile())

    # Then `content` is used
    assert content == "from content", "content takes precedence over memory"


@pytest.mark.parametrize("key", ["content", "memory"])
def test_update_arguments_parses_a_json_string_for_json_profiles(key: str) -> None:
    # Given an object sent as a JSON string to a JSON scratchpad
    arguments = {key: '{"name": "Ada"}'}

    # When the update arguments are read
    content, _ = update_arguments(arguments, profile(schema=SCHEMA))

    # Then the content is the decoded object
    assert content == {"name": "Ada"}, "a JSON string is decoded for JSON scratchpads"


def test_update_arguments_keeps_json_looking_text_for_text_profiles() -> None:
    # Given JSON-looking text for a markdown scratchpad
    arguments = {"content": '{"name": "Ada"}'}

    # When the update arguments are read
    content, _ = update_arguments(arguments, profile(format="markdown"))

    # Then it stays text
    assert content == '{"name": "Ada"}', "text scratchpads keep strings as they are"


def test_update_arguments_refuses_a_non_json_string_for_json_profiles() -> None:
    # Given a string that is not JSON for a JSON scratchpad
    arguments = {"content": "Ada likes tea"}

    # When the update arguments are read
    # Then the model is told an object is needed
    with pytest.raises(ToolArgumentError, match="must be a JSON object"):
        update_arguments(arguments, profile(format="json"))


@pytest.mark.parametrize("mode", ["append", "MERGE", "", 1])
def test_update_arguments_refuses_an_unknown_mode(mode: Any) -> None:
    # Given an unknown mode
    arguments = {"content": "x", "mode": mode}

    # When the update arguments are read
    # Then the model is told the valid modes
    with pytest.raises(ToolArgumentError, match='mode must be "merge" or "replace"'):
        update_arguments(arguments, profile())


def test_update_arguments_requires_content() -> None:
    # Given neither `content` nor `memory`
    arguments = {"mode": "merge"}

    # When the update arguments are read
    # Then the model is told content is missing
    with pytest.raises(ToolArgumentError, match='missing argument "content"'):
        update_arguments(arguments, profile())
