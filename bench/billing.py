"""What AWS bills for the local stack's metered work: the public prices used (their date and
where each came from), each phase's usage per unit of work as the meter recorded it where
the functions ran (memkit_dev.local.meter), and dollars = prices x counts.

`bench.agentcore` (memkit against AgentCore Memory) and `bench.cost` (each vector backend and
embedder, docs/cost.md) price with it; tests/unit/test_billing.py checks the arithmetic.
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# The day the prices below were looked up (the search tool's stored copies of the pages named
# in SOURCES; us-east-1, on-demand, USD).
PRICES_LOOKED_UP = "2026-11-27"
PRICES: dict[str, float] = {
    "http_api_request": 1.00 / 1_000_000,  # API Gateway HTTP API, first 300M a month
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_second": 0.0000133334,  # arm64, as the template deploys
    "dynamodb_wru": 0.625 / 1_000_000,  # on-demand write request unit
    "dynamodb_rru": 0.125 / 1_000_000,
    "dynamodb_storage_gb_month": 0.25,  # Standard table class, past the free 25 GB
    "sqs_request": 0.40 / 1_000_000,
    "titan_embed_v2_token": 0.02 / 1_000_000,
    "cohere_embed_v3_token": 0.10 / 1_000_000,
    "nova_lite_input_token": 0.06 / 1_000_000,  # memkit's default curation model
    "nova_lite_output_token": 0.24 / 1_000_000,
    "opensearch_ocu_hour": 0.24,  # OpenSearch Serverless, indexing or search OCU
    "opensearch_storage_gb_month": 0.024,  # OpenSearch Serverless managed storage
    "kms_key_month": 1.00,  # UseCustomerManagedKey (the default)
    # DynamoDB's vector index units, billed by the GB of the bytes DynamoDB reports
    "dynamodb_vector_search_gb": 0.002,  # VS: VectorSearchRequestBytes (usage type VectorSearch)
    "dynamodb_vector_write_gb": 0.52,  # VWR: VectorWriteRequestBytes (VectorWriteRequest)
}
VECTOR_UNITS_SOURCE = (
    "aws/agent-toolkit-for-aws, amazon-dynamodb skill, scripts/calculate_costs.py (us-east-1, "
    "from the AWS Price List API's VectorSearch and VectorWriteRequest usage types; PR #258, "
    "August 2026); the same per GB on a us-west-2 bill of 2026-08-23 "
    "(jus2024/serverless-poc-stock-management, docs/measurements/"
    "cost-explorer-unit-price-2026-08-23.json)"
)
SOURCES: dict[str, str] = {
    "http_api_request": "apigatewaycost.com's HTTP API table (first 300M a month)",
    "lambda_request": "cloudchipr.com's Lambda pricing guide (us-east-1)",
    "lambda_gb_second": "cloudchipr.com's Lambda pricing guide (Arm, first 7.5 billion GB-s)",
    "dynamodb_wru": "aws.amazon.com/dynamodb/pricing/on-demand, as docs/agentcore.md",
    "dynamodb_rru": "aws.amazon.com/dynamodb/pricing/on-demand, as docs/agentcore.md",
    "dynamodb_storage_gb_month": "aws.amazon.com/dynamodb/pricing/on-demand, as docs/agentcore.md",
    "sqs_request": "cloudburn.io's SQS pricing guide (standard queues, March 2026)",
    "titan_embed_v2_token": "openrouter.ai/amazon/titan-embed-text-v2 (Amazon Bedrock's price)",
    "cohere_embed_v3_token": "getmaxim.ai's cost calculator (Cohere embed-english-v3.0)",
    "nova_lite_input_token": "aws.amazon.com/bedrock/pricing, as docs/agentcore.md",
    "nova_lite_output_token": "aws.amazon.com/bedrock/pricing, as docs/agentcore.md",
    "opensearch_ocu_hour": "kane.mx's S3 Vectors vs OpenSearch post ($175.20 a month for 1 OCU)",
    "opensearch_storage_gb_month": "cloudburn.io's OpenSearch pricing guide (managed storage)",
    "kms_key_month": "aws.amazon.com/kms/pricing, as docs/deploy.md",
    "dynamodb_vector_search_gb": VECTOR_UNITS_SOURCE,
    "dynamodb_vector_write_gb": VECTOR_UNITS_SOURCE,
}
HOURS_A_MONTH = 730
# A GB-month of storage is billed on binary gigabytes; so, assumed, are the vector units' GB
# (their bills say "GB" and no more: 1e9 bytes would make them 7% dearer).
GB = 1024**3
# The embedders' token prices (the local embedder runs inside the function: no bill of its own).
EMBEDDING_TOKEN_PRICE = {
    "local": None,
    "titan": "titan_embed_v2_token",
    "cohere": "cohere_embed_v3_token",
}
# Usage per unit of work (the keys `usage_per_unit` gives) -> the price each is billed at.
LINE_ITEMS = {
    "api_requests": "http_api_request",
    "lambda_invocations": "lambda_request",
    "lambda_gb_seconds": "lambda_gb_second",
    "wru": "dynamodb_wru",
    "rru": "dynamodb_rru",
    "sqs_requests": "sqs_request",
    "llm_input_tokens": "nova_lite_input_token",
    "llm_output_tokens": "nova_lite_output_token",
}
# Usage counted in bytes -> the GB price each is billed at.
BYTE_ITEMS = {
    "vector_search_bytes": "dynamodb_vector_search_gb",
    "vector_write_bytes": "dynamodb_vector_write_gb",
}
# SQS bills each message three requests: sent, received, deleted.
SQS_REQUESTS_A_MESSAGE = 3
# The function memory Lambda bills when the template names none for a function.
DEFAULT_MEMORY_MB = 512


def line_items(usage: Mapping[str, float], embedder: str = "titan") -> dict[str, float]:
    """Dollars for each priced line of `usage`: the usage's count times its price, a count of
    bytes (BYTE_ITEMS) in GB times its GB price. Embedding tokens are priced at `embedder`'s
    token price (nothing for the local embedder)."""
    dollars = {
        item: usage[item] * PRICES[price] for item, price in LINE_ITEMS.items() if item in usage
    }
    dollars |= {
        item: usage[item] / GB * PRICES[price]
        for item, price in BYTE_ITEMS.items()
        if item in usage
    }
    token_price = EMBEDDING_TOKEN_PRICE[embedder]
    if token_price is not None and "embed_tokens" in usage:
        dollars["embed_tokens"] = usage["embed_tokens"] * PRICES[token_price]
    return dollars


def dollars(usage: Mapping[str, float], embedder: str = "titan") -> float:
    """What `usage` costs, its priced lines summed."""
    return sum(line_items(usage, embedder).values())


def ocu_floor_month(ocus: float) -> float:
    """A month of OpenSearch Serverless's capacity floor: `ocus` OCUs every hour."""
    return ocus * HOURS_A_MONTH * PRICES["opensearch_ocu_hour"]


