"""Domain errors. Each maps to one HTTP status and the single error body of API.md.

Raised by the service and the store; turned into HTTP only at the edge (memkit.api.errors).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class FieldProblem:
    """One problem with one field: where (a dotted path) and why."""

    field: str
    reason: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "reason": self.reason}


@dataclass
class MemkitError(Exception):
    """Base of every error a client may see. `detail` never carries stored content."""

    detail: str
    errors: list[FieldProblem] = field(default_factory=list)

    status = 400
    code = "bad_request"

    def __str__(self) -> str:
        return self.detail


class BadRequest(MemkitError):
    status = 400
    code = "bad_request"


class Unauthenticated(MemkitError):
    """No verified identity reached the function where the auth mode expects one."""

    status = 401
    code = "unauthenticated"


class Forbidden(MemkitError):
    status = 403
    code = "forbidden"


class NotFound(MemkitError):
    status = 404
    code = "not_found"


class VersionConflict(MemkitError):
    """The item changed since it was read (If-Match mismatch or a lost conditional write)."""

    status = 409
    code = "version_conflict"


class TooLarge(MemkitError):
    status = 413
    code = "too_large"


class UnsupportedMediaType(MemkitError):
    status = 415
    code = "unsupported_media_type"


class ValidationFailed(MemkitError):
    """A request that is well formed but not acceptable (422 with field problems)."""

    status = 422
    code = "validation_error"


class SchemaViolation(ValidationFailed):
    """Content that does not fit the profile's JSON Schema."""

    code = "schema_violation"


class Throttled(MemkitError):
    """DynamoDB kept throttling after the SDK's retries: the client should back off and retry."""

    status = 429
    code = "throttled"


class StoreUnavailable(MemkitError):
    """DynamoDB throttled or failed after retries: the client may retry later."""

    status = 503
    code = "unavailable"


class Misconfigured(MemkitError):
    """The deployment's settings are wrong: an operator must fix them (logged with names)."""

    status = 500
    code = "misconfigured"
