"""GET /v1/health (AMS)."""

from __future__ import annotations

import time

from aws_lambda_powertools.event_handler.router import APIGatewayHttpRouter

from memkit import __version__
from memkit.models.api import Health

router = APIGatewayHttpRouter()


@router.get(
    "/v1/health", tags=["health"], summary="Liveness, with the server time and memkit's version"
)
def health() -> Health:
    return Health(now=int(time.time() * 1000), version=__version__)
