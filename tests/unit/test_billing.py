"""The cost arithmetic behind docs/cost.md and docs/agentcore.md (bench/billing.py): what a
metered unit of work costs is each count times its own published price (a count of bytes,
its GB times the GB price)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import billing
from bench.billing import PRICES


def _line(function: str, **counts: float) -> dict[str, Any]:
    return {"function": function, "started": 1.0, "ms": 0.0, "dynamodb": {}, **counts}


def test_a_unit_costs_each_count_times_its_own_price() -> None:
    usage = {
        "api_requests": 1.0,
        "lambda_invocations": 1.5,
        "lambda_gb_seconds": 0.2,
        "wru": 4.0,
        "rru": 2.0,
        "sqs_requests": 3.0,
        "embed_tokens": 50.0,
    }

    cost = billing.dollars(usage, embedder="titan")

    expected = (
        1.0 * PRICES["http_api_request"]
        + 1.5 * PRICES["lambda_request"]
        + 0.2 * PRICES["lambda_gb_second"]
        + 4.0 * PRICES["dynamodb_wru"]
        + 2.0 * PRICES["dynamodb_rru"]
        + 3.0 * PRICES["sqs_request"]
        + 50.0 * PRICES["titan_embed_v2_token"]
    )
    assert cost == pytest.approx(expected)


def test_the_prices_are_the_published_ones_the_docs_quote() -> None:
    assert PRICES["http_api_request"] * 1_000_000 == pytest.approx(1.00)
    assert PRICES["dynamodb_wru"] * 1_000_000 == pytest.approx(0.625)
    assert PRICES["dynamodb_rru"] * 1_000_000 == pytest.approx(0.125)
    assert PRICES["titan_embed_v2_token"] * 1_000_000 == pytest.approx(0.02)
    assert PRICES["cohere_embed_v3_token"] * 1_000_000 == pytest.approx(0.10)
    assert PRICES["dynamodb_vector_search_gb"] == pytest.approx(0.002)
    assert PRICES["dynamodb_vector_write_gb"] == pytest.approx(0.52)
    assert set(billing.SOURCES) == set(PRICES)


def test_embedding_tokens_are_priced_at_the_embedders_own_price() -> None:
    usage = {"embed_tokens": 1_000_000.0}

    assert billing.dollars(usage, embedder="cohere") == pytest.approx(0.10)
    assert billing.dollars(usage, embedder="titan") == pytest.approx(0.02)
    assert billing.dollars(usage, embedder="local") == 0
    assert "embed_tokens" not in billing.line_items(usage, embedder="local")


def test_a_vector_indexs_bytes_are_priced_by_the_gb_of_its_own_unit() -> None:
    # 1M searches of 50,000 VS bytes, 1M writes of 4,125 VWR bytes
    usage = {"vector_search_bytes": 50_000.0, "vector_write_bytes": 4_125.0}

    lines = billing.line_items(usage)

    assert lines["vector_search_bytes"] * 1_000_000 == pytest.approx(50e9 / 1024**3 * 0.002)
    assert lines["vector_write_bytes"] * 1_000_000 == pytest.approx(4.125e9 / 1024**3 * 0.52)
    assert billing.dollars(usage) == pytest.approx(sum(lines.values()))


def test_fixed_and_storage_costs_are_a_month_of_their_rate() -> None:
    # 2 OCUs (standby replicas) a month: 2 x 730 h x $0.24
    assert billing.ocu_floor_month(2) == pytest.approx(350.40)
    assert billing.ocu_floor_month(1) == pytest.approx(175.20)
    assert billing.storage_month(3 * billing.GB, "dynamodb_storage_gb_month") == pytest.approx(0.75)
    assert billing.gb_seconds(ms=1_500, memory_mb=512) == pytest.approx(0.75)


def test_usage_per_unit_sums_every_function_of_the_phase_and_divides_by_the_units() -> None:
    phase = billing.Phase(Path("unused"), begin=0.0)
    phase.lines = [
        _line("ApiFunction", ms=100.0, write_units=4.0, read_units=1.0, embed_tokens=10),
        _line("ApiFunction", ms=300.0, write_units=2.0, index_write_units=1.0, sqs_sends=1),
        _line("IndexerFunction", ms=1000.0, read_units=1.0, embed_calls=2, embed_tokens=30),
    ]
    memory = {"ApiFunction": 512, "IndexerFunction": 1024}

    usage = billing.usage_per_unit(phase, count=2, memory=memory)

    assert usage["api_requests"] == 1.0
    assert usage["lambda_invocations"] == 1.5
    assert usage["background_invocations"] == 0.5
    assert usage["lambda_gb_seconds"] == pytest.approx((0.4 * 0.5 + 1.0 * 1.0) / 2)
    assert (usage["wru"], usage["index_wru"], usage["rru"]) == (3.0, 0.5, 1.0)
    assert usage["sqs_requests"] == 1.5  # sent, received and deleted: 3 requests a message
    assert (usage["embed_calls"], usage["embed_tokens"]) == (1.0, 20.0)
