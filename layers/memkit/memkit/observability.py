"""Logger and Metrics for every function, and a Tracer built only when first asked for.

Logs and metrics never carry message, scratchpad or memory content: only ids, counts, sizes.
"""

from __future__ import annotations

import warnings
from functools import lru_cache
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

SERVICE = "memkit"

# A request that changed nothing has no metric to publish; that is normal, not a warning.
warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="memkit", service=SERVICE)


@lru_cache(maxsize=1)
def tracer() -> Tracer:
    """The X-Ray tracer, built lazily: importing it costs a noticeable part of a cold start."""
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)
