"""AgentCore Memory's workload on memkit, metered, and what a month of it costs.

boto3's own `bedrock-agentcore` client drives the local stack as an agent would: events (one
a turn, the user's words and the answer, as the SDK's `add_turns` writes them), records
(BatchCreateMemoryRecords) and retrievals (RetrieveMemoryRecords). Every Lambda invocation
is metered where it runs (memkit_dev.local.meter): its handler's time and the DynamoDB
capacity units DynamoDB reports (DynamoDB Local, AWS's own engine, where Java 17+ is here);
the background work each phase causes (the stream indexer, the curator, the memory worker)
is waited for and counted with it. Embedding tokens are those of the texts the index holds
(what Titan would have embedded) and of the queries.

From the measured figures per event, per record and per retrieval it prints the cost of
1M events, 100k retrievals and 10k records a month on AWS (`PRICES`, us-east-1) against
AgentCore Memory's published prices (`AGENTCORE`), both looked up on the date below. The
extraction model's tokens are an estimate, not a measurement (the local stack runs the local
model): each strategy reads each message once, plus its instructions per session.
"""

from __future__ import annotations

import math
import random
import tempfile
import time
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import environment
from bench.dynamodb_requests import local_stack
from bench.figures import report

ACTORS = 10
SESSIONS = 3  # per actor
TURNS = 10  # events per session
RECORDS = 100
RECORD_BATCH = 20
RETRIEVALS = 100
# The month the comparison prices.
MONTH = {"events": 1_000_000, "retrievals": 100_000, "records": 10_000}
PRICES_LOOKED_UP = "2026-11-27"
# AWS, us-east-1, on-demand, published prices on PRICES_LOOKED_UP (USD).
PRICES = {
    "http_api_request": 1.00 / 1_000_000,  # API Gateway HTTP API, first 300M a month
    "lambda_request": 0.20 / 1_000_000,
    "lambda_gb_second": 0.0000133334,  # arm64, as the template deploys
    "dynamodb_wru": 0.625 / 1_000_000,  # on-demand write request unit
    "dynamodb_rru": 0.125 / 1_000_000,
    "sqs_request": 0.40 / 1_000_000,
    "titan_embed_v2_token": 0.02 / 1_000_000,
    "nova_lite_input_token": 0.06 / 1_000_000,  # memkit's default curation model
    "nova_lite_output_token": 0.24 / 1_000_000,
    "opensearch_ocu_hour": 0.24,  # OpenSearch Serverless, indexing or search OCU
    "kms_key_month": 1.00,  # UseCustomerManagedKey (the default)
}
HOURS_A_MONTH = 730
# AgentCore Memory (USD), its pricing page on PRICES_LOOKED_UP.
AGENTCORE = {
    "event": 0.25 / 1_000,  # short-term memory: new events
    "retrieval": 0.50 / 1_000,  # long-term memory retrievals
    "record_month_builtin": 0.75 / 1_000,  # records stored a month, built-in strategies
    "record_month_self_managed": 0.25 / 1_000,  # built-in with overrides, self-managed
}
# The extraction estimate: the built-in strategies of the memory below, and the tokens an
# extracted record's text takes (its output).
STRATEGIES = ("discrete", "summary", "preferences")
RECORD_TOKENS = 30
FACTS = "/users/{actorId}/facts"
SUBJECTS = ["tea", "coffee", "Lisbon", "Oslo", "the piano", "running", "chess", "Python", "Rust"]
SAYINGS = [
    "I really like {s} and I think about it every morning before work.",
    "Last week I told my sister about {s}; she was surprised I still care about it.",
    "Could you remind me what I said about {s} the other day?",
    "My manager asked me to write a short report on {s} by Friday.",
]
ANSWERS = [
    "Noted. I will keep that in mind for our next conversation about {s}.",
    "Thanks for telling me; {s} comes up often, so I saved it.",
]


def _turn(text: str, role: str) -> dict[str, Any]:
    return {"conversational": {"content": {"text": text}, "role": role}}


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
        totals: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        for line in self.lines:
            total = totals[line["function"]]
            total["invocations"] += 1
            total["ms"] += float(line["ms"])
            total["records"] += int(line["records"])
            total["read_units"] += float(line["read_units"])
            total["write_units"] += float(line["write_units"])
            total["sqs_sends"] += int(line["sqs_sends"])
        return totals


def _settle(stack: Any, meter_dir: Path) -> float:
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


def _memory_sizes(function_memory: dict[str, int], by_function: dict[str, Any]) -> float:
    """GB-seconds of the phase: each function's handler time at its template memory size."""
    return sum(
        total["ms"] / 1000 * function_memory.get(name, 512) / 1024
        for name, total in by_function.items()
    )


def _function_memory() -> dict[str, int]:
    from memkit_dev.local.template import find_template, load_template

    template = load_template(find_template())
    default = template.get("Globals", {}).get("Function", {}).get("MemorySize", 128)
    return {
        name: int(resource["Properties"].get("MemorySize", default))
        for name, resource in template["Resources"].items()
        if resource.get("Type") == "AWS::Serverless::Function"
    }


