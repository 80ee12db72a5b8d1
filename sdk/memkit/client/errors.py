"""What the SDK raises: the API's error body as exceptions, one class per status.

Every error the API sends has one body (docs/api.md): `{"detail", "code", "errors": [{"field",
"reason"}]}`, read here with the API's own model. API Gateway's own refusals (its throttling,
a function that timed out) carry `{"message": ...}` instead and no `code`: `code` is then
"gateway". Messages never carry a token or a request body.
"""

from __future__ import annotations

import email.utils
import math
import time
from datetime import UTC

import httpx
from pydantic import ValidationError

from memkit.models.api import ErrorBody, FieldError

# The `code` of an error that API Gateway answered itself (no memkit error body).
GATEWAY_CODE = "gateway"


class MemkitClientError(Exception):
    """Base of every error the SDK raises."""


class APIConnectionError(MemkitClientError):
    """The API could not be reached, or no answer came back (after the retries that were safe)."""


class IndexingTimeout(MemkitClientError):
    """Records were still waiting to be indexed when the wait ran out."""


class APIError(MemkitClientError):
    """An HTTP error from the API: its status, `code`, `detail` and field problems."""

    status: int = 0

    def __init__(
        self,
        status: int,
        code: str,
        detail: str,
        errors: list[FieldError] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status
        self.code = code
        self.detail = detail
        self.errors = errors or []
        # Seconds the API asked the caller to wait (Retry-After), when it said.
        self.retry_after = retry_after
        super().__init__(str(self))

    def __str__(self) -> str:
        fields = "; ".join(f"{e.field}: {e.reason}" for e in self.errors)
        return f"{self.status} {self.code}: {self.detail}" + (f" ({fields})" if fields else "")


class BadRequestError(APIError):
    """400: malformed JSON, or a cursor that is not the API's."""


class AuthenticationError(APIError):
    """401: no verified identity (a missing, expired or wrong token or signature)."""


class PermissionDeniedError(APIError):
    """403: the credential lacks the route's scope, or names another user's data."""


class NotFoundError(APIError):
    """404: no such session, record, profile or job (another user's record is one too)."""


class ConflictError(APIError):
    """409: If-Match named a version that is no longer the current one."""


class PayloadTooLargeError(APIError):
    """413: over a profile's max_tokens, an item's size or the request's size."""


class UnprocessableEntityError(APIError):
    """422: the request is well formed but not acceptable; `errors` names each field."""


class RateLimitError(APIError):
    """429: throttled (memkit's backing services, the tenant's quota or the gateway)."""


class ServiceUnavailableError(APIError):
    """503: a backing service is unavailable, or (`code` "gateway") the function timed out."""


class InternalServerError(APIError):
    """Any other 5xx (502: the function failed; 504: the gateway timed out)."""


BY_STATUS: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: UnprocessableEntityError,
    429: RateLimitError,
    503: ServiceUnavailableError,
}


def retry_after(response: httpx.Response, now: float | None = None) -> float | None:
    """Retry-After in seconds: a number of seconds or an HTTP date (RFC 9110 §10.2.3)."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # an HTTP date is GMT
            when = when.replace(tzinfo=UTC)
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def memkit_error_body(response: httpx.Response) -> ErrorBody | None:
    """The API's error body, or None when the answer is not one (the gateway's own)."""
    try:
        return ErrorBody.model_validate(response.json())
    except (ValueError, ValidationError):  # not JSON, or another shape
        return None


def error_for(response: httpx.Response) -> APIError:
    """The exception for an error response, typed by its status."""
    status = response.status_code
    kind = BY_STATUS.get(status, InternalServerError if status >= 500 else APIError)
    body = memkit_error_body(response)
    if body is not None:
        return kind(status, body.code, body.detail, body.errors, retry_after(response))
    try:
        payload = response.json()
        message = payload.get("message") if isinstance(payload, dict) else None
    except ValueError:  # not JSON
        message = None
    detail = message if isinstance(message, str) else (response.reason_phrase or "error")
    return kind(status, GATEWAY_CODE, detail, [], retry_after(response))
