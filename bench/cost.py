"""What memkit costs a month on each vector backend with each embedder (docs/cost.md).

For every backend the local stack can stand in for (OpenSearch as a managed `domain` or a
Serverless collection, through the loopback OpenSearch) and every embedder (the local model,
Titan Text Embeddings V2 and Cohere Embed v3, the production embedders answered by the
loopback Bedrock), one local stack runs three phases through its HTTP API:

- appends: POST .../messages, one message each (sessions of 10, the user's words and the
  answers in turn); the stream indexer embeds and indexes each message, the curator and the
  memory worker do what they do on AWS (titles, summaries with the local model);
- searches: POST /v1/long-term-memory/search, the default (hybrid) search of one user's
  memories, a different question each;
- records: POST /v1/long-term-memory/, one semantic record each;
- then 300 more records (batches of 50) and the searches again: what a search reads as the
  user's memories grow (on `dynamodb` its keyword leg reads the user's texts, up to 2,000).

Every Lambda invocation is metered where it runs (memkit_dev.local.meter): handler time,
DynamoDB requests with the capacity units DynamoDB Local reports (indexes included), SQS
sends, Bedrock embedding calls with the tokens of the texts they sent. The background work a
phase causes is waited for and counted with it. The records' storage is DescribeTable's
TableSizeBytes and IndexSizeBytes (plus DynamoDB's 100 bytes an item) and, for OpenSearch,
each doc's source plus its float32 vector.

bench.billing prices the figures (its PRICES and their SOURCES): a month at idle, per 1M
appends, per 1M searches, per 100k records written and per 100k records kept a month. It
prints figures; it never asserts.
"""

from __future__ import annotations

import json
import random
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import billing, environment
from bench.figures import report
from bench.sayings import ANSWERS, SAYINGS, SUBJECTS

BACKENDS = ("serverless", "domain", "dynamodb")
# The local stack's stand-in for each (LocalStackConfig fields).
STACK_OPTIONS: dict[str, dict[str, str]] = {
    "serverless": {"opensearch_flavour": "serverless"},
    "domain": {"opensearch_flavour": "domain"},
    "dynamodb": {"vector_store": "dynamodb"},
}
EMBEDDERS = ("local", "titan", "cohere")
SESSIONS = 4
MESSAGES = 10  # per session
SEARCHES = 20
RECORDS = 30
# Records added (in batches) before the searches are measured again on a larger scope: what
# a search reads may grow with the memories of the user it searches.
GROWTH = 300
GROWTH_BATCH = 50
# Changes that keep history (issue 28): edits of stored records (each keeps the version it
# replaced) and facts written into one slot (each supersedes the current one).
EDITS = 20
SUPERSESSIONS = 20
USER = "ada"
# The tenant of every request on a stack without auth.
TENANT = "default"
# What a month is priced at.
MONTH = {"appends": 1_000_000, "searches": 1_000_000, "records": 100_000}
# OpenSearch Serverless's idle floor by OpenSearchMinCapacity: that many OCUs for indexing
# and as many for search (0, the template's default, scales to zero and bills none).
SERVERLESS_MINIMUMS = (0, 1)
# The price a month of the vector index's bytes is billed at, by backend (a domain's: none
# added; DynamoDB's vector index: the table's, see records_stored_month).
INDEX_STORAGE_PRICE = {
    "serverless": "opensearch_storage_gb_month",
    "dynamodb": "dynamodb_storage_gb_month",
}
# What one unit of each phase's work is.
UNITS = {
    "appends": "append",
    "searches": "search",
    "records": "record",
    "growth": "record (batches of 50)",
    "searches_larger": "search",
    "edits": "edit",
    "supersessions": "fact written into a slot",
}
# The memories in the searched user's scope when each search phase runs.
SCOPE_DOCS = {
    "searches": SESSIONS * MESSAGES,
    "searches_larger": SESSIONS * MESSAGES + RECORDS + GROWTH,
}
# What the per-function breakdown shows (the meter's names).
FUNCTION_FIGURES = ("invocations", "write_units", "index_write_units", "read_units")
# DynamoDB's storage overhead an item (its size calculation adds it to every item's bytes).
ITEM_OVERHEAD_BYTES = 100
# faiss HNSW's graph: m links of 8 bytes a vector (memkit's mapping keeps the default m).
HNSW_M = 16
QUESTIONS = [
    "What does the user think about {s}?",
    "When did I last mention {s}?",
    "Who did I talk to about {s}?",
    "Why do I care about {s} so much?",
    "Which report is about {s}?",
]


