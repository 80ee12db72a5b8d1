"""AgentCore Memory's event side and memory configuration through the real API handler on
moto (docs/agentcore.md): requests as API Gateway sends them for boto3's clients, answers in
AgentCore's shapes, identity from verified claims."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memkit.identity import ADMIN, READ, WRITE
from tests.conftest import ApiResponse, call_api
from tests.events import jwt_authorizer

pytestmark = pytest.mark.integration

ADA = jwt_authorizer("acme", "ada", READ, WRITE)
BOB = jwt_authorizer("acme", "bob", READ, WRITE)
OPS = jwt_authorizer("acme", "ops", ADMIN)
OTHER_OPS = jwt_authorizer("globex", "ops", ADMIN)
T0 = 1_750_000_000.0


# Also on DynamoDB Local (AWS's own engine) when Java is present: conditions, key
# conditions and transactions as DynamoDB checks them.
ENGINES = ("moto", "dynamodb-local")


def _handler(table: str, clock: Callable[[], float] | None = None, **settings: Any) -> Any:
    """The API's Lambda handler over `table`, verifying JWT claims (tenant in custom:tenant);
    the store reads `clock` when given (a quota's minute must not turn mid-test)."""
    from memkit.config import ApiSettings
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore

    checked = ApiSettings(
        table_name=table,
        region="us-east-1",
        auth_mode="jwt",
        tenant_claim="custom:tenant",
        **settings,
    )
    store = DynamoStore(checked) if clock is None else DynamoStore(checked, clock=clock)
    services = api_services(store, checked)
    return make_lambda_handler(lambda: services)


@pytest.fixture
def api(dynamodb_table: str) -> Any:
    handler = _handler(dynamodb_table)

    def call(method: str, path: str, who: dict[str, Any] = ADA, **kwargs: Any) -> ApiResponse:
        return call_api(handler, method, path, authorizer=who, **kwargs)

    return call


def _memory(api: Any, who: dict[str, Any] = OPS, **extra: Any) -> str:
    body = {"name": "support", "eventExpiryDuration": 30, **extra}
    made = api("POST", "/memories/create", who, body=body)
    assert made.status == 202, made.body
    return str(made.body["memory"]["id"])


def _event(api: Any, memory: str, text: str, **extra: Any) -> ApiResponse:
    body = {
        "actorId": "ada",
        "sessionId": "s1",
        "eventTimestamp": T0,
        "payload": [{"conversational": {"content": {"text": text}, "role": "USER"}}],
        **extra,
    }
    return api("POST", f"/memories/{memory}/events", extra.pop("who", ADA), body=body)


def _get(api: Any, memory: str, event_id: str, who: dict[str, Any] = ADA) -> ApiResponse:
    return api("GET", f"/memories/{memory}/actor/ada/sessions/s1/events/{event_id}", who)


def test_a_created_event_is_the_sessions_messages_and_reads_back(api: Any) -> None:
    memory = _memory(api)

    made = _event(api, memory, "hello")
    event_id = made.body["event"]["eventId"]

    assert made.status == 201
    got = _get(api, memory, event_id)
    assert got.status == 200
    assert got.body["event"] == made.body["event"]
    # the event is a message of memkit's session s1 of user ada in the memory's namespace
    log = api("GET", "/v1/working-memory/s1/messages", query={"namespace": memory})
    assert [(m["role"], m["content"]) for m in log.body["messages"]] == [("user", "hello")]


def test_every_failure_on_an_agentcore_route_is_in_the_services_shape(api: Any) -> None:
    memory = _memory(api)

    unreadable = api(
        "POST",
        f"/memories/{memory}/events",
        raw_body="{not json",
        headers={"content-type": "application/json"},
    )
    missing = api("POST", f"/memories/{memory}/events", body={"actorId": "ada"})
    unknown = api("GET", "/memories/nothing-0123456789/details")
    foreign = _event(api, memory, "x", actorId="bob")

    assert unreadable.status == 400
    assert unreadable.headers["x-amzn-ErrorType"] == "ValidationException"
    assert unreadable.body["reason"] == "CannotParse"
    assert missing.status == 400
    assert {f["name"] for f in missing.body["fieldList"]} == {"eventTimestamp", "payload"}
    assert unknown.status == 404
    assert unknown.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"
    assert foreign.status == 403
    assert foreign.headers["x-amzn-ErrorType"] == "AccessDeniedException"
    assert set(foreign.body) == {"message"}


def test_another_tenants_admin_finds_no_memory_of_this_tenant(api: Any) -> None:
    memory = _memory(api)

    seen = api("GET", f"/memories/{memory}/details", OTHER_OPS)
    listed = api("POST", "/memories", OTHER_OPS, body={})

    assert seen.status == 404
    assert listed.body == {"memories": []}


def _turn(text: str, role: str = "USER") -> dict[str, Any]:
    return {"conversational": {"content": {"text": text}, "role": role}}


def _events(api: Any, memory: str, n: int, **extra: Any) -> list[str]:
    """n events of ada in session s1, a second apart: their ids, oldest first."""
    ids = []
    for i in range(n):
        made = _event(api, memory, f"turn {i}", eventTimestamp=T0 + i, **extra)
        assert made.status == 201, made.body
        ids.append(made.body["event"]["eventId"])
    return ids


def _list(api: Any, memory: str, who: dict[str, Any] = ADA, **body: Any) -> ApiResponse:
    return api("POST", f"/memories/{memory}/actor/ada/sessions/s1", who, body=body)


def test_list_events_pages_newest_first_with_opaque_tokens(api: Any) -> None:
    memory = _memory(api)
    ids = _events(api, memory, 5)

    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = _list(api, memory, maxResults=2, **({"nextToken": token} if token else {}))
        assert page.status == 200, page.body
        seen += [e["eventId"] for e in page.body["events"]]
        pages += 1
        token = page.body.get("nextToken")
        if token is None:
            break

    assert seen == list(reversed(ids))
    assert pages == 3


def test_a_token_of_another_session_is_a_validation_exception(api: Any) -> None:
    memory = _memory(api)
    _events(api, memory, 3)
    token = _list(api, memory, maxResults=1).body["nextToken"]
    _event(api, memory, "elsewhere", sessionId="s2")

    other = api("POST", f"/memories/{memory}/actor/ada/sessions/s2", body={"nextToken": token})
    garbage = _list(api, memory, nextToken="not-a-token")

    for refused in (other, garbage):
        assert refused.status == 400
        assert refused.body["fieldList"][0]["name"] == "nextToken"


def test_list_events_without_payloads_leaves_them_out(api: Any) -> None:
    memory = _memory(api)
    _events(api, memory, 2)

    listed = _list(api, memory, includePayloads=False)

    assert [e["payload"] for e in listed.body["events"]] == [[], []]


def test_event_metadata_filters_take_every_operator(api: Any) -> None:
    memory = _memory(api)
    red = _event(api, memory, "a", eventTimestamp=T0, metadata={"color": {"stringValue": "red"}})
    blue = _event(
        api, memory, "b", eventTimestamp=T0 + 1, metadata={"color": {"stringValue": "blue"}}
    )
    plain = _event(api, memory, "c", eventTimestamp=T0 + 2)
    red_id, blue_id, plain_id = (e.body["event"]["eventId"] for e in (red, blue, plain))

    def ids(*conditions: dict[str, Any]) -> list[str]:
        listed = _list(api, memory, filter={"eventMetadata": list(conditions)})
        assert listed.status == 200, listed.body
        return [e["eventId"] for e in listed.body["events"]]

    color = {"metadataKey": "color"}
    assert ids(
        {"left": color, "operator": "EQUALS_TO", "right": {"metadataValue": {"stringValue": "red"}}}
    ) == [red_id]
    assert ids({"left": color, "operator": "EXISTS"}) == [blue_id, red_id]
    assert ids({"left": color, "operator": "NOT_EXISTS"}) == [plain_id]
    both = ids(
        {"left": color, "operator": "EXISTS"},
        {
            "left": color,
            "operator": "EQUALS_TO",
            "right": {"metadataValue": {"stringValue": "blue"}},
        },
    )
    assert both == [blue_id]
    missing_value = _list(
        api, memory, filter={"eventMetadata": [{"left": color, "operator": "EQUALS_TO"}]}
    )
    assert missing_value.status == 400
    assert missing_value.body["fieldList"][0]["name"] == "filter.eventMetadata.0"


def test_a_branch_filter_takes_the_branch_and_with_parents_what_it_forked_from(api: Any) -> None:
    memory = _memory(api)
    main = _events(api, memory, 3)  # T0, T0+1, T0+2 on main
    fork = {"name": "alt", "rootEventId": main[1]}
    alt = [
        _event(api, memory, f"alt {i}", eventTimestamp=T0 + 10 + i, branch=fork).body["event"][
            "eventId"
        ]
        for i in range(2)
    ]
    deeper = {"name": "deeper", "rootEventId": alt[0]}
    deep = _event(api, memory, "deep", eventTimestamp=T0 + 20, branch=deeper).body["event"][
        "eventId"
    ]

    def ids(**branch: Any) -> list[str]:
        listed = _list(api, memory, maxResults=2, filter={"branch": branch})
        found = [e["eventId"] for e in listed.body["events"]]
        token = listed.body.get("nextToken")
        while token:  # the chain of parents rides in the token across pages
            listed = _list(api, memory, maxResults=2, nextToken=token, filter={"branch": branch})
            found += [e["eventId"] for e in listed.body["events"]]
            token = listed.body.get("nextToken")
        return found

    assert ids(name="alt") == list(reversed(alt))
    assert ids(name="main") == list(reversed(main))
    assert ids(name="alt", includeParentBranches=True) == [alt[1], alt[0], main[1], main[0]]
    assert ids(name="deeper", includeParentBranches=True) == [deep, alt[0], main[1], main[0]]
    got = _get(api, memory, alt[0])
    assert got.body["event"]["branch"] == fork


def test_a_client_token_makes_create_event_idempotent(api: Any) -> None:
    memory = _memory(api)

    first = _event(api, memory, "once", clientToken="token-1")
    again = _event(api, memory, "once", clientToken="token-1")
    other = _event(api, memory, "something else", clientToken="token-1")

    assert again.status == 201
    assert again.body == first.body
    assert len(_list(api, memory).body["events"]) == 1
    assert other.status == 400
    assert other.body["reason"] == "IdempotentParameterMismatchException"


def test_blob_json_and_empty_payloads_come_back_as_sent(api: Any) -> None:
    memory = _memory(api)
    payload = [
        _turn("what is in the file?"),
        {"blob": {"file": "notes.txt", "bytes": 42}},
        {"json": {"content": [1, "two", {"three": None}]}},
        _turn("a tool said so", "TOOL"),
        _turn("aside", "OTHER"),
    ]

    made = _event(api, memory, "", payload=payload)
    empty = _event(api, memory, "", eventTimestamp=T0 + 1, payload=[])

    got = _get(api, memory, made.body["event"]["eventId"]).body["event"]
    assert got["payload"] == payload
    assert _get(api, memory, empty.body["event"]["eventId"]).body["event"]["payload"] == []
    log = api("GET", "/v1/working-memory/s1/messages", query={"namespace": memory}).body
    assert [m["role"] for m in log["messages"]] == ["user", "data", "data", "tool", "other", "data"]


def test_delete_event_removes_it_and_only_it(api: Any) -> None:
    memory = _memory(api)
    ids = _events(api, memory, 2)

    deleted = api("DELETE", f"/memories/{memory}/actor/ada/sessions/s1/events/{ids[0]}")
    again = api("DELETE", f"/memories/{memory}/actor/ada/sessions/s1/events/{ids[0]}")

    assert deleted.status == 200
    assert deleted.body == {"eventId": ids[0]}
    assert _get(api, memory, ids[0]).status == 404
    assert again.status == 404
    assert [e["eventId"] for e in _list(api, memory).body["events"]] == [ids[1]]


def test_list_sessions_pages_an_actors_sessions_and_filters_those_with_events(api: Any) -> None:
    memory = _memory(api)
    for n in range(3):
        _event(api, memory, "hi", sessionId=f"s{n}", eventTimestamp=T0 + n)
    only = _event(api, memory, "bye", sessionId="emptied", eventTimestamp=T0 + 9)
    api(
        "DELETE",
        f"/memories/{memory}/actor/ada/sessions/emptied/events/{only.body['event']['eventId']}",
    )
    path = f"/memories/{memory}/actor/ada/sessions"

    first = api("POST", path, body={"maxResults": 2})
    second = api("POST", path, body={"maxResults": 2, "nextToken": first.body["nextToken"]})
    with_events = api("POST", path, body={"filter": {"eventFilter": "HAS_EVENTS"}})

    listed = [
        s["sessionId"] for s in first.body["sessionSummaries"] + second.body["sessionSummaries"]
    ]
    assert sorted(listed) == ["emptied", "s0", "s1", "s2"]
    assert all(s["actorId"] == "ada" for s in first.body["sessionSummaries"])
    assert sorted(s["sessionId"] for s in with_events.body["sessionSummaries"]) == [
        "s0",
        "s1",
        "s2",
    ]


def test_list_actors_shows_an_admin_every_actor_and_a_user_itself(api: Any) -> None:
    memory = _memory(api)
    _event(api, memory, "hi")
    _event(api, memory, "hi", who=BOB, actorId="bob", sessionId="b1")
    for n in range(3):  # an admin writes for users of its tenant
        _event(api, memory, "hi", who=OPS, actorId=f"user-{n}", sessionId=f"u{n}")
    path = f"/memories/{memory}/actors"

    first = api("POST", path, OPS, body={"maxResults": 3})
    rest = api("POST", path, OPS, body={"nextToken": first.body["nextToken"]})
    own = api("POST", path, BOB, body={})

    everyone = [a["actorId"] for a in first.body["actorSummaries"] + rest.body["actorSummaries"]]
    assert sorted(everyone) == ["ada", "bob", "user-0", "user-1", "user-2"]
    assert own.body == {"actorSummaries": [{"actorId": "bob"}]}


def test_a_session_of_another_actor_cannot_take_events(api: Any) -> None:
    memory = _memory(api)
    _event(api, memory, "mine")

    taken = _event(api, memory, "theirs", who=OPS, actorId="bob")

    assert taken.status == 400
    assert taken.body["reason"] == "ResourceConflict"
    assert taken.body["fieldList"] == [
        {"name": "sessionId", "message": "names another actor's session"}
    ]


def test_an_event_from_the_future_is_refused(api: Any) -> None:
    import time

    memory = _memory(api)

    refused = _event(api, memory, "later", eventTimestamp=time.time() + 3_600)

    assert refused.status == 400
    assert refused.body["fieldList"][0]["name"] == "eventTimestamp"


def test_every_operation_on_an_unknown_memory_is_resource_not_found(api: Any) -> None:
    missing = "gone-0123456789"
    base = f"/memories/{missing}"
    event = "1750000000000#ab"
    calls = [
        ("POST", f"{base}/events", {"actorId": "ada", "eventTimestamp": T0, "payload": []}),
        ("GET", f"{base}/actor/ada/sessions/s1/events/{event}", None),
        ("DELETE", f"{base}/actor/ada/sessions/s1/events/{event}", None),
        ("POST", f"{base}/actor/ada/sessions/s1", {}),
        ("POST", f"{base}/actor/ada/sessions", {}),
        ("POST", f"{base}/actors", {}),
        ("GET", f"{base}/details", None),
        ("DELETE", f"{base}/delete", None),
    ]

    for method, path, body in calls:
        answered = api(method, path, OPS, body=body)
        assert answered.status == 404, (path, answered.body)
        assert answered.headers["x-amzn-ErrorType"] == "ResourceNotFoundException"


def test_a_memory_is_named_by_its_id_or_its_arn(api: Any) -> None:
    from urllib.parse import quote

    memory = _memory(api)
    arn = api("GET", f"/memories/{memory}/details").body["memory"]["arn"]

    # as botocore sends it: the ARN's '/' escaped within the path segment
    by_arn = api("POST", f"/memories/{quote(arn, safe='')}/actor/ada/sessions", body={})

    assert by_arn.status == 200, by_arn.body


def test_a_deleted_memory_is_gone_for_every_call(api: Any) -> None:
    memory = _memory(api)
    _event(api, memory, "hi")

    deleted = api("DELETE", f"/memories/{memory}/delete", OPS)

    assert deleted.status == 202
    assert deleted.body == {"memoryId": memory, "status": "DELETING"}
    assert api("GET", f"/memories/{memory}/details").status == 404
    assert _list(api, memory).status == 404


def test_create_memory_is_idempotent_by_client_token(api: Any) -> None:
    first = api(
        "POST",
        "/memories/create",
        OPS,
        body={"name": "m", "eventExpiryDuration": 7, "clientToken": "c1"},
    )
    again = api(
        "POST",
        "/memories/create",
        OPS,
        body={"name": "m", "eventExpiryDuration": 7, "clientToken": "c1"},
    )
    other = api(
        "POST",
        "/memories/create",
        OPS,
        body={"name": "m", "eventExpiryDuration": 8, "clientToken": "c1"},
    )

    assert again.body == first.body
    assert other.status == 400
    assert other.body["reason"] == "IdempotentParameterMismatchException"
    assert (
        api("POST", "/memories", OPS, body={}).body["memories"][0]["id"]
        == first.body["memory"]["id"]
    )


def test_a_second_memory_of_one_name_is_refused_as_agentcore_refuses_it(api: Any) -> None:
    first = _memory(api, name="support")

    again = api("POST", "/memories/create", OPS, body={"name": "support", "eventExpiryDuration": 7})

    # the bedrock-agentcore SDK's create_or_get_memory reads exactly this as "find it"
    assert again.status == 400
    assert again.headers["x-amzn-ErrorType"] == "ValidationException"
    assert "already exists" in again.body["message"]
    assert again.body["fieldList"][0]["name"] == "name"
    assert [m["id"] for m in api("POST", "/memories", OPS, body={}).body["memories"]] == [first]


def test_another_tenant_may_name_its_memory_alike(api: Any) -> None:
    ours = _memory(api, name="support")

    theirs = _memory(api, OTHER_OPS, name="support")

    assert theirs != ours


def test_concurrent_creations_of_one_name_make_one_memory(api: Any) -> None:
    def create(n: int) -> ApiResponse:
        body = {"name": "racing", "eventExpiryDuration": 7, "clientToken": f"token-{n}"}
        return api("POST", "/memories/create", OPS, body=body)

    with ThreadPoolExecutor(max_workers=6) as pool:
        answers = list(pool.map(create, range(6)))

    made = [a for a in answers if a.status == 202]
    refused = [a for a in answers if a.status != 202]
    assert len(made) == 1, [a.body for a in answers]
    assert all(a.status == 400 and "already exists" in a.body["message"] for a in refused)
    listed = api("POST", "/memories", OPS, body={}).body["memories"]
    assert [m["id"] for m in listed] == [made[0].body["memory"]["id"]]


def test_a_deleted_memorys_name_is_free_again(api: Any) -> None:
    first = _memory(api, name="support")
    assert api("DELETE", f"/memories/{first}/delete", OPS).status == 202

    second = _memory(api, name="support")

    assert second != first
    assert api("GET", f"/memories/{second}/details").status == 200


def test_list_memories_pages(api: Any) -> None:
    made = {_memory(api, name=f"memory{n}") for n in range(3)}

    first = api("POST", "/memories/", OPS, body={"maxResults": 2})
    rest = api("POST", "/memories/", OPS, body={"nextToken": first.body["nextToken"]})

    listed = {m["id"] for m in first.body["memories"] + rest.body["memories"]}
    assert listed == made
    assert "nextToken" not in rest.body


def test_a_tenants_spent_quota_is_a_throttled_exception(dynamodb_table: str) -> None:
    # 10 s into a minute, held there: both calls count against the same minute
    handler = _handler(dynamodb_table, clock=lambda: 1_800_000_010.0, tenant_requests_per_minute=1)
    call_api(handler, "POST", "/memories", body={}, authorizer=OPS)

    refused = call_api(handler, "POST", "/memories", body={}, authorizer=OPS)

    assert refused.status == 429
    assert refused.headers["x-amzn-ErrorType"] == "ThrottledException"
    assert int(refused.headers["Retry-After"]) >= 1
    assert "requests a minute" in refused.body["message"]


def test_another_actors_session_is_none_of_this_actors(api: Any) -> None:
    memory = _memory(api)
    bobs = _event(api, memory, "bob's words", who=BOB, actorId="bob", sessionId="b1")
    event_id = bobs.body["event"]["eventId"]
    path = f"/memories/{memory}/actor/ada/sessions/b1"

    listed = api("POST", path, body={})
    got = api("GET", f"{path}/events/{event_id}")
    deleted = api("DELETE", f"{path}/events/{event_id}")

    assert listed.body == {"events": []}
    assert got.status == 404
    assert deleted.status == 404
    assert (
        api("GET", f"/memories/{memory}/actor/bob/sessions/b1/events/{event_id}", BOB).status == 200
    )


def test_a_blank_turn_is_refused_naming_it(api: Any) -> None:
    memory = _memory(api)

    refused = _event(api, memory, "   ")

    assert refused.status == 400
    assert refused.body["fieldList"][0]["name"] == "payload.0.conversational.content.text"


def test_a_page_of_events_stops_before_it_outgrows_a_lambda_answer(api: Any) -> None:
    memory = _memory(api)
    big = [_turn("x" * 90_000), _turn("y" * 90_000, "ASSISTANT")]
    for n in range(40):  # 7 MB of turns in all
        made = _event(api, memory, "", payload=big, eventTimestamp=T0 + n)
        assert made.status == 201, made.body

    first = _list(api, memory, maxResults=100)

    assert first.status == 200
    assert 0 < len(first.body["events"]) < 40
    rest = _list(api, memory, maxResults=100, nextToken=first.body["nextToken"])
    assert len(first.body["events"]) + len(rest.body["events"]) == 40


def test_a_memory_too_large_for_one_item_is_refused_not_a_storage_failure(api: Any) -> None:
    huge = {"semanticOverride": {"extraction": {"appendToPrompt": "x" * 200_000}}}
    strategy = {"customMemoryStrategy": {"name": "mine", "configuration": huge}}

    refused = api(
        "POST",
        "/memories/create",
        OPS,
        body={"name": "big", "eventExpiryDuration": 3, "memoryStrategies": [strategy]},
    )

    assert refused.status == 400
    assert refused.body["fieldList"][0]["name"] == "memoryStrategies"
    assert api("POST", "/memories", OPS, body={}).body == {"memories": []}
