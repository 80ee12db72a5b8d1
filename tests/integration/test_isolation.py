"""Isolation, proven route by route: every route of the app (its route table, so a new route
is covered automatically: it fails here until it has a probe) is called through the real
handler, with verified JWT claims as API Gateway's authorizer passes them,

- as user a1 of tenant A against the data of user a2 of the same tenant, and
- as an admin of tenant A (who may name any user of its own tenant) against tenant B's data,

and nothing crosses: no response carries the other side's marker, and every item the other
side stored is, after all the probes, exactly as it was (nothing read-modified, moved, added
to or deleted). Then each probe is sent again by the data's owner and must succeed: a probe
that could never work would prove nothing.

Each of it runs twice: with bare scopes (`memory:read`) and with Cognito's `memkit/` prefix
(JwtScopePrefix), every identity's scopes named as that issuer names them. And a user holding
an admin scope in any other shape (another resource server's, a URL's, bracketed, in another
case, the other deployment's form) is the user it is on every route and every tool: a shape
that counted as memory:admin would let it read and change another user's data here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import boto3
import pytest

from memkit.config import ApiSettings
from memkit.handlers.api import ROUTE_SCOPES, app
from memkit.identity import ADMIN, READ, SCOPES, WRITE
from tests.conftest import ApiResponse, call_api
from tests.events import jwt_authorizer
from tests.integration.memory_world import MemoryWorld, build_world
from tests.mcp_requests import call_mcp, request, tool_call
from tests.tokens import verifying_settings

pytestmark = pytest.mark.integration

SECRET_A2 = "SECRET-A2 my bank PIN is 9911"
SECRET_B = "SECRET-B the vault code is 4242"
MARKERS = ("SECRET-A2", "SECRET-B")
USER_PROFILE = "me"  # a profile whose scratchpad is per user


A1 = jwt_authorizer("A", "a1", READ, WRITE)
A2 = jwt_authorizer("A", "a2", READ, WRITE)
A_ADMIN = jwt_authorizer("A", "ops", ADMIN)
B1 = jwt_authorizer("B", "b1", READ, WRITE)
B_ADMIN = jwt_authorizer("B", "ops", ADMIN)
# The two ways an issuer names memkit's scopes (the template's JwtScopePrefix).
PREFIXES = {"bare scopes": "", "memkit/ prefix": "memkit/"}


@dataclass(frozen=True)
class Forged:
    """An identity holding, besides its own scopes, an admin scope in a shape that is not
    memkit's (`shape` of the world's prefix): it must count for nothing."""

    who: dict[str, Any]
    shape: Callable[[str], str]


# Admin scopes an issuer may sign that are not memkit's, as a function of the prefix in use.
FORGED_ADMIN: dict[str, Callable[[str], str]] = {
    "another resource server's": lambda prefix: "otherapi/memory:admin",
    "a URL's": lambda prefix: "https://evil.example.com/memory:admin",
    "bracketed": lambda prefix: f"[{prefix}memory:admin]",
    "upper case": lambda prefix: f"{prefix}MEMORY:ADMIN",
    "capitalised": lambda prefix: f"{prefix}Memory:Admin",
    "the prefix in upper case": lambda prefix: f"{prefix.upper() or 'MEMKIT/'}memory:admin",
    "the other prefix's": lambda prefix: "memory:admin" if prefix else "memkit/memory:admin",
    "prefixed twice": lambda prefix: f"{prefix or 'memkit/'}{prefix or 'memkit/'}memory:admin",
}
Who = dict[str, Any] | Forged


def _prefix(world: MemoryWorld) -> str:
    return world.services.settings.scope_prefix


def _issued(world: MemoryWorld, who: Who) -> dict[str, Any]:
    """`who`'s verified claims as the world's issuer names its scopes: memkit's with the
    world's prefix, a forged shape appended as it is."""
    base = who.who if isinstance(who, Forged) else who
    claims = dict(base["jwt"]["claims"])
    prefix = _prefix(world)
    scopes = [prefix + s if s in SCOPES else s for s in claims["scope"].split()]
    if isinstance(who, Forged):
        scopes.append(who.shape(prefix))
    claims["scope"] = " ".join(scopes)
    return {"jwt": {"claims": claims, "scopes": None}}


@dataclass(frozen=True)
class Probe:
    """One request against a victim's data: path parameters, query, body."""

    params: dict[str, str]
    query: dict[str, Any] = field(default_factory=dict)
    body: Any = None


def _message(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "content": text}


