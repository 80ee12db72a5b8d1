"""Turning domain results into HTTP responses (bodies, ETag) and errors into the error body."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from aws_lambda_powertools.event_handler import Response, content_types

from memkit.app.views import session_view
from memkit.errors import FieldProblem, MemkitError
from memkit.models.api import ErrorBody, FieldError, GatewayAnswer, ProfileView, ScratchpadView
from memkit.models.domain import Profile
from memkit.models.session import SessionView
from memkit.service.scratchpad import ScratchpadResult
from memkit.service.sessions import SessionDocument

if TYPE_CHECKING:
    from aws_lambda_powertools.event_handler.openapi.types import (
        OpenAPIResponse,
        OpenAPIResponseHeader,
    )

ModelT = TypeVar("ModelT")


def field_errors(problems: list[FieldProblem]) -> list[FieldError]:
    return [FieldError(field=p.field, reason=p.reason) for p in problems]


def error_json(code: str, detail: str, problems: list[FieldProblem] | None = None) -> str:
    """The one error body of API.md, serialized."""
    body = ErrorBody(detail=detail, code=code, errors=field_errors(problems or []))
    return body.model_dump_json()


def retry_headers(retry_after: int | None) -> dict[str, str]:
    """Retry-After (seconds) for a 429 or 503; nothing for an error that waiting cannot fix."""
    return {} if retry_after is None else {"Retry-After": str(retry_after)}


def error_response(
    status: int,
    code: str,
    detail: str,
    problems: list[FieldProblem] | None = None,
    retry_after: int | None = None,
) -> Response[str]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=error_json(code, detail, problems),
        headers=retry_headers(retry_after),
    )


REASONS = {
    400: "Malformed request: the body is not readable JSON, or a cursor is not ours; or, "
    "in API Gateway's body, a path it cannot decode",
    403: "Refused: a read-only profile, or another user's session",
    404: "Not found; or, in API Gateway's body, a path it routes nowhere",
    409: "Version conflict: If-Match does not name the current version",
    413: "Too large: over the profile's max_tokens or the item size",
    415: "The body is not application/json",
    422: "Validation error: the errors list names each field and why",
    429: "Throttled (DynamoDB, OpenSearch or the Bedrock model) after the SDK's retries: "
    "wait Retry-After seconds, then retry with backoff",
    503: "A backing service (DynamoDB, OpenSearch, Bedrock) is unavailable after retries: "
    "wait Retry-After seconds, then retry",
}
# Statuses API Gateway also answers itself, in its own body, for a path with an id the API
# refuses (docs/api.md#ids): one it cannot decode (400) or routes nowhere (404).
GATEWAY_STATUSES = (400, 404)
# Every route can meet these: a malformed request, invalid parameters, throttling, an outage.
ALWAYS = (400, 422, 429, 503)
# Every 429 and 503 the app sends carries Retry-After (memkit.errors: the seconds).
RETRY_STATUSES = (429, 503)
RETRY_AFTER: OpenAPIResponseHeader = {
    "description": "seconds to wait before sending the request again",
    "schema": {"type": "integer"},
}


def documented_errors(*statuses: int, success: int = 200) -> dict[int, OpenAPIResponse]:
    """OpenAPI `responses` for a route: its success (schema from the return annotation) and its
    error statuses, all in the one error body."""
    documented: dict[int, OpenAPIResponse] = {success: {"description": "Success"}}
    for status in sorted({*ALWAYS, *statuses}):
        body: Any = ErrorBody | GatewayAnswer if status in GATEWAY_STATUSES else ErrorBody
        documented[status] = {
            "description": REASONS[status],
            "content": {content_types.APPLICATION_JSON: {"model": body}},
        }
        if status in RETRY_STATUSES:
            documented[status]["headers"] = {"Retry-After": RETRY_AFTER}
    return documented


def refusal(error: MemkitError) -> dict[str, Any]:
    """An HTTP API (payload 2.0) response for a request refused before routing."""
    return {
        "statusCode": error.status,
        "headers": {
            "Content-Type": content_types.APPLICATION_JSON,
            **retry_headers(error.retry_after),
        },
        "body": error_json(error.code, error.detail, error.errors),
        "isBase64Encoded": False,
    }


def with_etag(body: ModelT, version: int, status: int = 200) -> Response[ModelT]:
    return Response(
        status_code=status,
        content_type=content_types.APPLICATION_JSON,
        body=body,
        headers={"ETag": f'"{version}"'},
    )


def profile_view(profile: Profile) -> ProfileView:
    return ProfileView(
        name=profile.name,
        scope=profile.scope,
        format=profile.pad_format,
        template=profile.template,
        json_schema=profile.json_schema,
        array_merge=profile.array_merge,
        read_only=profile.read_only,
        max_tokens=profile.max_tokens,
        max_messages=profile.max_messages,
        version=profile.version,
        updated_at=profile.updated_at,
        builtin=profile.builtin,
        namespace=profile.namespace,
    )


def profile_response(profile: Profile) -> Response[ProfileView]:
    return with_etag(profile_view(profile), profile.version)


def scratchpad_view(result: ScratchpadResult) -> ScratchpadView:
    state, profile = result.state, result.profile
    return ScratchpadView(
        session_id=state.ref.session_id,
        user_id=state.user_id,
        namespace=state.ref.owner.namespace,
        profile=profile.name,
        scope=state.scope,
        format=profile.pad_format,
        content=result.content,
        version=result.version,
        template=profile.template,
        json_schema=profile.json_schema,
        read_only=profile.read_only,
        tokens=result.tokens,
        max_tokens=profile.max_tokens,
        updated_at=result.updated_at,
        problems=field_errors(result.problems),
    )


def scratchpad_response(result: ScratchpadResult) -> Response[ScratchpadView]:
    return with_etag(scratchpad_view(result), result.version)


def session_response(document: SessionDocument) -> Response[SessionView]:
    return with_etag(session_view(document), document.meta.version)
