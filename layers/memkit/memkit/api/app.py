"""The resolver: routers, OpenAPI and Swagger UI, and the one mapping from errors to HTTP."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.exceptions import NotFoundError
from aws_lambda_powertools.event_handler.middlewares import NextMiddleware
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.shared.json_encoder import Encoder

from memkit import __version__
from memkit.api.context import services_of
from memkit.api.responses import error_response
from memkit.api.routes import (
    health,
    lifecycle,
    long_term,
    profiles,
    prompt,
    scratchpad,
    sessions,
    tools,
    users,
)
from memkit.api.scopes import PUBLIC, ROUTE_SCOPES
from memkit.api.wings import Wing, wing_of
from memkit.errors import FieldProblem, Forbidden, MemkitError
from memkit.identity import caller_of as caller_of_event
from memkit.models.problems import field_problems
from memkit.observability import logger

TITLE = "memkit"
# The pattern of the route Powertools makes for a path no route matches (its 404).
NO_ROUTE = "^.*$"
# Where Powertools says a request parameter came from (the first part of an error's loc).
PLACES = ("body", "query", "path", "header", "cookie")
ROUTERS = (
    health.router,
    sessions.router,
    long_term.router,
    profiles.router,
    scratchpad.router,
    tools.router,
    prompt.router,
    users.router,
    lifecycle.router,
)


def _parameter(route: Any, place: str, rest: tuple[Any, ...]) -> tuple[Any, tuple[Any, ...]]:
    """The parameter of `route` an error at (place, *rest) is about, and its name when the
    name is part of the path: Powertools reports ("body", "content") for the one body model,
    ("query", "namespace", ...) for a query parameter."""
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return None, ()
    fields = list(getattr(dependant, f"{place}_params", None) or [])
    if place == "body" and len(fields) == 1 and not getattr(fields[0].field_info, "embed", None):
        return fields[0], ()
    named = next((f for f in fields if rest and f.alias == rest[0]), None)
    return named, (rest[0],) if named is not None else ()


def _invalid_fields(route: Any, errors: Sequence[Mapping[str, Any]]) -> list[FieldProblem]:
    """Powertools' validation errors for `route` as the API's field problems: each at the
    field path the client wrote, the parameter's own type telling which parts of pydantic's
    `loc` are its (memkit.models.problems)."""
    groups: dict[tuple[Any, ...], tuple[Any, tuple[Any, ...], list[dict[str, Any]]]] = {}
    for error in errors:
        loc = tuple(error.get("loc", ()))
        place, rest = (loc[0], loc[1:]) if loc and loc[0] in PLACES else ("", loc)
        parameter, name = _parameter(route, place, rest) if place else (None, ())
        key = (place, *name) if parameter is not None else (place, *rest)
        relative = {**error, "loc": rest[len(name) :]}
        groups.setdefault(key, (parameter, name, []))[2].append(relative)
    problems: list[FieldProblem] = []
    for (place, *where), (parameter, name, members) in groups.items():
        if parameter is None:  # not a parameter of the route's: as Powertools names it
            problems.extend(
                FieldProblem(".".join(map(str, where)) or place or "body", str(e["msg"]))
                for e in members
            )
        else:
            problems.extend(field_problems(members, parameter.type_, name))
    return problems


class HttpApiResolver(APIGatewayHttpResolver):
    """Powertools' HTTP API resolver, whose path parameters take what API Gateway delivers,
    with its wings (memkit.api.wings) and the scope of every route, the wings' too (`scopes`).

    API Gateway decodes the path before the function sees it (`rawPath`), so an id arrives
    as itself: `tea☕`, `a"b`, a letter and its combining accent. Powertools matches a
    parameter only against word characters and a list of others, so such a path found no
    route (a 404). Here a
    parameter is any text up to the next `/`, as API Gateway routes it; the ids themselves
    are checked by their models (memkit.ids)."""

    def __init__(self, wings: Sequence[Wing] = (), **options: Any) -> None:
        super().__init__(**options)
        self.wings = tuple(wings)
        self.scopes: dict[str, str | None] = dict(ROUTE_SCOPES)
        for wing in self.wings:
            self.scopes.update(wing.scopes)

    @staticmethod
    def _compile_regex(rule: str, base_regex: str = "^{}$") -> re.Pattern[str]:
        return re.compile(base_regex.format(re.sub(r"<(\w+)>", r"(?P<\1>[^/]+)", rule)))


# The security schemes of the document: both are sent as `Authorization: Bearer ...` (an API
# key too, memkit.service.api_keys), so Swagger UI's Authorize button fills that header.
JWT_SCHEME = "jwt"
API_KEY_SCHEME = "apiKey"
SCOPES_SAID = (
    "Its scopes decide what it may call: `memory:read` (reads, searches, prompt hydration), "
    "`memory:write` (changes to sessions, scratchpads and records; tool calls), "
    "`memory:admin` (profiles, lifecycle policies, forgetting, a user's deletion)."
)


def openapi_json(app: HttpApiResolver) -> str:
    """The OpenAPI document of `app` (served at /v1/openapi.json, written to docs/): every
    operation takes a JWT or an API key, but the public ones (memkit.api.scopes)."""
    # Imported here: Powertools' OpenAPI models cost cold start, and only the docs need them.
    from aws_lambda_powertools.event_handler.openapi.compat import model_json
    from aws_lambda_powertools.event_handler.openapi.models import HTTPBearer

    schemes = {
        JWT_SCHEME: HTTPBearer(
            bearerFormat="JWT",
            description="An access token (AuthMode=jwt): from the stack's Cognito user pool or "
            "your OIDC issuer (scopes with its JwtScopePrefix, e.g. `memkit/memory:read`), or "
            f"`memkit token` for the local stack. {SCOPES_SAID}",
        ),
        API_KEY_SCHEME: HTTPBearer(
            bearerFormat="mk_<id>_<secret>",
            description="A memkit API key (AuthMode=apikey; `memkit keys create`), sent as "
            "`Authorization: Bearer mk_...`: give the key alone, the client adds `Bearer`. "
            f"{SCOPES_SAID}",
        ),
    }
    schema = app.get_openapi_schema(
        title=TITLE,
        version=__version__,
        security_schemes=schemes,  # type: ignore[arg-type]
        security=[{JWT_SCHEME: []}, {API_KEY_SCHEME: []}],
    )
    for path, item in (schema.paths or {}).items():
        for method in ("get", "put", "post", "patch", "delete"):
            operation = getattr(item, method)
            key = f"{method.upper()} {path}"
            if operation is not None and key in app.scopes and app.scopes[key] is PUBLIC:
                operation.security = []  # no credential asked: overrides the global one
    return str(model_json(schema, by_alias=True, exclude_none=True, indent=2))


def refuse(
    app: HttpApiResolver,
    status: int,
    code: str,
    detail: str,
    problems: list[FieldProblem] | None = None,
    retry_after: int | None = None,
) -> Response[str]:
    """The one error body of memkit's routes, or a wing's error shape on the wing's routes
    (memkit.api.wings): whatever failed, a client reads it as it expects."""
    path = app.current_event.path
    wing = wing_of(app.wings, path)
    if wing is not None:
        shaped = wing.error(path, status, code, detail, problems, retry_after)
        return Response(
            status_code=shaped.status,
            content_type="application/json",
            body=shaped.body,
            headers=shaped.headers,
        )
    return error_response(status, code, detail, problems, retry_after=retry_after)


def authorize(app: HttpApiResolver, next_middleware: NextMiddleware) -> Response[Any]:
    """Before every route: the caller from the verified request context (memkit.identity)
    and the scope the route needs (memkit.api.scopes). A route the table does not list is
    refused: a new route cannot ship without a decision."""
    route = app.context.get("_route")
    key = f"{route.method} {route.openapi_path}" if route is not None else ""
    if key not in app.scopes:
        if route is not None and route.rule.pattern == NO_ROUTE:
            return next_middleware(app)  # the resolver's catch-all for an unknown path: 404
        raise Forbidden("this route has no declared scope")
    scope = app.scopes[key]
    if scope is None:
        return next_middleware(app)
    services = services_of(app)
    caller = caller_of_event(app.current_event.raw_event, services.settings.identity)
    wing = wing_of(app.wings, app.current_event.path)
    caller = replace(caller, door=wing.name if wing is not None else "rest")
    app.append_context(caller=caller)
    caller.require(scope)
    services.operations.admit(caller)
    return next_middleware(app)


def build_app(wings: Sequence[Wing] = ()) -> HttpApiResolver:
    """A resolver with every core route of memkit's HTTP API and its wings' (the API
    function's: memkit.handlers.api)."""
    # UTF-8 as is, not \u-escaped: a non-English text takes 2 to 3 bytes a character, not
    # 6 to 12, so more of it fits Lambda's 6 MB (the byte budgets count UTF-8 bytes).
    serializer = partial(json.dumps, separators=(",", ":"), ensure_ascii=False, cls=Encoder)
    app = HttpApiResolver(wings, enable_validation=True, serializer=serializer)
    for router in (*ROUTERS, *(r for wing in app.wings for r in wing.routers)):
        app.include_router(router)
    app.use(middlewares=[authorize])

    @app.get("/v1/openapi.json", include_in_schema=False)
    def openapi_document() -> Response[str]:
        return Response(
            status_code=200,
            content_type="application/json",
            body=openapi_json(app),
        )

    @app.get("/v1/docs", include_in_schema=False)
    def swagger_ui() -> Response[str]:
        # The page links its document as `?format=json` (Powertools' Swagger UI script).
        if (app.current_event.query_string_parameters or {}).get("format") == "json":
            return openapi_document()
        # Powertools' enable_swagger imports its OpenAPI models at registration, ~60 ms of
        # every cold start; the page is built from the same bundled assets on first view.
        from aws_lambda_powertools.event_handler.openapi import swagger_ui
        from aws_lambda_powertools.event_handler.openapi.swagger_ui.html import (
            generate_swagger_html,
        )

        assets = Path(swagger_ui.__file__).parent
        page = generate_swagger_html(
            spec=openapi_json(app).replace("</", "<\\/"),  # no </script> inside the page
            swagger_js=(assets / "swagger-ui-bundle.min.js").read_text(encoding="utf-8"),
            swagger_css=(assets / "swagger-ui.min.css").read_text(encoding="utf-8"),
            swagger_base_url="",
            oauth2_config=None,
        )
        return Response(status_code=200, content_type="text/html", body=page)

    @app.exception_handler(MemkitError)
    def domain_error(exc: MemkitError) -> Response[str]:
        # A 429 or 503 says when to come back (Retry-After); waiting cannot fix the others.
        if exc.status >= 500:
            logger.error("request failed", extra={"code": exc.code, "reason": exc.detail})
            detail = "the service is not available" + ("; retry later" if exc.retry_after else "")
            return refuse(app, exc.status, exc.code, detail, None, exc.retry_after)
        logger.info("request refused", extra={"code": exc.code, "status": exc.status})
        return refuse(app, exc.status, exc.code, exc.detail, exc.errors, exc.retry_after)

    @app.exception_handler(RequestValidationError)
    def invalid_request(exc: RequestValidationError) -> Response[str]:
        # Unreadable bodies never get here: the handler's guard answers them first (400/415).
        problems = _invalid_fields(app.context.get("_route"), exc.errors())
        return refuse(app, 422, "validation_error", "the request is not valid", problems)

    @app.not_found
    def not_found(exc: NotFoundError) -> Response[str]:
        return refuse(app, 404, "not_found", "no such route")

    @app.exception_handler(Exception)
    def unexpected(exc: Exception) -> Response[str]:
        # The type only: an exception's text may quote stored content.
        logger.error("unhandled error", extra={"error_type": type(exc).__name__})
        return refuse(app, 500, "internal_error", "internal error")

    return app