# The victims' AgentCore memory and event, by user (set when the world is seeded: ids are
# the server's).
AGENTCORE: dict[str, tuple[str, str]] = {}
# The victims' AgentCore records, by user: one the probes read, change and delete, one a
# batch deletes.
AGENTCORE_RECORDS: dict[str, tuple[str, str]] = {}
MEMORY_BODY = {
    "name": "iso",
    "eventExpiryDuration": 30,
    "clientToken": "isolation",
    "memoryStrategies": [
        {"semanticMemoryStrategy": {"name": "notes", "namespaces": ["/users/{actorId}/notes"]}}
    ],
}
EVENT_TIME = 1_750_000_000.5
NO_RECORD = "mem-" + "0" * 40
PLANTED = "planted-in-session"  # a record an attacker names the victim's session in


def _event_body(user: str, session: str, text: str, token: str) -> dict[str, Any]:
    return {
        "actorId": user,
        "sessionId": session,
        "eventTimestamp": EVENT_TIME,
        "payload": [{"conversational": {"content": {"text": text}, "role": "USER"}}],
        "metadata": {"topic": {"stringValue": "pin"}},
        "clientToken": token,
    }


def _record_body(user: str, text: str, ident: str) -> dict[str, Any]:
    return {
        "records": [
            {
                "requestIdentifier": ident,
                "namespaces": [f"/users/{user}/notes"],
                "content": {"text": text},
                "timestamp": EVENT_TIME,
            }
        ],
        "clientToken": f"seed-{ident}",
    }


def _record_probes(memory: str, user: str) -> dict[str, list[Probe]]:
    """Every AgentCore record route, aimed at the victim's records."""
    record, doomed = AGENTCORE_RECORDS.get(user, (NO_RECORD, NO_RECORD))
    m = {"memory_id": memory}
    one = {**m, "record_id": record}
    query = {"searchQuery": "secret bank vault code"}
    return {
        "POST /memories/{memory_id}/retrieve": [
            Probe(m, body={"namespacePath": "/", "searchCriteria": query}),
            Probe(m, body={"namespace": f"/users/{user}/notes", "searchCriteria": query}),
        ],
        "POST /memories/{memory_id}/memoryRecords": [
            Probe(m, body={"namespacePath": "/"}),
            Probe(m, body={"namespace": f"/users/{user}/notes"}),
        ],
        "GET /memories/{memory_id}/memoryRecord/{record_id}": [
            Probe(one),
            Probe(one, {"namespace": f"/users/{user}/notes"}),
        ],
        "POST /memories/{memory_id}/memoryRecords/batchCreate": [
            Probe(m, body=_record_body(user, "planted", "planted"))
        ],
        "POST /memories/{memory_id}/memoryRecords/batchUpdate": [
            Probe(
                m,
                body={
                    "records": [
                        {
                            "memoryRecordId": record,
                            "timestamp": EVENT_TIME,
                            "content": {"text": "overwritten"},
                            "namespaces": [f"/users/{user}/notes"],
                        }
                    ]
                },
            )
        ],
        "POST /memories/{memory_id}/memoryRecords/batchDelete": [
            Probe(m, body={"records": [{"memoryRecordId": doomed}]})
        ],
        "DELETE /memories/{memory_id}/memoryRecords/{record_id}": [Probe(one)],
    }


def _agentcore_probes(session: str, user: str) -> dict[str, list[Probe]]:
    """Every AgentCore route, aimed at the victim's memory, actor, session and event."""
    memory, event = AGENTCORE.get(user, ("iso-0123456789", "1750000000500#ab"))
    m = {"memory_id": memory}
    actor = {**m, "actor_id": user}
    in_session = {**actor, "session_id": session}
    one_event = {**in_session, "event_id": event}
    return {
        **_record_probes(memory, user),
        "POST /memories/create": [Probe({}, body=MEMORY_BODY)],
        "POST /memories": [Probe({}, body={})],
        "POST /memories/": [Probe({}, body={"maxResults": 5})],
        "GET /memories/{memory_id}/details": [Probe(m)],
        "PUT /memories/{memory_id}/update": [Probe(m, body={})],
        "POST /memories/{memory_id}/events": [
            Probe(m, body=_event_body(user, session, "planted", "planted"))
        ],
        "GET /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}/events/{event_id}": [
            Probe(one_event)
        ],
        "POST /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}": [
            Probe(in_session, body={}),
            Probe(in_session, body={"filter": {"branch": {"name": "main"}}}),
        ],
        "POST /memories/{memory_id}/actor/{actor_id}/sessions": [Probe(actor, body={})],
        "POST /memories/{memory_id}/actors": [Probe(m, body={})],
        "POST /memories/{memory_id}/ingest": [Probe(m, body={})],
        "POST /memories/{memory_id}/extractionJobs": [Probe(m, body={})],
        "POST /memories/{memory_id}/extractionJobs/start": [Probe(m, body={})],
        # deletions last (the owners' requests run in this order within a method)
        "DELETE /memories/{memory_id}/actor/{actor_id}/sessions/{session_id}/events/{event_id}": [
            Probe(one_event)
        ],
        "DELETE /memories/{memory_id}/delete": [Probe(m)],
    }


