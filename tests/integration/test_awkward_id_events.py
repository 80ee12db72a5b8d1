"""Ids that are awkward in a URL (issue 17.3) through the API handler, in the events API
Gateway builds for them: the path decoded (`/v1/long-term-memory/tea☕` for a client's
`tea%E2%98%95`), the template's routeKey and pathParameters. Every id the API takes is
addressed by its path; over real HTTP: test_awkward_ids.py."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.awkward_ids import TAKEN
from tests.conftest import ApiResponse

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
