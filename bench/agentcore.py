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
1M events, 100k retrievals and 10k records a month on AWS (bench.billing's prices, us-east-1)
against AgentCore Memory's published prices (`AGENTCORE`), both looked up on the same day. The
extraction model's tokens are an estimate, not a measurement (the local stack runs the local
model): each strategy reads each message once, plus its instructions per session.
"""

from __future__ import annotations

import math
import random
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from bench import billing, environment
from bench.figures import report
from bench.sayings import ANSWERS, SAYINGS, SUBJECTS

ACTORS = 10
SESSIONS = 3  # per actor
TURNS = 10  # events per session
RECORDS = 100
RECORD_BATCH = 20
RETRIEVALS = 100
# The month the comparison prices.
MONTH = {"events": 1_000_000, "retrievals": 100_000, "records": 10_000}
# AgentCore Memory (USD), its pricing page on billing.PRICES_LOOKED_UP.
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


def _turn(text: str, role: str) -> dict[str, Any]:
    return {"conversational": {"content": {"text": text}, "role": role}}


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


def _report_unit(name: str, unit: dict[str, float]) -> None:
    for item, value in unit.items():
        report(f"agentcore.{name}.{item}", value, "per " + name.rstrip("s"))


def main() -> None:
    environment.apply()
    import boto3

    from memkit.tokens import estimate_tokens

    random.seed(7)
    memory_sizes = billing.function_memory()
    with billing.metered_stack("agentcore") as (stack, meter_dir):
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
        billing.settle(stack, meter_dir)
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
        events_phase = billing.Phase(meter_dir, begin).close(billing.settle(stack, meter_dir))
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
        records_phase = billing.Phase(meter_dir, begin).close(billing.settle(stack, meter_dir))
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
        retrievals_phase = billing.Phase(meter_dir, begin).close(billing.settle(stack, meter_dir))

    overhead = _extraction_overhead_tokens()
    sessions = ACTORS * SESSIONS
    event_unit = billing.usage_per_unit(events_phase, events, memory_sizes)
    event_unit["embed_tokens"] = (tokens_after_events - tokens_before) / events
    # Estimate: each strategy reads each message once, plus its instructions per session.
    event_unit["llm_input_tokens"] = (
        len(STRATEGIES) * event_tokens + sessions * sum(overhead.values())
    ) / events
    record_unit = billing.usage_per_unit(records_phase, RECORDS, memory_sizes)
    record_unit["embed_tokens"] = (tokens_after_records - tokens_after_events) / RECORDS
    # The records extraction would write: their text is the model's output.
    record_unit["llm_output_tokens"] = RECORD_TOKENS
    retrieval_unit = billing.usage_per_unit(retrievals_phase, RETRIEVALS, memory_sizes)
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
        "events": MONTH["events"] * billing.dollars(event_unit),
        "records": MONTH["records"] * billing.dollars(record_unit),
        "retrievals": MONTH["retrievals"] * billing.dollars(retrieval_unit),
        "opensearch_floor_2_ocu": billing.ocu_floor_month(2),
        "kms_key": billing.PRICES["kms_key_month"],
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
    report("agentcore.month.memkit.total", total_memkit, "USD", "2 OCUs, OpenSearchMinCapacity 1")
    looked_up = f"prices of {billing.PRICES_LOOKED_UP}"
    report("agentcore.month.agentcore.total", total_agentcore, "USD", looked_up)
    floor = month_memkit["opensearch_floor_2_ocu"] + month_memkit["kms_key"]
    per_event = AGENTCORE["event"] - billing.dollars(event_unit)
    report(
        "agentcore.month.break_even_events",
        math.ceil(floor / per_event),
        "events a month",
        "where AgentCore's event price pays for memkit's floor (2 OCUs), events alone",
    )


if __name__ == "__main__":
    main()
