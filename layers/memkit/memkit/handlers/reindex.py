"""The index rebuild's entry point (functions/reindex), invoked by an operator:

    aws lambda invoke --function-name memkit-<stage>-reindex --payload '{"segments": 8}' out.json

One rebuild per invocation (memkit.jobs.reindex), its summary as the result. An invocation
that runs short of time pauses and returns a `continuation`; invoke again with
{"resume": <continuation>} until the result says "switched": true.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext
from pydantic import BaseModel, ConfigDict, Field

from memkit.handlers.wiring import reindex_settings, reindexer
from memkit.jobs.reindex import Reindexer, ReindexState
from memkit.observability import drop_disabled_metrics, logger, metrics
from memkit.times import Deadline

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class ReindexEvent(BaseModel):
    """What `aws lambda invoke --payload` may say; settings fill what it leaves out."""

    model_config = ConfigDict(extra="forbid")

    segments: int | None = Field(default=None, ge=1, le=64)
    page_size: int | None = Field(default=None, ge=1, le=1000)
    dry_run: bool = False
    # The `continuation` a paused invocation returned: go on with that rebuild.
    resume: ReindexState | None = None


def copy_deadline(remaining_ms: int, clock: Callable[[], float] = time.monotonic) -> Deadline:
    """When an invocation's copy must stop: the switch, the catch-up (a second Scan) and
    the report need the rest (a minute, or 40 % of the time left if more)."""
    remaining = max(0.0, remaining_ms / 1000)
    return Deadline.after(max(0.0, remaining - max(60.0, 0.4 * remaining)), clock)


ReindexerFactory = Callable[[ReindexEvent], Reindexer]


def production_reindexer(event: ReindexEvent) -> Reindexer:
    """The rebuild the function's environment describes (MEMKIT_* variables)."""
    return reindexer(reindex_settings(), event.segments, event.page_size)


def make_lambda_handler(reindexer: ReindexerFactory = production_reindexer) -> Handler:
    """The Lambda handler: one rebuild per invocation, its summary as the result."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        request = ReindexEvent.model_validate(event or {})
        deadline = copy_deadline(context.get_remaining_time_in_millis())
        report = reindexer(request).run(
            dry_run=request.dry_run, deadline=deadline, pause=True, resume=request.resume
        )
        metrics.add_metric(name="ReindexedDocs", unit="Count", value=report.indexed)
        metrics.add_metric(name="ReindexFailures", unit="Count", value=report.failed)
        return report.summary()

    return lambda_handler


lambda_handler = make_lambda_handler()
