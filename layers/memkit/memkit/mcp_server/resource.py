"""The MCP endpoint as an OAuth 2.1 protected resource: its metadata (RFC 9728) and the
challenges of RFC 6750 that point clients at it.

The caller is never verified here (memkit.mcp_server.bearer verifies it, or the gateway with
AuthMode iam; memkit.identity reads what was verified). What this module says is where a
client without a usable token learns which authorization server to ask, and for which
scopes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from memkit.config import McpSettings
from memkit.identity import SCOPES
from memkit.mcp_server.asgi import base_url

MCP_PATH = "/mcp"
METADATA_PATH = "/.well-known/oauth-protected-resource"
RESOURCE_NAME = "memkit"
# JSON-RPC codes (the implementation-defined server error range) of the refusals: no usable
# credential (HTTP 401), and a credential without the scope a request needs (HTTP 403).
UNAUTHENTICATED = -32004
INSUFFICIENT_SCOPE = -32003


@dataclass(frozen=True)
class ProtectedResource:
    """The MCP endpoint of one deployment, as the request's host names it."""

    url: str  # https://<host>/mcp: what a client puts in `resource` (RFC 8707)
    metadata_url: str  # where its RFC 9728 metadata is
    settings: McpSettings

    @classmethod
    def of(cls, event: dict[str, Any], settings: McpSettings) -> ProtectedResource:
        base = base_url(event)
        return cls(f"{base}{MCP_PATH}", f"{base}{METADATA_PATH}{MCP_PATH}", settings)

    def scope(self, name: str) -> str:
        """A memkit scope as the authorization server names it (its prefix before it)."""
        return f"{self.settings.scope_prefix}{name}"

    def metadata(self) -> dict[str, Any]:
        """The RFC 9728 protected resource metadata document."""
        document: dict[str, Any] = {
            "resource": self.url,
            "resource_name": RESOURCE_NAME,
            "bearer_methods_supported": ["header"],
            "scopes_supported": [self.scope(name) for name in SCOPES],
        }
        if self.settings.oauth_issuer:
            document["authorization_servers"] = [self.settings.oauth_issuer]
        return document

    def unauthenticated(self, presented: bool = False) -> str:
        """WWW-Authenticate of a 401: where to learn how to get a token; `presented`: a
        credential came and did not verify (RFC 6750 `invalid_token`)."""
        error = 'error="invalid_token", ' if presented else ""
        return f'Bearer {error}resource_metadata="{self.metadata_url}"'

    def insufficient_scope(self, scope: str) -> str:
        """WWW-Authenticate of a 403: the scope the request needs (RFC 6750 section 3.1)."""
        return (
            f'Bearer error="insufficient_scope", scope="{self.scope(scope)}", '
            f'resource_metadata="{self.metadata_url}"'
        )


def json_rpc_error(code: int, message: str, data: dict[str, Any] | None = None) -> str:
    """A JSON-RPC error for a request refused before the MCP server read it (no id)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return json.dumps({"jsonrpc": "2.0", "id": None, "error": error}, separators=(",", ":"))
