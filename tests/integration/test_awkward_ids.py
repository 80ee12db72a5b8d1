"""Ids that are awkward in a URL (issue 17.3), over real HTTP through the local gateway, which
reads a path as API Gateway does (tests/unit/test_ids.py holds it to live captures): every id
the API takes in a body or a query is addressable by its percent-encoded path, and every id
the rule refuses (memkit.ids) is a 422 naming the field and the rule wherever it is given.
The same ids through the handler, with the events API Gateway builds:
test_awkward_id_events.py."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from memkit_dev.local.stack import LocalStack
from tests.awkward_ids import REFUSED, TAKEN

pytestmark = pytest.mark.integration

LTM = "/v1/long-term-memory"
RULE = "one URL path segment"  # words of the rule every refusal quotes


def _path(route: str, value: str) -> str:
    """`route` with its one {parameter} set to `value`, percent-encoded as a client sends it."""
    head, _, tail = route.partition("{")
    return head + quote(value, safe="") + tail.partition("}")[2]


@pytest.fixture(scope="module")
def http(stack: LocalStack) -> Iterator[httpx.Client]:
    """A client of the local stack (auth none: an admin that may name any user), with a
    profile whose scratchpads are per user."""
    with httpx.Client(base_url=stack.url, timeout=60) as client:
        created = client.put("/v1/profiles/per-user", json={"scope": "user"})
        assert created.status_code == 200, created.text
        yield client


# -- over HTTP, through the local gateway ------------------------------------------------------


@pytest.mark.parametrize("value", TAKEN)
def test_a_record_given_in_a_body_is_read_edited_and_deleted_by_its_path(
    http: httpx.Client, value: str
) -> None:
    record = {"id": value, "text": f"a note filed as {value}", "user_id": value}
    at = _path(LTM + "/{memory_id}", value)

    created = http.post(LTM + "/", json={"memories": [record]})
    read = http.get(at)
    edited = http.patch(at, json={"topics": ["awkward"]})
    deleted = http.delete(f"/v1/users/{quote(value, safe='')}")
    gone = http.get(at)

    assert created.json()["created"] == [value]
    assert read.status_code == 200, read.text
    assert (read.json()["id"], read.json()["user_id"]) == (value, value)
    assert edited.json()["topics"] == ["awkward"]
    assert deleted.status_code == 200, deleted.text
    assert gone.json()["code"] == "not_found"  # memkit's 404, not the gateway's


@pytest.mark.parametrize("value", TAKEN)
def test_a_session_named_in_its_body_is_read_changed_and_deleted_by_its_path(
    http: httpx.Client, value: str
) -> None:
    document = {
        "session_id": value,
        "namespace": value,
        "user_id": value,
        "messages": [{"id": value, "role": "user", "content": "hello"}],
    }
    at = _path("/v1/working-memory/{session_id}", value)
    where = {"namespace": value}

    put = http.put(at, json=document)
    changed = http.patch(at, params=where, json={"data": {"seen": True}})
    read = http.get(at, params=where)
    deleted = http.delete(at, params=where)
    gone = http.get(at, params=where)

    assert put.status_code == 200, put.text
    assert changed.status_code == 200, changed.text
    session = read.json()
    assert (session["session_id"], session["namespace"], session["user_id"]) == (value,) * 3
    assert session["messages"][0]["id"] == value
    assert session["data"] == {"seen": True}
    assert deleted.status_code < 300, deleted.text
    assert gone.json()["code"] == "not_found"


@pytest.mark.parametrize("value", TAKEN)
def test_a_users_scratchpad_and_a_namespaces_policy_are_addressed_by_their_paths(
    http: httpx.Client, value: str
) -> None:
    pad = _path("/v1/users/{user_id}/scratchpad", value)
    policy = _path("/v1/namespaces/{namespace}/lifecycle", value)
    where = {"profile": "per-user", "namespace": value}

    written = http.patch(pad, params=where, json={"content": "likes tea"})
    read = http.get(pad, params=where)
    cleared = http.delete(pad, params=where)
    set_policy = http.put(policy, json={"compact": True})
    read_policy = http.get(policy)
    dropped = http.delete(policy)

    assert written.status_code == 200, written.text
    assert read.json()["content"] == "likes tea"
    assert cleared.status_code < 300, cleared.text
    assert set_policy.status_code == 200, set_policy.text
    assert read_policy.json()["namespace"] == value
    assert dropped.status_code < 300, dropped.text


# Where an id may be given, in bodies and queries: (method, path, query, body, field).
Given = Callable[[str], tuple[str, str, dict[str, str] | None, Any, str]]
SESSION = "/v1/working-memory/s"


def _records(**fields: str) -> dict[str, Any]:
    return {"memories": [{"id": "r", "text": "t", **fields}]}


def _messages(mid: str) -> dict[str, Any]:
    return {"messages": [{"id": mid, "role": "user", "content": "hi"}]}


PLACES: dict[str, Given] = {
    "record id": lambda v: ("POST", LTM + "/", None, _records(id=v), "memories.0.id"),
    "record's user": lambda v: ("POST", LTM + "/", None, _records(user_id=v), "memories.0.user_id"),
    "record's session": lambda v: (
        "POST",
        LTM + "/",
        None,
        _records(session_id=v),
        "memories.0.session_id",
    ),
    "message id": lambda v: ("PUT", SESSION, None, _messages(v), "messages.0.id"),
    "pending memory": lambda v: (
        "PUT",
        SESSION,
        None,
        {"memories": [{"id": v, "text": "t"}]},
        "memories.0.id",
    ),
    "session's namespace": lambda v: ("PUT", SESSION, None, {"namespace": v}, "namespace"),
    "session in the body": lambda v: ("PUT", SESSION, None, {"session_id": v}, "session_id"),
    "appending owner": lambda v: (
        "POST",
        SESSION + "/messages",
        {"user_id": v},
        _messages("m"),
        "user_id",
    ),
    "prompt's session": lambda v: (
        "POST",
        "/v1/memory/prompt",
        None,
        {"query": "q", "session": {"session_id": v}},
        "session.session_id",
    ),
    "user in a query": lambda v: ("GET", SESSION, {"user_id": v}, None, "user_id"),
    "namespace in a query": lambda v: (
        "PATCH",
        SESSION + "/scratchpad",
        {"namespace": v},
        {"content": "x"},
        "namespace",
    ),
    "session in a query": lambda v: ("GET", "/v1/tools", {"session_id": v}, None, "session_id"),
}


@pytest.mark.parametrize("place", PLACES)
@pytest.mark.parametrize(("value", "reason"), REFUSED.items())
def test_an_id_no_path_could_name_is_a_422_naming_the_field_and_the_rule(
    http: httpx.Client, value: str, reason: str, place: str
) -> None:
    method, path, query, body, field = PLACES[place](value)

    answer = http.request(method, path, params=query, json=body)

    assert answer.status_code == 422, answer.text
    problems = {p["field"]: p["reason"] for p in answer.json()["errors"]}
    assert problems[field].startswith(reason)
    assert RULE in problems[field]


def test_a_refused_id_writes_nothing(http: httpx.Client) -> None:
    document = {
        "namespace": "refusals",
        "messages": [{"id": "a/b", "role": "user", "content": "x"}],
    }

    refused = http.put("/v1/working-memory/whole", json=document)
    read = http.get("/v1/working-memory/whole", params={"namespace": "refusals"})

    assert refused.status_code == 422
    assert read.status_code == 404


def test_ids_stored_before_the_rule_can_still_be_deleted_by_id(http: httpx.Client) -> None:
    # Given a DELETE by ids naming ids the rule now refuses (only removing: nothing is made)
    answer = http.delete(LTM, params={"memory_ids": ["legacy/1", "100%", ".."]})

    # Then it is taken: ids that were stored then can still be deleted
    assert answer.status_code == 200, answer.text


def test_what_api_gateway_makes_of_refused_ids_in_a_path(http: httpx.Client) -> None:
    # Why the rule refuses them: through the gateway they never reach the function as sent.
    record = {"id": "plain", "text": "the plain record", "user_id": "gateway"}
    assert http.post(LTM + "/", json={"memories": [record]}).status_code == 200

    question = http.get(f"{LTM}/plain%3Fsecond")  # cut at the decoded '?'
    slash = http.get(f"{LTM}/plain%2Fsecond")  # two segments: no route
    percent = http.get(f"{LTM}/100%25")  # decoded twice: '%' starts no escape

    assert question.json()["id"] == "plain"  # another record than the one named
    assert (slash.status_code, slash.json()) == (404, {"message": "Not Found"})
    assert (percent.status_code, percent.json()) == (400, {"message": "Bad Request"})
