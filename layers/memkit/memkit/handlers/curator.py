"""The stream curator's entry point (functions/curator): DynamoDB stream records of session
items (template.yaml's CuratorFunction; its filter passes only those) -> jobs on the memory
work queue (memkit.jobs.curation). Fast and model-free, so a slow or failing model never
holds the stream back; the memory worker (memkit.handlers.worker) runs the jobs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.handlers.wiring import production_queueing
from memkit.jobs.curation import Queueing, queue_jobs
from memkit.observability import drop_disabled_metrics, logger, metrics
from memkit.store.changes import stream_change

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


def make_lambda_handler(queueing: Callable[[], Queueing] = production_queueing) -> Handler:
    """The stream curator over `queueing` (production: DynamoDB and SQS from settings)."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        deps = queueing()
        queued: Counter[str] = Counter()

        def on_record(record: DynamoDBRecord) -> None:
            change = stream_change(record.raw_event)
            if change is not None:
                queued.update(job.kind for job in queue_jobs(change, deps))

        processor = BatchProcessor(
            event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
        )
        response = process_partial_response(
            event=event, record_handler=on_record, processor=processor, context=context
        )
        # One value per kind and batch (a value per job would reach Powertools' 100-value
        # flush within one busy batch).
        for kind, count in queued.items():
            metrics.add_metric(name=f"CurationQueued_{kind}", unit="Count", value=count)
        return dict(response)

    return lambda_handler


lambda_handler = make_lambda_handler()
