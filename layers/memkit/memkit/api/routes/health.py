"""GET /v1/health (AMS): memkit answers and its table does."""

from __future__ import annotations

import time

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit import __version__
from memkit.api.context import services_of
from memkit.api.responses import documented_errors
from memkit.models.api import Health

router = APIGatewayHttpRouter()
# A table that answered is not asked again by this execution environment for this long: the
# route is public, so a caller cannot turn it into more than one read per environment this
# often (each an eventually consistent GetItem of a key no item has: half a read unit).
STORAGE_CHECK_SECONDS = 5.0
_answered_at = [-STORAGE_CHECK_SECONDS]  # time.monotonic() of the last answer


@router.get(
    "/v1/health",
    tags=["health"],
    summary="Liveness and storage, with the server time and memkit's version",
    description="200 when the API answers and its DynamoDB table does (checked at most every "
    f"{STORAGE_CHECK_SECONDS:g} s per execution environment); 503 with Retry-After when the "
    "table does not answer.",
    responses=documented_errors(),
)
def health() -> Health:
    now = time.monotonic()
    if now - _answered_at[0] >= STORAGE_CHECK_SECONDS:
        services_of(router).store.reachable()  # StoreUnavailable: 503 + Retry-After
        _answered_at[0] = now
    return Health(now=int(time.time() * 1000), version=__version__)