def _indexed_tokens(stack: Any) -> int:
    """Tokens of every text the index holds: what an embedding model was given."""
    from memkit.tokens import estimate_tokens

    assert stack.opensearch is not None
    return sum(
        estimate_tokens(str(source.get("text") or ""))
        for index in stack.opensearch.indices()
        for _, source in stack.opensearch.documents(index)
    )


def _extraction_overhead_tokens() -> dict[str, int]:
    """Tokens of the instructions memkit's Bedrock model gets per extraction call."""
    from memkit.llm.bedrock import _SUMMARY_SYSTEM, _extract_system
    from memkit.tokens import estimate_tokens

    return {
        strategy: estimate_tokens(
            _SUMMARY_SYSTEM if strategy == "summary" else _extract_system(strategy, None)
        )
        for strategy in STRATEGIES
    }


def _unit_costs(phase: Phase, count: int, memory: dict[str, int]) -> dict[str, float]:
    """What one unit (event, record, retrieval) of the phase consumed, by AWS line item."""
    functions = phase.by_function()
    invocations = sum(total["invocations"] for total in functions.values())
    api = functions.get("ApiFunction", {}).get("invocations", 0)
    return {
        "api_requests": api / count,
        "lambda_invocations": invocations / count,
        "lambda_gb_seconds": _memory_sizes(memory, functions) / count,
        "wru": sum(t["write_units"] for t in functions.values()) / count,
        "rru": sum(t["read_units"] for t in functions.values()) / count,
        # A message is sent, received and deleted: three requests.
        "sqs_requests": 3 * sum(t["sqs_sends"] for t in functions.values()) / count,
        # the indexer's and curator's stream batches, the worker's queue batches
        "background_invocations": sum(
            t["invocations"] for name, t in functions.items() if name != "ApiFunction"
        )
        / count,
    }


def _dollars(unit: dict[str, float]) -> float:
    return (
        unit["api_requests"] * PRICES["http_api_request"]
        + unit["lambda_invocations"] * PRICES["lambda_request"]
        + unit["lambda_gb_seconds"] * PRICES["lambda_gb_second"]
        + unit["wru"] * PRICES["dynamodb_wru"]
        + unit["rru"] * PRICES["dynamodb_rru"]
        + unit["sqs_requests"] * PRICES["sqs_request"]
        + unit.get("embed_tokens", 0) * PRICES["titan_embed_v2_token"]
        + unit.get("llm_input_tokens", 0) * PRICES["nova_lite_input_token"]
        + unit.get("llm_output_tokens", 0) * PRICES["nova_lite_output_token"]
    )


def _report_unit(name: str, unit: dict[str, float]) -> None:
    for item, value in unit.items():
        report(f"agentcore.{name}.{item}", value, "per " + name.rstrip("s"))


