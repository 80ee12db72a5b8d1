"""The memory worker's entry point (functions/worker): the work queue's messages -> jobs run
with the configured MemoryModel (memkit.jobs.curation), the rest of a user's deletion that
did not finish within its request (memkit.jobs.users), and wings' jobs by their kind (an
AgentCore memory's deletion: memkit.handlers.wiring.production_wing_jobs). A job that fails
is reported in
batchItemFailures; SQS retries it after its visibility timeout and, after maxReceiveCount
tries, moves it to the DLQ.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.handlers.wiring import production_curator, production_deletions, production_wing_jobs
from memkit.jobs.curation import Curator, Job
from memkit.observability import drop_disabled_metrics, logger, metrics

if TYPE_CHECKING:
    from memkit.jobs.deletion import BackgroundDeletion
    from memkit.jobs.users import UserDeletion

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]

# A deletion job works for this share of the time the invocation has left, then queues
# itself again (so the rest of a batch still has time).
DELETION_SHARE = 0.75


def make_lambda_handler(
    curator: Callable[[], Curator] = production_curator,
    deletions: Callable[[], UserDeletion] = production_deletions,
    wing_jobs: Mapping[str, Callable[[], BackgroundDeletion]] | None = None,
) -> Handler:
    """The memory worker over `curator`, `deletions` for a user's deletion that did not
    finish within its request, and `wing_jobs` for wings' jobs by kind (production: from
    settings)."""
    resumed = production_wing_jobs() if wing_jobs is None else wing_jobs

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        worker = curator()

        def on_message(record: SQSRecord) -> None:
            job = Job.from_json(record.body)
            budget = DELETION_SHARE * context.get_remaining_time_in_millis() / 1000
            if job.kind == "delete_user":
                outcome = deletions().resume(job, budget)
            elif job.kind in resumed:
                outcome = resumed[job.kind]().resume(job, budget)
            else:
                outcome = worker.run(job)
            logger.info("curation job", extra={"job": job.kind, "outcome": outcome})

        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_partial_response(
            event=event, record_handler=on_message, processor=processor, context=context
        )
        return dict(response)

    return lambda_handler


lambda_handler = make_lambda_handler()