def _probes(session: str, user: str, record: str) -> dict[str, list[Probe]]:
    """Every non-public route, aimed at the victim's session, user and record."""
    s, u = {"session_id": session}, {"user_id": user}
    named = {"user_id": user}
    me = {"profile": USER_PROFILE}
    pad = {"content": "overwritten"}
    return {
        "GET /v1/working-memory": [Probe({}, named)],
        "GET /v1/working-memory/": [Probe({}, named), Probe({})],
        "GET /v1/working-memory/{session_id}": [Probe(s), Probe(s, named)],
        "PUT /v1/working-memory/{session_id}": [
            Probe(s, body={"messages": [_message("x1", "overwritten")]}),
            Probe(s, named, body={"messages": [_message("x1", "overwritten")]}),
        ],
        "PATCH /v1/working-memory/{session_id}": [Probe(s, body={"context": "overwritten"})],
        "DELETE /v1/working-memory/{session_id}": [Probe(s), Probe(s, named)],
        "GET /v1/working-memory/{session_id}/messages": [Probe(s)],
        "POST /v1/working-memory/{session_id}/messages": [
            Probe(s, body={"messages": [_message("x2", "planted")]})
        ],
        "GET /v1/working-memory/{session_id}/scratchpad": [Probe(s), Probe(s, named)],
        "PUT /v1/working-memory/{session_id}/scratchpad": [Probe(s, body=pad)],
        "PATCH /v1/working-memory/{session_id}/scratchpad": [Probe(s, body=pad)],
        "DELETE /v1/working-memory/{session_id}/scratchpad": [Probe(s)],
        "GET /v1/users/{user_id}/scratchpad": [Probe(u, me)],
        "PUT /v1/users/{user_id}/scratchpad": [Probe(u, me, body=pad)],
        "PATCH /v1/users/{user_id}/scratchpad": [Probe(u, me, body=pad)],
        "DELETE /v1/users/{user_id}/scratchpad": [Probe(u, me)],
        "POST /v1/long-term-memory": [
            Probe({}, body={"memories": [{"id": record, "text": "overwritten"}]})
        ],
        "POST /v1/long-term-memory/": [
            Probe({}, body={"memories": [{"id": record, "text": "overwritten", **named}]}),
            Probe({}, body={"memories": [{"id": "planted", "text": "planted", **named}]}),
            # a record of the caller's own that names the victim's session
            Probe({}, body={"memories": [{"id": PLANTED, "text": "planted", **s}]}),
        ],
        "POST /v1/long-term-memory/search": [
            Probe({}, body={"text": "secret bank vault code"}),
            Probe({}, body={"text": "secret bank vault code", "user_id": {"eq": user}}),
            Probe({}, body={"text": "", "user_id": {"ne": "nobody"}}),
        ],
        "GET /v1/long-term-memory/{memory_id}": [Probe({"memory_id": record})],
        "PATCH /v1/long-term-memory/{memory_id}": [
            Probe({"memory_id": record}, body={"text": "overwritten"}),
            Probe({"memory_id": record}, body={"user_id": "a1"}),
        ],
        "DELETE /v1/long-term-memory": [
            Probe({}, {"memory_ids": [record]}),
            Probe({}, {"memory_ids": [record], "erase": "true"}),
        ],
        "GET /v1/long-term-memory/{memory_id}/history": [Probe({"memory_id": record})],
        "POST /v1/long-term-memory/{memory_id}/retire": [Probe({"memory_id": record}, body={})],
        "POST /v1/long-term-memory/{memory_id}/restore": [
            Probe({"memory_id": record}, body={"version": 1})
        ],
        "POST /v1/memory/prompt": [
            Probe({}, body={"query": "secret bank vault code", "session": {"session_id": session}}),
            Probe({}, body={"query": "secret bank vault code", "long_term_search": True}),
            Probe(
                {},
                body={
                    "query": "secret",
                    "session": {"session_id": "own-session"},
                    "long_term_search": {"text": "secret", "user_id": {"eq": user}},
                },
            ),
        ],
        "GET /v1/tools": [Probe({}, {"session_id": session})],
        "POST /v1/tools/call": [
            Probe(
                {},
                body={
                    "name": "search_memory",
                    "arguments": {"query": "secret bank vault code"},
                    "session_id": session,
                },
            ),
            Probe(
                {},
                body={
                    "name": "search_memory",
                    "arguments": {"query": "secret bank vault code"},
                    **named,
                },
            ),
            Probe(
                {},
                body={
                    "name": "add_memory",
                    "arguments": {"text": "planted"},
                    "session_id": session,
                },
            ),
            Probe(
                {},
                body={
                    "name": "replace_working_memory",
                    "arguments": {"content": "overwritten"},
                    "session_id": session,
                },
            ),
        ],
        "GET /v1/profiles": [Probe({})],
        "GET /v1/profiles/{name}": [Probe({"name": "default"})],
        "PUT /v1/profiles/{name}": [Probe({"name": "custom"}, body={"template": "# notes"})],
        "DELETE /v1/profiles/{name}": [Probe({"name": "custom"})],
        "POST /v1/long-term-memory/forget": [
            Probe({}, named, body={"policy": {"max_age_days": 0}, "dry_run": False})
        ],
        "POST /v1/long-term-memory/compact": [Probe({}, named)],
        "GET /v1/namespaces/{namespace}/lifecycle": [Probe({"namespace": "default"})],
        "PUT /v1/namespaces/{namespace}/lifecycle": [
            Probe({"namespace": "default"}, body={"forget": {"max_age_days": 1}})
        ],
        "DELETE /v1/namespaces/{namespace}/lifecycle": [Probe({"namespace": "default"})],
        "DELETE /v1/users/{user_id}": [Probe(u)],
        "GET /v1/jobs/{job_id}": [Probe({"job_id": "01JOBOFANOTHERUSER0000000"})],
        **_agentcore_probes(session, user),
    }


