"""An HTTP API (API Gateway v2) in front of local functions: request -> v2 event -> response.

Routes come from the template's AWS::ApiGatewayV2::Route resources, each to the function its
integration names (the API's, the MCP server's), so a path the template does not wire is a
404 here as on AWS. CORS is the template's CorsConfiguration with the origins the stack is
given (CorsAllowedOrigins on AWS), answered as API Gateway answers it. The path is read as
API Gateway reads it (`request_paths`): decoded twice, and cut at a decoded `?`.
"""

from __future__ import annotations

import base64
import json
import re
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_to_bytes

from werkzeug.wrappers import Request, Response

from memkit.api.scopes import PUBLIC, VERIFIED_BY_FUNCTION
from memkit.handlers.api import ALL_ROUTE_SCOPES
from memkit_dev.local.auth import (
    AuthorizerFailed,
    Denied,
    IamAuthorizer,
    JwtAuthorizer,
    KeysUnavailable,
    LambdaKeyAuthorizer,
    Unauthorized,
)
from memkit_dev.local.functions import LocalFunction
from memkit_dev.local.sigv4 import MISSING, SignatureRejected

# API Gateway HTTP APIs refuse larger payloads with 413, and give up on integrations at 30 s.
MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
# Lambda refuses a synchronous invocation whose event is larger than this (request payload
# quota), so a body between about 6 and 10 MB never reaches the function either.
MAX_EVENT_BYTES = 6 * 1024 * 1024
INTEGRATION_TIMEOUT_SECONDS = 30.0


# A `%` that does not start an escape: the path cannot be decoded.
_BAD_ESCAPE = re.compile(rb"%(?![0-9A-Fa-f]{2})")


class Undecodable(ValueError):
    """A request path API Gateway cannot decode: it answers 400."""


def _decoded(path: bytes) -> str:
    if _BAD_ESCAPE.search(path):
        raise Undecodable("a '%' that starts no escape")
    try:
        return unquote_to_bytes(path).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise Undecodable("escapes that are not UTF-8") from exc


def request_paths(target: bytes) -> tuple[str, str]:
    """What an HTTP API makes of a request target's path (bytes as sent, percent-encoded):
    the path it routes on and the one it sends (rawPath, requestContext.http.path, the path
    parameters). Live captures of API Gateway (docs/api.md#ids) show the path decoded, cut
    at a decoded `?` (`/a%3Fb` arrives as `/a`), then decoded again (`/a%2541` arrives as
    `/aA`, `/a%25zz` is refused with 400); `%2F` becomes a `/` that routing sees as a
    segment boundary. Raises Undecodable for a path either decoding refuses."""
    routed = _decoded(target.split(b"?", 1)[0]).split("?", 1)[0]
    return routed, _decoded(routed.encode("utf-8"))


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # as in the template: /v1/profiles/{name}
    pattern: re.Pattern[str]

    @classmethod
    def of(cls, method: str, path: str) -> Route:
        regex = re.sub(r"\\\{([A-Za-z0-9_]+)\\\}", r"(?P<\1>[^/]+)", re.escape(path))
        # HTTP APIs route /a/ to the route /a (a route path cannot end with a slash).
        return cls(method.upper(), path, re.compile(f"^{regex}/?$"))

    @property
    def key(self) -> str:
        return f"{self.method} {self.path}"


def http_api_routes(template: dict[str, Any], function_resource: str) -> list[Route]:
    """The HTTP API routes the template wires to `function_resource`: each
    AWS::ApiGatewayV2::Route whose target is an integration of that function."""
    resources = template["Resources"]
    integrations = {
        name
        for name, resource in resources.items()
        if resource.get("Type") == "AWS::ApiGatewayV2::Integration"
        and resource["Properties"].get("IntegrationUri")
        == {"Fn::GetAtt": [function_resource, "Arn"]}
    }
    routes = []
    for resource in resources.values():
        if resource.get("Type") != "AWS::ApiGatewayV2::Route":
            continue
        properties = resource["Properties"]
        target = properties.get("Target", {}).get("Fn::Sub", "")
        if target.removeprefix("integrations/${").removesuffix("}") in integrations:
            method, path = properties["RouteKey"].split(" ", 1)
            routes.append(Route.of(method, path))
    return routes


def _json(status: int, message: str) -> Response:
    return Response(json.dumps({"message": message}), status, mimetype="application/json")


