"""The MCP server through its Lambda handler, with API Gateway v2 events on moto: both
protocol eras on one endpoint, the reference server's tools run by memkit's services, the
caller's identity from the verified request context, and the OAuth resource server's
answers (metadata, 401, 403 insufficient_scope)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from typing import Any

import boto3
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from memkit.config import ApiSettings, McpSettings
from memkit.handlers.mcp import make_lambda_handler
from memkit.identity import ADMIN, READ, WRITE
from memkit.models.domain import ProfileSpec
from memkit.store.dynamodb import DynamoStore
from tests.conftest import LambdaContextStub
from tests.events import http_event, jwt_authorizer, load_event
from tests.integration.memory_world import MemoryWorld, build_world
from tests.mcp_requests import (
    HANDSHAKE,
    MODERN,
    McpAnswer,
    answer,
    call_mcp,
    initialize,
    mcp_event,
    request,
    tool_call,
)
from tests.tokens import AUDIENCE, ISSUER, bearer_for, token, verifying_settings

pytestmark = pytest.mark.integration

ADA = jwt_authorizer("acme", "ada", READ, WRITE)
READER = jwt_authorizer("acme", "ada", READ)
WRITER_ONLY = jwt_authorizer("acme", "ada", WRITE)
OPS = jwt_authorizer("acme", "ops", ADMIN)
HOST = "abc123.execute-api.us-east-1.amazonaws.com"  # events/api_request.json's domainName
METADATA_URL = f"https://{HOST}/.well-known/oauth-protected-resource/mcp"

# The Agent Memory Server's MCP tools and parameters (agent_memory_server/mcp.py); memkit
# serves each of them (compaction is by namespace and user: memkit has no session scope
# for it, so compact_long_term_memories takes no session_id).
RECENCY = {
    "recency_boost",
    "recency_semantic_weight",
    "recency_recency_weight",
    "recency_freshness_weight",
    "recency_novelty_weight",
    "recency_half_life_last_access_days",
    "recency_half_life_created_days",
    "server_side_recency",
}
FILTERS = {"topics", "entities", "created_at", "last_accessed", "user_id", "memory_type"}
FILTERS |= {"event_date", "distance_threshold", "limit", "offset", "optimize_query"}
REFERENCE_TOOLS = {
    "get_current_datetime": set(),
    "create_long_term_memories": {"memories"},
    "search_long_term_memory": {"text", "search_mode", "session_id", "namespace"}
    | FILTERS
    | RECENCY,
    "memory_prompt": {"query", "session_id", "namespace", "model_name", "context_window_max"}
    | {"search_mode", "include_long_term_search"}
    | FILTERS
    | RECENCY,
    "set_working_memory": {"session_id", "memories", "messages", "context", "data"}
    | {"namespace", "user_id", "ttl_seconds", "long_term_memory_strategy"},
    "get_working_memory": {"session_id", "user_id", "namespace", "recent_messages_limit"},
    "get_long_term_memory": {"memory_id"},
    "edit_long_term_memory": {"memory_id", "text", "topics", "entities", "memory_type"}
    | {"namespace", "user_id", "session_id", "event_date", "pinned"},
    "delete_long_term_memories": {"memory_ids"},
    "compact_long_term_memories": {"namespace", "user_id"},
}
SCRATCHPAD_TOOLS = {"get_scratchpad", "update_scratchpad", "clear_scratchpad"}
# memkit's own: current truth (supersession and history)
TRUTH_TOOLS = {"supersede_long_term_memory", "get_long_term_memory_history"}


@pytest.fixture
def world(dynamodb_table: str) -> MemoryWorld:
    settings = ApiSettings(
        table_name=dynamodb_table, region="us-east-1", auth_mode="jwt", tenant_claim="custom:tenant"
    )
    return build_world(dynamodb_table, settings)


def _handler(world: MemoryWorld) -> Any:
    settings = verifying_settings(scope_prefix="memkit/")
    return make_lambda_handler(lambda: world.services, lambda: settings)


@pytest.fixture
def mcp(world: MemoryWorld) -> Any:
    """call(message, who=ADA, version=...) through the MCP handler over the world's services."""
    handler = _handler(world)

    def call(message: Any, who: dict[str, Any] | None = ADA, **kw: Any) -> McpAnswer:
        return call_mcp(handler, message, who, **kw)

    return call


