"""The scope each route needs, by its route key ("METHOD /path/{param}", as API Gateway names
routes). One table for the core routes of the API function, one for the MCP function's, and
one for each wing's (memkit.api.wings: the resolver adds them, `app.scopes`): a route missing
from them is refused (403) and a test fails, so a new route cannot ship without a decision.

- memory:read: reads, searches and prompt hydration (POST bodies that only ask);
- memory:write: what changes a session, a scratchpad or a record, and tool calls (a model's
  tools write: add_memory, the scratchpad edits);
- memory:admin: namespace-wide controls and other users' fates: profiles' changes, lifecycle
  policies, forgetting, compaction, a user's deletion and its jobs.

None: public (health, the OpenAPI document and its page).
"""

from __future__ import annotations

from memkit.identity import ADMIN, READ, WRITE

PUBLIC = None

ROUTE_SCOPES: dict[str, str | None] = {
    "GET /v1/health": PUBLIC,
    "GET /v1/openapi.json": PUBLIC,
    "GET /v1/docs": PUBLIC,
    # sessions
    "GET /v1/working-memory": READ,
    "GET /v1/working-memory/": READ,
    "GET /v1/working-memory/{session_id}": READ,
    "PUT /v1/working-memory/{session_id}": WRITE,
    "PATCH /v1/working-memory/{session_id}": WRITE,
    "DELETE /v1/working-memory/{session_id}": WRITE,
    "GET /v1/working-memory/{session_id}/messages": READ,
    "POST /v1/working-memory/{session_id}/messages": WRITE,
    # scratchpads
    "GET /v1/working-memory/{session_id}/scratchpad": READ,
    "PUT /v1/working-memory/{session_id}/scratchpad": WRITE,
    "PATCH /v1/working-memory/{session_id}/scratchpad": WRITE,
    "DELETE /v1/working-memory/{session_id}/scratchpad": WRITE,
    "GET /v1/users/{user_id}/scratchpad": READ,
    "PUT /v1/users/{user_id}/scratchpad": WRITE,
    "PATCH /v1/users/{user_id}/scratchpad": WRITE,
    "DELETE /v1/users/{user_id}/scratchpad": WRITE,
    # long-term memory
    "POST /v1/long-term-memory": WRITE,
    "POST /v1/long-term-memory/": WRITE,
    "POST /v1/long-term-memory/search": READ,
    "GET /v1/long-term-memory/{memory_id}": READ,
    "PATCH /v1/long-term-memory/{memory_id}": WRITE,
    "GET /v1/long-term-memory/{memory_id}/history": READ,
    "POST /v1/long-term-memory/{memory_id}/retire": WRITE,
    "POST /v1/long-term-memory/{memory_id}/restore": WRITE,
    "DELETE /v1/long-term-memory": WRITE,
    "POST /v1/memory/prompt": READ,
    # agent tools
    "GET /v1/tools": READ,
    "POST /v1/tools/call": WRITE,
    # profiles
    "GET /v1/profiles": READ,
    "GET /v1/profiles/{name}": READ,
    "PUT /v1/profiles/{name}": ADMIN,
    "DELETE /v1/profiles/{name}": ADMIN,
    # namespace-wide lifecycle and users
    "POST /v1/long-term-memory/forget": ADMIN,
    "POST /v1/long-term-memory/compact": ADMIN,
    "GET /v1/namespaces/{namespace}/lifecycle": ADMIN,
    "PUT /v1/namespaces/{namespace}/lifecycle": ADMIN,
    "DELETE /v1/namespaces/{namespace}/lifecycle": ADMIN,
    "DELETE /v1/users/{user_id}": ADMIN,
    "GET /v1/jobs/{job_id}": ADMIN,
}

# The MCP function's routes (memkit.handlers.mcp). POST /mcp needs memory:read;
# each tool then needs its own scope (memkit.mcp_server.tools.TOOL_SCOPES), checked by the
# function. The stream's GET (405) and the RFC 9728 metadata are public.
MCP_ROUTE_SCOPES: dict[str, str | None] = {
    "POST /mcp": READ,
    "GET /mcp": PUBLIC,
    "GET /.well-known/oauth-protected-resource/mcp": PUBLIC,
    "GET /.well-known/oauth-protected-resource": PUBLIC,
}
# Routes whose function verifies the bearer credential itself with AuthMode jwt or apikey
# (memkit.mcp_server.bearer): the gateway attaches no authorizer to them, because an MCP
# client's first 401 must carry `WWW-Authenticate: Bearer resource_metadata=...` and a gateway
# authorizer's own 401 cannot. With iam the gateway verifies them as every other route.
VERIFIED_BY_FUNCTION = frozenset({"POST /mcp"})
