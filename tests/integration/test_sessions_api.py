"""Sessions through the real handler on moto: the document, its routes, limits and expiry."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest

from memkit.store import keys
from tests.integration.conftest import Call

pytestmark = pytest.mark.integration
# The DynamoDB Local tier (tests/conftest.py): these run on moto and on AWS's own engine.
ENGINES = ("moto", "dynamodb-local")
S1 = "/v1/working-memory/s1"
ULID = r"^[0-9A-HJKMNP-TV-Z]{26}$"


def _at(seconds_ago: float) -> str:
    return (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()


def _msg(
    mid: str, content: str | None = None, seconds_ago: float = 0, **extra: Any
) -> dict[str, Any]:
    return {
        "id": mid,
        "role": "user",
        "content": content or f"text of {mid}",
        "created_at": _at(seconds_ago),
        **extra,
    }


def _items(table: str, session_id: str = "s1", namespace: str = "default") -> list[dict[str, Any]]:
    """Every stored item of a session's partition, expired ones included."""
    client = boto3.client("dynamodb", region_name="us-east-1")
    found = client.query(
        TableName=table,
        KeyConditionExpression="PK = :pk",
        ExpressionAttributeValues={":pk": {"S": keys.session_pk("default", namespace, session_id)}},
    )
    return list(found["Items"])


def _expire(table: str, session_id: str = "s1", namespace: str = "default") -> None:
    """What DynamoDB leaves for days after TTL: the session item past expires_at, still stored."""
    pk, sk = keys.session_key("default", namespace, session_id)
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=table,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="SET expires_at = :past",
        ExpressionAttributeValues={":past": {"N": str(int(time.time()) - 60)}},
    )


