"""Domain errors. Each maps to one HTTP status and the single error body of API.md.

Raised by the service and the store; turned into HTTP only at the edge (memkit.api.app).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

# Seconds a client should wait before it repeats a request refused for want of capacity (the
# Retry-After header of every 429 and 503). The SDKs have already retried for about as long
# (DynamoDB's and Bedrock's backoff, opensearch-py's resends): a throttle clears in a second or
# two, an outage of a backing service takes longer.
THROTTLED_RETRY_AFTER_SECONDS = 2
UNAVAILABLE_RETRY_AFTER_SECONDS = 5


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
    # Seconds to wait before sending the same request again (Retry-After); None when waiting
    # will not help.
    retry_after: ClassVar[int | None] = None

    def __str__(self) -> str:
        return self.detail

    @property
    def caller_can_fix(self) -> bool:
        """Whether the request itself is at fault (a 4xx other than 429): a tool call answers
        such errors to the model; the others are the service's and keep their HTTP status."""
        return self.status < 500 and self.retry_after is None


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


class OutOfScope(Forbidden):
    """A scope the credential does not hold: another user, or no user, named without admin
    (memkit.app.access). The HTTP API answers it as any 403; an MCP tool call as
    insufficient_scope."""


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
    """A backing service (DynamoDB, OpenSearch, Bedrock) kept throttling after the SDK's
    retries: the client should back off and retry."""

    status = 429
    code = "throttled"
    retry_after = THROTTLED_RETRY_AFTER_SECONDS


class QuotaExceeded(Throttled):
    """The tenant's requests for this minute are spent (MEMKIT_TENANT_REQUESTS_PER_MINUTE):
    Retry-After says when the next minute starts."""

    code = "quota_exceeded"

    def __init__(self, detail: str, seconds: int) -> None:
        super().__init__(detail)
        # This instance's wait (the class attribute is the default of the others).
        object.__setattr__(self, "retry_after", max(1, seconds))


class StoreUnavailable(MemkitError):
    """A backing service (DynamoDB, OpenSearch, Bedrock, the work queue) failed or refused
    the service after retries: the client may retry later; an operator reads why in the log."""

    status = 503
    code = "unavailable"
    retry_after = UNAVAILABLE_RETRY_AFTER_SECONDS


class OutOfTime(StoreUnavailable):
    """The invocation's deadline (memkit.times.bound) came before a write was committed: it
    was not, so the client, told to retry, never finds it written after all."""


class Misconfigured(MemkitError):
    """The deployment's settings are wrong: an operator must fix them (logged with names)."""

    status = 500
    code = "misconfigured"


class IdempotencyMismatch(ValidationFailed):
    """A client token seen before, sent with other parameters (AgentCore's
    IdempotentParameterMismatch)."""

    code = "idempotent_mismatch"


class ResourceConflict(ValidationFailed):
    """The request names something that exists and belongs elsewhere (a session id of another
    actor of the same memory)."""

    code = "resource_conflict"


class NameTaken(ResourceConflict):
    """A name that is unique within its tenant (an AgentCore memory's) is another's."""

    code = "resource_conflict"


class NotServed(BadRequest):
    """An operation of a compatible API that memkit does not implement."""

    code = "unknown_operation"