def _path(route: str, params: dict[str, str]) -> tuple[str, str]:
    method, template = route.split(" ", 1)
    for name, value in params.items():
        template = template.replace("{" + name + "}", value)
    assert "{" not in template, f"{route}: a path parameter has no value"
    return method, template


def _send(world: MemoryWorld, who: Who, route: str, probe: Probe) -> ApiResponse:
    method, path = _path(route, probe.params)
    return call_api(
        world.api_handler,
        method,
        path,
        query=probe.query,
        body=probe.body,
        authorizer=_issued(world, who),
    )


def _items(table: str) -> dict[tuple[str, str], dict[str, Any]]:
    client = boto3.client("dynamodb", region_name="us-east-1")
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for page in client.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            found[(item["PK"]["S"], item["SK"]["S"])] = item
    return found


def _seed(world: MemoryWorld, who: dict[str, Any], session: str, user: str, secret: str) -> None:
    def ok(method: str, path: str, **request: Any) -> None:
        response = call_api(
            world.api_handler, method, path, authorizer=_issued(world, who), **request
        )
        assert response.status < 300, response.body

    ok(
        "POST",
        f"/v1/working-memory/{session}/messages",
        body={"messages": [_message("m1", secret)]},
    )
    ok("PUT", f"/v1/working-memory/{session}/scratchpad", body={"content": secret})
    me = {"profile": USER_PROFILE}
    ok("PUT", f"/v1/users/{user}/scratchpad", query=me, body={"content": secret})
    ok("POST", "/v1/long-term-memory/", body={"memories": [{"id": f"rec-{user}", "text": secret}]})
    memory = AGENTCORE[user][0]
    made = call_api(
        world.api_handler,
        "POST",
        f"/memories/{memory}/events",
        authorizer=_issued(world, who),
        body=_event_body(user, session, secret, "seed"),
    )
    assert made.status == 201, made.body
    AGENTCORE[user] = (memory, made.body["event"]["eventId"])
    records = []
    for ident in ("kept", "doomed"):
        created = call_api(
            world.api_handler,
            "POST",
            f"/memories/{memory}/memoryRecords/batchCreate",
            authorizer=_issued(world, who),
            body=_record_body(user, secret, ident),
        )
        assert created.status == 201, created.body
        assert created.body["failedRecords"] == [], created.body
        records.append(created.body["successfulRecords"][0]["memoryRecordId"])
    AGENTCORE_RECORDS[user] = (records[0], records[1])


def _agentcore_memory(world: MemoryWorld, admin: dict[str, Any], user: str) -> None:
    made = call_api(
        world.api_handler,
        "POST",
        "/memories/create",
        body=MEMORY_BODY,
        authorizer=_issued(world, admin),
    )
    assert made.status == 202, made.body
    AGENTCORE[user] = (made.body["memory"]["id"], "")


def _user_profile(world: MemoryWorld, admin: dict[str, Any]) -> None:
    body = {"scope": "user", "format": "markdown"}
    path = f"/v1/profiles/{USER_PROFILE}"
    put = call_api(world.api_handler, "PUT", path, body=body, authorizer=_issued(world, admin))
    assert put.status < 300, put.body


def _assert_untouched(
    before: dict[tuple[str, str], dict[str, Any]], after: dict[tuple[str, str], dict[str, Any]]
) -> None:
    """Every item stored before is as it was, and nothing new sits in its partitions."""
    changed = [key for key, item in before.items() if after.get(key) != item]
    planted = [key for key in after if key not in before and key[0] in {k[0] for k in before}]
    assert changed == [], changed
    assert planted == [], planted


