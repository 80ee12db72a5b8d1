"""Long-term memory on moto, in one process: the real API handler, the real indexer handler,
one local index both share, and the table's stream read as Lambda's poller reads it.

`settle()` reads every stream record written since the last read, keeps those the
template's FilterCriteria pass (as the event source mapping does) and hands them to the
indexer handler in batches of the mapping's size.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3

from memkit.embeddings.local import LocalEmbedder
from memkit.embeddings.protocol import Purpose
from memkit.handlers.wiring import api_services
from memkit.vectors.local import LocalVectorIndex
from memkit_dev.local.event_filter import passes
from memkit_dev.local.streams import lambda_record
from memkit_dev.local.template import load_template
from tests.conftest import ApiResponse, LambdaContextStub, call_api

if TYPE_CHECKING:
    from memkit.config import ApiSettings
    from memkit.store.dynamodb import DynamoStore

ROOT = Path(__file__).resolve().parents[2]
INDEXER = "IndexerFunction"


def stream_mapping() -> dict[str, Any]:
    """The indexer's DynamoDB event source properties, as template.yaml declares them."""
    template = load_template(ROOT / "template.yaml")
    events = template["Resources"][INDEXER]["Properties"]["Events"]
    properties = next(e["Properties"] for e in events.values() if e["Type"] == "DynamoDB")
    return dict(properties)


class CountingEmbedder:
    """The local embedder, counting what it was asked to embed."""

    def __init__(self) -> None:
        self._inner = LocalEmbedder()
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self._inner.model_id

    @property
    def dimensions(self) -> int:
        return self._inner.dimensions

    def embed(self, texts: Sequence[str], purpose: Purpose = "document") -> list[list[float]]:
        if purpose == "document":
            self.texts += len(texts)
        return self._inner.embed(texts, purpose)


