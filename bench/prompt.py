"""Prompt hydration on the local stack: how long POST /v1/memory/prompt takes, and how many
tokens the prompt it returns holds against the raw history it stands for.

The stack is `make serve`'s (memkit_dev.local.stack): DynamoDB Local (moto where Java is
missing, or with MEMKIT_BENCH_ENGINE=moto), the loopback OpenSearch, the API function in two
execution environments. It is seeded through
the API, as a client would:

- one session of 1,000 messages (user "ada"; 100 to 500 characters each), by ten appends
  of 100, with a 100-word summary (`context`) and a small scratchpad;
- 10,000 long-term memories of that user (a sentence each), POST /v1/long-term-memory/
  100 a request (deduplicate off: the texts are distinct by construction).

The index is filled by the real indexer handler, in this process, with the table's real
stream records read from the stack's DynamoDB (filtered by the template's FilterCriteria and
in batches of its BatchSize, as the event source mapping delivers them), into the stack's
loopback OpenSearch. The stack's own stream consumers are stopped first, so the background
curator does not summarise the session and extract from it while the prompts are timed.

1. Latency: 20 prompts (after 2 to warm up), each a different question, as
   agent-memory-client's memory_prompt sends them (session, user, model gpt-4o, the default
   long-term search and memkit's default options), timed at the HTTP client: median and 90th
   percentile. For scale (5 each): the prompt without recall, and a GET of the same
   session's 40 newest messages. The DynamoDB requests of one prompt are counted on the real
   API handler run in this process against the same stack.
2. Tokens (memkit's estimate, memkit.tokens): the hydrated prompt's `total_tokens` (median
   over the 20) against the raw history it replaces: the whole session ("role: content" per
   message, as windows count) plus the user's memories as the prompt lists them ("- text (ID:
   id)"), that is what an agent without retrieval would have to send. The saving is their
   ratio; the ratio against the session alone is shown too.

Latency on the local stack is mostly the stack's: moto walks the whole table for each Query
and its server answers one request at a time. The loopback OpenSearch answers the three
searches of a prompt (recall, the user's records, the user's other messages) from postings
and one matrix product over the rows a filter allows, and BM25 with numpy. Most of a
prompt's DynamoDB requests are the recalled messages' neighbours (two Queries each); on AWS
they run eight at a time. What a run measured, and how long it takes, is in
docs/benchmarks.md.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import environment
from bench.figures import median, percentile, report

MESSAGES = 1_000
MEMORIES = 10_000
BATCH = 100
RUNS, WARM_UP = 20, 2
SCALE_RUNS = 5  # the GET and the prompt without recall, for scale
SESSION = "long"
USER = "ada"
TOPICS = [
    "tea", "coffee", "oslo", "lisbon", "budget", "garden", "piano", "football", "invoice",
    "dentist", "birthday", "flight", "hotel", "museum", "recipe", "mortgage", "school",
    "running", "concert", "contract", "laptop", "bicycle", "holiday", "doctor",
]  # fmt: skip
VERBS = ["talked about", "booked", "cancelled", "asked about", "planned", "paid for", "liked"]
PLACES = ["on Monday", "last week", "in May", "after work", "with Bob", "at the office"]


def _sentence(rng: random.Random) -> str:
    return (
        f"Ada {rng.choice(VERBS)} the {rng.choice(TOPICS)} {rng.choice(PLACES)} "
        f"and the {rng.choice(TOPICS)} {rng.choice(PLACES)}"
    )


def session_messages() -> list[dict[str, Any]]:
    """The session's messages, oldest first, a second apart (100 to 500 characters each)."""
    rng = random.Random("prompt/session")
    start = datetime.now(UTC) - timedelta(days=2)
    made = []
    for n in range(MESSAGES):
        text = ""
        while len(text) < rng.randint(100, 500):
            text += _sentence(rng) + ". "
        made.append(
            {
                "id": f"msg-{n:05d}",
                "role": "user" if n % 2 == 0 else "assistant",
                "content": text.strip(),
                "created_at": (start + timedelta(seconds=n)).isoformat(),
            }
        )
    return made


def memories() -> list[dict[str, Any]]:
    rng = random.Random("prompt/memories")
    return [
        {
            "id": f"mem-{n:05d}",
            "text": f"{_sentence(rng)} (note {n})",
            "user_id": USER,
            "topics": [rng.choice(TOPICS)],
        }
        for n in range(MEMORIES)
    ]


