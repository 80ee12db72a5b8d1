"""/v1/profiles through the real handler on moto."""

from __future__ import annotations

import pytest

from tests.integration.conftest import Call

pytestmark = pytest.mark.integration

NOTES = {"scope": "session", "format": "markdown", "template": "# Notes\n- name:\n- goal:"}
PREFS_SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "tags": {"type": "array"}},
    "additionalProperties": False,
}


def test_a_stored_profile_reads_back_with_its_version_as_etag(api: Call) -> None:
    # Given a markdown profile
    put = api("PUT", "/v1/profiles/notes", body=NOTES)

    # When it is read
    got = api("GET", "/v1/profiles/notes")

    # Then it is what was stored, versioned
    assert put.status == 200
    assert got.status == 200
    assert got.body["template"] == NOTES["template"]
    assert got.body["format"] == "markdown"
    assert got.body["version"] == 1
    assert got.headers["ETag"] == '"1"'


def test_a_schema_implies_the_json_format(api: Call) -> None:
    response = api("PUT", "/v1/profiles/prefs", body={"schema": PREFS_SCHEMA})

    assert response.status == 200
    assert response.body["format"] == "json"
    assert response.body["schema"] == PREFS_SCHEMA


def test_template_with_schema_is_refused_and_nothing_is_stored(api: Call) -> None:
    response = api(
        "PUT", "/v1/profiles/both", body={"template": "# x", "schema": {"type": "object"}}
    )

    assert response.status == 422
    assert response.body["code"] == "validation_error"
    assert any(e["field"] == "template" for e in response.body["errors"])
    assert api("GET", "/v1/profiles/both").status == 404


def test_an_invalid_json_schema_is_refused_naming_the_problem(api: Call) -> None:
    response = api("PUT", "/v1/profiles/bad", body={"schema": {"type": "nope"}})

    assert response.status == 422
    assert response.body["errors"][0]["field"].startswith("schema")


def test_a_schema_with_the_markdown_format_is_refused(api: Call) -> None:
    response = api(
        "PUT", "/v1/profiles/bad", body={"format": "markdown", "schema": {"type": "object"}}
    )

    assert response.status == 422
    assert any(e["field"] == "format" for e in response.body["errors"])


def test_unknown_profile_fields_and_bad_values_are_422(api: Call) -> None:
    unknown = api("PUT", "/v1/profiles/p", body={"scope": "session", "colour": "red"})
    bad_scope = api("PUT", "/v1/profiles/p", body={"scope": "galaxy"})
    bad_tokens = api("PUT", "/v1/profiles/p", body={"max_tokens": 0})

    assert [unknown.status, bad_scope.status, bad_tokens.status] == [422, 422, 422]
    assert bad_scope.body["errors"][0]["field"] == "scope"
    assert bad_tokens.body["errors"][0]["field"] == "max_tokens"


def test_a_profile_name_outside_the_pattern_is_422(api: Call) -> None:
    response = api("PUT", "/v1/profiles/-bad!", body=NOTES)

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "name"


def test_the_default_profile_is_built_in_until_one_is_stored(api: Call) -> None:
    builtin = api("GET", "/v1/profiles/default")
    api("PUT", "/v1/profiles/default", body={"format": "markdown", "template": "# Me"})
    stored = api("GET", "/v1/profiles/default")

    assert builtin.status == 200
    assert builtin.body["builtin"] is True
    assert builtin.body["format"] == "text"
    assert stored.body["builtin"] is False
    assert stored.body["template"] == "# Me"


def test_a_missing_profile_is_404_with_the_error_body(api: Call) -> None:
    response = api("GET", "/v1/profiles/nothing")

    assert response.status == 404
    assert response.body == {
        "detail": "profile 'nothing' does not exist",
        "code": "not_found",
        "errors": [],
    }


def test_profiles_list_pages_with_an_opaque_cursor(api: Call) -> None:
    for name in ("a1", "a2", "a3"):
        api("PUT", f"/v1/profiles/{name}", body=NOTES)

    first = api("GET", "/v1/profiles", query={"limit": 2})
    second = api("GET", "/v1/profiles", query={"limit": 2, "cursor": first.body["next_cursor"]})

    names = [p["name"] for p in first.body["profiles"] + second.body["profiles"]]
    assert names == ["default", "a1", "a2", "a3"]  # the built-in default is shown first


def test_a_tampered_cursor_is_400(api: Call) -> None:
    response = api("GET", "/v1/profiles", query={"cursor": "not-a-cursor"})

    assert response.status == 400
    assert response.body["errors"][0]["field"] == "cursor"


