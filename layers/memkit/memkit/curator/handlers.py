"""Entry points of background curation (memkit.curation).

- `curator_handler`: DynamoDB stream records of session items (template.yaml's
  CuratorFunction; its filter passes only those) -> jobs on the memory work queue. Fast and
  model-free, so a slow or failing model never holds the stream back.
- `worker_handler`: the queue's messages -> jobs run with the configured MemoryModel
  (MemoryWorkerFunction). A job that fails is reported in batchItemFailures; SQS retries it
  after its visibility timeout and, after maxReceiveCount tries, moves it to the DLQ.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    process_partial_response,
)
from aws_lambda_powertools.utilities.data_classes.dynamo_db_stream_event import DynamoDBRecord
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.typing import LambdaContext
from boto3.dynamodb.types import TypeDeserializer
from pydantic import ValidationError

from memkit.config import ENV_PREFIX, CurationSettings, curation_settings
from memkit.curation import Curator, Job, Policy, jobs_for
from memkit.errors import Misconfigured
from memkit.models.domain import DEFAULT_NAMESPACE, Owner
from memkit.observability import drop_disabled_metrics, logger, metrics

if TYPE_CHECKING:
    from memkit.lifecycle.users import UserDeletion

Handler = Callable[[dict[str, Any], LambdaContext], dict[str, Any]]
_deserializer = TypeDeserializer()


def _settings() -> CurationSettings:
    try:
        return curation_settings()
    except ValidationError as exc:
        names = sorted(
            {f"{ENV_PREFIX}{str(e['loc'][0]).upper()}" for e in exc.errors() if e["loc"]}
        )
        raise Misconfigured(f"invalid or missing settings: {', '.join(names)}") from exc


def policy_of(settings: CurationSettings) -> Policy:
    return Policy(
        window_tokens=settings.summary_window_tokens,
        threshold=settings.summary_threshold,
        quiet_seconds=settings.extraction_quiet_seconds,
        # The local model cannot extract facts: queue no extraction it would skip. Its
        # topics are frequent words, not worth re-indexing every new record for.
        extract=settings.llm_provider != "local",
        describe=settings.llm_provider != "local",
    )


# -- the curator -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Queueing:
    """What the curator needs: the table (to size a session's view), the queue, the policy."""

    store: Any
    send: Callable[[Job], None]
    policy: Policy


@lru_cache(maxsize=1)
def production_queueing() -> Queueing:
    import boto3

    from memkit.store.dynamodb import DynamoStore

    settings = _settings()
    if not settings.work_queue_url:
        raise Misconfigured("MEMKIT_WORK_QUEUE_URL is not set")
    sqs = boto3.client("sqs", region_name=settings.region, endpoint_url=settings.sqs_endpoint)
    url = settings.work_queue_url

    def send(job: Job) -> None:
        sqs.send_message(QueueUrl=url, MessageBody=job.to_json(), DelaySeconds=job.delay_seconds)

    return Queueing(DynamoStore(settings), send, policy_of(settings))


def _image(raw: dict[str, Any] | None) -> dict[str, Any] | None:
    if not raw:
        return None
    return {name: _deserializer.deserialize(value) for name, value in raw.items()}


def make_curator_handler(queueing: Callable[[], Queueing] = production_queueing) -> Handler:
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


# -- the worker --------------------------------------------------------------------------------


@lru_cache(maxsize=1)
def production_curator() -> Curator:
    from memkit.embeddings.factory import embedder_for
    from memkit.llm.factory import memory_model_for
    from memkit.service.long_term import LongTermService
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.factory import vector_index_for

    settings = _settings()
    store = DynamoStore(settings)
    embedder = embedder_for(settings, settings.region)

    def index() -> Any:
        return vector_index_for(settings, settings.region, embedder.dimensions)

    long_term = LongTermService(store, index, lambda: embedder)
    model = memory_model_for(settings, settings.region)
    return Curator(store, long_term, model, policy_of(settings))


# A delete_user job works for this share of the time the invocation has left, then queues
# itself again (so the rest of a batch still has time).
DELETION_SHARE = 0.75


@lru_cache(maxsize=1)
def production_deletions() -> UserDeletion:
    from memkit.embeddings.factory import embedder_for
    from memkit.lifecycle.users import UserDeletion, sqs_job_sender
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.factory import vector_index_for

    settings = _settings()
    send = None
    if settings.work_queue_url:
        send = sqs_job_sender(settings.work_queue_url, settings.region, settings.sqs_endpoint)

    def index() -> Any:
        return vector_index_for(
            settings, settings.region, embedder_for(settings, settings.region).dimensions
        )

    return UserDeletion(DynamoStore(settings), index, send)


def make_worker_handler(
    curator: Callable[[], Curator] = production_curator,
    deletions: Callable[[], UserDeletion] = production_deletions,
) -> Handler:
    """The memory worker over `curator`, and `deletions` for a user's deletion that did not
    finish within its request (production: from settings)."""

    @logger.inject_lambda_context(clear_state=True)
    @metrics.log_metrics
    @drop_disabled_metrics
    def lambda_handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
        worker = curator()

        def on_message(record: SQSRecord) -> None:
            job = Job.from_json(record.body)
            if job.kind == "delete_user":
                budget = DELETION_SHARE * context.get_remaining_time_in_millis() / 1000
                outcome = deletions().resume(job, budget)
            else:
                outcome = worker.run(job)
            logger.info("curation job", extra={"job": job.kind, "outcome": outcome})

        processor = BatchProcessor(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        response = process_partial_response(
            event=event, record_handler=on_message, processor=processor, context=context
        )
        return dict(response)

    return lambda_handler


curator_handler = make_curator_handler()
worker_handler = make_worker_handler()
