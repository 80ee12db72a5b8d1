"""Ids that are awkward in a URL (issue 17.3) through the API handler, in the events API
Gateway builds for them: the path decoded (`/v1/long-term-memory/tea☕` for a client's
`tea%E2%98%95`), the template's routeKey and pathParameters. Every id the API takes is
addressed by its path; over real HTTP: test_awkward_ids.py."""

from __future__ import annotations

import io
import json
from collections.abc import Callable

import pytest

from memkit.client import MemkitClient
from memkit.models.domain import Owner
from memkit.models.session import SessionWrite
from memkit_dev.transfer.export import UNADDRESSABLE, Exporter
from tests.awkward_ids import TAKEN
from tests.conftest import ApiResponse, handler_transport
from tests.integration.memory_world import MemoryWorld

pytestmark = pytest.mark.integration

Call = Callable[..., ApiResponse]
LTM = "/v1/long-term-memory"
RECORD = LTM + "/{memory_id}"
SESSION = "/v1/working-memory/{session_id}"


@pytest.mark.parametrize("value", TAKEN)
def test_the_handler_addresses_every_id_api_gateway_delivers(api: Call, value: str) -> None:
    path = RECORD.replace("{memory_id}", value)
    session_path = SESSION.replace("{session_id}", value)
    record = {"id": value, "text": f"a note of {value}", "session_id": value, "user_id": value}
    # A TTL puts the session in the expiry listing, whose sort key holds its partition key.
    document = {"messages": [], "user_id": value, "ttl_seconds": 3600}

    created = api("POST", LTM + "/", body={"memories": [record]})
    read = api("GET", path, route=RECORD)
    edited = api("PATCH", path, route=RECORD, body={"pinned": True})
    session = api("PUT", session_path, route=SESSION, body=document)
    session_read = api("GET", session_path, route=SESSION)
    session_deleted = api("DELETE", session_path, route=SESSION)

    assert created.status == 200, created.body
    assert read.status == 200, read.body
    assert (read.body["session_id"], read.body["user_id"]) == (value, value)
    assert edited.body["pinned"] is True
    assert session.status == 200, session.body
    assert session_read.body["session_id"] == value
    assert session_deleted.status < 300, session_deleted.body


def test_an_export_leaves_out_what_ids_stored_before_the_rule_name_and_counts_it(
    world: MemoryWorld,
) -> None:
    # Given data stored before the id rule: a session and a user whose ids hold a '/'
    sessions = world.services.sessions
    sessions.put(Owner("default"), "legacy/1", SessionWrite())
    sessions.put(Owner("default", user_id="team/ada"), "kept", SessionWrite())
    assert world.api("PUT", "/v1/profiles/per-user", body={"scope": "user"}).status == 200
    out = io.StringIO()

    # When the namespace is exported
    with MemkitClient("http://memkit", transport=handler_transport(world.api_handler)) as client:
        counts = Exporter(client, out).run(["default"], None)

    # Then what a path can name is exported, and the rest is counted as left out
    exported = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [e["session_id"] for e in exported if e["kind"] == "session"] == ["kept"]
    assert counts[UNADDRESSABLE] == 2  # the session, and the user's scratchpad
