"""The cleanup function's entry point (functions/cleanup): one scheduled cleanup run
(memkit.jobs.cleanup).

EventBridge Scheduler invokes it asynchronously on the `CleanupRate` schedule; the event
carries nothing the run needs, only ids of the invocation (template.yaml's Input: the
schedule, its scheduled time, the execution id and attempt, events/schedule.json), which go
into every log line. The run's deadline comes from the invocation's remaining time.

A run in which a phase failed still runs the other phases and saves their cursors, then
the handler raises: the invocation counts as an error (the Errors alarm) and, with no
retries configured, goes to the dead-letter queue with the failed phases' names. The next
scheduled run is the retry, from the saved cursors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.handlers.wiring import production_cleanup
from memkit.jobs.cleanup import CleanupRun
from memkit.observability import drop_disabled_metrics, logger, metrics

# What the schedule's Input carries (template.yaml, events/schedule.json).
SCHEDULE_KEYS = ("schedule_arn", "scheduled_time", "execution_id", "attempt_number")

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class CleanupFailed(Exception):
    """Some phases failed in this run (named); the others ran and saved their cursors."""


def make_lambda_handler(cleanup: Callable[[], CleanupRun] = production_cleanup) -> Handler:
    """The Lambda handler over `cleanup` (production: from the environment)."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        logger.append_keys(**{k: str(event[k]) for k in SCHEDULE_KEYS if k in event})
        result = cleanup().run(context.get_remaining_time_in_millis())
        if result.failed:
            raise CleanupFailed(f"cleanup phases failed: {', '.join(result.failed)}")
        return result.summary()

    return lambda_handler


lambda_handler = make_lambda_handler()
