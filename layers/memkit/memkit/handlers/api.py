"""The API function's entry point (functions/api): decorators plus `app.resolve`, over the
resolver with the core's routes and its wings' (memkit.handlers.wiring.api_wings)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.api.app import build_app
from memkit.api.guard import body_problem, too_large_to_return
from memkit.api.responses import refusal
from memkit.api.scopes import MCP_ROUTE_SCOPES
from memkit.api.wings import refused, wing_of
from memkit.app.services import Services
from memkit.errors import MemkitError
from memkit.handlers.http import after_invocation, answering_in_time, warned
from memkit.handlers.wiring import api_wings, production_identity, production_services
from memkit.identity import IdentitySettings
from memkit.observability import drop_disabled_metrics, logger, metrics

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]

app = build_app(api_wings())
# The scope of every route of the API function (the wings' too), and of the HTTP API's
# whichever function serves it (memkit.api.scopes).
ROUTE_SCOPES = app.scopes
ALL_ROUTE_SCOPES: dict[str, str | None] = {**ROUTE_SCOPES, **MCP_ROUTE_SCOPES}


def _refusal(event: dict[str, Any], error: MemkitError) -> dict[str, Any]:
    """A request refused before routing, in the shape its API's clients read."""
    path = str(event.get("rawPath") or "")
    wing = wing_of(app.wings, path)
    return refusal(error) if wing is None else refused(wing, path, error)


def make_lambda_handler(
    services: Callable[[], Services] = production_services,
    identity: Callable[[], IdentitySettings] | None = None,
) -> Handler:
    """The Lambda handler over `services` (production: DynamoDB from the environment).
    `identity`: how callers are identified, read without building the services (a health
    check builds none); None: the services' own settings."""
    identity_of = identity or (lambda: services().settings.identity)

    def answer(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        problem = body_problem(event)
        if problem is not None:
            return _refusal(event, problem)
        app.append_context(services=services)
        wing = wing_of(app.wings, str(event.get("rawPath") or ""))
        if wing is not None:
            event = wing.routable(event)
        response = app.resolve(event, context)
        oversized = too_large_to_return(response)
        if oversized is not None:
            logger.warning("response too large", extra={"status": response["statusCode"]})
            metrics.add_metric(name="ResponseTooLarge", unit="Count", value=1)
            return _refusal(event, oversized)
        return response

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        try:
            with answering_in_time(context):
                return warned(answer(event, context), identity_of)
        finally:
            after_invocation()

    return lambda_handler


lambda_handler = make_lambda_handler(production_services, production_identity)