def _signature_refused(rejected: SignatureRejected) -> Response:
    """API Gateway's 403 to a request AWS_IAM refuses: {"message": "Forbidden"} when it is
    not signed at all, else AWS's reason, with its error type in x-amzn-ErrorType."""
    if rejected.error_type == MISSING:
        response = _json(403, "Forbidden")
        response.headers["x-amzn-ErrorType"] = "ForbiddenException"
        return response
    response = _json(403, rejected.message)
    response.headers["x-amzn-ErrorType"] = rejected.error_type
    return response


HTTP_API = "HttpApi"
ORIGINS_PARAMETER = "CorsAllowedOrigins"
CORS = "access-control-"  # the CORS headers' prefix


@dataclass(frozen=True)
class Cors:
    """The HTTP API's CorsConfiguration, applied as API Gateway applies it: a preflight is
    answered by the gateway itself (no route, authorizer or function), and every answer to a
    request from an allowed origin carries the CORS headers, the integration's own dropped."""

    allow_origins: tuple[str, ...]
    allow_methods: tuple[str, ...] = ()
    allow_headers: tuple[str, ...] = ()
    expose_headers: tuple[str, ...] = ()
    max_age: int | None = None
    allow_credentials: bool = False

    @classmethod
    def from_template(cls, template: dict[str, Any], origins: str) -> Cors | None:
        """The template's CorsConfiguration of HttpApi with CorsAllowedOrigins = `origins`
        (checked against the parameter's AllowedPattern); None when `origins` is empty,
        as the template then configures no CORS."""
        parameter = template["Parameters"][ORIGINS_PARAMETER]
        if not re.fullmatch(parameter["AllowedPattern"], origins):
            raise ValueError(f"{origins!r}: {parameter['ConstraintDescription']}")
        if not origins:
            return None
        configuration = template["Resources"][HTTP_API]["Properties"]["CorsConfiguration"]
        if set(configuration) == {"Fn::If"}:  # [condition, with origins, AWS::NoValue]
            configuration = configuration["Fn::If"][1]
        plain = {k: v for k, v in configuration.items() if k != "AllowOrigins"}
        if any(isinstance(value, dict) for value in plain.values()):
            raise ValueError("CorsConfiguration: only AllowOrigins may be an intrinsic function")
        return cls(
            allow_origins=tuple(origins.split(",")),
            allow_methods=tuple(plain.get("AllowMethods", ())),
            allow_headers=tuple(plain.get("AllowHeaders", ())),
            expose_headers=tuple(plain.get("ExposeHeaders", ())),
            max_age=plain.get("MaxAge"),
            allow_credentials=bool(plain.get("AllowCredentials", False)),
        )

    def allowed(self, origin: str) -> str | None:
        """What Access-Control-Allow-Origin says to `origin`: "*", the origin, or None."""
        for allowed in self.allow_origins:
            if allowed == "*":
                return "*"
            wildcard = allowed.endswith("://*") and origin.startswith(allowed[:-1])
            if wildcard or origin.lower() == allowed.lower():
                return origin
        return None

    def preflight(self, request: Request) -> Response | None:
        """The gateway's own answer to a preflight (OPTIONS with Origin and
        Access-Control-Request-Method), or None for any other request."""
        origin = request.headers.get("Origin")
        if request.method != "OPTIONS" or not origin:
            return None
        if not request.headers.get("Access-Control-Request-Method"):
            return None
        response = Response(status=204)
        allowed = self.allowed(origin)
        if allowed is not None:  # else no CORS headers: the browser refuses the request
            response.headers["Access-Control-Allow-Origin"] = allowed
            response.headers["Access-Control-Allow-Methods"] = ",".join(self.allow_methods)
            response.headers["Access-Control-Allow-Headers"] = ",".join(self.allow_headers)
            if self.max_age is not None:
                response.headers["Access-Control-Max-Age"] = str(self.max_age)
            if self.allow_credentials:
                response.headers["Access-Control-Allow-Credentials"] = "true"
        return response

    def apply(self, request: Request, response: Response) -> Response:
        """`response` with the gateway's CORS headers in place of the integration's."""
        stale = {name for name, _ in response.headers.items() if name.lower().startswith(CORS)}
        for name in stale:
            del response.headers[name]
        allowed = self.allowed(request.headers.get("Origin") or "")
        if request.headers.get("Origin") and allowed is not None:
            response.headers["Access-Control-Allow-Origin"] = allowed
            if self.expose_headers:
                response.headers["Access-Control-Expose-Headers"] = ",".join(self.expose_headers)
            if self.allow_credentials:
                response.headers["Access-Control-Allow-Credentials"] = "true"
        return response


