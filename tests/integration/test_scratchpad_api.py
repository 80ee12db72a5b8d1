"""The scratchpad routes through the real handler on moto: formats, merges, limits, scopes."""

from __future__ import annotations

import pytest

from tests.conftest import LambdaContextStub
from tests.integration.conftest import Call

pytestmark = pytest.mark.integration

PAD = "/v1/working-memory/s1/scratchpad"
USER_PAD = "/v1/users/u1/scratchpad"
SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "preferences": {
            "type": "object",
            "properties": {"theme": {"enum": ["dark", "light"]}},
        },
        "tags": {"type": "array", "items": {"type": "string"}},
    },
}


@pytest.fixture
def json_profile(api: Call) -> str:
    assert api("PUT", "/v1/profiles/prefs", body={"schema": SCHEMA}).status == 200
    return "prefs"


def test_an_unwritten_scratchpad_reads_as_empty_with_the_template(api: Call) -> None:
    # Given a markdown profile and a session that does not exist yet
    api("PUT", "/v1/profiles/notes", body={"template": "# Notes\n- goal:"})

    # When its scratchpad is read
    response = api("GET", PAD, query={"profile": "notes"})

    # Then it is empty, version 0, and shows the template
    assert response.status == 200
    assert response.body["content"] is None
    assert response.body["version"] == 0
    assert response.body["template"] == "# Notes\n- goal:"
    assert response.headers["ETag"] == '"0"'


def test_put_replaces_and_get_returns_it_with_the_new_etag(api: Call) -> None:
    api("PUT", PAD, body={"content": "first"})

    put = api("PUT", PAD, body={"content": "second"})
    got = api("GET", PAD)

    assert put.status == 200
    assert got.body["content"] == "second"
    assert got.body["version"] == 2
    assert got.headers["ETag"] == '"2"'


def test_text_patches_append_on_a_new_line(api: Call) -> None:
    api("PATCH", PAD, body={"content": "likes tea"})
    response = api("PATCH", PAD, body={"content": "hates coffee"})

    assert response.body["content"] == "likes tea\nhates coffee"


def test_markdown_patches_append_after_a_blank_line(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"format": "markdown"})
    api("PATCH", PAD, query={"profile": "notes"}, body={"content": "# Notes"})
    response = api("PATCH", PAD, body={"content": "- tea"})  # the session now names the profile

    assert response.body["content"] == "# Notes\n\n- tea"
    assert response.body["profile"] == "notes"


def test_json_patches_deep_merge_delete_nulls_and_union_arrays(
    api: Call, json_profile: str
) -> None:
    q = {"profile": json_profile}
    api("PUT", PAD, query=q, body={"content": {"name": "Ada", "age": 36, "tags": ["math"]}})

    response = api(
        "PATCH",
        PAD,
        query=q,
        body={"content": {"age": None, "preferences": {"theme": "dark"}, "tags": ["math", "go"]}},
    )

    assert response.status == 200
    assert response.body["content"] == {
        "name": "Ada",
        "preferences": {"theme": "dark"},
        "tags": ["math", "go"],
    }


def test_array_merge_replace_replaces_arrays(api: Call) -> None:
    api("PUT", "/v1/profiles/r", body={"format": "json", "array_merge": "replace"})
    api("PUT", PAD, query={"profile": "r"}, body={"content": {"tags": ["a", "b"]}})

    response = api("PATCH", PAD, body={"content": {"tags": ["c"]}})

    assert response.body["content"] == {"tags": ["c"]}


def test_prototype_keys_are_dropped_at_every_depth(api: Call) -> None:
    api("PUT", "/v1/profiles/j", body={"format": "json"})
    poisoned = {
        "__proto__": {"admin": True},
        "a": {"constructor": {"x": 1}, "b": [{"prototype": 1, "c": 2}]},
    }

    response = api("PATCH", PAD, query={"profile": "j"}, body={"content": poisoned})

    assert response.body["content"] == {"a": {"b": [{"c": 2}]}}