def test_profiles_are_separate_per_namespace(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", query={"namespace": "team-a"}, body=NOTES)

    assert api("GET", "/v1/profiles/notes", query={"namespace": "team-a"}).status == 200
    assert api("GET", "/v1/profiles/notes", query={"namespace": "team-b"}).status == 404


def test_if_match_guards_profile_replacement(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body=NOTES)

    stale = api("PUT", "/v1/profiles/notes", body=NOTES, headers={"If-Match": '"7"'})
    fresh = api("PUT", "/v1/profiles/notes", body=NOTES, headers={"If-Match": '"1"'})

    assert stale.status == 409
    assert stale.body["code"] == "version_conflict"
    assert fresh.status == 200
    assert fresh.body["version"] == 2


def test_delete_removes_a_profile_and_a_second_delete_is_404(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body=NOTES)

    first = api("DELETE", "/v1/profiles/notes")
    second = api("DELETE", "/v1/profiles/notes")

    assert first.status == 200
    assert first.body == {"status": "ok"}
    assert second.status == 404
    assert api("GET", "/v1/profiles/notes").status == 404


def test_if_match_star_and_lists_work_on_profiles_as_on_scratchpads(api: Call) -> None:
    missing = api("PUT", "/v1/profiles/notes", body=NOTES, headers={"If-Match": "*"})
    api("PUT", "/v1/profiles/notes", body=NOTES)

    exists = api("PUT", "/v1/profiles/notes", body=NOTES, headers={"If-Match": "*"})
    listed = api("DELETE", "/v1/profiles/notes", headers={"If-Match": '"9", "2"'})

    assert missing.status == 409  # * means "it exists"
    assert exists.status == 200
    assert listed.status == 200


# -- profiles and namespaces (issue 17.1) ----------------------------------------------------

PREFS = {"scope": "session", "schema": PREFS_SCHEMA}
BAR = {"namespace": "bar"}


def test_a_namespace_without_its_own_profile_uses_the_one_defined_without_a_namespace(
    api: Call,
) -> None:
    # Given the app's default profile defined once, without a namespace (a JSON one)
    api("PUT", "/v1/profiles/default", body=PREFS)

    # When a session of namespace bar writes its scratchpad as JSON
    patched = api(
        "PATCH",
        "/v1/working-memory/chat-1/scratchpad",
        query=BAR,
        body={"content": {"name": "Ada"}},
    )
    seen = api("GET", "/v1/profiles/default", query=BAR)

    # Then bar uses the shared profile, and says where it comes from
    assert patched.status == 200, patched.body
    assert patched.body["content"] == {"name": "Ada"}
    assert seen.body["format"] == "json"
    assert seen.body["namespace"] == "default"
    assert api("GET", "/v1/profiles/default").body["namespace"] == "default"


def test_a_namespaces_own_profile_wins_and_listing_shows_the_default_that_applies(
    api: Call,
) -> None:
    api("PUT", "/v1/profiles/default", body=PREFS)
    api("PUT", "/v1/profiles/notes", body=NOTES)
    api("PUT", "/v1/profiles/notes", query=BAR, body={"format": "text"})

    listed = api("GET", "/v1/profiles", query=BAR).body["profiles"]
    own = api("GET", "/v1/profiles/notes", query=BAR).body
    inherited = api("GET", "/v1/profiles/default", query=BAR).body
    written = api(
        "PUT",
        "/v1/working-memory/s/scratchpad",
        query={**BAR, "profile": "notes"},
        body={"content": "plain"},
    )

    assert (own["format"], own["namespace"]) == ("text", "bar")
    assert (inherited["format"], inherited["namespace"], inherited["builtin"]) == (
        "json",
        "default",
        False,
    )
    assert [(p["name"], p["namespace"]) for p in listed] == [
        ("default", "default"),
        ("notes", "bar"),
    ]
    assert written.status == 200
    assert written.body["content"] == "plain"  # bar's text profile, not the markdown template


def test_a_profile_defined_nowhere_is_still_a_404_in_any_namespace(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", query={"namespace": "team-a"}, body=NOTES)

    assert api("GET", "/v1/profiles/notes", query=BAR).status == 404
    assert api("PUT", "/v1/working-memory/s2", query=BAR, body={"profile": "notes"}).status == 404


def test_deleting_a_profile_sessions_name_leaves_them_on_the_default_profile(api: Call) -> None:
    # Given a session that uses the prefs profile, with a scratchpad
    api("PUT", "/v1/profiles/prefs", body=PREFS)
    api("PUT", "/v1/working-memory/chat-1", body={"profile": "prefs", "messages": []})
    api("PUT", "/v1/working-memory/chat-1/scratchpad", body={"content": {"name": "Ada"}})

    # When the profile is deleted
    deleted = api("DELETE", "/v1/profiles/prefs")

    # Then every write to the session still works, on the default profile's terms
    message = {"role": "user", "content": "hello"}
    appended = api("POST", "/v1/working-memory/chat-1/messages", body={"messages": [message]})
    put = api("PUT", "/v1/working-memory/chat-1", body={"messages": [message], "data": {"k": 1}})
    pad = api("PUT", "/v1/working-memory/chat-1/scratchpad", body={"content": "free text"})
    read = api("GET", "/v1/working-memory/chat-1").body
    cleared = api("PATCH", "/v1/working-memory/chat-1", body={"profile": None})
    assert deleted.status == 200
    assert appended.status == 201, appended.body
    assert put.status == 200, put.body
    assert pad.status == 200, pad.body
    assert read["profile"] == "prefs"  # its choice is kept: a prefs made again applies again
    assert read["scratchpad"]["profile"] == "default"
    assert read["scratchpad"]["content"] == "free text"
    assert cleared.status == 200, cleared.body
    # And a request that names the missing profile itself is still told it does not exist
    named = api("PUT", "/v1/working-memory/chat-2", body={"profile": "prefs", "messages": []})
    assert named.status == 404
