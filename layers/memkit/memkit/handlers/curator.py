"""The stream curator's entry point (functions/curator): DynamoDB stream records of session
items (template.yaml's CuratorFunction; its filter passes only those) -> jobs on the memory
work queue (memkit.jobs.curation). Fast and model-free, so a slow or failing model never
holds the stream back; the memory worker (memkit.handlers.worker) runs the jobs.
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
from boto3.dynamodb.types import TypeDeserializer

from memkit.handlers.wiring import production_queueing
from memkit.jobs.curation import Queueing, jobs_for
from memkit.models.domain import DEFAULT_NAMESPACE, Owner
from memkit.observability import drop_disabled_metrics, logger, metrics

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
_deserializer = TypeDeserializer()


def _image(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    return {name: _deserializer.deserialize(value) for name, value in raw.items()}


def make_lambda_handler(queueing: Callable[[], Queueing] = production_queueing) -> Handler:
    """The stream curator over `queueing` (production: DynamoDB and SQS from settings)."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        deps = queueing()

        def on_record(record: DynamoDBRecord) -> None:
            raw = record.raw_event.get("dynamodb") or {}
            new, old = _image(raw.get("NewImage")), _image(raw.get("OldImage"))
            if new is None or new.get("kind") not in ("session", "record"):
                return
            owner = Owner(
                tenant=str(new["tenant"]), namespace=str(new.get("namespace") or DEFAULT_NAMESPACE)
            )

            def view_tokens() -> int:
                meta = deps.store.session_meta(owner, str(new.get("session_id")))
                if meta is None:
                    return 0
                return sum(m.tokens for m in deps.store.view_messages(owner, meta))

            for job in jobs_for(old, new, deps.policy, view_tokens):
                deps.send(job)
                metrics.add_metric(name=f"CurationQueued_{job.kind}", unit="Count", value=1)

        processor = BatchProcessor(
            event_type=EventType.DynamoDBStreams, raise_on_entire_batch_failure=False
        )
        response = process_partial_response(
            event=event, record_handler=on_record, processor=processor, context=context
        )
        return dict(response)

    return lambda_handler


lambda_handler = make_lambda_handler()
