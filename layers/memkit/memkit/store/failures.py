"""SDK errors as domain errors, at the store's edge.

Its own module, light to import (botocore's and PynamoDB's exception classes only), so that
the API-key authorizer translates errors without loading the item classes and models.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from botocore.exceptions import BotoCoreError, ClientError
from pynamodb.exceptions import PynamoDBException, TransactWriteError

from memkit.errors import StoreUnavailable, Throttled, VersionConflict

THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}
# PutItem says ConditionalCheckFailedException; a cancelled transaction gives per-item reasons
# ConditionalCheckFailed or TransactionConflict (another transaction touched the item).
CONFLICTS = {"ConditionalCheckFailedException", "ConditionalCheckFailed", "TransactionConflict"}


def _error_code(exc: Exception) -> str | None:
    """DynamoDB's error code, a cancelled transaction read as its items' reasons."""
    if isinstance(exc, TransactWriteError):
        reasons: list[str | None] = [r.code for r in exc.cancellation_reasons if r is not None]
    elif isinstance(exc, ClientError):
        cancelled = exc.response.get("CancellationReasons") or []
        reasons = [r.get("Code") for r in cancelled]
    else:
        reasons = []
    if any(code in CONFLICTS for code in reasons):
        return "ConditionalCheckFailedException"
    if any(code in THROTTLING or code == "ThrottlingError" for code in reasons):
        return "ThrottlingException"
    if isinstance(exc, PynamoDBException):
        return exc.cause_response_code
    if isinstance(exc, ClientError):
        return str(exc.response.get("Error", {}).get("Code"))
    return None


@contextmanager
def translated(operation: str) -> Iterator[None]:
    """SDK errors as domain errors; the SDK's message never reaches a client. Covers
    PynamoDB and calls made on the botocore client directly (transactions, refreshes)."""
    try:
        yield
    except (PynamoDBException, ClientError, BotoCoreError) as exc:
        code = _error_code(exc)
        if code in CONFLICTS:
            raise VersionConflict(f"{operation}: the item changed since it was read") from exc
        if code in THROTTLING:
            raise Throttled("DynamoDB is throttling requests; retry with backoff") from exc
        raise StoreUnavailable(f"{operation} failed: storage is unavailable") from exc
