"""Long-term memory: the indexer's throughput and requests, and search latency.

1. Indexer throughput: long-term records written through the real API handler on moto,
   their real stream records handed to the real indexer handler in batches of 100
   (local embedder, local index). Records per second for the whole handler (it also
   writes each record's index state back to DynamoDB, here moto) and for the embedding
   alone.
2. Requests per batch to the embedder: Cohere Embed v3 (96 texts a call) and Titan V2
   (one a call) for batches of 100 and 250 texts, counted on a real botocore client
   whose HTTP sends are answered in process with Bedrock's response shapes.
3. Search latency on the local index at 100,000 vectors (256 dimensions), semantic with
   and without a user filter (medians).
"""

from __future__ import annotations

import io
import json
import math
import random
import time
from typing import TYPE_CHECKING, Any

from bench import environment
from bench.dynamodb_requests import TABLE
from bench.figures import median, report

if TYPE_CHECKING:
    from memkit.embeddings.protocol import Embedder
    from memkit.store.dynamodb import DynamoStore
    from memkit.vectors.protocol import VectorIndex

RECORDS = 2_000
BATCH = 100
INDEX_SIZE = 100_000
WORDS = [
    "tea",
    "coffee",
    "oslo",
    "lisbon",
    "meeting",
    "budget",
    "report",
    "garden",
    "cat",
    "dog",
    "flight",
    "hotel",
    "train",
    "dinner",
    "birthday",
    "doctor",
    "dentist",
    "gym",
    "running",
    "piano",
    "guitar",
    "python",
    "rust",
    "invoice",
    "contract",
    "lawyer",
    "bank",
    "loan",
    "mortgage",
    "school",
    "exam",
    "holiday",
    "beach",
    "mountain",
    "ski",
    "museum",
    "concert",
    "recipe",
    "pasta",
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 18)))


def table_with_records(
    index: VectorIndex, embedder: Embedder, rng: random.Random, count: int
) -> DynamoStore:
    """The table from template.yaml (call it inside dynamodb_engine() or mock_aws) holding
    `count` long-term records r0, r1, ... (random texts, 20 users), written through the real API
    handler over `index` and `embedder`, 100 a request; the store over that table."""
    import boto3

    from bench.dynamodb_requests import ROOT
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore
    from memkit_dev.local.template import create_table, load_template
    from tests.events import http_event

    create_table(
        boto3.client("dynamodb", region_name="us-east-1"),
        load_template(ROOT / "template.yaml"),
        TABLE,
    )
    settings = ApiSettings(table_name=TABLE, region="us-east-1")
    store = DynamoStore(settings)
    services = api_services(store, settings, index=lambda: index, embedder=lambda: embedder)
    api = make_lambda_handler(lambda: services)
    for start in range(0, count, 100):
        memories = [
            {"id": f"r{i}", "text": _text(rng), "user_id": f"u{i % 20}"}
            for i in range(start, start + 100)
        ]
        body = {"memories": memories, "deduplicate": False}
        response = api(
            http_event("POST", "/v1/long-term-memory/", body=body), environment.LambdaContext()
        )
        assert response["statusCode"] == 200, response
    return store


def indexer_throughput() -> None:
    from moto import mock_aws

    from memkit.embeddings.local import LocalEmbedder
    from memkit.handlers.indexer import make_lambda_handler as make_indexer
    from memkit.jobs.indexing import Indexer
    from memkit.vectors.local import LocalVectorIndex
    from memkit_dev.local.dynamodb import serialize_in_process_moto
    from tests.integration.memory_world import StreamReader

    rng = random.Random(7)
    serialize_in_process_moto()  # moto is not thread-safe; memkit writes from pools
    with mock_aws():
        embedder = LocalEmbedder()
        index = LocalVectorIndex(embedder.dimensions)
        store = table_with_records(index, embedder, rng, RECORDS)
        records = StreamReader(TABLE).read()
        indexer = make_indexer(lambda: Indexer(store.records, store.sessions, index, embedder))
        embedder.embed(["warm up"], "document")
        batches = [records[i : i + BATCH] for i in range(0, len(records), BATCH)]
        handler_times, embed_times = [], []
        for batch in batches:
            texts = [r["dynamodb"]["NewImage"]["text"]["S"] for r in batch]
            started = time.perf_counter()
            embedder.embed(texts, "document")
            embed_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            response = indexer({"Records": batch}, environment.LambdaContext())
            handler_times.append(time.perf_counter() - started)
            assert response == {"batchItemFailures": []}, response
        assert len(index) == RECORDS
    report(
        "indexer: records/s through the handler, batches of 100, local embedder and index "
        f"(median of {len(batches)} batches; index states written to moto)",
        BATCH / median(handler_times),
        "records/s",
    )
    report(
        "indexer: records/s of the local embedder alone (same batches)",
        BATCH / median(embed_times),
        "records/s",
    )
    # Session messages write nothing back to the table: the handler's own speed.
    message_times = []
    for start in range(0, RECORDS, BATCH):
        batch = [_message_record(i, _text(rng)) for i in range(start, start + BATCH)]
        started = time.perf_counter()
        response = indexer({"Records": batch}, environment.LambdaContext())
        message_times.append(time.perf_counter() - started)
        assert response == {"batchItemFailures": []}, response
    report(
        "indexer: records/s through the handler for session messages (nothing written back), "
        f"batches of 100 (median of {len(message_times)})",
        BATCH / median(message_times),
        "records/s",
    )


