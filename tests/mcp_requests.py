"""MCP requests as an MCP client sends them to POST /mcp, as API Gateway v2 events: the
initialize handshake's era (the MCP-Protocol-Version header after initialize) and the
2026-07-28 era (each request self-contained: its `_meta` envelope and routing headers)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from tests.conftest import LambdaContextStub
from tests.events import http_event
from tests.tokens import bearer_for

HANDSHAKE = "2025-11-25"
MODERN = "2026-07-28"
CLIENT = {"name": "memkit-tests", "version": "1"}


def request(
    method: str, params: dict[str, Any] | None = None, version: str = HANDSHAKE, rid: int = 1
) -> dict[str, Any]:
    """A JSON-RPC request; a 2026-07-28 one carries its envelope in `params._meta`."""
    body = dict(params or {})
    if version == MODERN:
        body["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": CLIENT,
        }
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": body}


def initialize(version: str = HANDSHAKE) -> dict[str, Any]:
    params = {"protocolVersion": version, "capabilities": {}, "clientInfo": CLIENT}
    return request("initialize", params)


def tool_call(name: str, arguments: dict[str, Any], version: str = HANDSHAKE) -> dict[str, Any]:
    return request("tools/call", {"name": name, "arguments": arguments}, version)


def mcp_event(
    message: Any,
    authorizer: dict[str, Any] | None = None,
    version: str | None = HANDSHAKE,
    headers: dict[str, str] | None = None,
    raw_body: str | None = None,
) -> dict[str, Any]:
    """POST /mcp with `message`, the headers an MCP client sends for it."""
    sent = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    is_request = isinstance(message, dict)
    method = message.get("method") if is_request else None
    if version is not None and method != "initialize":
        sent["mcp-protocol-version"] = version
    if version == MODERN and method is not None:
        sent["mcp-method"] = str(method)
        name = (message.get("params") or {}).get("name")
        if name is not None:
            sent["mcp-name"] = str(name)
    return http_event(
        "POST",
        "/mcp",
        body=None if raw_body is not None else message,
        raw_body=raw_body,
        headers={**sent, **(headers or {})},
        authorizer=authorizer,
    )


@dataclass
class McpAnswer:
    status: int
    headers: dict[str, str]
    body: Any

    @property
    def result(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), (self.status, self.body)
        assert "result" in self.body, (self.status, self.body)
        result = self.body["result"]
        assert isinstance(result, dict)
        return result

    @property
    def error(self) -> dict[str, Any]:
        assert isinstance(self.body, dict), (self.status, self.body)
        assert "error" in self.body, (self.status, self.body)
        error = self.body["error"]
        assert isinstance(error, dict)
        return error

    @property
    def tool_error(self) -> str:
        """The text of a tool call that failed (isError)."""
        assert self.result.get("isError") is True, self.body
        return str(self.result["content"][0]["text"])

    @property
    def structured(self) -> Any:
        """What a tool call that worked returned."""
        assert self.result.get("isError") is False, self.body
        return self.result["structuredContent"]


def answer(result: dict[str, Any]) -> McpAnswer:
    """A Lambda response, its body parsed."""
    headers = {k.lower(): v for k, v in (result.get("headers") or {}).items()}
    text = result.get("body") or ""
    try:
        body: Any = json.loads(text)
    except ValueError:
        body = text
    return McpAnswer(int(result["statusCode"]), headers, body)


def call_mcp(handler: Any, message: Any, who: dict[str, Any] | None = None, **kw: Any) -> Any:
    """`message` through an MCP lambda_handler, as API Gateway sends it: POST /mcp has no
    authorizer at the gateway with AuthMode jwt, so the caller `who` (a JWT authorizer
    context, tests.events.jwt_authorizer) comes as a bearer token signed by the tests' key
    (tests.tokens), which the function verifies; None: no credential."""
    headers = dict(kw.pop("headers", None) or {})
    if who is not None:
        headers["authorization"] = bearer_for(who)
    return answer(handler(mcp_event(message, None, headers=headers, **kw), LambdaContextStub()))