def _contents(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"]]


def _log(api: Call, path: str = S1, **query: str) -> list[str]:
    """The ids in the session's message log, oldest first."""
    body = api("GET", f"{path}/messages", query={"limit": "1000", **query}).body
    return [m["id"] for m in body["messages"]]


# -- 1. the session document ---------------------------------------------------------------


def test_a_put_document_reads_back_with_every_field(api: Call) -> None:
    document = {
        "messages": [_msg("m1", "hello", 10), _msg("m2", "hi there", 5, role="assistant")],
        "memories": [{"id": "mem1", "text": "likes tea", "memory_type": "semantic"}],
        "data": {"plan": ["a", "b"], "n": 1.5},
        "context": "earlier they talked about tea",
        "tokens": 42,
        "ttl_seconds": 3600,
        "long_term_memory_strategy": {"strategy": "summary", "config": {"max": 3}},
        "user_id": "u1",
        "title": "Tea talk",
        "metadata": {"source": "web"},
    }

    put = api("PUT", S1, body=document)
    got = api("GET", S1)

    assert put.status == got.status == 200
    body = got.body
    assert _contents(body) == ["hello", "hi there"]
    assert [m["role"] for m in body["messages"]] == ["user", "assistant"]
    assert body["memories"][0]["id"] == "mem1"
    assert body["memories"][0]["text"] == "likes tea"
    assert body["data"] == {"plan": ["a", "b"], "n": 1.5}
    assert body["context"] == "earlier they talked about tea"
    assert body["tokens"] == 42
    assert body["ttl_seconds"] == 3600
    assert body["long_term_memory_strategy"] == {"strategy": "summary", "config": {"max": 3}}
    assert (body["user_id"], body["namespace"], body["session_id"]) == ("u1", "default", "s1")
    assert (body["title"], body["metadata"]) == ("Tea talk", {"source": "web"})
    assert body["created_at"]
    assert body["updated_at"]
    assert body["last_accessed"]
    assert body["expires_at"] == pytest.approx(time.time() + 3600, abs=5)
    assert body["scratchpad"] == {
        "profile": "default",
        "scope": "session",
        "format": "text",
        "content": None,
        "version": 0,
    }
    assert put.headers["ETag"] == got.headers["ETag"]
    assert put.body["new_session"] is True
    assert got.body["new_session"] is None


def test_messages_are_ordered_by_created_at_then_id(api: Call) -> None:
    same_time = _at(30)
    api(
        "PUT",
        S1,
        body={
            "messages": [
                _msg("late", seconds_ago=1),
                {"id": "b", "role": "user", "content": "b", "created_at": same_time},
                {"id": "a", "role": "user", "content": "a", "created_at": same_time},
                _msg("early", seconds_ago=100),
            ]
        },
    )

    assert [m["id"] for m in api("GET", S1).body["messages"]] == ["early", "a", "b", "late"]


def test_a_message_without_id_or_time_gets_a_ulid_and_the_server_time(api: Call) -> None:
    before = datetime.now(UTC)

    api("PUT", S1, body={"messages": [{"role": "user", "content": "hi"}]})

    message = api("GET", S1).body["messages"][0]
    assert message["id"]
    assert len(message["id"]) == 26
    assert before <= datetime.fromisoformat(message["created_at"]) <= datetime.now(UTC)


def test_a_message_more_than_300_s_ahead_is_a_422_naming_it(api: Call) -> None:
    future = (datetime.now(UTC) + timedelta(seconds=400)).isoformat()

    response = api("PUT", S1, body={"messages": [_msg("ok"), _msg("m", created_at=future)]})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "messages.1.created_at"
    assert api("GET", S1).status == 404  # nothing written


@pytest.mark.parametrize(
    ("memory", "field"),
    [({"text": "no id"}, "memories.0.id"), ({"id": "m"}, "memories.0.text")],
)
def test_a_pending_memory_needs_an_id_and_text(
    api: Call, memory: dict[str, Any], field: str
) -> None:
    response = api("PUT", S1, body={"memories": [memory]})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == field


def test_ttl_sets_expires_at_on_the_session_and_every_item(api: Call, dynamodb_table: str) -> None:
    api(
        "PUT",
        S1,
        body={
            "messages": [_msg("m1"), _msg("m2")],
            "memories": [{"id": "x", "text": "fact"}],
            "ttl_seconds": 600,
            "scratchpad": "notes",
        },
    )

    items = _items(dynamodb_table)
    session = next(i for i in items if i["SK"]["S"] == "META")
    others = [i for i in items if i["SK"]["S"] != "META"]
    assert {i["SK"]["S"].split("#")[0] for i in others} == {"MSG", "MEM", "PAD"}
    session_expiry = int(session["expires_at"]["N"])
    assert session_expiry == pytest.approx(time.time() + 600, abs=5)
    # every other item carries an expiry, and outlives the session so it goes with it
    assert all(session_expiry <= int(i["expires_at"]["N"]) <= session_expiry + 600 for i in others)


def test_each_write_refreshes_the_expiry(api: Call, dynamodb_table: str) -> None:
    api("PUT", S1, body={"messages": [_msg("m1")], "ttl_seconds": 600})
    _expire_soon = {":soon": {"N": str(int(time.time()) + 5)}}
    pk, sk = keys.session_key("default", "default", "s1")
    boto3.client("dynamodb", region_name="us-east-1").update_item(
        TableName=dynamodb_table,
        Key={"PK": {"S": pk}, "SK": {"S": sk}},
        UpdateExpression="SET expires_at = :soon",
        ExpressionAttributeValues=_expire_soon,
    )

    api("POST", f"{S1}/messages", body={"messages": [_msg("m2")]})

    assert api("GET", S1).body["expires_at"] == pytest.approx(time.time() + 600, abs=5)


def test_without_ttl_nothing_expires_and_a_later_ttl_reaches_every_item(
    api: Call, dynamodb_table: str
) -> None:
    api("PUT", S1, body={"messages": [_msg("m1"), _msg("m2")]})
    assert all("expires_at" not in i for i in _items(dynamodb_table))

    api("PATCH", S1, body={"ttl_seconds": 60})

    assert all("expires_at" in i for i in _items(dynamodb_table))
    api("PATCH", S1, body={"ttl_seconds": None})
    assert all("expires_at" not in i for i in _items(dynamodb_table))


def test_an_expired_session_is_never_returned(api: Call, dynamodb_table: str) -> None:
    api("PUT", S1, body={"messages": [_msg("m1")], "ttl_seconds": 600})
    api("PUT", "/v1/working-memory/s2", body={"messages": [_msg("m1")]})

    _expire(dynamodb_table)

    assert api("GET", S1).status == 404
    assert api("GET", f"{S1}/messages").status == 404
    assert api("GET", "/v1/working-memory/").body == {"sessions": ["s2"], "total": 1}


def test_a_session_recreated_after_it_expired_starts_empty(api: Call, dynamodb_table: str) -> None:
    api(
        "PUT",
        S1,
        body={"messages": [_msg("old")], "ttl_seconds": 600, "data": {"k": 1}, "scratchpad": "x"},
    )
    _expire(dynamodb_table)

    api("POST", f"{S1}/messages", body={"messages": [_msg("new")]})

    body = api("GET", S1).body
    assert [m["id"] for m in body["messages"]] == ["new"]
    assert body["data"] == {}
    assert body["ttl_seconds"] is None
    assert body["scratchpad"]["content"] is None
    assert _log(api) == ["new"]


def test_a_put_with_scratchpad_content_seeds_the_scratchpad_once(api: Call) -> None:
    first = api("PUT", S1, body={"messages": [_msg("m1")], "scratchpad": "# Notes\n- likes tea"})
    again = api("PUT", S1, body={"messages": [_msg("m1")], "scratchpad": "something else"})

    assert first.body["scratchpad"]["content"] == "# Notes\n- likes tea"
    assert again.body["scratchpad"]["content"] == "# Notes\n- likes tea"
    assert api("GET", f"{S1}/scratchpad").body["content"] == "# Notes\n- likes tea"


def test_a_seed_the_profile_refuses_writes_nothing(api: Call) -> None:
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    api("PUT", "/v1/profiles/card", body={"schema": schema})

    response = api(
        "PUT", S1, body={"profile": "card", "messages": [_msg("m1")], "scratchpad": {"age": 3}}
    )

    assert response.status == 422
    assert api("GET", S1).status == 404


def test_the_document_shows_the_user_scoped_scratchpad_of_its_owner(api: Call) -> None:
    api("PUT", "/v1/profiles/prefs", body={"scope": "user", "format": "markdown"})
    api("PUT", "/v1/users/u1/scratchpad", query={"profile": "prefs"}, body={"content": "- tea"})

    api("PUT", S1, body={"profile": "prefs", "user_id": "u1", "messages": [_msg("m1")]})

    pad = api("GET", S1).body["scratchpad"]
    assert pad == {
        "profile": "prefs",
        "scope": "user",
        "format": "markdown",
        "content": "- tea",
        "version": 1,
    }


def test_another_users_session_is_refused(api: Call) -> None:
    api("PUT", S1, body={"user_id": "u1", "messages": [_msg("m1")]})

    assert api("GET", S1, query={"user_id": "u2"}).status == 403
    assert api("PUT", S1, query={"user_id": "u2"}, body={"messages": []}).status == 403
    assert api("DELETE", S1, query={"user_id": "u2"}).status == 403
    assert api("GET", S1, query={"user_id": "u1"}).status == 200
    assert api("GET", S1).status == 200  # no user named: the session id finds it


# -- 2. routes -------------------------------------------------------------------------------


def test_list_filters_by_namespace_and_user_pages_and_is_newest_first(
    api: Call, dynamodb_table: str
) -> None:
    for index in range(5):
        api(
            "PUT",
            f"/v1/working-memory/s{index}",
            body={"user_id": "u1" if index % 2 == 0 else "u2", "messages": []},
        )
        time.sleep(0.002)
    api("PUT", "/v1/working-memory/other", body={"namespace": "ns2", "messages": []})
    _expire(dynamodb_table, "s4")

    everyone = api("GET", "/v1/working-memory/").body
    page = api("GET", "/v1/working-memory/", query={"limit": "2", "offset": "1"}).body
    users = api("GET", "/v1/working-memory/", query={"user_id": "u1"}).body
    other = api("GET", "/v1/working-memory/", query={"namespace": "ns2"}).body

    assert everyone == {"sessions": ["s3", "s2", "s1", "s0"], "total": 4}
    assert page == {"sessions": ["s2", "s1"], "total": 4}
    assert users == {"sessions": ["s2", "s0"], "total": 2}
    assert other == {"sessions": ["other"], "total": 1}
    assert api("GET", "/v1/working-memory", query={"limit": "1"}).body["sessions"] == ["s3"]


@pytest.mark.parametrize("query", [{"limit": "0"}, {"limit": "101"}, {"offset": "-1"}])
def test_list_paging_out_of_range_is_a_422(api: Call, query: dict[str, str]) -> None:
    assert api("GET", "/v1/working-memory/", query=query).status == 422


def test_recent_messages_limit_keeps_the_newest(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg(f"m{i}", seconds_ago=100 - i) for i in range(10)]})

    body = api("GET", S1, query={"recent_messages_limit": "3"}).body

    assert [m["id"] for m in body["messages"]] == ["m7", "m8", "m9"]
    assert body["message_count"] == 10