class _LoopbackBedrock:
    """Answers InvokeModel in process, with Bedrock's response shapes, counting calls."""

    def __init__(self, dimensions: int) -> None:
        self.calls = 0
        self.dimensions = dimensions

    def __call__(self, request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse

        self.calls += 1
        body = json.loads(request.body)
        vector = [1.0 / math.sqrt(self.dimensions)] * self.dimensions
        if "texts" in body:  # Cohere
            payload = {
                "id": "bench",
                "texts": body["texts"],
                "embeddings": {"float": [vector for _ in body["texts"]]},
                "response_type": "embeddings_by_type",
            }
        else:  # Titan
            payload = {"embedding": vector, "inputTextTokenCount": 4}
        raw = json.dumps(payload).encode()

        class _Raw(io.BytesIO):
            def stream(self, **_: Any) -> Any:
                yield self.read()

        return AWSResponse(request.url, 200, {"content-type": "application/json"}, _Raw(raw))


def embedder_requests() -> None:
    import boto3

    from memkit.embeddings.bedrock import CohereEmbedder, TitanEmbedder

    for name, dimensions in (("cohere", 1024), ("titan", 256)):
        for size in (100, 250):
            client = boto3.client("bedrock-runtime", region_name="us-east-1")
            bedrock = _LoopbackBedrock(dimensions)
            client.meta.events.register("before-send.bedrock-runtime.InvokeModel", bedrock)
            embedder: Any = (
                CohereEmbedder(client) if name == "cohere" else TitanEmbedder(client, dimensions)
            )
            vectors = embedder.embed([f"text {i}" for i in range(size)], "document")
            assert len(vectors) == size
            expected = math.ceil(size / 96) if name == "cohere" else size
            report(
                f"embedder requests for a batch of {size}: {name}",
                bedrock.calls,
                "InvokeModel calls",
                f"{'ceil(n/96)' if name == 'cohere' else 'n, run 8 at a time'} = {expected}",
            )


def opensearch_requests() -> None:
    from opensearchpy import OpenSearch

    from memkit.embeddings.local import LocalEmbedder
    from memkit.jobs.indexing import Indexer
    from memkit.vectors.opensearch import OpenSearchIndex
    from memkit_dev.local.opensearch import LoopbackOpenSearch

    class NoStore:
        """The records and sessions tables, doing nothing: records are marked indexed in the
        table, and this count is OpenSearch's alone."""

        def mark_indexed(self, *_: Any) -> None: ...

        def turns_before(self, *_: Any) -> dict[Any, str]:
            return {}  # the OpenSearch requests are what is counted here

    rng = random.Random(3)
    embedder = LocalEmbedder()
    for flavour in ("domain", "serverless"):
        with LoopbackOpenSearch(embedder.dimensions, flavour=flavour) as server:
            client = OpenSearch(hosts=[server.url])
            index = OpenSearchIndex(client, "bench", embedder.dimensions, flavour)
            index.ensure_index()
            indexer = Indexer(NoStore(), NoStore(), index, embedder)
            batch = [_message_record(i, _text(rng)) for i in range(BATCH)]
            before = len(server.requests)
            outcome = indexer.index_batch(batch)
            assert not outcome.failures, outcome.failures
            sent = server.requests[before:]
            report(
                f"OpenSearch requests for a batch of {BATCH} new messages: {flavour}",
                len(sent),
                "requests (" + ", ".join(f"{m} {p}" for m, p in sent) + ")",
                "one _bulk"
                + (" after one lookup of the batch's ids" if flavour == "serverless" else ""),
            )


def _message_record(i: int, text: str) -> dict[str, Any]:
    """A stream INSERT of a stamped session message, as Lambda delivers it."""
    now = time.time()
    return {
        "eventID": f"e{i}",
        "eventName": "INSERT",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "dynamodb": {
            "ApproximateCreationDateTime": float(int(now)),
            "Keys": {"PK": {"S": "T#default#S#default#chat"}, "SK": {"S": f"MSG#m{i}"}},
            "NewImage": {
                "PK": {"S": "T#default#S#default#chat"},
                "SK": {"S": f"MSG#m{i}"},
                "kind": {"S": "message"},
                "tenant": {"S": "default"},
                "namespace": {"S": "default"},
                "session_id": {"S": "chat"},
                "message_id": {"S": f"m{i}"},
                "role": {"S": "user"},
                "content": {"S": text},
                "message_at": {"S": "2026-11-23T10:00:00.000000Z"},
                "idx": {"S": "1"},
                "written_us": {"N": str(int(now * 1_000_000) + i)},
            },
            "SequenceNumber": f"{1000 + i}",
            "SizeBytes": 200,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
        "eventSourceARN": "arn:aws:dynamodb:us-east-1:123456789012:table/bench/stream/x",
    }


def post_to_searchable() -> None:
    import httpx

    from bench.dynamodb_requests import local_stack

    times = []
    with (
        local_stack("indexing", concurrency=2) as stack,
        httpx.Client(base_url=stack.url, timeout=30) as http,
    ):
        for i in range(15):
            rid = f"fresh-{i}"
            body = {"memories": [{"id": rid, "text": f"the locker code is {1000 + i} today"}]}
            started = time.perf_counter()
            assert http.post("/v1/long-term-memory/", json=body).status_code == 200
            while True:
                found = http.post(
                    "/v1/long-term-memory/search",
                    json={"text": f"locker code {1000 + i}", "search_mode": "keyword", "limit": 1},
                ).json()
                if [m["id"] for m in found["memories"]] == [rid]:
                    break
                time.sleep(0.02)
            times.append(time.perf_counter() - started)
            time.sleep(random.uniform(0, 0.3))  # writes land anywhere in the batching window
    report(
        "time from POST to searchable on the local stack (median of 15; the event source "
        "mapping's 1 s batching window included)",
        median(times),
        "s",
    )


def search_latency() -> None:
    import numpy as np

    from memkit.vectors.filters import Condition
    from memkit.vectors.hybrid import hybrid_search
    from memkit.vectors.local import LocalVectorIndex
    from memkit.vectors.protocol import VectorDoc

    rng = np.random.default_rng(11)
    words = random.Random(11)
    dimensions = 256
    index = LocalVectorIndex(dimensions)
    vectors = rng.standard_normal((INDEX_SIZE, dimensions)).astype(np.float32)
    for start in range(0, INDEX_SIZE, 10_000):
        index.upsert(
            [
                VectorDoc(
                    f"d{i}",
                    "t",
                    vectors[i],
                    1,
                    _text(words),
                    {"user_id": f"u{i % 1000}", "namespace": "default", "created_at": float(i)},
                )
                for i in range(start, start + 10_000)
            ]
        )
    queries = rng.standard_normal((50, dimensions)).astype(np.float32)
    texts = [_text(words) for _ in queries]
    one_user = [Condition("user_id", "eq", "u7")]
    searches: list[tuple[str, Any]] = [
        ("semantic, no filter", lambda v, _: index.search("t", v, 10)),
        ("semantic, one user of 1,000", lambda v, _: index.search("t", v, 10, one_user)),
        (
            "hybrid (the default), one user of 1,000",
            lambda v, t: hybrid_search(index, "t", t, v, 10, one_user),
        ),
        (
            "hybrid, no filter (every doc shares query words)",
            lambda v, t: hybrid_search(index, "t", t, v, 10),
        ),
    ]
    for label, search in searches:
        times = []
        for query, text in zip(queries, texts, strict=True):
            started = time.perf_counter()
            hits = search(query, text)
            times.append(time.perf_counter() - started)
            assert len(hits) == 10
        report(
            f"search latency, local index of {INDEX_SIZE:,} vectors, top 10, {label} "
            "(median of 50)",
            median(times) * 1000,
            "ms",
        )


def main() -> None:
    environment.apply()
    indexer_throughput()
    embedder_requests()
    opensearch_requests()
    search_latency()
    post_to_searchable()


if __name__ == "__main__":
    main()
