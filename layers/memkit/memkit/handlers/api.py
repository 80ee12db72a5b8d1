"""The API function's entry point (functions/api): decorators plus `app.resolve`."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.api.app import app
from memkit.api.context import Services
from memkit.api.guard import body_problem
from memkit.api.responses import refusal
from memkit.handlers.wiring import production_services
from memkit.observability import logger, metrics

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def end_of_cold_start() -> None:
    """Resume cyclic GC (paused by the entry module), the startup heap frozen out of its way."""
    gc.freeze()
    gc.enable()


def make_lambda_handler(services: Callable[[], Services] = production_services) -> Handler:
    """The Lambda handler over `services` (production: DynamoDB from the environment)."""

    @logger.inject_lambda_context(
        correlation_id_path=correlation_paths.API_GATEWAY_HTTP, clear_state=True
    )
    @metrics.log_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        try:
            problem = body_problem(event)
            if problem is not None:
                return refusal(problem)
            app.append_context(services=services)
            return app.resolve(event, context)
        finally:
            if is_metrics_disabled():
                # Powertools skips the flush when disabled but keeps the values, and prints
                # them anyway once 100 pile up: drop them per invocation instead.
                metrics.clear_metrics()
            if not gc.isenabled():
                end_of_cold_start()

    return lambda_handler


lambda_handler = make_lambda_handler()