def storage_month(bytes_stored: float, price: str) -> float:
    """A month of `bytes_stored` at the GB-month price named `price`."""
    return bytes_stored / GB * PRICES[price]


def gb_seconds(ms: float, memory_mb: int) -> float:
    """Lambda's billed GB-seconds for `ms` of handler time at `memory_mb`."""
    return ms / 1000 * memory_mb / 1024


class Phase:
    """The meter's lines of one phase: the invocations that started after `begin`."""

    def __init__(self, meter_dir: Path, begin: float) -> None:
        self._meter_dir = meter_dir
        self._begin = begin
        self.lines: list[dict[str, Any]] = []

    def close(self, end: float) -> Phase:
        from memkit_dev.local.meter import read_invocations

        self.lines = [
            line
            for line in read_invocations(self._meter_dir)
            if self._begin <= float(line["started"]) < end
        ]
        return self

    def by_function(self) -> dict[str, dict[str, float]]:
        """Each function's totals over the phase: invocations and every metered count."""
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for line in self.lines:
            total = totals[line["function"]]
            total["invocations"] += 1
            for name, value in line.items():
                if isinstance(value, int | float) and name != "started":
                    total[name] += float(value)
        return totals


@contextmanager
def metered_stack(name: str, **options: Any) -> Iterator[tuple[Any, Path]]:
    """(stack, meter folder): the local stack for benchmark `name`, every invocation metered
    into a fresh folder; curation after a 1 s quiet time, no cleanup timer, two API execution
    environments; `options` (LocalStackConfig fields) over that."""
    from bench.dynamodb_requests import local_stack

    meter_dir = Path(tempfile.mkdtemp(prefix=f"memkit-{name.replace(' ', '-')}-meter-"))
    settings = {
        "meter_dir": meter_dir,
        "extraction_quiet_seconds": 1,
        "cleanup_interval_seconds": 0,
        "concurrency": 2,
        **options,
    }
    with local_stack(name, **settings) as stack:
        yield stack, meter_dir


def settle(stack: Any, meter_dir: Path) -> float:
    """Wait until the background work the last phase caused is done: the stream pumps and
    the work queue drained, and no invocation started for a quiet spell longer than the
    curator's quiet time. The time it was done."""
    from memkit_dev.local.meter import read_invocations

    quiet = stack.config.extraction_quiet_seconds + 2.0
    while True:
        stack.pump.drain(120)
        stack.curator_pump.drain(120)
        stack.worker_pump.drain(300)
        lines = read_invocations(meter_dir)
        last = max((float(line["started"]) for line in lines), default=0.0)
        if time.time() - last > quiet:
            return time.time()
        time.sleep(quiet)


def function_memory() -> dict[str, int]:
    """Each function's MemorySize in template.yaml (the Globals' where it names none)."""
    from memkit_dev.local.template import find_template, load_template

    template = load_template(find_template())
    default = template.get("Globals", {}).get("Function", {}).get("MemorySize", DEFAULT_MEMORY_MB)
    return {
        name: int(resource["Properties"].get("MemorySize", default))
        for name, resource in template["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def usage_per_unit(phase: Phase, count: int, memory: Mapping[str, int]) -> dict[str, float]:
    """What one unit of the phase's work (an append, a search, a record) consumed, by what
    AWS bills: the phase's totals over every function, divided by `count`."""
    functions = phase.by_function()

    def total(name: str, *, api_only: bool = False) -> float:
        return sum(
            counts.get(name, 0.0)
            for function, counts in functions.items()
            if not api_only or function == "ApiFunction"
        )

    return {
        "api_requests": total("invocations", api_only=True) / count,
        "lambda_invocations": total("invocations") / count,
        "lambda_gb_seconds": sum(
            gb_seconds(counts["ms"], memory.get(function, DEFAULT_MEMORY_MB))
            for function, counts in functions.items()
        )
        / count,
        "wru": total("write_units") / count,
        # of which the table's indexes (GSIs, LSIs): already in wru
        "index_wru": total("index_write_units") / count,
        "rru": total("read_units") / count,
        "sqs_requests": SQS_REQUESTS_A_MESSAGE * total("sqs_sends") / count,
        "embed_calls": total("embed_calls") / count,
        "embed_tokens": total("embed_tokens") / count,
        "vector_search_bytes": total("vector_search_bytes") / count,
        "vector_write_bytes": total("vector_write_bytes") / count,
        # the indexer's and curator's stream batches, the worker's queue batches
        "background_invocations": (total("invocations") - total("invocations", api_only=True))
        / count,
    }
