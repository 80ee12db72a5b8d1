"""AgentCore's error shape, for every failure on its routes (rest-json as botocore reads it).

botocore's RestJSONParser takes the error's code from the `x-amzn-ErrorType` header and its
modelled members from the body, so a boto3 `bedrock-agentcore` client raises
`client.exceptions.ValidationException` (with `message`, `reason`, `fieldList`),
`ResourceNotFoundException`, `AccessDeniedException`, `ThrottledException`... exactly as it
does against AWS. memkit's domain errors map onto the service's exceptions by status; the
status of each is the one its shape declares (ValidationException 400, AccessDenied 403,
ResourceNotFound 404, conflicts 409, Throttled 429, Service 500), and a 503 of memkit's
(storage unavailable) stays a 503 so that botocore retries it as AWS's own 503s.
"""

from __future__ import annotations

import json
import re
from typing import Any

from memkit.api.wings import WireError
from memkit.errors import FieldProblem, MemkitError

# Every AgentCore route, data and control plane, starts here; memkit's own are under /v1.
PREFIX = "/memories"
# The control plane's paths (bedrock-agentcore-control): CreateMemory, ListMemories,
# GetMemory, DeleteMemory, UpdateMemory. Its conflict is ConflictException.
CONTROL_PLANE = re.compile(r"^/memories(/?|/create|/[^/]+/(details|delete|update))$")
ERROR_TYPE_HEADER = "x-amzn-ErrorType"

VALIDATION = "ValidationException"
# ValidationExceptionReason (the data plane's enum; the control plane's members are a subset
# of what is sent here, and botocore does not check enums of responses).
CANNOT_PARSE = "CannotParse"
FIELD_VALIDATION_FAILED = "FieldValidationFailed"
IDEMPOTENT_MISMATCH = "IdempotentParameterMismatchException"
RESOURCE_CONFLICT = "ResourceConflict"
UNKNOWN_OPERATION = "UnknownOperation"


def speaks_agentcore(path: str | None) -> bool:
    """Whether a request path is one of AgentCore's (its failures take AgentCore's shape)."""
    return bool(path) and (path == PREFIX or str(path).startswith(PREFIX + "/"))


def _exception(status: int, code: str, control_plane: bool) -> tuple[int, str]:
    """(status, exception name) for a memkit error of `status` and `code`."""
    if status in (400, 413, 415, 422):
        return 400, VALIDATION
    if status in (401, 403):
        return 403, "AccessDeniedException"
    if status == 404:
        return 404, "ResourceNotFoundException"
    if status == 409:
        return 409, "ConflictException" if control_plane else "RetryableConflictException"
    if status == 429:
        return 429, "ThrottledException"
    if status == 503:
        return 503, "ServiceException"
    if status < 500:  # a client's fault memkit has no closer name for
        return 400, VALIDATION
    return 500, "ServiceException"


def _reason(status: int, code: str, problems: list[FieldProblem]) -> str:
    if code == "idempotent_mismatch":
        return IDEMPOTENT_MISMATCH
    if code == "unknown_operation":
        return UNKNOWN_OPERATION
    if code == "resource_conflict":
        return RESOURCE_CONFLICT
    if status == 415 or any(p.field in ("body", "content-type") for p in problems):
        return CANNOT_PARSE
    return FIELD_VALIDATION_FAILED


def agentcore_error(
    path: str,
    status: int,
    code: str,
    detail: str,
    problems: list[FieldProblem] | None = None,
    retry_after: int | None = None,
) -> WireError:
    """A memkit error of `status` and `code` on AgentCore route `path`, in AgentCore's shape."""
    problems = problems or []
    wire_status, name = _exception(status, code, CONTROL_PLANE.match(path) is not None)
    body: dict[str, Any] = {"message": detail}
    if name == VALIDATION:
        body["reason"] = _reason(status, code, problems)
        if problems:
            body["fieldList"] = [{"name": p.field, "message": p.reason} for p in problems]
    headers = {ERROR_TYPE_HEADER: name}
    if retry_after is not None:
        headers["Retry-After"] = str(retry_after)
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return WireError(wire_status, headers, text)


def agentcore_refusal(path: str, error: MemkitError) -> dict[str, Any]:
    """A request refused before routing (an unreadable body, an oversized answer), on an
    AgentCore route: its Lambda response in AgentCore's shape."""
    shaped = agentcore_error(
        path, error.status, error.code, error.detail, error.errors, error.retry_after
    )
    return shaped.as_lambda()