@dataclass
class Run:
    """One backend and embedder: the usage per unit of each phase, and the records' bytes."""

    backend: str
    embedder: str
    usage: dict[str, dict[str, float]] = field(default_factory=dict)
    # requests to the vector index: OpenSearch's, or the vector table's (SearchVectors, its
    # writes and the keyword search's reads), per unit
    index_requests: dict[str, float] = field(default_factory=dict)
    # each function's MemorySize (template.yaml): Lambda bills GB-seconds at it
    memory: dict[str, int] = field(default_factory=billing.function_memory)
    # phase -> function -> its invocations and DynamoDB units per unit of the phase's work
    by_function: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)
    # dynamodb: a search's keyword leg with its 30 s cache cold (a user's first search in
    # that long): {"rru": ..., "ms": ...} at SCOPE_DOCS["searches_larger"] memories
    cold_keyword: dict[str, float] = field(default_factory=dict)
    table_bytes_per_record: float = 0.0
    index_bytes_per_record: float = 0.0
    # What the history a change keeps adds to the table (the version item), per change.
    table_bytes_per_edit: float = 0.0
    table_bytes_per_supersession: float = 0.0
    seconds: float = 0.0


def _post(url: str, body: dict[str, Any], expect: int, method: str = "POST") -> None:
    import httpx

    answer = httpx.request(method, url, json=body, timeout=120)
    if answer.status_code != expect:
        raise SystemExit(f"{method} {url}: {answer.status_code} {answer.text[:500]}")


def _described(stack: Any) -> list[dict[str, Any]]:
    """DescribeTable of the memory table and, on `dynamodb`, of the vector table."""
    import boto3

    region = stack.config.region
    tables = [(stack.dynamodb_endpoint, stack.config.table_name)]
    if stack.vectors is not None:
        tables.append((stack.vectors.url, stack.config.vector_table))
    return [
        boto3.client("dynamodb", endpoint_url=endpoint, region_name=region).describe_table(
            TableName=name
        )["Table"]
        for endpoint, name in tables
    ]


def _table_bytes(stack: Any) -> float:
    """What DynamoDB bills storage for: the tables' and their indexes' bytes (a vector
    table's items hold their vectors), each item's overhead included."""
    parts = [
        part
        for table in _described(stack)
        for part in (
            table,
            *table.get("GlobalSecondaryIndexes", []),
            *table.get("LocalSecondaryIndexes", []),
        )
    ]
    return sum(
        float(part.get("TableSizeBytes", part.get("IndexSizeBytes", 0)))
        + ITEM_OVERHEAD_BYTES * float(part.get("ItemCount", 0))
        for part in parts
    )


def _index_bytes(stack: Any) -> float:
    """The vector index's bytes: an OpenSearch doc's source, its float32 vector and its graph
    links; a DynamoDB vector index's size as DescribeTable gives it (float32 vectors)."""
    if stack.vectors is not None:
        return sum(
            float(index.get("IndexSizeBytes", 0))
            for table in _described(stack)
            for index in table.get("VectorIndexes", [])
        )
    opensearch = stack.opensearch
    total = 0.0
    for index in opensearch.indices():
        for _, source in opensearch.documents(index):
            vector = source.get("vector") or []
            total += len(json.dumps(source)) + 4 * len(vector) + 8 * HNSW_M
    return total


def _index_requests(stack: Any) -> int:
    """Requests the vector index has answered so far."""
    if stack.vectors is not None:
        return len(stack.vectors.requests)
    return len(stack.opensearch.requests)


def _cold_keyword(stack: Any) -> dict[str, float]:
    """What the keyword leg of a search on `dynamodb` reads when its cache is cold: the
    production adapter over the stack's vector table with the cache off, metered here."""
    import boto3

    from memkit.vectors.dynamodb import DynamoVectorIndex
    from memkit.vectors.filters import Condition
    from memkit_dev.local.meter import Meter, read_invocations
    from memkit_dev.local.stack import embedder_dimensions

    config = stack.config
    directory = Path(tempfile.mkdtemp(prefix="memkit-cost-keyword-"))
    client = boto3.client("dynamodb", endpoint_url=stack.vectors.url, region_name=config.region)
    meter = Meter(directory, "keyword").attach(client)
    dimensions = embedder_dimensions(config.embedder, config.region)
    index = DynamoVectorIndex(client, config.vector_table, dimensions, keyword_cache_seconds=0)
    with meter.invocation({}):
        index.keyword(TENANT, QUESTIONS[0].format(s="tea"), 5, [Condition("user_id", "eq", USER)])
    (line,) = read_invocations(directory)
    return {"rru": float(line["read_units"]), "ms": float(line["ms"])}


