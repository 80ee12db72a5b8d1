"""Agent tools: definitions per model API, the partial schema, and tool-call arguments."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from pydantic import ValidationError

from memkit.errors import (
    FieldProblem,
    MemkitError,
    Misconfigured,
    StoreUnavailable,
    Throttled,
    ValidationFailed,
)
from memkit.models.api import AddMemoryArguments, SearchMemoryArguments
from memkit.models.domain import Owner, PadRef, Profile
from memkit.models.memory import (
    CreatedAck,
    CreateMemories,
    MemoryHit,
    MemoryResults,
    SearchMode,
    SearchRequest,
)
from memkit.scratchpad.tools import (
    ALIASES,
    MEMORY_ALIASES,
    MemoryToolName,
    ToolArgumentError,
    ToolFormat,
    ToolName,
    memory_tool_schemas,
    parse_arguments,
    partial_schema,
    render_memory_tools,
    render_tools,
    tool_schemas,
    update_arguments,
)
from memkit.service.scratchpad import ScratchpadService
from memkit.service.tools import ToolService
from tests.fakes.memory_store import InMemoryStore

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


# -- long-term memory tools: definitions ------------------------------------------------------

FIVE_TOOLS = [*ALL_TOOLS, MemoryToolName.SEARCH.value, MemoryToolName.ADD.value]


def memory_parameters(name: MemoryToolName) -> dict[str, Any]:
    return next(s for n, _, s in memory_tool_schemas() if n == name.value)


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_the_memory_tools_render_in_each_format_like_the_scratchpad_tools(
    tool_format: ToolFormat,
) -> None:
    # Given the memory tool schemas
    # When they are rendered
    tools = render_memory_tools(tool_format)

    # Then they take the same wire shape as the scratchpad tools
    scratchpad_keys = set(render_tools(profile(), tool_format)[0])
    assert [name_of(t, tool_format) for t in tools] == ["search_memory", "add_memory"]
    assert all(set(t) == scratchpad_keys for t in tools), "one wire shape for every tool"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_every_format_lists_all_five_tools(tool_format: ToolFormat) -> None:
    # Given the tool service over a scratchpad without a stored profile
    service = tool_service(FakeLongTerm())

    # When the definitions are listed
    tools = service.definitions(USER_CALL, tool_format)

    # Then the scratchpad's three come first, then search_memory and add_memory
    assert [name_of(t, tool_format) for t in tools] == FIVE_TOOLS, "five tools, in order"


@pytest.mark.parametrize("tool_format", list(ToolFormat))
def test_every_listed_tool_has_a_valid_object_schema(tool_format: ToolFormat) -> None:
    # Given the five tool definitions
    tools = tool_service(FakeLongTerm()).definitions(USER_CALL, tool_format)

    # When each parameters schema is checked
    for tool in tools:
        parameters = parameters_of(tool, tool_format)
        Draft202012Validator.check_schema(parameters)

        # Then each is a valid JSON Schema of an object, with a description for the model
        assert parameters["type"] == "object", "tool parameters are an object schema"
        assert all(p.get("description") for p in parameters["properties"].values())


@pytest.mark.parametrize(
    ("tool", "required"),
    [(MemoryToolName.SEARCH, ["query"]), (MemoryToolName.ADD, ["text"])],
)
def test_each_memory_tool_requires_one_argument(tool: MemoryToolName, required: list[str]) -> None:
    # Given a memory tool
    # When its parameters are rendered
    parameters = memory_parameters(tool)

    # Then one argument is required
    assert parameters["required"] == required, f"{tool.value} requires {required}"


@pytest.mark.parametrize(
    ("tool", "model"),
    [(MemoryToolName.SEARCH, SearchMemoryArguments), (MemoryToolName.ADD, AddMemoryArguments)],
)
def test_each_memory_tool_advertises_exactly_the_arguments_it_takes(
    tool: MemoryToolName, model: type[Any]
) -> None:
    # Given a memory tool's schema and the model its arguments are checked with
    # When their argument names are compared
    advertised = set(memory_parameters(tool)["properties"])

    # Then they agree: nothing advertised is refused, nothing taken is hidden
    assert advertised == set(model.model_fields), "schema and argument model agree"


def test_search_memory_max_results_is_1_to_20_default_5() -> None:
    # Given the search tool
    # When its max_results parameter is rendered
    max_results = memory_parameters(MemoryToolName.SEARCH)["properties"]["max_results"]

    # Then it is an integer from 1 to 20, 5 by default
    assert (max_results["minimum"], max_results["maximum"], max_results["default"]) == (1, 20, 5)


@pytest.mark.parametrize(
    ("tool", "types"),
    [
        (MemoryToolName.SEARCH, ["semantic", "episodic", "message"]),
        (MemoryToolName.ADD, ["semantic", "episodic"]),
    ],
)
def test_memory_type_is_an_enum(tool: MemoryToolName, types: list[str]) -> None:
    # Given a memory tool
    # When its memory_type parameter is rendered
    memory_type = memory_parameters(tool)["properties"]["memory_type"]

    # Then it lists the types the tool takes (a model cannot add a message)
    assert memory_type["enum"] == types


@pytest.mark.parametrize(
    "arguments",
    [
        {"query": "tea", "topics": ["drinks"], "memory_type": "message", "max_results": 20},
        {"query": "tea", "max_results": 21},
        {"query": "tea", "max_results": 0},
        {"query": "tea", "memory_type": "procedural"},
        {"query": 7},
        {"topics": ["drinks"]},
    ],
    ids=["all-valid", "too-many", "zero", "unknown-type", "query-not-text", "no-query"],
)
def test_the_search_schema_accepts_what_the_tool_accepts(arguments: dict[str, Any]) -> None:
    # Given search arguments
    # When they are checked against the advertised schema and by the tool
    advertised = is_valid(memory_parameters(MemoryToolName.SEARCH), arguments)
    try:
        SearchMemoryArguments.model_validate(arguments)
        taken = True
    except ValidationError:
        taken = False

    # Then both say the same
    assert advertised is taken, "the schema a model sees matches what the tool takes"


@pytest.mark.parametrize(
    ("name", "tool"),
    [
        ("search_memory", MemoryToolName.SEARCH),
        ("searchMemory", MemoryToolName.SEARCH),
        ("add_memory", MemoryToolName.ADD),
        ("addMemory", MemoryToolName.ADD),
    ],
)
def test_memory_aliases_map_framework_names_to_tools(name: str, tool: MemoryToolName) -> None:
    # Given a memory tool name some framework's model emits
    # When it is looked up
    found = MEMORY_ALIASES.get(name)

    # Then it names the memkit tool
    assert found is tool, f"{name} is {tool.value}"


# -- long-term memory tools: calls ------------------------------------------------------------

TENANT = "t1"
USER_CALL = PadRef(owner=Owner(tenant=TENANT, namespace="ns", user_id="ada"), session_id="s1")
SESSION_CALL = PadRef(owner=Owner(tenant=TENANT, namespace="ns"), session_id="s1")


def hit(hit_id: str, dist: float, **fields: Any) -> MemoryHit:
    values: dict[str, Any] = {
        "id": hit_id,
        "text": f"text of {hit_id}",
        "memory_type": "semantic",
        "topics": ["t"],
        "entities": ["e"],
        "session_id": "s0",
        "user_id": "ada",
        "namespace": "ns",
        "event_date": None,
        "pinned": False,
        "created_at": "2025-01-01T00:00:00Z",
        "updated_at": "2025-01-01T00:00:00Z",
        "last_accessed": "2025-01-01T00:00:00Z",
        "persisted_at": None,
        "memory_hash": "h",
        "extracted_from": [],
        "metadata": {},
        "discrete_memory_extracted": "f",
        "indexing": "indexed",
        "dist": dist,
        "score": 1 - dist,
        "score_type": "hybrid",
        **fields,
    }
    return MemoryHit.model_validate(values)


@dataclass
class FakeLongTerm:
    """Long-term memory that records what it was asked; texts in `known` are duplicates."""

    hits: list[MemoryHit] = field(default_factory=list)
    known: set[str] = field(default_factory=set)
    failure: MemkitError | None = None
    searches: list[tuple[str, SearchRequest]] = field(default_factory=list)
    creates: list[tuple[str, CreateMemories]] = field(default_factory=list)

    def create(self, tenant: str, body: CreateMemories, *, confined: bool = False) -> CreatedAck:
        if self.failure is not None:
            raise self.failure
        self.creates.append((tenant, body))
        ids = [m.id for m in body.memories]
        if body.memories[0].text in self.known:
            return CreatedAck(status="ok", created=[], duplicates=ids)
        return CreatedAck(status="ok", created=ids, duplicates=[])

    def search(self, tenant: str, request: SearchRequest) -> MemoryResults:
        if self.failure is not None:
            raise self.failure
        self.searches.append((tenant, request))
        return MemoryResults(memories=self.hits, total=len(self.hits), next_offset=None)


def tool_service(long_term: FakeLongTerm) -> ToolService:
    scratchpads = ScratchpadService(pads := InMemoryStore(), pads, sleep=lambda _seconds: None)
    return ToolService(scratchpads, long_term, new_id=lambda: "01NEWID")


def test_search_memory_is_a_hybrid_search_scoped_to_the_calls_namespace_and_user() -> None:
    # Given a call naming a user
    long_term = FakeLongTerm()

    # When the model searches
    tool_service(long_term).call(USER_CALL, "search_memory", {"query": "tea"})

    # Then long-term memory is searched in the tenant, namespace and user, hybrid, 5 results
    [(tenant, request)] = long_term.searches
    assert tenant == TENANT
    assert (request.text, request.namespace, request.user_id) == ("tea", "ns", "ada")
    assert (request.search_mode, request.limit) == (SearchMode.HYBRID, 5)
    assert request.session_id is None, "long-term memory spans the user's sessions"


def test_search_memory_without_a_user_is_scoped_to_the_namespace() -> None:
    # Given a call naming only a session
    long_term = FakeLongTerm()

    # When the model searches
    tool_service(long_term).call(SESSION_CALL, "search_memory", {"query": "tea"})

    # Then no user filter is set, the namespace one is
    [(_, request)] = long_term.searches
    assert (request.namespace, request.user_id) == ("ns", None)


def test_search_memory_passes_topics_type_and_max_results_as_filters() -> None:
    # Given optional search arguments
    long_term = FakeLongTerm()
    arguments = {"query": "tea", "topics": ["a", "b"], "memory_type": "episodic", "max_results": 7}

    # When the model searches with them
    tool_service(long_term).call(USER_CALL, "search_memory", arguments)

    # Then topics match any, the type matches exactly, and max_results is the limit
    [(_, request)] = long_term.searches
    assert request.topics == {"any": ["a", "b"]}
    assert request.memory_type == {"eq": "episodic"}
    assert request.limit == 7


def test_search_memory_returns_compact_hits_with_a_relevance() -> None:
    # Given a stored hit
    long_term = FakeLongTerm(hits=[hit("r1", dist=0.12345)])

    # When the model searches
    outcome = tool_service(long_term).call(USER_CALL, "search_memory", {"query": "tea"})

    # Then it reads the memory in a few fields, relevance = 1 - dist rounded
    assert outcome == {
        "result": [
            {
                "id": "r1",
                "text": "text of r1",
                "memory_type": "semantic",
                "topics": ["t"],
                "created_at": "2025-01-01T00:00:00Z",
                "relevance": 0.877,
            }
        ]
    }


def test_a_message_hit_names_its_session_and_role() -> None:
    # Given a message hit
    message = hit("m1", dist=0.5, memory_type="message", session_id="chat-9", role="user")

    # When the model searches
    outcome = tool_service(FakeLongTerm(hits=[message])).call(
        USER_CALL, "search_memory", {"query": "tea"}
    )

    # Then the hit carries where it was said and by whom
    [found] = outcome["result"]
    assert (found["session_id"], found["role"]) == ("chat-9", "user")


def test_an_episodic_hit_shows_its_event_date() -> None:
    # Given an episodic hit with an event date
    event = hit("e1", dist=0.5, memory_type="episodic", event_date="2025-03-14T00:00:00Z")

    # When the model searches
    outcome = tool_service(FakeLongTerm(hits=[event])).call(
        USER_CALL, "search_memory", {"query": "trip"}
    )

    # Then it reads when the event is
    assert outcome["result"][0]["event_date"] == "2025-03-14T00:00:00Z"


def test_no_hit_is_an_empty_list() -> None:
    # Given nothing stored
    # When the model searches
    outcome = tool_service(FakeLongTerm()).call(USER_CALL, "search_memory", {"query": "tea"})

    # Then the answer is an empty list, not an error
    assert outcome == {"result": []}


def test_a_bad_search_is_an_error_and_searches_nothing() -> None:
    # Given arguments without a query
    long_term = FakeLongTerm()

    # When the model calls search_memory
    outcome = tool_service(long_term).call(USER_CALL, "search_memory", {"topics": ["a"]})

    # Then it reads what is missing, and nothing was searched
    assert outcome == {"error": 'invalid arguments for search_memory: missing argument "query"'}
    assert long_term.searches == []


def test_an_unknown_argument_is_refused_naming_the_ones_taken() -> None:
    # Given an argument the tool does not take (a filter that would be dropped)
    arguments = {"query": "tea", "entities": ["Ada"]}

    # When the model calls search_memory
    outcome = tool_service(FakeLongTerm()).call(USER_CALL, "search_memory", arguments)

    # Then it reads which argument and what the tool takes
    assert outcome["error"].endswith(
        'unknown argument "entities" (search_memory takes query, topics, memory_type, max_results)'
    )


def test_add_memory_creates_one_record_owned_by_the_call() -> None:
    # Given a call naming a user, a namespace and a session
    long_term = FakeLongTerm()
    arguments = {"text": "Ada is vegetarian", "topics": ["food"], "entities": ["Ada"]}

    # When the model adds a memory
    tool_service(long_term).call(USER_CALL, "add_memory", arguments)

    # Then one deduplicated semantic record with a new id is created in the call's scope
    [(tenant, body)] = long_term.creates
    [record] = body.memories
    assert tenant == TENANT
    assert body.deduplicate is True
    assert (record.id, record.text, record.memory_type) == (
        "01NEWID",
        "Ada is vegetarian",
        "semantic",
    )
    assert (record.namespace, record.user_id, record.session_id) == ("ns", "ada", "s1")
    assert (record.topics, record.entities) == (["food"], ["Ada"])


def test_add_memory_parses_an_episodic_event_date() -> None:
    # Given an episodic memory with a date
    long_term = FakeLongTerm()
    arguments = {"text": "Ada flies to Oslo", "memory_type": "episodic", "event_date": "2025-03-14"}

    # When the model adds it
    tool_service(long_term).call(USER_CALL, "add_memory", arguments)

    # Then the record carries the type and the date
    [record] = long_term.creates[0][1].memories
    assert record.memory_type == "episodic"
    assert record.event_date == datetime(2025, 3, 14, tzinfo=UTC)


def test_add_memory_says_stored_with_the_new_id() -> None:
    # Given nothing stored
    # When the model adds a memory
    outcome = tool_service(FakeLongTerm()).call(USER_CALL, "add_memory", {"text": "Ada is tall"})

    # Then it reads the id and that it is stored (and searchable soon)
    assert outcome["result"]["id"] == "01NEWID"
    assert outcome["result"]["status"].startswith("stored")
    assert "search_memory" in outcome["result"]["status"]


def test_add_memory_says_already_known_for_a_duplicate() -> None:
    # Given the user already has that memory
    long_term = FakeLongTerm(known={"Ada is tall"})

    # When the model adds it again
    outcome = tool_service(long_term).call(USER_CALL, "add_memory", {"text": "Ada is tall"})

    # Then it reads that it was already known, with no id of a record never written
    assert outcome["result"]["id"] is None
    assert outcome["result"]["status"].startswith("already known")


@pytest.mark.parametrize(
    "arguments",
    [
        {"text": " \n "},
        {"text": "x", "memory_type": "message"},
        {"text": "x", "event_date": "yesterday"},
        {"text": "x", "topics": [""]},
        {"text": "x", "session_id": "other"},
    ],
    ids=["blank", "message", "bad-date", "empty-topic", "scope-in-arguments"],
)
def test_a_bad_add_is_an_error_and_creates_nothing(arguments: dict[str, Any]) -> None:
    # Given add_memory arguments that cannot be used
    long_term = FakeLongTerm()

    # When the model calls add_memory
    outcome = tool_service(long_term).call(USER_CALL, "add_memory", arguments)

    # Then it reads an error, and nothing was created
    assert outcome["error"].startswith("invalid arguments for add_memory: ")
    assert long_term.creates == []


@pytest.mark.parametrize(
    "failure",
    [
        StoreUnavailable("query failed: endpoint https://x down"),
        Throttled("the embedding model is busy; retry later"),
        Misconfigured("MEMKIT_OPENSEARCH_ENDPOINT is not set"),
    ],
    ids=["unavailable", "throttled", "misconfigured"],
)
@pytest.mark.parametrize(
    ("tool", "arguments"),
    [("search_memory", {"query": "tea"}), ("add_memory", {"text": "Ada drinks tea"})],
)
def test_the_services_own_failure_is_raised_not_answered_to_the_model(
    failure: MemkitError, tool: str, arguments: dict[str, Any]
) -> None:
    # Given long-term memory that is down, throttled or misconfigured
    long_term = FakeLongTerm(failure=failure)

    # When the model calls a memory tool
    # Then the call raises the service's error (the HTTP edge answers 429/503 with
    # Retry-After, or 500): no tool result pretends the call worked
    with pytest.raises(type(failure)):
        tool_service(long_term).call(USER_CALL, tool, arguments)


def test_a_refusal_of_long_term_memory_is_an_error_naming_the_field() -> None:
    # Given long-term memory refusing a request with a field problem
    problem = ValidationFailed("a filter is not valid")
    problem.errors.append(FieldProblem("topics.any", "takes a list of strings"))
    long_term = FakeLongTerm(failure=problem)

    # When the model searches
    outcome = tool_service(long_term).call(USER_CALL, "search_memory", {"query": "tea"})

    # Then it reads the detail and the field
    assert outcome == {"error": "a filter is not valid (topics.any: takes a list of strings)"}


def test_an_unknown_tool_lists_all_five() -> None:
    # Given a tool name nobody defines
    # When the model calls it
    outcome = tool_service(FakeLongTerm()).call(USER_CALL, "forget_everything", {})

    # Then it reads the five tool names
    assert outcome == {
        "error": "unknown tool 'forget_everything'; available: " + ", ".join(sorted(FIVE_TOOLS))
    }


def test_a_scratchpad_tool_still_runs_on_the_scratchpad() -> None:
    # Given the tool service
    service = tool_service(FakeLongTerm())

    # When the model updates then reads the working memory
    service.call(USER_CALL, "update_working_memory", {"content": "likes tea"})
    outcome = service.call(USER_CALL, "get_working_memory", None)

    # Then the scratchpad answers
    assert outcome == {"result": {"content": "likes tea", "version": 1}}
