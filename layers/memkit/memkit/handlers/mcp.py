"""The MCP function's entry point (functions/mcp): the Model Context Protocol on the HTTP API.

Routes (template.yaml wires them to this function; memkit.api.scopes.MCP_ROUTE_SCOPES):

- POST /mcp: the MCP server (memkit.mcp_server.tools) for the verified caller, through a
  transport made for this invocation. With AuthMode jwt or apikey the route has no
  authorizer at the gateway and this function verifies the bearer credential itself
  (memkit.mcp_server.bearer), so that its 401 can point at the metadata (a gateway's own 401
  cannot); with iam, API Gateway verifies the signature. No verified caller: 401 pointing at
  the metadata; a credential without memory:read, or a tool call it may not make: 403
  insufficient_scope; the tenant's quota spent: 429 with Retry-After.
- GET /mcp: 405 at once (stateless: there is no stream to open; an older client's SSE GET
  would otherwise wait for the integration's timeout).
- GET /.well-known/oauth-protected-resource/mcp (and without /mcp): the RFC 9728 metadata.

Every refusal before the MCP server reads the request is a JSON-RPC error body, so an MCP
client reports it as it would the server's own.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.api.guard import too_large_to_return
from memkit.api.scopes import MCP_ROUTE_SCOPES
from memkit.app.services import Services
from memkit.config import McpSettings, mcp_settings
from memkit.errors import Forbidden, MemkitError, Misconfigured, Unauthenticated
from memkit.handlers.http import after_invocation, answering_in_time, warned
from memkit.handlers.wiring import (
    checked,
    production_api_keys,
    production_identity,
    production_services,
)
from memkit.identity import READ, IdentitySettings, caller_of
from memkit.mcp_server import asgi
from memkit.mcp_server.bearer import JwtVerifier, KeySet, KeyVerifier
from memkit.mcp_server.resource import (
    INSUFFICIENT_SCOPE,
    MCP_PATH,
    METADATA_PATH,
    UNAUTHENTICATED,
    ProtectedResource,
    json_rpc_error,
)
from memkit.mcp_server.tools import Call, serve
from memkit.observability import drop_disabled_metrics, logger, metrics

if TYPE_CHECKING:
    from memkit.service.api_keys import ApiKeyService

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
Keys = Callable[[], "ApiKeyService"]
JSON = "application/json"
# JSON-RPC codes of the refusals made before the MCP server reads the request.
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
SERVER_ERROR = -32603


def _respond(status: int, body: str = "", headers: dict[str, str] | None = None) -> dict[str, Any]:
    all_headers = {"content-type": JSON} if body else {}
    return {
        "statusCode": status,
        "headers": {**all_headers, **(headers or {})},
        "body": body,
        "isBase64Encoded": False,
    }


def _refused(
    status: int, code: int, message: str, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    return _respond(status, json_rpc_error(code, message), headers)


def _path(event: dict[str, Any]) -> str:
    path = str(event.get("rawPath") or "/")
    return path.rstrip("/") or "/"


@functools.lru_cache(maxsize=4)
def _jwt_verifier(settings: McpSettings) -> JwtVerifier:
    """The verifier of `settings`' issuer, kept for the container (its keys with it)."""
    if not settings.oauth_issuer or not settings.audiences:
        raise Misconfigured("AuthMode jwt needs MEMKIT_OAUTH_ISSUER and MEMKIT_JWT_AUDIENCE")
    keys = KeySet(settings.oauth_issuer, settings.jwt_jwks)
    return JwtVerifier(settings.oauth_issuer, settings.audiences, keys)


def _authorization(event: dict[str, Any]) -> str | None:
    headers = event.get("headers") or {}
    for name, value in headers.items():
        if str(name).lower() == "authorization":
            return str(value)
    return None


def _verified(
    event: dict[str, Any], identity: IdentitySettings, settings: McpSettings, keys: Keys
) -> dict[str, Any]:
    """`event` with the request context the function verified: with AuthMode jwt or apikey
    the route has no authorizer at the gateway, so what the gateway would have passed is
    made here from the Authorization header (anything else there is replaced); iam and
    none: the event as the gateway sent it. Unauthenticated when the credential fails."""
    mode = identity.auth_mode
    if mode == "jwt":
        verifier: JwtVerifier | KeyVerifier = _jwt_verifier(settings)
    elif mode == "apikey":
        verifier = KeyVerifier(keys())
    else:
        return event
    authorizer = verifier.authorizer(_authorization(event))
    context = event.get("requestContext")
    context = dict(context) if isinstance(context, dict) else {}
    context["authorizer"] = authorizer
    return {**event, "requestContext": context}


