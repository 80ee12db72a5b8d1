"""memkit's errors in AgentCore's shape, read by botocore's own rest-json parser with the
bedrock-agentcore service model: every domain error becomes the exception a boto3 client
raises against AWS, with its modelled members."""

from __future__ import annotations

from typing import Any

import botocore.session
import pytest
from botocore.parsers import create_parser

from memkit.agentcore.errors import agentcore_error, agentcore_refusal, speaks_agentcore
from memkit.errors import (
    BadRequest,
    FieldProblem,
    Forbidden,
    IdempotencyMismatch,
    MemkitError,
    Misconfigured,
    NotFound,
    NotServed,
    QuotaExceeded,
    ResourceConflict,
    StoreUnavailable,
    Throttled,
    TooLarge,
    Unauthenticated,
    UnsupportedMediaType,
    ValidationFailed,
    VersionConflict,
)

EVENTS = "/memories/m-0123456789/events"
MEMORY = "/memories/m-0123456789/details"


def _parsed(path: str, error: MemkitError, service: str = "bedrock-agentcore") -> dict[str, Any]:
    """The error as botocore parses the response for the operation at `path`."""
    model = botocore.session.get_session().get_service_model(service)
    operation = model.operation_model(
        "CreateEvent" if service == "bedrock-agentcore" else "GetMemory"
    )
    response = agentcore_refusal(path, error)
    http = {
        "status_code": response["statusCode"],
        "headers": {k.lower(): v for k, v in response["headers"].items()},
        "body": response["body"].encode(),
    }
    parser = create_parser("rest-json")
    parsed: dict[str, Any] = parser.parse(http, operation.output_shape)
    # what botocore's endpoint adds: the members the error's own shape models
    error_shape = model.shape_for_error_code(parsed["Error"]["Code"])
    assert error_shape is not None, "an error the service model declares"
    parsed.update(parser.parse(http, error_shape))
    return parsed


@pytest.mark.parametrize(
    ("error", "status", "code"),
    [
        (
            BadRequest("invalid nextToken", [FieldProblem("nextToken", "not ours")]),
            400,
            "ValidationException",
        ),
        (
            ValidationFailed("bad", [FieldProblem("sessionId", "pattern")]),
            400,
            "ValidationException",
        ),
        (TooLarge("too big", [FieldProblem("payload.0", "one item")]), 400, "ValidationException"),
        (UnsupportedMediaType("send JSON"), 400, "ValidationException"),
        (Unauthenticated("no token"), 403, "AccessDeniedException"),
        (Forbidden("not yours"), 403, "AccessDeniedException"),
        (NotFound("no such memory"), 404, "ResourceNotFoundException"),
        (VersionConflict("kept changing"), 409, "RetryableConflictException"),
        (Throttled("slow down"), 429, "ThrottledException"),
        (QuotaExceeded("spent", 7), 429, "ThrottledException"),
        (StoreUnavailable("storage is unavailable"), 503, "ServiceException"),
        (Misconfigured("settings"), 500, "ServiceException"),
    ],
)
def test_each_memkit_error_is_the_exception_botocore_raises(
    error: MemkitError, status: int, code: str
) -> None:
    parsed = _parsed(EVENTS, error)

    assert parsed["ResponseMetadata"]["HTTPStatusCode"] == status
    assert parsed["Error"]["Code"] == code
    assert parsed["Error"]["Message"] == error.detail
    if error.retry_after is not None:
        assert parsed["ResponseMetadata"]["HTTPHeaders"]["retry-after"] == str(error.retry_after)


@pytest.mark.parametrize(
    ("error", "reason"),
    [
        (
            ValidationFailed("bad", [FieldProblem("sessionId", "must match")]),
            "FieldValidationFailed",
        ),
        (BadRequest("unreadable", [FieldProblem("body", "not valid JSON")]), "CannotParse"),
        (UnsupportedMediaType("send JSON"), "CannotParse"),
        (
            IdempotencyMismatch("token reused", [FieldProblem("clientToken", "x")]),
            "IdempotentParameterMismatchException",
        ),
        (ResourceConflict("another actor's", [FieldProblem("sessionId", "x")]), "ResourceConflict"),
        (NotServed("memkit does not serve IngestData"), "UnknownOperation"),
    ],
)
def test_a_validation_exception_says_why_and_names_the_fields(
    error: MemkitError, reason: str
) -> None:
    parsed = _parsed(EVENTS, error)

    assert parsed["reason"] == reason
    fields = [{"name": p.field, "message": p.reason} for p in error.errors]
    assert parsed.get("fieldList", []) == fields


def test_a_conflict_on_the_control_plane_is_its_conflict_exception() -> None:
    parsed = _parsed(MEMORY, VersionConflict("changed"), "bedrock-agentcore-control")

    assert parsed["Error"]["Code"] == "ConflictException"


def test_only_agentcore_paths_take_its_shape() -> None:
    assert speaks_agentcore("/memories/create")
    assert speaks_agentcore("/memories")
    assert not speaks_agentcore("/memoriesx")
    assert not speaks_agentcore("/v1/working-memory/memories")
    shaped = agentcore_error("/memories/create", 422, "validation_error", "bad")
    assert shaped.status == 400
