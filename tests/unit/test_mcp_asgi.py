"""An API Gateway v2 event through an ASGI application and back (memkit.mcp_server.asgi), and
the endpoint's OAuth descriptions (memkit.mcp_server.resource)."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from memkit.config import McpSettings
from memkit.mcp_server import asgi
from memkit.mcp_server.resource import ProtectedResource
from tests.events import http_event, load_event


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """Answers with what it was sent, then waits for the client to go, as a streaming
    application watching for a disconnect does."""
    request = await receive()
    body = f"{scope['method']} {scope['path']}?{scope['query_string'].decode()} ".encode()
    headers = [(b"content-type", b"text/plain"), (b"x-seen", dict(scope["headers"])[b"x-probe"])]
    await send({"type": "http.response.start", "status": 201, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": True})
    await send({"type": "http.response.body", "body": request["body"]})
    assert (await receive())["type"] == "http.disconnect"


def test_an_event_reaches_the_application_and_its_whole_answer_comes_back() -> None:
    event = http_event("POST", "/mcp", query={"a": "1"}, body={"x": 1}, headers={"X-Probe": "日本"})

    answered = asgi.run(_echo, event).to_lambda()

    assert answered["statusCode"] == 201
    # Not Latin-1: sent as its UTF-8 bytes rather than failing the request
    assert answered["headers"]["x-seen"] == "日本".encode().decode("latin-1")
    assert answered["body"] == 'POST /mcp?a=1 {"x": 1}'
    assert answered["isBase64Encoded"] is False


def test_a_base64_body_is_decoded_and_a_binary_answer_encoded() -> None:
    event = http_event("POST", "/mcp", headers={"x-probe": "1"})
    event.update(body=base64.b64encode(b"\xff\x00").decode(), isBase64Encoded=True)

    answered = asgi.run(_echo, event).to_lambda()

    assert answered["isBase64Encoded"] is True
    assert base64.b64decode(answered["body"]).endswith(b"\xff\x00")


def test_a_broken_base64_body_is_unreadable_before_the_application_runs() -> None:
    event = http_event("POST", "/mcp")
    event.update(body="%%%", isBase64Encoded=True)

    with pytest.raises(asgi.UnreadableBody):
        asgi.run(_echo, event)


@pytest.mark.parametrize(
    ("host", "url"),
    [
        (
            "abc123.execute-api.us-east-1.amazonaws.com",
            "https://abc123.execute-api.us-east-1.amazonaws.com",
        ),
        ("memory.example.com", "https://memory.example.com"),
        ("127.0.0.1:8000", "http://127.0.0.1:8000"),
        ("[::1]:8000", "http://[::1]:8000"),
    ],
)
def test_the_url_is_the_host_the_gateway_served_https_but_on_loopback(host: str, url: str) -> None:
    event = load_event("mcp_request.json")
    event["requestContext"]["domainName"] = host

    assert asgi.base_url(event) == url


def test_the_resource_is_described_from_the_requests_host_and_the_settings() -> None:
    event = load_event("mcp_request.json")
    resource = ProtectedResource.of(event, McpSettings(scope_prefix="memkit/"))

    assert resource.url == "https://abc123.execute-api.us-east-1.amazonaws.com/mcp"
    assert resource.metadata_url.endswith("/.well-known/oauth-protected-resource/mcp")
    assert "authorization_servers" not in resource.metadata()  # no issuer: apikey, iam, none
    assert resource.insufficient_scope("memory:write").startswith(
        'Bearer error="insufficient_scope", scope="memkit/memory:write", resource_metadata='
    )
