"""boto3's own `bedrock-agentcore` and `bedrock-agentcore-control` clients against the local
stack as `make serve` runs it (bearer tokens checked): AgentCore Memory's operations answer
as AgentCore does, its errors raise the modelled exceptions (docs/agentcore.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from botocore.exceptions import ClientError

from memkit.config import IndexSettings
from memkit.identity import ADMIN, READ, WRITE
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.agentcore import CONTROL_PLANE, agentcore_client
from tests.waits import eventually

pytestmark = pytest.mark.integration

WHEN = datetime(2025, 6, 1, 12, 0, 0, 250_000, tzinfo=UTC)


def _token(stack: LocalStack, user: str, *scopes: str, tenant: str = "acme") -> str:
    assert stack.config.jwt is not None
    return mint(stack.config.jwt.data_dir, user, tenant, list(scopes))


@pytest.fixture(scope="module")
def clients(jwt_stack: LocalStack) -> dict[str, Any]:
    """Clients for ada and bob (users of tenant acme), acme's admin, and another tenant's
    admin."""
    url = jwt_stack.url
    return {
        "ada": agentcore_client(url, _token(jwt_stack, "ada", READ, WRITE)),
        "bob": agentcore_client(url, _token(jwt_stack, "bob", READ, WRITE)),
        "ops": agentcore_client(url, _token(jwt_stack, "ops", ADMIN)),
        "control": agentcore_client(url, _token(jwt_stack, "ops", ADMIN), CONTROL_PLANE),
        "ada-control": agentcore_client(url, _token(jwt_stack, "ada", READ), CONTROL_PLANE),
        "ada-unchecked": agentcore_client(
            url, _token(jwt_stack, "ada", READ, WRITE), validate=False
        ),
        "rival": agentcore_client(url, _token(jwt_stack, "ops", ADMIN, tenant="globex")),
    }


@pytest.fixture(scope="module")
def memory_id(clients: dict[str, Any]) -> str:
    made = clients["control"].create_memory(
        name="support",
        description="the support agent's memory",
        eventExpiryDuration=30,
        memoryStrategies=[
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
            {"summaryMemoryStrategy": {"name": "summaries"}},
        ],
    )
    return made["memory"]["id"]


def _turn(text: str, role: str = "USER") -> dict[str, Any]:
    return {"conversational": {"content": {"text": text}, "role": role}}


def test_create_memory_answers_an_active_memory_with_its_strategies(
    clients: dict[str, Any], memory_id: str
) -> None:
    memory = clients["control"].get_memory(memoryId=memory_id)["memory"]

    assert memory["id"] == memory_id
    assert memory_id.startswith("support-")
    assert len(memory_id) == len("support-") + 10
    assert memory["status"] == "ACTIVE"
    assert memory["eventExpiryDuration"] == 30
    assert memory["arn"].endswith(f":memory/{memory_id}")
    strategies = {s["name"]: s for s in memory["strategies"]}
    assert strategies["facts"]["type"] == "SEMANTIC"
    assert strategies["facts"]["namespaces"] == ["/users/{actorId}/facts"]
    assert strategies["summaries"]["type"] == "SUMMARIZATION"
    assert strategies["summaries"]["namespaces"] == [
        "/strategies/{memoryStrategyId}/actors/{actorId}/sessions/{sessionId}"
    ]
    assert strategies["facts"]["strategyId"].startswith("facts-")


def test_a_second_memory_of_one_name_is_the_validation_exception_the_sdk_reads(
    clients: dict[str, Any], memory_id: str
) -> None:
    control = clients["control"]

    with pytest.raises(control.exceptions.ValidationException) as raised:
        control.create_memory(name="support", eventExpiryDuration=7)

    # bedrock-agentcore's MemoryClient.create_or_get_memory: "already exists" in str(error)
    assert "already exists" in str(raised.value)
    assert raised.value.response["reason"] == "ResourceConflict"
    named = [m for m in control.list_memories()["memories"] if m["id"].startswith("support-")]
    assert [m["id"] for m in named] == [memory_id]


def test_a_create_memory_retried_with_its_client_token_answers_the_same_memory(
    clients: dict[str, Any],
) -> None:
    control = clients["control"]
    sent = {"name": "retried", "eventExpiryDuration": 7, "clientToken": "create-retried-1"}

    first = control.create_memory(**sent)["memory"]
    again = control.create_memory(**sent)["memory"]

    assert again["id"] == first["id"]
    assert again["status"] == "ACTIVE"


def test_an_agent_reads_its_memory_but_only_an_admin_creates_one(
    clients: dict[str, Any], memory_id: str
) -> None:
    assert clients["ada-control"].get_memory(memoryId=memory_id)["memory"]["id"] == memory_id

    with pytest.raises(clients["ada-control"].exceptions.AccessDeniedException):
        clients["ada-control"].create_memory(name="mine", eventExpiryDuration=3)


def test_create_event_then_get_event_round_trips_through_boto3(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    made = ada.create_event(
        memoryId=memory_id,
        actorId="ada",
        sessionId="trip",
        eventTimestamp=WHEN,
        payload=[_turn("I fly to Lisbon on Friday"), _turn("Noted!", "ASSISTANT")],
        metadata={"channel": {"stringValue": "chat"}},
    )["event"]

    got = ada.get_event(
        memoryId=memory_id, actorId="ada", sessionId="trip", eventId=made["eventId"]
    )["event"]

    assert got == made
    assert got["eventTimestamp"] == WHEN
    assert [p["conversational"]["role"] for p in got["payload"]] == ["USER", "ASSISTANT"]
    assert got["metadata"] == {"channel": {"stringValue": "chat"}}
    millis, digits = got["eventId"].split("#")
    assert int(millis) == int(WHEN.timestamp() * 1000)
    assert int(digits, 16) >= 0


def test_an_unknown_memory_is_resource_not_found(clients: dict[str, Any]) -> None:
    ada = clients["ada"]
    with pytest.raises(ada.exceptions.ResourceNotFoundException) as raised:
        ada.create_event(
            memoryId="nothing-0123456789",
            actorId="ada",
            sessionId="s",
            eventTimestamp=WHEN,
            payload=[_turn("hi")],
        )
    assert "nothing-0123456789" in raised.value.response["Error"]["Message"]


def test_another_tenant_never_sees_the_memory(clients: dict[str, Any], memory_id: str) -> None:
    rival = clients["rival"]
    with pytest.raises(rival.exceptions.ResourceNotFoundException):
        rival.list_sessions(memoryId=memory_id, actorId="ada")


def test_bad_input_is_a_validation_exception_naming_the_field(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    with pytest.raises(ada.exceptions.ValidationException) as raised:
        ada.create_event(
            memoryId=memory_id,
            actorId="ada",
            sessionId="no spaces allowed",
            eventTimestamp=WHEN,
            payload=[_turn("hi")],
        )
    error = raised.value.response
    assert error["reason"] == "FieldValidationFailed"
    assert error["fieldList"][0]["name"] == "sessionId"
    assert "pattern" in error["fieldList"][0]["message"]
    assert error["ResponseMetadata"]["HTTPStatusCode"] == 400


def test_a_payload_with_two_members_is_refused_as_the_service_refuses_it(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada-unchecked"]  # botocore itself would refuse it before sending
    with pytest.raises(ada.exceptions.ValidationException) as raised:
        ada.create_event(
            memoryId=memory_id,
            actorId="ada",
            sessionId="s",
            eventTimestamp=WHEN,
            payload=[{"conversational": {"content": {"text": "x"}, "role": "USER"}, "blob": "y"}],
        )
    error = raised.value.response
    assert error["reason"] == "FieldValidationFailed"
    assert error["fieldList"][0]["name"].startswith("payload.0")
    assert "exactly one of" in error["fieldList"][0]["message"]


def test_naming_another_users_actor_is_access_denied(
    clients: dict[str, Any], memory_id: str
) -> None:
    bob = clients["bob"]
    with pytest.raises(bob.exceptions.AccessDeniedException):
        bob.list_events(memoryId=memory_id, actorId="ada", sessionId="trip")


def test_an_operation_memkit_does_not_serve_answers_the_services_error(
    clients: dict[str, Any], memory_id: str
) -> None:
    ops = clients["ops"]
    with pytest.raises(ops.exceptions.ValidationException) as raised:
        ops.start_memory_extraction_job(memoryId=memory_id, extractionJob={"jobId": "j1"})
    assert "does not serve StartMemoryExtractionJob" in str(raised.value)


def _session(client: Any, memory_id: str, session: str, count: int, **extra: Any) -> list[str]:
    """`count` events of ada in `session`, a second apart: their ids, oldest first."""
    return [
        client.create_event(
            memoryId=memory_id,
            actorId="ada",
            sessionId=session,
            eventTimestamp=WHEN.replace(second=n),
            payload=[_turn(f"turn {n}")],
            **extra,
        )["event"]["eventId"]
        for n in range(count)
    ]


def test_the_list_events_paginator_walks_every_page_newest_first(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    ids = _session(ada, memory_id, "paged", 5)

    pages = list(
        ada.get_paginator("list_events").paginate(
            memoryId=memory_id,
            actorId="ada",
            sessionId="paged",
            PaginationConfig={"PageSize": 2},
        )
    )

    assert [len(page["events"]) for page in pages] == [2, 2, 1]
    assert [e["eventId"] for page in pages for e in page["events"]] == list(reversed(ids))


def test_list_events_filters_by_metadata_and_leaves_payloads_out_when_asked(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    tagged = _session(ada, memory_id, "tagged", 1, metadata={"mood": {"stringValue": "calm"}})
    _session(ada, memory_id, "tagged", 1)  # same time, no metadata: another event

    listed = ada.list_events(
        memoryId=memory_id,
        actorId="ada",
        sessionId="tagged",
        includePayloads=False,
        filter={
            "eventMetadata": [
                {
                    "left": {"metadataKey": "mood"},
                    "operator": "EQUALS_TO",
                    "right": {"metadataValue": {"stringValue": "calm"}},
                }
            ]
        },
    )["events"]

    assert [e["eventId"] for e in listed] == tagged
    assert listed[0]["payload"] == []


def test_a_branch_with_its_parents_through_boto3(clients: dict[str, Any], memory_id: str) -> None:
    ada = clients["ada"]
    main = _session(ada, memory_id, "forked", 3)
    alt = ada.create_event(
        memoryId=memory_id,
        actorId="ada",
        sessionId="forked",
        eventTimestamp=WHEN.replace(second=30),
        payload=[_turn("what if")],
        branch={"name": "what-if", "rootEventId": main[0]},
    )["event"]

    def branch(**chosen: Any) -> list[str]:
        found = ada.list_events(
            memoryId=memory_id, actorId="ada", sessionId="forked", filter={"branch": chosen}
        )["events"]
        return [e["eventId"] for e in found]

    assert branch(name="what-if") == [alt["eventId"]]
    assert branch(name="what-if", includeParentBranches=True) == [alt["eventId"], main[0]]


def test_a_retried_create_event_with_its_client_token_is_one_event(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    sent = {
        "memoryId": memory_id,
        "actorId": "ada",
        "sessionId": "retried",
        "eventTimestamp": WHEN,
        "payload": [_turn("only once")],
        "clientToken": "3f1c2a9e-retry",
    }

    first = ada.create_event(**sent)["event"]
    second = ada.create_event(**sent)["event"]

    assert second == first
    listed = ada.list_events(memoryId=memory_id, actorId="ada", sessionId="retried")["events"]
    assert len(listed) == 1
    with pytest.raises(ada.exceptions.ValidationException) as raised:
        ada.create_event(**{**sent, "payload": [_turn("something else")]})
    assert raised.value.response["reason"] == "IdempotentParameterMismatchException"


def test_blob_payloads_come_back_as_the_document_sent(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    blob = {"kind": "screenshot", "pages": [1, 2], "note": None}

    made = ada.create_event(
        memoryId=memory_id,
        actorId="ada",
        sessionId="blobs",
        eventTimestamp=WHEN,
        payload=[{"blob": blob}],
    )["event"]
    got = ada.get_event(
        memoryId=memory_id, actorId="ada", sessionId="blobs", eventId=made["eventId"]
    )["event"]

    assert got["payload"] == [{"blob": blob}]


def test_delete_event_then_get_event_is_resource_not_found(
    clients: dict[str, Any], memory_id: str
) -> None:
    ada = clients["ada"]
    [event_id] = _session(ada, memory_id, "deleting", 1)
    named = {"memoryId": memory_id, "actorId": "ada", "sessionId": "deleting", "eventId": event_id}

    assert ada.delete_event(**named)["eventId"] == event_id

    with pytest.raises(ada.exceptions.ResourceNotFoundException):
        ada.get_event(**named)


def test_sessions_and_actors_page_through_their_paginators(
    clients: dict[str, Any], memory_id: str
) -> None:
    ops = clients["ops"]
    for n in range(3):
        ops.create_event(
            memoryId=memory_id,
            actorId="carol",
            sessionId=f"carol-{n}",
            eventTimestamp=WHEN,
            payload=[_turn("hi")],
        )

    sessions = [
        s["sessionId"]
        for page in ops.get_paginator("list_sessions").paginate(
            memoryId=memory_id, actorId="carol", PaginationConfig={"PageSize": 2}
        )
        for s in page["sessionSummaries"]
    ]
    actors = [
        a["actorId"]
        for page in ops.get_paginator("list_actors").paginate(
            memoryId=memory_id, PaginationConfig={"PageSize": 1}
        )
        for a in page["actorSummaries"]
    ]

    assert sorted(sessions) == ["carol-0", "carol-1", "carol-2"]
    assert "carol" in actors
    assert "ada" in actors
    assert clients["bob"].list_actors(memoryId=memory_id)["actorSummaries"] == []


def test_list_memories_pages_through_its_paginator(clients: dict[str, Any], memory_id: str) -> None:
    control = clients["control"]
    extra = control.create_memory(name="scratch", eventExpiryDuration=3)["memory"]["id"]

    listed = [
        m["id"]
        for page in control.get_paginator("list_memories").paginate(
            PaginationConfig={"PageSize": 1}
        )
        for m in page["memories"]
    ]

    assert {memory_id, extra} <= set(listed)
    assert control.delete_memory(memoryId=extra)["status"] == "DELETING"
    assert eventually(lambda: _gone(control, extra), timeout=120)


def _gone(control: Any, memory_id: str) -> bool:
    """Whether GetMemory answers ResourceNotFoundException (what the SDK's
    delete_memory_and_wait polls for)."""
    try:
        control.get_memory(memoryId=memory_id)
    except ClientError as error:
        return error.response["Error"]["Code"] == "ResourceNotFoundException"
    return False


def _holdings(client: Any, memory_id: str, session: str, tag: str) -> tuple[Any, ...]:
    """What a memory holds of ada, read through AgentCore's API: a session's events, and the
    records a retrieval finds."""
    events = client.list_events(memoryId=memory_id, actorId="ada", sessionId=session)["events"]
    found = client.retrieve_memory_records(
        memoryId=memory_id,
        namespace="/users/ada/facts",
        searchCriteria={"searchQuery": f"{tag} tea"},
    )["memoryRecordSummaries"]
    return tuple(e["eventId"] for e in events), tuple(r["memoryRecordId"] for r in found)


def test_delete_memory_deletes_what_it_holds_and_no_other_memorys_data(
    jwt_stack: LocalStack, clients: dict[str, Any], memory_id: str
) -> None:
    control, ada = clients["control"], clients["ada"]
    facts = {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}}
    made = control.create_memory(name="doomed", eventExpiryDuration=7, memoryStrategies=[facts])
    doomed = made["memory"]["id"]
    record_ids = {}
    # Given ada's events and records in a memory, and in another one (the module's)
    for memory, tag in ((doomed, "green"), (memory_id, "black")):
        ada.create_event(
            memoryId=memory,
            actorId="ada",
            sessionId=f"{tag}-tea",
            eventTimestamp=datetime.now(UTC),
            payload=[_turn(f"I drink {tag} tea")],
        )
        made = ada.batch_create_memory_records(
            memoryId=memory,
            records=[
                {
                    "requestIdentifier": "fact",
                    "namespaces": ["/users/ada/facts"],
                    "content": {"text": f"ada drinks {tag} tea"},
                    "timestamp": datetime.now(UTC),
                }
            ],
        )
        record_ids[memory] = made["successfulRecords"][0]["memoryRecordId"]
        assert eventually(lambda m=memory, t=tag: all(_holdings(ada, m, f"{t}-tea", t)))
    kept = _holdings(ada, memory_id, "black-tea", "black")

    # When the memory is deleted
    answer = control.delete_memory(memoryId=doomed)

    # Then it is DELETING, its data out of reach at once, and gone once its job has run
    assert answer["status"] == "DELETING"
    with pytest.raises(ada.exceptions.ResourceNotFoundException):
        ada.list_events(memoryId=doomed, actorId="ada", sessionId="green-tea")
    assert eventually(lambda: _gone(control, doomed), timeout=120)
    admin = {"Authorization": f"Bearer {_token(jwt_stack, 'ops', ADMIN)}"}
    with httpx.Client(base_url=jwt_stack.url, headers=admin, timeout=30) as rest:
        in_it = {"namespace": doomed, "user_id": "ada"}
        assert rest.get("/v1/working-memory/green-tea", params=in_it).status_code == 404
        assert rest.get("/v1/working-memory", params=in_it).json()["sessions"] == []
        assert rest.get(f"/v1/long-term-memory/{record_ids[doomed]}").status_code == 404
        query = {"text": "green tea", "namespace": {"eq": doomed}}
        assert rest.post("/v1/long-term-memory/search", json=query).json()["memories"] == []
        # and the other memory's are as they were
        other = rest.get(f"/v1/long-term-memory/{record_ids[memory_id]}")
        assert other.status_code == 200
    assert _holdings(ada, memory_id, "black-tea", "black") == kept
    assert jwt_stack.opensearch is not None
    docs = jwt_stack.opensearch.documents(IndexSettings().opensearch_index)
    assert [d for _, d in docs if d.get("namespace") == doomed and not d.get("deleted")] == []