def main() -> None:
    environment.apply()
    import boto3

    from memkit.tokens import estimate_tokens

    random.seed(7)
    meter_dir = Path(tempfile.mkdtemp(prefix="memkit-agentcore-meter-"))
    memory_sizes = _function_memory()
    options = {
        "meter_dir": meter_dir,
        "extraction_quiet_seconds": 1,
        "cleanup_interval_seconds": 0,
        "concurrency": 2,
    }
    with local_stack("agentcore", **options) as stack:
        session = boto3.Session(region_name="us-east-1")
        control = session.client("bedrock-agentcore-control", endpoint_url=stack.url)
        agent = session.client("bedrock-agentcore", endpoint_url=stack.url)
        memory = control.create_memory(
            name="BenchMemory",
            eventExpiryDuration=30,
            memoryStrategies=[
                {"semanticMemoryStrategy": {"name": "facts", "namespaces": [FACTS]}},
                {"summaryMemoryStrategy": {"name": "summaries"}},
                {"userPreferenceMemoryStrategy": {"name": "prefs"}},
            ],
        )["memory"]
        memory_id = memory["id"]
        facts = next(s["strategyId"] for s in memory["strategies"] if s["name"] == "facts")
        _settle(stack, meter_dir)
        tokens_before = _indexed_tokens(stack)

        # Events: ACTORS x SESSIONS sessions of TURNS turns.
        event_tokens = 0
        begin = time.time()
        clock = datetime.now(UTC) - timedelta(hours=1)
        for actor in range(ACTORS):
            for number in range(SESSIONS):
                for _ in range(TURNS):
                    subject = random.choice(SUBJECTS)
                    said = random.choice(SAYINGS).format(s=subject)
                    answer = random.choice(ANSWERS).format(s=subject)
                    event_tokens += estimate_tokens(said) + estimate_tokens(answer)
                    clock += timedelta(milliseconds=10)
                    agent.create_event(
                        memoryId=memory_id,
                        actorId=f"actor{actor}",
                        sessionId=f"session{actor}-{number}",
                        eventTimestamp=clock,
                        payload=[_turn(said, "USER"), _turn(answer, "ASSISTANT")],
                    )
        events = ACTORS * SESSIONS * TURNS
        events_phase = Phase(meter_dir, begin).close(_settle(stack, meter_dir))
        tokens_after_events = _indexed_tokens(stack)
        pages = agent.get_paginator("list_memory_records").paginate(
            memoryId=memory_id, namespacePath="/"
        )
        extracted = sum(len(page["memoryRecordSummaries"]) for page in pages)

        # Records: RECORDS facts written by BatchCreateMemoryRecords.
        begin = time.time()
        for start in range(0, RECORDS, RECORD_BATCH):
            batch = [
                {
                    "requestIdentifier": f"r{n}",
                    "namespaces": [f"/users/actor{n % ACTORS}/facts"],
                    "memoryStrategyId": facts,
                    "content": {"text": random.choice(SAYINGS).format(s=random.choice(SUBJECTS))},
                    "timestamp": datetime.now(UTC) - timedelta(minutes=1),
                }
                for n in range(start, start + RECORD_BATCH)
            ]
            answer = agent.batch_create_memory_records(memoryId=memory_id, records=batch)
            if answer["failedRecords"]:
                raise SystemExit(f"records refused: {answer['failedRecords'][:2]}")
        records_phase = Phase(meter_dir, begin).close(_settle(stack, meter_dir))
        tokens_after_records = _indexed_tokens(stack)

        # Retrievals: RETRIEVALS searches of one actor's facts.
        query_tokens = 0
        begin = time.time()
        for n in range(RETRIEVALS):
            query = f"What does the user think about {random.choice(SUBJECTS)}?"
            query_tokens += estimate_tokens(query)
            agent.retrieve_memory_records(
                memoryId=memory_id,
                namespace=f"/users/actor{n % ACTORS}/facts",
                searchCriteria={"searchQuery": query, "topK": 5},
            )
        retrievals_phase = Phase(meter_dir, begin).close(_settle(stack, meter_dir))

    overhead = _extraction_overhead_tokens()
    sessions = ACTORS * SESSIONS
    event_unit = _unit_costs(events_phase, events, memory_sizes)
    event_unit["embed_tokens"] = (tokens_after_events - tokens_before) / events
    # Estimate: each strategy reads each message once, plus its instructions per session.
    event_unit["llm_input_tokens"] = (
        len(STRATEGIES) * event_tokens + sessions * sum(overhead.values())
    ) / events
    record_unit = _unit_costs(records_phase, RECORDS, memory_sizes)
    record_unit["embed_tokens"] = (tokens_after_records - tokens_after_events) / RECORDS
    # The records extraction would write: their text is the model's output.
    record_unit["llm_output_tokens"] = RECORD_TOKENS
    retrieval_unit = _unit_costs(retrievals_phase, RETRIEVALS, memory_sizes)
    retrieval_unit["embed_tokens"] = query_tokens / RETRIEVALS

    report(
        "agentcore.events.records_extracted",
        1000 * extracted / events,
        "per 1,000 events",
        "the local model writes summaries only",
    )
    _report_unit("events", event_unit)
    _report_unit("records", record_unit)
    _report_unit("retrievals", retrieval_unit)
    for name, phase in (("events", events_phase), ("records", records_phase)):
        for function, total in sorted(phase.by_function().items()):
            report(
                f"agentcore.{name}.background.{function}",
                total["invocations"],
                f"invocations, {total['records']:.0f} records, {total['ms']:.0f} ms",
            )

    month_memkit = {
        "events": MONTH["events"] * _dollars(event_unit),
        "records": MONTH["records"] * _dollars(record_unit),
        "retrievals": MONTH["retrievals"] * _dollars(retrieval_unit),
        "opensearch_floor_2_ocu": 2 * HOURS_A_MONTH * PRICES["opensearch_ocu_hour"],
        "kms_key": PRICES["kms_key_month"],
    }
    month_agentcore = {
        "events": MONTH["events"] * AGENTCORE["event"],
        "retrievals": MONTH["retrievals"] * AGENTCORE["retrieval"],
        "records_builtin": MONTH["records"] * AGENTCORE["record_month_builtin"],
    }
    for item, dollars in month_memkit.items():
        report(f"agentcore.month.memkit.{item}", dollars, "USD")
    for item, dollars in month_agentcore.items():
        report(f"agentcore.month.agentcore.{item}", dollars, "USD")
    total_memkit = sum(month_memkit.values())
    total_agentcore = sum(month_agentcore.values())
    one_ocu = total_memkit - month_memkit["opensearch_floor_2_ocu"] / 2
    report("agentcore.month.memkit.total", total_memkit, "USD", "2 OCUs, standby replicas")
    report("agentcore.month.memkit.total_1_ocu", one_ocu, "USD", "no standby replicas")
    looked_up = f"prices of {PRICES_LOOKED_UP}"
    report("agentcore.month.agentcore.total", total_agentcore, "USD", looked_up)
    floor = month_memkit["opensearch_floor_2_ocu"] + month_memkit["kms_key"]
    per_event = AGENTCORE["event"] - _dollars(event_unit)
    report(
        "agentcore.month.break_even_events",
        math.ceil(floor / per_event),
        "events a month",
        "where AgentCore's event price pays for memkit's floor (2 OCUs), events alone",
    )


if __name__ == "__main__":
    main()