def test_a_schema_violation_is_422_naming_the_field_and_changes_nothing(
    api: Call, json_profile: str
) -> None:
    q = {"profile": json_profile}
    api("PUT", PAD, query=q, body={"content": {"name": "Ada"}})

    response = api("PATCH", PAD, query=q, body={"content": {"preferences": {"theme": "neon"}}})

    assert response.status == 422
    assert response.body["code"] == "schema_violation"
    assert response.body["errors"][0]["field"] == "content.preferences.theme"
    stored = api("GET", PAD, query=q)
    assert stored.body["content"] == {"name": "Ada"}
    assert stored.body["version"] == 1


def test_content_that_no_longer_fits_a_changed_schema_is_reported_on_read(
    api: Call, json_profile: str
) -> None:
    # Given content valid under the first schema
    api("PUT", PAD, query={"profile": json_profile}, body={"content": {"age": 36}})
    # When the schema changes under it
    stricter = {**SCHEMA, "properties": {**SCHEMA["properties"], "age": {"type": "string"}}}
    api("PUT", f"/v1/profiles/{json_profile}", body={"schema": stricter})

    response = api("GET", PAD)

    # Then the read succeeds and names the problem
    assert response.status == 200
    assert response.body["content"] == {"age": 36}
    assert response.body["problems"][0]["field"] == "content.age"


def test_a_read_only_profile_refuses_writes_with_403(api: Call) -> None:
    api("PUT", "/v1/profiles/ro", body={"read_only": True})
    q = {"profile": "ro"}

    statuses = [
        api("PUT", PAD, query=q, body={"content": "x"}).status,
        api("PATCH", PAD, query=q, body={"content": "x"}).status,
        api("DELETE", PAD, query=q).status,
    ]

    assert statuses == [403, 403, 403]
    assert api("GET", PAD, query=q).status == 200


def test_content_over_max_tokens_is_413_and_changes_nothing(api: Call) -> None:
    api("PUT", "/v1/profiles/small", body={"max_tokens": 10})
    q = {"profile": "small"}
    api("PUT", PAD, query=q, body={"content": "short note"})

    response = api("PATCH", PAD, query=q, body={"content": "word " * 50})

    assert response.status == 413
    assert response.body["code"] == "too_large"
    assert api("GET", PAD, query=q).body["content"] == "short note"


def test_if_match_with_a_stale_version_is_409_and_with_the_current_one_succeeds(
    api: Call,
) -> None:
    etag = api("PUT", PAD, body={"content": "v1"}).headers["ETag"]
    api("PATCH", PAD, body={"content": "v2"})

    stale = api("PATCH", PAD, body={"content": "lost"}, headers={"If-Match": etag})
    current = api("GET", PAD).headers["ETag"]
    fresh = api("PATCH", PAD, body={"content": "v3"}, headers={"If-Match": current})

    assert stale.status == 409
    assert fresh.status == 200
    assert fresh.body["content"] == "v1\nv2\nv3"


def test_if_match_zero_creates_only_when_nothing_was_written(api: Call) -> None:
    created = api("PUT", PAD, body={"content": "x"}, headers={"If-Match": '"0"'})
    again = api("PUT", PAD, body={"content": "y"}, headers={"If-Match": '"0"'})

    assert created.status == 200
    assert again.status == 409


def test_delete_clears_the_content_and_the_version_keeps_growing(api: Call) -> None:
    api("PUT", PAD, body={"content": "x"})

    cleared = api("DELETE", PAD)
    got = api("GET", PAD)

    assert cleared.status == 200
    assert got.body["content"] is None
    assert got.body["version"] == 2