def _phase(run: Run, name: str, stack: Any, meter_dir: Path, count: int, work: Any) -> None:
    """Run `work` (`count` units of phase `name`), wait for what it caused, and keep its
    usage per unit in `run`."""
    requests_before = _index_requests(stack)
    begin = time.time()
    work()
    phase = billing.Phase(meter_dir, begin).close(billing.settle(stack, meter_dir))
    if stack.vectors is not None:
        stack.vectors.settle()  # its replication caught up: the next phase searches all
    run.usage[name] = billing.usage_per_unit(phase, count, run.memory)
    run.index_requests[name] = (_index_requests(stack) - requests_before) / count
    run.by_function[name] = {
        function: {item: totals.get(item, 0.0) / count for item in FUNCTION_FIGURES}
        for function, totals in sorted(phase.by_function().items())
    }


def measure(backend: str, embedder: str) -> Run:
    """One local stack on `backend` with `embedder`, its three phases metered."""
    rng = random.Random(7)
    run = Run(backend, embedder)
    started = time.time()
    stack_options = {"embedder": embedder, **STACK_OPTIONS[backend]}
    with billing.metered_stack(f"cost {backend} {embedder}", **stack_options) as (
        stack,
        meter_dir,
    ):
        billing.settle(stack, meter_dir)

        def appends() -> None:
            for session in range(SESSIONS):
                for number in range(MESSAGES):
                    subject = rng.choice(SUBJECTS)
                    said = rng.choice(SAYINGS if number % 2 == 0 else ANSWERS)
                    message = {
                        "id": f"m{number}",
                        "role": "user" if number % 2 == 0 else "assistant",
                        "content": said.format(s=subject),
                    }
                    url = f"{stack.url}/v1/working-memory/s{session}/messages?user_id={USER}"
                    _post(url, {"messages": [message]}, 201)

        def searches() -> None:
            for number in range(SEARCHES):
                question = QUESTIONS[number % len(QUESTIONS)].format(s=SUBJECTS[number % 9])
                body = {"text": f"{question} ({number})", "user_id": {"eq": USER}, "limit": 5}
                _post(f"{stack.url}/v1/long-term-memory/search", body, 200)

        def record(number: int) -> dict[str, Any]:
            subject = rng.choice(SUBJECTS)
            return {
                "id": f"r{number}",
                # a text of its own: the same text again is not stored twice
                "text": f"{rng.choice(SAYINGS).format(s=subject)} Note {number}.",
                "user_id": USER,
                "topics": [subject.split()[-1].lower()],
                "memory_type": "semantic",
            }

        def records() -> None:
            for number in range(RECORDS):
                _post(f"{stack.url}/v1/long-term-memory/", {"memories": [record(number)]}, 200)

        def grow() -> None:
            for start in range(RECORDS, RECORDS + GROWTH, GROWTH_BATCH):
                batch = [record(number) for number in range(start, start + GROWTH_BATCH)]
                _post(f"{stack.url}/v1/long-term-memory/", {"memories": batch}, 200)

        _phase(run, "appends", stack, meter_dir, SESSIONS * MESSAGES, appends)
        _phase(run, "searches", stack, meter_dir, SEARCHES, searches)
        table_before, index_before = _table_bytes(stack), _index_bytes(stack)
        _phase(run, "records", stack, meter_dir, RECORDS, records)
        run.table_bytes_per_record = (_table_bytes(stack) - table_before) / RECORDS
        run.index_bytes_per_record = (_index_bytes(stack) - index_before) / RECORDS

        def edits() -> None:
            for number in range(EDITS):
                body = {"text": f"{record(number)['text']} (corrected)"}
                _post(f"{stack.url}/v1/long-term-memory/r{number}", body, 200, "PATCH")

        def supersessions() -> None:
            for number in range(SUPERSESSIONS):
                fact = {**record(RECORDS + GROWTH + number), "key": "home_city"}
                _post(f"{stack.url}/v1/long-term-memory/", {"memories": [fact]}, 200)

        table_before = _table_bytes(stack)
        _phase(run, "edits", stack, meter_dir, EDITS, edits)
        run.table_bytes_per_edit = (_table_bytes(stack) - table_before) / EDITS
        _phase(run, "growth", stack, meter_dir, GROWTH, grow)
        _phase(run, "searches_larger", stack, meter_dir, SEARCHES, searches)
        table_before = _table_bytes(stack)
        _phase(run, "supersessions", stack, meter_dir, SUPERSESSIONS, supersessions)
        run.table_bytes_per_supersession = (_table_bytes(stack) - table_before) / SUPERSESSIONS
        if stack.vectors is not None:
            run.cold_keyword = _cold_keyword(stack)
    run.seconds = time.time() - started
    return run