def test_a_context_window_trims_the_oldest_and_reports_the_percentages(api: Call) -> None:
    words = " ".join(["word"] * 100)  # about 100 tokens a message
    api("PUT", S1, body={"messages": [_msg(f"m{i}", words, 100 - i) for i in range(10)]})

    body = api("GET", S1, query={"context_window_max": "450"}).body

    assert [m["id"] for m in body["messages"]] == ["m6", "m7", "m8", "m9"]
    assert 80 < body["context_percentage_total_used"] <= 100
    assert body["context_percentage_until_summarization"] == 100.0
    whole = api("GET", S1, query={"model_name": "gpt-4o-2024-08-06"}).body
    assert len(whole["messages"]) == 10
    assert whole["context_percentage_total_used"] == pytest.approx(100 * 1010 / 128_000, rel=0.1)
    assert api("GET", S1).body["context_percentage_total_used"] is None


def test_an_unknown_model_is_a_422_that_says_what_to_send(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg("m1")]})

    response = api("GET", S1, query={"model_name": "my-private-llm"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "model_name"
    assert "context_window_max" in response.body["errors"][0]["reason"]


def test_a_put_does_not_rewrite_stored_messages(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg("m1", "original", 10)]})

    api("PUT", S1, body={"messages": [_msg("m1", "edited", 10), _msg("m2", "new", 1)]})

    assert _contents(api("GET", S1).body) == ["original", "new"]