def questions() -> list[str]:
    rng = random.Random("prompt/questions")
    return [
        f"What did I say about the {rng.choice(TOPICS)} {rng.choice(PLACES)}?"
        for _ in range(RUNS + WARM_UP)
    ]


def index_stream(stack: Any, config: Any) -> int:
    """Deliver the table's stream, from its start, to the real indexer handler (over the
    stack's DynamoDB and loopback OpenSearch) as the event source mapping would; the number
    of records delivered."""
    import boto3

    from memkit.config import IndexerSettings
    from memkit.embeddings.local import LocalEmbedder
    from memkit.handlers.indexer import make_lambda_handler
    from memkit.handlers.wiring import vector_index_for
    from memkit.jobs.indexing import Indexer
    from memkit.observability import metrics
    from memkit.store.dynamodb import DynamoStore
    from memkit_dev.local.event_filter import passes
    from memkit_dev.local.streams import EventSourceMapping, lambda_record
    from memkit_dev.local.template import load_template

    template = load_template(config.template)
    mapping = EventSourceMapping.from_template(template, "IndexerFunction")
    settings = IndexerSettings(
        table_name=config.table_name,
        region=config.region,
        dynamodb_endpoint=stack.dynamodb_endpoint,
        opensearch_endpoint=stack.opensearch.url,
        opensearch_auth="none",
    )
    embedder = LocalEmbedder()
    store = DynamoStore(settings)
    indexer = Indexer(
        store.records,
        store.sessions,
        vector_index_for(settings, config.region, embedder.dimensions),
        embedder,
    )
    handler = make_lambda_handler(lambda: indexer)
    region, endpoint = config.region, stack.dynamodb_endpoint
    tables = boto3.client("dynamodb", endpoint_url=endpoint, region_name=region)
    streams = boto3.client("dynamodbstreams", endpoint_url=endpoint, region_name=region)
    arn = tables.describe_table(TableName=config.table_name)["Table"]["LatestStreamArn"]
    wanted: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        while iterator:
            page = streams.get_records(ShardIterator=iterator, Limit=1000)
            records = [lambda_record(raw, arn, region) for raw in page["Records"]]
            wanted.extend(r for r in records if passes(mapping.filters, r))
            iterator = page.get("NextShardIterator") if page["Records"] else None
    context = environment.LambdaContext()
    for start in range(0, len(wanted), mapping.batch_size):
        response = handler({"Records": wanted[start : start + mapping.batch_size]}, context)
        assert not response.get("batchItemFailures"), response
        # Metrics are off, so never flushed: Powertools would print them at 100 values.
        metrics.clear_metrics()
    return len(wanted)