class StreamReader:
    """Every shard of the table's stream, read from where the last read stopped, in the
    shape Lambda delivers (memkit_dev.local.streams.lambda_record). In process, on mock_aws;
    the local stack's StreamPump does the same over loopback, in a thread."""

    def __init__(self, table: str, region: str = "us-east-1") -> None:
        self._region = region
        self._streams = boto3.client("dynamodbstreams", region_name=region)
        description = boto3.client("dynamodb", region_name=region).describe_table(TableName=table)
        self.arn = description["Table"]["LatestStreamArn"]
        self._iterators: dict[str, str | None] = {}
        self._last: dict[str, int] = {}

    def read(self) -> list[dict[str, Any]]:
        shards = self._streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"]
        records: list[dict[str, Any]] = []
        for shard in shards:
            shard_id = shard["ShardId"]
            if shard_id not in self._iterators:
                self._iterators[shard_id] = self._streams.get_shard_iterator(
                    StreamArn=self.arn, ShardId=shard_id, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
            while self._iterators[shard_id]:
                page = self._streams.get_records(ShardIterator=self._iterators[shard_id])
                self._iterators[shard_id] = page.get("NextShardIterator")
                last = self._last.get(shard_id, -1)
                # Sequence numbers grow within a shard: a page with none past the last one
                # read is the end, not more records (never read the same record twice).
                fresh = [r for r in page["Records"] if int(r["dynamodb"]["SequenceNumber"]) > last]
                if not fresh:
                    break
                self._last[shard_id] = int(fresh[-1]["dynamodb"]["SequenceNumber"])
                records.extend(lambda_record(r, self.arn, self._region) for r in fresh)
        return records


@dataclass
class MemoryWorld:
    api_handler: Any
    indexer_handler: Any
    vector_index: LocalVectorIndex
    embedder: CountingEmbedder
    reader: StreamReader
    mapping: dict[str, Any]
    store: Any = None  # the DynamoStore both handlers use (for races a test stages)
    services: Any = None  # the API's services (the MCP handler runs over the same)
    last_batch: list[dict[str, Any]] = field(default_factory=list)
    # Waits until an eventually consistent index holds what was written to it (the DynamoDB
    # vector table's stand-in); None: the index is consistent at once.
    replicated: Callable[[], None] | None = None

    def api(self, method: str, path: str, **kwargs: Any) -> ApiResponse:
        return call_api(self.api_handler, method, path, **kwargs)

    def read_stream(self) -> list[dict[str, Any]]:
        """New stream records that the event source mapping's filters let through."""
        filters = [f["Pattern"] for f in self.mapping["FilterCriteria"]["Filters"]]
        return [r for r in self.reader.read() if passes(filters, r)]

    def index(self, records: list[dict[str, Any]], handler: Any = None) -> dict[str, Any]:
        """One invocation of the indexer handler (or `handler`) with `records`."""
        response = (handler or self.indexer_handler)({"Records": records}, LambdaContextStub())
        if self.replicated is not None:
            self.replicated()
        return dict(response)

    def settle(self) -> list[dict[str, Any]]:
        """Deliver everything written so far, a batch at a time; the responses."""
        self.last_batch = self.read_stream()
        size = 100
        return [
            self.index(self.last_batch[start : start + size])
            for start in range(0, len(self.last_batch), size)
        ]

    def indexer_over(self, records: Any) -> Any:
        """The indexer handler over the records table `records` in place of the world's (its
        sessions, index and embedder)."""
        from memkit.handlers.indexer import make_lambda_handler
        from memkit.jobs.indexing import Indexer

        indexer = Indexer(records, self.store.sessions, self.vector_index, self.embedder)
        return make_lambda_handler(lambda: indexer)

    def indexed(self, tenant: str = "default", k: int = 10_000) -> list[Any]:
        """The tenant's docs in the index (a listing), once the index caught up."""
        if self.replicated is not None:
            self.replicated()
        return list(self.vector_index.browse(tenant, k, 0))

    def index_ids(self) -> set[str]:
        """The ids (record ids and message ids) of every doc the index holds."""
        return {hit.fields["record_id"] for hit in self.indexed()}

    @property
    def embedded_texts(self) -> int:
        return self.embedder.texts


class LateWrites:
    """The records table whose first `put_records` waits for `meanwhile()`: what happens
    between a job's last look at the table and its write of the records it made of it."""

    def __init__(self, store: Any, meanwhile: Callable[[], Any]) -> None:
        self._store = store
        self._meanwhile: Callable[[], Any] | None = meanwhile

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def put_records(self, tenant: str, records: Sequence[Any]) -> None:
        if self._meanwhile is not None:
            self._meanwhile, meanwhile = None, self._meanwhile
            meanwhile()
        self._store.put_records(tenant, records)


def build_world(
    table: str,
    settings: ApiSettings | None = None,
    *,
    store: DynamoStore | None = None,
    index: Any = None,
    embedder: CountingEmbedder | None = None,
    replicated: Callable[[], None] | None = None,
) -> MemoryWorld:
    """The API handler and the indexer handler over `table`, sharing one store, one index and
    one embedder. Defaults: the API's settings for the table, a store that indexes session
    messages, the counting local embedder and a local exact index of its dimensions."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler as make_api_handler
    from memkit.handlers.indexer import make_lambda_handler as make_indexer_handler
    from memkit.jobs.indexing import Indexer
    from memkit.store.dynamodb import DynamoStore

    api_settings = (
        ApiSettings(table_name=table, region="us-east-1") if settings is None else settings
    )
    dynamo = DynamoStore(api_settings, index_messages=True) if store is None else store
    counting = CountingEmbedder() if embedder is None else embedder
    vectors = LocalVectorIndex(counting.dimensions) if index is None else index
    services = api_services(dynamo, api_settings, index=lambda: vectors, embedder=lambda: counting)
    indexer = Indexer(dynamo.records, dynamo.sessions, vectors, counting)
    return MemoryWorld(
        api_handler=make_api_handler(lambda: services),
        indexer_handler=make_indexer_handler(lambda: indexer),
        vector_index=vectors,
        embedder=counting,
        reader=StreamReader(table),
        mapping=stream_mapping(),
        store=dynamo,
        services=services,
        replicated=replicated,
    )


BACKENDS = ("local", "dynamodb")


@contextmanager
def backend_world(backend: str, table: str, **options: Any) -> Iterator[MemoryWorld]:
    """build_world over `table` with the vector backend named: the local exact index, or
    the DynamoDB vector table behind its local stand-in (VectorStore dynamodb)."""
    if backend == "local":
        yield build_world(table, **options)
        return
    from tests.vector_tables import dynamodb_vectors

    with dynamodb_vectors(LocalEmbedder().dimensions) as vectors:
        yield build_world(table, index=vectors.index(), replicated=vectors.settle, **options)
        assert vectors.standin.rejected == []
