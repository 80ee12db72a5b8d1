"""The stream indexer's entry point (functions/indexer): a Powertools BatchProcessor over
DynamoDB stream records.

The batch is embedded and written to the index whole (memkit.jobs.indexing), then each record is
passed through the BatchProcessor, which reports those that failed in `batchItemFailures`:
Lambda retries from the first of them (bisecting on a function error), and after the
retries the event source mapping sends them to the on-failure queue. A poison record fails
alone; the rest of the batch is indexed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.typing import LambdaContext

from memkit.handlers.wiring import production_indexer
from memkit.jobs.indexing import BatchOutcome, Indexer
from memkit.observability import drop_disabled_metrics, logger, metrics

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]


class RecordFailed(Exception):
    """This stream record was not indexed; the reason carries no content."""


def make_lambda_handler(indexer: Callable[[], Indexer] = production_indexer) -> Handler:
    """The Lambda handler over `indexer` (production: from the environment)."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        records = event.get("Records") or []
        outcome: BatchOutcome = indexer().index_batch(records)

        def check(record: DynamoDBRecord) -> None:
            reason = outcome.failures.get(
                str(record.dynamodb.sequence_number if record.dynamodb else "")
            )
            if reason is not None:
                raise RecordFailed(reason)

        # A batch in which every record failed is reported like any other (not raised as a
        # function error): Lambda retries from the first, with the same per-record outcome.
        processor = BatchProcessor(
            event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
        )
        response = process_partial_response(
            event=event, record_handler=check, processor=processor, context=context
        )
        return dict(response)

    return lambda_handler


lambda_handler = make_lambda_handler()
