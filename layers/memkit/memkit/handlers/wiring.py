"""The one place that builds memkit's dependencies from validated settings.

Stores, embedders, vector indexes, memory models and the job sender are constructed here
and nowhere else; each entry point (memkit.handlers.*) asks this module for what it runs
over, and tests pass fakes to the handlers' `make_lambda_handler` instead. Settings are
read on the first request, never at import, and a bad one is a `Misconfigured` naming the
variables, never a stack trace.

Everything heavy (boto3 clients, numpy, the model, OpenSearch's client, the API's services,
background jobs' modules) is imported inside the function that builds it: each function's
cold start pays only for what it uses, the API's only for what its first route uses.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, TypeVar

from pydantic import ValidationError

from memkit.config import (
    ENV_PREFIX,
    ApiKeySettings,
    ApiSettings,
    CleanupSettings,
    CurationSettings,
    IndexSettings,
    LLMSettings,
    ReindexSettings,
    StoreSettings,
    api_key_settings,
    api_settings,
    cleanup_settings,
    curation_settings,
    indexer_settings,
    llm_settings,
)
from memkit.errors import Misconfigured, StoreUnavailable

if TYPE_CHECKING:
    from memkit.api.wings import Wing
    from memkit.app.services import Lifecycle, Services
    from memkit.embeddings.protocol import Embedder
    from memkit.identity import IdentitySettings
    from memkit.jobs.cleanup import CleanupRun
    from memkit.jobs.compact import Compaction
    from memkit.jobs.curation import Curator, Job, Policy, Queueing
    from memkit.jobs.deletion import BackgroundDeletion
    from memkit.jobs.forget import Forgetting
    from memkit.jobs.indexing import Indexer
    from memkit.jobs.phases import Phase
    from memkit.jobs.policies import PolicyService
    from memkit.jobs.reindex import Reindexer
    from memkit.jobs.users import UserDeletion
    from memkit.llm.protocol import MemoryModel
    from memkit.service.api_keys import ApiKeyService
    from memkit.service.long_term import LongTermService
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.local import LocalVectorIndex
    from memkit.vectors.protocol import RebuildableIndex, VectorIndex

S = TypeVar("S")

JobSender = Callable[["Job"], None]


def checked(load: Callable[[], S]) -> S:
    """Settings from the environment, or `Misconfigured` naming the bad variables."""
    try:
        return load()
    except ValidationError as exc:
        names = sorted(
            {f"{ENV_PREFIX}{str(e['loc'][0]).upper()}" for e in exc.errors() if e["loc"]}
        )
        raise Misconfigured(f"invalid or missing settings: {', '.join(names)}") from exc


# -- providers -------------------------------------------------------------------------------


@lru_cache(maxsize=4)
def embedder_for(settings: IndexSettings, region: str) -> Embedder:
    """local: the shipped static model; titan | cohere: Bedrock in `region`."""
    if settings.embedder == "local":
        from memkit.embeddings.local import LocalEmbedder

        return LocalEmbedder()
    import boto3
    from botocore.config import Config

    from memkit.embeddings.bedrock import COHERE_ENGLISH_V3, TITAN_V2, CohereEmbedder, TitanEmbedder

    # The embedders retry throttling themselves, with backoff over a longer window.
    client = boto3.client(
        "bedrock-runtime",
        region_name=region,
        endpoint_url=settings.bedrock_endpoint,
        config=Config(retries={"max_attempts": 2, "mode": "standard"}, read_timeout=30),
    )
    if settings.embedder == "titan":
        return TitanEmbedder(
            client, settings.embedding_dimensions, settings.embedding_model or TITAN_V2
        )
    return CohereEmbedder(client, settings.embedding_model or COHERE_ENGLISH_V3)


@lru_cache(maxsize=4)
def process_local_index(dimensions: int) -> LocalVectorIndex:
    """One exact index for this process (tests and benchmarks that run in one process; the
    local stack serves one to all its functions over loopback, memkit_dev.local.opensearch)."""
    from memkit.vectors.local import LocalVectorIndex

    return LocalVectorIndex(dimensions)


@lru_cache(maxsize=4)
def vector_index_for(settings: IndexSettings, region: str, dimensions: int) -> VectorIndex:
    """The vector table's index (`vector_table`: VectorStore dynamodb), OpenSearch at
    `opensearch_endpoint` (a domain or a Serverless collection), else the process's local
    index."""
    if settings.vector_table is not None:
        from memkit.vectors.dynamodb import dynamodb_index

        return dynamodb_index(settings, region, dimensions)
    if settings.opensearch_endpoint is None:
        return process_local_index(dimensions)
    from memkit.vectors.opensearch import opensearch_index

    return opensearch_index(settings, region, dimensions)


def configured_index(
    settings: IndexSettings, region: str, embedder: Callable[[], Embedder] | None = None
) -> Callable[[], VectorIndex]:
    """The configured index, built on first use (its dimensions are the embedder's)."""
    chosen = embedder or (lambda: embedder_for(settings, region))
    return lambda: vector_index_for(settings, region, chosen().dimensions)


def rebuildable(index: VectorIndex) -> RebuildableIndex:
    """`index` as the rebuildable index it is (memkit's own indexes all are)."""
    from memkit.vectors.dynamodb import DynamoVectorIndex
    from memkit.vectors.local import LocalVectorIndex
    from memkit.vectors.opensearch import OpenSearchIndex

    if not isinstance(index, OpenSearchIndex | LocalVectorIndex | DynamoVectorIndex):
        raise TypeError(f"{type(index).__name__} cannot be rebuilt")
    return index


# ConverseModel's retry policy: attempts, and how many read timeouts (sleeps included) a
# task may take in all, so a stuck model fails the batch to its retry path instead of
# running out the function's time.
MODEL_ATTEMPTS = 4
MODEL_DEADLINE_TIMEOUTS = 3


@lru_cache(maxsize=4)
def memory_model_for(settings: LLMSettings, region: str | None = None) -> MemoryModel:
    """local: extractive and heuristic, no network; bedrock: Converse with `llm_model` in
    `region` (None: the function's own region, as boto3 finds it)."""
    if settings.llm_provider == "local":
        from memkit.llm.local import LocalModel

        return LocalModel()
    import boto3
    from botocore.config import Config

    from memkit.llm.bedrock import DEFAULT_MODEL, ConverseModel

    # ConverseModel owns the retry policy (with backoff and a deadline): the SDK makes one
    # attempt a call, and a read waits at most llm_timeout_seconds.
    client = boto3.client(
        "bedrock-runtime",
        region_name=region,
        config=Config(
            retries={"total_max_attempts": 1, "mode": "standard"},
            connect_timeout=5,
            read_timeout=settings.llm_timeout_seconds,
        ),
    )
    return ConverseModel(
        client,
        settings.llm_model or DEFAULT_MODEL,
        max_attempts=MODEL_ATTEMPTS,
        deadline_seconds=MODEL_DEADLINE_TIMEOUTS * settings.llm_timeout_seconds,
    )


@lru_cache(maxsize=4)
def job_sender(queue_url: str, region: str, endpoint: str | None) -> JobSender:
    """Sends a job to the memory work queue (one SQS client per process and queue)."""
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError

    sqs = boto3.client("sqs", region_name=region, endpoint_url=endpoint)

    def send(job: Job) -> None:
        try:
            sqs.send_message(
                QueueUrl=queue_url, MessageBody=job.to_json(), DelaySeconds=job.delay_seconds
            )
        except (BotoCoreError, ClientError) as exc:
            raise StoreUnavailable("the work queue is unavailable; retry later") from exc

    return send


def configured_job_sender(settings: CurationSettings | ApiSettings) -> JobSender | None:
    """The work queue's sender, or None when no queue is configured."""
    if not settings.work_queue_url:
        return None
    return job_sender(settings.work_queue_url, settings.region, settings.sqs_endpoint)


def dynamo_store(settings: StoreSettings) -> DynamoStore:
    """The table. The API's store also stamps messages for indexing as configured."""
    from memkit.store.dynamodb import DynamoStore

    if isinstance(settings, ApiSettings):
        return DynamoStore(
            settings,
            index_messages=settings.index_messages,
            index_all_messages=settings.index_all_messages,
        )
    return DynamoStore(settings)


# -- the API ---------------------------------------------------------------------------------


def api_services(
    store: DynamoStore,
    settings: ApiSettings,
    index: Callable[[], VectorIndex] | None = None,
    embedder: Callable[[], Embedder] | None = None,
    send: JobSender | None = None,
    clock: Callable[[], float] = time.time,
) -> Services:
    """The routes' services over `store`; the index and embedder default to the configured
    ones, built on first use (a session route never loads a model), and the deletions'
    work queue to the configured one (`send`), their time to `clock`."""
    from memkit.app.services import Services
    from memkit.service.profiles import ProfileService
    from memkit.service.scratchpad import ScratchpadService
    from memkit.service.sessions import SessionService

    chosen_embedder = embedder or (lambda: embedder_for(settings, settings.region))
    chosen_index = index or configured_index(settings, settings.region, chosen_embedder)
    scratchpads = ScratchpadService(
        store.pads, store.profiles, max_attempts=settings.merge_max_attempts
    )
    return Services(
        settings=settings,
        profiles=ProfileService(store.profiles),
        scratchpads=scratchpads,
        # A session's DELETE takes its messages' vectors out of the index at once.
        sessions=SessionService(store.sessions, scratchpads, index=chosen_index),
        store=store,
        index=chosen_index,
        embedder=chosen_embedder,
        lifecycle=_api_lifecycle(store, settings, chosen_index, send, clock),
    )


def _api_lifecycle(
    store: DynamoStore,
    settings: ApiSettings,
    index: Callable[[], VectorIndex],
    send: JobSender | None,
    clock: Callable[[], float],
) -> Lifecycle:
    """Forgetting, compaction, policies and a user's deletion, each built on the first
    request that needs it (their modules load then, not at cold start, and so does the work
    queue's client, unless `send` is given), and the queue and clock a wing's work uses."""
    from memkit.app.services import Lifecycle

    def forgetting() -> Forgetting:
        from memkit.jobs.forget import Forgetting

        return Forgetting(store.records)

    def compaction(long_term: LongTermService) -> Compaction:
        from memkit.jobs.compact import Compaction

        def model() -> MemoryModel:
            return memory_model_for(checked(llm_settings), settings.region)

        return Compaction(store.records, long_term, model, scope_of=compaction_scope())

    def policies() -> PolicyService:
        from memkit.jobs.policies import PolicyService

        return PolicyService(store.policies)

    def deletion() -> UserDeletion:
        from memkit.jobs.users import UserDeletion

        queue = send or configured_job_sender(settings)
        return UserDeletion(store, index, queue, settings.api_key_cache_seconds, clock=clock)

    def queue() -> JobSender | None:
        return send or configured_job_sender(settings)

    return Lifecycle(forgetting, compaction, policies, deletion, queue, clock)


def api_wings() -> tuple[Wing, ...]:
    """The wings of the HTTP API (memkit.api.wings): AgentCore's routes."""
    from memkit.agentcore.wing import api_wing

    return (api_wing(),)


def compaction_scope() -> Callable[[Iterable[str]], Hashable]:
    """The scope compaction merges records within (a wing's records carry theirs)."""
    from memkit.agentcore.wing import compaction_scope as agentcore_scope

    return agentcore_scope


def production_identity() -> IdentitySettings:
    """How the API identifies callers, from the environment, without building its services."""
    return checked(api_settings).identity


@lru_cache(maxsize=1)
def production_services() -> Services:
    """Services over DynamoDB, from the environment (first request, not import)."""
    settings = checked(api_settings)
    return api_services(dynamo_store(settings), settings)


# -- API keys: the authorizer and `memkit keys` ----------------------------------------------


def api_keys_for(settings: ApiKeySettings) -> ApiKeyService:
    """API keys in the table of `settings` (a botocore client of its own: no PynamoDB)."""
    from memkit.service.api_keys import ApiKeyService
    from memkit.store.apikeys import api_key_table

    return ApiKeyService(
        api_key_table(settings), last_used_seconds=settings.api_key_last_used_seconds
    )


@lru_cache(maxsize=1)
def production_api_keys() -> ApiKeyService:
    """The authorizer's keys, from the environment (first request, not import)."""
    return api_keys_for(checked(api_key_settings))


# -- the stream indexer ----------------------------------------------------------------------


@lru_cache(maxsize=1)
def production_indexer() -> Indexer:
    """The indexer over DynamoDB, the configured embedder and index (first batch, not import)."""
    from memkit.jobs.indexing import Indexer

    settings = checked(indexer_settings)
    embedder = embedder_for(settings, settings.region)
    index = vector_index_for(settings, settings.region, embedder.dimensions)
    store = dynamo_store(settings)
    return Indexer(store.records, store.sessions, index, embedder)


# -- curation: the stream curator and the memory worker -------------------------------------


def curation_policy(settings: CurationSettings) -> Policy:
    from memkit.agentcore.wing import names_a_memory
    from memkit.jobs.curation import Policy

    return Policy(
        window_tokens=settings.summary_window_tokens,
        threshold=settings.summary_threshold,
        quiet_seconds=settings.extraction_quiet_seconds,
        # The local model cannot extract facts: queue no extraction it would skip. Its
        # topics are frequent words, not worth re-indexing every new record for.
        extract=settings.llm_provider != "local",
        describe=settings.llm_provider != "local",
        # An AgentCore memory's sessions are extracted by its strategies, whose summaries
        # any model can write.
        extracted_anyway=names_a_memory,
    )


@lru_cache(maxsize=1)
def production_queueing() -> Queueing:
    from memkit.jobs.curation import Queueing

    settings = checked(curation_settings)
    send = configured_job_sender(settings)
    if send is None:
        raise Misconfigured("MEMKIT_WORK_QUEUE_URL is not set")
    store = dynamo_store(settings)
    return Queueing(store.curation, store.sessions, send, curation_policy(settings))


@lru_cache(maxsize=1)
def production_curator() -> Curator:
    from memkit.agentcore.wing import strategy
    from memkit.jobs.curation import Curator
    from memkit.service.long_term import LongTermService

    settings = checked(curation_settings)
    store = dynamo_store(settings)
    embedder = embedder_for(settings, settings.region)
    index = configured_index(settings, settings.region, lambda: embedder)
    long_term = LongTermService(store.records, store.sessions, index, lambda: embedder)
    model = memory_model_for(settings, settings.region)
    policy = curation_policy(settings)
    strategies = [strategy(store, long_term, model)]
    return Curator(store.curation, store.sessions, long_term, model, policy, strategies=strategies)


@lru_cache(maxsize=1)
def production_deletions() -> UserDeletion:
    from memkit.jobs.users import UserDeletion

    settings = checked(curation_settings)
    index = configured_index(settings, settings.region)
    send = configured_job_sender(settings)
    return UserDeletion(dynamo_store(settings), index, send, settings.api_key_cache_seconds)


@lru_cache(maxsize=1)
def production_memory_deletions() -> BackgroundDeletion:
    """An AgentCore memory's deletion, resumed by the worker (DeleteMemory started it)."""
    from memkit.agentcore.wing import deletion

    settings = checked(curation_settings)
    index = configured_index(settings, settings.region)
    return deletion(dynamo_store(settings), index, configured_job_sender(settings))


def production_wing_jobs() -> dict[str, Callable[[], BackgroundDeletion]]:
    """The worker's jobs of wings, by kind: an AgentCore memory's deletion."""
    from memkit.agentcore.wing import DELETE_MEMORY

    return {DELETE_MEMORY: production_memory_deletions}


# -- the scheduled cleanup -------------------------------------------------------------------


def cleanup_phases(
    settings: CleanupSettings, store: DynamoStore, clock: Callable[[], float] = time.time
) -> list[Phase]:
    """The phases of a scheduled run, in order. Each lifecycle concern adds its phase here;
    the embedder, index and model are built on first use (a run with no compaction policy
    and no orphan sweep builds none)."""
    from memkit.jobs.compact import Compaction
    from memkit.jobs.expiry import ExpiryPhase
    from memkit.jobs.forget import Forgetting
    from memkit.jobs.policies import PolicyPhase
    from memkit.service.long_term import LongTermService

    def embedder() -> Embedder:
        return embedder_for(settings, settings.region)

    index = configured_index(settings, settings.region, embedder)

    def model() -> MemoryModel:
        return memory_model_for(settings, settings.region)

    long_term = LongTermService(store.records, store.sessions, index, embedder, clock)
    records = store.records
    phases: list[Phase] = [
        ExpiryPhase(store.expiry, page_size=settings.expiry_page_size, clock=clock),
        # Namespaces' forgetting and compaction policies.
        PolicyPhase(
            store.policies,
            Forgetting(records, clock),
            Compaction(records, long_term, model, clock),
        ),
    ]
    if settings.orphan_sample_size > 0:  # vectors whose item is gone
        from memkit.jobs.orphans import OrphanPhase

        phases.append(
            OrphanPhase(
                store.reindex,
                index(),
                settings.orphan_sample_size,
                interval_seconds=settings.orphan_sweep_interval_seconds,
                clock=clock,
            )
        )
    return phases


@lru_cache(maxsize=1)
def production_cleanup() -> CleanupRun:
    """The run over DynamoDB with the configured phases (first invocation, not import)."""
    from memkit.jobs.cleanup import CleanupRun, TableCursors, TimeBudget

    settings = checked(cleanup_settings)
    store = dynamo_store(settings)
    budget = TimeBudget(
        settings.cleanup_margin_seconds,
        settings.cleanup_margin_fraction,
        settings.cleanup_budget_seconds,
    )
    return CleanupRun(cleanup_phases(settings, store), TableCursors(store.expiry), budget)


# -- the index rebuild -----------------------------------------------------------------------


def reindexer(
    settings: ReindexSettings, segments: int | None = None, page_size: int | None = None
) -> Reindexer:
    """The rebuild `settings` describe (`memkit reindex`, functions/reindex)."""
    from memkit.jobs.reindex import Reindexer

    embedder = embedder_for(settings, settings.region)
    index = rebuildable(vector_index_for(settings, settings.region, embedder.dimensions))
    return Reindexer(
        dynamo_store(settings),
        index,
        embedder,
        segments=segments or settings.reindex_segments,
        page_size=page_size or settings.reindex_page_size,
    )


def reindex_settings() -> ReindexSettings:
    return checked(ReindexSettings.from_env)
