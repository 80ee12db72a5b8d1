"""The `mcp` SDK's own client against the local stack (`make serve`'s, with its JWT
authorizer): POST /mcp reaches the MCP function through the gateway the template wires, once
in each protocol era, the way Claude Desktop or an IDE would call it with a bearer token, and
the function verifies the token (or, with AuthMode apikey, the key) itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from memkit_dev.local.auth import JwtSettings, mint
from memkit_dev.local.stack import LocalStack, LocalStackConfig
from tests.conftest import ROOT

pytestmark = pytest.mark.integration

MODERN = "2026-07-28"
INDEXED_WITHIN_SECONDS = 30


def _config(**fields: Any) -> LocalStackConfig:
    return LocalStackConfig(
        port=0,
        concurrency=1,
        template=ROOT / "template.yaml",
        engine="moto",
        cleanup_interval_seconds=0,
        **fields,
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalStack]:
    data = tmp_path_factory.mktemp("mcp")
    with LocalStack(_config(auth="jwt", jwt=JwtSettings(data_dir=data))) as running:
        yield running


def _token(stack: LocalStack, user: str, *scopes: str) -> str:
    assert stack.config.jwt is not None
    return mint(stack.config.jwt.data_dir, user, "default", list(scopes))


async def _found(client: Client, text: str) -> list[dict[str, Any]]:
    """The search's hits once the stream has indexed what was written."""
    deadline = time.monotonic() + INDEXED_WITHIN_SECONDS
    while True:
        result = await client.call_tool("search_long_term_memory", {"text": text})
        hits = list((result.structured_content or {})["memories"])
        if hits or time.monotonic() > deadline:
            return hits
        await asyncio.sleep(0.3)


async def _an_agents_turn(url: str, token: str, mode: str, user: str) -> dict[str, Any]:
    """What an agent does in a turn: remember a fact, find it, keep notes, hydrate its prompt;
    and what it may not do: read another user's session."""
    http = httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=60)
    seen: dict[str, Any] = {}
    async with http, Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        seen["protocol"] = client.protocol_version
        seen["tools"] = {tool.name for tool in (await client.list_tools()).tools}
        fact = {"text": f"{user} drinks green tea every morning", "topics": ["drinks"]}
        created = await client.call_tool("create_long_term_memories", {"memories": [fact]})
        seen["created"] = (created.structured_content or {})["created"]
        seen["found"] = await _found(client, "what does the user drink?")
        pad = {"session_id": f"{user}-chat", "content": "- prefers short answers"}
        seen["pad"] = (await client.call_tool("update_scratchpad", pad)).structured_content
        prompt = await client.call_tool(
            "memory_prompt", {"query": "what do I drink?", "session_id": f"{user}-chat"}
        )
        seen["prompt"] = [m["content"]["text"] for m in prompt.structured_content["messages"]]
        try:
            await client.call_tool("get_working_memory", {"session_id": "x", "user_id": "other"})
        except MCPError as exc:
            seen["refused"] = exc.message
    return seen


@pytest.mark.parametrize(
    ("mode", "protocol"), [("legacy", "2025-11-25"), ("auto", MODERN)], ids=["handshake", MODERN]
)
def test_an_mcp_client_works_through_the_gateway_in_each_protocol_era(
    stack: LocalStack, mode: str, protocol: str
) -> None:
    user = f"ada-{mode}"
    token = _token(stack, user, "memory:read", "memory:write")

    seen = asyncio.run(_an_agents_turn(f"{stack.url}/mcp", token, mode, user))

    assert seen["protocol"] == protocol
    assert {"search_long_term_memory", "memory_prompt", "update_scratchpad"} <= seen["tools"]
    assert [hit["id"] for hit in seen["found"]] == seen["created"]
    assert seen["found"][0]["user_id"] == user  # the token's user, never an argument
    assert seen["pad"]["content"] == "- prefers short answers"
    assert any("green tea" in text for text in seen["prompt"])
    assert any("prefers short answers" in text for text in seen["prompt"])
    assert seen["refused"].startswith("insufficient_scope")


def test_an_unauthenticated_client_is_pointed_at_the_metadata_that_names_the_issuer(
    stack: LocalStack,
) -> None:
    url = f"{stack.url}/mcp"
    tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    forged = mint(None, "ada", "default", ["memory:read"])  # signed by a key no one trusts

    anonymous = httpx.post(url, json=tools_list, timeout=30)
    refused = httpx.post(url, json=tools_list, headers={"authorization": f"Bearer {forged}"})
    stream = httpx.get(url, timeout=30)
    pointer = anonymous.headers["www-authenticate"]
    metadata = httpx.get(pointer.split('resource_metadata="')[1].rstrip('"'), timeout=30)

    # POST /mcp has no authorizer at the gateway: the function's own 401 carries the
    # RFC 9728 pointer an MCP client follows to find the authorization server.
    assert anonymous.status_code == 401
    assert (
        pointer
        == f'Bearer resource_metadata="{stack.url}/.well-known/oauth-protected-resource/mcp"'
    )
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert (stream.status_code, stream.headers["allow"]) == (405, "POST")
    assert metadata.json()["resource"] == url
    assert metadata.json()["authorization_servers"] == ["memkit-local"]


def test_with_api_keys_the_mcp_function_checks_the_key_as_the_authorizer_does(
    tmp_path: Any,
) -> None:
    from memkit.config import ApiKeySettings
    from memkit.handlers.wiring import api_keys_for

    config = _config(auth="apikey", table_name="memkit-mcp-keys", data_dir=tmp_path)
    with LocalStack(config) as keyed:
        assert keyed.dev_key is not None
        keys = api_keys_for(
            ApiKeySettings(table_name=config.table_name, dynamodb_endpoint=keyed.dynamodb_endpoint)
        )
        revoked = keys.create("default", ["memory:read"], user_id="eve")
        keys.revoke("default", revoked.key.key_id)
        url = f"{keyed.url}/mcp"

        async def tools(key: str) -> set[str]:
            http = httpx2.AsyncClient(headers={"authorization": f"Bearer {key}"}, timeout=60)
            async with http, Client(streamable_http_client(url, http_client=http)) as client:
                return {tool.name for tool in (await client.list_tools()).tools}

        listed = asyncio.run(tools(keyed.dev_key))
        tools_list = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        anonymous = httpx.post(url, json=tools_list, timeout=30)
        gone = httpx.post(
            url, json=tools_list, headers={"authorization": f"Bearer {revoked.plain}"}, timeout=30
        )

    assert "search_long_term_memory" in listed
    assert anonymous.status_code == 401
    assert anonymous.headers["www-authenticate"].startswith("Bearer resource_metadata=")
    assert gone.status_code == 401  # revoked: no caller, whatever the key once was
    assert gone.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
