"""AgentCore extraction on the local stack (`make serve`): events created with boto3's own
`bedrock-agentcore` client are mined in the background (the curator on the table's stream,
the work queue, the memory worker with the local model, as on AWS) into records under the
strategies' namespaces, which RetrieveMemoryRecords then finds; events created with
extractionMode SKIP are never mined (docs/agentcore.md "Extraction"). The local model writes
summaries but finds no facts; facts on Bedrock: tests/integration/test_curation.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memkit.identity import ADMIN, READ, WRITE
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.agentcore import CONTROL_PLANE, agentcore_client
from tests.waits import eventually

pytestmark = pytest.mark.integration

# The jwt_stack of this module extracts as soon as a session is written.
JWT_STACK_OPTIONS = {"extraction_quiet_seconds": 0}


@pytest.fixture(scope="module")
def clients(jwt_stack: LocalStack) -> dict[str, Any]:
    assert jwt_stack.config.jwt is not None
    keys = jwt_stack.config.jwt.data_dir
    return {
        "ada": agentcore_client(jwt_stack.url, mint(keys, "ada", "acme", [READ, WRITE])),
        "control": agentcore_client(
            jwt_stack.url, mint(keys, "ops", "acme", [ADMIN]), CONTROL_PLANE
        ),
    }


def _event(
    client: Any, memory_id: str, session: str, *turns: tuple[str, str], **extra: Any
) -> None:
    client.create_event(
        memoryId=memory_id,
        actorId="ada",
        sessionId=session,
        eventTimestamp=datetime.now(UTC),
        payload=[{"conversational": {"content": {"text": t}, "role": r}} for r, t in turns],
        **extra,
    )


def test_events_are_summarised_into_the_strategy_namespace_and_skipped_ones_are_not(
    clients: dict[str, Any],
) -> None:
    ada = clients["ada"]
    made = clients["control"].create_memory(
        name="travel",
        eventExpiryDuration=30,
        memoryStrategies=[
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
            {
                "summaryMemoryStrategy": {
                    "name": "sums",
                    "namespaces": ["/summaries/{actorId}/{sessionId}"],
                }
            },
        ],
    )["memory"]
    memory_id = made["id"]
    sums = next(s["strategyId"] for s in made["strategies"] if s["name"] == "sums")

    # Given an event the agent asked not to mine, then a conversation
    _event(
        ada,
        memory_id,
        "trip",
        ("USER", "The zebra password for the vault is hunter2, keep it secret."),
        extractionMode="SKIP",
    )
    _event(
        ada,
        memory_id,
        "trip",
        ("USER", "I am planning a trip to Lisbon in May with my sister."),
        ("ASSISTANT", "Lisbon in May is lovely, your trip will be warm and sunny."),
    )

    # When the background extraction has run, the session's summary is a record
    def summary() -> list[dict[str, Any]]:
        found = ada.retrieve_memory_records(
            memoryId=memory_id,
            namespacePath="/summaries/ada",
            searchCriteria={"searchQuery": "Lisbon trip in May"},
        )["memoryRecordSummaries"]
        return [s for s in found if "Lisbon" in s["content"]["text"]]

    found = eventually(summary, timeout=90)

    # Then it is in the strategy's namespace, with its id, and says nothing of the SKIP event
    assert found, "no summary record after 90 s"
    (record,) = found
    assert record["namespaces"] == ["/summaries/ada/trip"]
    assert record["memoryStrategyId"] == sums
    assert "zebra" not in record["content"]["text"]
    assert "hunter2" not in record["content"]["text"]

    # And a later event updates the same record (one summary per session)
    _event(ada, memory_id, "trip", ("USER", "We will also take the train to Porto for two days."))

    def updated() -> list[dict[str, Any]]:
        listed = ada.list_memory_records(memoryId=memory_id, namespace="/summaries/ada/trip")
        texts = listed["memoryRecordSummaries"]
        return texts if any("Porto" in s["content"]["text"] for s in texts) else []

    again = eventually(updated, timeout=90)
    assert again, "the summary did not take the later event in 90 s"
    assert [s["memoryRecordId"] for s in again] == [record["memoryRecordId"]]
    # the local model finds no facts: the semantic strategy wrote nothing
    facts = ada.list_memory_records(memoryId=memory_id, namespace="/users/ada/facts")
    assert facts["memoryRecordSummaries"] == []