def test_a_put_deletes_the_messages_it_leaves_out(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg(f"m{i}", seconds_ago=10 - i) for i in range(4)]})

    api("PUT", S1, body={"messages": [_msg("m0", seconds_ago=10), _msg("m3", seconds_ago=7)]})

    assert [m["id"] for m in api("GET", S1).body["messages"]] == ["m0", "m3"]
    assert _log(api) == ["m0", "m3"]


def test_older_messages_a_put_leaves_out_stay_in_the_log(api: Call) -> None:
    # agent-memory-client's append: a GET trimmed to a window, then a PUT of what it saw
    api("PUT", S1, body={"messages": [_msg(f"m{i}", seconds_ago=10 - i) for i in range(5)]})
    shown = api("GET", S1, query={"recent_messages_limit": "2"}).body["messages"]

    api("PUT", S1, body={"messages": [*shown, _msg("m5")]})

    assert [m["id"] for m in api("GET", S1).body["messages"]] == ["m3", "m4", "m5"]
    assert _log(api) == ["m0", "m1", "m2", "m3", "m4", "m5"]
    assert api("GET", S1).body["message_count"] == 6


def test_a_put_leaves_fields_the_ams_client_does_not_know(api: Call) -> None:
    api("PUT", S1, body={"title": "kept", "metadata": {"a": 1}, "ttl_seconds": 600})

    # what agent-memory-client's set_working_memory_data sends: no title, metadata or ttl
    api("PUT", S1, body={"messages": [], "data": {"x": "y"}, "tokens": 0, "session_id": "s1"})

    body = api("GET", S1).body
    assert (body["title"], body["metadata"], body["ttl_seconds"]) == ("kept", {"a": 1}, 600)
    assert body["data"] == {"x": "y"}


def test_a_put_ignores_the_response_only_keys_the_client_echoes(api: Call) -> None:
    response = api(
        "PUT",
        S1,
        body={
            "messages": [_msg("m1")],
            "session_id": "s1",
            "last_accessed": _at(0),
            "context_percentage_total_used": 1.5,
            "context_percentage_until_summarization": 2.5,
            "new_session": False,
            "unsaved": None,
        },
    )

    assert response.status == 200


def test_a_put_for_another_session_id_is_a_422(api: Call) -> None:
    response = api("PUT", S1, body={"session_id": "s2", "messages": []})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "session_id"


def test_delete_removes_every_item_of_the_session(api: Call, dynamodb_table: str) -> None:
    api(
        "PUT",
        S1,
        body={
            "messages": [_msg("m1"), _msg("m2")],
            "memories": [{"id": "x", "text": "fact"}],
            "scratchpad": "notes",
        },
    )
    api("PUT", "/v1/working-memory/s2", body={"messages": [_msg("m1")]})

    response = api("DELETE", S1)

    assert response.status == 200
    assert response.body == {"status": "ok"}
    assert _items(dynamodb_table) == []
    assert api("GET", S1).status == 404
    assert api("GET", "/v1/working-memory/s2").status == 200
    assert api("DELETE", S1).status == 200  # deleting again is fine


