"""Shared fixtures: fake AWS credentials, moto with the table from template.yaml, the handler."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
TABLE = "memkit-test"


@pytest.fixture(autouse=True)
def aws_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake credentials (nothing reaches AWS) and the settings the functions read."""
    for name, value in {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_REGION": "us-east-1",
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
        "POWERTOOLS_METRICS_DISABLED": "true",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "MEMKIT_TABLE_NAME": TABLE,
    }.items():
        monkeypatch.setenv(name, value)


class LambdaContextStub:
    function_name = "memkit-test-api"
    function_version = "$LATEST"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memkit-test-api"
    aws_request_id = "test-request"

    def get_remaining_time_in_millis(self) -> int:
        return 10_000


@dataclass
class ApiResponse:
    status: int
    headers: dict[str, str]
    body: Any


def call_api(handler: Any, method: str, path: str, **kwargs: Any) -> ApiResponse:
    """One request through an API lambda_handler, as API Gateway v2 would send it."""
    from tests.events import http_event

    result = handler(http_event(method, path, **kwargs), LambdaContextStub())
    body = result.get("body") or ""
    try:
        parsed: Any = json.loads(body)
    except ValueError:
        parsed = body
    return ApiResponse(result["statusCode"], result.get("headers") or {}, parsed)


@pytest.fixture
def dynamodb_table() -> Iterator[str]:
    """moto in process, with the table created from template.yaml's MemoryTable (one
    request at a time, as on the local stack's server: memkit writes from thread pools)."""
    import boto3
    from moto import mock_aws

    from memkit_dev.local.dynamodb import serialize_in_process_moto
    from memkit_dev.local.template import create_table, load_template

    serialize_in_process_moto()
    with mock_aws():
        create_table(
            boto3.client("dynamodb", region_name="us-east-1"),
            load_template(ROOT / "template.yaml"),
            TABLE,
        )
        yield TABLE


@pytest.fixture
def debug_log() -> Iterator[io.StringIO]:
    """Every line memkit's logger writes, at DEBUG, formatted as in Lambda."""
    from memkit.observability import logger

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logger.registered_formatter)
    previous = logger.log_level
    logger.addHandler(handler)
    logger.setLevel("DEBUG")
    yield stream
    logger.setLevel(previous)
    logger.removeHandler(handler)
