"""AgentCore Memory's event side and memory configuration through the real API handler on
moto (docs/agentcore.md): requests as API Gateway sends them for boto3's clients, answers in
AgentCore's shapes, identity from verified claims."""

from __future__ import annotations

from typing import Any

import pytest

from memkit.identity import ADMIN, READ, WRITE
from tests.conftest import ApiResponse, call_api
from tests.events import jwt_authorizer

pytestmark = pytest.mark.integration

ADA = jwt_authorizer("acme", "ada", READ, WRITE)
BOB = jwt_authorizer("acme", "bob", READ, WRITE)
OPS = jwt_authorizer("acme", "ops", ADMIN)
OTHER_OPS = jwt_authorizer("globex", "ops", ADMIN)
T0 = 1_750_000_000.0


@pytest.fixture
def api(dynamodb_table: str) -> Any:
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(
        table_name=dynamodb_table, region="us-east-1", auth_mode="jwt", tenant_claim="custom:tenant"
    )
    services = api_services(DynamoStore(settings), settings)
    handler = make_lambda_handler(lambda: services)

    def call(method: str, path: str, who: dict[str, Any] = ADA, **kwargs: Any) -> ApiResponse:
        return call_api(handler, method, path, authorizer=who, **kwargs)

    return call


def _memory(api: Any, who: dict[str, Any] = OPS, **extra: Any) -> str:
    body = {"name": "support", "eventExpiryDuration": 30, **extra}
    made = api("POST", "/memories/create", who, body=body)
    assert made.status == 202, made.body
    return str(made.body["memory"]["id"])


def _event(api: Any, memory: str, text: str, **extra: Any) -> ApiResponse:
    body = {
        "actorId": "ada",
        "sessionId": "s1",
        "eventTimestamp": T0,
        "payload": [{"conversational": {"content": {"text": text}, "role": "USER"}}],
        **extra,
    }
    return api("POST", f"/memories/{memory}/events", extra.pop("who", ADA), body=body)


def _get(api: Any, memory: str, event_id: str, who: dict[str, Any] = ADA) -> ApiResponse:
    return api("GET", f"/memories/{memory}/actor/ada/sessions/s1/events/{event_id}", who)


def test_a_created_event_is_the_sessions_messages_and_reads_back(api: Any) -> None:
    memory = _memory(api)

    made = _event(api, memory, "hello")
    event_id = made.body["event"]["eventId"]

    assert made.status == 201
    got = _get(api, memory, event_id)
    assert got.status == 200
    assert got.body["event"] == made.body["event"]
    # the event is a message of memkit's session s1 of user ada in the memory's namespace
    log = api("GET", "/v1/working-memory/s1/messages", query={"namespace": memory})
    assert [(m["role"], m["content"]) for m in log.body["messages"]] == [("user", "hello")]


def test_every_failure_on_an_agentcore_route_is_in_the_services_shape(api: Any) -> None:
    memory = _memory(api)

    unreadable = api(
        "POST",
        f"/memories/{memory}/events",
        raw_body="{not json",
        headers={"content-type": "application/json"},
    )
    missing = api("POST", f"/memories/{memory}/events", body={"actorId": "ada"})
    unknown = api("GET", "/memories/nothing-0123456789/details")
    foreign = _event(api, memory, "x", actorId="bob")

    assert unreadable.status == 400
    assert unreadable.headers["x-amzn-ErrorType"] == "ValidationException"
    assert unreadable.body["reason"] == "CannotParse"
    assert missing.status == 400
    assert {f["name"] for f in missing.body["fieldList"]} == {"eventTimestamp", "payload"}
    assert unknown.status == 404
    assert unknown.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
    assert foreign.status == 403
    assert foreign.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert set(foreign.body) == {"message"}


def test_another_tenants_admin_finds_no_memory_of_this_tenant(api: Any) -> None:
    memory = _memory(api)

    seen = api("GET", f"/memories/{memory}/details", OTHER_OPS)
    listed = api("POST", "/memories", OTHER_OPS, body={})

    assert seen.status == 404
    assert listed.body == {"memories": []}