def idle_month(backend: str) -> dict[str, float]:
    """What a month with no traffic costs, by line: the vector store's floor (the KMS key
    and storage are the same on every backend and listed apart)."""
    if backend == "serverless":
        return {
            f"opensearch_floor_minimum_{minimum}": billing.ocu_floor_month(2 * minimum)
            for minimum in SERVERLESS_MINIMUMS
        }
    # domain: a domain you already run (the template creates none); dynamodb: nothing
    return {}


def records_stored_month(run: Run) -> float:
    """A month of MONTH["records"] records kept: the tables' storage and the vector index's:
    a Serverless collection's managed storage, or a DynamoDB vector index's at the table's
    storage price (DynamoDB's price list has no storage usage type of the vector index's own,
    as aws/agent-toolkit-for-aws's cost calculator notes); a domain's storage is the
    domain's own EBS."""
    count = MONTH["records"]
    dollars = billing.storage_month(count * run.table_bytes_per_record, "dynamodb_storage_gb_month")
    index_price = INDEX_STORAGE_PRICE.get(run.backend)
    if index_price is not None:
        dollars += billing.storage_month(count * run.index_bytes_per_record, index_price)
    return dollars


def _report(run: Run) -> None:
    prefix = f"cost.{run.backend}.{run.embedder}"
    for phase, usage in run.usage.items():
        unit = UNITS[phase]
        for item, value in usage.items():
            report(f"{prefix}.{phase}.{item}", value, f"per {unit}")
        report(f"{prefix}.{phase}.index_requests", run.index_requests[phase], f"per {unit}")
        for function, figures in run.by_function[phase].items():
            detail = ", ".join(f"{item} {value:.3g}" for item, value in figures.items())
            report(f"{prefix}.{phase}.{function}.invocations", figures["invocations"], detail)
    if run.cold_keyword:
        docs = SCOPE_DOCS["searches_larger"]
        report(
            f"{prefix}.searches.cold_keyword_rru",
            run.cold_keyword["rru"],
            f"RRU, the keyword leg's read of {docs} memories with its cache cold",
            f"{run.cold_keyword['ms']:.0f} ms",
        )
    report(f"{prefix}.records.table_bytes", run.table_bytes_per_record, "bytes per record")
    report(
        f"{prefix}.edits.table_bytes",
        run.table_bytes_per_edit,
        "bytes per edit (the version it keeps; the text changed in place)",
    )
    report(
        f"{prefix}.supersessions.table_bytes",
        run.table_bytes_per_supersession,
        "bytes per fact written into a slot (the new record, the old one's kept version)",
    )
    report(
        f"{prefix}.records.index_bytes", run.index_bytes_per_record, "bytes per record (estimate)"
    )
    for item, dollars in idle_month(run.backend).items():
        report(f"{prefix}.month.idle.{item}", dollars, "USD")
    for phase, count in MONTH.items():
        usage = run.usage[phase]
        report(
            f"{prefix}.month.per_{count:_}_{phase}",
            count * billing.dollars(usage, run.embedder),
            "USD",
            ", ".join(
                f"{item} {count * dollars:.2f}"
                for item, dollars in billing.line_items(usage, run.embedder).items()
                if count * dollars >= 0.005
            ),
        )
    report(f"{prefix}.month.{MONTH['records']:_}_records_kept", records_stored_month(run), "USD")
    report(f"{prefix}.seconds", run.seconds, "s to measure")