def _session_users(world: MemoryWorld, victim: tuple[str, str, str]) -> set[str | None]:
    """The users of everything a search of the victim's session finds, run by the admin of
    the victim's tenant (tenant-wide: it would show a record anyone named that session in)."""
    session, user, _ = victim
    admin = B_ADMIN if user == "b1" else A_ADMIN
    found = _send(
        world,
        admin,
        "POST /v1/long-term-memory/search",
        Probe({}, body={"text": "", "session_id": {"eq": session}, "limit": 100}),
    )
    assert found.status == 200, found.body
    return {hit["user_id"] for hit in found.body["memories"]}


@pytest.fixture(params=list(PREFIXES.values()), ids=list(PREFIXES))
def world(dynamodb_table: str, request: pytest.FixtureRequest) -> MemoryWorld:
    settings = ApiSettings(
        table_name=dynamodb_table,
        region="us-east-1",
        auth_mode="jwt",
        tenant_claim="custom:tenant",
        scope_prefix=request.param,
    )
    built = build_world(dynamodb_table, settings)
    _user_profile(built, A_ADMIN)
    _user_profile(built, B_ADMIN)
    _agentcore_memory(built, A_ADMIN, "a2")
    _agentcore_memory(built, B_ADMIN, "b1")
    _seed(built, A2, "s-a2", "a2", SECRET_A2)
    _seed(built, B1, "s-b", "b1", SECRET_B)
    built.settle()  # records and messages indexed: searches could find them
    return built


def registered_routes() -> set[str]:
    """The app's own route table (what API Gateway routes to the function)."""
    routes = [*app._static_routes, *app._dynamic_routes]
    return {f"{route.method} {route.openapi_path}" for route in routes}


def test_every_route_declares_a_scope_and_has_an_isolation_probe() -> None:
    assert set(ROUTE_SCOPES) == registered_routes()
    protected = {route for route, scope in ROUTE_SCOPES.items() if scope is not None}
    assert set(_probes("s", "u", "r")) == protected


Attack = tuple[str, Who, tuple[str, str, str], dict[str, Any], tuple[str, ...]]
ATTACKS: list[Attack] = [
    # (what, attacker, the victim's (session, user, record), the victim's identity, the
    # markers no answer may carry: a1 sees neither a2's nor tenant B's; tenant A's admin
    # sees a2's, its own tenant's, but never tenant B's)
    ("user a1 against user a2 of its tenant", A1, ("s-a2", "a2", "rec-a2"), A2, MARKERS),
    ("tenant A's admin against tenant B", A_ADMIN, ("s-b", "b1", "rec-b1"), B1, ("SECRET-B",)),
    # a1 with an admin scope that is not memkit's: still only user a1
    *(
        (
            f"user a1 with {name} admin scope",
            Forged(A1, shape),
            ("s-a2", "a2", "rec-a2"),
            A2,
            MARKERS,
        )
        for name, shape in FORGED_ADMIN.items()
    ),
]