def _items(table: str) -> list[dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    return [
        item
        for page in client.get_paginator("scan").paginate(TableName=table)
        for item in page["Items"]
    ]


# -- protocol --------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"])
def test_each_handshake_version_is_negotiated_statelessly_with_a_json_answer(
    mcp: Any, version: str
) -> None:
    answered = mcp(initialize(version), version=None)

    assert answered.status == 200
    assert answered.headers["content-type"].startswith("application/json")
    assert answered.result["protocolVersion"] == version
    assert answered.result["serverInfo"]["name"] == "memkit"
    assert "mcp-session-id" not in answered.headers  # stateless: nothing to resume


def test_a_2026_request_is_answered_without_a_handshake_on_the_same_endpoint(mcp: Any) -> None:
    discovered = mcp(request("server/discover", version=MODERN), version=MODERN)
    listed = mcp(request("tools/list", version=MODERN), version=MODERN)

    assert discovered.status == 200
    assert MODERN in discovered.result["supportedVersions"]
    assert {tool["name"] for tool in listed.result["tools"]} >= set(REFERENCE_TOOLS)


def test_a_warm_function_answers_one_request_after_another(mcp: Any) -> None:
    # The transport is made per invocation: a session manager runs only once, so one kept
    # from the first invocation would fail the second.
    statuses = [
        mcp(initialize()).status,
        mcp(request("tools/list")).status,
        mcp(tool_call("get_current_datetime", {})).status,
        mcp(tool_call("get_current_datetime", {}, MODERN), version=MODERN).status,
    ]

    assert statuses == [200, 200, 200, 200]


def test_the_tools_are_the_reference_servers_with_its_parameters_and_the_scratchpads(
    mcp: Any,
) -> None:
    tools = {tool["name"]: tool for tool in mcp(request("tools/list")).result["tools"]}

    assert set(tools) == set(REFERENCE_TOOLS) | SCRATCHPAD_TOOLS | TRUTH_TOOLS
    for name, parameters in REFERENCE_TOOLS.items():
        offered = set(tools[name]["inputSchema"].get("properties", {}))
        assert parameters <= offered, (name, parameters - offered)
    assert tools["get_long_term_memory"]["annotations"]["readOnlyHint"] is True
    assert tools["delete_long_term_memories"]["annotations"]["destructiveHint"] is True


def test_the_canonical_event_lists_the_tools_for_a_token_in_its_authorization(
    world: MemoryWorld,
) -> None:
    # events/mcp_request.json: what `sam local invoke McpFunction -e` sends, as API Gateway
    # sends POST /mcp (no authorizer context: the function verifies the bearer token).
    event = load_event("mcp_request.json")
    as_shipped = answer(_handler(world)(event, LambdaContextStub()))
    event["headers"]["authorization"] = bearer_for(ADA)
    listed = answer(_handler(world)(event, LambdaContextStub()))

    assert as_shipped.status == 401  # its placeholder is no token
    assert as_shipped.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert listed.status == 200
    assert {tool["name"] for tool in listed.result["tools"]} >= set(REFERENCE_TOOLS)


def test_get_mcp_is_405_at_once_and_other_paths_are_not_found(world: MemoryWorld) -> None:
    handler = _handler(world)

    stream = answer(handler(http_event("GET", "/mcp", authorizer=ADA), LambdaContextStub()))
    nowhere = answer(handler(http_event("POST", "/mcpx", authorizer=ADA), LambdaContextStub()))

    assert (stream.status, stream.headers["allow"]) == (405, "POST")
    assert nowhere.status == 404


# -- tools, through memkit's services --------------------------------------------------------


def test_long_term_memory_through_the_tools(mcp: Any, world: MemoryWorld) -> None:
    created = mcp(
        tool_call(
            "create_long_term_memories",
            {"memories": [{"text": "Ada drinks green tea every morning", "topics": ["drinks"]}]},
        )
    ).structured
    [memory_id] = created["created"]
    world.settle()

    found = mcp(tool_call("search_long_term_memory", {"text": "what does Ada drink?"}))
    edited = mcp(tool_call("edit_long_term_memory", {"memory_id": memory_id, "pinned": True}))
    read = mcp(tool_call("get_long_term_memory", {"memory_id": memory_id}))
    deleted = mcp(tool_call("delete_long_term_memories", {"memory_ids": [memory_id]}))
    gone = mcp(tool_call("get_long_term_memory", {"memory_id": memory_id}))

    hit = found.structured["memories"][0]
    assert (hit["id"], hit["user_id"]) == (memory_id, "ada")  # the caller's user, not named
    assert edited.structured["pinned"] is True
    assert read.structured["text"] == "Ada drinks green tea every morning"
    assert deleted.structured["status"] == "ok, deleted 1 memories"
    assert "no long-term memory" in gone.tool_error


def test_a_fact_superseded_through_the_tools_keeps_its_history(
    mcp: Any, world: MemoryWorld
) -> None:
    # Given Ada's home, stored through the tools with a slot
    home = {
        "text": "Ada lives in Paris",
        "key": "home_city",
        "topics": ["home"],
        "valid_from": "2024-01-01T00:00:00Z",
    }
    [paris] = mcp(tool_call("create_long_term_memories", {"memories": [home]})).structured[
        "created"
    ]

    # When the agent supersedes it with her move
    moved = mcp(
        tool_call(
            "supersede_long_term_memory",
            {
                "memory_id": paris,
                "text": "Ada lives in Berlin",
                "valid_from": "2026-03-01T00:00:00Z",
            },
        )
    ).structured
    world.settle()
    found = mcp(tool_call("search_long_term_memory", {"text": "where does Ada live?"}))
    before = mcp(
        tool_call(
            "search_long_term_memory",
            {"text": "where does Ada live?", "as_of": "2026-01-01T00:00:00Z"},
        )
    )
    history = mcp(tool_call("get_long_term_memory_history", {"memory_id": paris})).structured

    # Then the new fact keeps the slot, topics and user, and is the only current one
    assert (moved["key"], moved["topics"], moved["user_id"]) == ("home_city", ["home"], "ada")
    assert moved["supersedes"] == [paris]
    assert [m["id"] for m in found.structured["memories"]] == [moved["id"]]
    assert [m["id"] for m in before.structured["memories"]] == [paris]
    # And Paris's history says who superseded it, and through which door
    latest = history["versions"][0]
    assert (latest["change"], latest["via"]) == ("supersede", "mcp")
    assert latest["by"] == "token:ada"
    assert latest["memory"]["superseded_by"] == moved["id"]
    assert [v["change"] for v in history["versions"]] == ["supersede", "create"]


def test_a_session_and_its_prompt_through_the_tools(mcp: Any, world: MemoryWorld) -> None:
    written = mcp(
        tool_call(
            "set_working_memory",
            {
                "session_id": "chat-1",
                "messages": [{"role": "user", "content": "I am flying to Oslo on Friday"}],
                "context": "Ada plans a trip",
                "data": {"city": "Oslo"},
            },
        )
    )
    read = mcp(tool_call("get_working_memory", {"session_id": "chat-1"}, MODERN), version=MODERN)
    world.settle()
    prompt = mcp(
        tool_call(
            "memory_prompt",
            {"query": "when do I fly?", "session_id": {"eq": "chat-1"}, "model_name": "gpt-4o"},
        )
    )

    assert written.structured["user_id"] == "ada"
    assert read.structured["messages"][0]["content"] == "I am flying to Oslo on Friday"
    assert read.structured["data"] == {"city": "Oslo"}
    texts = [m["content"]["text"] for m in prompt.structured["messages"]]
    assert texts[0].endswith("Ada plans a trip")
    assert texts[-1] == "when do I fly?"
    assert any("Oslo" in text for text in texts[1:-1])


def test_a_system_message_stays_a_system_message_in_the_prompt_tool(
    mcp: Any, world: MemoryWorld
) -> None:
    messages = [
        {"role": "system", "content": "You are a travel agent."},
        {"role": "user", "content": "I am flying to Oslo on Friday"},
    ]
    mcp(tool_call("set_working_memory", {"session_id": "agent", "messages": messages}))
    world.settle()

    prompt = mcp(
        tool_call(
            "memory_prompt",
            {"query": "which seat?", "session_id": {"eq": "agent"}, "model_name": "gpt-4o"},
        )
    )

    turns = [(m["role"], m["content"]["text"]) for m in prompt.structured["messages"][-3:]]
    assert turns == [
        ("system", "You are a travel agent."),
        ("user", "I am flying to Oslo on Friday"),
        ("user", "which seat?"),
    ]


def test_a_prompt_without_a_session_searches_with_the_filters_given(
    mcp: Any, world: MemoryWorld
) -> None:
    memories = [
        {"text": "Ada drinks green tea every morning", "topics": ["drinks"]},
        {"text": "Ada flies to Oslo for a conference", "topics": ["travel"]},
    ]
    mcp(tool_call("create_long_term_memories", {"memories": memories}))
    world.settle()

    everything = mcp(tool_call("memory_prompt", {"query": "what do you know about Ada?"}))
    travel = mcp(
        tool_call(
            "memory_prompt",
            {"query": "what do you know about Ada?", "topics": {"any": ["travel"]}},
        )
    )

    def memories_in(prompt: McpAnswer) -> str:
        return " ".join(m["content"]["text"] for m in prompt.structured["messages"][:-1])

    assert "green tea" in memories_in(everything)
    assert "Oslo" in memories_in(everything)
    assert "Oslo" in memories_in(travel)
    assert "green tea" not in memories_in(travel)


def test_the_scratchpad_through_its_tools(mcp: Any) -> None:
    merged = mcp(tool_call("update_scratchpad", {"session_id": "chat-1", "content": "- tea"}))
    again = mcp(tool_call("update_scratchpad", {"session_id": "chat-1", "content": "- chess"}))
    read = mcp(tool_call("get_scratchpad", {"session_id": "chat-1"}))
    cleared = mcp(tool_call("clear_scratchpad", {"session_id": "chat-1"}))
    empty = mcp(tool_call("get_scratchpad", {"session_id": "chat-1"}))

    assert merged.structured["version"] == 1
    assert again.structured["version"] == 2
    assert read.structured["content"] == "- tea\n- chess"
    assert cleared.structured == {"status": "working memory cleared"}
    assert not empty.structured["content"]


def test_compaction_merges_unless_a_dry_run_is_asked_and_needs_an_admin(mcp: Any) -> None:
    # As the reference server's tool, which has no dry run: without one, it merges.
    text = {"text": "Ada likes tea", "user_id": "ada"}
    mcp(tool_call("create_long_term_memories", {"memories": [text]}, HANDSHAKE), who=OPS)
    mcp(tool_call("create_long_term_memories", {"memories": [text], "deduplicate": False}), who=OPS)

    as_ada = mcp(tool_call("compact_long_term_memories", {}))
    dry = mcp(tool_call("compact_long_term_memories", {"user_id": "ada", "dry_run": True}), who=OPS)
    done = mcp(tool_call("compact_long_term_memories", {"user_id": "ada"}), who=OPS)
    again = mcp(tool_call("compact_long_term_memories", {"user_id": "ada"}), who=OPS)

    assert as_ada.status == 403
    assert dry.structured["dry_run"] is True
    assert len(dry.structured["merged"]) == 1
    assert done.structured["dry_run"] is False
    assert len(done.structured["merged"]) == 1
    assert again.structured["merged"] == []  # the duplicate is gone


def test_the_datetime_is_now_in_utc(mcp: Any) -> None:
    import time

    now = mcp(tool_call("get_current_datetime", {})).structured

    assert now["iso_utc"].endswith("Z")
    assert abs(now["unix_ts"] - time.time()) < 5


# -- identity: the OAuth resource server -----------------------------------------------------


def test_the_metadata_names_the_resource_its_issuer_and_scopes_without_a_token(
    world: MemoryWorld,
) -> None:
    handler = _handler(world)
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        found = answer(handler(http_event("GET", path), LambdaContextStub()))

        assert found.status == 200
        assert "x-memkit-warning" not in found.headers  # auth mode jwt: identity is verified
        assert found.body == {
            "resource": f"https://{HOST}/mcp",
            "resource_name": "memkit",
            "bearer_methods_supported": ["header"],
            "scopes_supported": [
                "memkit/memory:read",
                "memkit/memory:write",
                "memkit/memory:admin",
            ],
            "authorization_servers": [ISSUER],
        }


def _sent(handler: Any, event: dict[str, Any]) -> McpAnswer:
    return answer(handler(event, LambdaContextStub()))


def test_the_function_verifies_the_token_itself_and_trusts_no_context_in_the_event(
    world: MemoryWorld,
) -> None:
    # POST /mcp has no authorizer at the gateway (AuthMode jwt): whatever the event carries
    # as requestContext.authorizer is not a verified caller; only the token is.
    handler = _handler(world)
    planted = _sent(handler, mcp_event(request("tools/list"), OPS))
    forged = _sent(
        handler,
        mcp_event(
            request("tools/list"),
            OPS,
            headers={"authorization": "Bearer " + token({"sub": "ops"}, aud="another-api")},
        ),
    )
    # A Cognito deployment: its scopes count with their resource server's prefix, memkit/
    prefixed = replace(world.services.settings.identity, scope_prefix="memkit/")
    settings = verifying_settings(scope_prefix="memkit/")
    for_cognito = make_lambda_handler(
        lambda: world.services, lambda: settings, identity=lambda: prefixed
    )
    cognito = _sent(  # an access token of a Cognito app client: no aud, client_id
        for_cognito,
        mcp_event(
            tool_call("get_working_memory", {"session_id": "s"}),
            headers={
                "authorization": "Bearer "
                + token(
                    {"sub": "ada", "custom:tenant": "acme", "scope": "memkit/memory:read"},
                    aud=None,
                    client_id=AUDIENCE,
                )
            },
        ),
    )

    assert planted.status == 401
    assert planted.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'
    assert forged.status == 401
    assert forged.headers["www-authenticate"].startswith('Bearer error="invalid_token"')
    assert cognito.status == 200
    assert "does not exist" in cognito.tool_error  # ada's (empty) session: allowed to ask


def test_an_issuer_whose_keys_cannot_be_fetched_is_a_503_to_retry(world: MemoryWorld) -> None:
    closed = "http://127.0.0.1:9"  # discard port: nothing answers
    settings = McpSettings(oauth_issuer=closed, jwt_audience=AUDIENCE)
    handler = make_lambda_handler(lambda: world.services, lambda: settings)
    sent = token({"sub": "ada", "custom:tenant": "acme", "scope": READ}, iss=closed)

    answered = _sent(
        handler, mcp_event(request("tools/list"), headers={"authorization": f"Bearer {sent}"})
    )

    assert answered.status == 503
    assert answered.error["message"] == "the service is not available"


def test_with_api_keys_the_function_looks_the_key_up_as_the_authorizer_does(
    dynamodb_table: str,
) -> None:
    from memkit.config import ApiKeySettings
    from memkit.handlers.wiring import api_keys_for

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1", auth_mode="apikey")
    keyed = build_world(dynamodb_table, settings)
    keys = api_keys_for(ApiKeySettings(table_name=dynamodb_table, region="us-east-1"))
    ada = keys.create("acme", [READ, WRITE], user_id="ada")
    bob = keys.create("acme", [READ, WRITE], user_id="bob")
    revoked = keys.create("acme", [READ], user_id="eve")
    keys.revoke("acme", revoked.key.key_id)
    handler = make_lambda_handler(lambda: keyed.services, lambda: McpSettings(), lambda: keys)

    def with_key(message: Any, key: str | None) -> McpAnswer:
        headers = {"authorization": f"Bearer {key}"} if key else {}
        return _sent(handler, mcp_event(message, headers=headers))

    pad = {"session_id": "k1", "content": "- likes tea"}
    written = with_key(tool_call("update_scratchpad", pad), ada.plain)
    read = with_key(tool_call("get_scratchpad", {"session_id": "k1"}), ada.plain)
    others = with_key(tool_call("get_scratchpad", {"session_id": "k1"}), bob.plain)
    gone = with_key(request("tools/list"), revoked.plain)
    missing = with_key(request("tools/list"), None)

    assert written.status == 200
    assert read.status == 200
    assert read.structured["content"] == "- likes tea"
    assert "belongs to another user" in others.tool_error  # each key acts as its own user
    assert (gone.status, missing.status) == (401, 401)
    assert missing.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'


def test_no_verified_caller_is_a_401_pointing_at_the_metadata(mcp: Any) -> None:
    refused = mcp(request("tools/list"), who=None)

    assert refused.status == 401
    assert refused.headers["www-authenticate"] == f'Bearer resource_metadata="{METADATA_URL}"'
    assert refused.error["code"] == -32004


def test_a_credential_without_memory_read_is_403_insufficient_scope(mcp: Any) -> None:
    refused = mcp(request("tools/list"), who=WRITER_ONLY)

    assert refused.status == 403
    challenge = refused.headers["www-authenticate"]
    assert 'error="insufficient_scope"' in challenge
    assert 'scope="memkit/memory:read"' in challenge
    assert f'resource_metadata="{METADATA_URL}"' in challenge


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
def test_a_tool_that_writes_needs_memory_write_and_writes_nothing_without_it(
    mcp: Any, dynamodb_table: str, version: str
) -> None:
    before = _items(dynamodb_table)

    refused = mcp(
        tool_call("create_long_term_memories", {"memories": [{"text": "planted"}]}, version),
        who=READER,
        version=version,
    )

    assert refused.status == 403
    assert 'scope="memkit/memory:write"' in refused.headers["www-authenticate"]
    assert refused.error["data"] == {"scope": "memory:write"}
    assert _items(dynamodb_table) == before


def test_naming_another_user_takes_memory_admin_as_on_the_rest_api(mcp: Any) -> None:
    refused = mcp(tool_call("get_working_memory", {"session_id": "s", "user_id": "bob"}))
    allowed = mcp(tool_call("get_working_memory", {"session_id": "s", "user_id": "bob"}), who=OPS)

    assert refused.status == 403
    assert 'scope="memkit/memory:admin"' in refused.headers["www-authenticate"]
    assert "may act only for its own user" in refused.error["message"]
    assert allowed.status == 200
    assert "does not exist" in allowed.tool_error  # allowed, and there is none


def test_the_tenants_quota_applies_to_mcp_requests(dynamodb_table: str) -> None:
    settings = ApiSettings(
        table_name=dynamodb_table,
        region="us-east-1",
        auth_mode="jwt",
        tenant_claim="custom:tenant",
        tenant_requests_per_minute=1,
    )
    # 10 s into a minute, held there: both calls count against the same minute
    store = DynamoStore(settings, clock=lambda: 1_800_000_010.0, index_messages=True)
    handler = _handler(build_world(dynamodb_table, settings, store=store))

    first = call_mcp(handler, request("tools/list"), ADA)
    second = call_mcp(handler, request("tools/list"), ADA)

    assert first.status == 200
    assert second.status == 429
    assert int(second.headers["retry-after"]) >= 1
    assert "requests a minute are spent" in second.error["message"]


def test_auth_mode_none_serves_and_says_so(dynamodb_table: str) -> None:
    world = build_world(dynamodb_table, ApiSettings(table_name=dynamodb_table, region="us-east-1"))
    handler = _handler(world)

    listed = call_mcp(handler, request("tools/list"), None)
    metadata = answer(
        handler(http_event("GET", "/.well-known/oauth-protected-resource"), LambdaContextStub())
    )
    streamless = answer(handler(http_event("GET", "/mcp"), LambdaContextStub()))

    assert (listed.status, metadata.status, streamless.status) == (200, 200, 405)
    for response in (listed, metadata, streamless):  # public routes and refusals too
        assert response.headers["x-memkit-warning"].startswith("unauthenticated")


def test_the_apis_host_is_allowed_and_another_host_or_origin_is_refused(mcp: Any) -> None:
    own = mcp(request("tools/list"), headers={"host": HOST, "origin": f"https://{HOST}"})
    rebound = mcp(request("tools/list"), headers={"host": "attacker.example"})
    foreign = mcp(request("tools/list"), headers={"origin": "https://attacker.example"})

    assert own.status == 200
    assert rebound.status == 421
    assert foreign.status == 403


# -- what a client can send ------------------------------------------------------------------

HOSTILE = [
    ("not JSON", {"raw_body": "{not json"}),
    ("a batch", {"message": [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]}),
    ("nested deeper than any parser", {"raw_body": "[" * 100_000 + "]" * 100_000}),
    ("an integer of 5,000 digits", {"raw_body": '{"jsonrpc":"2.0","id":' + "9" * 5000 + "}"}),
    ("no method", {"message": {"jsonrpc": "2.0", "id": 1}}),
    ("an unknown method", {"message": request("memkit/steal")}),
    (
        "another media type",
        {"message": request("tools/list"), "headers": {"content-type": "text/plain"}},
    ),
    ("an unknown tool", {"message": tool_call("rm_rf", {})}),
    (
        "arguments that are not an object",
        {"message": request("tools/call", {"name": "get_long_term_memory", "arguments": [1]})},
    ),
    ("a 2026 request without its envelope", {"message": request("tools/list"), "version": MODERN}),
    ("an unknown protocol version", {"message": request("tools/list"), "version": "1999-01-01"}),
]


@pytest.mark.parametrize("case", HOSTILE, ids=[case[0] for case in HOSTILE])
def test_what_a_client_can_send_is_never_a_5xx(world: MemoryWorld, case: Any) -> None:
    _, sent = case
    message = sent.get("message", {})
    event = mcp_event(
        message,
        version=sent.get("version", HANDSHAKE),
        headers={"authorization": bearer_for(ADA), **(sent.get("headers") or {})},
        raw_body=sent.get("raw_body"),
    )

    answered = answer(_handler(world)(event, LambdaContextStub()))

    assert answered.status < 500, answered.body
    if answered.status == 200:  # an error the model or the client can read
        body = answered.body
        assert "error" in body or body["result"].get("isError") is True, body


def test_a_service_that_is_down_is_a_tool_error_to_retry_never_a_5xx(
    mcp: Any, world: MemoryWorld, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from memkit.errors import StoreUnavailable

    def unavailable(*args: Any, **kwargs: Any) -> Any:
        raise StoreUnavailable("the table is unavailable")

    monkeypatch.setattr(world.services.long_term, "get", unavailable)

    failed = mcp(tool_call("get_long_term_memory", {"memory_id": "m1"}))

    assert failed.status == 200
    assert "not available; retry in" in failed.tool_error
    assert [getattr(r, "code", None) for r in caplog.records if r.levelname == "ERROR"] == [
        "unavailable"
    ]


def test_an_unreadable_base64_body_is_a_parse_error(world: MemoryWorld) -> None:
    event = mcp_event(request("tools/list"), headers={"authorization": bearer_for(ADA)})
    event.update(body="!!not base64!!", isBase64Encoded=True)

    answered = answer(_handler(world)(event, LambdaContextStub()))

    assert answered.status == 400
    assert answered.error["code"] == -32700


def test_bad_arguments_are_a_tool_error_naming_the_field_never_the_input(
    capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture, mcp: Any
) -> None:
    secret = "SECRET-ARGUMENT-4242"

    failed = mcp(tool_call("search_long_term_memory", {"text": secret, "limit": 1000}))
    edited = mcp(tool_call("edit_long_term_memory", {"memory_id": "nope", "text": secret}))

    assert "limit" in failed.tool_error
    assert "no long-term memory" in edited.tool_error
    assert secret not in capsys.readouterr().out + caplog.text


def test_an_id_no_path_could_name_is_a_tool_error_naming_the_rule(mcp: Any) -> None:
    # Given ids the API refuses (memkit.ids), in each kind of argument that names one
    record = mcp(tool_call("create_long_term_memories", {"memories": [{"id": "a/b", "text": "x"}]}))
    session = mcp(tool_call("set_working_memory", {"session_id": "trip?", "messages": []}))
    pad = mcp(
        tool_call("update_scratchpad", {"session_id": "s", "namespace": "..", "content": "x"})
    )

    # Then each is refused, saying which argument, what and the rule
    for refused, argument, reason in [
        (record, "memories.0.id", "must not contain '/'"),
        (session, "session_id", "must not contain '?'"),
        (pad, "namespace", "must not be '..'"),
    ]:
        assert argument in refused.tool_error
        assert f"{reason}: an id is used as one URL path segment" in refused.tool_error


# -- refused arguments, through the `mcp` SDK's own client ------------------------------------

SECRET = "SECRET-VALUE-7731"
# Each refused where it is sent: an id rule, a type, an operator (a key), a key a strict model
# does not know, a profile's schema.
REFUSED_CALLS = [
    ("get_long_term_memory", {"memory_id": f"a/{SECRET}"}),
    ("create_long_term_memories", {"memories": [{"id": f"{SECRET}?", "text": "x"}]}),
    ("search_long_term_memory", {"text": "tea", "limit": SECRET}),
    ("search_long_term_memory", {"text": "tea", "namespace": {SECRET: "x"}}),
    (
        "set_working_memory",
        {"session_id": "s1", "messages": [{"role": "user", "content": "x", SECRET: 1}]},
    ),
    ("update_scratchpad", {"session_id": "s1", "profile": "themes", "content": {"theme": SECRET}}),
]


async def _sdk_calls(handler: Any, calls: list[tuple[str, dict[str, Any]]], mode: str) -> list[str]:
    """`calls` made by the `mcp` SDK's client, each request handed to the MCP handler as the
    event API Gateway builds (in a thread, as Lambda runs it: its own event loop); the text
    of each result, which must be an error."""

    async def send(request: httpx2.Request) -> httpx2.Response:
        body = (await request.aread()).decode() or None
        event = http_event(
            request.method, request.url.path, headers=dict(request.headers), raw_body=body
        )
        result = await asyncio.to_thread(handler, event, LambdaContextStub())
        content = (result.get("body") or "").encode()
        return httpx2.Response(result["statusCode"], headers=result["headers"], content=content)

    http = httpx2.AsyncClient(
        transport=httpx2.MockTransport(send), headers={"authorization": bearer_for(ADA)}
    )
    transport = streamable_http_client(f"https://{HOST}/mcp", http_client=http)
    texts = []
    async with http, Client(transport, mode=mode) as client:
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            assert result.is_error, (name, result)
            texts.append(" ".join(getattr(part, "text", "") for part in result.content))
    return texts


@pytest.fixture
def themes(world: MemoryWorld) -> None:
    """Ada's tenant has a profile whose schema allows two themes."""
    schema = {"type": "object", "properties": {"theme": {"enum": ["dark", "light"]}}}
    spec = ProfileSpec.model_validate({"schema": schema})
    world.services.profiles.put("acme", "default", "themes", spec, None)


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["handshake", MODERN])
def test_refused_arguments_say_the_field_and_reason_never_the_value(
    world: MemoryWorld, mode: str
) -> None:
    said = asyncio.run(_sdk_calls(_handler(world), REFUSED_CALLS[:5], mode))

    assert said == [
        "invalid arguments for get_long_term_memory: memory_id: must not contain '/': an id "
        "is used as one URL path segment, so it holds no '/', '?', '%' or control character "
        "and is not '.' or '..'",
        "invalid arguments for create_long_term_memories: memories.0.id: must not contain "
        "'?': an id is used as one URL path segment, so it holds no '/', '?', '%' or control "
        "character and is not '.' or '..'",
        "invalid arguments for search_long_term_memory: limit: Input should be a valid "
        "integer, unable to parse string as an integer",
        "invalid arguments for search_long_term_memory: namespace: a key is not one of those "
        "allowed here: 'eq', 'ne', 'any', 'all', 'none', 'startswith', 'in_', 'not_eq' or "
        "'not_in'",
        "invalid arguments for set_working_memory: messages.0: an unknown key",
    ]


@pytest.mark.usefixtures("themes")
def test_no_log_line_carries_a_refused_value(
    world: MemoryWorld, caplog: pytest.LogCaptureFixture, debug_log: Any
) -> None:
    caplog.set_level(logging.DEBUG)  # as verbose as a function's root logger can be

    said = asyncio.run(_sdk_calls(_handler(world), REFUSED_CALLS, "auto"))

    # The function's lines (the test's own client logs what it sends): none has the value
    function = [r for r in caplog.records if not r.name.startswith("mcp.client")]
    assert "content.theme" in said[-1]  # the scratchpad's refusal, for the model to fix
    assert [r.getMessage() for r in function if SECRET in caplog.handler.format(r)] == []
    assert SECRET not in debug_log.getvalue()
    refused = [(r.tool, r.arguments) for r in function if r.msg == "tool arguments refused"]
    assert refused == [
        ("get_long_term_memory", ["memory_id"]),
        ("create_long_term_memories", ["memories"]),
        ("search_long_term_memory", ["limit"]),
        ("search_long_term_memory", ["namespace"]),
        ("set_working_memory", ["messages"]),
    ]


def test_logs_carry_tool_names_never_arguments_or_results(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    mcp: Any,
    world: MemoryWorld,
) -> None:
    secret = "SECRET-MEMORY my PIN is 9911"

    mcp(tool_call("create_long_term_memories", {"memories": [{"text": secret}]}))
    world.settle()
    mcp(tool_call("search_long_term_memory", {"text": "PIN"}))

    tools = [getattr(record, "tool", None) for record in caplog.records]
    assert [tool for tool in tools if tool] == [
        "create_long_term_memories",
        "search_long_term_memory",
    ]
    logged = capsys.readouterr().out + caplog.text
    for kept in ("9911", "SECRET-MEMORY", "custom:tenant"):
        assert kept not in logged


def test_an_unauthenticated_call_is_refused_before_any_service_is_built(
    world: MemoryWorld,
) -> None:
    from memkit.errors import StoreUnavailable

    def down() -> Any:  # the table out of reach: building the services fails
        raise StoreUnavailable("the table is unavailable")

    handler = make_lambda_handler(
        down, lambda: verifying_settings(), identity=lambda: world.services.settings.identity
    )
    missing = _sent(handler, mcp_event(request("tools/list")))
    forged = _sent(
        handler,
        mcp_event(
            request("tools/list"),
            headers={"authorization": "Bearer " + token({"sub": "x"}, aud="another-api")},
        ),
    )

    # No credential, or one that fails, costs the check alone: a 401 naming the metadata
    assert missing.status == 401
    assert "resource_metadata=" in missing.headers["www-authenticate"]
    assert forged.status == 401
