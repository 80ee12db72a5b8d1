"""Agent integration: tool definitions per model API and tool calls, through the handler."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import Call

pytestmark = pytest.mark.integration

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}},
    "required": ["name"],
}


FIVE_TOOLS = [
    "get_working_memory",
    "update_working_memory",
    "clear_working_memory",
    "search_memory",
    "add_memory",
]


def _name(tool: dict, tool_format: str) -> str:
    if tool_format == "openai":
        return str(tool["function"]["name"])
    if tool_format == "anthropic":
        return str(tool["name"])
    return str(tool["toolSpec"]["name"])


def _update_parameters(tools: list[dict], tool_format: str) -> dict:
    for tool in tools:
        if tool_format == "openai" and tool["function"]["name"] == "update_working_memory":
            return tool["function"]["parameters"]
        if tool_format == "anthropic" and tool["name"] == "update_working_memory":
            return tool["input_schema"]
        if tool_format == "bedrock" and tool["toolSpec"]["name"] == "update_working_memory":
            return tool["toolSpec"]["inputSchema"]["json"]
    raise AssertionError("no update tool")


@pytest.mark.parametrize("tool_format", ["openai", "anthropic", "bedrock"])
def test_tools_come_in_each_model_apis_format_typed_by_the_profile_schema(
    api: Call, tool_format: str
) -> None:
    api("PUT", "/v1/profiles/person", body={"schema": SCHEMA})

    response = api("GET", "/v1/tools", query={"format": tool_format, "profile": "person"})

    assert response.status == 200
    assert [_name(t, tool_format) for t in response.body["tools"]] == FIVE_TOOLS
    content = _update_parameters(response.body["tools"], tool_format)["properties"]["content"]
    assert "required" not in content  # a merge patch may carry any subset of fields
    assert content["properties"]["city"]["anyOf"][0] == {"type": "string"}


def test_tools_follow_the_sessions_profile(api: Call) -> None:
    api("PUT", "/v1/profiles/person", body={"schema": SCHEMA})
    api(
        "PUT",
        "/v1/working-memory/s1/scratchpad",
        query={"profile": "person"},
        body={"content": {"name": "Ada"}},
    )

    response = api("GET", "/v1/tools", query={"session_id": "s1"})

    content = _update_parameters(response.body["tools"], "openai")["properties"]["content"]
    assert "city" in content["properties"]


@pytest.mark.parametrize("tool_format", ["openai", "anthropic", "bedrock"])
def test_a_read_only_profile_still_offers_the_long_term_memory_tools(
    api: Call, tool_format: str
) -> None:
    api("PUT", "/v1/profiles/frozen", body={"read_only": True})

    response = api("GET", "/v1/tools", query={"format": tool_format, "profile": "frozen"})

    names = [_name(t, tool_format) for t in response.body["tools"]]
    assert names == ["get_working_memory", "search_memory", "add_memory"]


def test_an_unknown_tool_format_is_422(api: Call) -> None:
    response = api("GET", "/v1/tools", query={"format": "cobol"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "format"


def test_update_then_get_then_clear_through_tool_calls(api: Call) -> None:
    call = {"session_id": "s1"}

    updated = api(
        "POST",
        "/v1/tools/call",
        body={**call, "name": "update_working_memory", "arguments": {"content": "likes tea"}},
    )
    got = api("POST", "/v1/tools/call", body={**call, "name": "get_working_memory"})
    cleared = api("POST", "/v1/tools/call", body={**call, "name": "clear_working_memory"})
    after = api("GET", "/v1/working-memory/s1/scratchpad")

    assert updated.status == 200
    assert set(updated.body) == {"result"}
    assert updated.body["result"]["content"] == "likes tea"
    assert got.body["result"]["content"] == "likes tea"
    assert cleared.body["result"] == "working memory cleared"
    assert after.body["content"] is None


def test_openai_style_string_arguments_are_accepted(api: Call) -> None:
    response = api(
        "POST",
        "/v1/tools/call",
        body={
            "session_id": "s1",
            "name": "update_working_memory",
            "arguments": json.dumps({"content": "from a string"}),
        },
    )

    assert response.body["result"]["content"] == "from a string"


def test_mastras_update_working_memory_replaces_markdown(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"template": "# User\n- name:"})
    base = {"session_id": "s1", "profile": "notes", "name": "updateWorkingMemory"}
    api("POST", "/v1/tools/call", body={**base, "arguments": {"memory": "# User\n- name: A"}})

    response = api(
        "POST", "/v1/tools/call", body={**base, "arguments": {"memory": "# User\n- name: Ada"}}
    )

    assert response.body["result"]["content"] == "# User\n- name: Ada"


def test_noetics_tool_name_merges_json(api: Call) -> None:
    api("PUT", "/v1/profiles/person", body={"schema": SCHEMA})
    base = {"session_id": "s1", "profile": "person", "name": "working-memory/update"}
    api("POST", "/v1/tools/call", body={**base, "arguments": {"memory": {"name": "Ada"}}})

    response = api(
        "POST", "/v1/tools/call", body={**base, "arguments": {"memory": {"city": "Oslo"}}}
    )

    assert response.body["result"]["content"] == {"name": "Ada", "city": "Oslo"}


def test_a_schema_violation_comes_back_as_a_readable_tool_error(api: Call) -> None:
    api("PUT", "/v1/profiles/person", body={"schema": SCHEMA})

    response = api(
        "POST",
        "/v1/tools/call",
        body={
            "session_id": "s1",
            "profile": "person",
            "name": "update_working_memory",
            "arguments": {"content": {"city": 7}},
        },
    )

    assert response.status == 200
    assert "content.city" in response.body["error"]
    assert "content.name" in response.body["error"]  # required on the merged object


def test_an_unknown_tool_is_a_tool_error_listing_the_known_ones(api: Call) -> None:
    response = api("POST", "/v1/tools/call", body={"session_id": "s1", "name": "rm_rf"})

    assert response.status == 200
    assert set(response.body) == {"error"}
    assert all(name in response.body["error"] for name in FIVE_TOOLS)


def test_a_tool_call_without_session_or_user_is_422(api: Call) -> None:
    response = api("POST", "/v1/tools/call", body={"name": "get_working_memory"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "session_id"