def _post(
    event: dict[str, Any],
    services: Callable[[], Services],
    resource: ProtectedResource,
    keys: Keys,
    identity: IdentitySettings,
) -> dict[str, Any]:
    """POST /mcp: who calls, what it may do, then the MCP server. A caller that is not
    verified, or may not read, is refused before the services are built: such a request
    costs the bearer check and nothing else (no table, index or model is called)."""
    try:
        event = _verified(event, identity, resource.settings, keys)
        caller = replace(caller_of(event, identity), door="mcp")
    except Unauthenticated:
        presented = bool((_authorization(event) or "").strip())
        challenge = {"www-authenticate": resource.unauthenticated(presented)}
        return _refused(401, UNAUTHENTICATED, "a valid bearer token is required", challenge)
    scope = MCP_ROUTE_SCOPES[f"POST {MCP_PATH}"] or READ  # never public: at least reads
    try:
        caller.require(scope)
    except Forbidden as exc:
        challenge = {"www-authenticate": resource.insufficient_scope(scope)}
        return _refused(403, INSUFFICIENT_SCOPE, f"insufficient_scope: {exc.detail}", challenge)
    built = services()
    built.operations.admit(caller)
    call = Call(caller, built)
    transport = functools.partial(serve, call, asgi.host_of(event), asgi.base_url(event))
    try:
        answer = asgi.run(transport, event)
    except asgi.UnreadableBody:
        return _refused(400, PARSE_ERROR, "Parse error: the body is not valid base64")
    if call.refused_scope is not None:
        answer.status = 403
        answer.headers["www-authenticate"] = resource.insufficient_scope(call.refused_scope)
    response = answer.to_lambda()
    oversized = too_large_to_return(response)
    if oversized is not None:  # a tool's result (text and structured) past Lambda's 6 MB
        logger.warning("response too large", extra={"status": answer.status})
        return _refused(413, INVALID_REQUEST, f"{oversized.detail}: ask for fewer results")
    return response


def _answer(
    event: dict[str, Any],
    services: Callable[[], Services],
    settings: Callable[[], McpSettings],
    keys: Keys,
    identity: Callable[[], IdentitySettings],
) -> dict[str, Any]:
    path, method = _path(event), asgi.method_of(event)
    if path in (f"{METADATA_PATH}{MCP_PATH}", METADATA_PATH) and method == "GET":
        metadata = ProtectedResource.of(event, settings()).metadata()
        return _respond(200, json.dumps(metadata), {"cache-control": "max-age=3600"})
    if path != MCP_PATH:
        return _refused(404, INVALID_REQUEST, "no such route")
    if method != "POST":
        return _respond(405, headers={"allow": "POST"})
    try:
        resource = ProtectedResource.of(event, settings())
        return _post(event, services, resource, keys, identity())
    except MemkitError as exc:  # the quota spent, the table unavailable, a setting missing
        if exc.status >= 500:
            logger.error("request failed", extra={"code": exc.code})
        else:
            logger.info("request refused", extra={"code": exc.code, "status": exc.status})
        retry = {"retry-after": str(exc.retry_after)} if exc.retry_after else None
        if exc.status >= 500:
            return _refused(exc.status, SERVER_ERROR, "the service is not available", retry)
        return _refused(exc.status, INVALID_REQUEST, exc.detail, retry)


def make_lambda_handler(
    services: Callable[[], Services] = production_services,
    settings: Callable[[], McpSettings] = lambda: checked(mcp_settings),
    keys: Keys = production_api_keys,
    identity: Callable[[], IdentitySettings] | None = None,
) -> Handler:
    """The Lambda handler over `services` (production: DynamoDB from the environment) and,
    with AuthMode apikey, the API keys of `keys`. `identity`: how callers are identified,
    read without building the services (the metadata builds none); None: the services'."""
    identity_of = identity or (lambda: services().settings.identity)

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        try:
            with answering_in_time(context):
                response = _answer(event, services, settings, keys, identity_of)
        except Exception as exc:
            # The type only: an exception's text may quote stored content.
            logger.error("unhandled error", extra={"error_type": type(exc).__name__})
            response = _refused(500, SERVER_ERROR, "internal error")
        finally:
            after_invocation()
        return warned(response, identity_of)

    return lambda_handler


lambda_handler = make_lambda_handler(identity=production_identity)