def test_append_creates_the_session_and_is_idempotent_by_message_id(api: Call) -> None:
    first = api(
        "POST",
        f"{S1}/messages",
        body={"messages": [{"id": "m1", "role": "user", "content": "hi"}], "user_id": "u1"},
    )
    time.sleep(0.002)
    # a retry: same id, no created_at (so a new server time), even other content
    again = api(
        "POST",
        f"{S1}/messages",
        body={
            "messages": [
                {"id": "m1", "role": "user", "content": "hi (retry)"},
                {"id": "m2", "role": "assistant", "content": "hello"},
            ]
        },
    )

    assert first.status == again.status == 201
    assert first.body["created"] is True
    assert again.body["created"] is False
    assert (first.body["appended"], again.body["appended"]) == (["m1"], ["m2"])
    assert again.body["already_stored"] == ["m1"]
    body = api("GET", S1).body
    assert _contents(body) == ["hi", "hello"]
    assert body["user_id"] == "u1"
    assert body["message_count"] == 2


def test_the_message_log_pages_with_an_opaque_cursor(api: Call) -> None:
    api(
        "PUT",
        S1,
        body={
            "messages": [
                _msg(f"m{i}", seconds_ago=100 - i, role="user" if i % 2 else "assistant")
                for i in range(7)
            ]
        },
    )

    seen, cursor = [], None
    while True:
        query = {"limit": "3", **({"cursor": cursor} if cursor else {})}
        page = api("GET", f"{S1}/messages", query=query).body
        seen.append([m["id"] for m in page["messages"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break

    assert seen == [["m0", "m1", "m2"], ["m3", "m4", "m5"], ["m6"]]
    assert _log(api, order="desc") == ["m6", "m5", "m4", "m3", "m2", "m1", "m0"]
    assert _log(api, roles="user") == ["m1", "m3", "m5"]


def test_a_cursor_that_is_not_ours_is_a_400(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg(f"m{i}", seconds_ago=10 - i) for i in range(3)]})
    api("PUT", "/v1/working-memory/s2", body={"messages": [_msg("x1"), _msg("x2")]})
    other = api("GET", "/v1/working-memory/s2/messages", query={"limit": "1"}).body["next_cursor"]

    garbage = api("GET", f"{S1}/messages", query={"cursor": "not-a-cursor"})
    foreign = api("GET", f"{S1}/messages", query={"cursor": other})

    assert garbage.status == foreign.status == 400
    assert garbage.body["errors"][0]["field"] == "cursor"


def test_patch_changes_fields_and_merges_data_without_touching_messages(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg("m1")], "data": {"keep": 1, "drop": 2}})

    response = api(
        "PATCH",
        S1,
        body={"title": "Trip", "data": {"drop": None, "add": [1]}, "context": "summary"},
    )

    body = response.body
    assert response.status == 200
    assert body["data"] == {"keep": 1, "add": [1]}
    assert (body["title"], body["context"]) == ("Trip", "summary")
    assert [m["id"] for m in body["messages"]] == ["m1"]
    assert api("PATCH", "/v1/working-memory/nope", body={"title": "x"}).status == 404


def test_if_match_guards_session_writes(api: Call) -> None:
    etag = api("PUT", S1, body={"messages": []}).headers["ETag"]
    api("PATCH", S1, body={"title": "changed"})

    stale = api("PATCH", S1, headers={"If-Match": etag}, body={"title": "mine"})

    assert stale.status == 409
    assert api("GET", S1).body["title"] == "changed"


def test_patch_sets_the_sessions_window_and_null_gives_back_the_servers(api: Call) -> None:
    api("PUT", S1, query={"model_name": "gpt-4"}, body={"messages": [_msg("m1")]})

    left = api("PATCH", S1, body={"title": "Tea"}).body["context_window_max"]
    changed = api("PATCH", S1, body={"context_window_max": 3000}).body["context_window_max"]
    reset = api("PATCH", S1, body={"context_window_max": None}).body["context_window_max"]

    assert left == 8192  # a PATCH that names no window keeps the session's (gpt-4's)
    assert changed == 3000
    assert reset is None  # the server's summary_window_tokens again
    assert api("GET", S1).body["context_window_max"] is None
    assert _log(api) == ["m1"]