def dynamodb_requests(counter: Any, stack: Any, config: Any, question: str) -> Any:
    """The DynamoDB requests of one prompt, by operation: the real API handler run in this
    process over the stack's DynamoDB and loopback OpenSearch, its calls counted."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore
    from tests.events import http_event

    settings = ApiSettings(
        table_name=config.table_name,
        region=config.region,
        dynamodb_endpoint=stack.dynamodb_endpoint,
        opensearch_endpoint=stack.opensearch.url,
        opensearch_auth="none",
    )
    services = api_services(DynamoStore(settings), settings)
    handler = make_lambda_handler(lambda: services)
    body = {"query": question, "session": {"session_id": SESSION, "user_id": USER}}
    event = http_event("POST", "/v1/memory/prompt", body=body)
    handler(event, environment.LambdaContext())  # builds the clients and the index adapter
    return counter.during(lambda: handler(event, environment.LambdaContext()))


def main() -> None:
    environment.apply()
    import httpx

    from bench.dynamodb_requests import RequestCounter

    counter = RequestCounter().install()  # before any botocore session exists
    from bench.dynamodb_requests import local_stack
    from memkit.service.windows import message_tokens
    from memkit.tokens import estimate_tokens

    history, records = session_messages(), memories()
    with (
        local_stack("prompt", concurrency=2) as stack,
        httpx.Client(base_url=stack.url, timeout=120) as http,
    ):
        for pump in (stack.pump, getattr(stack, "curator_pump", None)):
            if pump is not None:
                pump.stop()
        started = time.perf_counter()
        for start in range(0, MESSAGES, BATCH):
            body = {"messages": history[start : start + BATCH], "user_id": USER}
            response = http.post(f"/v1/working-memory/{SESSION}/messages", json=body)
            assert response.status_code == 201, response.text
        summary = " ".join(_sentence(random.Random(i)) for i in range(8))
        http.patch(f"/v1/working-memory/{SESSION}", json={"context": summary}).raise_for_status()
        pad = {"content": "- name: Ada\n- home: Lisbon\n- prefers short answers"}
        http.put(f"/v1/working-memory/{SESSION}/scratchpad", json=pad).raise_for_status()
        for start in range(0, MEMORIES, BATCH):
            body = {"memories": records[start : start + BATCH], "deduplicate": False}
            response = http.post("/v1/long-term-memory/", json=body)
            assert response.status_code == 200, response.text
        written = time.perf_counter() - started
        indexed = index_stream(stack, stack.config)
        last = http.get(f"/v1/long-term-memory/{records[-1]['id']}").json()
        assert last["indexing"] == "indexed", last
        report(
            "prompt.seeding_s",
            time.perf_counter() - started,
            "s",
            f"{MESSAGES} messages and {MEMORIES} memories written in {written:.0f} s, then "
            f"{indexed} stream records indexed",
        )

        # 1. Latency, as agent-memory-client's memory_prompt calls it.
        def hydrate(question: str) -> dict[str, Any]:
            body = {
                "query": question,
                "session": {"session_id": SESSION, "user_id": USER, "model_name": "gpt-4o"},
            }
            response = http.post("/v1/memory/prompt", params={"optimize_query": "false"}, json=body)
            assert response.status_code == 200, response.text
            return dict(response.json())

        latencies, prompts = [], []
        for run, question in enumerate(questions()):
            began = time.perf_counter()
            prompt = hydrate(question)
            elapsed = (time.perf_counter() - began) * 1000
            if run >= WARM_UP:
                latencies.append(elapsed)
                prompts.append(prompt)

        def timed(call: Any) -> float:
            samples = []
            for _ in range(SCALE_RUNS):
                began = time.perf_counter()
                response = call()
                assert response.status_code == 200, response.text
                samples.append((time.perf_counter() - began) * 1000)
            return median(samples)

        without_recall = timed(
            lambda: http.post(
                "/v1/memory/prompt",
                json={"query": questions()[0], "session": {"session_id": SESSION, "user_id": USER}}
                | {"recall_k": 0},
            )
        )
        get_ms = timed(
            lambda: http.get(f"/v1/working-memory/{SESSION}", params={"recent_messages_limit": 40})
        )
        requests = dynamodb_requests(counter, stack, stack.config, questions()[0])
        shape = f"session of {MESSAGES} messages, {MEMORIES} memories of its user"
        report("prompt.hydrate_ms", median(latencies), "ms median", f"{RUNS} prompts; {shape}")
        report("prompt.hydrate_p90_ms", percentile(latencies, 0.9), "ms")
        report(
            "prompt.dynamodb_requests",
            sum(requests.values()),
            target=", ".join(f"{op} {n}" for op, n in sorted(requests.items()))
            + " (recall_k 5, message_range 1: two Queries per recalled message)",
        )
        report("prompt.hydrate_without_recall_ms", without_recall, "ms median", "recall_k 0")
        report(
            "prompt.get_session_ms",
            get_ms,
            "ms median",
            "GET of the same session's 40 newest messages: one Query, for scale",
        )

        # 2. Tokens: the prompt against the history it stands for.
        hydrated = median([p["total_tokens"] for p in prompts])
        parts = {
            name: median([p["parts"][name]["used"] for p in prompts])
            for name in prompts[0]["parts"]
        }
        raw_session = sum(message_tokens(m["role"], m["content"]) for m in history)
        raw_memories = sum(estimate_tokens(f"- {r['text']} (ID: {r['id']})") for r in records)
        report(
            "prompt.hydrated_tokens",
            hydrated,
            "tokens median",
            ", ".join(f"{name} {used:.0f}" for name, used in parts.items()),
        )
        report("prompt.raw_session_tokens", raw_session, "tokens", f"all {MESSAGES} messages")
        report("prompt.raw_memories_tokens", raw_memories, "tokens", f"all {MEMORIES} memories")
        report(
            "prompt.saving_ratio",
            (raw_session + raw_memories) / hydrated,
            "x",
            "raw history (session + the user's memories) / hydrated prompt",
        )
        report("prompt.saving_ratio_session_only", raw_session / hydrated, "x")


if __name__ == "__main__":
    main()