def test_a_json_scratchpad_refuses_text_and_a_text_one_refuses_objects(
    api: Call, json_profile: str
) -> None:
    text_into_json = api("PATCH", PAD, query={"profile": json_profile}, body={"content": "x"})
    object_into_text = api("PATCH", "/v1/working-memory/s2/scratchpad", body={"content": {"a": 1}})

    assert text_into_json.status == 422
    assert text_into_json.body["errors"][0]["field"] == "content"
    assert object_into_text.status == 422


def test_render_prompt_shows_the_template_while_empty_then_the_content(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"template": "# Notes\n- goal:"})
    q = {"profile": "notes", "render": "prompt"}

    empty = api("GET", PAD, query=q)
    api("PUT", PAD, query={"profile": "notes"}, body={"content": "# Notes\n- goal: ship"})
    filled = api("GET", PAD, query=q)

    assert empty.body["prompt"].startswith("<working_memory>\n# Notes\n- goal:\n</working_memory>")
    assert "update_working_memory" in empty.body["prompt"]
    assert "- goal: ship" in filled.body["prompt"]


def test_render_prompt_shows_the_schema_for_a_json_profile(api: Call, json_profile: str) -> None:
    response = api("GET", PAD, query={"profile": json_profile, "render": "prompt"})

    assert '"preferences"' in response.body["prompt"]


def test_user_scope_shares_one_scratchpad_across_sessions_and_the_user_path(api: Call) -> None:
    api("PUT", "/v1/profiles/me", body={"scope": "user", "format": "json"})
    q = {"profile": "me", "user_id": "u1"}

    api("PATCH", "/v1/working-memory/s1/scratchpad", query=q, body={"content": {"a": 1}})
    api("PATCH", "/v1/working-memory/s2/scratchpad", query=q, body={"content": {"b": 2}})
    via_user = api("GET", USER_PAD, query={"profile": "me"})

    assert via_user.status == 200
    assert via_user.body["scope"] == "user"
    assert via_user.body["content"] == {"a": 1, "b": 2}


def test_a_session_remembers_its_user_for_user_scoped_pads(api: Call) -> None:
    api("PUT", "/v1/profiles/me", body={"scope": "user", "format": "text"})
    api("PUT", PAD, query={"profile": "me", "user_id": "u1"}, body={"content": "tea"})

    response = api("GET", PAD)  # neither profile nor user named: both come from the session

    assert response.body["content"] == "tea"
    assert response.body["user_id"] == "u1"