@pytest.mark.parametrize("window", [0, -5, 100_000_001, "2000", True, 2000.5])
def test_a_patch_window_that_is_not_a_token_count_is_a_422_naming_it(
    api: Call, window: Any
) -> None:
    api("PUT", S1, query={"context_window_max": "4000"}, body={"messages": [_msg("m1")]})

    response = api("PATCH", S1, body={"title": "Tea", "context_window_max": window})

    assert response.status == 422, response.body
    assert [e["field"] for e in response.body["errors"]] == ["context_window_max"]
    assert response.body["errors"][0]["reason"]
    kept = api("GET", S1).body
    assert (kept["context_window_max"], kept["title"]) == (4000, None)  # nothing written


# -- 4. max_messages -------------------------------------------------------------------------


def test_max_messages_prunes_the_oldest_and_is_off_by_default(api: Call) -> None:
    api("PUT", "/v1/profiles/short", body={"max_messages": 3})
    api("PUT", S1, body={"profile": "short", "messages": [_msg("m0", seconds_ago=50)]})

    for index in range(1, 5):
        api(
            "POST", f"{S1}/messages", body={"messages": [_msg(f"m{index}", seconds_ago=50 - index)]}
        )

    assert _log(api) == ["m2", "m3", "m4"]
    assert api("GET", S1).body["message_count"] == 3
    api("PUT", "/v1/working-memory/s2", body={"messages": [_msg(f"x{i}") for i in range(5)]})
    assert len(_log(api, "/v1/working-memory/s2")) == 5


def test_max_messages_applies_to_a_put_and_to_one_large_append(api: Call) -> None:
    api("PUT", "/v1/profiles/short", body={"max_messages": 2})
    api(
        "PUT",
        S1,
        body={"profile": "short", "messages": [_msg(f"m{i}", seconds_ago=9 - i) for i in range(4)]},
    )
    assert _log(api) == ["m2", "m3"]

    response = api(
        "POST",
        f"{S1}/messages",
        body={"messages": [_msg(f"n{i}", seconds_ago=3 - i) for i in range(3)]},
    )

    assert response.body["pruned"] == 2
    assert _log(api) == ["n1", "n2"]


# -- 5. bad input ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "field"),
    [
        ({"role": "user", "content": ""}, "messages.1.content"),
        ({"role": "user", "content": "  "}, "messages.1.content"),
        ({"role": "user", "content": [{"type": "text", "text": "x"}]}, "messages.1.content"),
        ({"role": 7, "content": "x"}, "messages.1.role"),
        ({"role": "user", "content": "x", "tool_calls": "nope"}, "messages.1.tool_calls"),
        ({"role": "user", "content": "x", "colour": "red"}, "messages.1.colour"),
        (
            {"role": "user", "content": "x", "created_at": "0240-07-15T09:43:13"},
            "messages.1.created_at",
        ),
    ],
)
def test_a_bad_message_is_a_422_naming_it_and_nothing_is_written(
    api: Call, message: dict[str, Any], field: str
) -> None:
    api("PUT", S1, body={"messages": [_msg("m0")], "data": {"v": 1}})
    before = api("GET", S1).body

    for method, path, body in [
        ("PUT", S1, {"messages": [_msg("m0"), message], "data": {"v": 2}}),
        ("POST", f"{S1}/messages", {"messages": [_msg("m9"), message]}),
    ]:
        response = api(method, path, body=body)
        assert response.status == 422, (method, response.body)
        assert response.body["errors"][0]["field"] == field

    assert api("GET", S1).body == before


def test_a_message_too_large_for_an_item_is_a_413_naming_it(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg("m0")]})

    response = api(
        "POST", f"{S1}/messages", body={"messages": [_msg("ok"), _msg("big", "x" * 360_000)]}
    )

    assert response.status == 413
    assert response.body["errors"][0]["field"] == "messages.1"
    assert _log(api) == ["m0"]


def test_too_many_messages_in_one_request_is_a_422(api: Call) -> None:
    response = api("POST", f"{S1}/messages", body={"messages": [_msg(f"m{i}") for i in range(101)]})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "messages"
    assert api("GET", S1).status == 404


