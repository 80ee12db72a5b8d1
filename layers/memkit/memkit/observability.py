"""Logger and Metrics for every function, and a Tracer built only when first asked for.

Logs and metrics never carry message, scratchpad or memory content: only ids, counts, sizes.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, TypeVar, cast

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

SERVICE = "memkit"
F = TypeVar("F", bound=Callable[..., Any])

# A request that changed nothing has no metric to publish; that is normal, not a warning.
warnings.filterwarnings("ignore", message="No application metrics to publish")

logger = Logger(service=SERVICE)
metrics = Metrics(namespace="memkit", service=SERVICE)


@lru_cache(maxsize=1)
def tracer() -> Tracer:
    """The X-Ray tracer, built lazily: importing it costs a noticeable part of a cold start."""
    from aws_lambda_powertools import Tracer

    return Tracer(service=SERVICE)


def drop_disabled_metrics(handler: F) -> F:
    """Under `metrics.log_metrics`: with metrics disabled, Powertools skips the flush but
    keeps the values, and prints them anyway once 100 pile up; drop them per invocation."""
    from aws_lambda_powertools.metrics.functions import is_metrics_disabled

    @functools.wraps(handler)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        try:
            return handler(*args, **kwargs)
        finally:
            if is_metrics_disabled():
                metrics.clear_metrics()

    return cast(F, wrapped)