HEALTH_PATH = "/v1/health"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = frozenset({"", "0.0.0.0", "::"})  # noqa: S104 (names, not a bind)


def local_domains(host: str, port: int) -> tuple[str, ...]:
    """The domains a local stack listening on `host`:`port` answers as its own, as an HTTP
    API answers only for its execute-api domain and custom domains: the listening address,
    and its loopback names (or, listening on every interface, this machine's names too).
    The first is the one a request to another Host is said to have been served on."""
    import socket

    names = [host] if host not in WILDCARDS else []
    names.extend(LOOPBACK_NAMES)
    if host in WILDCARDS:
        names.extend(dict.fromkeys([socket.gethostname(), socket.getfqdn()]))
    bracketed = [
        f"[{name}]" if ":" in name and not name.startswith("[") else name for name in names
    ]
    return tuple(dict.fromkeys(f"{name}:{port}".lower() for name in bracketed if name))


class HttpApiGateway:
    """A WSGI application standing in for API Gateway's HTTP API with a Lambda integration."""

    def __init__(
        self,
        targets: Sequence[tuple[LocalFunction, list[Route]]],
        local_health: Callable[[], dict[str, Any]] | None = None,
        authorizer: JwtAuthorizer | LambdaKeyAuthorizer | IamAuthorizer | None = None,
        cors: Cors | None = None,
    ) -> None:
        # Each route with the function its integration invokes.
        self._routes = [(route, function) for function, routes in targets for route in routes]
        # The authorizer of every route but the public ones and those whose function verifies
        # the credential (memkit.api.scopes), as the template attaches it; None: no
        # authorizer (auth mode none).
        self._authorizer = authorizer
        # What the local stack adds to GET /v1/health (its engine, its pumps): the parts
        # that Lambda and DynamoDB run on AWS, where no such detail exists.
        self._local_health = local_health
        # The HTTP API's CORS configuration; None: none (OPTIONS is then a 404, as no route
        # answers it).
        self._cors = cors
        # The domains the API answers for (local_domains; the stack sets them once it listens):
        # requestContext.domainName is the one a request came to, never a client's other Host.
        self.domain_names: tuple[str, ...] = ()

    def domain_name(self, request: Request) -> str:
        """requestContext.domainName for `request`: the API's own domain it was sent to, as
        API Gateway names it (the MCP function refuses a Host that is not it: 421)."""
        host = request.host.lower()
        if not self.domain_names or host in self.domain_names:
            return host
        return self.domain_names[0]

    def _match(self, method: str, path: str) -> tuple[Route, dict[str, str], LocalFunction] | None:
        """The route for `path` as routed (decoded once), its parameters as sent (decoded
        again), and the function its integration invokes."""
        for route, function in self._routes:
            found = route.pattern.match(path)
            if found and route.method in (method, "ANY"):
                parameters = {k: _decoded(v.encode()) for k, v in found.groupdict().items()}
                return route, parameters, function
        return None

    def event(
        self, request: Request, route: Route, path_parameters: dict[str, str], path: str
    ) -> dict[str, Any]:
        """The payload format 2.0 event API Gateway would send for `request`, whose path
        it reads as `path` (request_paths)."""
        body = request.get_data(cache=True)
        headers: dict[str, str] = {}
        for name, value in request.headers.items():
            key = name.lower()
            headers[key] = f"{headers[key]},{value}" if key in headers else value
        cookies = [c.strip() for c in headers.pop("cookie", "").split(";") if c.strip()]
        query: dict[str, str] = {}
        for name, value in request.args.items(multi=True):
            query[name] = f"{query[name]},{value}" if name in query else value
        now = datetime.now(UTC)
        domain = self.domain_name(request)
        event: dict[str, Any] = {
            "version": "2.0",
            "routeKey": route.key,
            "rawPath": path,
            "rawQueryString": request.query_string.decode("latin-1"),
            "headers": headers,
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "local",
                "domainName": domain,
                "domainPrefix": domain.split(".")[0],
                "http": {
                    "method": request.method,
                    "path": path,
                    "protocol": request.environ.get("SERVER_PROTOCOL", "HTTP/1.1"),
                    "sourceIp": request.remote_addr or "127.0.0.1",
                    "userAgent": request.headers.get("User-Agent", ""),
                },
                "requestId": str(uuid.uuid4()),
                "routeKey": route.key,
                "stage": "$default",
                "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"),
                "timeEpoch": int(now.timestamp() * 1000),
            },
            "isBase64Encoded": False,
        }
        if cookies:
            event["cookies"] = cookies
        if query:
            event["queryStringParameters"] = query
        if path_parameters:
            event["pathParameters"] = path_parameters
        if body:
            try:
                event["body"] = body.decode("utf-8")
            except UnicodeDecodeError:
                event["body"] = base64.b64encode(body).decode()
                event["isBase64Encoded"] = True
        return event

    def _with_local_health(self, response: Response) -> Response:
        assert self._local_health is not None
        if response.status_code != 200 or response.mimetype != "application/json":
            return response
        body = json.loads(response.get_data())
        if isinstance(body, dict):
            body["local"] = self._local_health()
            response.set_data(json.dumps(body))
        return response

    @staticmethod
    def response(result: Any) -> Response:
        """API Gateway's reading of a payload format 2.0 Lambda response."""
        if not isinstance(result, dict) or "statusCode" not in result:
            return Response(json.dumps(result), 200, mimetype="application/json")
        body = result.get("body") or ""
        raw = base64.b64decode(body) if result.get("isBase64Encoded") else body.encode()
        response = Response(raw, int(result["statusCode"]))
        for name, value in (result.get("headers") or {}).items():
            response.headers[name] = str(value)
        for name, values in (result.get("multiValueHeaders") or {}).items():
            for value in values:
                response.headers.add(name, str(value))
        for cookie in result.get("cookies") or []:
            response.headers.add("Set-Cookie", cookie)
        return response

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        preflight = self._cors.preflight(request) if self._cors is not None else None
        response = preflight or self._answer(request)
        if self._cors is not None and preflight is None:
            response = self._cors.apply(request, response)
        return response(environ, start_response)

    def _authorize(self, request: Request, route: Route, event: dict[str, Any]) -> Response | None:
        """Run the route's authorizer, as the template attaches it: put what it verified in
        `event`'s requestContext.authorizer, or answer the gateway's refusal."""
        authorizer = self._authorizer
        # A route the scope table does not list is not public: it is authorized (fail closed).
        public = ALL_ROUTE_SCOPES.get(route.key, "unlisted") is PUBLIC
        if authorizer is None or public:
            return None
        context = event["requestContext"]
        if isinstance(authorizer, IamAuthorizer):
            try:  # the body was read once, and kept, by event()
                context["authorizer"] = authorizer.request_context(request, request.get_data())
            except SignatureRejected as rejected:
                return _signature_refused(rejected)
            return None
        # POST /mcp: no authorizer at the gateway with jwt and apikey; its function verifies
        # the credential, as the template deploys it (with iam the gateway verifies it).
        if route.key in VERIFIED_BY_FUNCTION:
            return None
        try:
            context["authorizer"] = authorizer.context(request.headers.get("Authorization"))
        except Unauthorized:
            return _json(401, "Unauthorized")
        except KeysUnavailable:
            return _json(503, "Service Unavailable")
        except Denied:
            return _json(403, "Forbidden")
        except AuthorizerFailed:
            return _json(500, "Internal Server Error")
        return None

    def _answer(self, request: Request) -> Response:
        """What API Gateway answers `request`: its own refusal, or the function's response."""
        if (request.content_length or 0) > MAX_PAYLOAD_BYTES:
            return _json(413, "Request Entity Too Large")
        # The target as the client sent it (the WSGI server decodes PATH_INFO once).
        target = request.environ.get("REQUEST_URI") or request.environ.get("RAW_URI") or "/"
        try:
            routed, path = request_paths(target.encode("latin-1"))
            matched = self._match(request.method, routed)
        except Undecodable:
            return _json(400, "Bad Request")
        if matched is None:
            return _json(404, "Not Found")
        started = time.monotonic()
        route, path_parameters, function = matched
        event = self.event(request, route, path_parameters, path)
        refused = self._authorize(request, route, event)
        if refused is not None:
            return refused
        if len(json.dumps(event).encode()) > MAX_EVENT_BYTES:
            return _json(413, "Request Entity Too Large")
        future = function.invoke(event)
        try:
            result = future.result(timeout=INTEGRATION_TIMEOUT_SECONDS)
        except FutureTimeout:
            return _json(503, "Service Unavailable")
        except Exception:  # the function crashed: API Gateway answers 500 without details
            return _json(500, "Internal Server Error")
        response = self.response(result)
        if self._local_health is not None and path == HEALTH_PATH:
            response = self._with_local_health(response)
        response.headers["X-Local-Latency-Ms"] = f"{(time.monotonic() - started) * 1000:.1f}"
        return response