def test_a_repeated_id_is_kept_once_unless_its_content_differs(api: Call) -> None:
    # agent-memory-client's retried append: stored messages plus the same message again
    same = api("PUT", S1, body={"messages": [_msg("m1", "a"), _msg("m2", "b"), _msg("m1", "a")]})
    other = api("PUT", S1, body={"messages": [_msg("m1", "a"), _msg("m1", "changed")]})

    assert same.status == 200
    assert [m["id"] for m in same.body["messages"]] == ["m1", "m2"]
    assert other.status == 422
    assert other.body["errors"][0]["field"] == "messages.1.id"


def test_null_data_values_are_refused_because_clients_cannot_read_them(api: Call) -> None:
    response = api("PUT", S1, body={"data": {"a": None}})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "data.a"


def test_naming_a_profile_that_does_not_exist_is_a_404_and_changes_nothing(api: Call) -> None:
    api("PUT", S1, body={"messages": [_msg("m1")]})

    patch = api("PATCH", S1, body={"profile": "nope"})
    put = api("PUT", "/v1/working-memory/s2", body={"profile": "nope", "messages": []})

    assert patch.status == put.status == 404
    assert api("GET", S1).body["profile"] is None
    assert api("GET", "/v1/working-memory/s2").status == 404


def test_patching_the_profile_switches_the_scratchpad_the_document_shows(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"format": "markdown"})
    api("PUT", S1, body={"messages": [_msg("m1")], "scratchpad": "default pad"})

    body = api("PATCH", S1, body={"profile": "notes"}).body

    assert body["profile"] == "notes"
    assert body["scratchpad"]["profile"] == "notes"
    assert body["scratchpad"]["content"] is None


def test_a_put_rewrites_only_the_pending_memories_that_changed(
    api: Call, dynamodb_table: str
) -> None:
    memories = [{"id": "a", "text": "likes tea"}, {"id": "b", "text": "lives in Oslo"}]
    api("PUT", S1, body={"memories": memories})
    written = {i["SK"]["S"]: i["updated_at"]["S"] for i in _items(dynamodb_table)}
    time.sleep(0.002)

    api(
        "PUT",
        S1,
        body={
            "memories": [
                memories[0],
                {"id": "b", "text": "lives in Bergen"},
                {"id": "c", "text": "x"},
            ]
        },
    )

    body = api("GET", S1).body
    assert [(m["id"], m["text"]) for m in body["memories"]] == [
        ("a", "likes tea"),
        ("b", "lives in Bergen"),
        ("c", "x"),
    ]
    after = {i["SK"]["S"]: i["updated_at"]["S"] for i in _items(dynamodb_table)}
    assert after["MEM#a"] == written["MEM#a"]  # unchanged: not rewritten
    api("PUT", S1, body={"memories": [memories[0]]})
    assert [m["id"] for m in api("GET", S1).body["memories"]] == ["a"]
    assert "MEM#b" not in {i["SK"]["S"] for i in _items(dynamodb_table)}


def test_a_put_answers_the_document_a_get_would_show(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"format": "markdown"})
    api("PUT", S1, body={"messages": [_msg(f"m{i}", f"stored {i}", 50 - i) for i in range(5)]})
    words = " ".join(["word"] * 60)
    body = {
        "profile": "notes",
        "scratchpad": "- seeded",
        "memories": [{"id": "x", "text": "fact"}],
        "data": {"k": "v"},
        # m3 is dropped (m0, m1 leave the view), m4 is sent with other content (the stored
        # one stays), two are new
        "messages": [
            _msg("m2", "stored 2", 48),
            _msg("m4", "edited", 46),
            _msg("n1", words, 10),
            _msg("n2", words, 5),
        ],
    }

    # each new message costs about 62 tokens: a 100-token window holds only the newest
    put = api("PUT", S1, query={"context_window_max": "100"}, body=body)
    got = api("GET", S1, query={"context_window_max": "100"})

    assert put.status == got.status == 200
    assert {**put.body, "new_session": None} == got.body
    assert [m["id"] for m in got.body["messages"]] == ["n2"]
    whole = api("GET", S1).body["messages"]
    assert [(m["id"], m["content"]) for m in whole][:2] == [
        ("m2", "stored 2"),
        ("m4", "stored 4"),  # not rewritten
    ]
    assert _log(api) == ["m0", "m1", "m2", "m4", "n1", "n2"]
