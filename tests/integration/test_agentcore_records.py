"""AgentCore's memory records through boto3's own `bedrock-agentcore` client against the local
stack (`make serve`, bearer tokens checked): records written by the batch operations are
memkit long-term records, indexed by the real stream indexer and found again by meaning, by
namespace and path, strategy and metadata; each batch reports each record; only an actor's
own records (or an admin) are reachable, and another tenant reaches nothing
(docs/agentcore.md "Record mapping", "Retrieval and filters")."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from memkit.identity import ADMIN, READ, WRITE
from memkit_dev.local.auth import mint
from memkit_dev.local.stack import LocalStack
from tests.agentcore import CONTROL_PLANE, agentcore_client
from tests.waits import eventually

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def _token(stack: LocalStack, user: str, *scopes: str, tenant: str = "acme") -> str:
    assert stack.config.jwt is not None
    return mint(stack.config.jwt.data_dir, user, tenant, list(scopes))


@pytest.fixture(scope="module")
def clients(jwt_stack: LocalStack) -> dict[str, Any]:
    url = jwt_stack.url
    return {
        "ada": agentcore_client(url, _token(jwt_stack, "ada", READ, WRITE)),
        "bob": agentcore_client(url, _token(jwt_stack, "bob", READ, WRITE)),
        "ada-unchecked": agentcore_client(
            url, _token(jwt_stack, "ada", READ, WRITE), validate=False
        ),
        "ops": agentcore_client(url, _token(jwt_stack, "ops", ADMIN)),
        "control": agentcore_client(url, _token(jwt_stack, "ops", ADMIN), CONTROL_PLANE),
        "rival": agentcore_client(url, _token(jwt_stack, "ops", ADMIN, tenant="globex")),
        "rival-control": agentcore_client(
            url, _token(jwt_stack, "ops", ADMIN, tenant="globex"), CONTROL_PLANE
        ),
    }


@pytest.fixture(scope="module")
def memory(clients: dict[str, Any]) -> dict[str, Any]:
    """acme's memory: facts per user, preferences at AgentCore's default namespace, indexed
    metadata keys of each type."""
    made = clients["control"].create_memory(
        name="records",
        eventExpiryDuration=30,
        memoryStrategies=[
            {"semanticMemoryStrategy": {"name": "facts", "namespaces": ["/users/{actorId}/facts"]}},
            {"userPreferenceMemoryStrategy": {"name": "prefs"}},
        ],
        indexedKeys=[
            {"key": "priority", "type": "STRING"},
            {"key": "tags", "type": "STRINGLIST"},
            {"key": "score", "type": "NUMBER"},
        ],
    )["memory"]
    return {
        "id": made["id"],
        "facts": next(s["strategyId"] for s in made["strategies"] if s["name"] == "facts"),
        "prefs": next(s["strategyId"] for s in made["strategies"] if s["name"] == "prefs"),
    }


def _record(
    ident: str, text: str, namespace: str, strategy: str | None = None, **metadata: Any
) -> dict[str, Any]:
    record: dict[str, Any] = {
        "requestIdentifier": ident,
        "namespaces": [namespace],
        "content": {"text": text},
        "timestamp": NOW - timedelta(minutes=5),
    }
    if strategy is not None:
        record["memoryStrategyId"] = strategy
    if metadata:
        record["metadata"] = metadata
    return record


def _create(client: Any, memory_id: str, *records: dict[str, Any], **extra: Any) -> list[str]:
    """The ids of the records created (every one must succeed)."""
    answer = client.batch_create_memory_records(memoryId=memory_id, records=list(records), **extra)
    assert answer["failedRecords"] == []
    by_request = {r["requestIdentifier"]: r["memoryRecordId"] for r in answer["successfulRecords"]}
    return [by_request[r["requestIdentifier"]] for r in records]


def _retrieved(client: Any, memory_id: str, query: str, **scope: Any) -> list[dict[str, Any]]:
    criteria = {"searchQuery": query, **scope.pop("criteria", {})}
    answer = client.retrieve_memory_records(memoryId=memory_id, searchCriteria=criteria, **scope)
    return list(answer["memoryRecordSummaries"])


def _texts(summaries: list[dict[str, Any]]) -> list[str]:
    return [s["content"]["text"] for s in summaries]


def _listed(client: Any, memory_id: str, **scope: Any) -> list[dict[str, Any]]:
    pages = client.get_paginator("list_memory_records").paginate(memoryId=memory_id, **scope)
    return [s for page in pages for s in page["memoryRecordSummaries"]]


def test_records_are_retrieved_by_meaning_in_their_namespace_and_strategy(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, memory_id = clients["ada"], memory["id"]
    prefs = f"/strategies/{memory['prefs']}/actors/ada"
    ids = _create(
        ada,
        memory_id,
        _record("tea", "Ada drinks green tea every morning", "/users/ada/facts", memory["facts"]),
        _record("city", "Ada lives in Lisbon near the river", "/users/ada/facts", memory["facts"]),
        _record("cat", "Ada has a cat called Pixel", "/users/ada/facts", memory["facts"]),
        _record("style", "Ada prefers short answers", prefs, memory["prefs"]),
    )

    # When the indexer has caught up, a query finds the closest record first
    found = eventually(
        lambda: (
            len(_listed(ada, memory_id, namespacePath="/")) >= 4
            and _retrieved(
                ada,
                memory_id,
                "what does Ada drink in the morning?",
                namespace="/users/ada/facts",
                criteria={"topK": 2},
            )
        )
    )

    assert found, "the records were not retrievable after 60 s"
    assert len(found) == 2
    assert found[0]["memoryRecordId"] == ids[0]
    assert found[0]["content"]["text"] == "Ada drinks green tea every morning"
    assert found[0]["namespaces"] == ["/users/ada/facts"]
    assert found[0]["memoryStrategyId"] == memory["facts"]
    assert found[0]["score"] >= found[1]["score"]
    assert isinstance(found[0]["createdAt"], datetime)
    assert abs(found[0]["timestamp"] - (NOW - timedelta(minutes=5))) < timedelta(seconds=1)
    # the namespace is exact, the path takes the hierarchy, the strategy narrows
    in_facts = _retrieved(ada, memory_id, "Ada", namespace="/users/ada/facts")
    assert "Ada prefers short answers" not in _texts(in_facts)
    under_root = _retrieved(ada, memory_id, "Ada", namespacePath="/")
    assert "Ada prefers short answers" in _texts(under_root)
    assert _retrieved(ada, memory_id, "Ada", namespace="/users/ada") == []
    by_strategy = _retrieved(
        ada, memory_id, "Ada", namespacePath="/", criteria={"memoryStrategyId": memory["prefs"]}
    )
    assert _texts(by_strategy) == ["Ada prefers short answers"]


def test_metadata_filters_narrow_a_retrieval_with_every_operator(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ops, memory_id = clients["ops"], memory["id"]
    space = "/users/meta/facts"
    _create(
        ops,
        memory_id,
        _record(
            "a",
            "The billing export failed twice",
            space,
            priority={"stringValue": "high"},
            tags={"stringListValue": ["billing", "urgent"]},
            score={"numberValue": 9},
        ),
        _record(
            "b",
            "The billing page loads slowly",
            space,
            priority={"stringValue": "low"},
            tags={"stringListValue": ["billing"]},
            score={"numberValue": 2},
        ),
        _record("c", "The billing address changed", space),
    )
    eventually(lambda: len(_listed(ops, memory_id, namespace=space)) == 3)

    def found(*filters: dict[str, Any]) -> set[str]:
        summaries = _retrieved(
            ops,
            memory_id,
            "billing problems",
            namespace=space,
            criteria={"metadataFilters": list(filters)},
        )
        return {s["content"]["text"].split()[2] for s in summaries}

    def expression(key: str, operator: str, **value: Any) -> dict[str, Any]:
        made: dict[str, Any] = {"left": {"metadataKey": key}, "operator": operator}
        if value:
            made["right"] = {"metadataValue": value}
        return made

    assert found(expression("priority", "EQUALS_TO", stringValue="high")) == {"export"}
    assert found(expression("tags", "CONTAINS", stringListValue=["billing"])) == {"export", "page"}
    assert found(expression("tags", "CONTAINS", stringListValue=["urgent", "billing"])) == {
        "export"
    }
    assert found(expression("score", "GREATER_THAN", numberValue=5)) == {"export"}
    assert found(expression("score", "LESS_THAN_OR_EQUALS", numberValue=2)) == {"page"}
    assert found(expression("priority", "EXISTS")) == {"export", "page"}
    assert found(expression("priority", "NOT_EXISTS")) == {"address"}
    hour_ago = NOW - timedelta(hours=1)
    created = "x-amz-agentcore-memory-createdAt"
    assert found(expression(created, "AFTER", dateTimeValue=hour_ago)) == {
        "export",
        "page",
        "address",
    }
    assert found(expression(created, "BEFORE", dateTimeValue=hour_ago)) == set()
    # two filters must both hold
    both = found(
        expression("priority", "EXISTS"),
        expression("score", "GREATER_THAN_OR_EQUALS", numberValue=2),
    )
    assert both == {"export", "page"}
    # an operator the key's type does not take, a system key compared but by time, and a
    # blank query are refused
    with pytest.raises(ops.exceptions.ValidationException):
        found(expression("priority", "GREATER_THAN", numberValue=1))
    with pytest.raises(ops.exceptions.ValidationException):
        found(expression(created, "EXISTS"))
    with pytest.raises(ops.exceptions.ValidationException):
        _retrieved(ops, memory_id, "   ", namespace=space)
    # a key the memory does not index is refused, naming the filter
    with pytest.raises(ops.exceptions.ValidationException) as raised:
        found(expression("colour", "EQUALS_TO", stringValue="red"))
    error = raised.value.response
    assert error["fieldList"][0]["name"] == "searchCriteria.metadataFilters.0.left.metadataKey"
    assert "indexed" in error["Error"]["Message"]


def test_a_batch_reports_each_record_and_does_the_ones_allowed(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, bob, memory_id = clients["ada"], clients["bob"], memory["id"]
    (bobs,) = _create(bob, memory_id, _record("b1", "Bob likes chess", "/users/bob/facts"))

    created = ada.batch_create_memory_records(
        memoryId=memory_id,
        records=[
            _record("mine", "Ada plays the cello", "/users/ada/facts"),
            _record("theirs", "Bob plays the drums", "/users/bob/facts"),
            _record("shared", "The office opens at 9", "/global/notes"),
            _record("nostrategy", "Ada runs", "/users/ada/facts", "nope-0123456789"),
        ],
    )

    assert [r["requestIdentifier"] for r in created["successfulRecords"]] == ["mine"]
    assert created["successfulRecords"][0]["status"] == "SUCCEEDED"
    failed = {r["requestIdentifier"]: r for r in created["failedRecords"]}
    assert set(failed) == {"theirs", "shared", "nostrategy"}
    assert {r["status"] for r in failed.values()} == {"FAILED"}
    assert failed["theirs"]["errorCode"] == 403
    assert "another actor" in failed["theirs"]["errorMessage"]
    assert failed["shared"]["errorCode"] == 403
    assert failed["nostrategy"]["errorCode"] == 400
    mine = created["successfulRecords"][0]["memoryRecordId"]
    assert mine.startswith("mem-")
    assert 40 <= len(mine) <= 50

    # When ada updates her record, bob's, and one that does not exist
    missing = "mem-" + "0" * 40
    updated = ada.batch_update_memory_records(
        memoryId=memory_id,
        records=[
            {"memoryRecordId": mine, "timestamp": NOW, "content": {"text": "Ada plays the viola"}},
            {"memoryRecordId": bobs, "timestamp": NOW, "content": {"text": "Bob quits chess"}},
            {"memoryRecordId": missing, "timestamp": NOW, "content": {"text": "nothing"}},
        ],
    )
    assert [r["memoryRecordId"] for r in updated["successfulRecords"]] == [mine]
    codes = {r["memoryRecordId"]: r["errorCode"] for r in updated["failedRecords"]}
    assert codes == {bobs: 403, missing: 404}
    assert ada.get_memory_record(memoryId=memory_id, memoryRecordId=mine)["memoryRecord"][
        "content"
    ] == {"text": "Ada plays the viola"}
    assert bob.get_memory_record(memoryId=memory_id, memoryRecordId=bobs)["memoryRecord"][
        "content"
    ] == {"text": "Bob likes chess"}

    # And deletes them
    deleted = ada.batch_delete_memory_records(
        memoryId=memory_id,
        records=[{"memoryRecordId": mine}, {"memoryRecordId": bobs}, {"memoryRecordId": missing}],
    )
    assert [r["memoryRecordId"] for r in deleted["successfulRecords"]] == [mine]
    codes = {r["memoryRecordId"]: r["errorCode"] for r in deleted["failedRecords"]}
    assert codes == {bobs: 403, missing: 404}
    with pytest.raises(ada.exceptions.ResourceNotFoundException):
        ada.get_memory_record(memoryId=memory_id, memoryRecordId=mine)
    assert bob.get_memory_record(memoryId=memory_id, memoryRecordId=bobs)["memoryRecord"]


def test_list_memory_records_pages_through_every_record_once(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ops, memory_id = clients["ops"], memory["id"]
    space = "/users/pages/facts"
    records = [_record(f"r{n}", f"Note number {n} about paging", space) for n in range(25)]
    ids = _create(ops, memory_id, *records)
    eventually(lambda: len(_listed(ops, memory_id, namespace=space)) == 25)

    first = ops.list_memory_records(memoryId=memory_id, namespace=space, maxResults=10)
    second = ops.list_memory_records(
        memoryId=memory_id, namespace=space, maxResults=10, nextToken=first["nextToken"]
    )
    third = ops.list_memory_records(
        memoryId=memory_id, namespace=space, maxResults=10, nextToken=second["nextToken"]
    )
    pages = [first, second, third]

    assert [len(p["memoryRecordSummaries"]) for p in pages] == [10, 10, 5]
    assert "nextToken" not in third
    seen = [s["memoryRecordId"] for p in pages for s in p["memoryRecordSummaries"]]
    assert sorted(seen) == sorted(ids)
    created = [s["createdAt"] for p in pages for s in p["memoryRecordSummaries"]]
    assert created == sorted(created, reverse=True)  # newest first
    with pytest.raises(ops.exceptions.ValidationException):  # a token of another listing
        ops.list_memory_records(
            memoryId=memory_id, namespace="/users/x/facts", nextToken=first["nextToken"]
        )


def test_only_an_actors_own_records_are_reachable(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, bob, ops, memory_id = clients["ada"], clients["bob"], clients["ops"], memory["id"]
    (secret,) = _create(
        ada, memory_id, _record("s", "Ada's locker code is 1234", "/users/ada/facts")
    )

    assert ada.get_memory_record(memoryId=memory_id, memoryRecordId=secret)["memoryRecord"][
        "namespaces"
    ] == ["/users/ada/facts"]
    assert ops.get_memory_record(memoryId=memory_id, memoryRecordId=secret)["memoryRecord"]
    with pytest.raises(bob.exceptions.AccessDeniedException):
        bob.get_memory_record(memoryId=memory_id, memoryRecordId=secret)
    with pytest.raises(bob.exceptions.AccessDeniedException):
        bob.get_memory_record(
            memoryId=memory_id, memoryRecordId=secret, namespace="/users/bob/facts"
        )
    with pytest.raises(bob.exceptions.AccessDeniedException):
        bob.delete_memory_record(memoryId=memory_id, memoryRecordId=secret)
    with pytest.raises(ada.exceptions.AccessDeniedException):  # not the namespace it is in
        ada.get_memory_record(
            memoryId=memory_id, memoryRecordId=secret, namespace="/users/ada/other"
        )
    with pytest.raises(bob.exceptions.AccessDeniedException):
        _retrieved(bob, memory_id, "locker code", namespace="/users/ada/facts")
    eventually(lambda: _retrieved(ada, memory_id, "locker code", namespace="/users/ada/facts"))
    assert "Ada's locker code is 1234" not in _texts(
        _retrieved(bob, memory_id, "locker code", namespacePath="/")
    )
    assert secret not in {s["memoryRecordId"] for s in _listed(bob, memory_id, namespacePath="/")}

    deleted = ada.delete_memory_record(memoryId=memory_id, memoryRecordId=secret)

    assert deleted["memoryRecordId"] == secret
    with pytest.raises(ada.exceptions.ResourceNotFoundException):
        ada.get_memory_record(memoryId=memory_id, memoryRecordId=secret)


def test_another_tenant_reaches_nothing(clients: dict[str, Any], memory: dict[str, Any]) -> None:
    ops, rival, memory_id = clients["ops"], clients["rival"], memory["id"]
    (record,) = _create(ops, memory_id, _record("t", "Acme's launch date", "/users/ada/facts"))
    theirs = clients["rival-control"].create_memory(name="records", eventExpiryDuration=30)
    their_id = theirs["memory"]["id"]

    with pytest.raises(rival.exceptions.ResourceNotFoundException):
        _retrieved(rival, memory_id, "launch", namespacePath="/")
    with pytest.raises(rival.exceptions.ResourceNotFoundException):
        rival.get_memory_record(memoryId=memory_id, memoryRecordId=record)
    with pytest.raises(rival.exceptions.ResourceNotFoundException):
        rival.get_memory_record(memoryId=their_id, memoryRecordId=record)
    failed = rival.batch_delete_memory_records(
        memoryId=their_id, records=[{"memoryRecordId": record}]
    )["failedRecords"]
    assert [r["errorCode"] for r in failed] == [404]
    assert _listed(rival, their_id, namespacePath="/") == []
    assert ops.get_memory_record(memoryId=memory_id, memoryRecordId=record)["memoryRecord"]


def test_a_client_token_makes_a_batch_idempotent(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, memory_id = clients["ada"], memory["id"]
    record = _record("once", "Ada's flight is on Friday", "/users/ada/facts")

    first = _create(ada, memory_id, record, clientToken="flight-batch-1")
    again = _create(ada, memory_id, record, clientToken="flight-batch-1")

    assert first == again
    other = {**record, "content": {"text": "Ada's flight is on Monday"}}
    with pytest.raises(ada.exceptions.ValidationException) as raised:
        _create(ada, memory_id, other, clientToken="flight-batch-1")
    assert raised.value.response["reason"] == "IdempotentParameterMismatchException"


def test_a_record_expiry_is_set_reapplied_and_removed(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, memory_id = clients["ada"], memory["id"]
    (record,) = _create(
        ada,
        memory_id,
        _record("e", "Ada's passport expires in May", "/users/ada/facts"),
        recordExpirySpecification={"recordExpiryDurationDays": 31},
    )

    def expiry() -> datetime | None:
        got = ada.get_memory_record(memoryId=memory_id, memoryRecordId=record)["memoryRecord"]
        return got.get("expiresAt")

    set_to = expiry()
    assert set_to is not None
    assert abs(set_to - (datetime.now(UTC) + timedelta(days=31))) < timedelta(minutes=5)

    update = {"memoryRecordId": record, "timestamp": NOW}
    ada.batch_update_memory_records(memoryId=memory_id, records=[update])
    reapplied = expiry()
    assert reapplied is not None
    assert reapplied >= set_to
    ada.batch_update_memory_records(
        memoryId=memory_id, records=[update], recordExpirySpecification={"action": "REMOVE"}
    )
    assert expiry() is None
    unchecked = clients["ada-unchecked"]  # botocore itself refuses fewer than 31 days
    with pytest.raises(unchecked.exceptions.ValidationException):
        _create(
            unchecked,
            memory_id,
            _record("short", "x", "/users/ada/facts"),
            recordExpirySpecification={"recordExpiryDurationDays": 7},
        )


def test_a_request_the_service_refuses_names_its_field_and_writes_nothing(
    clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ada, memory_id = clients["ada"], memory["id"]

    with pytest.raises(ada.exceptions.ValidationException) as both:
        ada.retrieve_memory_records(
            memoryId=memory_id,
            namespace="/users/ada/facts",
            namespacePath="/users/ada",
            searchCriteria={"searchQuery": "tea"},
        )
    twice = _record("same", "Ada writes twice", "/users/ada/facts")
    with pytest.raises(ada.exceptions.ValidationException) as repeated:
        ada.batch_create_memory_records(memoryId=memory_id, records=[twice, twice])

    assert both.value.response["reason"] == "FieldValidationFailed"
    assert both.value.response["fieldList"][0]["name"] == "namespacePath"
    assert repeated.value.response["fieldList"][0]["name"] == "records"
    assert "repeats" in repeated.value.response["fieldList"][0]["message"]
    listed = _listed(clients["ops"], memory_id, namespace="/users/ada/facts")
    assert "Ada writes twice" not in _texts(listed)


def test_deleting_a_user_in_the_memory_s_namespace_takes_the_actor_s_records(
    jwt_stack: LocalStack, clients: dict[str, Any], memory: dict[str, Any]
) -> None:
    ops, memory_id = clients["ops"], memory["id"]
    (gone,) = _create(ops, memory_id, _record("d", "Dee keeps bees", "/users/dee/facts"))
    (kept,) = _create(ops, memory_id, _record("e", "Eve keeps goats", "/users/eve/facts"))

    # When memkit's own API deletes user dee in the memory's namespace
    admin = _token(jwt_stack, "ops", ADMIN)
    deleted = httpx.delete(
        f"{jwt_stack.url}/v1/users/dee",
        params={"namespace": memory_id},
        headers={"authorization": f"Bearer {admin}"},
        timeout=60,
    )

    # Then dee's records are gone and eve's are not
    assert deleted.status_code == 200, deleted.text
    with pytest.raises(ops.exceptions.ResourceNotFoundException):
        ops.get_memory_record(memoryId=memory_id, memoryRecordId=gone)
    assert ops.get_memory_record(memoryId=memory_id, memoryRecordId=kept)["memoryRecord"]