@pytest.mark.parametrize("attack", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_nothing_crosses_a_user_or_tenant_boundary(
    capsys: pytest.CaptureFixture[str],  # first: the world's seeding is captured too
    caplog: pytest.LogCaptureFixture,
    world: MemoryWorld,
    dynamodb_table: str,
    attack: Attack,
) -> None:
    _, attacker, victim, owner, unseen = attack
    before = _items(dynamodb_table)
    probes = _probes(*victim)

    # When every route is called against the victim's data
    leaks: list[str] = []
    for route, sent in probes.items():
        for probe in sent:
            response = _send(world, attacker, route, probe)
            assert response.status < 500, (route, probe, response.body)
            if any(marker in json.dumps(response.body) for marker in unseen):
                leaks.append(f"{route} {probe}: {response.status}")
    world.settle()

    # Then no response carried a victim's data, and every stored item is as it was
    assert leaks == []
    _assert_untouched(before, _items(dynamodb_table))
    # And the victim's session, searched tenant-wide, holds only what its owner wrote
    assert _session_users(world, victim) <= {victim[1]}

    # And each probe, sent by the data's owner (or its tenant's admin for admin routes),
    # works: the probes are requests that could have reached the data
    admin = B_ADMIN if owner is B1 else A_ADMIN
    # Writes that create first, reads after them, deletions (forgetting too) last.
    order = ("PUT", "POST", "PATCH", "GET", "DELETE")

    def turn(route: str) -> int:
        method = "DELETE" if route.endswith("/forget") else route.split(" ", 1)[0]
        return order.index(method)

    for route in sorted(probes, key=turn):
        sent = probes[route]
        who = admin if ROUTE_SCOPES[route] == ADMIN else owner
        for probe in sent:
            response = _send(world, who, route, probe)
            assert response.status < 400 or (route, response.status) in EXPECTED_OWNER_REFUSALS, (
                route,
                probe,
                response.status,
                response.body,
            )

    # And no log line of any of it (seeding, attacks, the owners' requests) carries stored
    # content or a credential's claims beyond the tenant
    logged = capsys.readouterr().out + caplog.text
    assert logged, "the handlers log (this check reads their output)"
    for secret in (*MARKERS, "9911", "4242", "overwritten", "planted", "custom:tenant"):
        assert secret not in logged


# What even the owner is refused, by design, among the probes above: a record never changes
# owner (PATCH user_id), and the owner's own search that asks for everyone else (ne) is a
# 403 for a user that is not an admin; a job id that does not exist is a 404.
EXPECTED_OWNER_REFUSALS: set[tuple[str, int]] = {
    ("PATCH /v1/long-term-memory/{memory_id}", 403),
    ("POST /v1/long-term-memory/search", 403),
    ("GET /v1/jobs/{job_id}", 404),
    # AgentCore operations memkit does not serve: ValidationException for everyone
    ("PUT /memories/{memory_id}/update", 400),
    ("POST /memories/{memory_id}/ingest", 400),
    ("POST /memories/{memory_id}/extractionJobs", 400),
    ("POST /memories/{memory_id}/extractionJobs/start", 400),
}


# --- the MCP server: the same matrix, tool by tool -----------------------------------------
#
# Every tool of the MCP server (its tool list, so a new tool fails here until it has a probe)
# is called through the MCP function's handler with the same verified claims, against the
# same victims' data: nothing crosses, nothing changes, and the owners' calls work.


def _mcp_probes(session: str, user: str, record: str) -> dict[str, list[dict[str, Any]]]:
    """Arguments of every tool, aimed at the victim's session, user and record."""
    text = "secret bank vault code"
    messages = [_message("x1", "overwritten")]
    mine = {"user_id": user, "profile": USER_PROFILE}
    return {
        "get_current_datetime": [{}],
        "create_long_term_memories": [
            {"memories": [{"id": record, "text": "overwritten"}]},
            {"memories": [{"id": record, "text": "overwritten", "user_id": user}]},
            {"memories": [{"id": "planted", "text": "planted", "user_id": user}]},
            {"memories": [{"id": PLANTED, "text": "planted", "session_id": session}]},
        ],
        "search_long_term_memory": [
            {"text": text},
            {"text": text, "user_id": {"eq": user}},
            {"text": "", "user_id": {"ne": "nobody"}},
        ],
        "memory_prompt": [
            {"query": text, "session_id": session},
            {"query": text, "session_id": {"eq": session}, "user_id": user},
            {"query": text, "include_long_term_search": True},
            {"query": "secret", "topics": {"any": ["x"]}, "user_id": {"eq": user}},
        ],
        "set_working_memory": [
            {"session_id": session, "messages": messages},
            {"session_id": session, "user_id": user, "messages": messages},
        ],
        "get_working_memory": [{"session_id": session}, {"session_id": session, "user_id": user}],
        "get_long_term_memory": [{"memory_id": record}],
        "edit_long_term_memory": [
            {"memory_id": record, "text": "overwritten"},
            {"memory_id": record, "user_id": user, "pinned": True},
            {"memory_id": record, "user_id": "a1"},
        ],
        "delete_long_term_memories": [{"memory_ids": [record]}],
        "supersede_long_term_memory": [{"memory_id": record, "text": "overwritten"}],
        "get_long_term_memory_history": [{"memory_id": record}],
        "compact_long_term_memories": [{"user_id": user, "dry_run": False}],
        "get_scratchpad": [{"session_id": session}, mine],
        "update_scratchpad": [
            {"session_id": session, "content": "overwritten"},
            {**mine, "content": "overwritten"},
        ],
        "clear_scratchpad": [{"session_id": session}, mine],
    }


def _mcp(world: MemoryWorld) -> Any:
    """call(message, who): through the MCP function's handler, which verifies its callers'
    tokens itself (signed with the claims of `who` as the world's issuer names them)."""
    from memkit.handlers.mcp import make_lambda_handler

    settings = verifying_settings(scope_prefix=_prefix(world))
    handler = make_lambda_handler(lambda: world.services, lambda: settings)
    return lambda message, who: call_mcp(handler, message, _issued(world, who))


def _tools(call: Any) -> dict[str, dict[str, Any]]:
    listed = call(request("tools/list"), A1)
    return {tool["name"]: tool for tool in listed.result["tools"]}


def test_every_tool_declares_a_scope_and_has_an_isolation_probe(world: MemoryWorld) -> None:
    from memkit.mcp_server.tools import TOOL_SCOPES

    tools = _tools(_mcp(world))

    assert set(TOOL_SCOPES) == set(tools)
    assert set(_mcp_probes("s", "u", "r")) == set(tools)


def _names_a_user(schema: dict[str, Any]) -> bool:
    """Whether a tool's input schema has a user_id anywhere (its own, or its records')."""
    return '"user_id"' in json.dumps(schema)


def _users_named(arguments: Any) -> list[str]:
    """The users a call's arguments name (user_id: a value, or a filter of values)."""
    found: list[str] = []
    if isinstance(arguments, list):
        for item in arguments:
            found += _users_named(item)
    elif isinstance(arguments, dict):
        for key, value in arguments.items():
            if key == "user_id":
                values = value.values() if isinstance(value, dict) else [value]
                found += [v for v in values if isinstance(v, str)]
            else:
                found += _users_named(value)
    return found


def test_every_tool_with_a_user_argument_refuses_another_users_id(world: MemoryWorld) -> None:
    handler = _mcp(world)
    with_user = {
        name for name, tool in _tools(handler).items() if _names_a_user(tool["inputSchema"])
    }
    probes = _mcp_probes("s-a2", "a2", "rec-a2")

    refused = {}
    for name in with_user:
        naming = [args for args in probes[name] if "a2" in _users_named(args)]
        assert naming, f"{name} names a user but no probe names one"
        for arguments in naming:
            answered = handler(tool_call(name, arguments), A1)
            refused[(name, json.dumps(arguments))] = (answered.status, answered.headers)

    assert len(with_user) >= 10  # every tool but the datetime, one record read and its deletion
    for (name, arguments), (status, headers) in refused.items():
        assert status == 403, (name, arguments, status)
        assert 'error="insufficient_scope"' in headers["www-authenticate"], name


@pytest.mark.parametrize("attack", ATTACKS, ids=[a[0] for a in ATTACKS])
def test_nothing_crosses_a_user_or_tenant_boundary_through_mcp(
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    world: MemoryWorld,
    dynamodb_table: str,
    attack: Attack,
) -> None:
    from memkit.mcp_server.tools import TOOL_SCOPES

    _, attacker, victim, owner, unseen = attack
    handler = _mcp(world)
    before = _items(dynamodb_table)
    probes = _mcp_probes(*victim)

    # When every tool is called against the victim's data
    leaks: list[str] = []
    for tool, sent in probes.items():
        for arguments in sent:
            answered = handler(tool_call(tool, arguments), attacker)
            assert answered.status < 500, (tool, arguments, answered.body)
            if any(marker in json.dumps(answered.body) for marker in unseen):
                leaks.append(f"{tool} {arguments}: {answered.status}")
    world.settle()

    # Then no answer carried a victim's data, and every stored item is as it was
    assert leaks == []
    _assert_untouched(before, _items(dynamodb_table))
    assert _session_users(world, victim) <= {victim[1]}

    # And each call, made by the data's owner (or its tenant's admin for admin tools), works
    admin = B_ADMIN if owner is B1 else A_ADMIN
    order = ["set_working_memory", "create_long_term_memories", "update_scratchpad"]
    order += ["edit_long_term_memory"]  # then the reads, then what removes
    last = ["clear_scratchpad", "compact_long_term_memories", "delete_long_term_memories"]
    middle = [tool for tool in probes if tool not in order + last]
    for tool in order + middle + last:
        who = admin if TOOL_SCOPES[tool] == ADMIN else owner
        for arguments in probes[tool]:
            answered = handler(tool_call(tool, arguments), who)
            failed = answered.status >= 400 or answered.result.get("isError") is True
            assert not failed or (tool, answered.status) in EXPECTED_MCP_OWNER_REFUSALS, (
                tool,
                arguments,
                answered.status,
                answered.body,
            )

    logged = capsys.readouterr().out + caplog.text
    for secret in (*MARKERS, "9911", "4242", "overwritten", "planted", "custom:tenant"):
        assert secret not in logged


# What even the owner is refused, as on the REST API: moving its record to another user
# names that user (a 403: memory:admin may name users, and even it cannot move a record), and
# a search for everyone else (ne) is a 403 for a user that is not an admin.
EXPECTED_MCP_OWNER_REFUSALS: set[tuple[str, int]] = {
    ("edit_long_term_memory", 403),
    ("search_long_term_memory", 403),
}


# --- what a refusal says: nothing about another user's record or session --------------------


def test_creating_over_another_users_record_id_answers_as_reading_it_does(
    world: MemoryWorld,
) -> None:
    # Given user a2's record rec-a2, which a1 may not see
    record = "rec-a2"
    read = _send(world, A1, "GET /v1/long-term-memory/{memory_id}", Probe({"memory_id": record}))

    # When a1 creates a record under that id (alone, and in a batch after a fresh one)
    alone = {"memories": [{"id": record, "text": "overwritten"}]}
    batch = {"memories": [{"id": "a1-fresh", "text": "mine"}, {"id": record, "text": "mine"}]}
    answers = [
        _send(world, A1, "POST /v1/long-term-memory/", Probe({}, body=body))
        for body in (alone, batch)
    ]

    # Then each is the read's 404, word for word: nothing says the id is another owner's
    assert read.status == 404
    for answer in answers:
        assert (answer.status, answer.body) == (read.status, read.body)
    # And nothing was written, not even the batch's fresh record
    get = "GET /v1/long-term-memory/{memory_id}"
    assert _send(world, A2, get, Probe({"memory_id": record})).body["text"] == SECRET_A2
    assert _send(world, A1, get, Probe({"memory_id": "a1-fresh"})).status == 404


def test_creating_over_another_users_record_id_through_mcp_answers_as_reading_it_does(
    world: MemoryWorld,
) -> None:
    handler = _mcp(world)

    read = handler(tool_call("get_long_term_memory", {"memory_id": "rec-a2"}), A1)
    created = handler(
        tool_call("create_long_term_memories", {"memories": [{"id": "rec-a2", "text": "x"}]}),
        A1,
    )

    assert read.result["isError"] is True
    assert created.status == read.status == 200
    # the same tool error, word for word, but for the tool's name
    text = created.result["content"][0]["text"]
    assert created.result["isError"] is True
    assert (
        text.replace("create_long_term_memories", "get_long_term_memory")
        == (read.result["content"][0]["text"])
    )


def test_a_record_may_not_be_moved_into_another_users_session(world: MemoryWorld) -> None:
    # Given a1's own record, outside any session
    made = _send(
        world,
        A1,
        "POST /v1/long-term-memory/",
        Probe({}, body={"memories": [{"id": "rec-a1", "text": "a1's note"}]}),
    )
    assert made.status == 200, made.body
    route = "PATCH /v1/long-term-memory/{memory_id}"

    # When a1 names a2's session in it, then a session that does not exist yet
    foreign = _send(world, A1, route, Probe({"memory_id": "rec-a1"}, body={"session_id": "s-a2"}))
    fresh = _send(world, A1, route, Probe({"memory_id": "rec-a1"}, body={"session_id": "s-new"}))

    # Then the first is refused as a2's session refuses a1 (403, the field named), the other
    # is a1's to name
    assert foreign.status == 403, foreign.body
    assert [e["field"] for e in foreign.body["errors"]] == ["session_id"]
    assert fresh.status == 200, fresh.body
    assert fresh.body["session_id"] == "s-new"


def test_add_memory_in_another_users_session_is_a_tool_error(world: MemoryWorld) -> None:
    # When a1's model calls add_memory naming a2's session
    called = _send(
        world,
        A1,
        "POST /v1/tools/call",
        Probe(
            {},
            body={"name": "add_memory", "arguments": {"text": "planted"}, "session_id": "s-a2"},
        ),
    )

    # Then the model reads why, and nothing was stored
    assert called.status == 200, called.body
    assert "belongs to another user" in called.body["error"]
    world.settle()
    assert _session_users(world, ("s-a2", "a2", "rec-a2")) <= {"a2"}


# --- pending memories: promoted by the indexer, so confined when the session is written --------


@pytest.mark.parametrize(
    ("memory", "status", "field"),
    [
        ({"id": "p-user", "text": "planted", "user_id": "a2"}, 403, "memories.0.user_id"),
        (
            {"id": "p-session", "text": "planted", "session_id": "s-a2"},
            422,
            "memories.0.session_id",
        ),
    ],
    ids=["another user", "another session"],
)
def test_a_pending_memory_may_not_name_another_user_or_session(
    world: MemoryWorld, memory: dict[str, Any], status: int, field: str
) -> None:
    # When a1 writes its own session with a pending memory naming a2 or a2's session
    route = "PUT /v1/working-memory/{session_id}"
    body = {"messages": [], "memories": [memory]}
    answer = _send(world, A1, route, Probe({"session_id": "a1-own"}, body=body))

    # Then the write is refused, naming the field, and nothing reaches a2's session
    assert answer.status == status, answer.body
    assert [e["field"] for e in answer.body["errors"]] == [field]
    world.settle()
    world.settle()
    assert _session_users(world, ("s-a2", "a2", "rec-a2")) <= {"a2"}
    read = "GET /v1/working-memory/{session_id}"
    assert _send(world, A1, read, Probe({"session_id": "a1-own"})).status == 404


def test_a_pending_memory_under_another_users_record_id_is_never_promoted_over_it(
    world: MemoryWorld,
) -> None:
    # Given a1's own session holding a pending memory under the id of a2's record
    route = "PUT /v1/working-memory/{session_id}"
    body = {"messages": [], "memories": [{"id": "rec-a2", "text": "overwritten by a1"}]}
    written = _send(world, A1, route, Probe({"session_id": "a1-own"}, body=body))
    assert written.status == 200, written.body

    # When the indexer runs over the session's stream records
    world.settle()
    world.settle()

    # Then a2's record is as a2 wrote it, still a2's
    get = "GET /v1/long-term-memory/{memory_id}"
    record = _send(world, A2, get, Probe({"memory_id": "rec-a2"}))
    assert record.status == 200, record.body
    assert (record.body["text"], record.body["user_id"]) == (SECRET_A2, "a2")