def test_user_scope_without_a_user_is_422_naming_user_id(api: Call) -> None:
    api("PUT", "/v1/profiles/me", body={"scope": "user"})

    response = api("PATCH", PAD, query={"profile": "me"}, body={"content": "x"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "user_id"


def test_the_user_path_with_a_session_scoped_profile_is_422_naming_session_id(
    api: Call,
) -> None:
    response = api("GET", USER_PAD)

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "session_id"


def test_a_session_of_another_user_is_403(api: Call) -> None:
    api("PUT", PAD, query={"user_id": "u1"}, body={"content": "mine"})

    response = api("GET", PAD, query={"user_id": "u2"})

    assert response.status == 403


def test_naming_another_profile_than_the_sessions_is_422(api: Call) -> None:
    api("PUT", "/v1/profiles/notes", body={"format": "markdown"})
    api("PUT", PAD, query={"profile": "notes"}, body={"content": "x"})

    response = api("GET", PAD, query={"profile": "default"})

    assert response.status == 422
    assert response.body["errors"][0]["field"] == "profile"


def test_an_unknown_profile_is_404(api: Call) -> None:
    response = api("GET", PAD, query={"profile": "ghost"})

    assert response.status == 404


def test_namespaces_keep_same_named_sessions_apart(api: Call) -> None:
    api("PUT", PAD, query={"namespace": "a"}, body={"content": "in a"})

    other = api("GET", PAD, query={"namespace": "b"})
    same = api("GET", PAD, query={"namespace": "a"})

    assert other.body["content"] is None
    assert same.body["content"] == "in a"


def test_scope_in_the_body_is_used_and_a_conflict_with_the_query_is_422(api: Call) -> None:
    api("PUT", PAD, body={"content": "x", "namespace": "a"})

    in_body = api("GET", PAD, query={"namespace": "a"})
    conflict = api("PUT", PAD, query={"namespace": "b"}, body={"content": "y", "namespace": "a"})

    assert in_body.body["content"] == "x"
    assert conflict.status == 422
    assert conflict.body["errors"][0]["field"] == "namespace"


def test_ids_with_hashes_cannot_reach_other_keys(api: Call) -> None:
    # The session `a#b`, as API Gateway delivers it: the path decoded.
    api("PUT", "/v1/working-memory/a#b/scratchpad", body={"content": "hash id"})

    assert api("GET", "/v1/working-memory/a#b/scratchpad").body["content"] == "hash id"
    assert api("GET", "/v1/working-memory/a/scratchpad").body["content"] is None


def test_the_user_path_replaces_and_clears_a_user_scratchpad(api: Call) -> None:
    api("PUT", "/v1/profiles/me", body={"scope": "user", "format": "markdown"})
    q = {"profile": "me"}

    put = api("PUT", USER_PAD, query=q, body={"content": "# Ada"})
    cleared = api("DELETE", USER_PAD, query=q)
    got = api("GET", USER_PAD, query=q)

    assert put.status == 200
    assert put.body["content"] == "# Ada"
    assert cleared.status == 200
    assert got.body["content"] is None
    assert got.body["version"] == 2


def test_reads_report_the_token_count_counted_when_written(api: Call) -> None:
    written = api("PUT", PAD, body={"content": "Ada likes green tea and long walks."})

    got = api("GET", PAD)

    assert written.body["tokens"] > 0
    assert got.body["tokens"] == written.body["tokens"]
    assert got.body["max_tokens"] == 4000


class _NearTimeout(LambdaContextStub):
    """Lambda's context of an invocation with `remaining_ms` left."""

    def __init__(self, remaining_ms: int) -> None:
        self.remaining_ms = remaining_ms

    def get_remaining_time_in_millis(self) -> int:
        return self.remaining_ms


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", PAD, {"content": "x"}),
        ("PATCH", PAD, {"content": "x"}),
        ("PUT", "/v1/profiles/late", {"format": "text"}),
        ("PUT", "/v1/working-memory/s1", {"messages": [{"role": "user", "content": "hi"}]}),
    ],
)
def test_a_write_whose_deadline_has_passed_is_503_with_retry_after_and_nothing_written(
    dynamodb_table: str, api: Call, method: str, path: str, body: dict
) -> None:
    import json

    from memkit.config import ApiSettings
    from memkit.errors import UNAVAILABLE_RETRY_AFTER_SECONDS
    from memkit.handlers.api import make_lambda_handler
    from memkit.handlers.http import ANSWER_MARGIN_SECONDS
    from memkit.handlers.wiring import api_services
    from memkit.store.dynamodb import DynamoStore
    from tests.events import http_event

    # Given an invocation with less time left than it needs to answer after its last request
    settings = ApiSettings(table_name=dynamodb_table, region="us-east-1")
    handler = make_lambda_handler(lambda: api_services(DynamoStore(settings), settings))
    context = _NearTimeout(int(ANSWER_MARGIN_SECONDS * 1000) - 1)

    # When it is asked to write
    result = handler(http_event(method, path, body=body), context)

    # Then it refuses with 503 and Retry-After, and nothing was written
    assert result["statusCode"] == 503
    assert result["headers"]["Retry-After"] == str(UNAVAILABLE_RETRY_AFTER_SECONDS)
    assert json.loads(result["body"])["code"] == "unavailable"
    assert api("GET", PAD).body["version"] == 0
    assert api("GET", "/v1/profiles/late").status == 404
    assert api("GET", "/v1/working-memory/s1").status == 404
