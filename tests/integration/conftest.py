"""The real API handler over DynamoDB (moto), called with API Gateway v2 events."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.conftest import ApiResponse, LambdaContextStub
from tests.events import http_event

Call = Callable[..., ApiResponse]


@pytest.fixture
def api(dynamodb_table: str) -> Call:
    """call(method, path, query=..., body=..., headers=...) through the real lambda_handler."""
    from memkit.api.context import Services
    from memkit.api.handler import make_lambda_handler
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    services = Services.over(DynamoStore(settings), settings)
    handler = make_lambda_handler(lambda: services)

    def call(method: str, path: str, **kwargs: Any) -> ApiResponse:
        result = handler(http_event(method, path, **kwargs), LambdaContextStub())
        body = result.get("body") or ""
        try:
            parsed: Any = json.loads(body)
        except ValueError:
            parsed = body
        return ApiResponse(result["statusCode"], result.get("headers") or {}, parsed)

    return call