def _dollars(amount: float) -> str:
    return f"${amount:,.2f}" if amount >= 0.01 or amount == 0 else f"${amount:.4f}"


def _idle_cell(backend: str) -> str:
    idle = idle_month(backend)
    if not idle:
        return "none added" if backend == "domain" else "$0"
    cells = []
    for minimum in SERVERLESS_MINIMUMS:
        dollars = idle[f"opensearch_floor_minimum_{minimum}"]
        cells.append(f"{_dollars(dollars) if dollars else '$0'} (minimum {minimum})")
    return " / ".join(cells)


def _summary(runs: list[Run]) -> None:
    """The tables docs/cost.md carries, in Markdown."""
    print(
        "\n| `VectorStore` | embedder | idle, a month | per 1M appends | per 1M searches "
        "| per 100k records written | 100k records kept a month |"
    )
    print("|---|---|---|---|---|---|---|")
    for run in runs:
        cells = [
            _dollars(count * billing.dollars(run.usage[phase], run.embedder))
            for phase, count in MONTH.items()
        ]
        print(
            f"| {run.backend} | {run.embedder} | {_idle_cell(run.backend)} | "
            + " | ".join(cells)
            + f" | {_dollars(records_stored_month(run))} |"
        )
    columns = (
        ("api_requests", "API", ".2g"),
        ("lambda_invocations", "Lambda", ".3g"),
        ("lambda_gb_seconds", "GB-s", ".3f"),
        ("wru", "WRU", ".3g"),
        ("index_wru", "of which indexes", ".3g"),
        ("rru", "RRU", ".3g"),
        ("sqs_requests", "SQS", ".3g"),
        ("embed_calls", "Bedrock calls", ".2g"),
        ("embed_tokens", "tokens", ".3g"),
        ("vector_search_bytes", "VS bytes", ".0f"),
        ("vector_write_bytes", "VWR bytes", ".0f"),
    )
    print()
    for run in runs:
        if run.cold_keyword:
            print(
                f"{run.backend} {run.embedder}: a cold keyword read of "
                f"{SCOPE_DOCS['searches_larger']} memories, {run.cold_keyword['rru']:.3g} RRU"
            )
    print("\nA search as the user's memories grow (RRU, GB-s, VS bytes):\n")
    print(
        "| backend | embedder | "
        + " | ".join(f"{docs} memories" for docs in SCOPE_DOCS.values())
        + " |"
    )
    print("|---|---|" + "---|" * len(SCOPE_DOCS))
    for run in runs:
        cells = [
            f"{run.usage[phase]['rru']:.3g} RRU, {run.usage[phase]['lambda_gb_seconds']:.3f} GB-s, "
            f"{run.usage[phase]['vector_search_bytes']:,.0f} VS bytes"
            for phase in SCOPE_DOCS
        ]
        print(f"| {run.backend} | {run.embedder} | " + " | ".join(cells) + " |")
    for phase in MONTH:
        print(f"\n{phase}, per unit:\n")
        print(
            "| backend | embedder | "
            + " | ".join(title for _, title, _ in columns)
            + " | vector index requests |"
        )
        print("|---" * (len(columns) + 3) + "|")
        for run in runs:
            usage = run.usage[phase]
            cells = [format(usage.get(item, 0.0), spec) for item, _, spec in columns]
            print(
                f"| {run.backend} | {run.embedder} | "
                + " | ".join(cells)
                + f" | {run.index_requests[phase]:.3g} |"
            )


def main(backends: tuple[str, ...] = BACKENDS, embedders: tuple[str, ...] = EMBEDDERS) -> None:
    environment.apply()
    started = time.time()
    print(f"cost.prices_looked_up {billing.PRICES_LOOKED_UP} (us-east-1, USD)", flush=True)
    for name, price in billing.PRICES.items():
        report(f"cost.price.{name}", price, "USD", billing.SOURCES[name])
    report(
        "cost.month.kms_key",
        billing.PRICES["kms_key_month"],
        "USD",
        "every backend, the default key",
    )
    runs = []
    for backend in backends:
        for embedder in embedders:
            runs.append(measure(backend, embedder))
            _report(runs[-1])
    report("cost.seconds", time.time() - started, "s for every backend and embedder")
    _summary(runs)


if __name__ == "__main__":
    main()
